//! A group's policies (`/api/admin/groups/{id}/policies…`): its tenant admin
//! (a key with `tenantAdmin` and that `groupId`) or an operator admin
//! publishes, lists, shadows, activates and rolls back the group's policy
//! components, under names registered to the group
//! (docs/decisions/tenant-policies.md).
//!
//! A name is the group's when its first version was published here; any
//! other name is 409: a bundled or built-in one, a watched-folder file, one
//! the config names, an operator's published plugin or another group's.
//! Every step is audited (`plugin_management`, operations
//! `tenant_policy_publish`, `…_shadow`, `…_activate`, `…_rollback`) with the
//! group, the version, the component's SHA-256 and the policy hash that
//! `smltp_policy_hash` reports for it.
//!
//! An admin (never the tenant admin) names the base policy a group's
//! policies are layered on (`PUT …/base-policy`): an operator's policy loaded
//! here, not a group's; without one the base is `policies.default`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::registry::{CHECKS, PublishParams, VersionBody, audit, on_this_host, registry, sync_here, version_body};
use crate::api::admin::ok;
use crate::api::schema::{JsonObject, Success};
use crate::app::AppState;
use crate::auth::{Admin, AdminOrTenant, AuthContext};
use crate::error::{AdminError, NestedError};
use gatehouse_plugin_host::{Kind, Source};
use gatehouse_store::registry::{HostShadowCounts, NewVersion, PluginState, PublishedPlugin, ShadowCounts};

/// The group the caller may administer, which must exist: 403 for a tenant
/// admin of another group, 404 for an unknown group.
async fn group(app: &AppState, ctx: &AuthContext, id: &str) -> Result<(), AdminError> {
    if !ctx.may_administer(id) {
        return Err(AdminError::new(
            StatusCode::FORBIDDEN,
            crate::error::code::INSUFFICIENT_PERMISSIONS,
            "a tenant admin key administers the policies of its own group only",
        ));
    }
    match app.store.get_group(id).await? {
        Some(_) => Ok(()),
        None => Err(AdminError::not_found(format!("no group {id}"))),
    }
}

/// The policy hash a version reports as `smltp_policy_hash`: its component
/// and the config the operator gives it, as the chat path computes it.
fn policy_hash(app: &AppState, p: &PublishedPlugin) -> String {
    let cfg = app.config().plugins.plugin_config(&p.name).to_string();
    gatehouse_store::receipts::sha256_hex(format!("{}\n{cfg}", p.sha256).as_bytes())
}

/// A version as the API shows it: the registry's record and its policy hash.
fn shown(app: &AppState, p: &PublishedPlugin) -> Value {
    let mut v = serde_json::to_value(p).unwrap_or(Value::Null);
    v["policyHash"] = json!(policy_hash(app, p));
    v
}

/// Why `name` cannot be registered to a group, when it is not the registry's
/// to give: a bundled or built-in name, a watched-folder file, or a name the
/// config uses (the server default, a plugin's settings).
fn reserved(app: &AppState, name: &str) -> Option<String> {
    let cfg = app.config();
    if let Some(why) = app.plugins.publish_refusal(name, Kind::Policy) {
        return Some(why);
    }
    if let Some(p) = app.plugins.list().into_iter().find(|p| p.name == name && !matches!(p.source, Source::Published { .. })) {
        let from = if matches!(p.source, Source::Bundled) { "a bundled plugin" } else { "a plugin file of the operator's" };
        return Some(format!("{name} is the name of {from}; choose another name (the component's `info()` gives it)"));
    }
    if cfg.policies.default == name || cfg.plugins.settings.contains_key(name) {
        return Some(format!("{name} is a name the server's config uses; choose another name (the component's `info()` gives it)"));
    }
    None
}

/// Did the upload check refuse the component for its name (a built-in or
/// bundled policy's)? Those refusals are 409 here, as every other name clash.
fn name_refusal(app: &AppState, why: &str) -> bool {
    let loaded = app.plugins.snapshot().names_of(Kind::Policy);
    ["internal", "public", "confidential"]
        .into_iter()
        .map(str::to_owned)
        .chain(loaded)
        .any(|n| app.plugins.publish_refusal(&n, Kind::Policy).as_deref() == Some(why))
}

