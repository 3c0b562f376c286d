//! Shared state of the running server.

use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;

use crate::auth::limits::Limiter;
use crate::chat::breaker::Breakers;
use crate::chat::providers::{AdapterSource, Targets};
use crate::chat::transport::Transport;
use crate::config::Config;
use crate::store::Store;

/// Everything a handler may need. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The current config; swapped whole on reload, read with `config()`.
    pub config: Arc<ArcSwap<Config>>,
    /// Provider entries with their secrets, rebuilt with the config.
    pub targets: Arc<ArcSwap<Targets>>,
    pub store: Arc<dyn Store>,
    pub limiter: Arc<Limiter>,
    pub transport: Transport,
    pub breakers: Arc<Breakers>,
    pub adapters: Arc<dyn AdapterSource>,
    /// Knowledge bases (retriever plugins with warm instances).
    pub knowledge: Arc<dyn crate::chat::retrieval::KnowledgeBases>,
    pub plugins: Arc<crate::wasm::PluginRuntime>,
    pub receipts: Arc<crate::receipts::Signer25519>,
    pub webhooks: Arc<crate::webhooks::Webhooks>,
    pub started: Instant,
}

impl AppState {
    pub fn config(&self) -> arc_swap::Guard<Arc<Config>> {
        self.config.load()
    }
}
