//! `GET /api/admin/plugins`: every loaded plugin with kind, name, version,
//! component hash, source, load time and call statistics, and every file of
//! the watched folder, serving or refused with why.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::ok;
use crate::app::AppState;
use crate::auth::Admin;
use crate::error::AdminError;

/// `GET /api/admin/plugins`.
#[utoipa::path(
    get, path = "/api/admin/plugins", tag = "admin",
    responses((status = 200, description = "`{watchedDir, plugins: [{kind, name, version, sha256, source, loadedAt, calls, fileError?, ...}], files: [{file, status, plugin?, sha256?, size?, error?, previous?}]}`",
               body = crate::api::schema::Success<crate::api::schema::JsonObject>))
)]
pub async fn list(State(app): State<AppState>, Admin(_): Admin) -> Result<Json<Value>, AdminError> {
    Ok(ok(json!({
        "watchedDir": gatehouse_plugin_host::folder::shown_path(app.plugins.watched_dir()),
        "plugins": app.plugins.list(),
        "files": app.plugins.files(),
    })))
}
