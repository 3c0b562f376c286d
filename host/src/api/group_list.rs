//! `GET /groups`: the group listing (search, status, sort, paging), under the
//! admin-read rate limit. Group management is `api::admin::groups`.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Query, State};
use serde_json::{Value, json};

use super::list_params::{Params, check_known, int_param, pagination};
use crate::app::AppState;
use crate::auth::Admin;
use crate::error::AdminError;
use crate::time::iso;
use gatehouse_store::model::GroupStatus;

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

/// `{success, groups, pagination}`: flat, without `data`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct GroupList {
    pub success: bool,
    pub groups: Vec<crate::api::schema::GroupListEntry>,
    pub pagination: crate::api::schema::Pagination,
}

/// `GET /groups`.
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

    let users: HashMap<String, gatehouse_store::model::User> =
        app.store.list_users().await?.into_iter().map(|u| (u.id.clone(), u)).collect();
    let mut rows: Vec<_> = app
        .store
        .list_groups()
        .await?
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
