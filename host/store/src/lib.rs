//! Storage behind a trait. The embedded default is redb (one file under the
//! data dir); the trait speaks in domain operations, not key-value calls, so
//! the PostgreSQL backend ([`postgres`]), shared by several hosts, implements
//! it with transactions of its own.
//!
//! Every write that changes state carries the audit entries that describe it;
//! the implementation commits both together (the audit trail never misses a
//! change that happened, nor records one that did not).
//!
//! This crate imports nothing from the host: what it stores (the records in
//! [`model`], [`records`], [`receipts`], [`webhooks`], the audit catalogue in
//! [`audit`]) is defined here, and the host builds on it. Its metrics are
//! handles the host registers ([`metrics`]).

pub mod audit;
pub mod fleet;
mod key_hash;
pub mod knowledge_bases;
pub mod metrics;
pub mod model;
pub mod postgres;
pub mod receipts;
pub mod records;
pub mod redb;
pub mod registry;
pub mod usage_ledger;
pub mod webhooks;

use async_trait::async_trait;

pub use key_hash::KeyHash;
use model::{ApiKeyRecord, AuditEntry, AuditRecord, Group, User};
use records::{Claim, IdempotencyRecord, OutboxEvent, RequestOutcome, UsageTotals};

/// One step of a sweep through a table in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepPage {
    /// Rows deleted.
    pub removed: usize,
    /// Where the next step starts; `None` once the end of the table was reached.
    pub next: Option<String>,
}

/// Usage totals by row name (`user/<id>` or `key/<id>` without the prefix), as the usage view lists them.
pub type UsageRows = Vec<(String, UsageTotals)>;

/// What can go wrong in the store, in terms the API can turn into a status.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("storage failure: {0}")]
    Backend(String),
    /// The database cannot be reached (PostgreSQL down, refusing connections,
    /// or a connection lost mid-request). Nothing was committed that the caller
    /// was told about; the same call may succeed once the database is back, so
    /// the host answers 503 with `Retry-After`, not 500. The embedded redb
    /// store never raises it: its failures are the host's own disk.
    #[error("database unavailable: {0}")]
    Unavailable(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A filtered, paged read of the audit log.
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    /// Inclusive lower bound.
    pub start: chrono::DateTime<chrono::Utc>,
    /// Exclusive upper bound.
    pub end: chrono::DateTime<chrono::Utc>,
    pub kind: Option<String>,
    pub severity: Option<model::Severity>,
    /// Records made *by* this user (`user.id`).
    pub user_id: Option<String>,
    /// Records *about* this user (`metadata.targetUserId`: a key created for
    /// them, their deactivation, a membership).
    pub about_user_id: Option<String>,
    /// Case-insensitive substring of the description or `metadata.operation`.
    pub search: Option<String>,
    pub offset: u64,
    pub limit: u64,
}

impl AuditQuery {
    /// Does a record pass the filters (not the date range)?
    pub fn matches(&self, r: &AuditRecord) -> bool {
        if self.kind.as_deref().is_some_and(|k| k != r.kind) {
            return false;
        }
        if self.severity.is_some_and(|s| s != r.severity) {
            return false;
        }
        if let Some(uid) = &self.user_id
            && r.user.as_ref().is_none_or(|u| &u.id != uid)
        {
            return false;
        }
        if let Some(uid) = &self.about_user_id
            && r.metadata.get("targetUserId").and_then(|v| v.as_str()) != Some(uid.as_str())
        {
            return false;
        }
        if let Some(needle) = &self.search {
            let needle = needle.to_lowercase();
            let op = r.metadata.get("operation").and_then(|v| v.as_str()).unwrap_or_default();
            if !r.description.to_lowercase().contains(&needle) && !op.to_lowercase().contains(&needle) {
                return false;
            }
        }
        true
    }
}

