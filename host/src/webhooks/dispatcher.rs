//! The background dispatcher: outbox → HTTP attempts, one worker per endpoint.
//!
//! * Each enabled endpoint has a **worker** that reads outbox events after
//!   the endpoint's cursor (see `store.rs` for why cursors, not a row per
//!   event and endpoint), and pending deliveries (retries, test deliveries)
//!   as they come due. At most `max_in_flight_per_endpoint` requests to one
//!   endpoint are out at once; nothing is queued in memory beyond the
//!   attempts in flight, so a dead endpoint with a long backlog costs no
//!   memory (its backlog is its cursor lagging in the outbox), and one slow
//!   endpoint never holds up another.
//! * Each attempt re-reads the endpoint and its current secret (a rotation or
//!   a disable applies at once), runs the URL guard, signs, POSTs with the
//!   configured timeout, and hands the outcome to the recorder: acknowledged,
//!   retry at the next delay (a pending row is stored), or failed (which may
//!   disable the endpoint).
//! * The **recorder** commits outcomes and cursor moves in batches (one
//!   commit per `RECORD_LINGER` at most): the dispatcher shares the
//!   group-commit writer with API requests, and every commit it adds is one
//!   an API write may wait behind. A cursor moves past an event only in the
//!   commit that records its outcome or a later one, so a crash loses no
//!   event; what was in flight is sent again with the same delivery id.
//! * Deliveries of a disabled endpoint are cancelled as they come due, a
//!   bounded batch per commit.
//! * Workers start at boot for every enabled endpoint and every endpoint with
//!   pending deliveries, and when an endpoint is created or re-enabled; a
//!   look at the store every `RESCAN_EVERY` starts the workers of endpoints
//!   another host of a fleet created.
//! * **One owner per endpoint.** Several hosts of a fleet run a worker for
//!   each endpoint; only the one holding the endpoint's lease
//!   (`WebhookStore::lease_endpoint`, renewed while it works) reads its
//!   cursor and due deliveries and sends. A host that dies stops renewing;
//!   when the lease lapses (`LEASE`) another host's worker takes it and
//!   carries on from the stored cursor: what the dead host had in flight is
//!   sent again, with the same delivery ids (at least once). On redb every
//!   lease is granted (one host, one dispatcher).
//!
//! Nothing here runs on a request's task: an API request at most commits an
//! outbox row (chat path) or a delivery row (test route).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use chrono::{DateTime, Utc};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use tokio::task::JoinSet;

use super::ssrf::{self, CheckedResolver, Lookup};
use super::store::{Attempt, AttemptEffect, Delivery, Endpoint, WebhookStore};
use crate::config::{Config, WebhooksConfig};
use gatehouse_store::Store;
use gatehouse_store::audit::{Audit, category, kind, outcome};
use gatehouse_store::model::Severity;
use gatehouse_store::{StoreError, StoreResult};

/// Outbox events read per look.
const OUTBOX_PAGE: usize = 64;
/// Response bytes read (and discarded) so the connection can be reused.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Pause after a storage error before trying again.
const ERROR_BACKOFF: Duration = Duration::from_secs(1);
/// How long the recorder gathers outcomes before committing them.
const RECORD_LINGER: Duration = Duration::from_millis(20);
/// Most outcomes (or cancellations) per commit.
const RECORD_BATCH: usize = 256;
/// How long an endpoint's lease lasts unless renewed: the longest a dead
/// host's deliveries wait for another host. Renewed every third of it.
pub const LEASE: Duration = Duration::from_secs(10);
/// How often the store is read for endpoints without a worker here.
const RESCAN_EVERY: Duration = Duration::from_secs(2);

/// Header names (docs/api.md#what-a-receiver-gets).
pub const HEADER_EVENT: &str = "X-Gatehouse-Event";
pub const HEADER_DELIVERY: &str = "X-Gatehouse-Delivery";
pub const HEADER_SIGNATURE: &str = "X-Gatehouse-Signature";

pub(super) struct Dispatcher {
    shared: Arc<Shared>,
}

enum Record {
    Attempt(Box<Attempt>, oneshot::Sender<StoreResult<AttemptEffect>>),
    Cursor(String, u64),
}

