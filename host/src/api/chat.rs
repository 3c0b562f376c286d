//! The chat routes: `POST /chat/completions`, OpenAI's
//! `POST /api/external/v1/chat/completions` and `GET /api/external/v1/models`,
//! and the dry run `POST /api/policy/check`. Thin: each hands the body to
//! `chat` with the chat pipeline's own dependencies.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::app::AppState;
use crate::auth::limit_reply::{limit_reached, rate_limit_error, with_limit_headers};
use crate::auth::limits::{BucketSet, effective};
use crate::auth::{AuthContext, Authed};
use crate::chat::admission::{Admitted, Slot};
use crate::chat::format::Format;
use crate::chat::providers::model_permitted;
use crate::chat::request::TimeoutDefaults;
use crate::chat::types::ModelId;
use crate::chat::{input, pipeline};
use crate::error::{AdminError, code};

/// `POST /chat/completions`: the pipeline in the Gatehouse format.
#[utoipa::path(
    post, path = "/chat/completions", tag = "chat", request_body = crate::api::schema::ChatRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "1–255 visible ASCII: a retry returns the first answer")),
    responses(
        (status = 200, description = "The envelope, or with `stream: true` SSE frames `data: {type, data}` \
                                      (`metadata`, `chunk`…, `usage` or `error`) then `data: [DONE]`",
         content((crate::api::schema::ChatCompletion = "application/json"), (String = "text/event-stream"))),
        (status = 400, description = "Invalid request, messages, model, index or policy", body = crate::error::FlatError),
        (status = 403, description = "`Access denied`: key permissions, policy, Prompt Shield or DLP", body = crate::error::FlatError),
        (status = 409, description = "`Request in progress`: the same `Idempotency-Key` is still running", body = crate::error::FlatError),
        (status = 422, description = "`Idempotency key reuse` with a different body", body = crate::error::FlatError),
        (status = 429, description = "`Rate limit exceeded` (`Retry-After`): a rate limit or quota, or the key's concurrency cap \
                                      (`chat.key_share`); or `All model attempts failed` when every attempt was rate-limited",
         body = crate::error::FlatError),
        (status = 502, description = "`All model attempts failed`: the failover chain is exhausted; `attempts` lists each",
         body = crate::error::FlatError),
        (status = 503, description = "`Server busy`: `chat.max_in_flight` requests are being served; retry after `Retry-After` seconds",
         body = crate::error::FlatError),
    )
)]
pub async fn completions(
    State(app): State<AppState>,
    Authed(ctx): Authed,
    Admitted(slot): Admitted,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    serve(app, ctx, slot, headers, body, Format::Gatehouse).await
}

/// `POST /api/external/v1/chat/completions`.
#[utoipa::path(
    post, path = "/api/external/v1/chat/completions", tag = "openai", request_body = crate::api::schema::OpenAiChatRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "1–255 visible ASCII: a retry returns the first answer")),
    responses(
        (status = 200, description = "OpenAI's `chat.completion`, or with `stream: true` `chat.completion.chunk` SSE lines then `data: [DONE]`",
         content((crate::api::schema::OpenAiChatCompletion = "application/json"), (String = "text/event-stream"))),
        (status = 400, description = "Invalid request", body = crate::error::OpenAiError),
        (status = 403, description = "Access denied", body = crate::error::OpenAiError),
        (status = 409, description = "The same `Idempotency-Key` is still running", body = crate::error::OpenAiError),
        (status = 422, description = "`Idempotency-Key` reused with a different body", body = crate::error::OpenAiError),
        (status = 429, description = "Rate limit, quota or the key's concurrency cap, or every attempt was rate-limited", body = crate::error::OpenAiError),
        (status = 502, description = "The failover chain is exhausted", body = crate::error::OpenAiError),
        (status = 503, description = "`server_busy`: `chat.max_in_flight` requests are being served; retry after `Retry-After` seconds",
         body = crate::error::OpenAiError),
    )
)]
pub async fn openai_completions(
    State(app): State<AppState>,
    Authed(ctx): Authed,
    Admitted(slot): Admitted,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    serve(app, ctx, slot, headers, body, Format::OpenAi { include_usage: false }).await
}

