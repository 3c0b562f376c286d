//! Webhook storage: endpoint records, secrets, each endpoint's cursor into
//! the event outbox, and deliveries.
//!
//! [`WebhookStore`] speaks in domain operations, each one commit, so a
//! PostgreSQL backend can implement it with transactions of its own; the redb
//! implementation (`redb::webhooks`) keeps its tables next to the others, in the same file, and
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

mod apply;
mod model;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::StoreResult;
use crate::model::AuditEntry;
pub use apply::{Applied, apply_attempt, attempt_target, keeps_body, requeue};
pub use model::{Attempt, AttemptEffect, Delivery, DeliveryStatus, Due, Endpoint, EndpointPatch, StoredSecret, TEST_EVENT, delivery_id};

/// Webhook storage operations. Writes that change an endpoint take the audit
/// entry that describes the change and commit it with the change.
#[async_trait]
pub trait WebhookStore: Send + Sync + 'static {
    /// Create the tables (idempotent); called once at start-up.
    async fn prepare_webhooks(&self) -> StoreResult<()>;

    async fn list_endpoints(&self) -> StoreResult<Vec<Endpoint>>;
    async fn get_endpoint(&self, id: &str) -> StoreResult<Option<Endpoint>>;
    /// The current signing secret; read before every attempt, so a rotation
    /// applies to the next attempt.
    async fn endpoint_secret(&self, id: &str) -> StoreResult<Option<StoredSecret>>;
    /// Store a new endpoint; its cursor starts at the end of the outbox (it
    /// receives events committed after it).
    async fn create_endpoint(&self, endpoint: Endpoint, secret: StoredSecret, audit: AuditEntry) -> StoreResult<Endpoint>;
    /// Apply `patch`. Enabling a disabled endpoint resets its failure counter
    /// and moves its cursor to the end of the outbox (events fired while it was
    /// disabled are not delivered). The pending deliveries of a disabled
    /// endpoint are cancelled by the dispatcher as they come due.
    async fn update_endpoint(&self, id: &str, patch: EndpointPatch, audit: AuditEntry) -> StoreResult<Endpoint>;
    async fn rotate_secret(&self, id: &str, secret: StoredSecret, audit: AuditEntry) -> StoreResult<Endpoint>;
    /// Remove the endpoint, its secret, cursor and deliveries.
    async fn delete_endpoint(&self, id: &str, audit: AuditEntry) -> StoreResult<()>;
    /// Queue a delivery outside the outbox (the test route). `NotFound` if
    /// the endpoint is gone, `Conflict` if it is disabled.
    async fn queue_delivery(&self, delivery: Delivery, audit: AuditEntry) -> StoreResult<()>;
    /// Send a failed or cancelled delivery again (an administrator's retry):
    /// in one commit with `audit`, it becomes pending, due at `due`, with its
    /// id and body unchanged and its attempts counted afresh (see
    /// [`requeue`]). `NotFound` if the endpoint or the delivery is unknown
    /// (pruned, or a first attempt still in flight: it has no row yet);
    /// `Conflict` if the endpoint is disabled, or the delivery is pending,
    /// succeeded, or kept no body. Returns the delivery, without its body.
    async fn requeue_delivery(&self, endpoint_id: &str, delivery_id: &str, due: DateTime<Utc>, audit: AuditEntry) -> StoreResult<Delivery>;
    /// Pending and finished deliveries, most recently updated first, without bodies.
    async fn recent_deliveries(&self, endpoint_id: &str, limit: usize) -> StoreResult<Vec<Delivery>>;

    /// The endpoint's outbox cursor (0 if it has none).
    async fn endpoint_cursor(&self, endpoint_id: &str) -> StoreResult<u64>;
    /// Up to `limit` pending deliveries of an endpoint due at `now`, oldest due first.
    async fn due_deliveries(&self, endpoint_id: &str, now: DateTime<Utc>, limit: usize) -> StoreResult<Due>;
    /// Endpoints with pending deliveries.
    async fn endpoints_with_pending(&self) -> StoreResult<Vec<String>>;
    /// Deliveries waiting (`gatehouse_webhook_queue_depth`): outbox events an
    /// enabled endpoint's cursor has not passed yet (events it does not
    /// subscribe to are passed within a poll), plus scheduled retries and
    /// test deliveries of every endpoint.
    async fn queue_depth(&self) -> StoreResult<u64>;
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

    /// Take, or renew, the lease of `owner` (one dispatcher) on an endpoint's
    /// deliveries for `ttl`: `false` while another owner's lease runs. One
    /// owner at a time reads the endpoint's outbox cursor and due deliveries
    /// and attempts them; when its host dies, the lease lapses and another
    /// host's dispatcher takes over from the stored cursor, sending what was
    /// in flight again with the same delivery ids. A store used by one host
    /// has one dispatcher: the default grants every lease.
    async fn lease_endpoint(&self, endpoint_id: &str, owner: &str, ttl: std::time::Duration) -> StoreResult<bool> {
        let _ = (endpoint_id, owner, ttl);
        Ok(true)
    }
}