struct Shared {
    store: Arc<dyn WebhookStore>,
    outbox: Arc<dyn Store>,
    config: Arc<ArcSwap<Config>>,
    client: reqwest::Client,
    /// Endpoint id → the running worker's wake-up.
    workers: Mutex<HashMap<String, Worker>>,
    stop: watch::Sender<bool>,
    recorder: mpsc::Sender<Record>,
    /// This dispatcher's name in endpoint leases: unique per process.
    owner: String,
}

/// A name no other dispatcher has: the process id (to find the host in the
/// database while debugging) and a random part (process ids repeat across machines).
fn owner_name() -> String {
    format!("pid-{}-{:016x}", std::process::id(), rand::random::<u64>())
}

fn settings(config: &ArcSwap<Config>) -> WebhooksConfig {
    config.load().webhooks.clone()
}

impl Dispatcher {
    /// Build the client, start the recorder and a worker per endpoint that
    /// is enabled or has pending deliveries.
    pub(super) async fn start(
        store: Arc<dyn WebhookStore>,
        outbox: Arc<dyn Store>,
        config: Arc<ArcSwap<Config>>,
        lookup: Arc<dyn Lookup>,
    ) -> anyhow::Result<Self> {
        let cfg = config.clone();
        let allow_private: Arc<dyn Fn() -> bool + Send + Sync> = Arc::new(move || cfg.load().webhooks.allow_private);
        let per_host = settings(&config).max_in_flight_per_endpoint.max(1);
        let client = reqwest::Client::builder()
            // The connection must go where the guard looked: no proxies from
            // the environment, no redirects, our resolver.
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(CheckedResolver::new(lookup, allow_private)))
            .pool_max_idle_per_host(per_host)
            .pool_idle_timeout(Duration::from_secs(30))
            .user_agent(concat!("Gatehouse-Webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the webhook HTTP client: {e}"))?;
        let (stop, _) = watch::channel(false);
        let (recorder, records) = mpsc::channel(RECORD_BATCH * 4);
        let shared =
            Arc::new(Shared { store, outbox, config, client, workers: Mutex::new(HashMap::new()), stop, recorder, owner: owner_name() });
        #[expect(
            clippy::disallowed_methods,
            reason = "the recorder stops on `stop`, which `Dispatcher::shutdown` sends and then waits out"
        )]
        tokio::spawn(recorder_loop(shared.store.clone(), records, shared.stop.subscribe()));
        let mut start: Vec<String> = shared.store.list_endpoints().await?.into_iter().filter(|e| e.enabled).map(|e| e.id).collect();
        let pending = shared.store.endpoints_with_pending().await?;
        if !pending.is_empty() {
            tracing::info!(endpoints = pending.len(), "resuming pending webhook deliveries");
        }
        start.extend(pending);
        for ep in start {
            shared.kick(&ep);
        }
        #[expect(clippy::disallowed_methods, reason = "the rescan stops on `stop`, which `Dispatcher::shutdown` sends")]
        tokio::spawn(rescan(shared.clone()));
        Ok(Dispatcher { shared })
    }

    /// New events are in the outbox: wake every worker now rather than at
    /// its next look (`webhooks.poll_interval_ms`).
    pub(super) fn wake(&self) {
        if let Ok(workers) = self.shared.workers.lock() {
            for w in workers.values() {
                w.notify.notify_one();
            }
        }
    }

    /// Something changed for `endpoint_id` (created, updated, deleted, a
    /// delivery queued): wake its worker, starting one if none runs.
    pub(super) fn kick(&self, endpoint_id: &str) {
        self.shared.kick(endpoint_id);
    }

    /// Stop the workers and the recorder. Attempts in flight are abandoned;
    /// what they were delivering is sent again after the next start.
    pub(super) async fn shutdown(&self) {
        let _ = self.shared.stop.send(true);
        // Let the recorder commit what it holds.
        tokio::time::sleep(RECORD_LINGER * 2).await;
    }
}

/// A running worker: how to wake it, and how many times it was kicked (so a
/// worker that read its endpoint's state can tell, under the lock, whether
/// anything changed while it read).
struct Worker {
    notify: Arc<Notify>,
    kicks: u64,
}

