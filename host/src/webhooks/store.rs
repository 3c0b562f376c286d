//! Webhook storage: endpoint records, secrets, each endpoint's cursor into
//! the event outbox, and deliveries.
//!
//! [`WebhookStore`] speaks in domain operations, each one commit, so a
//! PostgreSQL backend can implement it with transactions of its own; the redb
//! implementation keeps its tables next to the host's, in the same file, and
//! writes through the same group commit (an endpoint change and its audit
//! record are one commit).
//!
//! # Why per-endpoint cursors, not a row per (event, endpoint) at fan-out
//! The outbox already holds every event durably, in commit order. Each
//! endpoint has a cursor into it: every event at or before the cursor has
//! been dealt with for that endpoint (delivered, failed, or stored as a
//! pending delivery for a retry). The dispatcher reads events after the
//! cursor and attempts them; a delivery row is written only when there is
//! something to remember (a retry to schedule, an outcome for the deliveries
//! view). The delivery id of an outbox event is derived from the endpoint id
//! and the event id ([`delivery_id`]), so it is the same on every attempt and
//! after a crash without being stored first. A crash loses nothing: events
//! after the persisted cursor are attempted again (at-least-once, same id).
//! This matters for latency: 20 endpoints that never answer add 20 rows per
//! event under the other scheme, all written through the writer that API
//! requests wait on; here they add a row only when an attempt times out.
//!
//! redb tables (values are JSON unless noted):
//! * `webhook_endpoints`: endpoint id → [`Endpoint`]
//! * `webhook_secrets`: endpoint id → `whsec_…` (its own table: listings never read it)
//! * `webhook_cursors`: endpoint id → outbox sequence number (u64)
//! * `webhook_delivery_rows`: (endpoint id, delivery id) → [`Delivery`] — pending ones with their body
//! * `webhook_queue`: (endpoint id, due ms, delivery id) → () — pending deliveries by due time
//! * `webhook_finished`: (endpoint id, finished µs, delivery id) → () — the history, oldest pruned first
//! * `webhook_meta`: `finished:<endpoint id>` → number of finished deliveries kept (u64)

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, Table, TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::signer::WebhookSecret;
use crate::store::model::AuditEntry;
use crate::store::records::OutboxEvent;
use crate::store::redb::tables::OUTBOX;
use crate::store::redb::{RedbStore, audit, backend, decode, encode};
use crate::store::{StoreError, StoreResult};

/// The event only the test route sends; never delivered from the outbox.
pub const TEST_EVENT: &str = "webhook:test";

/// A webhook endpoint as stored (never with its secret).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// `wh_<uuid>`.
    pub id: String,
    /// Normalised by the URL guard.
    pub url: String,
    pub description: String,
    /// Event names, or `*`.
    pub events: Vec<String>,
    pub enabled: bool,
    /// Failed deliveries in a row; reset by a success and by re-enabling.
    pub failure_count: u32,
    /// Why the endpoint is disabled, when it is.
    pub disabled_reason: Option<String>,
    pub disabled_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Endpoint {
    /// Does this endpoint want events of type `kind`?
    pub fn subscribes(&self, kind: &str) -> bool {
        kind != TEST_EVENT && self.events.iter().any(|e| e == "*" || e == kind)
    }
}

/// Changes to an endpoint; `None` leaves a field alone.
#[derive(Debug, Clone, Default)]
pub struct EndpointPatch {
    pub url: Option<String>,
    pub description: Option<String>,
    pub events: Option<Vec<String>>,
    pub enabled: Option<bool>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Waiting for its next attempt (or in flight).
    Pending,
    /// A 2xx answered one attempt.
    Succeeded,
    /// Every attempt failed.
    Failed,
    /// Dropped because the endpoint was disabled first.
    Cancelled,
}

/// One event for one endpoint: the unit of `X-Gatehouse-Delivery`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// A UUID, the same on every attempt (see [`delivery_id`]).
    pub id: String,
    pub endpoint_id: String,
    pub event_id: String,
    pub event_type: String,
    /// The exact bytes POSTed, fixed when the delivery is created so every
    /// attempt sends (and signs) the same body. Stored while the delivery is
    /// pending, dropped when it finishes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub body: String,
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status_code: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_latency_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The delivery id of `event_id` for `endpoint_id`: a UUID (version 8, from
/// SHA-256 of both ids), so every attempt, before and after a crash, carries
/// the same id without it being stored first.
pub fn delivery_id(endpoint_id: &str, event_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"gatehouse-webhook-delivery\0");
    h.update(endpoint_id.as_bytes());
    h.update(b"\0");
    h.update(event_id.as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&h.finalize()[..16]);
    b[6] = (b[6] & 0x0f) | 0x80; // version 8
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 9562 variant
    uuid::Uuid::from_bytes(b).to_string()
}

impl Delivery {
    /// A new pending delivery of `event` to `endpoint_id`, first attempt at `due`.
    pub fn new(endpoint_id: &str, event: &OutboxEvent, now: DateTime<Utc>, due: DateTime<Utc>) -> StoreResult<Self> {
        Ok(Delivery {
            id: delivery_id(endpoint_id, &event.id),
            endpoint_id: endpoint_id.to_owned(),
            event_id: event.id.clone(),
            event_type: event.kind.clone(),
            body: serde_json::to_string(event).map_err(backend)?,
            status: DeliveryStatus::Pending,
            attempts: 0,
            next_attempt_at: Some(due),
            last_status_code: None,
            last_latency_ms: None,
            last_error: None,
            created_at: now,
            updated_at: now,
        })
    }
}

