//! `GET /api/admin/plugins`: every loaded plugin with kind, name, version,
//! component hash, source, load time and call statistics.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::ok;
use crate::api::error::AdminError;
use crate::app::AppState;
use crate::auth::Admin;

pub async fn list(State(app): State<AppState>, Admin(_): Admin) -> Result<Json<Value>, AdminError> {
    Ok(ok(json!({
        "watchedDir": app.plugins.watched_dir().display().to_string(),
        "plugins": app.plugins.list(),
    })))
}
