//! Admission control for the chat routes: load shedding for the host, and a
//! fair share of it for each key (docs/decisions/fair-admission.md).
//!
//! In order, for a chat request:
//! 1. authentication (`auth::layer`);
//! 2. a read-only look at the key's rate limits and quotas
//!    ([`crate::auth::limits::Limiter::peek`]): a key already over one is
//!    refused with its 429 before its body is read;
//! 3. a place under the host-wide `chat.max_in_flight`, or 503 `Server busy`;
//! 4. a place among the key's bodies being received (at most its share), or
//!    429 naming the concurrency cap — then the body (`api::intake`);
//! 5. the limiter counts the request (`chat::pipeline`), after which
//! 6. the key takes a place among its requests in flight (at most its share),
//!    or gets the same 429, not counted;
//! 7. validation and the rest of the pipeline.
//!
//! A key's share is `chat.key_share` of `chat.max_in_flight` (1/8 by
//! default, at least 1), so no key, however high its rate limits, can take
//! more than its share of the host's places, whether with bodies that never
//! come (slot filling) or with requests that hold a slow model.
//!
//! A refused request is not counted by the rate limiter, claims no
//! idempotency key and writes nothing, except that the first refusal per key
//! and minute fires `api:limit_reached` (`limit: "concurrency"`) with its
//! audit record. A body abandoned by its client (timed out or cut off) is
//! counted once in the key's per-minute and per-hour windows — it cost the
//! host a place for its whole deadline — and audited once per key and minute.
//!
//! The path is on every chat request, so it is kept lock-light: the host's
//! count and each key's counts are atomics; a key's counts are found in a
//! sharded map (a lock held only for the lookup). Limits are read from the
//! live config at each request, so a reload changes them at once.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde_json::json;

use super::deps::ChatDeps;
use super::format::Format;
use super::pipeline::{self, Reply};
use super::security::Trail;
use crate::auth::AuthContext;
use crate::auth::limit_reply;
use crate::auth::limits::{BucketSet, Decision, effective};
use crate::config::ChatConfig;
use crate::error::{ChatError, ErrorFormat, text};
use gatehouse_store::audit::{Audit, category, kind, outcome};
use gatehouse_store::model::Severity;
use gatehouse_store::records::{OutboxEvent, RequestOutcome};

/// Seconds a refused client is asked to wait (`Retry-After`).
pub const RETRY_AFTER_SECS: u64 = 1;

/// The routes admission applies to.
pub fn is_chat_route(path: &str) -> bool {
    path == "/chat/completions" || path == "/api/external/v1/chat/completions"
}

/// The chat format of a chat route.
fn format_of(path: &str) -> Format {
    if path == "/chat/completions" { Format::Gatehouse } else { Format::OpenAi { include_usage: false } }
}

/// One key's share of the host's places: `chat.key_share` of
/// `chat.max_in_flight`, rounded down, at least one.
pub fn key_share(chat: &ChatConfig) -> usize {
    ((chat.max_in_flight as f64 * chat.key_share) as usize).clamp(1, chat.max_in_flight)
}

/// Lock shards of the per-key map: enough that keys seldom share one.
const SHARDS: usize = 16;

/// One shard of the per-key map, by key id.
type KeyShard = Mutex<HashMap<Box<str>, Arc<KeyLoad>>>;

/// The count of chat requests being served, each key's counts, and the
/// bytes of request bodies being received.
#[derive(Debug)]
pub struct Admission {
    in_flight: AtomicUsize,
    keys: Box<[KeyShard]>,
    hasher: std::collections::hash_map::RandomState,
    receiving: AtomicUsize,
}

impl Default for Admission {
    fn default() -> Self {
        Admission {
            in_flight: AtomicUsize::new(0),
            keys: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: Default::default(),
            receiving: AtomicUsize::new(0),
        }
    }
}

