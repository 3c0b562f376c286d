//! `GET /health`: public liveness and readiness.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::app::AppState;

/// `GET /health`: public (`auth::PUBLIC_ROUTES`).
#[utoipa::path(
    get, path = "/health", tag = "operations",
    responses(
        (status = 200, description = "Serving", body = crate::api::schema::Health),
        (status = 503, description = "Storage is failing (`status: degraded`)", body = crate::api::schema::Health),
    )
)]
pub async fn health(State(app): State<AppState>) -> (StatusCode, Json<Value>) {
    // Not only "answers reads": a store whose last commit failed is
    // degraded until one succeeds (docs/decisions/storage-failures.md).
    let storage_ok = app.store.healthy();
    let status = if storage_ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let mut storage = json!({ "ok": storage_ok });
    if let Some(why) = app.store.storage_failure() {
        storage["error"] = json!(format!("the last commit failed: {why}"));
    }
    (
        status,
        Json(json!({
            "status": if storage_ok { "ok" } else { "degraded" },
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_seconds": app.started.elapsed().as_secs(),
            "plugins": { "loaded": app.plugins.snapshot().len() },
            "storage": storage,
        })),
    )
}
