//! Shared state of the running server.

use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;

pub mod console;

use crate::auth::limits::Limiter;
use crate::chat::deps::ChatDeps;
use crate::config::Config;
use gatehouse_store::Store;

/// Everything a handler may need: one `Arc`, so the clones axum makes per
/// request (state extractor, each middleware) are one reference count each
/// (and one more for the plugin registry's wiring).
#[derive(Clone)]
pub struct AppState(Arc<Shared>, Arc<Registry>);

/// How often each shadow policy version's counts are saved to the plugin registry (and once more at shutdown).
pub const SAVE_SHADOW_COUNTS: std::time::Duration = std::time::Duration::from_secs(5);

/// The plugin registry this host publishes to and loads from, or why there is none.
pub type Registry = Result<Arc<crate::plugin_registry::RegistrySync>, String>;

impl AppState {
    /// The state, with the embedded plugin registry (`plugins.redb` in the data
    /// dir) loaded into the plugin runtime and followed from now on. A host on
    /// PostgreSQL needs the fleet's registry ([`Backend::plugin_registry`] with
    /// [`AppState::with_registry`]): a registry of its own would split the fleet,
    /// so without it this host has none (publishing answers 503).
    pub fn new(shared: Shared) -> Self {
        let registry = match shared.config().store.backend {
            crate::config::StoreBackend::Redb => gatehouse_store::redb::registry::RedbRegistry::open(&shared.config().data_dir)
                .map(|r| Arc::new(r) as Arc<dyn gatehouse_store::registry::PluginRegistry>)
                .map_err(|e| format!("{e:#}")),
            crate::config::StoreBackend::Postgres => {
                Err("the fleet's plugin registry is not wired to this server (start it with AppState::with_registry)".to_owned())
            }
        };
        Self::with_registry(shared, registry)
    }

    /// The state with a given plugin registry (a fleet's: the PostgreSQL
    /// store itself). Loads the published plugins before it returns, so a host
    /// serves them from its first request, then follows the registry's changes.
    pub fn with_registry(shared: Shared, registry: Result<Arc<dyn gatehouse_store::registry::PluginRegistry>, String>) -> Self {
        // The registry's policies go where this server's chat path reads them.
        let policies = shared.chat.tenants.published.clone();
        let host = shared.receipts.key_id().to_owned();
        let registry = registry.map(|r| crate::plugin_registry::RegistrySync::start(r, shared.plugins.clone(), policies, host));
        if let Err(e) = &registry {
            tracing::error!(error = %e, "no plugin registry: published plugins are not loaded and publishing answers 503");
        }
        AppState(Arc::new(shared), Arc::new(registry))
    }

    /// The plugin registry, or why there is none.
    pub fn registry(&self) -> &Registry {
        &self.1
    }

    /// The registry's own work while the server runs: save every shadow's
    /// counts every [`SAVE_SHADOW_COUNTS`]; at `stop`, stop the shadow
    /// policy worker, save the final counts, stop following the registry,
    /// and return once all of it is done (before the store closes).
    pub async fn run_registry_work(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            tokio::select! {
                () = tokio::time::sleep(SAVE_SHADOW_COUNTS) => self.save_shadow_counts().await,
                () = crate::shutdown::stopped(&mut stop) => break,
            }
        }
        let tenants = self.chat.tenants.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || tenants.stop()).await {
            tracing::error!(error = %e, "stopping the shadow policy worker failed");
        }
        self.save_shadow_counts().await;
        if let Ok(sync) = self.registry() {
            sync.shutdown().await;
        }
    }

    /// Save this host's counts of every shadow it runs (docs/decisions/tenant-policies.md).
    async fn save_shadow_counts(&self) {
        let Ok(sync) = self.registry() else { return };
        for (name, version, counts) in self.chat.tenants.counts() {
            if let Err(e) = sync.registry.save_shadow_counts(self.receipts.key_id(), &name, version, counts).await {
                tracing::warn!(plugin = %name, version, error = %e, "saving shadow counts failed; the next round tries again");
            }
        }
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
    /// The console overview's readings (`api::admin::overview`).
    pub overview: console::Sampler,
    /// What this server merged of the stored knowledge bases (`api::admin::indexes`).
    pub knowledge_bases: std::sync::Mutex<console::Merged>,
    /// The chat pipeline's dependencies.
    pub chat: ChatDeps,
}

impl Shared {
    pub fn config(&self) -> arc_swap::Guard<Arc<Config>> {
        self.config.load()
    }
}