/// A name's versions, which must be the group's: 404 otherwise (another
/// group's names are not shown to exist).
async fn own_versions(app: &AppState, id: &str, name: &str) -> Result<Vec<PublishedPlugin>, AdminError> {
    let versions = registry(app)?.registry.versions(name).await?;
    if versions.first().is_none_or(|v| v.group_id.as_deref() != Some(id)) {
        return Err(AdminError::not_found(format!("group {id} has no policy {name}")));
    }
    Ok(versions)
}

/// `POST /api/admin/groups/{id}/policies`: the body is the policy component.
#[utoipa::path(
    post, path = "/api/admin/groups/{id}/policies", tag = "admin",
    params(("id" = String, Path, description = "`grp_…`"), PublishParams),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The policy component's bytes (any content type: `application/wasm` is usual)"),
    responses(
        (status = 201, description = "Stored as the next version of the name its `info()` gives, registered to the group: `{plugin: {name, version, kind, pluginVersion, sha256, policyHash, size, state, checks, uploadedAt, uploadedBy, groupId}, thisHost: {serving, source, registryError}}`", body = Success<JsonObject>),
        (status = 400, description = "The component failed a check, or is not a policy (`VALIDATION_ERROR`)", body = NestedError),
        (status = 403, description = "Neither an admin key nor this group's tenant admin key", body = NestedError),
        (status = 404, description = "No such group", body = NestedError),
        (status = 409, description = "The name is taken: bundled, built in, a file, in the config, the operator's or another group's (`CONFLICT`)", body = NestedError),
        (status = 503, description = "No plugin registry on this host", body = NestedError),
    )
)]
pub async fn publish(
    State(app): State<AppState>,
    AdminOrTenant(ctx): AdminOrTenant,
    Path(id): Path<String>,
    Query(params): Query<PublishParams>,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), AdminError> {
    group(&app, &ctx, &id).await?;
    let sync = registry(&app)?.clone();
    let state = match params.state.as_deref() {
        None | Some("active") => PluginState::Active,
        Some("shadow") => PluginState::Shadow,
        Some(other) => return Err(AdminError::validation(format!("`state` is `active` or `shadow`, not {other:?}"))),
    };
    if body.is_empty() {
        return Err(AdminError::validation("the body is empty: send the policy component's bytes (Content-Type: application/wasm)"));
    }
    let endpoint = format!("POST /api/admin/groups/{id}/policies");
    let sha256 = gatehouse_plugin_host::sha256_hex(&body);
    let runtime = app.plugins.clone();
    let bytes = body.clone();
    let checked = tokio::task::spawn_blocking(move || runtime.check_upload(&bytes)).await.map_err(|_| AdminError::internal())?;
    let refused = |why: String| {
        [("operation", json!("tenant_policy_publish")), ("groupId", json!(id)), ("sha256", json!(sha256)), ("error", json!(why))]
    };
    let summary = match checked {
        Ok(s) if s.kind == Kind::Policy => s,
        Ok(s) => {
            let why = format!("{} is a {} plugin; a group publishes policy components only", s.name, s.kind.as_str());
            audit(&app, &ctx, &endpoint, format!("Tenant policy upload refused: {why}"), &refused(why.clone()), true).await;
            return Err(AdminError::validation(format!("the component was not published: {why}")));
        }
        Err(why) => {
            let taken = name_refusal(&app, &why);
            let why = gatehouse_plugin_host::folder::shown_text(&why);
            audit(&app, &ctx, &endpoint, format!("Tenant policy upload refused: {why}"), &refused(why.clone()), true).await;
            return Err(if taken {
                AdminError::conflict(why)
            } else {
                AdminError::validation(format!("the component was not published: {why}"))
            });
        }
    };
    if let Some(why) = reserved(&app, &summary.name) {
        audit(&app, &ctx, &endpoint, format!("Tenant policy upload refused: {why}"), &refused(why.clone()), true).await;
        return Err(AdminError::conflict(why));
    }
    let upload = NewVersion {
        name: summary.name.clone(),
        kind: summary.kind.as_str().to_owned(),
        plugin_version: summary.version.clone(),
        sha256: sha256.clone(),
        checks: CHECKS.iter().map(|c| (*c).to_owned()).collect(),
        uploaded_by: Some(ctx.key.user_id.clone()),
        group_id: Some(id.clone()),
        state,
        bytes: body.to_vec(),
    };
    let stored = match sync.registry.publish(upload).await {
        Ok(s) => s,
        Err(e) => {
            let mut e = AdminError::from(e);
            // Whose name it is is another tenant's business.
            if e.status == StatusCode::CONFLICT && !ctx.is_admin() {
                e.message = format!("the name {} is taken; choose another name (the component's `info()` gives it)", summary.name);
            }
            audit(&app, &ctx, &endpoint, format!("Tenant policy upload refused: {}", e.message), &refused(e.message.clone()), true).await;
            return Err(e);
        }
    };
    let fields = step_fields(&app, "publish", &id, &stored);
    let description = format!("Policy {} version {} of group {id} published ({})", stored.name, stored.version, stored.state.as_str());
    audit(&app, &ctx, &endpoint, description, &fields, false).await;
    sync_here(&app).await;
    Ok((StatusCode::CREATED, ok(json!({"plugin": shown(&app, &stored), "thisHost": on_this_host(&app, &stored)}))))
}

