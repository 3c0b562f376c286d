//! The first admin key on a fresh install.
//!
//! If no active admin key exists at start-up: take the key from
//! `GATEHOUSE_BOOTSTRAP_ADMIN_KEY` if set, otherwise generate one and print it
//! once to standard error (never through the logger). Either way an `admin`
//! user owns it and the creation is audited.

use crate::api::admin::keys::new_key;
use crate::auth::keys::ApiKeySecret;
use crate::config::BOOTSTRAP_KEY_ENV;
use gatehouse_store::audit::{Audit, category, kind};
use gatehouse_store::model::{AuditUser, User};
use gatehouse_store::{Store, StoreError};

/// How the first admin key came to be.
#[derive(Debug, PartialEq, Eq)]
pub enum Bootstrap {
    /// An admin key already existed; nothing done.
    AlreadyInitialised,
    /// Registered the key from the environment.
    FromEnvironment,
    /// Generated a key; the caller shows it once.
    Generated(String),
}

fn system_actor() -> AuditUser {
    AuditUser { id: "system".into(), name: "gatehouse".into(), email: String::new() }
}

/// Create an admin user and a key for it. Used by bootstrap and the offline CLI.
pub async fn create_admin_key(store: &dyn Store, secret: &ApiKeySecret, key_name: &str, actor: AuditUser) -> Result<String, StoreError> {
    let user = User {
        id: crate::api::admin::new_id("usr"),
        name: "admin".into(),
        email: String::new(),
        created_at: chrono::Utc::now(),
        deactivated_at: None,
    };
    let audit = Audit::new(kind::USER_MANAGEMENT, category::ACCESS_CONTROL, format!("User {} created", user.id))
        .user(Some(actor.clone()))
        .meta("operation", "create_user")
        .meta("targetUserId", user.id.clone())
        .build();
    let user = store.create_user(user, audit).await?;
    let mut key = new_key(&user.id, secret);
    key.admin = true;
    key.name = key_name.to_owned();
    let audit = Audit::new(kind::API_KEY_MANAGEMENT, category::ACCESS_CONTROL, format!("API key {} created", key.id))
        .user(Some(actor))
        .meta("operation", "create_api_key")
        .meta("targetKeyId", key.id.clone())
        .meta("admin", true)
        .build();
    let key = store.create_key(key, audit).await?;
    Ok(key.id)
}

pub async fn ensure_admin(store: &dyn Store) -> anyhow::Result<Bootstrap> {
    if store.has_admin_key().await? {
        if std::env::var_os(BOOTSTRAP_KEY_ENV).is_some() {
            tracing::info!("{BOOTSTRAP_KEY_ENV} ignored: an admin key already exists");
        }
        return Ok(Bootstrap::AlreadyInitialised);
    }
    match std::env::var(BOOTSTRAP_KEY_ENV) {
        Ok(raw) => {
            let secret = ApiKeySecret::parse(raw.trim()).map_err(|e| anyhow::anyhow!("{BOOTSTRAP_KEY_ENV}: {e}"))?;
            let id = create_admin_key(store, &secret, "bootstrap", system_actor()).await?;
            tracing::info!(key_id = %id, "registered the bootstrap admin key from {BOOTSTRAP_KEY_ENV}");
            Ok(Bootstrap::FromEnvironment)
        }
        Err(_) => {
            let secret = ApiKeySecret::generate();
            let id = create_admin_key(store, &secret, "bootstrap", system_actor()).await?;
            tracing::info!(key_id = %id, "generated the first admin key (printed once on stderr)");
            Ok(Bootstrap::Generated(secret.expose().to_owned()))
        }
    }
}
