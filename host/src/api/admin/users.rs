//! Users under `/api/admin/users`: create, list, read, update (rename,
//! change the email, deactivate and reactivate) and delete.

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
use gatehouse_store::model::User;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    /// 1 to 200 characters.
    pub name: String,
    #[serde(default)]
    #[schema(required = false)]
    pub email: String,
}

/// Partial update; absent fields keep their value.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpdateUser {
    #[serde(default)]
    pub name: Option<String>,
    /// `""` removes it.
    #[serde(default)]
    pub email: Option<String>,
    /// `deactivated` suspends every key of the user at once (401 until
    /// `active` again); usage and audit records are untouched.
    #[serde(default)]
    pub status: Option<UserStatus>,
}

/// Whether a user's keys work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UserStatus {
    Active,
    Deactivated,
}

/// A user as the admin API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserView {
    pub id: String,
    pub name: String,
    pub email: String,
    pub created_at: String,
    pub status: UserStatus,
    pub deactivated_at: Option<String>,
}

impl From<&User> for UserView {
    fn from(u: &User) -> Self {
        UserView {
            id: u.id.clone(),
            name: u.name.clone(),
            email: u.email.clone(),
            created_at: crate::time::iso(u.created_at),
            status: if u.deactivated_at.is_some() { UserStatus::Deactivated } else { UserStatus::Active },
            deactivated_at: u.deactivated_at.map(crate::time::iso),
        }
    }
}

fn valid_email(e: &str) -> bool {
    match e.split_once('@') {
        Some((local, domain)) => !local.is_empty() && domain.contains('.') && !e.contains(char::is_whitespace),
        None => false,
    }
}

/// `POST /api/admin/users`.
#[utoipa::path(
    post, path = "/api/admin/users", tag = "admin", request_body = CreateUser,
    responses(
        (status = 201, description = "Created", body = Success<UserView>),
        (status = 400, description = "Bad body (`VALIDATION_ERROR`)", body = NestedError),
    )
)]
pub async fn create(
    State(app): State<AppState>,
    Admin(ctx): Admin,
    AdminJson(body): AdminJson<CreateUser>,
) -> Result<(StatusCode, Json<Value>), AdminError> {
    let name = text_field("name", &body.name, 200, true)?;
    let email = text_field("email", &body.email, 320, false)?;
    if !email.is_empty() && !valid_email(&email) {
        return Err(AdminError::validation("`email` is not an email address"));
    }
    let user = User { id: new_id("usr"), name, email, created_at: chrono::Utc::now(), deactivated_at: None };
    let audit = actor_audit(
        &app,
        &ctx,
        Audit::new(kind::USER_MANAGEMENT, category::ACCESS_CONTROL, format!("User {} created", user.id))
            .meta("operation", "create_user")
            .meta("targetUserId", user.id.clone()),
        "POST /api/admin/users",
    )
    .await
    .build();
    let user = app.store.create_user(user, audit).await?;
    Ok((StatusCode::CREATED, ok(UserView::from(&user))))
}

/// `GET /api/admin/users`.
#[utoipa::path(get, path = "/api/admin/users", tag = "admin", responses((status = 200, description = "Every user", body = Success<Vec<UserView>>)))]
pub async fn list(State(app): State<AppState>, Admin(_): Admin) -> Result<Json<Value>, AdminError> {
    let users = app.store.list_users().await?;
    Ok(ok(users.iter().map(UserView::from).collect::<Vec<_>>()))
}

/// `GET /api/admin/users/{id}`.
#[utoipa::path(
    get, path = "/api/admin/users/{id}", tag = "admin", params(("id" = String, Path, description = "`usr_…`")),
    responses(
        (status = 200, description = "The user", body = Success<UserView>),
        (status = 404, description = "No such user", body = NestedError),
    )
)]
pub async fn get(State(app): State<AppState>, Admin(_): Admin, Path(id): Path<String>) -> Result<Json<Value>, AdminError> {
    let user = app.store.get_user(&id).await?.ok_or_else(|| AdminError::not_found(format!("user {id} not found")))?;
    Ok(ok(UserView::from(&user)))
}