/// What one attempt produced, for [`WebhookStore::record`].
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The delivery as it was before the attempt (with its body).
    pub delivery: Delivery,
    /// A first attempt of an outbox event, read after the cursor: it has no
    /// row yet (unless an earlier run stored one before a crash).
    pub fresh: bool,
    pub at: DateTime<Utc>,
    pub status_code: Option<u16>,
    pub latency_ms: u64,
    /// `None`: acknowledged (2xx).
    pub error: Option<String>,
    /// When to try again if this attempt failed; `None` if it was the last.
    pub retry_at: Option<DateTime<Utc>>,
    /// Failed deliveries in a row that disable the endpoint.
    pub disable_after: u32,
    /// Finished deliveries kept per endpoint.
    pub keep: usize,
    /// Recorded if this attempt disables the endpoint.
    pub disable_audit: AuditEntry,
}

/// What recording an attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptEffect {
    Acknowledged,
    /// Scheduled again.
    Retry,
    /// Attempts used up; `disabled` if this failure disabled the endpoint.
    Failed {
        disabled: bool,
    },
    /// The delivery was cancelled or deleted meanwhile; nothing recorded.
    Gone,
}

/// Pending deliveries of one endpoint that are due, and when the next one is.
#[derive(Debug, Clone, Default)]
pub struct Due {
    pub due: Vec<Delivery>,
    pub next_due: Option<DateTime<Utc>>,
}

/// Webhook storage operations. Writes that change an endpoint take the audit
/// entry that describes the change and commit it with the change.
#[async_trait]
pub trait WebhookStore: Send + Sync + 'static {
    /// Create the tables (idempotent); called once at start-up.
    async fn prepare_webhooks(&self) -> StoreResult<()>;

    fn list_endpoints(&self) -> StoreResult<Vec<Endpoint>>;
    fn get_endpoint(&self, id: &str) -> StoreResult<Option<Endpoint>>;
    /// The current signing secret; read before every attempt, so a rotation
    /// applies to the next attempt.
    fn endpoint_secret(&self, id: &str) -> StoreResult<Option<WebhookSecret>>;
    /// Store a new endpoint; its cursor starts at the end of the outbox (it
    /// receives events committed after it).
    async fn create_endpoint(&self, endpoint: Endpoint, secret: WebhookSecret, audit: AuditEntry) -> StoreResult<Endpoint>;
    /// Apply `patch`. Enabling a disabled endpoint resets its failure counter
    /// and moves its cursor to the end of the outbox (events fired while it was
    /// disabled are not delivered). The pending deliveries of a disabled
    /// endpoint are cancelled by the dispatcher as they come due.
    async fn update_endpoint(&self, id: &str, patch: EndpointPatch, audit: AuditEntry) -> StoreResult<Endpoint>;
    async fn rotate_secret(&self, id: &str, secret: WebhookSecret, audit: AuditEntry) -> StoreResult<Endpoint>;
    /// Remove the endpoint, its secret, cursor and deliveries.
    async fn delete_endpoint(&self, id: &str, audit: AuditEntry) -> StoreResult<()>;
    /// Queue a delivery outside the outbox (the test route). `NotFound` if
    /// the endpoint is gone, `Conflict` if it is disabled.
    async fn queue_delivery(&self, delivery: Delivery, audit: AuditEntry) -> StoreResult<()>;
    /// Pending and finished deliveries, most recently updated first, without bodies.
    fn recent_deliveries(&self, endpoint_id: &str, limit: usize) -> StoreResult<Vec<Delivery>>;

    /// The endpoint's outbox cursor (0 if it has none).
    fn endpoint_cursor(&self, endpoint_id: &str) -> StoreResult<u64>;
    /// Up to `limit` pending deliveries of an endpoint due at `now`, oldest due first.
    fn due_deliveries(&self, endpoint_id: &str, now: DateTime<Utc>, limit: usize) -> StoreResult<Due>;
    /// Endpoints with pending deliveries.
    fn endpoints_with_pending(&self) -> StoreResult<Vec<String>>;
    /// Deliveries waiting (`gatehouse_webhook_queue_depth`): outbox events an
    /// enabled endpoint's cursor has not passed yet (events it does not
    /// subscribe to are passed within a poll), plus scheduled retries and
    /// test deliveries of every endpoint.
    fn queue_depth(&self) -> StoreResult<u64>;
    /// In one commit: the outcomes of several attempts, and cursor moves
    /// (a cursor never moves back). The dispatcher batches both, so
    /// deliveries cost few commits of the shared writer.
    async fn record(&self, attempts: Vec<Attempt>, cursors: Vec<(String, u64)>) -> StoreResult<Vec<AttemptEffect>>;
    /// Finish pending deliveries without an attempt (their endpoint is disabled).
    async fn cancel_deliveries(&self, endpoint_id: &str, ids: Vec<String>, reason: String, keep: usize) -> StoreResult<()>;
    /// Delete outbox events created before `created_before` (Unix seconds),
    /// oldest first, at most `limit`, and only those every enabled endpoint's
    /// cursor has passed (a pending retry keeps its own copy of the body).
    /// The newest event always stays: the next one's sequence number follows it.
    async fn prune_outbox(&self, created_before: i64, limit: usize) -> StoreResult<usize>;
}

const ENDPOINTS: TableDefinition<&str, &[u8]> = TableDefinition::new("webhook_endpoints");
const SECRETS: TableDefinition<&str, &str> = TableDefinition::new("webhook_secrets");
const CURSORS: TableDefinition<&str, u64> = TableDefinition::new("webhook_cursors");
const DELIVERIES: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("webhook_delivery_rows");
const QUEUE: TableDefinition<(&str, u64, &str), ()> = TableDefinition::new("webhook_queue");
const FINISHED: TableDefinition<(&str, u64, &str), ()> = TableDefinition::new("webhook_finished");
const META: TableDefinition<&str, u64> = TableDefinition::new("webhook_meta");

/// Above every delivery id, for range ends.
const ID_MAX: &str = "\u{10ffff}";

