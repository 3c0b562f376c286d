//! `GET /api/admin/usage`: requests and tokens per user, key and model, with
//! filters, a time range and a page of the per-request ledger.
//! `GET /api/admin/usage/series`: the same, summed per hour or per day.
//! `GET /api/admin/events`: the event outbox (newest last), for operators and tests.
//! Events older than `webhooks.events_retention_days` are pruned once every
//! enabled webhook endpoint is past them (`webhooks::prune_outbox`).
//!
//! Without a filter, the user and key rows are the running totals (all
//! history); with any filter they are summed from the ledger, which starts
//! when the store first ran a build that writes it (docs/decisions/admin-api.md).

use axum::Json;
use axum::extract::{Query, State};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use super::ok;
use crate::api::list_params::{Params, check_known, int_param, parse_date};
use crate::app::AppState;
use crate::auth::{Admin, AdminOrTenant, AuthContext};
use crate::error::AdminError;
use crate::time::iso;
use gatehouse_store::StoreError;
use gatehouse_store::records::UsageTotals;
use gatehouse_store::usage_ledger::{Bucket, LedgerFilter, LedgerRow, UsageLedger};

const FILTERS: &[&str] = &["userId", "keyId", "groupId", "model", "from", "to"];
const USAGE_PARAMS: &[&str] = &["userId", "keyId", "groupId", "model", "from", "to", "limit", "cursor"];
const SERIES_PARAMS: &[&str] = &["userId", "keyId", "groupId", "model", "from", "to", "bucket"];
/// Most buckets one series answers (93 days of hours).
const MAX_BUCKETS: i64 = 93 * 24;

fn totals_view(t: &UsageTotals) -> Value {
    json!({
        "requests": t.requests,
        "promptTokens": t.prompt_tokens,
        "completionTokens": t.completion_tokens,
        "totalTokens": t.prompt_tokens + t.completion_tokens,
    })
}

fn row_view((id, t): &(String, UsageTotals)) -> Value {
    let mut v = totals_view(t);
    v["id"] = json!(id);
    v
}

fn ledger_view(r: &LedgerRow) -> Value {
    json!({
        "at": iso(r.at),
        "userId": r.user_id,
        "keyId": r.key_id,
        "groupId": r.group_id,
        "model": r.model,
        "requestId": r.request_id,
        "promptTokens": r.prompt_tokens,
        "completionTokens": r.completion_tokens,
        "totalTokens": r.prompt_tokens + r.completion_tokens,
    })
}

fn ledger(app: &AppState) -> Result<&dyn UsageLedger, AdminError> {
    app.store.usage_ledger().ok_or_else(|| AdminError::validation("this store keeps no usage ledger"))
}

/// The filters of both usage routes; each bad one is a 400 naming it.
fn filter(p: &Params) -> Result<LedgerFilter, AdminError> {
    let text = |name: &str| -> Result<Option<String>, AdminError> {
        match p.get(name).map(|s| s.trim()) {
            None | Some("") => Ok(None),
            Some(s) if s.len() > 200 => Err(AdminError::validation(format!("`{name}` is longer than 200 characters"))),
            Some(s) => Ok(Some(s.to_owned())),
        }
    };
    let date = |name: &str, code: &'static str| -> Result<Option<DateTime<Utc>>, AdminError> {
        match p.get(name) {
            None => Ok(None),
            Some(s) => parse_date(s, false)
                .map(Some)
                .ok_or_else(|| AdminError::invalid_param(code, format!("`{name}` is not an ISO 8601 date: `{s}`"))),
        }
    };
    let f = LedgerFilter {
        user_id: text("userId")?,
        key_id: text("keyId")?,
        group_id: text("groupId")?,
        model: text("model")?,
        from: date("from", "INVALID_FROM")?,
        to: date("to", "INVALID_TO")?,
    };
    if let (Some(from), Some(to)) = (f.from, f.to)
        && from > to
    {
        return Err(AdminError::invalid_param("INVALID_DATE_RANGE", "`from` is after `to`"));
    }
    Ok(f)
}

/// A tenant admin key reads its own group's usage only, and says so: every
/// call names `groupId=<its group>` (an admin key reads anything).
fn own_group_only(ctx: &AuthContext, p: &Params) -> Result<(), AdminError> {
    let Some(own) = ctx.tenant_group().filter(|_| !ctx.is_admin()) else { return Ok(()) };
    if p.get("groupId").map(|g| g.trim()) == Some(own) {
        return Ok(());
    }
    Err(AdminError::new(
        axum::http::StatusCode::FORBIDDEN,
        crate::error::code::INSUFFICIENT_PERMISSIONS,
        format!("a tenant admin key reads only its own group's usage: add `groupId={own}`"),
    ))
}

/// The query parameters of `GET /api/admin/usage`, for the OpenAPI document
/// (the handler reads them from a map so that each bad one gets its own code).
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code, non_snake_case)]
pub struct UsageQuery {
    /// Only this user's requests.
    userId: Option<String>,
    /// Only this key's requests.
    keyId: Option<String>,
    /// Only requests of keys of this group.
    groupId: Option<String>,
    /// Only requests served by this model (`provider/model`).
    model: Option<String>,
    /// ISO 8601 date-time or date, inclusive (`INVALID_FROM`).
    from: Option<String>,
    /// ISO 8601 date-time or date, exclusive (`INVALID_TO`).
    to: Option<String>,
    /// Ledger rows per page, 1 to 1000; default 100 (`INVALID_LIMIT`).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u64>,
    /// `nextCursor` of the previous page (`INVALID_CURSOR`).
    cursor: Option<String>,
}

