//! The error formats (docs/api.md#errors), built in one place.
//!
//! * [`ChatError`]: the flat format of the chat routes,
//!   `{success: false, error, message, request_id}`.
//! * [`AdminError`]: the nested format of every other route,
//!   `{success: false, error: {code, message, retryAfter?}}`.
//!
//! Handlers return `Result<_, ChatError>` or `Result<_, AdminError>`; the
//! request id comes from the task-local set by the request-id middleware.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use crate::request_id;
use gatehouse_store::StoreError;

/// The short `error` texts of the flat format. The first seven are the
/// contract's originals, verbatim; the rest are ours; all are stable.
pub mod text {
    pub const INVALID_API_KEY: &str = "Invalid API key";
    pub const ALL_MODELS_FAILED: &str = "All model attempts failed";
    pub const INTERNAL: &str = "Internal server error";
    pub const INDEX_REQUIRED: &str = "Index required";
    pub const INVALID_MESSAGES: &str = "Invalid messages";
    pub const ACCESS_DENIED: &str = "Access denied";
    pub const RATE_LIMITED: &str = "Rate limit exceeded";
    pub const INVALID_REQUEST: &str = "Invalid request";
    pub const PAYLOAD_TOO_LARGE: &str = "Payload too large";
    pub const REQUEST_TIMEOUT: &str = "Request timeout";
    pub const IDEMPOTENCY_REUSE: &str = "Idempotency key reuse";
    pub const IN_PROGRESS: &str = "Request in progress";
    pub const NOT_FOUND: &str = "Not found";
    pub const UNKNOWN_INDEX: &str = "Unknown index";
    pub const RETRIEVAL_FAILED: &str = "Retrieval failed";
    pub const UNKNOWN_MODEL: &str = "Unknown model";
    pub const UNKNOWN_POLICY: &str = "Unknown policy";
    pub const SERVER_BUSY: &str = "Server busy";
    pub const DATABASE_UNAVAILABLE: &str = "Database unavailable";
}

/// An error in the flat format of the chat routes.
#[derive(Debug)]
pub struct ChatError {
    pub status: StatusCode,
    pub error: &'static str,
    pub message: String,
    /// Extra top-level fields (`attempts`, `reset_time`).
    pub extra: Map<String, Value>,
    /// `Retry-After` seconds, for 429s.
    pub retry_after: Option<u64>,
}

impl ChatError {
    pub fn new(status: StatusCode, error: &'static str, message: impl Into<String>) -> Self {
        ChatError { status, error, message: message.into(), extra: Map::new(), retry_after: None }
    }

    pub fn invalid_key(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, text::INVALID_API_KEY, message)
    }

    pub fn access_denied(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, text::ACCESS_DENIED, message)
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, text::INVALID_REQUEST, message)
    }

    pub fn invalid_messages(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, text::INVALID_MESSAGES, message)
    }

    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            text::INTERNAL,
            "the gateway failed unexpectedly; the request id identifies it in the server log",
        )
    }

    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.extra.insert(key.to_owned(), value);
        self
    }

    /// The JSON body, as stored for idempotent replay.
    pub fn body(&self) -> Value {
        let mut body = Map::new();
        body.insert("success".into(), Value::Bool(false));
        body.insert("error".into(), Value::String(self.error.into()));
        body.insert("message".into(), Value::String(self.message.clone()));
        if let Some(id) = request_id::current() {
            body.insert("request_id".into(), Value::String(id));
        }
        for (k, v) in &self.extra {
            body.insert(k.clone(), v.clone());
        }
        Value::Object(body)
    }
}

/// Seconds a client is told to wait while the database is unreachable: the
/// pool retries a connection on every call, so a short wait is enough to see it back.
pub const DATABASE_RETRY_AFTER_SECS: u64 = 2;

/// What a client is told while the database is unreachable (the cause stays in the log).
const DATABASE_UNAVAILABLE_MESSAGE: &str =
    "the gateway cannot reach its database; nothing was recorded for this request, retry after Retry-After seconds";

impl From<StoreError> for ChatError {
    fn from(e: StoreError) -> Self {
        if let StoreError::Unavailable(cause) = &e {
            tracing::warn!(error = %cause, "database unavailable on a chat route");
            let mut out = ChatError::new(StatusCode::SERVICE_UNAVAILABLE, text::DATABASE_UNAVAILABLE, DATABASE_UNAVAILABLE_MESSAGE);
            out.retry_after = Some(DATABASE_RETRY_AFTER_SECS);
            return out;
        }
        tracing::error!(error = %e, "store error on a chat route");
        ChatError::internal()
    }
}