fn step_fields(app: &AppState, step: &str, group: &str, p: &PublishedPlugin) -> [(&'static str, Value); 7] {
    [
        ("operation", json!(format!("tenant_policy_{step}"))),
        ("groupId", json!(group)),
        ("plugin", json!(p.name)),
        ("version", json!(p.version)),
        ("state", json!(p.state.as_str())),
        ("sha256", json!(p.sha256)),
        ("policyHash", json!(policy_hash(app, p))),
    ]
}

/// `GET /api/admin/groups/{id}/policies`.
#[utoipa::path(
    get, path = "/api/admin/groups/{id}/policies", tag = "admin", params(("id" = String, Path, description = "`grp_…`")),
    responses(
        (status = 200, description = "The group's policies: `{groupId, basePolicy, basePolicySource, policies: [{name, active, shadow}]}`, `active` and `shadow` the versions in those states (with `policyHash`) or null; `basePolicy` is the policy each is layered on, `basePolicySource` `group` (an admin named it: `PUT …/base-policy`) or `default` (`policies.default`)", body = Success<JsonObject>),
        (status = 403, description = "Neither an admin key nor this group's tenant admin key", body = NestedError),
        (status = 404, description = "No such group", body = NestedError),
    )
)]
pub async fn list(
    State(app): State<AppState>,
    AdminOrTenant(ctx): AdminOrTenant,
    Path(id): Path<String>,
) -> Result<Json<Value>, AdminError> {
    group(&app, &ctx, &id).await?;
    let current = registry(&app)?.registry.current().await?;
    let mut names: Vec<&str> = current.iter().filter(|p| p.group_id.as_deref() == Some(id.as_str())).map(|p| p.name.as_str()).collect();
    names.dedup();
    let in_state = |name: &str, state: PluginState| current.iter().find(|p| p.name == name && p.state == state).map(|p| shown(&app, p));
    let policies: Vec<Value> = names
        .into_iter()
        .map(|n| json!({"name": n, "active": in_state(n, PluginState::Active), "shadow": in_state(n, PluginState::Shadow)}))
        .collect();
    let mut out = base_view(&app, &id);
    out["policies"] = json!(policies);
    Ok(ok(out))
}

/// A group's base policy as the API shows it: `{groupId, basePolicy, basePolicySource}`,
/// the source `group` (an admin named it) or `default` (`policies.default`).
fn base_view(app: &AppState, id: &str) -> Value {
    let published = app.chat.tenants.policies();
    let default = app.config().policies.default.clone();
    let source = if published.bases.contains_key(id) { "group" } else { "default" };
    json!({"groupId": id, "basePolicy": published.base_of(id, &default), "basePolicySource": source})
}