impl Shared {
    fn kick(self: &Arc<Self>, endpoint_id: &str) {
        if *self.stop.borrow() {
            return;
        }
        let Ok(mut workers) = self.workers.lock() else { return };
        if let Some(w) = workers.get_mut(endpoint_id) {
            w.kicks += 1;
            w.notify.notify_one();
            return;
        }
        let notify = Arc::new(Notify::new());
        workers.insert(endpoint_id.to_owned(), Worker { notify: notify.clone(), kicks: 0 });
        #[expect(
            clippy::disallowed_methods,
            reason = "an endpoint's worker stops on `stop`, which `Dispatcher::shutdown` sends; unfinished deliveries stay in the store for the next start"
        )]
        tokio::spawn(worker(self.clone(), endpoint_id.to_owned(), notify));
    }

    /// Called by the worker of a disabled or deleted endpoint with nothing in
    /// flight: leave the map unless the endpoint came back or has pending
    /// deliveries. No wake-up is lost: a `kick` (which follows the store
    /// write it announces) while the state is read keeps the worker, and one
    /// after the removal finds no worker and starts one.
    async fn retire(&self, endpoint_id: &str) -> bool {
        let Some(kicks) = self.kicks(endpoint_id) else { return true };
        let enabled = matches!(self.store.get_endpoint(endpoint_id).await, Ok(Some(e)) if e.enabled);
        let pending = match self.store.due_deliveries(endpoint_id, DateTime::<Utc>::MAX_UTC, 1).await {
            Ok(d) => !d.due.is_empty(),
            Err(_) => true,
        };
        if enabled || pending {
            return false;
        }
        let Ok(mut workers) = self.workers.lock() else { return true };
        if workers.get(endpoint_id).is_some_and(|w| w.kicks != kicks) {
            return false;
        }
        workers.remove(endpoint_id);
        true
    }

    /// How many times `endpoint_id`'s worker was kicked; `None` without a worker.
    fn kicks(&self, endpoint_id: &str) -> Option<u64> {
        self.workers.lock().ok()?.get(endpoint_id).map(|w| w.kicks)
    }
}

/// Start a worker for every endpoint that is enabled or has pending
/// deliveries and has none here: endpoints created, re-enabled or given a
/// test delivery through another host of a fleet (that host kicked its own
/// worker only). A worker already running is not woken.
async fn rescan(shared: Arc<Shared>) {
    let mut stop = shared.stop.subscribe();
    let mut tick = tokio::time::interval(RESCAN_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let enabled = match shared.store.list_endpoints().await {
            Ok(eps) => eps.into_iter().filter(|e| e.enabled).map(|e| e.id),
            Err(e) => {
                tracing::debug!(error = %e, "listing webhook endpoints failed; trying again at the next rescan");
                continue;
            }
        };
        let pending = shared.store.endpoints_with_pending().await.unwrap_or_default();
        for id in enabled.chain(pending) {
            if shared.kicks(&id).is_none() {
                shared.kick(&id);
            }
        }
    }
}

/// The worker's hold on its endpoint's lease.
struct Lease {
    /// When it was last taken or renewed; `None` while another owner holds it.
    renewed: Option<Instant>,
}

impl Lease {
    /// Take or renew the lease when a third of it has passed; true while this worker owns the endpoint.
    async fn hold(&mut self, shared: &Shared, endpoint_id: &str) -> bool {
        if self.renewed.is_some_and(|t| t.elapsed() < LEASE / 3) {
            return true;
        }
        match shared.store.lease_endpoint(endpoint_id, &shared.owner, LEASE).await {
            Ok(true) => {
                if self.renewed.is_none() {
                    tracing::debug!(endpoint = %endpoint_id, "took the lease on a webhook endpoint's deliveries");
                }
                self.renewed = Some(Instant::now());
                true
            }
            Ok(false) => {
                self.renewed = None;
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, endpoint = %endpoint_id, "renewing a webhook endpoint's lease failed");
                // Still ours until it lapses; after that another host may take it.
                self.renewed.is_some_and(|t| t.elapsed() < LEASE)
            }
        }
    }
}

/// What a worker decided to do next.
struct Plan {
    /// Wake at this time (a retry comes due, or more work right away).
    wake_at: Option<DateTime<Utc>>,
}

