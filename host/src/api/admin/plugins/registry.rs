//! The plugin registry's routes: publish a component (`POST
//! /api/admin/plugins`), list a name's versions, activate one, roll back.
//!
//! A component is checked as a file drop is (size, world, `info()` with its
//! trial instantiation, the naming rules) before it is stored: a bad upload
//! is refused with why and never stored, so it replaces nothing anywhere.
//! A stored change is loaded on this host before the answer (the answer says
//! whether it serves here), and on every other host when the registry's
//! announcement reaches it. Every step is audited (`plugin_management`,
//! operations `plugin_publish`, `plugin_activate`, `plugin_rollback`), with
//! the version and the component's SHA-256.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::admin::{actor_audit, ok};
use crate::api::schema::{JsonObject, Success};
use crate::app::AppState;
use crate::auth::{Admin, AuthContext};
use crate::error::{AdminError, NestedError};
use gatehouse_store::audit::{Audit, category, kind, outcome};
use gatehouse_store::model::Severity;
use gatehouse_store::registry::{NewVersion, PluginState, PublishedPlugin};

/// The checks an upload passed before it was stored.
pub(super) const CHECKS: &[&str] = &["size", "world", "info", "instantiate"];

pub(super) fn registry(app: &AppState) -> Result<&std::sync::Arc<crate::plugin_registry::RegistrySync>, AdminError> {
    app.registry().as_ref().map_err(|why| {
        AdminError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            crate::error::code::SERVER_BUSY,
            format!("the plugin registry is unavailable: {why}"),
        )
    })
}

/// `?state=` of an upload.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PublishParams {
    /// `active` (default: it serves at once) or `shadow`.
    #[serde(default)]
    pub state: Option<String>,
}

/// How a stored version stands on this host after the change.
pub(super) fn on_this_host(app: &AppState, p: &PublishedPlugin) -> Value {
    let serving = app.plugins.list().into_iter().find(|s| s.name == p.name);
    let from_registry =
        serving.as_ref().is_some_and(|s| matches!(s.source, gatehouse_plugin_host::Source::Published { version } if version == p.version));
    json!({
        "serving": from_registry,
        "source": serving.as_ref().map(|s| serde_json::to_value(&s.source).unwrap_or(Value::Null)),
        "registryError": serving.and_then(|s| s.registry_error),
    })
}

pub(super) async fn audit(app: &AppState, ctx: &AuthContext, endpoint: &str, description: String, fields: &[(&str, Value)], failed: bool) {
    let mut a = Audit::new(kind::PLUGIN_MANAGEMENT, category::SYSTEM_INTEGRITY, description)
        .severity(if failed { Severity::Warning } else { Severity::Info })
        .outcome(if failed { outcome::FAILURE } else { outcome::SUCCESS });
    for (k, v) in fields {
        a = a.meta(k, v.clone());
    }
    let a = actor_audit(app, ctx, a, endpoint).await.build();
    if let Err(e) = app.store.append_audit(vec![a]).await {
        tracing::error!(error = %e, "auditing a plugin registry change failed");
    }
}

/// Sync this host now, so the answer reflects the change; a failed sync is
/// logged and retried by the follower.
pub(super) async fn sync_here(app: &AppState) {
    if let Ok(r) = app.registry()
        && let Err(e) = r.sync().await
    {
        tracing::error!(error = %e, "loading the plugin registry after a change failed; the follower retries");
    }
}

/// `POST /api/admin/plugins`: the body is the component (its content type is not read).
#[utoipa::path(
    post, path = "/api/admin/plugins", tag = "admin", params(PublishParams),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The component bytes (any content type: `application/wasm` is usual)"),
    responses(
        (status = 201, description = "Stored as the next version of the name its `info()` gives: `{plugin: {name, version, kind, pluginVersion, sha256, size, state, checks, uploadedAt, uploadedBy}, thisHost: {serving, source, registryError}}`", body = Success<JsonObject>),
        (status = 400, description = "The component failed a check (`VALIDATION_ERROR`, the message says which)", body = NestedError),
        (status = 409, description = "The name is another owner's (`CONFLICT`)", body = NestedError),
        (status = 503, description = "No plugin registry on this host", body = NestedError),
    )
)]
pub async fn publish(
    State(app): State<AppState>,
    Admin(ctx): Admin,
    Query(params): Query<PublishParams>,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), AdminError> {
    let sync = registry(&app)?.clone();
    let state = match params.state.as_deref() {
        None | Some("active") => PluginState::Active,
        Some("shadow") => PluginState::Shadow,
        Some(other) => return Err(AdminError::validation(format!("`state` is `active` or `shadow`, not {other:?}"))),
    };
    if body.is_empty() {
        return Err(AdminError::validation("the body is empty: send the component's bytes (Content-Type: application/wasm)"));
    }
    let sha256 = gatehouse_plugin_host::sha256_hex(&body);
    let runtime = app.plugins.clone();
    let bytes = body.clone();
    let checked = tokio::task::spawn_blocking(move || runtime.check_upload(&bytes)).await.map_err(|_| AdminError::internal())?;
    let summary = match checked {
        Ok(s) => s,
        Err(why) => {
            let why = gatehouse_plugin_host::folder::shown_text(&why);
            let fields = [("operation", json!("plugin_publish")), ("sha256", json!(sha256)), ("error", json!(why))];
            audit(&app, &ctx, "POST /api/admin/plugins", format!("Plugin upload refused: {why}"), &fields, true).await;
            return Err(AdminError::validation(format!("the component was not published: {why}")));
        }
    };
    let upload = NewVersion {
        name: summary.name.clone(),
        kind: summary.kind.as_str().to_owned(),
        plugin_version: summary.version.clone(),
        sha256: sha256.clone(),
        checks: CHECKS.iter().map(|c| (*c).to_owned()).collect(),
        uploaded_by: Some(ctx.key.user_id.clone()),
        group_id: None,
        state,
        bytes: body.to_vec(),
    };
    let stored = sync.registry.publish(upload).await?;
    let fields = [
        ("operation", json!("plugin_publish")),
        ("plugin", json!(stored.name)),
        ("version", json!(stored.version)),
        ("state", json!(stored.state.as_str())),
        ("kind", json!(stored.kind)),
        ("sha256", json!(stored.sha256)),
    ];
    let description = format!("Plugin {} version {} published ({})", stored.name, stored.version, stored.state.as_str());
    audit(&app, &ctx, "POST /api/admin/plugins", description, &fields, false).await;
    sync_here(&app).await;
    Ok((StatusCode::CREATED, ok(json!({"plugin": stored, "thisHost": on_this_host(&app, &stored)}))))
}