/// The outbox cursor of every enabled endpoint (0 if it has none). A disabled
/// endpoint has none that matters: enabling it moves it to the head.
fn enabled_cursors(
    endpoints: &impl ReadableTable<&'static str, &'static [u8]>,
    cursors: &impl ReadableTable<&'static str, u64>,
) -> StoreResult<Vec<u64>> {
    let mut out = Vec::new();
    for item in endpoints.iter().map_err(backend)? {
        let (_, v) = item.map_err(backend)?;
        let ep: Endpoint = decode(v.value())?;
        if ep.enabled {
            out.push(cursors.get(ep.id.as_str()).map_err(backend)?.map_or(0, |c| c.value()));
        }
    }
    Ok(out)
}

fn finished_key(endpoint_id: &str) -> String {
    format!("finished:{endpoint_id}")
}

fn millis(t: DateTime<Utc>) -> u64 {
    t.timestamp_millis().max(0) as u64
}

fn micros(t: DateTime<Utc>) -> u64 {
    t.timestamp_micros().max(0) as u64
}

fn due_ms(d: &Delivery) -> u64 {
    d.next_attempt_at.map(millis).unwrap_or(0)
}

/// The webhook tables of one write transaction, each opened once.
struct Tx<'t> {
    endpoints: Table<'t, &'static str, &'static [u8]>,
    cursors: Table<'t, &'static str, u64>,
    deliveries: Table<'t, (&'static str, &'static str), &'static [u8]>,
    queue: Table<'t, (&'static str, u64, &'static str), ()>,
    finished: Table<'t, (&'static str, u64, &'static str), ()>,
    meta: Table<'t, &'static str, u64>,
}

impl<'t> Tx<'t> {
    fn open(txn: &'t WriteTransaction) -> StoreResult<Self> {
        Ok(Tx {
            endpoints: txn.open_table(ENDPOINTS).map_err(backend)?,
            cursors: txn.open_table(CURSORS).map_err(backend)?,
            deliveries: txn.open_table(DELIVERIES).map_err(backend)?,
            queue: txn.open_table(QUEUE).map_err(backend)?,
            finished: txn.open_table(FINISHED).map_err(backend)?,
            meta: txn.open_table(META).map_err(backend)?,
        })
    }

    fn endpoint(&self, id: &str) -> StoreResult<Option<Endpoint>> {
        self.endpoints.get(id).map_err(backend)?.map(|v| decode(v.value())).transpose()
    }

    fn existing_endpoint(&self, id: &str) -> StoreResult<Endpoint> {
        self.endpoint(id)?.ok_or_else(|| StoreError::NotFound(format!("webhook endpoint {id}")))
    }

    fn put_endpoint(&mut self, e: &Endpoint) -> StoreResult<()> {
        self.endpoints.insert(e.id.as_str(), encode(e)?.as_slice()).map_err(backend)?;
        Ok(())
    }

    /// Move a cursor forward (never back).
    fn advance(&mut self, endpoint_id: &str, to: u64) -> StoreResult<()> {
        let at = self.cursors.get(endpoint_id).map_err(backend)?.map(|v| v.value()).unwrap_or(0);
        if to > at {
            self.cursors.insert(endpoint_id, to).map_err(backend)?;
        }
        Ok(())
    }

    fn delivery(&self, endpoint_id: &str, id: &str) -> StoreResult<Option<Delivery>> {
        self.deliveries.get((endpoint_id, id)).map_err(backend)?.map(|v| decode(v.value())).transpose()
    }

    fn put_delivery(&mut self, d: &Delivery) -> StoreResult<()> {
        self.deliveries.insert((d.endpoint_id.as_str(), d.id.as_str()), encode(d)?.as_slice()).map_err(backend)?;
        Ok(())
    }

    /// Store `d` as pending and queue it at its due time.
    fn schedule(&mut self, d: &Delivery) -> StoreResult<()> {
        self.put_delivery(d)?;
        self.queue.insert((d.endpoint_id.as_str(), due_ms(d), d.id.as_str()), ()).map_err(backend)?;
        Ok(())
    }

    fn unqueue(&mut self, d: &Delivery) -> StoreResult<()> {
        self.queue.remove((d.endpoint_id.as_str(), due_ms(d), d.id.as_str())).map_err(backend)?;
        Ok(())
    }

    /// Store `d` as finished (unqueued and updated by the caller), without
    /// its body, and prune the endpoint's oldest finished deliveries beyond `keep`.
    fn finish(&mut self, d: &mut Delivery, keep: usize) -> StoreResult<()> {
        d.body.clear();
        d.next_attempt_at = None;
        self.put_delivery(d)?;
        let ep = d.endpoint_id.as_str();
        self.finished.insert((ep, micros(d.updated_at), d.id.as_str()), ()).map_err(backend)?;
        let key = finished_key(ep);
        let mut count = self.meta.get(key.as_str()).map_err(backend)?.map(|v| v.value()).unwrap_or(0) + 1;
        if count as usize > keep {
            let excess = count as usize - keep;
            let mut old = Vec::with_capacity(excess);
            for item in self.finished.range((ep, 0u64, "")..=(ep, u64::MAX, ID_MAX)).map_err(backend)?.take(excess) {
                let (k, _) = item.map_err(backend)?;
                let (_, at, id) = k.value();
                old.push((at, id.to_owned()));
            }
            for (at, id) in &old {
                self.finished.remove((ep, *at, id.as_str())).map_err(backend)?;
                self.deliveries.remove((ep, id.as_str())).map_err(backend)?;
            }
            count -= old.len() as u64;
        }
        self.meta.insert(key.as_str(), count).map_err(backend)?;
        Ok(())
    }