async fn worker(shared: Arc<Shared>, endpoint_id: String, notify: Arc<Notify>) {
    let mut stop = shared.stop.subscribe();
    let mut in_flight: JoinSet<()> = JoinSet::new();
    // Task id → (delivery id, outbox seq of a fresh attempt). A task runs until
    // its outcome is committed, so a delivery is never started twice at once.
    let mut running: HashMap<tokio::task::Id, (String, Option<u64>)> = HashMap::new();
    // Outbox seqs of fresh attempts not yet recorded: the cursor stays below them.
    let mut fresh: BTreeSet<u64> = BTreeSet::new();
    // Highest outbox seq read; `saved` is the cursor last sent to the recorder.
    let mut frontier = 0u64;
    let mut saved = 0u64;
    // A request holds a slot only while it is out, so batching the records
    // does not throttle the endpoint.
    let max = settings(&shared.config).max_in_flight_per_endpoint.max(1);
    let slots = Arc::new(Semaphore::new(max));
    let mut lease = Lease { renewed: None };
    loop {
        if *stop.borrow() {
            return;
        }
        let cfg = settings(&shared.config);
        let plan = match shared.store.get_endpoint(&endpoint_id).await {
            // Another host's dispatcher owns the endpoint: look again when its lease could have lapsed.
            Ok(Some(ep)) if ep.enabled && !lease.hold(&shared, &endpoint_id).await => {
                Plan { wake_at: Some(Utc::now() + chrono::Duration::from_std(LEASE / 3).unwrap_or_default()) }
            }
            Ok(Some(ep)) if ep.enabled => {
                // Re-enabling moves the stored cursor past what was fired meanwhile.
                match shared.store.endpoint_cursor(&endpoint_id).await {
                    Ok(c) if c > frontier => {
                        frontier = c;
                        saved = saved.max(c);
                    }
                    Ok(_) => {}
                    Err(e) => tracing::error!(error = %e, endpoint = %endpoint_id, "reading a webhook cursor failed"),
                }
                let plan = fill(&shared, &ep, &slots, max, &notify, &mut in_flight, &mut running, &mut fresh, &mut frontier, &cfg).await;
                let cursor = fresh.first().map(|s| s - 1).unwrap_or(frontier);
                if cursor > saved && shared.recorder.send(Record::Cursor(endpoint_id.clone(), cursor)).await.is_ok() {
                    saved = cursor;
                }
                plan
            }
            // Disabled or deleted: let attempts in flight finish, then cancel
            // what is due, a bounded batch per commit, and stop.
            Ok(_) if running.is_empty() => match cancel_due(&shared, &endpoint_id, cfg.deliveries_kept_per_endpoint.max(1)).await {
                Ok(Some(t)) => Plan { wake_at: Some(t) },
                Ok(None) => {
                    if shared.retire(&endpoint_id).await {
                        return;
                    }
                    Plan { wake_at: Some(Utc::now()) }
                }
                Err(e) => {
                    tracing::error!(error = %e, endpoint = %endpoint_id, "cancelling webhook deliveries failed");
                    Plan { wake_at: Some(Utc::now() + chrono::Duration::seconds(1)) }
                }
            },
            Ok(_) => Plan { wake_at: None },
            Err(e) => {
                tracing::error!(error = %e, endpoint = %endpoint_id, "reading a webhook endpoint failed");
                Plan { wake_at: Some(Utc::now() + chrono::Duration::seconds(1)) }
            }
        };
        let mut wait = plan.wake_at.map(|t| (t - Utc::now()).to_std().unwrap_or(Duration::ZERO));
        if lease.renewed.is_some() {
            // Wake in time to renew the lease, even with nothing to do.
            wait = Some(wait.map_or(LEASE / 3, |w| w.min(LEASE / 3)));
        }
        tokio::select! {
            _ = notify.notified() => {}
            Some(done) = in_flight.join_next_with_id(), if !in_flight.is_empty() => {
                let id = match done {
                    Ok((id, ())) => id,
                    Err(e) => {
                        tracing::error!(error = %e, endpoint = %endpoint_id, "a webhook attempt panicked");
                        e.id()
                    }
                };
                if let Some((_, Some(seq))) = running.remove(&id) {
                    fresh.remove(&seq);
                }
            }
            _ = sleep_opt(wait) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Start attempts while slots are free: due pending deliveries first, then
/// outbox events after the frontier. Returns when to look again.
#[allow(clippy::too_many_arguments)]
async fn fill(
    shared: &Arc<Shared>,
    ep: &Endpoint,
    slots: &Arc<Semaphore>,
    max: usize,
    notify: &Arc<Notify>,
    in_flight: &mut JoinSet<()>,
    running: &mut HashMap<tokio::task::Id, (String, Option<u64>)>,
    fresh: &mut BTreeSet<u64>,
    frontier: &mut u64,
    cfg: &WebhooksConfig,
) -> Plan {
    let now = Utc::now();
    let poll = now + chrono::Duration::milliseconds(cfg.poll_interval_ms.max(1) as i64);
    // Bound the tasks waiting for their records, not only the requests out.
    if slots.available_permits() == 0 || running.len() >= max * 16 {
        return Plan { wake_at: None };
    }
    let mut wake_at = Some(poll);
    match shared.store.due_deliveries(&ep.id, now, max + running.len()).await {
        Ok(due) => {
            if let Some(t) = due.next_due {
                wake_at = Some(t.min(poll));
            }
            let busy: HashSet<String> = running.values().map(|(id, _)| id.clone()).collect();
            for d in due.due.into_iter().filter(|d| !busy.contains(&d.id)) {
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    return Plan { wake_at: None };
                };
                let id = d.id.clone();
                let h = in_flight.spawn(attempt(shared.clone(), d, false, slot, notify.clone()));
                running.insert(h.id(), (id, None));
            }
        }
        Err(e) => {
            tracing::error!(error = %e, endpoint = %ep.id, "reading due webhook deliveries failed");
            return Plan { wake_at: Some(now + chrono::Duration::seconds(1)) };
        }
    }
    let delay = cfg.retry_delays().first().copied().unwrap_or_default();
    loop {
        if slots.available_permits() == 0 {
            return Plan { wake_at: None };
        }
        let page = match shared.outbox.outbox_after(*frontier, OUTBOX_PAGE).await {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %e, endpoint = %ep.id, "reading the outbox failed");
                return Plan { wake_at: Some(now + chrono::Duration::seconds(1)) };
            }
        };
        let full = page.len() == OUTBOX_PAGE;
        for (seq, event) in page {
            if !ep.subscribes(&event.kind) {
                *frontier = seq;
                continue;
            }
            let created = DateTime::from_timestamp(event.created, 0).unwrap_or(now);
            if created + delay > now {
                // A first delay (the first retry delay > 0) not yet over.
                return Plan { wake_at: Some(created + delay) };
            }
            let d = match Delivery::new(&ep.id, &event, now, now) {
                Ok(d) => d,
                Err(e) => {
                    tracing::error!(error = %e, endpoint = %ep.id, "building a webhook delivery failed");
                    *frontier = seq;
                    continue;
                }
            };
            if running.values().any(|(id, _)| *id == d.id) {
                *frontier = seq;
                continue;
            }
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                return Plan { wake_at: None };
            };
            *frontier = seq;
            fresh.insert(seq);
            let id = d.id.clone();
            let h = in_flight.spawn(attempt(shared.clone(), d, true, slot, notify.clone()));
            running.insert(h.id(), (id, Some(seq)));
        }
        if !full {
            return Plan { wake_at };
        }
    }
}

