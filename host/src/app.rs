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

/// The fields of [`AppState`].
pub struct Shared {
    /// The current config; swapped whole on reload, read with `config()`.
    pub config: Arc<ArcSwap<Config>>,
    /// Provider entries with their secrets, rebuilt with the config.
    pub targets: Arc<ArcSwap<Targets>>,
    pub store: Arc<dyn Store>,
    pub limiter: Arc<Limiter>,
    /// Failed authentication by client address (metric, burst audit records).
    pub auth_failures: Arc<crate::auth::failures::FailureWatch>,
    pub transport: Transport,
    pub breakers: Arc<Breakers>,
    pub adapters: Arc<dyn AdapterSource>,
    /// Knowledge bases (retriever plugins with warm instances).
    pub knowledge: Arc<dyn crate::chat::retrieval::KnowledgeBases>,
    pub plugins: Arc<crate::wasm::PluginRuntime>,
    pub receipts: Arc<crate::receipts::Signer25519>,
    pub webhooks: Arc<crate::webhooks::Webhooks>,
    pub started: Instant,
    /// Chat requests being served, against `chat.max_in_flight`.
    pub admission: Arc<crate::chat::admission::Admission>,
    /// Open streams, cut with an error frame when the shutdown grace ends.
    pub streams: Arc<crate::chat::cutoff::Streams>,
    /// The plugins' config texts for the current config snapshot.
    pub config_texts: crate::chat::config_texts::ConfigTexts,
}

impl Shared {
    pub fn config(&self) -> arc_swap::Guard<Arc<Config>> {
        self.config.load()
    }
}
