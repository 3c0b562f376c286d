//! The append-only, hash-chained audit log inside a write transaction.
//!
//! Each record carries `prev_hash` (the hash of the record before it) and a
//! `hash` over `prev_hash`, a newline, and the record's content bytes. Keys
//! are (µs timestamp, sequence); timestamps never go backwards within the
//! chain, so key order is chain order.
//!
//! The hash covers exact bytes, never a re-serialisation: decoding JSON and
//! encoding it again need not give the same bytes (a Prompt Shield score,
//! an `f32` widened to `f64`, comes back one ULP off), and a hash over the
//! re-encoding then calls an untouched record edited
//! (docs/decisions/audit-chain.md). Two stored formats, told apart by their
//! first byte:
//! - **Format 2** (written now): the hash (64 hex digits), `\n`, then the
//!   content: the record's JSON without `hash`. The hash is over those
//!   content bytes as stored.
//! - **Format 1** (written up to schema v3): the record's JSON with `hash`
//!   as its last field. The writer computed the hash over the same record
//!   serialised with `hash` empty, and serialised it again to store it; both
//!   came from the same value, so the stored bytes with the `hash` value
//!   emptied are exactly the bytes it hashed. Such records are verified by
//!   that rule and never rewritten.
//!
//! A chain that holds format-1 records gets a marker record (format 2,
//! `metadata.operation` = [`FORMAT_MARKER`]) before its first format-2
//! record; after it, a format-1 record is a break.

use chrono::{DateTime, TimeZone, Utc};
use redb::{ReadableDatabase, ReadableTable, Table, WriteTransaction};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::tables::{AUDIT, AUDIT_BY_SEVERITY, AUDIT_BY_TYPE, AUDIT_BY_USER, IndexTable, META, META_AUDIT_HEAD};
use super::{backend, decode, encode};
use crate::audit::{Audit, category, kind};
use crate::model::{AuditEntry, AuditRecord};
use crate::{AuditQuery, ChainBreak, ChainReport, StoreError, StoreResult};

/// Hash that the first record links back to.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// `metadata.operation` of the record that starts format 2 in a chain that held format-1 records.
pub const FORMAT_MARKER: &str = "audit_chain_format";

/// Hex digits of a hash; a format-2 value is the hash, `\n`, the content.
const HASH_HEX: usize = 64;
const CONTENT_AT: usize = HASH_HEX + 1;

#[derive(Serialize, Deserialize)]
struct Head {
    hash: String,
    seq: u64,
    micros: u64,
    /// The format of the last record; heads written before format 2 lack it.
    #[serde(default = "format_1")]
    format: u8,
}

fn format_1() -> u8 {
    1
}

/// The chain hash of a record: SHA-256 of `prev_hash`, a newline, and its content bytes.
pub fn chain_hash(prev_hash: &str, content: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(prev_hash.as_bytes());
    h.update(b"\n");
    h.update(content);
    hex::encode(h.finalize())
}

/// A stored record, split into what its hash covers.
pub struct Stored<'a> {
    /// 1 or 2 (see the module docs).
    pub format: u8,
    /// The hash stored with the record.
    pub hash: String,
    /// The bytes the hash covers (after `prev_hash` and a newline).
    pub content: std::borrow::Cow<'a, [u8]>,
    /// The record, decoded.
    pub record: AuditRecord,
}

/// Split a stored value into hash, hashed content and record. A format-1
/// value whose `hash` is not the last field as its writer left it is an
/// error (it was edited).
pub fn split(value: &[u8]) -> StoreResult<Stored<'_>> {
    if value.first() == Some(&b'{') {
        let record: AuditRecord = decode(value)?;
        let suffix = format!("\"hash\":\"{}\"}}", record.hash);
        let Some(body) = value.strip_suffix(suffix.as_bytes()) else {
            return Err(StoreError::Backend("the hash is not the last field, as its writer left it".into()));
        };
        let mut content = Vec::with_capacity(body.len() + 10);
        content.extend_from_slice(body);
        content.extend_from_slice(b"\"hash\":\"\"}");
        let hash = record.hash.clone();
        return Ok(Stored { format: 1, hash, content: content.into(), record });
    }
    let (Some(hash), Some(b'\n')) = (value.get(..HASH_HEX), value.get(HASH_HEX)) else {
        return Err(StoreError::Backend("neither stored format: no hash before the content".into()));
    };
    let hash = std::str::from_utf8(hash)
        .ok()
        .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| StoreError::Backend("the stored hash is not hex".into()))?
        .to_owned();
    let content = &value[CONTENT_AT..];
    let mut record: AuditRecord = decode(content)?;
    record.hash.clone_from(&hash);
    Ok(Stored { format: 2, hash, content: content.into(), record })
}

