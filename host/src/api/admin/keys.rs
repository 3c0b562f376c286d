//! API keys under `/api/admin/keys`. The secret is returned once, by create.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{actor_audit, new_id, ok, text_field};
use crate::api::json::AdminJson;
use crate::api::schema::Success;
use crate::app::AppState;
use crate::auth::Admin;
use crate::auth::keys::ApiKeySecret;
use crate::error::{AdminError, NestedError};
use gatehouse_store::audit::{Audit, category, kind};
use gatehouse_store::model::{ApiKeyRecord, LimitOverrides};

/// Options a key carries; shared by create and update. An update is a merge
/// patch: an absent field keeps its value, `null` clears it (a restriction
/// lifted, a default or group removed), a value replaces it; `limits` merges
/// per field the same way.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KeyOptions {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub admin: Option<bool>,
    /// A tenant's administrator: needs a `groupId`; never with `admin`. It may
    /// call the tenant-policy routes of its own group and read that group's
    /// usage; every other admin route is 403 for it.
    #[serde(default)]
    pub tenant_admin: Option<bool>,
    /// `grp_…`; `null` takes the key out of its group.
    #[serde(default, deserialize_with = "super::present")]
    #[schema(value_type = Option<String>, nullable)]
    pub group_id: Option<Option<String>>,
    /// Model patterns (`provider/model`, `provider/*`, `*`), each naming a configured provider; `null` allows all.
    #[serde(default, deserialize_with = "super::present")]
    #[schema(value_type = Option<Vec<String>>, nullable)]
    pub allowed_models: Option<Option<Vec<String>>>,
    /// Knowledge bases that exist; `null` allows all.
    #[serde(default, deserialize_with = "super::present")]
    #[schema(value_type = Option<Vec<String>>, nullable)]
    pub allowed_indexes: Option<Option<Vec<String>>>,
    /// Loaded policies; `null` allows all.
    #[serde(default, deserialize_with = "super::present")]
    #[schema(value_type = Option<Vec<String>>, nullable)]
    pub allowed_policies: Option<Option<Vec<String>>>,
    /// `null` removes the key's default.
    #[serde(default, deserialize_with = "super::present")]
    #[schema(value_type = Option<String>, nullable)]
    pub default_policy: Option<Option<String>>,
    #[serde(default)]
    pub limits: Option<LimitsPatch>,
}

/// Changes to a key's limit overrides, per field: absent keeps, `null` clears
/// (the server's limit applies again), a number (at least 1) sets.
#[derive(Debug, Default, Deserialize, Clone, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LimitsPatch {
    #[serde(default, deserialize_with = "super::present")]
    #[schema(value_type = Option<u64>, nullable)]
    pub per_minute: Option<Option<u64>>,
    #[serde(default, deserialize_with = "super::present")]
    #[schema(value_type = Option<u64>, nullable)]
    pub per_hour: Option<Option<u64>>,
    #[serde(default, deserialize_with = "super::present")]
    #[schema(value_type = Option<u64>, nullable)]
    pub per_day: Option<Option<u64>>,
    #[serde(default, deserialize_with = "super::present")]
    #[schema(value_type = Option<u64>, nullable)]
    pub per_month: Option<Option<u64>>,
}

/// A key's limit overrides as listings show them; an absent field follows the server's limit.
#[derive(Debug, Default, Deserialize, Serialize, Clone, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LimitsBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_minute: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_hour: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_day: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_month: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateKey {
    /// Owner; billed by default.
    pub user_id: String,
    #[serde(flatten)]
    pub options: KeyOptions,
}