/// `GET /api/admin/usage`.
#[utoipa::path(
    get, path = "/api/admin/usage", tag = "admin", params(UsageQuery),
    responses(
        (status = 200, description = "`{filtered, total, users, keys, models, records, nextCursor}`: totals rows `{id, requests, promptTokens, completionTokens, totalTokens}`; `records` the page of ledger rows, newest first",
         body = crate::api::schema::Success<crate::api::schema::JsonObject>),
        (status = 400, description = "Bad parameter (`VALIDATION_ERROR`, `INVALID_…`)", body = crate::error::NestedError),
        (status = 403, description = "Not an admin key, or a tenant admin key without `groupId=<its group>`", body = crate::error::NestedError),
    )
)]
pub async fn usage(
    State(app): State<AppState>,
    AdminOrTenant(ctx): AdminOrTenant,
    Query(p): Query<Params>,
) -> Result<Json<Value>, AdminError> {
    check_known(&p, USAGE_PARAMS)?;
    own_group_only(&ctx, &p)?;
    let f = filter(&p)?;
    let limit = int_param(&p, "limit", "INVALID_LIMIT", 100, 1, 1000)? as usize;
    let cursor = p.get("cursor").map(|c| c.trim()).filter(|c| !c.is_empty());
    let ledger = ledger(&app)?;
    let page = ledger.ledger_page(&f, cursor, limit).await.map_err(|e| match e {
        StoreError::NotFound(_) => AdminError::invalid_param("INVALID_CURSOR", "`cursor` is not one this route handed out"),
        e => e.into(),
    })?;
    let summed = ledger.ledger_totals(&f).await?;
    let filtered = FILTERS.iter().any(|k| p.contains_key(*k));
    let (users, keys, total) = if filtered {
        (summed.users, summed.keys, summed.all)
    } else {
        let (users, keys) = app.store.usage_totals().await?;
        let mut all = UsageTotals::default();
        for (_, t) in &users {
            all.requests += t.requests;
            all.prompt_tokens += t.prompt_tokens;
            all.completion_tokens += t.completion_tokens;
        }
        (users, keys, all)
    };
    Ok(ok(json!({
        "filtered": filtered,
        "total": totals_view(&total),
        "users": users.iter().map(row_view).collect::<Vec<_>>(),
        "keys": keys.iter().map(row_view).collect::<Vec<_>>(),
        "models": summed.models.iter().map(row_view).collect::<Vec<_>>(),
        "records": page.rows.iter().map(ledger_view).collect::<Vec<_>>(),
        "nextCursor": page.next,
    })))
}

/// The query parameters of `GET /api/admin/usage/series`.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code, non_snake_case)]
pub struct SeriesQuery {
    /// `hour` or `day` (UTC); default `day` (`INVALID_BUCKET`).
    bucket: Option<String>,
    /// Only this user's requests.
    userId: Option<String>,
    /// Only this key's requests.
    keyId: Option<String>,
    /// Only requests of keys of this group.
    groupId: Option<String>,
    /// Only requests served by this model.
    model: Option<String>,
    /// ISO 8601, inclusive; default 7 days (hours: 24 hours) before `to` (`INVALID_FROM`).
    from: Option<String>,
    /// ISO 8601, exclusive; default now (`INVALID_TO`).
    to: Option<String>,
}

/// `GET /api/admin/usage/series`: one point per bucket from `from` to `to`, empty buckets included.
#[utoipa::path(
    get, path = "/api/admin/usage/series", tag = "admin", params(SeriesQuery),
    responses(
        (status = 200, description = "`{bucket, from, to, points: [{start, requests, promptTokens, completionTokens, totalTokens}]}`, oldest first",
         body = crate::api::schema::Success<crate::api::schema::JsonObject>),
        (status = 400, description = "Bad parameter (`VALIDATION_ERROR`, `INVALID_…`)", body = crate::error::NestedError),
        (status = 403, description = "Not an admin key, or a tenant admin key without `groupId=<its group>`", body = crate::error::NestedError),
    )
)]
pub async fn series(
    State(app): State<AppState>,
    AdminOrTenant(ctx): AdminOrTenant,
    Query(p): Query<Params>,
) -> Result<Json<Value>, AdminError> {
    check_known(&p, SERIES_PARAMS)?;
    own_group_only(&ctx, &p)?;
    let bucket = match p.get("bucket").map(String::as_str) {
        None | Some("day") => Bucket::Day,
        Some("hour") => Bucket::Hour,
        Some(other) => return Err(AdminError::invalid_param("INVALID_BUCKET", format!("`bucket` is `{other}`; use hour or day"))),
    };
    let mut f = filter(&p)?;
    let to = f.to.unwrap_or_else(Utc::now);
    let from = f.from.unwrap_or_else(|| to - if bucket == Bucket::Hour { chrono::Duration::hours(24) } else { chrono::Duration::days(7) });
    let first = bucket.start(from);
    if (to - first).num_seconds() / bucket.width().num_seconds() > MAX_BUCKETS {
        return Err(AdminError::invalid_param("INVALID_DATE_RANGE", format!("the range holds more than {MAX_BUCKETS} buckets; narrow it")));
    }
    (f.from, f.to) = (Some(from), Some(to));
    let found = ledger(&app)?.ledger_series(&f, bucket).await?;
    let mut points = Vec::new();
    let (mut at, mut found) = (first, found.into_iter().peekable());
    while at < to {
        while found.peek().is_some_and(|(start, _)| *start < at) {
            found.next();
        }
        let t = match found.peek() {
            Some((start, _)) if *start == at => found.next().map(|(_, t)| t).unwrap_or_default(),
            _ => UsageTotals::default(),
        };
        let mut v = totals_view(&t);
        v["start"] = json!(iso(at));
        points.push(v);
        at += bucket.width();
    }
    Ok(ok(json!({"bucket": bucket, "from": iso(from), "to": iso(to), "points": points})))
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