/// Result of verifying the audit hash chain.
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
pub struct ChainReport {
    pub records: u64,
    pub ok: bool,
    /// The first record whose hash or back-link does not match, if any.
    pub first_break: Option<String>,
    pub detail: Option<String>,
    /// Every break found: the walk goes on past one, so a first break does not hide the next.
    pub breaks: u64,
    /// The first [`ChainReport::LISTED`] breaks, in chain order.
    pub broken: Vec<ChainBreak>,
}

impl ChainReport {
    /// Most breaks listed one by one.
    pub const LISTED: usize = 100;
}

/// One record that does not verify.
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
pub struct ChainBreak {
    /// 1-based position in the chain.
    pub position: u64,
    pub id: String,
    pub detail: String,
}

/// The storage interface of the host.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// True when the store answers reads and its last commit did not fail (for `/health`).
    fn healthy(&self) -> bool;

    /// Why the last commit failed, while commits fail (for `/health`).
    fn storage_failure(&self) -> Option<String> {
        None
    }

    /// The per-request usage ledger's reads (a trait of their own), where the backend keeps one.
    fn usage_ledger(&self) -> Option<&dyn usage_ledger::UsageLedger> {
        None
    }

    /// Knowledge bases defined through the admin API (a trait of their own), where the backend keeps them.
    fn knowledge_bases(&self) -> Option<&dyn knowledge_bases::KnowledgeBaseStore> {
        None
    }

    // Users
    /// Store a new user. `Conflict` if its id, or its email (compared without
    /// case; an empty email is not compared), is taken.
    async fn create_user(&self, user: User, audit: AuditEntry) -> StoreResult<User>;
    /// Replace a user's name, email and deactivation (the id and creation
    /// time stay). `Conflict` on an email another user has. Deactivating
    /// suspends every key of the user in the same commit, reactivating lifts
    /// it; the key lookups see it at once.
    async fn update_user(&self, user: User, audit: AuditEntry) -> StoreResult<User>;
    /// Delete a user, their memberships and their keys (refused from then
    /// on); their usage rows and audit records stay. Returns the user and the
    /// ids of the keys deleted.
    async fn delete_user(&self, id: &str, audit: AuditEntry) -> StoreResult<(User, Vec<String>)>;
    async fn get_user(&self, id: &str) -> StoreResult<Option<User>>;
    async fn list_users(&self) -> StoreResult<Vec<User>>;

    // Groups and memberships
    async fn create_group(&self, group: Group, audit: AuditEntry) -> StoreResult<Group>;
    /// Replace a group's record (name, description, status, default policy).
    async fn update_group(&self, group: Group, audit: AuditEntry) -> StoreResult<Group>;
    async fn get_group(&self, id: &str) -> StoreResult<Option<Group>>;
    /// Every group with its member ids.
    async fn list_groups(&self) -> StoreResult<Vec<(Group, Vec<String>)>>;
    async fn add_member(&self, group_id: &str, user_id: &str, audit: AuditEntry) -> StoreResult<()>;
    /// Delete a group and its memberships. `Conflict`, naming them, while
    /// keys still belong to it (move or delete them first).
    async fn delete_group(&self, id: &str, audit: AuditEntry) -> StoreResult<Group>;
    async fn remove_member(&self, group_id: &str, user_id: &str, audit: AuditEntry) -> StoreResult<()>;

    // API keys
    /// Store a new key. `Conflict` if its hash is already taken.
    async fn create_key(&self, key: ApiKeyRecord, audit: AuditEntry) -> StoreResult<ApiKeyRecord>;
    /// Replace a key's options (not its hash).
    async fn update_key(&self, key: ApiKeyRecord, audit: AuditEntry) -> StoreResult<ApiKeyRecord>;
    async fn revoke_key(&self, id: &str, audit: AuditEntry) -> StoreResult<ApiKeyRecord>;
    /// Delete a key: its secret stops working at once and its record is gone
    /// (its audit records and usage stay).
    async fn delete_key(&self, id: &str, audit: AuditEntry) -> StoreResult<ApiKeyRecord>;
    async fn get_key(&self, id: &str) -> StoreResult<Option<ApiKeyRecord>>;
    /// The key whose secret hashes to `hash` (the redb store answers repeat lookups from memory).
    async fn find_key_by_hash(&self, hash: &KeyHash) -> StoreResult<Option<std::sync::Arc<ApiKeyRecord>>>;
    async fn list_keys(&self) -> StoreResult<Vec<ApiKeyRecord>>;
    /// True once any non-revoked admin key exists.
    async fn has_admin_key(&self) -> StoreResult<bool>;

    // Audit
    /// Append records that belong to no other write (plugin loads, auth failures, ...).
    async fn append_audit(&self, entries: Vec<AuditEntry>) -> StoreResult<()>;
    /// One page of the records matching `q`, newest first, and the number of matches.
    async fn audit_query(&self, q: &AuditQuery) -> StoreResult<(Vec<AuditRecord>, u64)>;
    /// Walk the whole chain and report the first break.
    async fn verify_audit_chain(&self) -> StoreResult<ChainReport>;

    // Chat: usage, quotas, idempotency, outbox
    /// Write what a finished request produced (usage, events, audit, idempotency) in one commit.
    async fn finish_request(&self, outcome: RequestOutcome) -> StoreResult<()>;
    /// Count one request against a key's persisted quota windows (e.g. `d:2026-11-23`, `m:2026-11`).
    /// Does not wait: the counts are committed with the next group commit, no
    /// later than any write queued after this call (the request's outcome).
    fn count_quota(&self, key_id: &str, windows: &[String]);
    /// Persisted counts of a key's quota windows, in the order given.
    fn quota_counts(&self, key_id: &str, windows: &[String]) -> StoreResult<Vec<u64>>;
    /// Usage totals per user and per key.
    async fn usage_totals(&self) -> StoreResult<(UsageRows, UsageRows)>;
    async fn idempotency_get(&self, scope: &str) -> StoreResult<Option<IdempotencyRecord>>;
    /// Claim a key unless a live record exists (expired records and lapsed leases are taken over).
    async fn idempotency_claim(&self, scope: &str, record: IdempotencyRecord) -> StoreResult<Claim>;
    /// Extend the lease of an in-flight claim.
    async fn idempotency_renew(&self, scope: &str, lease_until: chrono::DateTime<chrono::Utc>) -> StoreResult<()>;
    /// Delete the records that no longer bind (expired, or in flight with a
    /// lapsed lease) among up to `limit` records after `after` in key order.
    /// A record made live again since it was read is kept.
    async fn idempotency_sweep(&self, after: Option<String>, limit: usize) -> StoreResult<SweepPage>;
    /// Queue events (and their audit records) in the outbox.
    async fn enqueue_events(&self, events: Vec<OutboxEvent>, audit: Vec<AuditEntry>) -> StoreResult<()>;
    /// A signed receipt by bundle id.
    async fn receipt(&self, bundle_id: &str) -> StoreResult<Option<crate::receipts::SignedReceipt>>;
    /// Record a host's receipt-signing public key, so the hosts sharing this
    /// store can publish it (`Conflict` if its id is taken by another key).
    /// A store that serves one host keeps nothing: that host publishes its own key.
    async fn register_receipt_key(&self, _key: &crate::receipts::PublishedKey) -> StoreResult<()> {
        Ok(())
    }
    /// The receipt-signing keys registered by the hosts sharing this store, oldest first.
    async fn receipt_keys(&self) -> StoreResult<Vec<crate::receipts::PublishedKey>> {
        Ok(Vec::new())
    }
    /// Outbox events with sequence numbers after `after`, oldest first.
    async fn outbox_after(&self, after: u64, limit: usize) -> StoreResult<Vec<(u64, OutboxEvent)>>;
}