/// Why `name` cannot be a group's base: a group's policy (a tenant policy
/// never runs alone, nor under another's), or no policy of that name is
/// loaded here. The message names the policies that could be.
fn base_problem(app: &AppState, name: &str) -> Option<String> {
    let published = app.chat.tenants.policies();
    let snapshot = app.plugins.snapshot();
    let candidates = || -> String {
        let names: Vec<String> = snapshot.names_of(Kind::Policy).into_iter().filter(|n| published.owner(n).is_none()).collect();
        if names.is_empty() { "none".to_owned() } else { names.join(", ") }
    };
    if published.owner(name).is_some() {
        return Some(format!("{name} is a group's policy; a base is one of the operator's policies ({})", candidates()));
    }
    if snapshot.of_kind(name, Kind::Policy).is_none() {
        return Some(format!("no policy {name} is loaded; name one of the operator's policies ({})", candidates()));
    }
    None
}

/// The body of `PUT /api/admin/groups/{id}/base-policy`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BaseBody {
    /// The operator's policy the group's policies are layered on; `null` (or
    /// absent) goes back to the server default, `policies.default`.
    pub base_policy: Option<String>,
}

/// `PUT /api/admin/groups/{id}/base-policy`.
#[utoipa::path(
    put, path = "/api/admin/groups/{id}/base-policy", tag = "admin",
    params(("id" = String, Path, description = "`grp_…`")),
    request_body = BaseBody,
    responses(
        (status = 200, description = "The group's base policy now: `{groupId, basePolicy, basePolicySource}`, the source `group` (named here) or `default` (`policies.default`); every host layers the group's policies on it from its next registry sync", body = Success<JsonObject>),
        (status = 400, description = "Not a policy loaded on this host, or a group's policy (`VALIDATION_ERROR`, naming it); or a malformed body", body = NestedError),
        (status = 403, description = "Not an admin key (a tenant admin does not choose its own base)", body = NestedError),
        (status = 404, description = "No such group", body = NestedError),
        (status = 503, description = "No plugin registry on this host", body = NestedError),
    )
)]
pub async fn set_base(
    State(app): State<AppState>,
    Admin(ctx): Admin,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, AdminError> {
    group(&app, &ctx, &id).await?;
    let sync = registry(&app)?.clone();
    let body: BaseBody = serde_json::from_slice(&body).map_err(|e| {
        AdminError::validation(format!(
            "invalid body: {e}; send {{\"basePolicy\": \"<policy>\"}}, or {{\"basePolicy\": null}} for the server default"
        ))
    })?;
    let endpoint = format!("PUT /api/admin/groups/{id}/base-policy");
    if let Some(name) = &body.base_policy
        && let Some(why) = base_problem(&app, name)
    {
        let fields =
            [("operation", json!("tenant_policy_base")), ("groupId", json!(id)), ("basePolicy", json!(name)), ("error", json!(why))];
        audit(&app, &ctx, &endpoint, format!("Base policy of group {id} refused: {why}"), &fields, true).await;
        return Err(AdminError::validation(format!("`basePolicy`: {why}")));
    }
    sync.registry.set_group_base(&id, body.base_policy.as_deref()).await?;
    let default = app.config().policies.default.clone();
    let now = body.base_policy.clone().unwrap_or(default);
    let fields = [("operation", json!("tenant_policy_base")), ("groupId", json!(id)), ("basePolicy", json!(now))];
    audit(&app, &ctx, &endpoint, format!("Base policy of group {id} set to {now}"), &fields, false).await;
    sync_here(&app).await;
    Ok(ok(base_view(&app, &id)))
}

/// `GET /api/admin/groups/{id}/policies/{name}/versions`.
#[utoipa::path(
    get, path = "/api/admin/groups/{id}/policies/{name}/versions", tag = "admin",
    params(("id" = String, Path, description = "`grp_…`"), ("name" = String, Path, description = "The policy's name")),
    responses(
        (status = 200, description = "Every stored version, oldest first, each with its `policyHash`", body = Success<Vec<JsonObject>>),
        (status = 403, description = "Neither an admin key nor this group's tenant admin key", body = NestedError),
        (status = 404, description = "No such group, or no policy of that name in it", body = NestedError),
    )
)]
pub async fn versions(
    State(app): State<AppState>,
    AdminOrTenant(ctx): AdminOrTenant,
    Path((id, name)): Path<(String, String)>,
) -> Result<Json<Value>, AdminError> {
    group(&app, &ctx, &id).await?;
    let versions = own_versions(&app, &id, &name).await?;
    Ok(ok(versions.iter().map(|v| shown(&app, v)).collect::<Vec<_>>()))
}

