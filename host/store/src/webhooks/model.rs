//! The webhook records the store keeps: endpoints, their secrets and deliveries.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::StoreResult;
use crate::model::AuditEntry;
use crate::records::OutboxEvent;
use crate::redb::backend;

/// An endpoint's signing secret as the store keeps it: text it never reads.
/// `Debug` never prints it and there is no `Display` or `Serialize`, so it
/// cannot end up in a log line or a listing by accident; what the secret is
/// and how it signs belongs to the webhooks module of the host.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredSecret(String);

impl std::fmt::Debug for StoredSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl StoredSecret {
    pub fn new(secret: String) -> Self {
        StoredSecret(secret)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn into_inner(self) -> String {
        self.0
    }
}

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
    /// pending; kept when it fails or is cancelled (so an administrator can
    /// send it again, [`WebhookStore::requeue_delivery`](crate::webhooks::WebhookStore::requeue_delivery)),
    /// dropped when it succeeds. Finished rows are pruned to the newest
    /// `keep` per endpoint, so the kept bodies are bounded by that.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub body: String,
    pub status: DeliveryStatus,
    /// Attempts made so far (since the last manual retry).
    pub attempts: u32,
    /// Times an administrator sent it again after it failed.
    #[serde(default)]
    pub retries: u32,
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
            retries: 0,
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
