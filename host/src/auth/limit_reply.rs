//! What a key over its limit gets back: the 429, the `api:limit_reached`
//! event with its audit record (once per key, limit and window), and the
//! `X-RateLimit-*` headers every counted response carries. Shared by the chat
//! routes, the policy check and the admin reads.

use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::json;

use super::AuthContext;
use super::limits::Decision;
use crate::error::{ChatError, text};
use gatehouse_store::audit::{Audit, category, kind, outcome};
use gatehouse_store::model::{AuditEntry, Severity};
use gatehouse_store::records::OutboxEvent;

pub fn rate_limit_error(d: &Decision) -> ChatError {
    let Some(x) = &d.exceeded else {
        return ChatError::internal();
    };
    let mut e = ChatError::new(
        StatusCode::TOO_MANY_REQUESTS,
        text::RATE_LIMITED,
        format!("this API key reached its {} limit of {} requests; retry after {} s", x.window.name(), x.limit, x.retry_after_secs),
    )
    .with("reset_time", json!(crate::time::iso(x.reset_at)));
    e.retry_after = Some(x.retry_after_secs);
    e
}

/// `api:limit_reached` and its audit record, once per key, limit and window.
pub fn limit_reached(ctx: &AuthContext, d: &Decision) -> (Vec<OutboxEvent>, Vec<AuditEntry>) {
    let Some(x) = d.exceeded.as_ref().filter(|x| x.first) else {
        return (Vec::new(), Vec::new());
    };
    let event = OutboxEvent::new(
        "api:limit_reached",
        json!({
            "apiKeyId": ctx.key.id,
            "userId": ctx.key.user_id,
            "limit": x.window.name(),
            "limitValue": x.limit,
            "resetTime": crate::time::iso(x.reset_at),
        }),
    );
    let audit =
        Audit::new(kind::RATE_LIMIT, category::USAGE_CONTROL, format!("API key {} reached its {} limit", ctx.key.id, x.window.name()))
            .severity(Severity::Warning)
            .outcome(outcome::BLOCKED)
            .meta("operation", "limit_reached")
            .meta("apiKeyId", ctx.key.id.clone())
            .meta("limit", x.window.name())
            .build();
    (vec![event], vec![audit])
}

/// `X-RateLimit-*` on every counted response.
pub fn with_limit_headers(mut resp: Response, d: &Decision) -> Response {
    let h = resp.headers_mut();
    h.insert("x-ratelimit-limit", HeaderValue::from(d.limit));
    h.insert("x-ratelimit-remaining", HeaderValue::from(d.remaining));
    h.insert("x-ratelimit-reset", HeaderValue::from(d.reset));
    resp
}
