//! The append-only, hash-chained audit log inside a write transaction.
//!
//! Each record carries `prev_hash` (the hash of the record before it) and
//! `hash` = SHA-256 of `prev_hash`, a newline, and the record's JSON with
//! `hash` empty. Keys are (µs timestamp, sequence); timestamps never go
//! backwards within the chain, so key order is chain order.

use chrono::{DateTime, TimeZone, Utc};
use redb::{ReadableDatabase, ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::tables::{AUDIT, AUDIT_BY_SEVERITY, AUDIT_BY_TYPE, AUDIT_BY_USER, IndexTable, META, META_AUDIT_HEAD};
use super::{backend, decode, encode};
use crate::store::model::{AuditEntry, AuditRecord};
use crate::store::{AuditQuery, ChainReport, StoreResult};

/// Hash that the first record links back to.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[derive(Serialize, Deserialize, Default)]
struct Head {
    hash: String,
    seq: u64,
    micros: u64,
}

/// The hash a record must carry given its content and `prev_hash`.
pub fn record_hash(record: &AuditRecord) -> String {
    let mut unhashed = record.clone();
    unhashed.hash = String::new();
    let body = serde_json::to_vec(&unhashed).unwrap_or_default();
    let mut h = Sha256::new();
    h.update(record.prev_hash.as_bytes());
    h.update(b"\n");
    h.update(&body);
    hex::encode(h.finalize())
}

/// Append entries at the end of the chain, inside `txn`.
pub fn append(txn: &WriteTransaction, entries: &[AuditEntry]) -> StoreResult<()> {
    append_at(txn, entries, None)
}

/// Append with a given timestamp (clamped so time never goes backwards in the
/// chain) — for importing history and for benchmarks; `None` means now.
pub fn append_at(txn: &WriteTransaction, entries: &[AuditEntry], at: Option<DateTime<Utc>>) -> StoreResult<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let mut meta = txn.open_table(META).map_err(backend)?;
    let mut head: Head = match meta.get(META_AUDIT_HEAD).map_err(backend)? {
        Some(v) => decode(v.value())?,
        None => Head { hash: GENESIS.to_owned(), ..Head::default() },
    };
    let mut table = txn.open_table(AUDIT).map_err(backend)?;
    for entry in entries {
        let now = at.unwrap_or_else(Utc::now).timestamp_micros().max(0) as u64;
        let micros = now.max(head.micros);
        head.seq += 1;
        let timestamp = micros_to_time(micros);
        let mut record = AuditRecord {
            id: format!("log_{}", uuid::Uuid::now_v7().simple()),
            timestamp,
            kind: entry.kind.clone(),
            severity: entry.severity,
            description: entry.description.clone(),
            user: entry.user.clone(),
            metadata: entry.metadata.clone(),
            compliance_category: entry.compliance_category.clone(),
            outcome: entry.outcome.clone(),
            prev_hash: head.hash.clone(),
            hash: String::new(),
        };
        record.hash = record_hash(&record);
        table.insert((micros, head.seq), encode(&record)?.as_slice()).map_err(backend)?;
        index_record(txn, &record, micros, head.seq)?;
        head.hash = record.hash;
        head.micros = micros;
    }
    meta.insert(META_AUDIT_HEAD, encode(&head)?.as_slice()).map_err(backend)?;
    Ok(())
}

pub fn micros_to_time(micros: u64) -> DateTime<Utc> {
    Utc.timestamp_micros(micros as i64).single().unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
}

pub fn time_to_micros(t: DateTime<Utc>) -> u64 {
    t.timestamp_micros().max(0) as u64
}