    /// Apply one attempt's outcome; the endpoint it disabled, if any.
    fn record(&mut self, a: &Attempt) -> StoreResult<(AttemptEffect, bool)> {
        let given = &a.delivery;
        let stored = self.delivery(&given.endpoint_id, &given.id)?;
        let mut d = match stored {
            Some(row) if row.status == DeliveryStatus::Pending => {
                self.unqueue(&row)?;
                // A fresh attempt of an event whose row an earlier run stored:
                // the row (and its attempt count) wins.
                if row.body.is_empty() { Delivery { body: given.body.clone(), ..row } } else { row }
            }
            Some(_) => return Ok((AttemptEffect::Gone, false)),
            None if a.fresh => given.clone(),
            None => return Ok((AttemptEffect::Gone, false)),
        };
        let Some(mut ep) = self.endpoint(&d.endpoint_id)? else {
            return Ok((AttemptEffect::Gone, false));
        };
        d.attempts += 1;
        d.last_status_code = a.status_code;
        d.last_latency_ms = Some(a.latency_ms);
        d.last_error = a.error.clone();
        d.updated_at = a.at;
        let effect = match (&a.error, a.retry_at) {
            (None, _) => {
                d.status = DeliveryStatus::Succeeded;
                if ep.failure_count == 0 {
                    // Nothing to change on the endpoint.
                    self.finish(&mut d, a.keep)?;
                    return Ok((AttemptEffect::Acknowledged, false));
                }
                ep.failure_count = 0;
                AttemptEffect::Acknowledged
            }
            (Some(_), Some(at)) => {
                d.next_attempt_at = Some(at);
                self.schedule(&d)?;
                return Ok((AttemptEffect::Retry, false));
            }
            (Some(_), None) => {
                d.status = DeliveryStatus::Failed;
                // Attempts in flight when the endpoint was disabled do not
                // count: the counter says what led to the disable.
                if ep.enabled {
                    ep.failure_count += 1;
                }
                AttemptEffect::Failed { disabled: ep.enabled && ep.failure_count >= a.disable_after }
            }
        };
        self.finish(&mut d, a.keep)?;
        let disabled = effect == AttemptEffect::Failed { disabled: true };
        if disabled {
            // Its pending deliveries are cancelled by the dispatcher as they
            // come due (in small batches, never one huge commit).
            ep.enabled = false;
            ep.disabled_at = Some(a.at);
            ep.disabled_reason = Some(format!(
                "{} consecutive failed deliveries (last: {})",
                ep.failure_count,
                a.error.as_deref().unwrap_or("unknown error")
            ));
            ep.updated_at = a.at;
        }
        self.put_endpoint(&ep)?;
        Ok((effect, disabled))
    }
}

/// The last outbox sequence number, inside `txn`.
fn outbox_head(txn: &WriteTransaction) -> StoreResult<u64> {
    let t = txn.open_table(OUTBOX).map_err(backend)?;
    Ok(t.last().map_err(backend)?.map(|(k, _)| k.value()).unwrap_or(0))
}

impl RedbStore {
    fn wh_read<T>(&self, f: impl FnOnce(&redb::ReadTransaction) -> StoreResult<T>) -> StoreResult<T> {
        let txn = self.database()?.begin_read().map_err(backend)?;
        f(&txn)
    }
}

#[async_trait]
impl WebhookStore for RedbStore {
    async fn prepare_webhooks(&self) -> StoreResult<()> {
        self.writer()
            .write(|txn| {
                // Opening a table in a write transaction creates it.
                Tx::open(txn)?;
                txn.open_table(SECRETS).map_err(backend)?;
                Ok(())
            })
            .await
    }

    fn list_endpoints(&self) -> StoreResult<Vec<Endpoint>> {
        self.wh_read(|txn| {
            let t = txn.open_table(ENDPOINTS).map_err(backend)?;
            let mut out = Vec::new();
            for item in t.iter().map_err(backend)? {
                let (_, v) = item.map_err(backend)?;
                out.push(decode(v.value())?);
            }
            Ok(out)
        })
    }

    fn get_endpoint(&self, id: &str) -> StoreResult<Option<Endpoint>> {
        self.wh_read(|txn| {
            let t = txn.open_table(ENDPOINTS).map_err(backend)?;
            let v = t.get(id).map_err(backend)?;
            v.map(|v| decode(v.value())).transpose()
        })
    }

    fn endpoint_secret(&self, id: &str) -> StoreResult<Option<WebhookSecret>> {
        self.wh_read(|txn| {
            let t = txn.open_table(SECRETS).map_err(backend)?;
            let v = t.get(id).map_err(backend)?;
            Ok(v.map(|v| WebhookSecret::from_stored(v.value().to_owned())))
        })
    }

    async fn create_endpoint(&self, endpoint: Endpoint, secret: WebhookSecret, audit_entry: AuditEntry) -> StoreResult<Endpoint> {
        self.writer()
            .write(move |txn| {
                let head = outbox_head(txn)?;
                let mut tx = Tx::open(txn)?;
                if tx.endpoint(&endpoint.id)?.is_some() {
                    return Err(StoreError::Conflict(format!("webhook endpoint {} already exists", endpoint.id)));
                }
                tx.put_endpoint(&endpoint)?;
                tx.cursors.insert(endpoint.id.as_str(), head).map_err(backend)?;
                drop(tx);
                txn.open_table(SECRETS).map_err(backend)?.insert(endpoint.id.as_str(), secret.expose()).map_err(backend)?;
                audit::append(txn, std::slice::from_ref(&audit_entry))?;
                Ok(endpoint.clone())
            })
            .await
    }

    async fn update_endpoint(&self, id: &str, patch: EndpointPatch, audit_entry: AuditEntry) -> StoreResult<Endpoint> {
        let id = id.to_owned();
        self.writer()
            .write(move |txn| {
                let head = outbox_head(txn)?;
                let mut tx = Tx::open(txn)?;
                let mut ep = tx.existing_endpoint(&id)?;
                let now = Utc::now();
                if let Some(url) = &patch.url {
                    ep.url = url.clone();
                }
                if let Some(d) = &patch.description {
                    ep.description = d.clone();
                }
                if let Some(ev) = &patch.events {
                    ep.events = ev.clone();
                }
                match patch.enabled {
                    Some(true) if !ep.enabled => {
                        ep.enabled = true;
                        ep.failure_count = 0;
                        ep.disabled_reason = None;
                        ep.disabled_at = None;
                        tx.advance(&id, head)?;
                    }
                    Some(false) if ep.enabled => {
                        ep.enabled = false;
                        ep.disabled_reason = Some("disabled by an administrator".into());
                        ep.disabled_at = Some(now);
                    }
                    _ => {}
                }
                ep.updated_at = now;
                tx.put_endpoint(&ep)?;
                drop(tx);
                audit::append(txn, std::slice::from_ref(&audit_entry))?;
                Ok(ep)
            })
            .await
    }

