//! `/api/admin/*` management routes (admin key, nested error format).
//!
//! Responses are `{success: true, data: …}` with camelCase fields. Every
//! change is audited in the same commit.

pub mod groups;
pub mod indexes;
pub mod keys;
pub mod me;
pub mod overview;
pub mod plugins;
pub mod usage;
pub mod users;

use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::app::AppState;
use crate::auth::AuthContext;
use gatehouse_store::audit::Audit;
use gatehouse_store::model::AuditUser;

/// `{success: true, data}`.
pub fn ok<T: Serialize>(data: T) -> Json<Value> {
    Json(json!({"success": true, "data": data}))
}

/// The acting user for audit records, with the key that acted and the route.
pub async fn actor_audit(app: &AppState, ctx: &AuthContext, audit: Audit, endpoint: &str) -> Audit {
    let user = app
        .store
        .get_user(&ctx.key.user_id)
        .await
        .ok()
        .flatten()
        .map(|u| AuditUser::from(&u))
        .or_else(|| Some(AuditUser { id: ctx.key.user_id.clone(), name: String::new(), email: String::new() }));
    audit.user(user).meta("apiKeyId", ctx.key.id.clone()).meta("endpoint", endpoint)
}

/// For merge-patch fields (`Option<Option<T>>` with `#[serde(default)]`): a
/// field that is present becomes `Some` — `Some(None)` for an explicit `null`
/// (clear it) — and an absent one stays `None` (unchanged).
pub fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    Ok(Some(Option::deserialize(d)?))
}

/// New ids: a readable prefix and a time-ordered UUID.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

/// Trim and bound a free-text field.
pub fn text_field(name: &str, value: &str, max: usize, required: bool) -> Result<String, crate::error::AdminError> {
    let v = value.trim();
    if required && v.is_empty() {
        return Err(crate::error::AdminError::validation(format!("`{name}` is required")));
    }
    if v.chars().count() > max {
        return Err(crate::error::AdminError::validation(format!("`{name}` is longer than {max} characters")));
    }
    Ok(v.to_owned())
}