/// Decode a stored record of either format.
pub fn decode_record(value: &[u8]) -> StoreResult<AuditRecord> {
    if value.first() == Some(&b'{') {
        return decode(value);
    }
    let content = value.get(CONTENT_AT..).ok_or_else(|| StoreError::Backend("corrupt record: too short".into()))?;
    let mut record: AuditRecord = decode(content)?;
    record.hash = String::from_utf8_lossy(&value[..HASH_HEX]).into_owned();
    Ok(record)
}

/// The stored value of a record (format 2): its hash is computed here over
/// the content bytes it stores, and set on `record`.
fn seal(record: &mut AuditRecord) -> StoreResult<Vec<u8>> {
    record.hash.clear();
    let mut value = Vec::with_capacity(512);
    value.extend_from_slice(&[b'0'; HASH_HEX]);
    value.push(b'\n');
    serde_json::to_writer(&mut value, &*record).map_err(backend)?;
    let hash = chain_hash(&record.prev_hash, &value[CONTENT_AT..]);
    value[..HASH_HEX].copy_from_slice(hash.as_bytes());
    record.hash = hash;
    Ok(value)
}

/// The record that starts format 2 after format-1 records.
pub(crate) fn format_marker() -> AuditEntry {
    Audit::new(
        kind::SYSTEM,
        category::SYSTEM_INTEGRITY,
        "Audit chain format 2 starts here: each later record's hash covers its stored content bytes; \
         earlier records keep their hashes and are verified as they were written",
    )
    .meta("operation", FORMAT_MARKER)
    .meta("format", 2)
    .meta("previousFormat", 1)
    .build()
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
    let mut appender = Appender::open(txn)?;
    appender.push(entries, at)?;
    appender.close()
}

/// The chain's tables and head, open for several appends in one transaction:
/// the head is read once and written once ([`Appender::close`]), however many
/// records are appended (a group commit's request outcomes). While it is
/// open, nothing else in the transaction may open the audit tables.
pub struct Appender<'t> {
    meta: Table<'t, &'static str, &'static [u8]>,
    records: Table<'t, (u64, u64), &'static [u8]>,
    by_type: Table<'t, (&'static str, u64, u64), ()>,
    by_severity: Table<'t, (&'static str, u64, u64), ()>,
    by_user: Option<Table<'t, (&'static str, u64, u64), ()>>,
    txn: &'t WriteTransaction,
    head: Head,
}

impl<'t> Appender<'t> {
    pub fn open(txn: &'t WriteTransaction) -> StoreResult<Self> {
        let meta = txn.open_table(META).map_err(backend)?;
        let head: Head = match meta.get(META_AUDIT_HEAD).map_err(backend)? {
            Some(v) => decode(v.value())?,
            None => Head { hash: GENESIS.to_owned(), seq: 0, micros: 0, format: 2 },
        };
        Ok(Appender {
            records: txn.open_table(AUDIT).map_err(backend)?,
            by_type: txn.open_table(AUDIT_BY_TYPE).map_err(backend)?,
            by_severity: txn.open_table(AUDIT_BY_SEVERITY).map_err(backend)?,
            by_user: None,
            meta,
            txn,
            head,
        })
    }