impl IntoResponse for ChatError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = self.status.as_u16(), error = self.error, message = %self.message, "chat error");
        }
        let mut resp = (self.status, axum::Json(self.body())).into_response();
        if let Some(secs) = self.retry_after {
            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

/// Codes of the nested format. The first three are the contract's originals.
pub mod code {
    pub const UNAUTHORIZED: &str = "UNAUTHORIZED";
    pub const INSUFFICIENT_PERMISSIONS: &str = "INSUFFICIENT_PERMISSIONS";
    pub const RATE_LIMIT_EXCEEDED: &str = "RATE_LIMIT_EXCEEDED";
    pub const VALIDATION_ERROR: &str = "VALIDATION_ERROR";
    pub const NOT_FOUND: &str = "NOT_FOUND";
    pub const CONFLICT: &str = "CONFLICT";
    pub const PAYLOAD_TOO_LARGE: &str = "PAYLOAD_TOO_LARGE";
    pub const REQUEST_TIMEOUT: &str = "REQUEST_TIMEOUT";
    pub const INTERNAL_ERROR: &str = "INTERNAL_ERROR";
    pub const SERVER_BUSY: &str = "SERVER_BUSY";
    pub const DATABASE_UNAVAILABLE: &str = "DATABASE_UNAVAILABLE";
}

/// An error in the nested format.
#[derive(Debug)]
pub struct AdminError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub retry_after: Option<u64>,
}

impl AdminError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        AdminError { status, code, message: message.into(), retry_after: None }
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, code::UNAUTHORIZED, message)
    }

    pub fn forbidden() -> Self {
        Self::new(StatusCode::FORBIDDEN, code::INSUFFICIENT_PERMISSIONS, "this route needs an admin API key")
    }

    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code::VALIDATION_ERROR, message)
    }

    /// A 400 whose code names the parameter: `INVALID_<PARAM>`.
    pub fn invalid_param(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code::NOT_FOUND, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code::CONFLICT, message)
    }

    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            code::INTERNAL_ERROR,
            "the gateway failed unexpectedly; the request id identifies it in the server log",
        )
    }
}

impl From<StoreError> for AdminError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => AdminError::not_found(format!("{what} not found")),
            StoreError::Conflict(msg) => AdminError::conflict(msg),
            StoreError::Backend(msg) => {
                tracing::error!(error = %msg, "store error on an admin route");
                AdminError::internal()
            }
            StoreError::Unavailable(cause) => {
                tracing::warn!(error = %cause, "database unavailable on an admin route");
                let mut out = AdminError::new(StatusCode::SERVICE_UNAVAILABLE, code::DATABASE_UNAVAILABLE, DATABASE_UNAVAILABLE_MESSAGE);
                out.retry_after = Some(DATABASE_RETRY_AFTER_SECS);
                out
            }
        }
    }
}

/// The nested error body, as sent by [`AdminError`].
#[derive(Debug, Serialize, ToSchema)]
pub struct NestedError {
    /// Always `false`.
    pub success: bool,
    pub error: NestedErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NestedErrorDetail {
    /// `UNAUTHORIZED`, `INSUFFICIENT_PERMISSIONS`, `RATE_LIMIT_EXCEEDED`, `VALIDATION_ERROR`,
    /// `NOT_FOUND`, `CONFLICT`, `PAYLOAD_TOO_LARGE`, `INTERNAL_ERROR`, `DATABASE_UNAVAILABLE`, or `INVALID_<PARAMETER>`.
    #[schema(example = "VALIDATION_ERROR")]
    pub code: String,
    pub message: String,
    /// Seconds to wait (429, and 503 `DATABASE_UNAVAILABLE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
}

/// The flat error body of `POST /chat/completions`, as sent by [`ChatError`].
#[derive(Debug, Serialize, ToSchema)]
pub struct FlatError {
    /// Always `false`.
    pub success: bool,
    /// A short stable text (docs/api.md#errors), e.g. `Invalid API key`, `All model attempts failed`.
    #[schema(example = "Invalid request")]
    pub error: String,
    /// What exactly was wrong and how to fix it.
    pub message: String,
    /// `req-…`
    pub request_id: Option<String>,
    /// Every attempt of an exhausted chain (429/502 `All model attempts failed`).
    pub attempts: Option<Vec<ChainAttempt>>,
    /// When the exhausted limit resets (429 `Rate limit exceeded`), ISO 8601.
    pub reset_time: Option<String>,
}

/// One attempt of the chain, as error bodies and `metadata.failover` list it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChainAttempt {
    pub model: String,
    /// `success`, `failed` or `skipped`.
    pub status: String,
    pub latency_ms: u64,
    /// `timeout`, `server_error`, `rate_limit`, `client_error`, `policy`, `cooldown`.
    pub reason: Option<String>,
    pub message: Option<String>,
}