/// `POST /api/admin/groups/{id}/policies/{name}/shadow`.
#[utoipa::path(
    post, path = "/api/admin/groups/{id}/policies/{name}/shadow", tag = "admin",
    params(("id" = String, Path, description = "`grp_…`"), ("name" = String, Path, description = "The policy's name")),
    request_body = VersionBody,
    responses(
        (status = 200, description = "The version now in the shadow: `{plugin, thisHost}`", body = Success<JsonObject>),
        (status = 400, description = "No `version` given", body = NestedError),
        (status = 403, description = "Neither an admin key nor this group's tenant admin key", body = NestedError),
        (status = 404, description = "No such group, policy or version", body = NestedError),
        (status = 409, description = "That version is the active one (`CONFLICT`)", body = NestedError),
    )
)]
pub async fn shadow(
    State(app): State<AppState>,
    AdminOrTenant(ctx): AdminOrTenant,
    Path((id, name)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Value>, AdminError> {
    group(&app, &ctx, &id).await?;
    let version = version_body(&body)?.version.ok_or_else(|| AdminError::validation("`version` is required"))?;
    own_versions(&app, &id, &name).await?;
    let target = registry(&app)?.registry.shadow(&name, version).await?;
    changed(&app, &ctx, "shadow", &id, target).await
}

/// `POST /api/admin/groups/{id}/policies/{name}/activate`.
#[utoipa::path(
    post, path = "/api/admin/groups/{id}/policies/{name}/activate", tag = "admin",
    params(("id" = String, Path, description = "`grp_…`"), ("name" = String, Path, description = "The policy's name")),
    request_body = VersionBody,
    responses(
        (status = 200, description = "The version now active (a shadow that is activated stops being the shadow): `{plugin, thisHost}`", body = Success<JsonObject>),
        (status = 400, description = "No `version` given", body = NestedError),
        (status = 403, description = "Neither an admin key nor this group's tenant admin key", body = NestedError),
        (status = 404, description = "No such group, policy or version", body = NestedError),
    )
)]
pub async fn activate(
    State(app): State<AppState>,
    AdminOrTenant(ctx): AdminOrTenant,
    Path((id, name)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Value>, AdminError> {
    group(&app, &ctx, &id).await?;
    let version = version_body(&body)?.version.ok_or_else(|| AdminError::validation("`version` is required"))?;
    own_versions(&app, &id, &name).await?;
    let active = registry(&app)?.registry.activate(&name, version).await?;
    changed(&app, &ctx, "activate", &id, active).await
}

/// `POST /api/admin/groups/{id}/policies/{name}/rollback`.
#[utoipa::path(
    post, path = "/api/admin/groups/{id}/policies/{name}/rollback", tag = "admin",
    params(("id" = String, Path, description = "`grp_…`"), ("name" = String, Path, description = "The policy's name")),
    request_body(content = VersionBody, description = "Optional: `{\"version\": n}`; without it, the version below the active one"),
    responses(
        (status = 200, description = "The version now active: `{plugin, thisHost}`", body = Success<JsonObject>),
        (status = 403, description = "Neither an admin key nor this group's tenant admin key", body = NestedError),
        (status = 404, description = "No such group, policy or version", body = NestedError),
        (status = 409, description = "No version before the active one (`CONFLICT`)", body = NestedError),
    )
)]
pub async fn rollback(
    State(app): State<AppState>,
    AdminOrTenant(ctx): AdminOrTenant,
    Path((id, name)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Value>, AdminError> {
    group(&app, &ctx, &id).await?;
    let to = version_body(&body)?.version;
    own_versions(&app, &id, &name).await?;
    let active = registry(&app)?.registry.rollback(&name, to).await?;
    changed(&app, &ctx, "rollback", &id, active).await
}

async fn changed(app: &AppState, ctx: &AuthContext, step: &str, group: &str, p: PublishedPlugin) -> Result<Json<Value>, AdminError> {
    let fields = step_fields(app, step, group, &p);
    let endpoint = format!("POST /api/admin/groups/{group}/policies/{}/{step}", p.name);
    let description = format!("Policy {} version {} of group {group} made {} ({step})", p.name, p.version, p.state.as_str());
    audit(app, ctx, &endpoint, description, &fields, false).await;
    sync_here(app).await;
    Ok(ok(json!({"plugin": shown(app, &p), "thisHost": on_this_host(app, &p)})))
}

/// `GET /api/admin/groups/{id}/policies/{name}/shadow`.
#[utoipa::path(
    get, path = "/api/admin/groups/{id}/policies/{name}/shadow", tag = "admin",
    params(("id" = String, Path, description = "`grp_…`"), ("name" = String, Path, description = "The policy's name")),
    responses(
        (status = 200, description = "What the shadow version did: on this host `{version, sha256, evaluated, agreed, disagreed, dropped, faults, samples: [{at, keyId, fields, active, shadow}]}` (counts kept across restarts; a sample holds the decisions' fields, a refusal reason as its length `reasonChars`, never request text, and only this host's since it started); per host `hosts: [{host, thisHost, counts, savedAt}]` (other hosts' as they last saved them) and their sum `fleet: {evaluated, agreed, disagreed, dropped, faults}`", body = Success<JsonObject>),
        (status = 403, description = "Neither an admin key nor this group's tenant admin key", body = NestedError),
        (status = 404, description = "No such group or policy, or no shadow version runs on this host", body = NestedError),
    )
)]
pub async fn shadow_stats(
    State(app): State<AppState>,
    AdminOrTenant(ctx): AdminOrTenant,
    Path((id, name)): Path<(String, String)>,
) -> Result<Json<Value>, AdminError> {
    group(&app, &ctx, &id).await?;
    own_versions(&app, &id, &name).await?;
    let Some((version, sha256, shadow)) = app.chat.tenants.shadow_of(&name) else {
        return Err(AdminError::not_found(format!("no shadow version of {name} has run on this host; shadow one with …/shadow")));
    };
    let mut v = shadow.stats.view();
    v["version"] = json!(version);
    v["sha256"] = json!(sha256);
    let saved = registry(&app)?.registry.shadow_counts(&name, version).await?;
    let (hosts, fleet) = fleet_view(app.receipts.key_id(), shadow.stats.counts(), &saved);
    v["hosts"] = hosts;
    v["fleet"] = json!(fleet);
    Ok(ok(v))
}

