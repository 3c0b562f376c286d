//! Shared state of the running server.

use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;

use crate::auth::limits::Limiter;
use crate::chat::deps::ChatDeps;
use crate::config::Config;
use gatehouse_store::Store;

/// Everything a handler may need: one `Arc`, so the clones axum makes per
/// request (state extractor, each middleware) are one reference count each.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        AppState(Arc::new(shared))
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
