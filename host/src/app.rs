//! Shared state of the running server.

use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;

use crate::auth::limits::Limiter;
use crate::chat::deps::ChatDeps;
use crate::config::Config;
use gatehouse_store::Store;

/// Everything a handler may need: one `Arc`, so the clones axum makes per
/// request (state extractor, each middleware) are one reference count each
/// (and one more for the plugin registry's wiring).
#[derive(Clone)]
pub struct AppState(Arc<Shared>, Arc<Registry>);

/// The plugin registry this host publishes to and loads from, or why there is none.
pub type Registry = Result<Arc<crate::reload::RegistrySync>, String>;

impl AppState {
    /// The state, with the embedded plugin registry (`plugins.redb` in the data
    /// dir) loaded into the plugin runtime and followed from now on.
    pub fn new(shared: Shared) -> Self {
        let data_dir = shared.config().data_dir.clone();
        let registry = gatehouse_store::redb::registry::RedbRegistry::open(&data_dir)
            .map(|r| Arc::new(r) as Arc<dyn gatehouse_store::registry::PluginRegistry>)
            .map_err(|e| format!("{e:#}"));
        Self::with_registry(shared, registry)
    }

    /// The state with a given plugin registry (a fleet's: the PostgreSQL
    /// store itself). Loads the published plugins before it returns, so a host
    /// serves them from its first request, then follows the registry's changes.
    pub fn with_registry(shared: Shared, registry: Result<Arc<dyn gatehouse_store::registry::PluginRegistry>, String>) -> Self {
        let registry = registry.map(|r| crate::reload::RegistrySync::start(r, shared.plugins.clone()));
        if let Err(e) = &registry {
            tracing::error!(error = %e, "no plugin registry: published plugins are not loaded and publishing answers 503");
        }
        AppState(Arc::new(shared), Arc::new(registry))
    }

    /// The plugin registry, or why there is none.
    pub fn registry(&self) -> &Registry {
        &self.1
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The fields of [`AppState`]. What chat needs is in `chat` (the pipeline
/// gets only that); `config`, `store`, `limiter` and `receipts` are the same
/// handles as chat's, for the admin and operations routes.
pub struct Shared {
    /// The current config; swapped whole on reload, read with `config()`.
    pub config: Arc<ArcSwap<Config>>,
    pub store: Arc<dyn Store>,
    pub limiter: Arc<Limiter>,
    /// Failed authentication by client address (metric, burst audit records).
    pub auth_failures: Arc<crate::auth::failures::FailureWatch>,
    pub plugins: Arc<gatehouse_plugin_host::PluginRuntime>,
    pub receipts: Arc<gatehouse_store::receipts::Signer25519>,
    pub webhooks: Arc<crate::webhooks::Webhooks>,
    pub started: Instant,
    /// The chat pipeline's dependencies.
    pub chat: ChatDeps,
}

impl Shared {
    pub fn config(&self) -> arc_swap::Guard<Arc<Config>> {
        self.config.load()
    }
}