/// `userId` plus the [`KeyOptions`], as one closed object. (A derived schema
/// would be `allOf` two objects that each forbid the other's fields, which no
/// body can satisfy.)
impl utoipa::PartialSchema for CreateKey {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::RefOr;
        use utoipa::openapi::schema::{Object, Schema, Type};
        let mut object = match KeyOptions::schema() {
            RefOr::T(Schema::Object(o)) => o,
            _ => Object::new(),
        };
        let user_id =
            Object::builder().schema_type(Type::String).description(Some("Owner of the key (`usr_…`); billed by default")).build();
        object.properties.insert("userId".to_owned(), RefOr::T(Schema::Object(user_id)));
        object.required.insert(0, "userId".to_owned());
        object.description = Some("`userId` and the key's options; unknown fields are refused".to_owned());
        RefOr::T(Schema::Object(object))
    }
}

impl utoipa::ToSchema for CreateKey {
    fn schemas(schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
        <KeyOptions as utoipa::ToSchema>::schemas(schemas);
    }
}

/// A key as listings show it: never the secret nor its hash.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyView {
    pub id: String,
    pub user_id: String,
    pub name: String,
    pub prefix: String,
    pub admin: bool,
    pub tenant_admin: bool,
    pub group_id: Option<String>,
    pub allowed_models: Option<Vec<String>>,
    pub allowed_indexes: Option<Vec<String>>,
    pub allowed_policies: Option<Vec<String>>,
    pub default_policy: Option<String>,
    pub limits: LimitsBody,
    pub created_at: String,
    pub revoked_at: Option<String>,
    /// `active`, `suspended` (its user is deactivated) or `revoked`.
    pub status: &'static str,
}

/// The answer of `POST /api/admin/keys`: the only time the secret is shown.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedKey {
    /// The secret `sk-…`.
    pub key: String,
    pub api_key: KeyView,
    pub note: &'static str,
}

impl From<&ApiKeyRecord> for KeyView {
    fn from(k: &ApiKeyRecord) -> Self {
        KeyView {
            id: k.id.clone(),
            user_id: k.user_id.clone(),
            name: k.name.clone(),
            prefix: k.prefix.clone(),
            admin: k.admin,
            tenant_admin: k.tenant_admin,
            group_id: k.group_id.clone(),
            allowed_models: k.allowed_models.clone(),
            allowed_indexes: k.allowed_indexes.clone(),
            allowed_policies: k.allowed_policies.clone(),
            default_policy: k.default_policy.clone(),
            limits: LimitsBody {
                per_minute: k.limits.per_minute,
                per_hour: k.limits.per_hour,
                per_day: k.limits.per_day,
                per_month: k.limits.per_month,
            },
            created_at: crate::time::iso(k.created_at),
            revoked_at: k.revoked_at.map(crate::time::iso),
            status: if k.is_revoked() {
                "revoked"
            } else if k.suspended_at.is_some() {
                "suspended"
            } else {
                "active"
            },
        }
    }
}

fn check_list(name: &str, list: &Option<Vec<String>>) -> Result<(), AdminError> {
    if let Some(items) = list {
        if items.len() > 1000 {
            return Err(AdminError::validation(format!("`{name}` has more than 1000 entries")));
        }
        if items.iter().any(|s| s.trim().is_empty() || s.len() > 200) {
            return Err(AdminError::validation(format!("`{name}` entries must be non-empty names of at most 200 characters")));
        }
    }
    Ok(())
}

/// Every model pattern names a configured provider: `provider/model`,
/// `provider/*` or `*`.
fn check_models(app: &AppState, list: &Option<Vec<String>>) -> Result<(), AdminError> {
    let cfg = app.config();
    for p in list.iter().flatten() {
        if p == "*" {
            continue;
        }
        let Some((provider, model)) = p.split_once('/') else {
            return Err(AdminError::validation(format!("`allowedModels`: `{p}` is not `provider/model`, `provider/*` or `*`")));
        };
        if model.is_empty() || !cfg.providers.contains_key(provider) {
            let known: Vec<&str> = cfg.providers.keys().map(String::as_str).collect();
            return Err(AdminError::validation(format!(
                "`allowedModels`: `{p}` names no configured provider (`{provider}`); the providers are: {}",
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            )));
        }
    }
    Ok(())
}