/// OpenAI's error body, on `/api/external/v1/*`.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiError {
    pub error: OpenAiErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiErrorDetail {
    pub message: String,
    /// `invalid_request_error`, `authentication_error`, `permission_error`, `rate_limit_error`, `api_error`, ...
    #[serde(rename = "type")]
    pub kind: String,
    pub param: Option<String>,
    pub code: Option<String>,
    pub attempts: Option<Vec<ChainAttempt>>,
    pub request_id: Option<String>,
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        let body = NestedError {
            success: false,
            error: NestedErrorDetail { code: self.code.to_owned(), message: self.message, retry_after: self.retry_after },
        };
        let mut resp = (self.status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

/// Which format a path answers errors in (docs/decisions/routes-and-formats.md: the chat routes are flat,
/// everything else nested).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorFormat {
    Flat,
    Nested,
    /// OpenAI's `{error: {message, type, code}}` on `/api/external/v1/*`.
    OpenAi,
}

impl ErrorFormat {
    pub fn for_path(path: &str) -> Self {
        if path == "/chat/completions" {
            ErrorFormat::Flat
        } else if path.starts_with("/api/external/v1/") {
            ErrorFormat::OpenAi
        } else {
            ErrorFormat::Nested
        }
    }

    /// 401 in this format.
    pub fn unauthorized(self, message: &str) -> Response {
        match self {
            ErrorFormat::Flat => ChatError::invalid_key(message).into_response(),
            ErrorFormat::Nested => AdminError::unauthorized(message).into_response(),
            ErrorFormat::OpenAi => openai_error(StatusCode::UNAUTHORIZED, "invalid_request_error", "invalid_api_key", message),
        }
    }

    /// A transport-level refusal (400 unreadable body, 408 slow body, 413 too
    /// large) in this format, before any handler ran.
    pub fn error(self, status: StatusCode, message: &str) -> Response {
        let (flat, nested, openai) = match status {
            StatusCode::PAYLOAD_TOO_LARGE => (text::PAYLOAD_TOO_LARGE, code::PAYLOAD_TOO_LARGE, "payload_too_large"),
            StatusCode::REQUEST_TIMEOUT => (text::REQUEST_TIMEOUT, code::REQUEST_TIMEOUT, "request_timeout"),
            _ => (text::INVALID_REQUEST, code::VALIDATION_ERROR, "invalid_request"),
        };
        match self {
            ErrorFormat::Flat => ChatError::new(status, flat, message).into_response(),
            ErrorFormat::Nested => AdminError::new(status, nested, message).into_response(),
            ErrorFormat::OpenAi => openai_error(status, "invalid_request_error", openai, message),
        }
    }

    /// 503 with `Retry-After` in this format: the server is at its limit of
    /// concurrent requests (`chat::admission`).
    pub fn busy(self, message: &str, retry_after_secs: u64) -> Response {
        let mut resp = match self {
            // Not through `ChatError::into_response`, which logs every 5xx: a
            // server shedding load would flood its log (the metric counts them).
            ErrorFormat::Flat => {
                let e = ChatError::new(StatusCode::SERVICE_UNAVAILABLE, text::SERVER_BUSY, message);
                (e.status, axum::Json(e.body())).into_response()
            }
            ErrorFormat::Nested => AdminError::new(StatusCode::SERVICE_UNAVAILABLE, code::SERVER_BUSY, message).into_response(),
            // OpenAI's SDKs retry a 503 by themselves and honour `Retry-After`.
            ErrorFormat::OpenAi => openai_error(StatusCode::SERVICE_UNAVAILABLE, "server_error", "server_busy", message),
        };
        resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
        resp
    }

    /// 403 for a route that needs an admin key, in this format.
    pub fn forbidden(self) -> Response {
        match self {
            ErrorFormat::Flat => ChatError::access_denied("this needs an admin API key").into_response(),
            ErrorFormat::Nested => AdminError::forbidden().into_response(),
            ErrorFormat::OpenAi => {
                openai_error(StatusCode::FORBIDDEN, "permission_error", "insufficient_permissions", "this needs an admin API key")
            }
        }
    }
}

/// An error in OpenAI's shape, so OpenAI SDKs raise their usual exceptions.
pub fn openai_error(status: StatusCode, kind: &str, code: &str, message: &str) -> Response {
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
    (status, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_database_is_503_with_retry_after_in_both_formats() {
        let chat = ChatError::from(StoreError::Unavailable("connection refused".into()));
        assert_eq!(chat.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(chat.error, text::DATABASE_UNAVAILABLE);
        assert!(!chat.message.contains("connection refused"), "the cause stays in the log: {}", chat.message);
        let resp = chat.into_response();
        assert_eq!(resp.headers()[header::RETRY_AFTER], DATABASE_RETRY_AFTER_SECS.to_string().as_str());

        let admin = AdminError::from(StoreError::Unavailable("connection refused".into()));
        assert_eq!((admin.status, admin.code), (StatusCode::SERVICE_UNAVAILABLE, code::DATABASE_UNAVAILABLE));
        let resp = admin.into_response();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[header::RETRY_AFTER], DATABASE_RETRY_AFTER_SECS.to_string().as_str());
    }

    #[test]
    fn any_other_storage_failure_stays_500() {
        assert_eq!(ChatError::from(StoreError::Backend("disk".into())).status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(AdminError::from(StoreError::Backend("disk".into())).status, StatusCode::INTERNAL_SERVER_ERROR);
    }
}
