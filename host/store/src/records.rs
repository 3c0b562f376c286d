//! Records of the chat path: usage, quota counters, idempotency, the event outbox.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::model::AuditEntry;

/// Running totals of requests and tokens, per user or per key.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct UsageTotals {
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl UsageTotals {
    pub fn add(&mut self, prompt: u64, completion: u64) {
        self.requests += 1;
        self.prompt_tokens += prompt;
        self.completion_tokens += completion;
    }
}

/// Usage of one request, billed to a user through a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageDelta {
    pub user_id: String,
    pub key_id: String,
    /// The key's group, for the ledger's group filter.
    pub group_id: Option<String>,
    /// The model that served the request.
    pub model: String,
    pub request_id: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// An event waiting in (or delivered from) the outbox; the webhook envelope (docs/api.md#what-a-receiver-gets).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OutboxEvent {
    /// `evt_<hex>` (`evt_test_<hex>` for test deliveries).
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// Unix seconds.
    pub created: i64,
    pub data: serde_json::Value,
}

impl OutboxEvent {
    pub fn new(kind: &str, data: serde_json::Value) -> Self {
        OutboxEvent { id: format!("evt_{}", uuid::Uuid::new_v4().simple()), kind: kind.to_owned(), created: Utc::now().timestamp(), data }
    }
}

/// The stored outcome of a request made with an `Idempotency-Key`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IdempotencyRecord {
    /// SHA-256 of the canonical JSON body.
    pub body_hash: String,
    pub state: IdempotencyState,
    pub expires_at: DateTime<Utc>,
}

impl IdempotencyRecord {
    /// Still binding: not expired, and if in flight, its lease not lapsed.
    pub fn is_live(&self, now: DateTime<Utc>) -> bool {
        if self.expires_at <= now {
            return false;
        }
        match &self.state {
            IdempotencyState::InFlight { lease_until } => *lease_until > now,
            IdempotencyState::Completed { .. } => true,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum IdempotencyState {
    /// Being served; the lease is renewed while the request runs.
    InFlight { lease_until: DateTime<Utc> },
    /// Done: what to replay.
    Completed { status: u16, content_type: String, body: String },
}

/// Result of trying to claim an idempotency key.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// The caller owns the key now and must complete or release it.
    Claimed,
    /// Someone else has it (in flight or completed).
    Existing(IdempotencyRecord),
}

/// Everything a finished chat request writes, in one commit.
#[derive(Debug, Clone, Default)]
pub struct RequestOutcome {
    pub usage: Option<UsageDelta>,
    pub events: Vec<OutboxEvent>,
    pub audit: Vec<AuditEntry>,
    /// `(scope, record)` to store, or `(scope, None)` to release an in-flight claim.
    pub idempotency: Option<(String, Option<IdempotencyRecord>)>,
    /// Signed by the store's writer with the other receipts of its commit.
    pub receipt: Option<crate::receipts::Receipt>,
}