/// Every knowledge base named exists.
fn check_indexes(app: &AppState, list: &Option<Vec<String>>) -> Result<(), AdminError> {
    let cfg = app.config();
    for name in list.iter().flatten() {
        if !cfg.indexes.contains_key(name) {
            let known: Vec<&str> = cfg.indexes.keys().map(String::as_str).collect();
            return Err(AdminError::validation(format!(
                "`allowedIndexes`: no knowledge base `{name}`; the knowledge bases are: {}",
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            )));
        }
    }
    Ok(())
}

/// Apply options onto a record, validating them (see [`KeyOptions`] for the merge rules).
async fn apply(app: &AppState, key: &mut ApiKeyRecord, o: KeyOptions) -> Result<(), AdminError> {
    if let Some(name) = o.name {
        key.name = text_field("name", &name, 200, false)?;
    }
    if let Some(admin) = o.admin {
        key.admin = admin;
    }
    if let Some(tenant_admin) = o.tenant_admin {
        key.tenant_admin = tenant_admin;
    }
    match o.group_id {
        Some(Some(gid)) => {
            if app.store.get_group(&gid).await?.is_none() {
                return Err(AdminError::validation(format!("`groupId`: group {gid} does not exist")));
            }
            key.group_id = Some(gid);
        }
        Some(None) => key.group_id = None,
        None => {}
    }
    // Checked on the result, so an update that drops the group of a tenant
    // admin (or makes it an admin too) is refused as well.
    if key.tenant_admin && key.admin {
        return Err(AdminError::validation("`tenantAdmin` and `admin` exclude each other: an admin already has every right"));
    }
    if key.tenant_admin && key.group_id.is_none() {
        return Err(AdminError::validation("`tenantAdmin` needs a `groupId`: the group (tenant) the key administers"));
    }
    for (name, list) in
        [("allowedModels", &o.allowed_models), ("allowedIndexes", &o.allowed_indexes), ("allowedPolicies", &o.allowed_policies)]
    {
        check_list(name, &list.clone().flatten())?;
    }
    if let Some(models) = o.allowed_models {
        check_models(app, &models)?;
        key.allowed_models = models;
    }
    if let Some(indexes) = o.allowed_indexes {
        check_indexes(app, &indexes)?;
        key.allowed_indexes = indexes;
    }
    let policies_changed = o.allowed_policies.is_some() || o.default_policy.is_some();
    if let Some(policies) = o.allowed_policies {
        key.allowed_policies = policies;
    }
    if let Some(default) = o.default_policy {
        key.default_policy = default;
    }
    // A default the key could never run under would be skipped on every
    // request; refuse it now. Checked on the result, so narrowing
    // `allowedPolicies` below the current default is caught too.
    if policies_changed && let Some(p) = &key.default_policy {
        let adapters = app.chat.adapters.snapshot();
        let published = app.chat.tenants.policies();
        if let Some(problem) = crate::chat::policy_select::default_problem(adapters.as_ref(), &published, key, p) {
            let usable = crate::chat::policy_select::usable_names(adapters.as_ref(), &published, key);
            return Err(AdminError::validation(format!(
                "`defaultPolicy`: {problem}; choose one of the loaded policies the key may use ({}) and send it with `allowedPolicies` \
                 if you change both",
                if usable.is_empty() { "none".to_owned() } else { usable.join(", ") }
            )));
        }
    }
    if let Some(l) = o.limits {
        let fields = [
            ("perMinute", l.per_minute, &mut key.limits.per_minute),
            ("perHour", l.per_hour, &mut key.limits.per_hour),
            ("perDay", l.per_day, &mut key.limits.per_day),
            ("perMonth", l.per_month, &mut key.limits.per_month),
        ];
        for (n, change, field) in fields {
            match change {
                Some(Some(0)) => return Err(AdminError::validation(format!("`limits.{n}` must be at least 1"))),
                Some(v) => *field = v,
                None => {}
            }
        }
    }
    Ok(())
}

