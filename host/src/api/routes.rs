//! The route table: every route of the API on one screen.

use axum::extract::DefaultBodyLimit;
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Router, middleware};
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::admin::{groups, indexes, keys, me, overview, plugins, usage, users};
use super::{audit_logs, chat, discovery, group_list, health, metrics, openapi, receipts};
use crate::app::AppState;
use crate::error::{AdminError, ChatError, ErrorFormat, code, openai_error, text};

/// Every route with its handler. Paths and methods come from each handler's
/// `#[utoipa::path]`, so this table is also the OpenAPI document.
fn routes(app: &AppState) -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        // Public
        .routes(routes!(health::health))
        // Operations
        .routes(routes!(metrics::metrics))
        .routes(routes!(openapi::document))
        .routes(routes!(chat::policy_check))
        // Discovery
        .routes(routes!(discovery::models))
        .routes(routes!(discovery::indexes))
        .routes(routes!(discovery::policies))
        // Receipts
        .routes(routes!(receipts::public_key))
        .routes(routes!(receipts::get))
        // Admin reads (their own rate-limit set)
        .merge(
            OpenApiRouter::new()
                .routes(routes!(audit_logs::audit_logs))
                .routes(routes!(group_list::groups))
                .route_layer(middleware::from_fn_with_state(app.clone(), super::middleware::admin_read_limit)),
        )
        // Chat
        .routes(routes!(chat::completions))
        .routes(routes!(chat::openai_completions))
        .routes(routes!(chat::openai_models))
        // Admin: users, groups, keys, usage, plugins, events, audit
        .routes(routes!(users::create, users::list))
        .routes(routes!(users::get, users::update, users::delete))
        .routes(routes!(groups::create, groups::list))
        .routes(routes!(groups::get, groups::update, groups::delete))
        .routes(routes!(groups::add_member))
        .routes(routes!(groups::remove_member))
        .routes(routes!(keys::create, keys::list))
        .routes(routes!(keys::get, keys::update, keys::delete))
        .routes(routes!(keys::revoke))
        .routes(routes!(usage::usage))
        .routes(routes!(usage::series))
        .routes(routes!(me::me))
        .routes(routes!(overview::overview))
        .routes(routes!(plugins::list, plugins::registry::publish))
        .routes(routes!(plugins::registry::versions))
        .routes(routes!(plugins::registry::rollback))
        .routes(routes!(plugins::registry::activate))
        .routes(routes!(plugins::tenant::publish, plugins::tenant::list))
        .routes(routes!(plugins::tenant::versions))
        .routes(routes!(plugins::tenant::shadow, plugins::tenant::shadow_stats))
        .routes(routes!(plugins::tenant::activate))
        .routes(routes!(plugins::tenant::rollback))
        .routes(routes!(plugins::tenant::set_base))
        .routes(routes!(indexes::create, indexes::list))
        .routes(routes!(indexes::delete))
        .routes(routes!(indexes::reindex))
        .routes(routes!(usage::events))
        .routes(routes!(audit_logs::verify_audit))
        // Webhooks (admin)
        .merge(super::webhooks::router(app.webhooks.clone()))
}

/// Build the router. One middleware runs the request id and metrics, authentication and body intake
/// (`api::middleware::per_request`); inside it, the extractors' body limit.
pub fn router(app: AppState) -> Router {
    // The extractors' outer bound: the intake layer caps each route's body as
    // it arrives (`server.max_body_bytes`, or `plugins.max_component_mb` for a
    // component upload), so this only has to let the largest of them through.
    let max_body = {
        let cfg = app.config();
        cfg.server.max_body_bytes.max((cfg.plugins.max_component_mb as usize).saturating_mul(1024 * 1024))
    };
    let (router, mut doc) = routes(&app).split_for_parts();
    openapi::complete(&mut doc);
    openapi::publish(&doc);
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn_with_state(app.clone(), super::middleware::per_request))
        .with_state(app)
        // The console's static pages: outside the authentication layer (they
        // hold no data; every call they make needs an admin key).
        .merge(super::console::router())
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
