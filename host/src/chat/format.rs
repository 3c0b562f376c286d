//! Wire formats of the two chat routes. The pipeline is the same; only the
//! shape of bodies, frames and errors differs:
//!
//! * `Gatehouse` — `/chat/completions` (docs/api.md#chat-completions: envelope with
//!   `metadata`, typed SSE frames, flat errors);
//! * `OpenAi` — `/api/external/v1/chat/completions`, OpenAI's Chat
//!   Completions shape (`chat.completion`, `chat.completion.chunk` lines,
//!   usage in a last chunk when `stream_options.include_usage` is set, and
//!   `{error: {message, type, param, code}}` errors), so OpenAI SDKs work.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::response::{self, DONE, Meta};
use super::types::Usage;
use crate::error::{ChatError, text};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Gatehouse,
    OpenAi { include_usage: bool },
}

/// OpenAI's error `type` and `code` for one of our errors.
fn openai_kind(e: &ChatError) -> (&'static str, &'static str) {
    match e.status.as_u16() {
        400 | 404 | 405 | 413 | 422 => ("invalid_request_error", "invalid_request"),
        401 => ("authentication_error", "invalid_api_key"),
        403 => ("permission_error", "access_denied"),
        409 => ("conflict_error", "request_in_progress"),
        429 if e.error == text::ALL_MODELS_FAILED => ("rate_limit_error", "all_models_rate_limited"),
        429 => ("rate_limit_error", "rate_limit_exceeded"),
        502 => ("api_error", "all_models_failed"),
        503 if e.error == text::DATABASE_UNAVAILABLE => ("api_error", "database_unavailable"),
        _ => ("api_error", "internal_error"),
    }
}

impl Format {
    /// The JSON body of an error.
    pub fn error_body(self, e: &ChatError) -> Value {
        match self {
            Format::Gatehouse => e.body(),
            Format::OpenAi { .. } => {
                let (kind, code) = openai_kind(e);
                let mut err = json!({
                    "message": format!("{}: {}", e.error, e.message),
                    "type": kind,
                    "param": null,
                    "code": code,
                });
                if let Some(a) = e.extra.get("attempts") {
                    err["attempts"] = a.clone();
                }
                if let Some(id) = crate::request_id::current() {
                    err["request_id"] = json!(id);
                }
                json!({"error": err})
            }
        }
    }

    pub fn error_response(self, e: ChatError) -> Response {
        match self {
            Format::Gatehouse => e.into_response(),
            Format::OpenAi { .. } => {
                let mut resp = (e.status, axum::Json(self.error_body(&e))).into_response();
                if let Some(secs) = e.retry_after {
                    resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
                }
                resp
            }
        }
    }

    /// The 200 body of a non-streaming answer, serialised.
    pub fn completion_body(self, id: &str, created: i64, content: &str, finish: &str, usage: Usage, meta: &Meta) -> String {
        match self {
            Format::Gatehouse => response::completion_body(id, created, content, finish, usage, meta),
            Format::OpenAi { .. } => json!({
                "id": id,
                "object": "chat.completion",
                "created": created,
                "model": meta.served_model,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": null},
                    "logprobs": null,
                    "finish_reason": finish,
                }],
                "usage": {
                    "prompt_tokens": usage.prompt_tokens,
                    "completion_tokens": usage.completion_tokens,
                    "total_tokens": usage.total(),
                },
                "system_fingerprint": null,
                "gatehouse": meta.view(),
            })
            .to_string(),
        }
    }

    /// Frames sent before the first chunk.
    pub fn opening(self, id: &str, created: i64, meta: &Meta) -> Option<String> {
        match self {
            Format::Gatehouse => Some(response::metadata_frame(id, created, meta)),
            Format::OpenAi { .. } => None,
        }
    }

    pub fn chunk(self, id: &str, created: i64, model: &str, content: &str, finish: Option<&str>) -> String {
        match self {
            Format::Gatehouse => response::chunk_frame(id, model, content, finish),
            Format::OpenAi { .. } => {
                let v = json!({
                    "id": id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [{
                        "index": 0,
                        "delta": {"role": "assistant", "content": content},
                        "logprobs": null,
                        "finish_reason": finish,
                    }],
                });
                format!("data: {v}\n\n")
            }
        }
    }

    /// The end of a complete stream.
    pub fn closing(self, id: &str, created: i64, model: &str, usage: Usage) -> String {
        match self {
            Format::Gatehouse => {
                let mut s = response::usage_frame(usage);
                s.push_str(DONE);
                s
            }
            Format::OpenAi { include_usage } => {
                let mut s = String::new();
                if include_usage {
                    let v = json!({
                        "id": id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": {
                            "prompt_tokens": usage.prompt_tokens,
                            "completion_tokens": usage.completion_tokens,
                            "total_tokens": usage.total(),
                        },
                    });
                    s.push_str(&format!("data: {v}\n\n"));
                }
                s.push_str(DONE);
                s
            }
        }
    }

    /// The end of a stream cut by an upstream failure or a policy.
    pub fn failure(self, code: &str, message: &str, request_id: &str) -> String {
        let mut s = match self {
            Format::Gatehouse => response::error_frame(code, message, request_id),
            Format::OpenAi { .. } => {
                let v = json!({"error": {"message": message, "type": "api_error", "param": null, "code": code}});
                format!("data: {v}\n\n")
            }
        };
        s.push_str(DONE);
        s
    }
}

/// A 200 with a JSON body already serialised.
pub fn json_response(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