impl Admission {
    /// A slot if fewer than `max` requests hold one; `None` when full.
    pub fn enter(self: &Arc<Self>, max: usize) -> Option<Slot> {
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        if before >= max {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Slot { _host: Arc::new(Held { gate: Arc::clone(self) }), load: None, place: None })
    }

    /// Requests holding a slot now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// The counts of one key (made on its first request; a key's entry is a
    /// few words, and keys are created by admins only).
    pub fn key(&self, key_id: &str) -> Arc<KeyLoad> {
        let shard = &self.keys[self.hasher.hash_one(key_id) as usize % SHARDS];
        let mut map = shard.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(load) = map.get(key_id) {
            return Arc::clone(load);
        }
        let load = Arc::new(KeyLoad::default());
        map.insert(key_id.into(), Arc::clone(&load));
        load
    }

    /// A counter of one body's bytes against the host-wide cap on bytes of
    /// bodies being received (every route), given back when dropped.
    pub fn receiving(self: &Arc<Self>) -> Receiving {
        Receiving { gate: Arc::clone(self), bytes: 0 }
    }
}

/// One key's counts.
#[derive(Debug)]
pub struct KeyLoad {
    bodies: AtomicUsize,
    in_flight: AtomicUsize,
    /// The minute (Unix minutes) of the last concurrency refusal reported.
    refusal_reported: AtomicI64,
    /// The minute of the last abandoned body audited.
    abandon_reported: AtomicI64,
}

