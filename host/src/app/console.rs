//! State the admin console's routes keep per server: the overview's
//! readings (`api::admin::overview`) and what this server merged of the stored
//! knowledge bases (`api::admin::indexes`). Here, in the state layer, so the
//! app state can hold them without naming the API layer above it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use gatehouse_store::knowledge_bases::KnowledgeBaseDef;

use crate::config::Config;

/// Cumulative figures at one moment.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    pub(crate) at: DateTime<Utc>,
    pub(crate) requests: u64,
    pub(crate) errors: u64,
    pub(crate) refused: u64,
    /// (upper bound in seconds, cumulative count) of the chat routes' latency histogram.
    pub(crate) buckets: Vec<(f64, u64)>,
    pub(crate) failovers: u64,
    pub(crate) shield_blocks: u64,
    pub(crate) dlp_hits: u64,
}

/// Outbox events counted so far, and where the count stopped.
#[derive(Debug, Default)]
pub struct EventCounts {
    /// The first reading skips to the end of the outbox: events from before
    /// this process started are not this host's recent history.
    pub(crate) primed: bool,
    pub(crate) after: u64,
    pub(crate) shield_blocks: u64,
    pub(crate) dlp_hits: u64,
}

/// The readings of one server, kept in its app state.
#[derive(Default)]
pub struct Sampler {
    pub(crate) readings: Mutex<VecDeque<Reading>>,
    pub(crate) events: tokio::sync::Mutex<EventCounts>,
}

/// What this server merged into its running config (kept in its app state).
#[derive(Default)]
pub struct Merged {
    /// The names the config file defines (the running config's own, as last seen unchanged by us).
    pub(crate) file: BTreeSet<String>,
    /// The stored definitions now in the running config.
    pub(crate) mine: BTreeMap<String, KnowledgeBaseDef>,
    /// The config this process last stored; another pointer means the file was reloaded.
    pub(crate) written: Option<Arc<Config>>,
}
