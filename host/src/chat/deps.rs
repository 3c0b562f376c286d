//! What the chat pipeline needs from the running server, and nothing else:
//! the route handlers hand it a [`ChatDeps`], never the whole application
//! state, so chat cannot reach the admin side, the plugin runtime or the
//! webhook dispatcher behind its own back.

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::admission::Admission;
use super::breaker::Breakers;
use super::config_texts::ConfigTexts;
use super::cutoff::Streams;
use super::providers::{PluginSource, Targets};
use super::retrieval::KnowledgeBases;
use super::security::tenant::Tenants;
use super::transport::Transport;
use crate::auth::limits::Limiter;
use crate::config::Config;
use gatehouse_store::Store;
use gatehouse_store::receipts::Signer25519;

/// One `Arc`: a clone per request (and per stream's pump) is one reference count.
#[derive(Clone)]
pub struct ChatDeps(Arc<Deps>);

impl ChatDeps {
    pub fn new(deps: Deps) -> Self {
        ChatDeps(Arc::new(deps))
    }
}

impl std::ops::Deref for ChatDeps {
    type Target = Deps;
    fn deref(&self) -> &Deps {
        &self.0
    }
}

/// The fields of [`ChatDeps`].
pub struct Deps {
    /// The current config, swapped whole on reload (shared with the server).
    pub config: Arc<ArcSwap<Config>>,
    /// Provider entries with their secrets, rebuilt with the config.
    pub targets: Arc<ArcSwap<Targets>>,
    pub store: Arc<dyn Store>,
    pub limiter: Arc<Limiter>,
    pub transport: Transport,
    pub breakers: Arc<Breakers>,
    /// Provider adapters, policies and detectors (plugins).
    pub adapters: Arc<dyn PluginSource>,
    /// Knowledge bases (retriever plugins with warm instances).
    pub knowledge: Arc<dyn KnowledgeBases>,
    pub receipts: Arc<Signer25519>,
    /// Chat requests being served, against `chat.max_in_flight`.
    pub admission: Arc<Admission>,
    /// Open streams, cut with an error frame when the shutdown grace ends.
    pub streams: Arc<Streams>,
    /// The plugins' config texts for the current config snapshot.
    pub config_texts: ConfigTexts,
    /// Tenant policies: which are whose, each group's base, the shadows and
    /// their worker; the registry sync fills it (this server's own, never a global).
    pub tenants: Arc<Tenants>,
}

impl Deps {
    pub fn config(&self) -> arc_swap::Guard<Arc<Config>> {
        self.config.load()
    }
}
