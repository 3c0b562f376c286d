//! `GET /api/admin/usage`: requests and tokens per user and per key.
//! `GET /api/admin/events`: the event outbox (newest last), for operators and tests.
//! Events older than `webhooks.events_retention_days` are pruned once every
//! enabled webhook endpoint is past them (`webhooks::prune_outbox`).

use axum::Json;
use axum::extract::{Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::ok;
use crate::app::AppState;
use crate::auth::Admin;
use crate::error::AdminError;

/// `GET /api/admin/usage`.
#[utoipa::path(
    get, path = "/api/admin/usage", tag = "admin",
    responses((status = 200, description = "`{users, keys}`: rows `{id, requests, promptTokens, completionTokens, totalTokens}`",
               body = crate::api::schema::Success<crate::api::schema::JsonObject>))
)]
pub async fn usage(State(app): State<AppState>, Admin(_): Admin) -> Result<Json<Value>, AdminError> {
    let (users, keys) = app.store.usage_totals().await?;
    let row = |(id, t): &(String, gatehouse_store::records::UsageTotals)| {
        json!({
            "id": id,
            "requests": t.requests,
            "promptTokens": t.prompt_tokens,
            "completionTokens": t.completion_tokens,
            "totalTokens": t.prompt_tokens + t.completion_tokens,
        })
    };
    Ok(ok(json!({
        "users": users.iter().map(row).collect::<Vec<_>>(),
        "keys": keys.iter().map(row).collect::<Vec<_>>(),
    })))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Only events after this sequence number.
    #[serde(default)]
    pub after: u64,
    /// 1 to 1000; default 100.
    #[serde(default = "default_limit")]
    #[param(minimum = 1, maximum = 1000)]
    pub limit: usize,
    /// Only events of this type, e.g. `api:model_failover`.
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
}

fn default_limit() -> usize {
    100
}

/// `GET /api/admin/events`.
#[utoipa::path(
    get, path = "/api/admin/events", tag = "admin", params(EventsQuery),
    responses(
        (status = 200, description = "`[{seq, event: {id, type, created, data}}]`, oldest first", body = crate::api::schema::Success<Vec<crate::api::schema::JsonObject>>),
        (status = 400, description = "Bad parameter (`VALIDATION_ERROR`)", body = crate::error::NestedError),
    )
)]
pub async fn events(
    State(app): State<AppState>,
    Admin(_): Admin,
    q: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, AdminError> {
    let Query(q) = q.map_err(|e| AdminError::validation(e.body_text()))?;
    if !(1..=1000).contains(&q.limit) {
        return Err(AdminError::validation("`limit` must be from 1 to 1000"));
    }
    let mut out = Vec::new();
    let mut after = q.after;
    // Filtering by type may skip many rows; read in pages until the page is full.
    loop {
        let page = app.store.outbox_after(after, 1000).await?;
        let Some((last, _)) = page.last() else { break };
        after = *last;
        for (seq, ev) in page {
            if q.kind.as_deref().is_none_or(|k| k == ev.kind) {
                out.push(json!({"seq": seq, "event": ev}));
                if out.len() == q.limit {
                    return Ok(ok(out));
                }
            }
        }
    }
    Ok(ok(out))
}