/// Build a new key record for `user_id`; returns it with its secret.
pub fn new_key(user_id: &str, secret: &ApiKeySecret) -> ApiKeyRecord {
    ApiKeyRecord {
        id: new_id("key"),
        user_id: user_id.to_owned(),
        name: String::new(),
        hash: secret.hash(),
        prefix: secret.display_prefix(),
        admin: false,
        group_id: None,
        allowed_models: None,
        allowed_indexes: None,
        allowed_policies: None,
        default_policy: None,
        limits: LimitOverrides::default(),
        created_at: chrono::Utc::now(),
        revoked_at: None,
        suspended_at: None,
        tenant_admin: false,
    }
}

/// `POST /api/admin/keys`.
#[utoipa::path(
    post, path = "/api/admin/keys", tag = "admin", request_body = CreateKey,
    responses(
        (status = 201, description = "Created; `data.key` is the secret, shown only here", body = Success<CreatedKey>),
        (status = 400, description = "Bad body, unknown user or group (`VALIDATION_ERROR`)", body = NestedError),
    )
)]
pub async fn create(
    State(app): State<AppState>,
    Admin(ctx): Admin,
    AdminJson(body): AdminJson<CreateKey>,
) -> Result<(StatusCode, Json<Value>), AdminError> {
    match app.store.get_user(&body.user_id).await? {
        None => return Err(AdminError::validation(format!("`userId`: user {} does not exist", body.user_id))),
        Some(u) if u.deactivated_at.is_some() => {
            return Err(AdminError::validation(format!("`userId`: user {} is deactivated; reactivate them first", body.user_id)));
        }
        Some(_) => {}
    }
    let secret = ApiKeySecret::generate();
    let mut key = new_key(&body.user_id, &secret);
    apply(&app, &mut key, body.options).await?;
    let audit = actor_audit(
        &app,
        &ctx,
        Audit::new(kind::API_KEY_MANAGEMENT, category::ACCESS_CONTROL, format!("API key {} created", key.id))
            .meta("operation", "create_api_key")
            .meta("targetKeyId", key.id.clone())
            .meta("targetUserId", key.user_id.clone())
            .meta("admin", key.admin)
            .meta("tenantAdmin", key.tenant_admin),
        "POST /api/admin/keys",
    )
    .await
    .build();
    let key = app.store.create_key(key, audit).await?;
    Ok((
        StatusCode::CREATED,
        ok(CreatedKey { key: secret.expose().to_owned(), api_key: KeyView::from(&key), note: "store this key now: it is not shown again" }),
    ))
}

/// `GET /api/admin/keys`.
#[utoipa::path(get, path = "/api/admin/keys", tag = "admin", responses((status = 200, description = "Every key (prefix only, never the secret)", body = Success<Vec<KeyView>>)))]
pub async fn list(State(app): State<AppState>, Admin(_): Admin) -> Result<Json<Value>, AdminError> {
    let keys = app.store.list_keys().await?;
    Ok(ok(keys.iter().map(KeyView::from).collect::<Vec<_>>()))
}

/// `GET /api/admin/keys/{id}`.
#[utoipa::path(
    get, path = "/api/admin/keys/{id}", tag = "admin", params(("id" = String, Path, description = "`key_…`")),
    responses((status = 200, description = "The key", body = Success<KeyView>), (status = 404, description = "No such key", body = NestedError))
)]
pub async fn get(State(app): State<AppState>, Admin(_): Admin, Path(id): Path<String>) -> Result<Json<Value>, AdminError> {
    let key = app.store.get_key(&id).await?.ok_or_else(|| AdminError::not_found(format!("key {id} not found")))?;
    Ok(ok(KeyView::from(&key)))
}

