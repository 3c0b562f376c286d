//! `GET /api/admin/plugins`: every loaded plugin with kind, name, version,
//! component hash, source, load time and call statistics, and every file of
//! the watched folder, serving or refused with why; the plugin registry's
//! routes are in [`registry`], a group's policies' in [`tenant`].

pub mod registry;
pub mod tenant;

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
    responses((status = 200, description = "`{watchedDir, plugins: [{kind, name, version, sha256, source, loadedAt, calls, fileError?, hidesPublished?, registryError?, ...}], files: [{file, status, plugin?, sha256?, size?, error?, previous?}], published: [{name, version, state, sha256, ...}]}`; a plugin's `source` is `{type: bundled}`, `{type: published, version}` or `{type: file, path, hostOnly: true}` (a file of this host's watched folder, which wins over the registry on this host only)",
               body = crate::api::schema::Success<crate::api::schema::JsonObject>))
)]
pub async fn list(State(app): State<AppState>, Admin(_): Admin) -> Result<Json<Value>, AdminError> {
    let published = match app.registry() {
        Ok(r) => r.registry.current().await?,
        Err(_) => Vec::new(),
    };
    Ok(ok(json!({
        "watchedDir": gatehouse_plugin_host::folder::shown_path(app.plugins.watched_dir()),
        "plugins": app.plugins.list(),
        "files": app.plugins.files(),
        "published": published,
    })))
}