    /// Chain `entries` after the records before them; `at` as in [`append_at`].
    pub fn push(&mut self, entries: &[AuditEntry], at: Option<DateTime<Utc>>) -> StoreResult<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let marker = (self.head.format < 2).then(format_marker);
        self.head.format = 2;
        for entry in marker.iter().chain(entries) {
            let now = at.unwrap_or_else(Utc::now).timestamp_micros().max(0) as u64;
            let micros = now.max(self.head.micros);
            let seq = self.head.seq + 1;
            let timestamp = micros_to_time(micros);
            let mut record = AuditRecord::unsealed(entry, timestamp, self.head.hash.clone());
            let value = seal(&mut record)?;
            self.records.insert((micros, seq), value.as_slice()).map_err(backend)?;
            self.by_type.insert((record.kind.as_str(), micros, seq), ()).map_err(backend)?;
            self.by_severity.insert((record.severity.as_str(), micros, seq), ()).map_err(backend)?;
            if let Some(u) = &record.user {
                if self.by_user.is_none() {
                    self.by_user = Some(self.txn.open_table(AUDIT_BY_USER).map_err(backend)?);
                }
                if let Some(t) = self.by_user.as_mut() {
                    t.insert((u.id.as_str(), micros, seq), ()).map_err(backend)?;
                }
            }
            self.head.seq = seq;
            self.head.hash = record.hash;
            self.head.micros = micros;
        }
        Ok(())
    }

    /// Store the chain's new head.
    pub fn close(mut self) -> StoreResult<()> {
        self.meta.insert(META_AUDIT_HEAD, encode(&self.head)?.as_slice()).map_err(backend)?;
        Ok(())
    }
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
            Some(v) => Ok(Some(decode_record(v.value())?)),
            None => Ok(None),
        }
    };
    // Filters the index did not answer need the record's content.
    let filters = [q.kind.is_some(), q.user_id.is_some(), q.severity.is_some()];
    let unindexed = filters.iter().filter(|f| **f).count() > usize::from(indexed.is_some());
    let content_filter = unindexed || q.search.is_some() || q.about_user_id.is_some();
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

/// Walk the whole chain from the first record and report every break (the
/// walk goes on past one, linking on from the hash the broken record carries).
pub fn verify(db: &redb::Database) -> StoreResult<ChainReport> {
    let txn = db.begin_read().map_err(backend)?;
    let table = txn.open_table(AUDIT).map_err(backend)?;
    let mut walk = Walk::default();
    let mut prev = GENESIS.to_owned();
    // The format of the record before (0: none yet).
    let mut format = 0u8;
    for item in table.iter().map_err(backend)? {
        let (_, v) = item.map_err(backend)?;
        walk.records += 1;
        let stored = match split(v.value()) {
            Ok(s) => s,
            Err(e) => {
                walk.broken(format!("record #{}", walk.records), format!("unreadable or edited: {e}"));
                // A readable record carries the hash the next one links to.
                match decode_record(v.value()) {
                    Ok(r) => prev = r.hash,
                    Err(_) => prev.clear(),
                }
                continue;
            }
        };
        let record = &stored.record;
        if record.prev_hash != prev {
            walk.broken(record.id.clone(), "prev_hash does not match the hash of the record before it".into());
        } else if chain_hash(&record.prev_hash, &stored.content) != stored.hash {
            walk.broken(record.id.clone(), "hash does not match the record's content (edited)".into());
        } else if stored.format < format {
            walk.broken(record.id.clone(), "a record in format 1 after format 2 began (rewritten in the old format)".into());
        } else if stored.format == 2 && format == 1 && record.metadata.get("operation").and_then(|o| o.as_str()) != Some(FORMAT_MARKER) {
            walk.broken(record.id.clone(), "format 2 begins without its marker record".into());
        }
        format = format.max(stored.format);
        prev = stored.hash;
    }
    let meta = txn.open_table(META).map_err(backend)?;
    if let Some(v) = meta.get(META_AUDIT_HEAD).map_err(backend)? {
        let head: Head = decode(v.value())?;
        if head.hash != prev {
            walk.broken("end of log".into(), "the last record is not the chain head: records were removed from the end".into());
        }
    }
    Ok(walk.report())
}

/// What a walk of the chain found so far.
#[derive(Default)]
struct Walk {
    records: u64,
    breaks: u64,
    broken: Vec<ChainBreak>,
}

