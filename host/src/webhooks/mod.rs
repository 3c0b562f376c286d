//! Signed webhooks: endpoint management, the URL guard
//! against SSRF, HMAC signatures, and durable at-least-once delivery from the
//! event outbox.
//!
//! * [`ssrf`]: which URLs and addresses a webhook may target.
//! * [`signer`]: `whsec_…` secrets and `X-Gatehouse-Signature`.
//! * [`store`]: [`store::WebhookStore`] (endpoints, secrets, deliveries, the
//!   endpoints' outbox cursors) and its redb implementation.
//! * `dispatcher`: a background worker per endpoint that delivers events from the outbox.
//! * `api::webhooks`: `/api/admin/webhooks…` (request and response bodies documented there).
//!
//! The host starts one [`Webhooks`] at boot, keeps it in the app state, merges
//! `api::webhooks::router` into the route table and calls [`Webhooks::shutdown`] on
//! the way out. API requests never wait for a delivery: they commit an outbox
//! row (or, for the test route, a delivery row) and return.

mod dispatcher;
pub mod signer;
pub mod ssrf;
pub mod store;

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::config::Config;
pub use dispatcher::{HEADER_DELIVERY, HEADER_EVENT, HEADER_SIGNATURE};
use gatehouse_store::Store;
pub use signer::WebhookSecret;
use ssrf::{Lookup, SystemLookup};
use store::WebhookStore;

/// The event catalog: name and when it fires.
pub const EVENT_CATALOG: &[(&str, &str)] = &[
    ("*", "Wildcard subscription to all events below"),
    ("promptshield:attack:blocked", "Prompt Shield blocked an injection/jailbreak attempt"),
    ("promptshield:attack:detected", "Prompt Shield flagged a suspicious prompt without blocking"),
    ("promptshield:canary:leaked", "A canary token appeared in model output"),
    ("dlp:incident", "A Data Loss Prevention rule matched"),
    ("pii:incident", "PII was detected or redacted"),
    ("api:limit_reached", "An API key hit a daily, monthly or rate limit"),
    ("api:model_failover", "A redundancy chain failed over from one model to the next"),
    ("webhook:test", "Sent by the test route only"),
];

/// Is `name` a subscribable event name (or `*`)?
pub fn is_known_event(name: &str) -> bool {
    EVENT_CATALOG.iter().any(|(n, _)| *n == name)
}

/// The running webhook subsystem: storage, the dispatcher, and what the
/// admin routes need.
pub struct Webhooks {
    pub(crate) store: Arc<dyn WebhookStore>,
    /// Users (for audit actors); the outbox is read through it too.
    pub(crate) host_store: Arc<dyn Store>,
    pub(crate) config: Arc<ArcSwap<Config>>,
    pub(crate) lookup: Arc<dyn Lookup>,
    dispatcher: dispatcher::Dispatcher,
    /// Deletes outbox events past `webhooks.events_retention_days`.
    pruner: tokio::task::JoinHandle<()>,
}

/// How often the outbox is pruned, and how many events one commit deletes.
const PRUNE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);
const PRUNE_BATCH: usize = 256;

/// Delete events past their retention, a batch per commit so the writer the
/// API requests wait on is never held long; the retention is read at each
/// round, so a config reload applies without a restart.
async fn prune_outbox(store: Arc<dyn WebhookStore>, config: Arc<ArcSwap<Config>>) {
    let mut tick = tokio::time::interval(PRUNE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let days = config.load().webhooks.events_retention_days;
        if days == 0 {
            continue;
        }
        let cutoff = chrono::Utc::now().timestamp().saturating_sub(i64::try_from(days.saturating_mul(24 * 3600)).unwrap_or(i64::MAX));
        let mut removed = 0;
        loop {
            match store.prune_outbox(cutoff, PRUNE_BATCH).await {
                Ok(n) => {
                    removed += n;
                    crate::metrics::get().retention_deleted("outbox", n);
                    if n < PRUNE_BATCH {
                        break;
                    }
                    tokio::task::yield_now().await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "pruning the event outbox failed; trying again at the next round");
                    break;
                }
            }
        }
        if removed > 0 {
            tracing::info!(removed, retention_days = days, "old events deleted from the outbox");
        }
    }
}

impl Webhooks {
    /// Create the tables, resume pending deliveries and start the dispatcher.
    /// Call once at boot, inside the runtime.
    pub async fn start<S>(store: Arc<S>, config: Arc<ArcSwap<Config>>) -> anyhow::Result<Arc<Self>>
    where
        S: Store + WebhookStore,
    {
        let wh: Arc<dyn WebhookStore> = store.clone();
        let host_store: Arc<dyn Store> = store;
        Self::start_with(wh, host_store, config, Arc::new(SystemLookup)).await
    }

    /// [`Webhooks::start`] with an explicit DNS lookup (tests, benchmarks).
    pub async fn start_with(
        store: Arc<dyn WebhookStore>,
        host_store: Arc<dyn Store>,
        config: Arc<ArcSwap<Config>>,
        lookup: Arc<dyn Lookup>,
    ) -> anyhow::Result<Arc<Self>> {
        store.prepare_webhooks().await.map_err(|e| anyhow::anyhow!("cannot prepare the webhook tables: {e}"))?;
        let dispatcher = dispatcher::Dispatcher::start(store.clone(), host_store.clone(), config.clone(), lookup.clone()).await?;
        #[expect(clippy::disallowed_methods, reason = "the handle is kept: `Webhooks::shutdown` aborts the pruner")]
        let pruner = tokio::spawn(prune_outbox(store.clone(), config.clone()));
        Ok(Arc::new(Webhooks { store, host_store, config, lookup, dispatcher, pruner }))
    }

    /// Events were just committed to the outbox: have the endpoints' workers
    /// read it now instead of at their next look (`webhooks.poll_interval_ms`).
    /// Optional, cheap, never blocks.
    pub fn notify(&self) {
        self.dispatcher.wake();
    }

    /// Deliveries waiting (see [`WebhookStore::queue_depth`]).
    pub async fn queue_depth(&self) -> gatehouse_store::StoreResult<u64> {
        self.store.queue_depth().await
    }

    /// Stop dispatching. Pending deliveries stay in the store and resume at the next start.
    pub async fn shutdown(&self) {
        self.pruner.abort();
        self.dispatcher.shutdown().await;
    }

    /// Wake the endpoint's worker: something for it was stored.
    pub fn kick(&self, endpoint_id: &str) {
        self.dispatcher.kick(endpoint_id);
    }

    pub(crate) fn allow_private(&self) -> bool {
        self.config.load().webhooks.allow_private
    }
}