async fn sleep_opt(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// Cancel a batch of a disabled endpoint's due deliveries. Returns when to
/// look again (more are due, or later ones), or `None` if none is pending.
async fn cancel_due(shared: &Shared, endpoint_id: &str, keep: usize) -> StoreResult<Option<DateTime<Utc>>> {
    let now = Utc::now();
    let due = shared.store.due_deliveries(endpoint_id, now, RECORD_BATCH).await?;
    if due.due.is_empty() {
        return Ok(due.next_due);
    }
    let ids = due.due.into_iter().map(|d| d.id).collect();
    cancel(shared, endpoint_id, ids, keep).await?;
    Ok(Some(now))
}

/// Finish deliveries of a disabled endpoint without an attempt, and count them.
async fn cancel(shared: &Shared, endpoint_id: &str, ids: Vec<String>, keep: usize) -> StoreResult<()> {
    let n = ids.len() as u64;
    shared.store.cancel_deliveries(endpoint_id, ids, "endpoint disabled".into(), keep).await?;
    crate::metrics::get().webhook_outcome("cancelled", n);
    Ok(())
}

/// Commit outcomes and cursor moves in batches: wait for one, gather more
/// for up to `RECORD_LINGER`, write them in one commit, answer each.
async fn recorder_loop(store: Arc<dyn WebhookStore>, mut records: mpsc::Receiver<Record>, mut stop: watch::Receiver<bool>) {
    let mut stopping = false;
    loop {
        let first = tokio::select! {
            m = records.recv() => match m { Some(m) => m, None => return },
            _ = stop.changed(), if !stopping => { stopping = true; continue; }
        };
        let mut batch = vec![first];
        let linger = tokio::time::sleep(if stopping { Duration::ZERO } else { RECORD_LINGER });
        tokio::pin!(linger);
        while batch.len() < RECORD_BATCH {
            tokio::select! {
                m = records.recv() => match m { Some(m) => batch.push(m), None => break },
                _ = &mut linger => break,
            }
        }
        let mut attempts = Vec::new();
        let mut replies = Vec::new();
        let mut cursors: HashMap<String, u64> = HashMap::new();
        for r in batch {
            match r {
                Record::Attempt(a, reply) => {
                    attempts.push(*a);
                    replies.push(reply);
                }
                Record::Cursor(ep, to) => {
                    let c = cursors.entry(ep).or_default();
                    *c = (*c).max(to);
                }
            }
        }
        match store.record(attempts, cursors.into_iter().collect()).await {
            Ok(effects) => {
                for (reply, effect) in replies.into_iter().zip(effects) {
                    let _ = reply.send(Ok(effect));
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "recording webhook outcomes failed");
                let msg = e.to_string();
                for reply in replies {
                    let _ = reply.send(Err(StoreError::Backend(msg.clone())));
                }
            }
        }
    }
}

/// One attempt of one delivery, recorded. `slot` is released (and the
/// worker woken) as soon as the request is over. Storage errors are logged;
/// the delivery is attempted again later (it is still pending, or its event
/// is still after the cursor).
async fn attempt(shared: Arc<Shared>, d: Delivery, fresh: bool, slot: OwnedSemaphorePermit, worker: Arc<Notify>) {
    if let Err(e) = attempt_inner(&shared, d, fresh, slot, &worker).await {
        tracing::error!(error = %e, "recording a webhook attempt failed");
        tokio::time::sleep(ERROR_BACKOFF).await;
    }
}

async fn attempt_inner(shared: &Arc<Shared>, d: Delivery, fresh: bool, slot: OwnedSemaphorePermit, worker: &Notify) -> StoreResult<()> {
    let cfg = settings(&shared.config);
    let keep = cfg.deliveries_kept_per_endpoint.max(1);
    let endpoint = match shared.store.get_endpoint(&d.endpoint_id).await? {
        Some(e) if e.enabled => e,
        Some(_) if !fresh => {
            return cancel(shared, &d.endpoint_id, vec![d.id], keep).await;
        }
        _ => return Ok(()),
    };
    let Some(secret) = shared.store.endpoint_secret(&endpoint.id).await?.map(super::signer::WebhookSecret::from) else {
        return Ok(());
    };
    let timeout = Duration::from_millis(cfg.timeout_ms.max(1));
    let started = Instant::now();
    let sent = send(shared, &endpoint.url, &d, &secret, timeout, cfg.allow_private).await;
    drop(slot);
    worker.notify_one();
    let (status_code, latency_ms, error) = match sent {
        Ok((code, latency)) if (200..300).contains(&code) => (Some(code), latency, None),
        Ok((code, latency)) => (Some(code), latency, Some(format!("HTTP {code}"))),
        Err(e) => (None, started.elapsed().as_millis() as u64, Some(e)),
    };
    let now = Utc::now();
    // `attempts` counts those made before this one; delay i precedes attempt i+1.
    let retry_at = match &error {
        Some(_) => cfg.retry_delays().get(d.attempts as usize + 1).map(|delay| now + *delay),
        None => None,
    };
    let host = reqwest::Url::parse(&endpoint.url).ok().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_default();
    let disable_audit = Audit::new(
        kind::WEBHOOK_MANAGEMENT,
        category::SYSTEM_INTEGRITY,
        format!("Webhook endpoint {} disabled after {} consecutive failed deliveries", endpoint.id, cfg.disable_after.max(1)),
    )
    .severity(Severity::Warning)
    .outcome(outcome::FAILURE)
    .meta("operation", "auto_disable_webhook")
    .meta("webhookId", endpoint.id.clone())
    .meta("host", host.clone())
    .meta("lastDeliveryId", d.id.clone())
    .meta("lastError", error.clone().unwrap_or_default())
    .build();
    let attempt_no = d.attempts + 1;
    let (delivery_id, event_id) = (d.id.clone(), d.event_id.clone());
    let (reply, effect) = oneshot::channel();
    let attempt = Attempt {
        delivery: d,
        fresh,
        at: now,
        status_code,
        latency_ms,
        error: error.clone(),
        retry_at,
        disable_after: cfg.disable_after.max(1),
        keep,
        disable_audit,
    };
    let stopped = || StoreError::Backend("the webhook recorder has stopped".into());
    shared.recorder.send(Record::Attempt(Box::new(attempt), reply)).await.map_err(|_| stopped())?;
    let effect = effect.await.map_err(|_| stopped())??;
    let err = error.as_deref().unwrap_or_default();
    let metrics = crate::metrics::get();
    match effect {
        AttemptEffect::Acknowledged => {
            metrics.webhook_outcome("delivered", 1);
            tracing::debug!(endpoint = %endpoint.id, delivery = %delivery_id, event = %event_id, attempt = attempt_no, latency_ms, "webhook delivered")
        }
        AttemptEffect::Retry => {
            metrics.webhook_outcome("retry", 1);
            tracing::info!(endpoint = %endpoint.id, %host, delivery = %delivery_id, attempt = attempt_no, error = err, "webhook attempt failed; will retry")
        }
        AttemptEffect::Failed { disabled } => {
            metrics.webhook_outcome("failed", 1);
            tracing::warn!(endpoint = %endpoint.id, %host, delivery = %delivery_id, attempts = attempt_no, error = err, "webhook delivery failed");
            if disabled {
                tracing::warn!(endpoint = %endpoint.id, %host, "webhook endpoint disabled after repeated failures");
            }
        }
        AttemptEffect::Gone => {}
    }
    Ok(())
}

/// POST the delivery; the status and the time to the response headers, or
/// what went wrong. Never follows redirects (a 3xx is a failure).
async fn send(
    shared: &Shared,
    url: &str,
    d: &Delivery,
    secret: &super::signer::WebhookSecret,
    timeout: Duration,
    allow_private: bool,
) -> Result<(u16, u64), String> {
    // IP literals never reach the resolver: check them here, every attempt.
    let parsed = ssrf::parse(url, allow_private).map_err(|e| format!("refused by the URL guard: {e}"))?;
    let t = Utc::now().timestamp();
    let started = Instant::now();
    let request = shared
        .client
        .post(parsed.url)
        .timeout(timeout)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(HEADER_EVENT, d.event_type.as_str())
        .header(HEADER_DELIVERY, d.id.as_str())
        .header(HEADER_SIGNATURE, secret.header(t, d.body.as_bytes()))
        .body(d.body.clone());
    let mut resp = request.send().await.map_err(|e| describe(&e, timeout))?;
    let latency = started.elapsed().as_millis() as u64;
    let code = resp.status().as_u16();
    // Read (a bounded amount of) the body so the connection can be reused.
    let mut read = 0usize;
    while read < MAX_RESPONSE_BYTES {
        match resp.chunk().await {
            Ok(Some(c)) => read += c.len(),
            _ => break,
        }
    }
    Ok((code, latency))
}

/// A reqwest error as one line, without the URL (it may carry a token).
fn describe(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        return format!("timed out after {} ms", timeout.as_millis());
    }
    let mut causes = Vec::new();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        // The resolver refused every address of the name (DNS rebinding, or a
        // name that now points inside).
        if let Some(g) = s.downcast_ref::<ssrf::UrlRefused>() {
            return format!("refused by the URL guard: {g}");
        }
        causes.push(s.to_string());
        src = s.source();
    }
    let detail = if causes.is_empty() { "unknown error".to_owned() } else { causes.join(": ") };
    if e.is_connect() { format!("connection failed: {detail}") } else { format!("request failed: {detail}") }
}
