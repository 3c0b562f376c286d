//! Users: `POST /api/admin/users`, `GET /api/admin/users`, `GET /api/admin/users/{id}`.

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

/// A user as the admin API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserView {
    pub id: String,
    pub name: String,
    pub email: String,
    pub created_at: String,
}

impl From<&User> for UserView {
    fn from(u: &User) -> Self {
        UserView { id: u.id.clone(), name: u.name.clone(), email: u.email.clone(), created_at: crate::time::iso(u.created_at) }
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
    let user = User { id: new_id("usr"), name, email, created_at: chrono::Utc::now() };
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
