//! Groups (tenants) and memberships under `/api/admin/groups`: create, list,
//! read, update, delete; add and remove members.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{actor_audit, new_id, ok, text_field};
use crate::api::json::AdminJson;
use crate::api::schema::Success;
use crate::app::AppState;
use crate::auth::Admin;
use crate::error::{AdminError, NestedError};
use gatehouse_store::audit::{Audit, category, kind};
use gatehouse_store::model::{Group, GroupStatus};

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateGroup {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub status: GroupStatus,
    #[serde(default)]
    pub default_policy: Option<String>,
}

/// Partial update; absent fields keep their value. `defaultPolicy: null` clears it.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpdateGroup {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub status: Option<GroupStatus>,
    #[serde(default, deserialize_with = "super::present")]
    #[schema(value_type = Option<String>)]
    pub default_policy: Option<Option<String>>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AddMember {
    pub user_id: String,
}

/// A group as the admin management routes show it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupView {
    pub id: String,
    pub name: String,
    pub description: String,
    pub status: GroupStatus,
    pub default_policy: Option<String>,
    pub created_at: String,
}

impl From<&Group> for GroupView {
    fn from(g: &Group) -> Self {
        GroupView {
            id: g.id.clone(),
            name: g.name.clone(),
            description: g.description.clone(),
            status: g.status,
            default_policy: g.default_policy.clone(),
            created_at: crate::time::iso(g.created_at),
        }
    }
}

/// `POST /api/admin/groups`.
#[utoipa::path(
    post, path = "/api/admin/groups", tag = "admin", request_body = CreateGroup,
    responses((status = 201, description = "Created", body = Success<GroupView>), (status = 400, description = "Bad body (`VALIDATION_ERROR`)", body = NestedError))
)]
pub async fn create(
    State(app): State<AppState>,
    Admin(ctx): Admin,
    AdminJson(body): AdminJson<CreateGroup>,
) -> Result<(StatusCode, Json<Value>), AdminError> {
    let group = Group {
        id: new_id("grp"),
        name: text_field("name", &body.name, 200, true)?,
        description: text_field("description", &body.description, 2000, false)?,
        status: body.status,
        created_at: chrono::Utc::now(),
        default_policy: body.default_policy,
    };
    let audit = actor_audit(
        &app,
        &ctx,
        Audit::new(kind::GROUP_MANAGEMENT, category::ACCESS_CONTROL, format!("Group {} created", group.name))
            .meta("operation", "create_group")
            .meta("groupId", group.id.clone()),
        "POST /api/admin/groups",
    )
    .await
    .build();
    let group = app.store.create_group(group, audit).await?;
    Ok((StatusCode::CREATED, ok(GroupView::from(&group))))
}

/// `PUT /api/admin/groups/{id}`.
#[utoipa::path(
    put, path = "/api/admin/groups/{id}", tag = "admin", params(("id" = String, Path, description = "`grp_…`")), request_body = UpdateGroup,
    responses(
        (status = 200, description = "The changed group", body = Success<GroupView>),
        (status = 400, description = "Bad body (`VALIDATION_ERROR`)", body = NestedError),
        (status = 404, description = "No such group", body = NestedError),
    )
)]
pub async fn update(
    State(app): State<AppState>,
    Admin(ctx): Admin,
    Path(id): Path<String>,
    AdminJson(body): AdminJson<UpdateGroup>,
) -> Result<Json<Value>, AdminError> {
    let mut group = app.store.get_group(&id).await?.ok_or_else(|| AdminError::not_found(format!("group {id} not found")))?;
    if let Some(name) = &body.name {
        group.name = text_field("name", name, 200, true)?;
    }
    if let Some(d) = &body.description {
        group.description = text_field("description", d, 2000, false)?;
    }
    if let Some(s) = body.status {
        group.status = s;
    }
    let policy_changed = body.default_policy.is_some();
    if let Some(p) = body.default_policy {
        group.default_policy = p;
    }
    let (k, cat) = if policy_changed {
        (kind::POLICY_MANAGEMENT, category::DATA_PROTECTION)
    } else {
        (kind::GROUP_MANAGEMENT, category::ACCESS_CONTROL)
    };
    let mut audit =
        Audit::new(k, cat, format!("Group {} updated", group.name)).meta("operation", "update_group").meta("groupId", group.id.clone());
    if policy_changed {
        audit =
            audit.meta("policyName", group.default_policy.clone().unwrap_or_default()).meta("setAsActive", group.default_policy.is_some());
    }
    let audit = actor_audit(&app, &ctx, audit, "PUT /api/admin/groups/{id}").await.build();
    let group = app.store.update_group(group, audit).await?;
    Ok(ok(GroupView::from(&group)))
}

/// `{groupId, userId}` (and `removed: true` after a removal).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Membership {
    pub group_id: String,
    pub user_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed: Option<bool>,
}