/// `PUT /api/admin/keys/{id}`.
#[utoipa::path(
    put, path = "/api/admin/keys/{id}", tag = "admin", params(("id" = String, Path, description = "`key_…`")), request_body = KeyOptions,
    responses(
        (status = 200, description = "The changed key", body = Success<KeyView>),
        (status = 400, description = "Bad body (`VALIDATION_ERROR`)", body = NestedError),
        (status = 404, description = "No such key", body = NestedError),
    )
)]
pub async fn update(
    State(app): State<AppState>,
    Admin(ctx): Admin,
    Path(id): Path<String>,
    AdminJson(body): AdminJson<KeyOptions>,
) -> Result<Json<Value>, AdminError> {
    let mut key = app.store.get_key(&id).await?.ok_or_else(|| AdminError::not_found(format!("key {id} not found")))?;
    let policy = body.default_policy.clone();
    apply(&app, &mut key, body).await?;
    let mut audit = match &policy {
        Some(Some(p)) => {
            Audit::new(kind::POLICY_MANAGEMENT, category::DATA_PROTECTION, format!("Default policy of API key {id} set to {p}"))
                .meta("policyName", p.clone())
                .meta("setAsActive", true)
        }
        Some(None) => Audit::new(kind::POLICY_MANAGEMENT, category::DATA_PROTECTION, format!("Default policy of API key {id} removed"))
            .meta("policyName", "")
            .meta("setAsActive", false),
        None => Audit::new(kind::API_KEY_MANAGEMENT, category::ACCESS_CONTROL, format!("API key {id} updated")),
    };
    audit = audit.meta("operation", "update_api_key").meta("targetKeyId", id.clone());
    let audit = actor_audit(&app, &ctx, audit, "PUT /api/admin/keys/{id}").await.build();
    let key = app.store.update_key(key, audit).await?;
    Ok(ok(KeyView::from(&key)))
}

/// `POST /api/admin/keys/{id}/revoke`.
#[utoipa::path(
    post, path = "/api/admin/keys/{id}/revoke", tag = "admin", params(("id" = String, Path, description = "`key_…`")),
    responses(
        (status = 200, description = "The revoked key", body = Success<KeyView>),
        (status = 404, description = "No such key", body = NestedError),
        (status = 409, description = "Already revoked (`CONFLICT`)", body = NestedError),
    )
)]
pub async fn revoke(State(app): State<AppState>, Admin(ctx): Admin, Path(id): Path<String>) -> Result<Json<Value>, AdminError> {
    let audit = actor_audit(
        &app,
        &ctx,
        Audit::new(kind::API_KEY_MANAGEMENT, category::ACCESS_CONTROL, format!("API key {id} revoked"))
            .meta("operation", "revoke_api_key")
            .meta("targetKeyId", id.clone()),
        "POST /api/admin/keys/{id}/revoke",
    )
    .await
    .build();
    let key = app.store.revoke_key(&id, audit).await?;
    Ok(ok(KeyView::from(&key)))
}

/// `DELETE /api/admin/keys/{id}`: the secret stops working at once and the
/// record is gone; the key's audit records and usage stay (they name its id).
#[utoipa::path(
    delete, path = "/api/admin/keys/{id}", tag = "admin", params(("id" = String, Path, description = "`key_…`")),
    responses(
        (status = 200, description = "The deleted key", body = Success<KeyView>),
        (status = 404, description = "No such key", body = NestedError),
        (status = 409, description = "The calling key itself (`CONFLICT`)", body = NestedError),
    )
)]
pub async fn delete(State(app): State<AppState>, Admin(ctx): Admin, Path(id): Path<String>) -> Result<Json<Value>, AdminError> {
    if id == ctx.key.id {
        return Err(AdminError::conflict("an admin key cannot delete itself; use another admin key"));
    }
    let audit = actor_audit(
        &app,
        &ctx,
        Audit::new(kind::API_KEY_MANAGEMENT, category::ACCESS_CONTROL, format!("API key {id} deleted"))
            .meta("operation", "delete_api_key")
            .meta("targetKeyId", id.clone()),
        "DELETE /api/admin/keys/{id}",
    )
    .await
    .build();
    let key = app.store.delete_key(&id, audit).await?;
    Ok(ok(KeyView::from(&key)))
}
