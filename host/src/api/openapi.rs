//! The OpenAPI 3.1 document, served at `GET /openapi.json`.
//!
//! It is generated from the code: every route is registered in
//! `routes.rs` through `utoipa-axum`'s `routes!`, which takes the path and
//! methods from the handler's `#[utoipa::path]` attribute, so the router and
//! the document cannot disagree. [`complete`] then adds what follows from the
//! layers rather than from a handler: the bearer security of every route but
//! the public ones (`auth::PUBLIC_ROUTES`), the 400 / 401 / 403 / 408 / 413 / 500 answers
//! in the error format of the path (`ErrorFormat::for_path`), and the
//! `x-request-id` header every response carries, and operation ids made
//! from method and path.

use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, HeaderBuilder, OpenApi, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, ToSchema};

use crate::auth::{self, Authed};
use crate::error::{ErrorFormat, FlatError, NestedError, OpenAiError};

/// Name of the security scheme in the document.
pub const BEARER: &str = "bearer";

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Gatehouse",
        description = "AI inference gateway: chat completions through failover chains, security policies and \
                       WebAssembly plugins. Every route but `GET /health` needs `Authorization: Bearer sk-…`; \
                       admin routes need an admin key.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    components(schemas(FlatError, NestedError, OpenAiError)),
    modifiers(&Bearer),
    tags(
        (name = "chat", description = "Chat completions (flat error format)"),
        (name = "openai", description = "OpenAI-compatible routes (OpenAI's error format)"),
        (name = "discovery", description = "What a key may use"),
        (name = "operations", description = "Health, this document, policy check"),
        (name = "receipts", description = "Signed receipts of completed requests"),
        (name = "admin", description = "Admin key only (nested error format)"),
        (name = "webhooks", description = "Webhook endpoints (admin key only)"),
    )
)]
pub struct ApiDoc;

struct Bearer;

impl Modify for Bearer {
    fn modify(&self, doc: &mut OpenApi) {
        let scheme = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .bearer_format("sk-…")
            .description(Some(
                "An API key `sk-…` in the `Authorization: Bearer sk-…` header (no other header or query parameter is read). \
                 Admin keys are made at first start or by `POST /api/admin/keys`.",
            ))
            .build();
        doc.components.get_or_insert_with(Default::default).add_security_scheme(BEARER, SecurityScheme::Http(scheme));
        doc.security = Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())]);
    }
}

fn error_ref(format: ErrorFormat) -> RefOr<utoipa::openapi::schema::Schema> {
    let name = match format {
        ErrorFormat::Flat => FlatError::name(),
        ErrorFormat::Nested => NestedError::name(),
        ErrorFormat::OpenAi => OpenAiError::name(),
    };
    RefOr::Ref(Ref::from_schema_name(name))
}

fn add_response(op: &mut Operation, status: &str, description: &str, format: ErrorFormat) {
    if op.responses.responses.contains_key(status) {
        return;
    }
    let resp = ResponseBuilder::new()
        .description(description)
        .content("application/json", ContentBuilder::new().schema(Some(error_ref(format))).build())
        .build();
    op.responses.responses.insert(status.to_owned(), RefOr::T(resp));
}

/// `post /api/admin/keys/{id}/revoke` → `post_api_admin_keys_id_revoke`: unique
/// because method and path are (handler names repeat across modules).
fn operation_id(method: &str, path: &str) -> String {
    let mut id = method.to_owned();
    for part in path.split(|c: char| !c.is_ascii_alphanumeric()).filter(|p| !p.is_empty()) {
        id.push('_');
        id.push_str(part);
    }
    id
}

/// Add to every operation what the layers do (see the module docs).
pub fn complete(doc: &mut OpenApi) {
    let request_id = HeaderBuilder::new()
        .schema(utoipa::openapi::ObjectBuilder::new().schema_type(utoipa::openapi::schema::Type::String))
        .description(Some("`req-…`: names the request in the server log"))
        .build();
    for (path, item) in doc.paths.paths.iter_mut() {
        let format = ErrorFormat::for_path(path);
        let public = auth::is_public(path);
        let ops = [
            ("get", &mut item.get),
            ("put", &mut item.put),
            ("post", &mut item.post),
            ("delete", &mut item.delete),
            ("patch", &mut item.patch),
        ];
        for (method, op) in ops.into_iter().filter_map(|(m, op)| op.as_mut().map(|op| (m, op))) {
            op.operation_id = Some(operation_id(method, path));
            if public {
                op.security = Some(Vec::new());
            } else {
                op.security = Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())]);
                add_response(op, "401", "Missing, malformed, unknown or revoked API key", format);
            }
            if op.tags.iter().flatten().any(|t| t == "admin" || t == "webhooks") {
                add_response(op, "403", "The key is not an admin key", format);
            }
            if path.contains('{') {
                add_response(op, "400", "A path parameter is not valid UTF-8 once percent-decoded", format);
            }
            if op.request_body.is_some() {
                add_response(op, "408", "The body did not arrive within `server.body_read_timeout_ms`", format);
                add_response(op, "413", "The body is larger than `server.max_body_bytes`", format);
            }
            add_response(op, "500", "Unexpected failure; the request id names it in the server log", format);
            for resp in op.responses.responses.values_mut() {
                if let RefOr::T(resp) = resp {
                    resp.headers.entry("x-request-id".to_owned()).or_insert_with(|| request_id.clone());
                }
            }
        }
    }
}

/// The document, serialised once, when the first router is built (it
/// depends on the code only, so every router of the process shares it). A
/// static rather than a request extension: an `Extension` layer would add it
/// to every request the server sees.
static DOCUMENT: OnceLock<String> = OnceLock::new();

/// Serialise `doc` for `GET /openapi.json`, unless a router built earlier did.
pub fn publish(doc: &OpenApi) {
    DOCUMENT.get_or_init(|| {
        doc.to_pretty_json().unwrap_or_else(|e| {
            tracing::error!(error = %e, "serialising the OpenAPI document failed");
            "{}".to_owned()
        })
    });
}

/// `GET /openapi.json`.
#[utoipa::path(
    get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "This document (OpenAPI 3.1)", body = serde_json::Value))
)]
pub async fn document(Authed(_): Authed) -> Response {
    let doc: &'static str = DOCUMENT.get().map_or("{}", String::as_str);
    ([(header::CONTENT_TYPE, "application/json")], doc).into_response()
}

#[cfg(test)]
mod tests {
    /// A route added with `.route(...)` would be served but missing from the
    /// document; the route tables register through `routes!` only.
    #[test]
    fn route_tables_register_only_documented_routes() {
        for (file, source) in [("api/routes.rs", include_str!("routes.rs")), ("api/webhooks.rs", include_str!("webhooks.rs"))] {
            for call in [".route(", ".route_service(", ".nest_service(", "routing::get", "routing::post"] {
                assert!(!source.contains(call), "{file} uses `{call}`: register routes with `routes!` so they are documented");
            }
        }
    }

    #[test]
    fn operation_ids_come_from_method_and_path() {
        assert_eq!(super::operation_id("post", "/api/admin/keys/{id}/revoke"), "post_api_admin_keys_id_revoke");
        assert_eq!(super::operation_id("get", "/openapi.json"), "get_openapi_json");
    }
}
