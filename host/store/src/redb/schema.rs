//! Schema versioning of the redb file.
//!
//! `meta.schema_version` says which layout a file has. Opening a file runs the
//! migrations from its version up to [`CURRENT`] in one transaction; a file
//! from a newer Gatehouse is refused rather than misread.
//! `host/tests/fixtures/schema-v<N>.redb` keeps a file of each older version
//! and a test opens and migrates it.
//!
//! History: v1 — users, groups, members, keys, audit log, usage, quotas,
//! idempotency, outbox, receipts. v2 — `audit_by_type`, `audit_by_severity` and
//! `audit_by_user` indexes (built from the existing log on migration). v3 —
//! `receipt_batches`: a commit's batch signature and leaves stored once, its
//! receipts stored with their place in it (receipts written before keep their
//! inline path and read as they were, so nothing moves; an older build, which
//! would serve the new rows unverifiable, refuses the file). v4 — audit
//! records in format 2 (hash stored beside the content bytes it covers; see
//! `audit`): records written before keep format 1 and their hashes, and a
//! marker record starts format 2 with the next append; an older build, which
//! cannot read format 2, refuses the file.

use redb::{Database, ReadableTable};

use super::tables::*;
use super::{backend, decode, encode};

/// The layout this build writes.
pub const CURRENT: u32 = 4;

/// Create missing tables, check the version and migrate.
pub fn prepare(db: &Database) -> anyhow::Result<()> {
    let txn = db.begin_write()?;
    {
        // Opening a table in a write transaction creates it.
        txn.open_table(USERS)?;
        txn.open_table(GROUPS)?;
        txn.open_table(MEMBERS)?;
        txn.open_table(KEYS)?;
        txn.open_table(KEY_HASHES)?;
        txn.open_table(AUDIT)?;
        txn.open_table(USAGE)?;
        txn.open_table(QUOTA)?;
        txn.open_table(IDEMPOTENCY)?;
        txn.open_table(OUTBOX)?;
        txn.open_table(RECEIPTS)?;
        txn.open_table(RECEIPT_BATCHES)?;
        txn.open_table(AUDIT_BY_TYPE)?;
        txn.open_table(AUDIT_BY_SEVERITY)?;
        txn.open_table(AUDIT_BY_USER)?;
        let mut meta = txn.open_table(META)?;
        let found: Option<u32> = match meta.get(META_SCHEMA_VERSION).map_err(backend)? {
            Some(v) => Some(decode(v.value())?),
            None => None,
        };
        match found {
            None => {
                meta.insert(META_SCHEMA_VERSION, encode(&CURRENT)?.as_slice())?;
            }
            Some(v) if v > CURRENT => anyhow::bail!(
                "the data dir was written by a newer Gatehouse (schema version {v}; this build knows up to {CURRENT}); \
                 upgrade Gatehouse or point it at another data dir"
            ),
            Some(v) if v < CURRENT => {
                if v < 2 {
                    index_audit(&txn)?;
                }
                meta.insert(META_SCHEMA_VERSION, encode(&CURRENT)?.as_slice())?;
                tracing::info!(from = v, to = CURRENT, "migrated the store schema");
            }
            Some(_) => {}
        }
    }
    txn.commit()?;
    Ok(())
}

/// v1 → v2: index every audit record by type, severity and user.
fn index_audit(txn: &redb::WriteTransaction) -> anyhow::Result<()> {
    let audit = txn.open_table(AUDIT)?;
    for item in audit.iter()? {
        let (k, v) = item?;
        let (micros, seq) = k.value();
        let record = super::audit::decode_record(v.value())?;
        super::audit::index_record(txn, &record, micros, seq)?;
    }
    Ok(())
}

/// The schema version of an open database.
pub fn version(db: &Database) -> anyhow::Result<u32> {
    use redb::ReadableDatabase;
    let txn = db.begin_read()?;
    let meta = txn.open_table(META)?;
    let v = meta.get(META_SCHEMA_VERSION)?.ok_or_else(|| anyhow::anyhow!("no schema version"))?;
    Ok(decode(v.value())?)
}