impl Walk {
    fn broken(&mut self, id: String, detail: String) {
        self.breaks += 1;
        if self.broken.len() < ChainReport::LISTED {
            self.broken.push(ChainBreak { position: self.records, id, detail });
        }
    }

    fn report(self) -> ChainReport {
        let first = self.broken.first().cloned();
        ChainReport {
            records: self.records,
            ok: self.breaks == 0,
            first_break: first.as_ref().map(|b| b.id.clone()),
            detail: first.map(|b| b.detail),
            breaks: self.breaks,
            broken: self.broken,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;
    use crate::Store;
    use crate::audit::{Audit, category, kind};
    use crate::model::{AuditUser, Severity};
    use crate::redb::RedbStore;

    fn entry(n: usize) -> AuditEntry {
        Audit::new(kind::SYSTEM, category::SYSTEM_INTEGRITY, format!("event {n}")).meta("operation", "test").build()
    }

    /// A blocked request's record as the chat path writes it: Prompt Shield's
    /// `f32` score widened to `f64`.
    fn blocked(score: f32) -> AuditEntry {
        Audit::new(kind::SECURITY_EVENT, category::SECURITY_MONITORING, "Prompt injection blocked")
            .meta("operation", "prompt_shield")
            .meta("score", f64::from(score))
            .build()
    }

    async fn store_with(n: usize) -> (tempfile::TempDir, RedbStore) {
        let dir = tempfile::tempdir().expect("tmp");
        let store = RedbStore::open(dir.path(), false).expect("open");
        store.append_audit((0..n).map(entry).collect()).await.expect("append");
        (dir, store)
    }

    /// The writer of format 1, as schema v3 had it: the hash over the record
    /// re-serialised with `hash` empty, the record serialised again to store it.
    fn append_format_1(txn: &WriteTransaction, entries: &[AuditEntry]) {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct V1<'a> {
            id: &'a str,
            timestamp: DateTime<Utc>,
            #[serde(rename = "type")]
            kind: &'a str,
            severity: Severity,
            description: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            user: &'a Option<AuditUser>,
            metadata: &'a Value,
            compliance_category: &'a str,
            outcome: &'a str,
            prev_hash: &'a str,
            hash: &'a str,
        }
        let mut meta = txn.open_table(META).expect("meta");
        let (mut hash, mut seq, mut micros) = match meta.get(META_AUDIT_HEAD).expect("head") {
            Some(v) => {
                let h: Head = decode(v.value()).expect("head");
                (h.hash, h.seq, h.micros)
            }
            None => (GENESIS.to_owned(), 0, 0),
        };
        let mut table = txn.open_table(AUDIT).expect("audit");
        for e in entries {
            micros = (Utc::now().timestamp_micros() as u64).max(micros);
            seq += 1;
            let id = format!("log_{}", uuid::Uuid::now_v7().simple());
            let v1 = |h: &'_ str| {
                let r = V1 {
                    id: &id,
                    timestamp: micros_to_time(micros),
                    kind: &e.kind,
                    severity: e.severity,
                    description: &e.description,
                    user: &e.user,
                    metadata: &e.metadata,
                    compliance_category: &e.compliance_category,
                    outcome: &e.outcome,
                    prev_hash: &hash,
                    hash: h,
                };
                serde_json::to_vec(&r).expect("encode")
            };
            let new_hash = chain_hash(&hash, &v1(""));
            let stored = v1(&new_hash);
            let record: AuditRecord = decode(&stored).expect("decode");
            table.insert((micros, seq), stored.as_slice()).expect("insert");
            index_record(txn, &record, micros, seq).expect("index");
            hash = new_hash;
        }
        // A head of format 1 had no `format` field.
        let head = json!({"hash": hash, "seq": seq, "micros": micros});
        meta.insert(META_AUDIT_HEAD, encode(&head).expect("head").as_slice()).expect("head");
    }

    fn write_format_1(store: &RedbStore, entries: &[AuditEntry]) {
        let txn = store.database().expect("db").begin_write().expect("txn");
        append_format_1(&txn, entries);
        txn.commit().expect("commit");
    }