/// Both chat routes: the pipeline on a body that arrived, or the body's own
/// error (too large, broken off) in the route's format.
async fn serve(
    app: AppState,
    ctx: AuthContext,
    slot: Slot,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
    format: Format,
) -> Response {
    match body {
        Ok(body) => pipeline::serve(app.chat.clone(), ctx, slot, headers, body, format).await,
        Err(rej) => format.error_response(pipeline::body_error(&rej, app.config().server.max_body_bytes)),
    }
}

/// `GET /api/external/v1/models`: the configured models this key may use, in OpenAI's list shape.
#[utoipa::path(
    get, path = "/api/external/v1/models", tag = "openai",
    responses((status = 200, description = "OpenAI's model list", body = crate::api::schema::OpenAiModelList))
)]
pub async fn openai_models(State(app): State<AppState>, Authed(ctx): Authed) -> Json<Value> {
    let cfg = app.config();
    let mut data: Vec<Value> = Vec::new();
    for (name, p) in &cfg.providers {
        for m in &p.models {
            let Ok(id) = ModelId::parse(m) else { continue };
            if id.provider() == name && model_permitted(&ctx.key.allowed_models, &id) {
                data.push(json!({"id": id.as_str(), "object": "model", "created": 0, "owned_by": name}));
            }
        }
    }
    Json(json!({"object": "list", "data": data}))
}

/// `POST /api/policy/check`: the whole input pipeline (policy, Prompt Shield,
/// PII, DLP) on a chat request body, without calling a model, so `model` and
/// `index` are optional here (checked when given). Metered in the key's chat
/// buckets like a chat request; its refusals are audited (marked `dryRun`),
/// but fire no webhook events and leave no usage or receipt.
#[utoipa::path(
    post, path = "/api/policy/check", tag = "operations", request_body = crate::api::schema::ChatRequest,
    responses(
        (status = 200, description = "The verdicts of every stage that ran; `allowed: false` with `reason` when the request would be refused",
         body = crate::api::schema::PolicyCheck),
        (status = 400, description = "The body is not a valid chat request (`VALIDATION_ERROR`)", body = crate::error::NestedError),
        (status = 403, description = "A model, index or policy this key may not use (`INSUFFICIENT_PERMISSIONS`)",
         body = crate::error::NestedError),
        (status = 429, description = "The key's chat rate limit or quota (`RATE_LIMIT_EXCEEDED`, `Retry-After`)",
         body = crate::error::NestedError),
    )
)]
pub async fn policy_check(State(app): State<AppState>, Authed(ctx): Authed, body: Bytes) -> Response {
    let cfg = app.config();
    let limits = effective(cfg.limits.chat, &ctx.key.limits);
    let defaults = TimeoutDefaults { timeout_ms: cfg.chat.timeout_ms, first_token_timeout_ms: cfg.chat.first_token_timeout_ms };
    drop(cfg);
    // The chat buckets: a dry run costs what a request costs, so it cannot be
    // used to probe the shield without limit.
    let decision = app.limiter.check(BucketSet::Chat, &ctx.key.id, limits, chrono::Utc::now());
    let resp = if decision.exceeded.is_some() {
        let (events, audit) = limit_reached(&ctx, &decision);
        if (!events.is_empty() || !audit.is_empty())
            && let Err(e) = app.store.enqueue_events(events, audit).await
        {
            tracing::error!(error = %e, "recording api:limit_reached failed");
        }
        let e = rate_limit_error(&decision);
        let mut nested = AdminError::new(e.status, code::RATE_LIMIT_EXCEEDED, e.message);
        nested.retry_after = e.retry_after;
        nested.into_response()
    } else {
        match input::dry_run(&app.chat, &ctx, &body, defaults).await {
            Ok(v) => Json(v).into_response(),
            Err(e) => e.into_response(),
        }
    };
    with_limit_headers(resp, &decision)
}