/// `PUT /api/admin/users/{id}`.
#[utoipa::path(
    put, path = "/api/admin/users/{id}", tag = "admin", params(("id" = String, Path, description = "`usr_…`")), request_body = UpdateUser,
    responses(
        (status = 200, description = "The changed user", body = Success<UserView>),
        (status = 400, description = "Bad body (`VALIDATION_ERROR`)", body = NestedError),
        (status = 404, description = "No such user", body = NestedError),
        (status = 409, description = "Another user has the email, or the calling key's own user would be deactivated (`CONFLICT`)", body = NestedError),
    )
)]
pub async fn update(
    State(app): State<AppState>,
    Admin(ctx): Admin,
    Path(id): Path<String>,
    AdminJson(body): AdminJson<UpdateUser>,
) -> Result<Json<Value>, AdminError> {
    let mut user = app.store.get_user(&id).await?.ok_or_else(|| AdminError::not_found(format!("user {id} not found")))?;
    if let Some(name) = &body.name {
        user.name = text_field("name", name, 200, true)?;
    }
    if let Some(email) = &body.email {
        let email = text_field("email", email, 320, false)?;
        if !email.is_empty() && !valid_email(&email) {
            return Err(AdminError::validation("`email` is not an email address"));
        }
        user.email = email;
    }
    let mut operation = "update_user";
    match body.status {
        Some(UserStatus::Deactivated) if user.deactivated_at.is_none() => {
            if id == ctx.key.user_id {
                return Err(AdminError::conflict("the calling key belongs to this user: deactivate them with another user's admin key"));
            }
            user.deactivated_at = Some(chrono::Utc::now());
            operation = "deactivate_user";
        }
        Some(UserStatus::Active) if user.deactivated_at.is_some() => {
            user.deactivated_at = None;
            operation = "reactivate_user";
        }
        _ => {}
    }
    let audit = actor_audit(
        &app,
        &ctx,
        Audit::new(kind::USER_MANAGEMENT, category::ACCESS_CONTROL, format!("User {id} updated ({operation})"))
            .meta("operation", operation)
            .meta("targetUserId", id.clone()),
        "PUT /api/admin/users/{id}",
    )
    .await
    .build();
    let user = app.store.update_user(user, audit).await?;
    Ok(ok(UserView::from(&user)))
}

/// What `DELETE /api/admin/users/{id}` removed.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletedUser {
    pub user: UserView,
    /// The user's keys, deleted with them.
    pub deleted_key_ids: Vec<String>,
}

/// `DELETE /api/admin/users/{id}`: the user, their group memberships and
/// their keys go (the keys are refused at once); their usage rows and the
/// audit records that name them stay, as history.
#[utoipa::path(
    delete, path = "/api/admin/users/{id}", tag = "admin", params(("id" = String, Path, description = "`usr_…`")),
    responses(
        (status = 200, description = "The deleted user and the ids of their deleted keys", body = Success<DeletedUser>),
        (status = 404, description = "No such user", body = NestedError),
        (status = 409, description = "The calling key belongs to this user (`CONFLICT`)", body = NestedError),
    )
)]
pub async fn delete(State(app): State<AppState>, Admin(ctx): Admin, Path(id): Path<String>) -> Result<Json<Value>, AdminError> {
    if id == ctx.key.user_id {
        return Err(AdminError::conflict("the calling key belongs to this user: delete them with another user's admin key"));
    }
    let audit = actor_audit(
        &app,
        &ctx,
        Audit::new(kind::USER_MANAGEMENT, category::ACCESS_CONTROL, format!("User {id} deleted"))
            .meta("operation", "delete_user")
            .meta("targetUserId", id.clone()),
        "DELETE /api/admin/users/{id}",
    )
    .await
    .build();
    let (user, keys) = app.store.delete_user(&id, audit).await?;
    Ok(ok(DeletedUser { user: UserView::from(&user), deleted_key_ids: keys }))
}