    /// Change the `nth` record as someone with the file would: its content
    /// changed, its stored hash kept unless `rehash`.
    fn tamper(store: &RedbStore, nth: usize, rehash: bool, f: impl Fn(&mut AuditRecord)) -> String {
        let txn = store.database().expect("db").begin_write().expect("txn");
        let id;
        {
            let mut t = txn.open_table(AUDIT).expect("table");
            let (k, stored) = {
                let (k, v) = t.iter().expect("iter").nth(nth).expect("row").expect("row");
                let s = split(v.value()).expect("split");
                (k.value(), (s.format, s.record))
            };
            let (format, mut rec) = stored;
            let kept = std::mem::take(&mut rec.hash);
            f(&mut rec);
            id = rec.id.clone();
            let value = if format == 1 {
                rec.hash = if rehash { chain_hash(&rec.prev_hash, &encode(&rec).expect("encode")) } else { kept };
                encode(&rec).expect("encode")
            } else {
                let content = encode(&rec).expect("encode");
                let hash = if rehash { chain_hash(&rec.prev_hash, &content) } else { kept };
                [hash.as_bytes(), b"\n", &content].concat()
            };
            t.insert(k, value.as_slice()).expect("insert");
        }
        txn.commit().expect("commit");
        id
    }

    fn markers(store: &RedbStore) -> usize {
        let txn = store.database().expect("db").begin_read().expect("read");
        let t = txn.open_table(AUDIT).expect("table");
        t.iter()
            .expect("iter")
            .filter(|r| {
                let (_, v) = r.as_ref().expect("row");
                decode_record(v.value()).expect("decode").metadata["operation"] == FORMAT_MARKER
            })
            .count()
    }

    #[tokio::test]
    async fn an_intact_chain_verifies() {
        let (_d, store) = store_with(20).await;
        let r = store.verify_audit_chain().await.expect("verify");
        assert!(r.ok, "{r:?}");
        assert_eq!(r.records, 20);
        assert_eq!(markers(&store), 0, "a chain that starts in format 2 needs no marker");
    }

