//! `GET /audit-logs` (filters, paging; its own admin-read rate limit, applied
//! by `api::middleware::admin_read_limit`) and `GET /api/admin/audit/verify`.

use axum::Json;
use axum::extract::{Query, State};
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use super::list_params::{Params, check_known, int_param, pagination, parse_date};
use crate::app::AppState;
use crate::auth::Admin;
use crate::error::AdminError;
use crate::time::iso;
use gatehouse_store::AuditQuery;
use gatehouse_store::model::{AuditRecord, Severity};

const AUDIT_PARAMS: &[&str] = &["page", "limit", "startDate", "endDate", "type", "severity", "userId", "aboutUserId", "search"];

fn audit_view(r: &AuditRecord) -> Value {
    let mut v = json!({
        "id": r.id,
        "timestamp": iso(r.timestamp),
        "type": r.kind,
        "severity": r.severity,
        "description": r.description,
        "metadata": r.metadata,
        "complianceCategory": r.compliance_category,
        "outcome": r.outcome,
        "prevHash": r.prev_hash,
        "hash": r.hash,
    });
    if let Some(u) = &r.user {
        v["user"] = json!({"id": u.id, "name": u.name, "email": u.email});
    }
    v
}

/// The validated parameters of `GET /audit-logs`.
#[derive(Debug, Clone)]
pub struct AuditParams {
    pub page: u64,
    pub limit: u64,
    /// The inclusive date range, as reported back in `dateRange`.
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// What the store is asked for (its `end` is exclusive).
    pub query: AuditQuery,
}

/// Parse and check the query parameters of `GET /audit-logs`; `now` is the
/// default end of the range. Every bad parameter is a 400 naming it.
pub fn audit_params(p: &Params, now: DateTime<Utc>) -> Result<AuditParams, AdminError> {
    check_known(p, AUDIT_PARAMS)?;
    let page = int_param(p, "page", "INVALID_PAGE", 1, 1, 1_000_000)?;
    let limit = int_param(p, "limit", "INVALID_LIMIT", 50, 1, 100)?;
    let end = match p.get("endDate") {
        None => now,
        Some(s) => parse_date(s, true)
            .ok_or_else(|| AdminError::invalid_param("INVALID_END_DATE", format!("`endDate` is not an ISO 8601 date: `{s}`")))?,
    };
    let start = match p.get("startDate") {
        None => end - Duration::days(7),
        Some(s) => parse_date(s, false)
            .ok_or_else(|| AdminError::invalid_param("INVALID_START_DATE", format!("`startDate` is not an ISO 8601 date: `{s}`")))?,
    };
    if start > end {
        return Err(AdminError::invalid_param("INVALID_DATE_RANGE", "`startDate` is after `endDate`"));
    }
    let severity = match p.get("severity").map(String::as_str) {
        None => None,
        Some("info") => Some(Severity::Info),
        Some("warning") => Some(Severity::Warning),
        Some("error") => Some(Severity::Error),
        Some("critical") => Some(Severity::Critical),
        Some(other) => {
            return Err(AdminError::invalid_param(
                "INVALID_SEVERITY",
                format!("`severity` is `{other}`; use info, warning, error or critical"),
            ));
        }
    };
    let kind = match p.get("type") {
        None => None,
        Some(t) if gatehouse_store::audit::kind::ALL.contains(&t.as_str()) => Some(t.clone()),
        Some(t) => {
            return Err(AdminError::invalid_param(
                "INVALID_TYPE",
                format!("`type` is `{t}`; known types: {}", gatehouse_store::audit::kind::ALL.join(", ")),
            ));
        }
    };
    let search = p.get("search").map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    if search.as_ref().is_some_and(|s| s.len() > 200) {
        return Err(AdminError::invalid_param("INVALID_SEARCH", "`search` is longer than 200 characters"));
    }
    let query = AuditQuery {
        // The end is inclusive for callers; the store's bound is exclusive.
        start,
        end: end + Duration::microseconds(1),
        kind,
        severity,
        user_id: p.get("userId").cloned(),
        about_user_id: p.get("aboutUserId").cloned(),
        search,
        offset: (page - 1) * limit,
        limit,
    };
    Ok(AuditParams { page, limit, start, end, query })
}

/// The query parameters of `GET /audit-logs`, for the OpenAPI document (the
/// handler reads them from a map so that each bad one gets its own code).
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code, non_snake_case)]
pub struct AuditLogsQuery {
    /// Default 1 (`INVALID_PAGE`).
    #[param(minimum = 1, maximum = 1000000)]
    page: Option<u64>,
    /// Default 50 (`INVALID_LIMIT`).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u64>,
    /// ISO 8601 date-time or date; default 7 days before `endDate` (`INVALID_START_DATE`).
    startDate: Option<String>,
    /// ISO 8601 date-time or date; default now (`INVALID_END_DATE`).
    endDate: Option<String>,
    /// An audit record type, e.g. `security_event` (`INVALID_TYPE`).
    r#type: Option<String>,
    /// `info`, `warning`, `error` or `critical` (`INVALID_SEVERITY`).
    severity: Option<String>,
    /// Records made by this user (the acting user).
    userId: Option<String>,
    /// Records about this user (`metadata.targetUserId`): keys made for them, their changes and memberships.
    aboutUserId: Option<String>,
    /// Case-insensitive, in the description and `metadata.operation`; at most 200 characters (`INVALID_SEARCH`).
    search: Option<String>,
}

/// `GET /audit-logs`.
#[utoipa::path(
    get, path = "/audit-logs", tag = "admin", params(AuditLogsQuery),
    responses(
        (status = 200, description = "One page of audit records, newest first", body = crate::api::schema::Success<crate::api::schema::AuditLogPage>),
        (status = 400, description = "A bad parameter; the code names it (`INVALID_PAGE`, ..., `INVALID_PARAMETER`)", body = crate::error::NestedError),
        (status = 429, description = "The key's admin-read limit (`RATE_LIMIT_EXCEEDED`, `retryAfter`)", body = crate::error::NestedError),
    )
)]
pub async fn audit_logs(State(app): State<AppState>, Admin(_): Admin, Query(p): Query<Params>) -> Result<Json<Value>, AdminError> {
    let a = audit_params(&p, Utc::now())?;
    let (logs, total) = app.store.audit_query(&a.query).await?;
    Ok(Json(json!({
        "success": true,
        "data": {
            "logs": logs.iter().map(audit_view).collect::<Vec<_>>(),
            "pagination": pagination(a.page, a.limit, total),
            "dateRange": {"startDate": iso(a.start), "endDate": iso(a.end)},
        }
    })))
}

/// `GET /api/admin/audit/verify`: walk the whole hash chain and report every break.
#[utoipa::path(
    get, path = "/api/admin/audit/verify", tag = "admin",
    responses((status = 200, description = "The walk of the audit hash chain: the record count, the first break and every break found (`breaks`, `broken`)", body = crate::api::schema::Success<crate::api::schema::JsonObject>))
)]
pub async fn verify_audit(State(app): State<AppState>, Admin(_): Admin) -> Result<Json<Value>, AdminError> {
    let report = app.store.verify_audit_chain().await?;
    Ok(Json(json!({"success": true, "data": report})))
}
