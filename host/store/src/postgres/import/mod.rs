//! `gatehouse db import`: a single host's state, from its redb data dir, into
//! an empty PostgreSQL database, so the host can grow into a fleet
//! (docs/decisions/db-import.md).
//!
//! The steps: open the data dir as the host does (its lock says whether a
//! host still runs on it); verify its audit chain (a broken chain is not
//! carried over); read everything from one snapshot ([`read`]); then, in one
//! PostgreSQL transaction, check that the database is empty, write every
//! table ([`write`]), and verify what was written (counts per table, and the
//! chain verified in PostgreSQL ending at the same head hash). Only a
//! verified import commits; any failure rolls back and leaves the database
//! as it was.

mod read;
mod write;

use std::path::Path;

use chrono::Utc;

use super::{Connection, PgOptions, audit, chain, migrate};
use crate::Store;
use crate::redb::RedbStore;

/// What an import copied, table by table, and the chain it verified.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ImportReport {
    /// (table, rows), in the order they were written.
    pub tables: Vec<(&'static str, u64)>,
    /// Audit records, verified in PostgreSQL.
    pub audit_records: u64,
    /// The hash of the chain's last record, the same in both stores.
    pub audit_head: String,
    /// Idempotency records not copied: expired, or in flight when the host stopped.
    pub idempotency_dropped: u64,
}

/// Why an import failed; nothing was committed to the database.
fn refused(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("{e}; nothing was imported (the database is as it was)")
}

/// Copy the state of the host whose data dir is `data_dir` into the database
/// `options` names, which must be empty (migrations are applied first).
pub async fn import_redb(data_dir: &Path, options: &PgOptions) -> anyhow::Result<ImportReport> {
    let file = data_dir.join(crate::redb::DB_FILE);
    if !file.is_file() {
        anyhow::bail!("{} holds no Gatehouse store ({} is missing)", data_dir.display(), crate::redb::DB_FILE);
    }
    // Held open (and locked) until the import is done: no host can start on it meanwhile.
    let source = RedbStore::open(data_dir, true)?;
    let chain_report = source.verify_audit_chain().await?;
    if !chain_report.ok {
        return Err(refused(format!(
            "the audit chain in {} does not verify ({} break(s); first at {}: {})",
            data_dir.display(),
            chain_report.breaks,
            chain_report.first_break.as_deref().unwrap_or("?"),
            chain_report.detail.as_deref().unwrap_or("?"),
        )));
    }
    let snapshot = read::Snapshot::take(&source, data_dir, Utc::now()).map_err(refused)?;
    let head = snapshot.audit.last().map_or_else(|| crate::redb::audit::GENESIS.to_owned(), |r| r.hash.clone());

    let Connection { pool, .. } = Connection::open(options)?;
    migrate(&pool).await?;
    let mut client = pool.get().await.map_err(|e| anyhow::anyhow!("PostgreSQL unreachable: {}", chain(&e)))?;
    let txn = client.transaction().await?;
    // Hosts that start on the database meanwhile wait at their first append or event.
    txn.batch_execute("LOCK TABLE audit_head, outbox_head IN EXCLUSIVE MODE").await?;
    write::ensure_empty(&txn).await.map_err(refused)?;
    let tables = write::copy(&txn, &snapshot).await.map_err(refused)?;

    // Verify before committing: what was read is what the database now holds.
    for (table, expected) in &tables {
        let found: i64 = txn.query_one(&format!("SELECT count(*) FROM {table}"), &[]).await?.get(0);
        if found as u64 != *expected {
            return Err(refused(format!("{table}: {expected} rows read, {found} in the database")));
        }
    }
    let verified = audit::verify(&*txn).await?;
    if !verified.ok || verified.records != snapshot.audit.len() as u64 {
        return Err(refused(format!(
            "the audit chain does not verify in PostgreSQL ({} of {} records; first break at {}: {})",
            verified.records,
            snapshot.audit.len(),
            verified.first_break.as_deref().unwrap_or("-"),
            verified.detail.as_deref().unwrap_or("-"),
        )));
    }
    let pg_head: String = txn.query_one("SELECT hash FROM audit_head WHERE singleton", &[]).await?.get(0);
    if pg_head != head {
        return Err(refused(format!("the chain ends at {pg_head} in PostgreSQL, at {head} in the data dir")));
    }
    txn.commit().await?;
    Ok(ImportReport { tables, audit_records: verified.records, audit_head: head, idempotency_dropped: snapshot.idempotency_dropped })
}