    #[tokio::test]
    async fn untouched_records_with_shield_scores_verify() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = RedbStore::open(dir.path(), false).expect("open");
        // Scores that the decode/encode round trip moves by one ULP (the report saw one in 13).
        let scores: Vec<f32> = (0..200).map(|i| 0.5 + (i as f32) * 0.002_345_67).collect();
        store.append_audit(scores.iter().map(|s| blocked(*s)).collect()).await.expect("append");
        let r = store.verify_audit_chain().await.expect("verify");
        assert!(r.ok, "{r:?}");
        assert_eq!(r.breaks, 0);
    }

    #[tokio::test]
    async fn format_1_records_verify_by_their_own_rule_and_a_marker_starts_format_2() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = RedbStore::open(dir.path(), false).expect("open");
        let scores: Vec<f32> = (0..60).map(|i| 0.5 + (i as f32) * 0.007_891_3).collect();
        write_format_1(&store, &scores.iter().map(|s| blocked(*s)).collect::<Vec<_>>());
        let r = store.verify_audit_chain().await.expect("verify");
        assert!(r.ok, "format-1 records reported broken: {r:?}");
        store.append_audit(vec![entry(1), entry(2)]).await.expect("append");
        store.append_audit(vec![entry(3)]).await.expect("append");
        assert_eq!(markers(&store), 1, "one marker, before the first format-2 record");
        let r = store.verify_audit_chain().await.expect("verify");
        assert!(r.ok, "{r:?}");
        assert_eq!(r.records, 60 + 1 + 3);
    }

    #[tokio::test]
    async fn an_edited_record_is_the_first_break() {
        let (_d, store) = store_with(10).await;
        let id = tamper(&store, 4, false, |r| r.description = "nothing happened".into());
        let r = store.verify_audit_chain().await.expect("verify");
        assert!(!r.ok);
        assert_eq!(r.first_break.as_deref(), Some(id.as_str()));
        assert!(r.detail.expect("detail").contains("edited"));
    }

    #[tokio::test]
    async fn a_break_does_not_hide_a_later_one() {
        let (_d, store) = store_with(10).await;
        let first = tamper(&store, 2, false, |r| r.description = "nothing happened".into());
        let second = tamper(&store, 7, false, |r| r.outcome = "failure".into());
        let r = store.verify_audit_chain().await.expect("verify");
        assert_eq!(r.breaks, 2, "{r:?}");
        let ids: Vec<&str> = r.broken.iter().map(|b| b.id.as_str()).collect();
        assert_eq!(ids, [first.as_str(), second.as_str()]);
        assert_eq!(r.broken[1].position, 8);
    }

    #[tokio::test]
    async fn a_recomputed_hash_breaks_the_next_link() {
        let (_d, store) = store_with(10).await;
        tamper(&store, 4, true, |r| r.description = "nothing happened".into());
        let r = store.verify_audit_chain().await.expect("verify");
        assert!(!r.ok);
        assert!(r.detail.expect("detail").contains("prev_hash"));
    }

    #[tokio::test]
    async fn a_format_1_record_after_the_marker_is_a_break() {
        let (_d, store) = store_with(3).await;
        write_format_1(&store, &[entry(9)]);
        let r = store.verify_audit_chain().await.expect("verify");
        assert!(!r.ok);
        assert!(r.detail.expect("detail").contains("format 1 after format 2"));
    }

    #[tokio::test]
    async fn removing_the_newest_records_is_detected() {
        let (_d, store) = store_with(5).await;
        let txn = store.database().expect("db").begin_write().expect("txn");
        {
            let mut t = txn.open_table(AUDIT).expect("table");
            let last = t.last().expect("last").expect("row").0.value();
            t.remove(last).expect("remove");
        }
        txn.commit().expect("commit");
        let r = store.verify_audit_chain().await.expect("verify");
        assert!(!r.ok);
    }

    fn any_entry() -> impl Strategy<Value = AuditEntry> {
        (
            "\\PC{0,40}",
            proptest::collection::vec(any::<f32>(), 0..4),
            any::<f64>(),
            proptest::option::of(("[a-z0-9_]{1,12}", "\\PC{0,12}")),
            any::<bool>(),
        )
            .prop_map(|(description, scores, wide, user, warn)| {
                let mut a = Audit::new(kind::SECURITY_EVENT, category::SECURITY_MONITORING, description)
                    .meta("scores", scores.iter().map(|s| f64::from(*s)).collect::<Vec<_>>())
                    .meta("wide", if wide.is_finite() { json!(wide) } else { Value::Null })
                    .user(user.map(|(id, name)| AuditUser { id, name, email: "a@example.com".into() }));
                if warn {
                    a = a.severity(Severity::Warning).outcome(crate::audit::outcome::BLOCKED);
                }
                a.build()
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Records of either format, with random scores, verify untouched;
        /// one planted edit is found, at its place, and only it.
        #[test]
        fn untouched_chains_verify_and_a_planted_edit_is_found(
            old in proptest::collection::vec(any_entry(), 0..12),
            new in proptest::collection::vec(any_entry(), 1..12),
            at in any::<proptest::sample::Index>(),
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            let dir = tempfile::tempdir().expect("tmp");
            let store = RedbStore::open(dir.path(), false).expect("open");
            if !old.is_empty() {
                write_format_1(&store, &old);
            }
            rt.block_on(store.append_audit(new.clone())).expect("append");
            let r = rt.block_on(store.verify_audit_chain()).expect("verify");
            prop_assert!(r.ok, "{:?}", r);
            let total = old.len() + usize::from(!old.is_empty()) + new.len();
            prop_assert_eq!(r.records, total as u64);

            let nth = at.index(total);
            let id = tamper(&store, nth, false, |r| r.description.push('!'));
            let r = rt.block_on(store.verify_audit_chain()).expect("verify");
            prop_assert_eq!(r.breaks, 1, "{:?}", r);
            prop_assert_eq!(r.first_break.as_deref(), Some(id.as_str()));
            prop_assert_eq!(r.broken[0].position, nth as u64 + 1);
        }
    }
}