/// Add a record to the secondary indexes (type, severity, user).
pub fn index_record(txn: &WriteTransaction, record: &AuditRecord, micros: u64, seq: u64) -> StoreResult<()> {
    txn.open_table(AUDIT_BY_TYPE).map_err(backend)?.insert((record.kind.as_str(), micros, seq), ()).map_err(backend)?;
    txn.open_table(AUDIT_BY_SEVERITY).map_err(backend)?.insert((record.severity.as_str(), micros, seq), ()).map_err(backend)?;
    if let Some(u) = &record.user {
        txn.open_table(AUDIT_BY_USER).map_err(backend)?.insert((u.id.as_str(), micros, seq), ()).map_err(backend)?;
    }
    Ok(())
}

/// One page of matching records in `[q.start, q.end)`, newest first, and the
/// number of matches. Reads only the date range (keys are time-ordered); with
/// a `type` filter only that type's records (the `audit_by_type` index); and
/// when no filter needs the record's content, only the page is decoded.
pub fn query(db: &redb::Database, q: &AuditQuery) -> StoreResult<(Vec<AuditRecord>, u64)> {
    let txn = db.begin_read().map_err(backend)?;
    let table = txn.open_table(AUDIT).map_err(backend)?;
    let (lo, hi) = (time_to_micros(q.start), time_to_micros(q.end));
    // Keys of candidate records, newest first.
    // The most selective index a filter offers: type, then user, then severity.
    let indexed: Option<(IndexTable, String)> = if let Some(k) = &q.kind {
        Some((AUDIT_BY_TYPE, k.clone()))
    } else if let Some(u) = &q.user_id {
        Some((AUDIT_BY_USER, u.clone()))
    } else {
        q.severity.map(|s| (AUDIT_BY_SEVERITY, s.as_str().to_owned()))
    };
    let keys: Box<dyn Iterator<Item = StoreResult<(u64, u64)>>> = match &indexed {
        Some((def, value)) => {
            let index = txn.open_table(*def).map_err(backend)?;
            let range = index
                .range((value.as_str(), lo, 0u64)..(value.as_str(), hi, 0u64))
                .map_err(backend)?
                .rev()
                .map(|item| item.map(|(k, _)| (k.value().1, k.value().2)).map_err(backend));
            Box::new(range.collect::<Vec<_>>().into_iter())
        }
        None => {
            let range =
                table.range((lo, 0u64)..(hi, 0u64)).map_err(backend)?.rev().map(|item| item.map(|(k, _)| k.value()).map_err(backend));
            Box::new(range.collect::<Vec<_>>().into_iter())
        }
    };
    let fetch = |k: (u64, u64)| -> StoreResult<Option<AuditRecord>> {
        match table.get(k).map_err(backend)? {
            Some(v) => Ok(Some(decode(v.value())?)),
            None => Ok(None),
        }
    };
    // Filters the index did not answer need the record's content.
    let filters = [q.kind.is_some(), q.user_id.is_some(), q.severity.is_some()];
    let unindexed = filters.iter().filter(|f| **f).count() > usize::from(indexed.is_some());
    let content_filter = unindexed || q.search.is_some();
    let mut out = Vec::new();
    let mut total = 0u64;
    for key in keys {
        let key = key?;
        let in_page = total >= q.offset && (out.len() as u64) < q.limit;
        if !content_filter {
            if in_page && let Some(r) = fetch(key)? {
                out.push(r);
            }
            total += 1;
            continue;
        }
        let Some(record) = fetch(key)? else { continue };
        if !q.matches(&record) {
            continue;
        }
        if in_page {
            out.push(record);
        }
        total += 1;
    }
    Ok((out, total))
}

