//! `GET /api/admin/me`: who the calling admin key is.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use serde_json::Value;

use super::groups::GroupView;
use super::keys::KeyView;
use super::ok;
use super::users::UserView;
use crate::api::schema::Success;
use crate::app::AppState;
use crate::auth::Admin;
use crate::error::AdminError;

/// The calling key, its owner and its group.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Me {
    pub key: KeyView,
    /// The key's owner; `null` if the user record is gone (a bootstrap key
    /// names a user the server created with it).
    pub user: Option<UserView>,
    pub group: Option<GroupView>,
}

/// `GET /api/admin/me`.
#[utoipa::path(get, path = "/api/admin/me", tag = "admin", responses((status = 200, description = "The calling key, its owner and group", body = Success<Me>)))]
pub async fn me(State(app): State<AppState>, Admin(ctx): Admin) -> Result<Json<Value>, AdminError> {
    // The stored record, not the authenticated copy: a change made since the
    // key was cached shows here at once.
    let key = app.store.get_key(&ctx.key.id).await?.unwrap_or_else(|| ctx.key.as_ref().clone());
    let user = app.store.get_user(&key.user_id).await?;
    let group = match &key.group_id {
        Some(g) => app.store.get_group(g).await?,
        None => None,
    };
    Ok(ok(Me { key: KeyView::from(&key), user: user.as_ref().map(UserView::from), group: group.as_ref().map(GroupView::from) }))
}