    async fn rotate_secret(&self, id: &str, secret: WebhookSecret, audit_entry: AuditEntry) -> StoreResult<Endpoint> {
        let id = id.to_owned();
        self.writer()
            .write(move |txn| {
                let mut tx = Tx::open(txn)?;
                let mut ep = tx.existing_endpoint(&id)?;
                ep.updated_at = Utc::now();
                tx.put_endpoint(&ep)?;
                drop(tx);
                txn.open_table(SECRETS).map_err(backend)?.insert(id.as_str(), secret.expose()).map_err(backend)?;
                audit::append(txn, std::slice::from_ref(&audit_entry))?;
                Ok(ep)
            })
            .await
    }

    async fn delete_endpoint(&self, id: &str, audit_entry: AuditEntry) -> StoreResult<()> {
        let id = id.to_owned();
        self.writer()
            .write(move |txn| {
                let mut tx = Tx::open(txn)?;
                let ep = id.as_str();
                tx.existing_endpoint(ep)?;
                tx.endpoints.remove(ep).map_err(backend)?;
                tx.cursors.remove(ep).map_err(backend)?;
                tx.meta.remove(finished_key(ep).as_str()).map_err(backend)?;
                tx.deliveries.retain_in((ep, "")..(ep, ID_MAX), |_, _| false).map_err(backend)?;
                tx.finished.retain_in((ep, 0u64, "")..=(ep, u64::MAX, ID_MAX), |_, _| false).map_err(backend)?;
                tx.queue.retain_in((ep, 0u64, "")..=(ep, u64::MAX, ID_MAX), |_, _| false).map_err(backend)?;
                drop(tx);
                txn.open_table(SECRETS).map_err(backend)?.remove(ep).map_err(backend)?;
                audit::append(txn, std::slice::from_ref(&audit_entry))
            })
            .await
    }

    async fn queue_delivery(&self, delivery: Delivery, audit_entry: AuditEntry) -> StoreResult<()> {
        self.writer()
            .write(move |txn| {
                let mut tx = Tx::open(txn)?;
                let ep = tx.existing_endpoint(&delivery.endpoint_id)?;
                if !ep.enabled {
                    return Err(StoreError::Conflict(format!("webhook endpoint {} is disabled; enable it first", ep.id)));
                }
                tx.schedule(&delivery)?;
                drop(tx);
                audit::append(txn, std::slice::from_ref(&audit_entry))
            })
            .await
    }