impl Default for KeyLoad {
    fn default() -> Self {
        KeyLoad {
            bodies: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            refusal_reported: AtomicI64::new(i64::MIN),
            abandon_reported: AtomicI64::new(i64::MIN),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Body,
    InFlight,
}

impl KeyLoad {
    fn counter(&self, phase: Phase) -> &AtomicUsize {
        match phase {
            Phase::Body => &self.bodies,
            Phase::InFlight => &self.in_flight,
        }
    }

    fn enter(self: &Arc<Self>, phase: Phase, share: usize) -> Option<KeyPlace> {
        let counter = self.counter(phase);
        if counter.fetch_add(1, Ordering::AcqRel) >= share {
            counter.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(KeyPlace { load: Arc::clone(self), phase })
    }

    /// A place among the key's bodies being received.
    pub fn begin_body(self: &Arc<Self>, share: usize) -> Option<KeyPlace> {
        self.enter(Phase::Body, share)
    }

    /// Whether this is the first time in `minute` that `stamp` is set.
    fn first_in(stamp: &AtomicI64, minute: i64) -> bool {
        stamp.swap(minute, Ordering::AcqRel) != minute
    }

    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        (self.bodies.load(Ordering::Acquire), self.in_flight.load(Ordering::Acquire))
    }
}

/// A key's place in one phase, given back when dropped.
#[derive(Debug)]
pub struct KeyPlace {
    load: Arc<KeyLoad>,
    phase: Phase,
}

impl Drop for KeyPlace {
    fn drop(&mut self) {
        self.load.counter(self.phase).fetch_sub(1, Ordering::AcqRel);
    }
}

/// Bytes of one body being received, counted against the host-wide cap.
#[derive(Debug)]
pub struct Receiving {
    gate: Arc<Admission>,
    bytes: usize,
}

impl Receiving {
    /// Count `n` more bytes; `false` (nothing counted) when that would pass `max`.
    pub fn add(&mut self, n: usize, max: usize) -> bool {
        let before = self.gate.receiving.fetch_add(n, Ordering::AcqRel);
        if before.saturating_add(n) > max {
            self.gate.receiving.fetch_sub(n, Ordering::AcqRel);
            return false;
        }
        self.bytes += n;
        true
    }
}

impl Drop for Receiving {
    fn drop(&mut self) {
        self.gate.receiving.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// One admitted chat request's places — the host's, and once the limiter has
/// counted it, the key's — freed when the last holder drops it: the end of
/// a JSON request, or a stream's pump when it finishes. (Cloneable only
/// because request extensions must be; the handler takes the one copy.)
#[derive(Debug, Clone)]
pub struct Slot {
    _host: Arc<Held>,
    load: Option<Arc<KeyLoad>>,
    place: Option<Arc<KeyPlace>>,
}

impl Slot {
    /// Take a place among the key's requests in flight; the slot back if the
    /// key holds its share already.
    pub fn enter_key(mut self, share: usize) -> Result<Slot, Slot> {
        let Some(load) = &self.load else { return Ok(self) };
        match load.enter(Phase::InFlight, share) {
            Some(place) => {
                self.place = Some(Arc::new(place));
                Ok(self)
            }
            None => Err(self),
        }
    }
}

#[derive(Debug)]
struct Held {
    gate: Arc<Admission>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.gate.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What the intake holds while it reads an admitted chat request's body.
pub struct Admit {
    pub slot: Slot,
    pub body: KeyPlace,
    pub load: Arc<KeyLoad>,
}

/// For the intake, steps 2 to 4: the chat request's places, or the answer
/// that refuses it. Other routes pass (`Ok(None)`).
pub async fn admit(deps: &ChatDeps, path: &str, ctx: Option<&AuthContext>) -> Result<Option<Admit>, Response> {
    if !is_chat_route(path) {
        return Ok(None);
    }
    let Some(ctx) = ctx else {
        // Chat routes are never public; the handler's extractor answers 401.
        return Ok(None);
    };
    let (limits, max, share) = {
        let cfg = deps.config();
        (effective(cfg.limits.chat, &ctx.key.limits), cfg.chat.max_in_flight, key_share(&cfg.chat))
    };
    let format = format_of(path);
    let decision = deps.limiter.peek(BucketSet::Chat, &ctx.key.id, limits, Utc::now());
    if !decision.allowed {
        let (events, audit) = limit_reply::limit_reached(ctx, &decision);
        let reply = Reply::error(format, limit_reply::rate_limit_error(&decision), Trail::of(events, audit));
        return Err(limit_reply::with_limit_headers(pipeline::finish(deps, reply, None).await, &decision));
    }
    let Some(mut slot) = deps.admission.enter(max) else {
        crate::metrics::get().chat_shed.inc();
        tracing::debug!(max, "chat request refused: the server is at chat.max_in_flight");
        let message = format!("the gateway is serving its limit of {max} chat requests at once; retry after {RETRY_AFTER_SECS} s");
        return Err(ErrorFormat::for_path(path).busy(&message, RETRY_AFTER_SECS));
    };
    let load = deps.admission.key(&ctx.key.id);
    let Some(body) = load.begin_body(share) else {
        let why = format!("{share} request bodies arriving");
        return Err(over_share(deps, ctx, &load, format, &why, share, &decision, None).await);
    };
    slot.load = Some(Arc::clone(&load));
    Ok(Some(Admit { slot, body, load }))
}

/// The 429 of a key at its share (steps 4 and 6): not counted; the first
/// per key and minute fires `api:limit_reached` with its audit record.
#[allow(clippy::too_many_arguments, reason = "the refusal names what the key holds, its share and its limits")]
pub(super) async fn over_share(
    deps: &ChatDeps,
    ctx: &AuthContext,
    load: &KeyLoad,
    format: Format,
    holding: &str,
    share: usize,
    decision: &Decision,
    claim: Option<super::idempotency::HeldClaim>,
) -> Response {
    let now = Utc::now();
    let minute = now.timestamp().div_euclid(60);
    crate::metrics::get()
        .rate_limit_hits
        .get_or_create(&crate::metrics::LimitLabel { bucket: "chat".to_owned(), window: "concurrency".to_owned() })
        .inc();
    let (max, fraction) = {
        let cfg = deps.config();
        (cfg.chat.max_in_flight, cfg.chat.key_share)
    };
    let mut e = ChatError::new(
        StatusCode::TOO_MANY_REQUESTS,
        text::RATE_LIMITED,
        format!(
            "this API key already has {holding}: its concurrency cap of {share} (chat.key_share {fraction} of chat.max_in_flight \
             {max}); wait for one to finish, then retry after {RETRY_AFTER_SECS} s"
        ),
    );
    e.retry_after = Some(RETRY_AFTER_SECS);
    let mut events = Vec::new();
    let mut reply_audit = Vec::new();
    if KeyLoad::first_in(&load.refusal_reported, minute) {
        let reset = chrono::DateTime::from_timestamp((minute + 1) * 60, 0).unwrap_or(now);
        events.push(OutboxEvent::new(
            "api:limit_reached",
            json!({
                "apiKeyId": ctx.key.id,
                "userId": ctx.key.user_id,
                "limit": "concurrency",
                "limitValue": share,
                "resetTime": crate::time::iso(reset),
            }),
        ));
        reply_audit.push(
            Audit::new(kind::RATE_LIMIT, category::USAGE_CONTROL, format!("API key {} reached its concurrency limit", ctx.key.id))
                .severity(Severity::Warning)
                .outcome(outcome::BLOCKED)
                .meta("operation", "limit_reached")
                .meta("apiKeyId", ctx.key.id.clone())
                .meta("limit", "concurrency")
                .meta("limitValue", share)
                .build(),
        );
    }
    let reply = Reply::error(format, e, Trail::of(events, reply_audit));
    limit_reply::with_limit_headers(pipeline::finish(deps, reply, claim).await, decision)
}

/// A body its client abandoned (timed out or cut off): counted once in the
/// key's per-minute and per-hour windows — it held a place all that time —
/// and audited once per key and minute. Not in the day and month quotas,
/// which bill work done.
pub async fn abandoned(deps: &ChatDeps, ctx: &AuthContext, load: &KeyLoad, why: &str) {
    let now = Utc::now();
    deps.limiter.count_rates(BucketSet::Chat, &ctx.key.id, now);
    if !KeyLoad::first_in(&load.abandon_reported, now.timestamp().div_euclid(60)) {
        return;
    }
    let entry = Audit::new(
        kind::SECURITY_EVENT,
        category::USAGE_CONTROL,
        format!("API key {} abandoned a chat request body ({why}); counted in its per-minute and per-hour limits", ctx.key.id),
    )
    .severity(Severity::Warning)
    .outcome(outcome::FAILURE)
    .meta("operation", "request_body_abandoned")
    .meta("apiKeyId", ctx.key.id.clone())
    .meta("reason", why.to_owned())
    .build();
    let outcome = RequestOutcome { audit: vec![entry], ..Default::default() };
    if let Err(e) = deps.store.finish_request(outcome).await {
        tracing::error!(error = %e, "recording an abandoned request body failed");
    }
}

/// Extractor: the slot the intake took for this request.
pub struct Admitted(pub Slot);

impl<S: Send + Sync> FromRequestParts<S> for Admitted {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        match parts.extensions.remove::<Slot>() {
            Some(slot) => Ok(Admitted(slot)),
            None => {
                tracing::error!(path = parts.uri.path(), "a chat handler ran without an admission slot (is the route in `is_chat_route`?)");
                Err(ChatError::internal().into_response())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_and_freed() {
        let gate = Arc::new(Admission::default());
        let a = gate.enter(2).expect("first of two");
        let b = gate.enter(2).expect("second of two");
        assert!(gate.enter(2).is_none(), "a third over a limit of two is refused");
        assert_eq!(gate.in_flight(), 2, "a refusal leaves the count as it was");
        drop(a);
        let c = gate.enter(2).expect("a freed slot is reused");
        drop(b);
        drop(c);
        assert_eq!(gate.in_flight(), 0);
    }

    #[test]
    fn a_lowered_limit_refuses_until_enough_slots_are_freed() {
        let gate = Arc::new(Admission::default());
        let held: Vec<Slot> = (0..3).map(|_| gate.enter(3).expect("under the limit")).collect();
        assert!(gate.enter(1).is_none());
        drop(held);
        assert!(gate.enter(1).is_some());
    }

    #[test]
    fn concurrent_entries_never_exceed_the_limit() {
        let gate = Arc::new(Admission::default());
        // Holders are counted apart from the gate: its own count includes a
        // refused entrant's brief increment.
        let holders = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (gate, holders, peak) = (Arc::clone(&gate), Arc::clone(&holders), Arc::clone(&peak));
                std::thread::spawn(move || {
                    for _ in 0..2_000 {
                        if let Some(slot) = gate.enter(3) {
                            let now = holders.fetch_add(1, Ordering::AcqRel) + 1;
                            peak.fetch_max(now, Ordering::AcqRel);
                            holders.fetch_sub(1, Ordering::AcqRel);
                            drop(slot);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("no thread panics");
        }
        assert!(peak.load(Ordering::Acquire) <= 3, "peak {} over the limit", peak.load(Ordering::Acquire));
        assert_eq!(gate.in_flight(), 0);
    }

    #[test]
    fn a_key_holds_at_most_its_share_of_bodies_and_of_requests_in_flight() {
        let gate = Arc::new(Admission::default());
        let load = gate.key("k1");
        assert!(Arc::ptr_eq(&load, &gate.key("k1")), "one entry per key");
        let bodies: Vec<KeyPlace> = (0..2).map(|_| load.begin_body(2).expect("within the share")).collect();
        assert!(load.begin_body(2).is_none(), "a third body over a share of two");
        assert!(gate.key("k2").begin_body(2).is_some(), "another key has its own share");
        let mut slots = Vec::new();
        for _ in 0..2 {
            let mut slot = gate.enter(10).expect("host slot");
            slot.load = Some(Arc::clone(&load));
            slots.push(slot.enter_key(2).expect("within the share"));
        }
        let mut third = gate.enter(10).expect("host slot");
        third.load = Some(Arc::clone(&load));
        let third = third.enter_key(2).expect_err("a third request in flight");
        drop(third);
        assert_eq!(load.counts(), (2, 2));
        drop(bodies);
        // A stream's pump holds a clone of the slot: the place is given back with the last one.
        let clone = slots[0].clone();
        drop(slots);
        assert_eq!(load.counts(), (0, 1));
        drop(clone);
        assert_eq!(load.counts(), (0, 0));
        assert_eq!(gate.in_flight(), 0);
    }

    #[test]
    fn a_refusal_is_reported_once_per_minute() {
        let load = KeyLoad::default();
        assert!(KeyLoad::first_in(&load.refusal_reported, 100));
        assert!(!KeyLoad::first_in(&load.refusal_reported, 100));
        assert!(KeyLoad::first_in(&load.refusal_reported, 101));
        assert!(KeyLoad::first_in(&load.abandon_reported, 101), "abandoned bodies are reported apart");
    }

    #[test]
    fn the_share_is_a_fraction_of_the_host_at_least_one() {
        let chat = |max, key_share| ChatConfig { max_in_flight: max, key_share, ..ChatConfig::default() };
        assert_eq!(key_share(&chat(4096, 0.125)), 512);
        assert_eq!(key_share(&chat(64, 0.125)), 8);
        assert_eq!(key_share(&chat(4, 0.125)), 1);
        assert_eq!(key_share(&chat(64, 1.0)), 64);
    }

    #[test]
    fn received_bytes_are_capped_host_wide_and_given_back() {
        let gate = Arc::new(Admission::default());
        let mut a = gate.receiving();
        assert!(a.add(600, 1000));
        let mut b = gate.receiving();
        assert!(!b.add(500, 1000), "1,100 bytes over a cap of 1,000");
        assert!(b.add(400, 1000));
        drop(a);
        assert!(b.add(600, 1000));
        drop(b);
        assert_eq!(gate.receiving.load(Ordering::Acquire), 0);
    }
}
