//! Discovery for any valid key: `GET /api/models`, `GET /api/indexes`,
//! `GET /api/policies` — what this key may use.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::app::AppState;
use crate::auth::Authed;
use crate::chat::providers::model_permitted;
use crate::chat::request::ZERO_KNOWLEDGE;
use crate::chat::types::ModelId;
use gatehouse_plugin_host::Kind;

/// `GET /api/models`.
#[utoipa::path(
    get, path = "/api/models", tag = "discovery",
    responses((status = 200, description = "The configured models this key may use",
               body = crate::api::schema::Success<Vec<crate::api::schema::ModelInfo>>))
)]
pub async fn models(State(app): State<AppState>, Authed(ctx): Authed) -> Json<Value> {
    let cfg = app.config();
    let snapshot = app.plugins.snapshot();
    let mut out = Vec::new();
    for (name, p) in &cfg.providers {
        let loaded = snapshot.of_kind(&p.plugin, Kind::Provider).is_some();
        for m in &p.models {
            let Ok(id) = ModelId::parse(m) else { continue };
            if id.provider() == name && model_permitted(&ctx.key.allowed_models, &id) {
                out.push(json!({
                    "id": id.as_str(),
                    "provider": name,
                    "plugin": p.plugin,
                    "confidential": p.confidential,
                    "available": loaded,
                }));
            }
        }
    }
    Json(json!({"success": true, "data": out}))
}

/// `GET /api/indexes`.
#[utoipa::path(
    get, path = "/api/indexes", tag = "discovery",
    responses((status = 200, description = "`Zero-Knowledge` and the knowledge bases this key may use",
               body = crate::api::schema::Success<Vec<crate::api::schema::IndexInfo>>))
)]
pub async fn indexes(State(app): State<AppState>, Authed(ctx): Authed) -> Json<Value> {
    let cfg = app.config();
    let mut out = vec![json!({"name": ZERO_KNOWLEDGE, "description": "no retrieval: direct AI", "retriever": null})];
    for (name, ix) in &cfg.indexes {
        if ctx.key.allowed_indexes.as_ref().is_none_or(|a| a.contains(name)) {
            out.push(json!({"name": name, "description": ix.description, "retriever": ix.retriever}));
        }
    }
    Json(json!({"success": true, "data": out}))
}

/// `GET /api/policies`. A group's policy is listed to that group's keys
/// only (and to admin keys, with its `groupId`, though an admin key of
/// another group cannot select it): to any other key it does not exist, as
/// at request time (docs/decisions/tenant-policies.md).
#[utoipa::path(
    get, path = "/api/policies", tag = "discovery",
    responses((status = 200, description = "The loaded policies this key may select (`selectable: true`); to an admin key also every group's, with `groupId` and whether this key may select it",
               body = crate::api::schema::Success<Vec<crate::api::schema::PolicyInfo>>))
)]
pub async fn policies(State(app): State<AppState>, Authed(ctx): Authed) -> Json<Value> {
    let cfg = app.config();
    let snapshot = app.plugins.snapshot();
    let published = app.chat.tenants.policies();
    let group = ctx.key.group_id.as_deref();
    let mut out = Vec::new();
    for name in snapshot.names_of(Kind::Policy) {
        let allowed = ctx.key.allowed_policies.as_ref().is_none_or(|a| a.contains(&name));
        let visible = published.visible(&name, group);
        let owner = published.owner(&name);
        // Another group's policy is shown to admins only, and never as selectable.
        let shown = (allowed && visible) || (ctx.is_admin() && owner.is_some());
        if !shown {
            continue;
        }
        let p = snapshot.of_kind(&name, Kind::Policy);
        out.push(json!({
            "name": name,
            "version": p.as_ref().map(|p| p.version.clone()),
            "description": p.as_ref().map(|p| p.description.clone()),
            "default": name == cfg.policies.default,
            "keyDefault": ctx.key.default_policy.as_deref() == Some(name.as_str()),
            "groupId": owner,
            "selectable": allowed && visible,
        }));
    }
    Json(json!({"success": true, "data": out}))
}