    fn recent_deliveries(&self, endpoint_id: &str, limit: usize) -> StoreResult<Vec<Delivery>> {
        self.wh_read(|txn| {
            let rows = txn.open_table(DELIVERIES).map_err(backend)?;
            let queue = txn.open_table(QUEUE).map_err(backend)?;
            let finished = txn.open_table(FINISHED).map_err(backend)?;
            let mut ids = Vec::new();
            for item in queue.range((endpoint_id, 0u64, "")..=(endpoint_id, u64::MAX, ID_MAX)).map_err(backend)?.take(limit) {
                ids.push(item.map_err(backend)?.0.value().2.to_owned());
            }
            for item in finished.range((endpoint_id, 0u64, "")..=(endpoint_id, u64::MAX, ID_MAX)).map_err(backend)?.rev().take(limit) {
                ids.push(item.map_err(backend)?.0.value().2.to_owned());
            }
            let mut out: Vec<Delivery> = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(v) = rows.get((endpoint_id, id.as_str())).map_err(backend)? {
                    let mut d: Delivery = decode(v.value())?;
                    d.body.clear();
                    out.push(d);
                }
            }
            out.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| b.id.cmp(&a.id)));
            out.truncate(limit);
            Ok(out)
        })
    }

    fn queue_depth(&self) -> StoreResult<u64> {
        self.wh_read(|txn| {
            let head = txn.open_table(OUTBOX).map_err(backend)?.last().map_err(backend)?.map(|(k, _)| k.value()).unwrap_or(0);
            let cursors = enabled_cursors(&txn.open_table(ENDPOINTS).map_err(backend)?, &txn.open_table(CURSORS).map_err(backend)?)?;
            let queued = txn.open_table(QUEUE).map_err(backend)?.len().map_err(backend)?;
            Ok(queued + cursors.iter().map(|c| head.saturating_sub(*c)).sum::<u64>())
        })
    }

    fn endpoint_cursor(&self, endpoint_id: &str) -> StoreResult<u64> {
        self.wh_read(|txn| {
            let t = txn.open_table(CURSORS).map_err(backend)?;
            Ok(t.get(endpoint_id).map_err(backend)?.map(|v| v.value()).unwrap_or(0))
        })
    }

    fn due_deliveries(&self, endpoint_id: &str, now: DateTime<Utc>, limit: usize) -> StoreResult<Due> {
        self.wh_read(|txn| {
            let q = txn.open_table(QUEUE).map_err(backend)?;
            let rows = txn.open_table(DELIVERIES).map_err(backend)?;
            let now_ms = millis(now);
            let mut out = Due::default();
            for item in q.range((endpoint_id, 0u64, "")..=(endpoint_id, u64::MAX, ID_MAX)).map_err(backend)? {
                let (k, _) = item.map_err(backend)?;
                let (_, due, id) = k.value();
                if due > now_ms {
                    out.next_due = DateTime::from_timestamp_millis(due as i64);
                    break;
                }
                if out.due.len() == limit {
                    // More are due; the caller asks again when a slot frees.
                    out.next_due = Some(now);
                    break;
                }
                if let Some(v) = rows.get((endpoint_id, id)).map_err(backend)? {
                    out.due.push(decode(v.value())?);
                }
            }
            Ok(out)
        })
    }

    fn endpoints_with_pending(&self) -> StoreResult<Vec<String>> {
        self.wh_read(|txn| {
            let q = txn.open_table(QUEUE).map_err(backend)?;
            let mut out: Vec<String> = Vec::new();
            let mut next = q.first().map_err(backend)?.map(|(k, _)| k.value().0.to_owned());
            // Skip from one endpoint to the next rather than reading every entry.
            while let Some(ep) = next {
                let after = (ep.as_str(), u64::MAX, ID_MAX);
                next = match q.range(after..).map_err(backend)?.next() {
                    Some(item) => {
                        let (k, _) = item.map_err(backend)?;
                        let e = k.value().0.to_owned();
                        (e != ep).then_some(e)
                    }
                    None => None,
                };
                out.push(ep);
            }
            Ok(out)
        })
    }

    async fn record(&self, attempts: Vec<Attempt>, cursors: Vec<(String, u64)>) -> StoreResult<Vec<AttemptEffect>> {
        if attempts.is_empty() && cursors.is_empty() {
            return Ok(Vec::new());
        }
        self.writer()
            .write(move |txn| {
                let mut tx = Tx::open(txn)?;
                let mut effects = Vec::with_capacity(attempts.len());
                let mut audits = Vec::new();
                for a in &attempts {
                    let (effect, disabled) = tx.record(a)?;
                    if disabled {
                        audits.push(a.disable_audit.clone());
                    }
                    effects.push(effect);
                }
                for (ep, to) in &cursors {
                    // A deleted endpoint keeps no cursor.
                    if tx.endpoints.get(ep.as_str()).map_err(backend)?.is_some() {
                        tx.advance(ep, *to)?;
                    }
                }
                drop(tx);
                audit::append(txn, &audits)?;
                Ok(effects)
            })
            .await
    }

    async fn cancel_deliveries(&self, endpoint_id: &str, ids: Vec<String>, reason: String, keep: usize) -> StoreResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let ep = endpoint_id.to_owned();
        self.writer()
            .write(move |txn| {
                let mut tx = Tx::open(txn)?;
                let now = Utc::now();
                for id in &ids {
                    let Some(mut d) = tx.delivery(&ep, id)? else {
                        continue;
                    };
                    if d.status != DeliveryStatus::Pending {
                        continue;
                    }
                    tx.unqueue(&d)?;
                    d.status = DeliveryStatus::Cancelled;
                    d.last_error = Some(reason.clone());
                    d.updated_at = now;
                    tx.finish(&mut d, keep)?;
                }
                Ok(())
            })
            .await
    }

    async fn prune_outbox(&self, created_before: i64, limit: usize) -> StoreResult<usize> {
        self.writer()
            .write(move |txn| {
                let head = outbox_head(txn)?;
                // Every enabled endpoint is past its cursor.
                let floor = {
                    let tx = Tx::open(txn)?;
                    enabled_cursors(&tx.endpoints, &tx.cursors)?.into_iter().fold(head, u64::min)
                };
                let mut outbox = txn.open_table(OUTBOX).map_err(backend)?;
                let mut gone = Vec::new();
                for item in outbox.range(..head.min(floor.saturating_add(1))).map_err(backend)?.take(limit) {
                    let (seq, v) = item.map_err(backend)?;
                    let ev: OutboxEvent = decode(v.value())?;
                    // Sequence numbers follow commit order, so creation times
                    // rise along the table (bar clock steps): stop at the first young one.
                    if ev.created >= created_before {
                        break;
                    }
                    gone.push(seq.value());
                }
                for seq in &gone {
                    outbox.remove(*seq).map_err(backend)?;
                }
                Ok(gone.len())
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Audit, category, kind};
    use crate::store::Store;

    fn entry() -> AuditEntry {
        Audit::new(kind::WEBHOOK_MANAGEMENT, category::SYSTEM_INTEGRITY, "test").build()
    }

    fn endpoint(id: &str, events: &[&str]) -> Endpoint {
        let now = Utc::now();
        Endpoint {
            id: id.into(),
            url: "https://example.com/hook".into(),
            description: String::new(),
            events: events.iter().map(|s| s.to_string()).collect(),
            enabled: true,
            failure_count: 0,
            disabled_reason: None,
            disabled_at: None,
            created_at: now,
            updated_at: now,
        }
    }

    async fn store() -> (tempfile::TempDir, RedbStore) {
        let dir = tempfile::tempdir().expect("tmp");
        let s = RedbStore::open(dir.path(), false).expect("open");
        s.prepare_webhooks().await.expect("prepare");
        (dir, s)
    }

    fn event(kind: &str) -> OutboxEvent {
        OutboxEvent::new(kind, serde_json::json!({}))
    }

    fn attempt(d: &Delivery, fresh: bool, error: Option<&str>, retry_at: Option<DateTime<Utc>>) -> Attempt {
        Attempt {
            delivery: d.clone(),
            fresh,
            at: Utc::now(),
            status_code: Some(if error.is_some() { 500 } else { 200 }),
            latency_ms: 3,
            error: error.map(str::to_owned),
            retry_at,
            disable_after: 2,
            keep: 3,
            disable_audit: entry(),
        }
    }

    async fn one(s: &RedbStore, a: Attempt) -> AttemptEffect {
        s.record(vec![a], Vec::new()).await.expect("record").remove(0)
    }

    #[test]
    fn delivery_ids_are_stable_uuids_per_endpoint_and_event() {
        let a = delivery_id("wh_1", "evt_1");
        assert_eq!(a, delivery_id("wh_1", "evt_1"));
        assert_ne!(a, delivery_id("wh_2", "evt_1"));
        assert_ne!(a, delivery_id("wh_1", "evt_2"));
        let u = uuid::Uuid::parse_str(&a).expect("uuid");
        assert_eq!(u.get_version_num(), 8);
        assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
    }

    #[tokio::test]
    async fn cursors_start_at_the_end_of_the_outbox_and_only_move_forward() {
        let (_d, s) = store().await;
        s.enqueue_events(vec![event("dlp:incident"), event("pii:incident")], Vec::new()).await.expect("events");
        s.create_endpoint(endpoint("wh_a", &["*"]), WebhookSecret::generate(), entry()).await.expect("create");
        assert_eq!(s.endpoint_cursor("wh_a").expect("cursor"), 2, "no backlog for a new endpoint");
        s.record(Vec::new(), vec![("wh_a".into(), 5)]).await.expect("forward");
        s.record(Vec::new(), vec![("wh_a".into(), 3), ("wh_gone".into(), 9)]).await.expect("back");
        assert_eq!(s.endpoint_cursor("wh_a").expect("cursor"), 5);
        assert_eq!(s.endpoint_cursor("wh_gone").expect("cursor"), 0);
        // Re-enabling skips what was fired while disabled.
        s.update_endpoint("wh_a", EndpointPatch { enabled: Some(false), ..Default::default() }, entry()).await.expect("off");
        s.enqueue_events((0..5).map(|_| event("dlp:incident")).collect(), Vec::new()).await.expect("events");
        s.update_endpoint("wh_a", EndpointPatch { enabled: Some(true), ..Default::default() }, entry()).await.expect("on");
        assert_eq!(s.endpoint_cursor("wh_a").expect("cursor"), 7);
    }

    fn aged(days: i64) -> OutboxEvent {
        let mut e = event("pii:incident");
        e.created -= days * 24 * 3600;
        e
    }

    fn seqs(s: &RedbStore) -> Vec<u64> {
        s.outbox_after(0, 100).expect("outbox").into_iter().map(|(seq, _)| seq).collect()
    }

    #[tokio::test]
    async fn the_outbox_keeps_what_an_enabled_endpoint_has_not_passed_young_events_and_the_newest() {
        let (_d, s) = store().await;
        let cutoff = Utc::now().timestamp() - 30 * 24 * 3600;
        // wh_b starts at the head (0), before any event.
        s.create_endpoint(endpoint("wh_b", &["*"]), WebhookSecret::generate(), entry()).await.expect("b");
        s.enqueue_events((0..5).map(|_| aged(100)).collect(), Vec::new()).await.expect("old");
        s.enqueue_events(vec![aged(1)], Vec::new()).await.expect("young");
        s.create_endpoint(endpoint("wh_a", &["*"]), WebhookSecret::generate(), entry()).await.expect("a");
        assert_eq!(s.prune_outbox(cutoff, 100).await.expect("prune"), 0, "wh_b has passed none");
        s.record(Vec::new(), vec![("wh_b".into(), 3)]).await.expect("cursor");
        assert_eq!(s.prune_outbox(cutoff, 2).await.expect("prune"), 2, "at most the limit");
        assert_eq!(s.prune_outbox(cutoff, 100).await.expect("prune"), 1);
        assert_eq!(seqs(&s), [4, 5, 6]);
        // A disabled endpoint holds nothing back (enabling it again skips to the head).
        s.update_endpoint("wh_b", EndpointPatch { enabled: Some(false), ..Default::default() }, entry()).await.expect("off");
        assert_eq!(s.prune_outbox(cutoff, 100).await.expect("prune"), 2);
        assert_eq!(seqs(&s), [6], "the young event stays");
        // All old, no endpoint behind: the newest stays, and numbering goes on after it.
        s.delete_endpoint("wh_a", entry()).await.expect("delete a");
        s.enqueue_events(vec![aged(100)], Vec::new()).await.expect("old");
        assert_eq!(s.prune_outbox(Utc::now().timestamp() + 1, 100).await.expect("prune"), 1);
        assert_eq!(seqs(&s), [7]);
        s.enqueue_events(vec![event("dlp:incident")], Vec::new()).await.expect("new");
        assert_eq!(seqs(&s), [7, 8]);
    }

    #[tokio::test]
    async fn the_queue_depth_counts_what_enabled_endpoints_have_not_passed_and_pending_retries() {
        let (_d, s) = store().await;
        s.create_endpoint(endpoint("wh_a", &["*"]), WebhookSecret::generate(), entry()).await.expect("a");
        s.create_endpoint(endpoint("wh_b", &["dlp:incident"]), WebhookSecret::generate(), entry()).await.expect("b");
        assert_eq!(s.queue_depth().expect("depth"), 0);
        s.enqueue_events((0..3).map(|_| event("dlp:incident")).collect(), Vec::new()).await.expect("events");
        assert_eq!(s.queue_depth().expect("depth"), 6, "three events, two endpoints behind them");
        s.record(Vec::new(), vec![("wh_a".into(), 3), ("wh_b".into(), 1)]).await.expect("cursors");
        assert_eq!(s.queue_depth().expect("depth"), 2);
        // A disabled endpoint's backlog is not waiting (re-enabling skips it).
        s.update_endpoint("wh_b", EndpointPatch { enabled: Some(false), ..Default::default() }, entry()).await.expect("off");
        assert_eq!(s.queue_depth().expect("depth"), 0);
        // A scheduled retry is.
        let now = Utc::now();
        let d = Delivery::new("wh_a", &event("dlp:incident"), now, now).expect("delivery");
        let later = now + chrono::Duration::seconds(60);
        assert_eq!(one(&s, attempt(&d, true, Some("HTTP 500"), Some(later))).await, AttemptEffect::Retry);
        assert_eq!(s.queue_depth().expect("depth"), 1);
    }

    #[tokio::test]
    async fn fresh_attempts_retries_failures_auto_disable_and_pruning() {
        let (_d, s) = store().await;
        s.create_endpoint(endpoint("wh_a", &["*"]), WebhookSecret::generate(), entry()).await.expect("create");
        let now = Utc::now();
        let ds: Vec<Delivery> = (0..4).map(|_| Delivery::new("wh_a", &event("dlp:incident"), now, now).expect("delivery")).collect();
        // A fresh failure with a retry left becomes a pending row with its body.
        let later = now + chrono::Duration::seconds(60);
        assert_eq!(one(&s, attempt(&ds[0], true, Some("HTTP 500"), Some(later))).await, AttemptEffect::Retry);
        let due = s.due_deliveries("wh_a", later, 10).expect("due");
        assert_eq!(due.due.len(), 1);
        assert_eq!(due.due[0].attempts, 1);
        assert_eq!(due.due[0].body, ds[0].body);
        assert!(s.due_deliveries("wh_a", now, 10).expect("due").next_due.is_some());
        assert_eq!(s.endpoints_with_pending().expect("pending"), ["wh_a"]);
        // Its retry succeeds.
        assert_eq!(one(&s, attempt(&due.due[0], false, None, None)).await, AttemptEffect::Acknowledged);
        assert!(s.endpoints_with_pending().expect("pending").is_empty());
        // Two failures in a row disable (disable_after = 2); one batch, one commit.
        let effects = s
            .record(
                vec![attempt(&ds[1], true, Some("timeout"), None), attempt(&ds[2], true, Some("timeout"), None)],
                vec![("wh_a".into(), 4)],
            )
            .await
            .expect("f1, f2");
        assert_eq!(effects, [AttemptEffect::Failed { disabled: false }, AttemptEffect::Failed { disabled: true }]);
        let ep = s.get_endpoint("wh_a").expect("get").expect("exists");
        assert!(!ep.enabled);
        assert_eq!(ep.failure_count, 2);
        assert!(ep.disabled_reason.expect("reason").contains("timeout"));
        s.queue_delivery(ds[3].clone(), entry()).await.expect_err("a disabled endpoint takes no test deliveries");
        // Re-enabling resets the counter.
        let ep = s.update_endpoint("wh_a", EndpointPatch { enabled: Some(true), ..Default::default() }, entry()).await.expect("enable");
        assert!(ep.enabled);
        assert_eq!(ep.failure_count, 0);
        assert_eq!(ep.disabled_reason, None);
        // History without bodies, pruned to `keep` = 3: the oldest (ds[0]) went.
        assert_eq!(one(&s, attempt(&ds[3], true, None, None)).await, AttemptEffect::Acknowledged);
        let recent = s.recent_deliveries("wh_a", 10).expect("recent");
        let ids: Vec<&str> = recent.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids.len(), 3);
        assert_eq!(ids[0], ds[3].id);
        assert!(!ids.contains(&ds[0].id.as_str()) && ids.contains(&ds[1].id.as_str()) && ids.contains(&ds[2].id.as_str()));
        assert!(recent.iter().all(|d| d.body.is_empty()));
    }

    #[tokio::test]
    async fn a_fresh_attempt_after_a_crash_continues_the_stored_row() {
        let (_d, s) = store().await;
        s.create_endpoint(endpoint("wh_a", &["*"]), WebhookSecret::generate(), entry()).await.expect("create");
        let now = Utc::now();
        let d = Delivery::new("wh_a", &event("dlp:incident"), now, now).expect("delivery");
        assert_eq!(one(&s, attempt(&d, true, Some("HTTP 500"), Some(now))).await, AttemptEffect::Retry);
        // The cursor was not saved: the event is read again and attempted as fresh.
        assert_eq!(one(&s, attempt(&d, true, None, None)).await, AttemptEffect::Acknowledged);
        let recent = s.recent_deliveries("wh_a", 10).expect("recent");
        assert_eq!(recent.len(), 1);
        assert_eq!(recent[0].attempts, 2);
        assert!(s.endpoints_with_pending().expect("pending").is_empty());
        // Finished: a further attempt changes nothing.
        assert_eq!(one(&s, attempt(&d, true, None, None)).await, AttemptEffect::Gone);
    }

    #[tokio::test]
    async fn cancel_delete_and_rotation() {
        let (_d, s) = store().await;
        let first = WebhookSecret::generate();
        s.create_endpoint(endpoint("wh_x", &["*"]), first, entry()).await.expect("create");
        let second = WebhookSecret::generate();
        s.rotate_secret("wh_x", second.clone(), entry()).await.expect("rotate");
        assert_eq!(s.endpoint_secret("wh_x").expect("secret"), Some(second));
        let now = Utc::now();
        let ds: Vec<Delivery> = (0..2).map(|_| Delivery::new("wh_x", &event(TEST_EVENT), now, now).expect("d")).collect();
        for d in &ds {
            s.queue_delivery(d.clone(), entry()).await.expect("queue");
        }
        s.cancel_deliveries("wh_x", vec![ds[0].id.clone()], "endpoint disabled".into(), 10).await.expect("cancel");
        assert_eq!(one(&s, attempt(&ds[0], false, None, None)).await, AttemptEffect::Gone);
        assert_eq!(s.due_deliveries("wh_x", now, 10).expect("due").due.len(), 1);
        s.delete_endpoint("wh_x", entry()).await.expect("delete");
        assert!(s.get_endpoint("wh_x").expect("get").is_none());
        assert!(s.endpoint_secret("wh_x").expect("secret").is_none());
        assert!(s.endpoints_with_pending().expect("pending").is_empty());
        assert!(s.recent_deliveries("wh_x", 10).expect("recent").is_empty());
        assert_eq!(one(&s, attempt(&ds[1], false, None, None)).await, AttemptEffect::Gone);
        assert!(matches!(s.delete_endpoint("wh_x", entry()).await, Err(StoreError::NotFound(_))));
    }
}