/// `POST /api/admin/groups/{id}/members`.
#[utoipa::path(
    post, path = "/api/admin/groups/{id}/members", tag = "admin", params(("id" = String, Path, description = "`grp_…`")), request_body = AddMember,
    responses(
        (status = 201, description = "Added", body = Success<Membership>),
        (status = 400, description = "Bad body (`VALIDATION_ERROR`)", body = NestedError),
        (status = 404, description = "No such group or user", body = NestedError),
        (status = 409, description = "Already a member (`CONFLICT`)", body = NestedError),
    )
)]
pub async fn add_member(
    State(app): State<AppState>,
    Admin(ctx): Admin,
    Path(id): Path<String>,
    AdminJson(body): AdminJson<AddMember>,
) -> Result<(StatusCode, Json<Value>), AdminError> {
    let audit = actor_audit(
        &app,
        &ctx,
        Audit::new(kind::GROUP_MANAGEMENT, category::ACCESS_CONTROL, format!("User {} added to group {id}", body.user_id))
            .meta("operation", "add_group_member")
            .meta("groupId", id.clone())
            .meta("targetUserId", body.user_id.clone()),
        "POST /api/admin/groups/{id}/members",
    )
    .await
    .build();
    app.store.add_member(&id, &body.user_id, audit).await?;
    Ok((StatusCode::CREATED, ok(Membership { group_id: id, user_id: body.user_id, removed: None })))
}

/// `DELETE /api/admin/groups/{id}/members/{userId}`.
#[utoipa::path(
    delete, path = "/api/admin/groups/{id}/members/{userId}", tag = "admin",
    params(("id" = String, Path, description = "`grp_…`"), ("userId" = String, Path, description = "`usr_…`")),
    responses(
        (status = 200, description = "Removed", body = Success<Membership>),
        (status = 404, description = "No such group, or not a member", body = NestedError),
    )
)]
pub async fn remove_member(
    State(app): State<AppState>,
    Admin(ctx): Admin,
    Path((id, user_id)): Path<(String, String)>,
) -> Result<Json<Value>, AdminError> {
    let audit = actor_audit(
        &app,
        &ctx,
        Audit::new(kind::GROUP_MANAGEMENT, category::ACCESS_CONTROL, format!("User {user_id} removed from group {id}"))
            .meta("operation", "remove_group_member")
            .meta("groupId", id.clone())
            .meta("targetUserId", user_id.clone()),
        "DELETE /api/admin/groups/{id}/members/{userId}",
    )
    .await
    .build();
    app.store.remove_member(&id, &user_id, audit).await?;
    Ok(ok(Membership { group_id: id, user_id, removed: Some(true) }))
}

/// A group with its members, as `GET /api/admin/groups` and `GET /api/admin/groups/{id}` show it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupWithMembers {
    #[serde(flatten)]
    pub group: GroupView,
    /// Member user ids.
    pub members: Vec<String>,
}

/// `GET /api/admin/groups`: every group with its members. A management route:
/// unlike the spec's `GET /groups` listing it does not count against the
/// admin-read limit (`limits.admin_read`).
#[utoipa::path(get, path = "/api/admin/groups", tag = "admin", responses((status = 200, description = "Every group with its members", body = Success<Vec<GroupWithMembers>>)))]
pub async fn list(State(app): State<AppState>, Admin(_): Admin) -> Result<Json<Value>, AdminError> {
    let groups = app.store.list_groups().await?;
    let out: Vec<GroupWithMembers> =
        groups.iter().map(|(g, members)| GroupWithMembers { group: GroupView::from(g), members: members.clone() }).collect();
    Ok(ok(out))
}

/// `GET /api/admin/groups/{id}`.
#[utoipa::path(
    get, path = "/api/admin/groups/{id}", tag = "admin", params(("id" = String, Path, description = "`grp_…`")),
    responses(
        (status = 200, description = "The group with its members", body = Success<GroupWithMembers>),
        (status = 404, description = "No such group", body = NestedError),
    )
)]
pub async fn get(State(app): State<AppState>, Admin(_): Admin, Path(id): Path<String>) -> Result<Json<Value>, AdminError> {
    let groups = app.store.list_groups().await?;
    let (g, members) =
        groups.into_iter().find(|(g, _)| g.id == id).ok_or_else(|| AdminError::not_found(format!("group {id} not found")))?;
    Ok(ok(GroupWithMembers { group: GroupView::from(&g), members }))
}

/// `DELETE /api/admin/groups/{id}`: the group and its memberships go; its
/// audit records and its members' usage stay. Refused while API keys still
/// belong to the group.
#[utoipa::path(
    delete, path = "/api/admin/groups/{id}", tag = "admin", params(("id" = String, Path, description = "`grp_…`")),
    responses(
        (status = 200, description = "The deleted group", body = Success<GroupView>),
        (status = 404, description = "No such group", body = NestedError),
        (status = 409, description = "Keys still belong to the group (`CONFLICT`, naming them)", body = NestedError),
    )
)]
pub async fn delete(State(app): State<AppState>, Admin(ctx): Admin, Path(id): Path<String>) -> Result<Json<Value>, AdminError> {
    let audit = actor_audit(
        &app,
        &ctx,
        Audit::new(kind::GROUP_MANAGEMENT, category::ACCESS_CONTROL, format!("Group {id} deleted"))
            .meta("operation", "delete_group")
            .meta("groupId", id.clone()),
        "DELETE /api/admin/groups/{id}",
    )
    .await
    .build();
    let group = app.store.delete_group(&id, audit).await?;
    Ok(ok(GroupView::from(&group)))
}
