//! Admin reads: `GET /audit-logs` (spec 4.2) and `GET /groups` (4.3), with
//! their own rate-limit set (section 8) applied by [`admin_read_limit`].
//!
//! Parameters are parsed by hand so that each bad one gets a 400 whose code
//! names it (`INVALID_PAGE`, `INVALID_LIMIT`, `INVALID_START_DATE`, ...).

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Query, State};
use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde_json::{Value, json};

use crate::error::AdminError;
use crate::time::iso;
use crate::app::AppState;
use crate::auth::Admin;
use crate::store::AuditQuery;
use crate::store::model::{AuditRecord, GroupStatus, Severity};

/// Query parameters as axum's `Query` extractor hands them over.
pub type Params = HashMap<String, String>;

fn check_known(p: &Params, known: &[&str]) -> Result<(), AdminError> {
    if let Some(k) = p.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(AdminError::invalid_param("INVALID_PARAMETER", format!("unknown query parameter `{k}`; known: {}", known.join(", "))));
    }
    Ok(())
}

fn int_param(p: &Params, name: &str, code: &'static str, default: u64, min: u64, max: u64) -> Result<u64, AdminError> {
    match p.get(name) {
        None => Ok(default),
        Some(s) => match s.trim().parse::<u64>() {
            Ok(v) if (min..=max).contains(&v) => Ok(v),
            _ => Err(AdminError::invalid_param(code, format!("`{name}` must be a whole number from {min} to {max}, got `{s}`"))),
        },
    }
}

/// ISO 8601: a date-time with offset (`2026-11-23T10:00:00Z`), one without
/// (taken as UTC), or a date (`2026-11-23`, its midnight UTC; as an end
/// date, the end of that day).
fn parse_date(s: &str, end_of_day: bool) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    if let Ok(t) = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f") {
        return Some(t.and_utc());
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        let t = d.and_hms_opt(0, 0, 0)?.and_utc();
        return Some(if end_of_day { t + Duration::days(1) - Duration::milliseconds(1) } else { t });
    }
    None
}

fn pagination(page: u64, limit: u64, total: u64) -> Value {
    json!({"page": page, "limit": limit, "total": total, "pages": total.div_ceil(limit)})
}

const AUDIT_PARAMS: &[&str] = &["page", "limit", "startDate", "endDate", "type", "severity", "userId", "search"];

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
        Some(t) if crate::audit::kind::ALL.contains(&t.as_str()) => Some(t.clone()),
        Some(t) => {
            return Err(AdminError::invalid_param(
                "INVALID_TYPE",
                format!("`type` is `{t}`; known types: {}", crate::audit::kind::ALL.join(", ")),
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
    userId: Option<String>,
    /// Case-insensitive, in the description and `metadata.operation`; at most 200 characters (`INVALID_SEARCH`).
    search: Option<String>,
}

/// `GET /audit-logs` (spec 4.2).
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
    let (logs, total) = app.store.audit_query(&a.query)?;
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
    let report = app.store.verify_audit_chain()?;
    Ok(Json(json!({"success": true, "data": report})))
}

const GROUP_PARAMS: &[&str] = &["page", "limit", "search", "status", "sortBy", "sortOrder"];
/// Fields `sortBy` accepts.
pub const GROUP_SORT_FIELDS: &[&str] = &["createdAt", "name", "userCount", "status", "description", "id"];

/// The query parameters of `GET /groups`, for the OpenAPI document.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code, non_snake_case)]
pub struct GroupsQuery {
    /// Default 1 (`INVALID_PAGE`).
    #[param(minimum = 1, maximum = 1000000)]
    page: Option<u64>,
    /// Default 20 (`INVALID_LIMIT`).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u64>,
    /// In the name or description (`INVALID_SEARCH`).
    search: Option<String>,
    /// `Active` or `Inactive` (`INVALID_STATUS`).
    status: Option<String>,
    /// `createdAt` (default), `name`, `userCount`, `status`, `description`, `id` (`INVALID_SORT_BY`).
    sortBy: Option<String>,
    /// `desc` (default) or `asc` (`INVALID_SORT_ORDER`).
    sortOrder: Option<String>,
}

/// `{success, groups, pagination}` (spec 4.3): flat, without `data`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct GroupList {
    pub success: bool,
    pub groups: Vec<crate::api::schema::GroupListEntry>,
    pub pagination: crate::api::schema::Pagination,
}