/// One shadow version across the fleet: this host's live counts, every other
/// host's last saved ones (each saves every few seconds and at shutdown), and
/// their sum. This host's own saved row is what it restarts from, never added.
fn fleet_view(me: &str, live: ShadowCounts, saved: &[HostShadowCounts]) -> (Value, ShadowCounts) {
    let mine = saved.iter().find(|h| h.host == me).map(|h| h.saved_at);
    let mut hosts = vec![json!({"host": me, "thisHost": true, "counts": live, "savedAt": mine})];
    let mut sum = live;
    for h in saved.iter().filter(|h| h.host != me) {
        sum = sum.plus(h.counts);
        hosts.push(json!({"host": h.host, "thisHost": false, "counts": h.counts, "savedAt": h.saved_at}));
    }
    (json!(hosts), sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_sums_this_hosts_live_counts_and_the_other_hosts_saved_ones() {
        let c = |evaluated, faults| ShadowCounts { evaluated, agreed: evaluated, disagreed: 0, dropped: 0, faults };
        let at = chrono::Utc::now();
        let saved = [
            HostShadowCounts { host: "me".into(), counts: c(4, 0), saved_at: at },
            HostShadowCounts { host: "other".into(), counts: c(10, 2), saved_at: at },
        ];
        let (hosts, fleet) = fleet_view("me", c(6, 1), &saved);
        assert_eq!(fleet, c(16, 3), "this host's saved 4 is part of its live 6, not added again");
        assert_eq!(hosts[0]["thisHost"], true);
        assert_eq!(hosts[0]["counts"]["evaluated"], 6);
        assert_eq!((hosts[1]["host"].as_str(), hosts[1]["counts"]["faults"].as_u64()), (Some("other"), Some(2)));
        let (hosts, fleet) = fleet_view("me", c(1, 0), &[]);
        assert_eq!((fleet, hosts[0]["savedAt"].clone()), (c(1, 0), Value::Null), "never saved yet");
    }
}