/// `GET /api/admin/plugins/{name}/versions`.
#[utoipa::path(
    get, path = "/api/admin/plugins/{name}/versions", tag = "admin", params(("name" = String, Path, description = "The plugin's name")),
    responses(
        (status = 200, description = "Every stored version, oldest first: `[{name, version, kind, pluginVersion, sha256, size, state, checks, uploadedAt, uploadedBy}]`", body = Success<Vec<JsonObject>>),
        (status = 404, description = "No version of that name was published", body = NestedError),
    )
)]
pub async fn versions(State(app): State<AppState>, Admin(_): Admin, Path(name): Path<String>) -> Result<Json<Value>, AdminError> {
    let versions = registry(&app)?.registry.versions(&name).await?;
    if versions.is_empty() {
        return Err(AdminError::not_found(format!("no version of plugin {name} was published")));
    }
    Ok(ok(versions))
}

/// The optional body of activate and rollback: `{"version": n}`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VersionBody {
    /// The version to make active (rollback: default the one below the active version).
    #[serde(default)]
    pub version: Option<u32>,
}

pub(super) fn version_body(body: &Bytes) -> Result<VersionBody, AdminError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(VersionBody::default());
    }
    serde_json::from_slice(body)
        .map_err(|e| AdminError::validation(format!("invalid body: {e}; send {{\"version\": <number>}} or nothing")))
}

/// `POST /api/admin/plugins/{name}/rollback`.
#[utoipa::path(
    post, path = "/api/admin/plugins/{name}/rollback", tag = "admin", params(("name" = String, Path, description = "The plugin's name")),
    request_body(content = VersionBody, description = "Optional: `{\"version\": n}`; without it, the version below the active one"),
    responses(
        (status = 200, description = "The version now active: `{plugin, thisHost}`", body = Success<JsonObject>),
        (status = 404, description = "No such name or version", body = NestedError),
        (status = 409, description = "No version before the active one (`CONFLICT`)", body = NestedError),
    )
)]
pub async fn rollback(
    State(app): State<AppState>,
    Admin(ctx): Admin,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, AdminError> {
    let to = version_body(&body)?.version;
    let active = registry(&app)?.registry.rollback(&name, to).await?;
    changed(&app, &ctx, "rollback", &format!("POST /api/admin/plugins/{name}/rollback"), active).await
}

/// `POST /api/admin/plugins/{name}/activate`.
#[utoipa::path(
    post, path = "/api/admin/plugins/{name}/activate", tag = "admin", params(("name" = String, Path, description = "The plugin's name")),
    request_body = VersionBody,
    responses(
        (status = 200, description = "The version now active: `{plugin, thisHost}`", body = Success<JsonObject>),
        (status = 400, description = "No `version` given", body = NestedError),
        (status = 404, description = "No such name or version", body = NestedError),
    )
)]
pub async fn activate(
    State(app): State<AppState>,
    Admin(ctx): Admin,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, AdminError> {
    let version = version_body(&body)?.version.ok_or_else(|| AdminError::validation("`version` is required"))?;
    let active = registry(&app)?.registry.activate(&name, version).await?;
    changed(&app, &ctx, "activate", &format!("POST /api/admin/plugins/{name}/activate"), active).await
}

async fn changed(
    app: &AppState,
    ctx: &AuthContext,
    step: &str,
    endpoint: &str,
    active: PublishedPlugin,
) -> Result<Json<Value>, AdminError> {
    let fields = [
        ("operation", json!(format!("plugin_{step}"))),
        ("plugin", json!(active.name)),
        ("version", json!(active.version)),
        ("sha256", json!(active.sha256)),
    ];
    let description = format!("Plugin {} version {} made active ({step})", active.name, active.version);
    audit(app, ctx, endpoint, description, &fields, false).await;
    sync_here(app).await;
    Ok(ok(json!({"plugin": active, "thisHost": on_this_host(app, &active)})))
}