/// Walk the chain from the first record and report the first break.
pub fn verify(db: &redb::Database) -> StoreResult<ChainReport> {
    let txn = db.begin_read().map_err(backend)?;
    let table = txn.open_table(AUDIT).map_err(backend)?;
    let mut prev = GENESIS.to_owned();
    let mut count = 0u64;
    for item in table.iter().map_err(backend)? {
        let (_, v) = item.map_err(backend)?;
        count += 1;
        let record: AuditRecord = match decode(v.value()) {
            Ok(r) => r,
            Err(e) => {
                return Ok(broken(count, format!("record #{count}"), format!("unreadable: {e}")));
            }
        };
        if record.prev_hash != prev {
            return Ok(broken(count, record.id, "prev_hash does not match the hash of the record before it".into()));
        }
        if record_hash(&record) != record.hash {
            return Ok(broken(count, record.id, "hash does not match the record's content (edited)".into()));
        }
        prev = record.hash;
    }
    let meta = txn.open_table(META).map_err(backend)?;
    if let Some(v) = meta.get(META_AUDIT_HEAD).map_err(backend)? {
        let head: Head = decode(v.value())?;
        if head.hash != prev {
            return Ok(broken(
                count,
                "end of log".into(),
                "the last record is not the chain head: records were removed from the end".into(),
            ));
        }
    }
    Ok(ChainReport { records: count, ok: true, first_break: None, detail: None })
}

fn broken(records: u64, id: String, detail: String) -> ChainReport {
    ChainReport { records, ok: false, first_break: Some(id), detail: Some(detail) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Audit, category, kind};
    use crate::store::Store;
    use crate::store::redb::RedbStore;

    fn entry(n: usize) -> AuditEntry {
        Audit::new(kind::SYSTEM, category::SYSTEM_INTEGRITY, format!("event {n}")).meta("operation", "test").build()
    }

    async fn store_with(n: usize) -> (tempfile::TempDir, RedbStore) {
        let dir = tempfile::tempdir().expect("tmp");
        let store = RedbStore::open(dir.path(), false).expect("open");
        store.append_audit((0..n).map(entry).collect()).await.expect("append");
        (dir, store)
    }

    fn rewrite(store: &RedbStore, nth: usize, f: impl Fn(&mut AuditRecord)) -> String {
        let txn = store.database().begin_write().expect("txn");
        let id;
        {
            let mut t = txn.open_table(AUDIT).expect("table");
            let (k, mut rec) = {
                let (k, v) = t.iter().expect("iter").nth(nth).expect("row").expect("row");
                (k.value(), decode::<AuditRecord>(v.value()).expect("decode"))
            };
            f(&mut rec);
            id = rec.id.clone();
            t.insert(k, encode(&rec).expect("encode").as_slice()).expect("insert");
        }
        txn.commit().expect("commit");
        id
    }

    #[tokio::test]
    async fn an_intact_chain_verifies() {
        let (_d, store) = store_with(20).await;
        let r = store.verify_audit_chain().expect("verify");
        assert!(r.ok);
        assert_eq!(r.records, 20);
    }

    #[tokio::test]
    async fn an_edited_record_is_the_first_break() {
        let (_d, store) = store_with(10).await;
        let id = rewrite(&store, 4, |r| r.description = "nothing happened".into());
        let r = store.verify_audit_chain().expect("verify");
        assert!(!r.ok);
        assert_eq!(r.first_break.as_deref(), Some(id.as_str()));
        assert!(r.detail.expect("detail").contains("edited"));
    }

    #[tokio::test]
    async fn a_recomputed_hash_breaks_the_next_link() {
        let (_d, store) = store_with(10).await;
        rewrite(&store, 4, |r| {
            r.description = "nothing happened".into();
            r.hash = record_hash(r);
        });
        let r = store.verify_audit_chain().expect("verify");
        assert!(!r.ok);
        assert!(r.detail.expect("detail").contains("prev_hash"));
    }

    #[tokio::test]
    async fn removing_the_newest_records_is_detected() {
        let (_d, store) = store_with(5).await;
        let txn = store.database().begin_write().expect("txn");
        {
            let mut t = txn.open_table(AUDIT).expect("table");
            let last = t.last().expect("last").expect("row").0.value();
            t.remove(last).expect("remove");
        }
        txn.commit().expect("commit");
        let r = store.verify_audit_chain().expect("verify");
        assert!(!r.ok);
    }
}