/// `GET /groups` (spec 4.3).
#[utoipa::path(
    get, path = "/groups", tag = "admin", params(GroupsQuery),
    responses(
        (status = 200, description = "Groups with their members", body = GroupList),
        (status = 400, description = "A bad parameter; the code names it", body = crate::error::NestedError),
        (status = 429, description = "The key's admin-read limit (`RATE_LIMIT_EXCEEDED`, `retryAfter`)", body = crate::error::NestedError),
    )
)]
pub async fn groups(State(app): State<AppState>, Admin(_): Admin, Query(p): Query<Params>) -> Result<Json<Value>, AdminError> {
    check_known(&p, GROUP_PARAMS)?;
    let page = int_param(&p, "page", "INVALID_PAGE", 1, 1, 1_000_000)?;
    let limit = int_param(&p, "limit", "INVALID_LIMIT", 20, 1, 100)?;
    let status = match p.get("status").map(String::as_str) {
        None => None,
        Some("Active") => Some(GroupStatus::Active),
        Some("Inactive") => Some(GroupStatus::Inactive),
        Some(other) => {
            return Err(AdminError::invalid_param("INVALID_STATUS", format!("`status` is `{other}`; use Active or Inactive")));
        }
    };
    let sort_by = p.get("sortBy").map(String::as_str).unwrap_or("createdAt");
    if !GROUP_SORT_FIELDS.contains(&sort_by) {
        return Err(AdminError::invalid_param(
            "INVALID_SORT_BY",
            format!("`sortBy` is `{sort_by}`; use one of {}", GROUP_SORT_FIELDS.join(", ")),
        ));
    }
    let descending = match p.get("sortOrder").map(String::as_str) {
        None | Some("desc") => true,
        Some("asc") => false,
        Some(other) => {
            return Err(AdminError::invalid_param("INVALID_SORT_ORDER", format!("`sortOrder` is `{other}`; use asc or desc")));
        }
    };
    let search = p.get("search").map(|s| s.trim().to_lowercase()).filter(|s| !s.is_empty());

    let users: HashMap<String, crate::store::model::User> = app.store.list_users()?.into_iter().map(|u| (u.id.clone(), u)).collect();
    let mut rows: Vec<_> = app
        .store
        .list_groups()?
        .into_iter()
        .filter(|(g, _)| status.is_none_or(|s| g.status == s))
        .filter(|(g, _)| search.as_ref().is_none_or(|q| g.name.to_lowercase().contains(q) || g.description.to_lowercase().contains(q)))
        .collect();
    rows.sort_by(|(a, am), (b, bm)| {
        let ord = match sort_by {
            "name" => a.name.to_lowercase().cmp(&b.name.to_lowercase()),
            "userCount" => am.len().cmp(&bm.len()),
            "status" => format!("{:?}", a.status).cmp(&format!("{:?}", b.status)),
            "description" => a.description.to_lowercase().cmp(&b.description.to_lowercase()),
            "id" => a.id.cmp(&b.id),
            _ => a.created_at.cmp(&b.created_at),
        }
        .then_with(|| a.id.cmp(&b.id));
        if descending { ord.reverse() } else { ord }
    });
    let total = rows.len() as u64;
    let groups: Vec<Value> = rows
        .iter()
        .skip(((page - 1) * limit) as usize)
        .take(limit as usize)
        .map(|(g, members)| {
            let users: Vec<Value> = members
                .iter()
                .map(|id| match users.get(id) {
                    Some(u) => json!({"id": u.id, "name": u.name, "email": u.email}),
                    None => json!({"id": id, "name": "", "email": ""}),
                })
                .collect();
            json!({
                "id": g.id,
                "name": g.name,
                "description": g.description,
                "status": g.status,
                "userCount": members.len(),
                "users": users,
                "createdAt": iso(g.created_at),
            })
        })
        .collect();
    Ok(Json(json!({
        "success": true,
        "groups": groups,
        "pagination": pagination(page, limit, total),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert!(parse_date("2026-11-23T10:00:00Z", false).is_some());
        assert!(parse_date("2026-11-23T10:00:00+02:00", false).is_some());
        assert!(parse_date("2026-11-23T10:00:00", false).is_some());
        let d = parse_date("2026-11-23", false).expect("date");
        assert_eq!(iso(d), "2026-11-23T00:00:00.000Z");
        let e = parse_date("2026-11-23", true).expect("date");
        assert_eq!(iso(e), "2026-11-23T23:59:59.999Z");
        assert!(parse_date("yesterday", false).is_none());
        assert!(parse_date("2026-13-01", false).is_none());
    }

    #[test]
    fn pages() {
        assert_eq!(pagination(1, 20, 0)["pages"], 0);
        assert_eq!(pagination(1, 20, 41)["pages"], 3);
    }
}
