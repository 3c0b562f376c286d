//! Table definitions. Values are JSON documents of the records in `store::model`.

use redb::TableDefinition;

/// Schema version, audit chain head, counters.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
pub const USERS: TableDefinition<&str, &[u8]> = TableDefinition::new("users");
pub const GROUPS: TableDefinition<&str, &[u8]> = TableDefinition::new("groups");
/// (group id, user id) → nothing.
pub const MEMBERS: TableDefinition<(&str, &str), ()> = TableDefinition::new("group_members");
pub const KEYS: TableDefinition<&str, &[u8]> = TableDefinition::new("api_keys");
/// SHA-256 of a key secret → key id.
pub const KEY_HASHES: TableDefinition<&[u8; 32], &str> = TableDefinition::new("api_key_hashes");
/// (timestamp in µs since the epoch, sequence number) → audit record. Time-ordered,
/// so a date-range query reads only that range.
pub const AUDIT: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("audit_log");

/// An audit index: (type, severity or user id; µs timestamp; sequence) → nothing.
pub type IndexTable = TableDefinition<'static, (&'static str, u64, u64), ()>;
/// The audit log by type, so a type-filtered date range reads only matching records (schema v2).
pub const AUDIT_BY_TYPE: IndexTable = TableDefinition::new("audit_by_type");
/// By severity (schema v2).
pub const AUDIT_BY_SEVERITY: IndexTable = TableDefinition::new("audit_by_severity");
/// By user id (schema v2).
pub const AUDIT_BY_USER: IndexTable = TableDefinition::new("audit_by_user");

pub const META_SCHEMA_VERSION: &str = "schema_version";
pub const META_AUDIT_HEAD: &str = "audit_head";

/// `user/<id>` or `key/<id>` → usage totals.
pub const USAGE: TableDefinition<&str, &[u8]> = TableDefinition::new("usage");
/// `<key id>/<window>` → requests counted in that quota window (`d:2026-11-23`, `m:2026-11`).
pub const QUOTA: TableDefinition<&str, u64> = TableDefinition::new("quota");
/// `<key id>/<Idempotency-Key>` → idempotency record.
pub const IDEMPOTENCY: TableDefinition<&str, &[u8]> = TableDefinition::new("idempotency");
/// Sequence number → outbox event, in commit order.
pub const OUTBOX: TableDefinition<u64, &[u8]> = TableDefinition::new("outbox");
/// Bundle id → receipt row (`chat::ReceiptRow`): a receipt signed alone (or, before schema v3, one
/// of a batch with its path), or a receipt and its place in a [`RECEIPT_BATCHES`] batch.
pub const RECEIPTS: TableDefinition<&str, &[u8]> = TableDefinition::new("receipts");
/// Batch number → signed batch (`receipts::SignedBatch`: root, signature, leaves), one per group
/// commit that signed several receipts (schema v3).
pub const RECEIPT_BATCHES: TableDefinition<u64, &[u8]> = TableDefinition::new("receipt_batches");
