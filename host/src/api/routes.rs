//! The route table: every route of the API on one screen.

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, Uri};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::admin::{groups, keys, usage, users};
use super::error::{AdminError, ChatError, ErrorFormat, code, openai_error, text};
use super::{health, request_id};
use crate::app::AppState;
use crate::auth;

/// Build the router. Layers run outermost first: request id, body limit, authentication.
pub fn router(app: AppState) -> Router {
    let max_body = app.config().server.max_body_bytes;
    Router::new()
        // Public
        .route("/health", get(health::health))
        // Operations
        .route("/metrics", get(crate::metrics::handler))
        .route("/api/policy/check", post(crate::chat::guard::policy_check))
        // Discovery
        .route("/api/models", get(super::discovery::models))
        .route("/api/indexes", get(super::discovery::indexes))
        .route("/api/policies", get(super::discovery::policies))
        // Receipts
        .route("/api/receipts/public-key", get(super::receipts::public_key))
        .route("/api/receipts/{bundle_id}", get(super::receipts::get))
        // Admin reads (their own rate-limit set)
        .merge(
            Router::new()
                .route("/audit-logs", get(super::lists::audit_logs))
                .route("/groups", get(super::lists::groups))
                .route_layer(middleware::from_fn_with_state(app.clone(), super::lists::admin_read_limit)),
        )
        // Chat
        .route("/chat/completions", post(crate::chat::handler::completions))
        .route("/api/external/v1/chat/completions", post(crate::chat::openai::completions))
        .route("/api/external/v1/models", get(crate::chat::openai::models))
        // Admin: users, groups, keys, usage, events
        .route("/api/admin/users", post(users::create).get(users::list))
        .route("/api/admin/users/{id}", get(users::get))
        .route("/api/admin/groups", post(groups::create))
        .route("/api/admin/groups/{id}", axum::routing::put(groups::update))
        .route("/api/admin/groups/{id}/members", post(groups::add_member))
        .route("/api/admin/groups/{id}/members/{user_id}", axum::routing::delete(groups::remove_member))
        .route("/api/admin/keys", post(keys::create).get(keys::list))
        .route("/api/admin/keys/{id}", get(keys::get).put(keys::update))
        .route("/api/admin/keys/{id}/revoke", post(keys::revoke))
        .route("/api/admin/usage", get(usage::usage))
        .route("/api/admin/plugins", get(super::admin::plugins::list))
        .route("/api/admin/events", get(usage::events))
        .route("/api/admin/audit/verify", get(super::lists::verify_audit))
        // Webhooks (admin)
        .merge(crate::webhooks::routes::router(app.webhooks.clone()))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(app.clone(), super::intake::layer))
        .layer(middleware::from_fn_with_state(app.clone(), auth::layer))
        .layer(middleware::from_fn(crate::metrics::layer))
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn(request_id::layer))
        .with_state(app)
}

async fn not_found(uri: Uri) -> Response {
    let msg = format!("no route {}", uri.path());
    match ErrorFormat::for_path(uri.path()) {
        ErrorFormat::Flat => ChatError::new(axum::http::StatusCode::NOT_FOUND, text::NOT_FOUND, msg).into_response(),
        ErrorFormat::Nested => AdminError::not_found(msg).into_response(),
        ErrorFormat::OpenAi => openai_error(axum::http::StatusCode::NOT_FOUND, "invalid_request_error", "not_found", &msg),
    }
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let msg = format!("{method} is not allowed on {}", uri.path());
    let status = axum::http::StatusCode::METHOD_NOT_ALLOWED;
    match ErrorFormat::for_path(uri.path()) {
        ErrorFormat::Flat => ChatError::new(status, text::INVALID_REQUEST, msg).into_response(),
        ErrorFormat::Nested => AdminError::new(status, code::VALIDATION_ERROR, msg).into_response(),
        ErrorFormat::OpenAi => openai_error(status, "invalid_request_error", "method_not_allowed", &msg),
    }
}