/// The store this host runs on, built from `[store]`: redb in the data dir
/// (one host), or PostgreSQL shared by a fleet.
#[derive(Clone)]
pub enum Backend {
    Redb(Arc<gatehouse_store::redb::RedbStore>),
    Postgres(Arc<gatehouse_store::postgres::PgStore>),
}

/// First wait between two attempts to reach PostgreSQL at start; doubled up to [`CONNECT_RETRY_MAX`].
const CONNECT_RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(250);
const CONNECT_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(5);

impl Backend {
    /// Open the configured store; `sealer` signs chat receipts. On
    /// PostgreSQL a database that cannot be reached (or is still starting) is
    /// tried again until it answers: a host never exits because the database
    /// is away. A bad URL or TLS setting, or a schema newer than this binary,
    /// cannot heal by waiting and stops the start.
    pub async fn open(config: &Config, sealer: Arc<dyn gatehouse_store::receipts::ReceiptSealer>) -> anyhow::Result<Backend> {
        use crate::config::StoreBackend;
        match config.store.backend {
            StoreBackend::Redb => {
                let store = gatehouse_store::redb::RedbStore::open_with(&config.data_dir, config.durable_writes, Some(sealer))?;
                Ok(Backend::Redb(Arc::new(store)))
            }
            StoreBackend::Postgres => {
                let options = Self::pg_options(config)?;
                let mut wait = CONNECT_RETRY_FIRST;
                loop {
                    match gatehouse_store::postgres::PgStore::connect_with(options.clone(), Some(sealer.clone())).await {
                        Ok(store) => return Ok(Backend::Postgres(Arc::new(store))),
                        Err(e) if !Self::may_heal(&e) => return Err(e),
                        Err(e) => {
                            tracing::warn!(error = %format!("{e:#}"), retry_ms = wait.as_millis() as u64, "PostgreSQL not reachable yet; trying again");
                            tokio::time::sleep(wait).await;
                            wait = (wait * 2).min(CONNECT_RETRY_MAX);
                        }
                    }
                }
            }
        }
    }

    /// The PostgreSQL connection settings from `[store]` and the URL's variable.
    pub fn pg_options(config: &Config) -> anyhow::Result<gatehouse_store::postgres::PgOptions> {
        let url = config.store.database_url().map_err(|m| anyhow::anyhow!("invalid configuration: {m}"))?;
        let mut options = gatehouse_store::postgres::PgOptions::new(url);
        options.pool_size = config.store.pool_size;
        options.ca_file = config.store.ca_file.clone();
        Ok(options)
    }

    /// Can waiting fix this failure to start on PostgreSQL? Connecting and
    /// migrating fail the same way while the server is down or starting;
    /// a newer schema and a URL or TLS setup this binary refuses do not.
    fn may_heal(e: &anyhow::Error) -> bool {
        use gatehouse_store::postgres::MigrateError;
        matches!(e.downcast_ref::<MigrateError>(), Some(MigrateError::Pool(_) | MigrateError::Database(_)))
    }

    /// The plugin registry of this store: the PostgreSQL store itself (one for
    /// the fleet), or `plugins.redb` in the data dir.
    pub fn plugin_registry(&self, data_dir: &std::path::Path) -> Result<Arc<dyn gatehouse_store::registry::PluginRegistry>, String> {
        match self {
            Backend::Redb(_) => gatehouse_store::redb::registry::RedbRegistry::open(data_dir)
                .map(|r| Arc::new(r) as Arc<dyn gatehouse_store::registry::PluginRegistry>)
                .map_err(|e| format!("{e:#}")),
            Backend::Postgres(s) => Ok(s.clone()),
        }
    }

    pub fn store(&self) -> Arc<dyn Store> {
        match self {
            Backend::Redb(s) => s.clone(),
            Backend::Postgres(s) => s.clone(),
        }
    }

    pub fn webhook_store(&self) -> Arc<dyn gatehouse_store::webhooks::WebhookStore> {
        match self {
            Backend::Redb(s) => s.clone(),
            Backend::Postgres(s) => s.clone(),
        }
    }

    /// The limiter: counts shared by the fleet on PostgreSQL, in memory (day and month persisted) on redb.
    pub fn limiter(&self) -> crate::auth::limits::Limiter {
        match self {
            Backend::Redb(s) => crate::auth::limits::Limiter::new(s.clone()),
            Backend::Postgres(s) => crate::auth::limits::Limiter::fleet(s.clone(), s.clone()),
        }
    }

    /// Write what is still in memory (redb's pending group commit, PostgreSQL's quota counts) before the process ends.
    pub async fn flush(&self) -> gatehouse_store::StoreResult<()> {
        match self {
            Backend::Redb(s) => s.flush().await,
            Backend::Postgres(s) => s.flush().await,
        }
    }
}
