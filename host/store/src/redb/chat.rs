//! redb side of the chat path: usage totals, quota counters, idempotency
//! records and the outbox.

use chrono::Utc;
use redb::{ReadableDatabase, ReadableTable, Table, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::tables::{IDEMPOTENCY, OUTBOX, QUOTA, RECEIPT_BATCHES, RECEIPTS, USAGE};
use super::{audit, backend, decode, encode};
use crate::model::AuditEntry;
use crate::receipts::{BatchProof, Receipt, Sealed, SignedBatch, SignedReceipt};
use crate::records::{Claim, IdempotencyRecord, IdempotencyState, OutboxEvent, RequestOutcome, UsageTotals};
use crate::{StoreError, StoreResult, UsageRows};

/// Add the tokens to the totals row `key` (`user/<id>`, `key/<id>`).
fn add_usage(t: &mut Table<'_, &'static str, &'static [u8]>, key: &str, prompt: u64, completion: u64) -> StoreResult<()> {
    let mut totals: UsageTotals = match t.get(key).map_err(backend)? {
        Some(v) => decode(v.value())?,
        None => UsageTotals::default(),
    };
    totals.add(prompt, completion);
    t.insert(key, encode(&totals)?.as_slice()).map_err(backend)?;
    Ok(())
}

/// Append `events` to the outbox from sequence `next` on; the sequence after them.
fn push_events_at(t: &mut Table<'_, u64, &'static [u8]>, next: u64, events: &[OutboxEvent]) -> StoreResult<u64> {
    let mut seq = next;
    for ev in events {
        t.insert(seq, encode(ev)?.as_slice()).map_err(backend)?;
        seq += 1;
    }
    Ok(seq)
}

/// The outbox and the sequence its next event takes.
fn open_outbox(txn: &WriteTransaction) -> StoreResult<(Table<'_, u64, &'static [u8]>, u64)> {
    let t = txn.open_table(OUTBOX).map_err(backend)?;
    let next = t.last().map_err(backend)?.map_or(1, |(k, _)| k.value() + 1);
    Ok((t, next))
}

pub fn push_events(txn: &WriteTransaction, events: &[OutboxEvent]) -> StoreResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let (mut t, next) = open_outbox(txn)?;
    push_events_at(&mut t, next, events)?;
    Ok(())
}

/// `slot`'s table, opened on first use.
fn opened<T>(slot: &mut Option<T>, open: impl FnOnce() -> StoreResult<T>) -> StoreResult<&mut T> {
    if slot.is_none() {
        *slot = Some(open()?);
    }
    slot.as_mut().ok_or_else(|| StoreError::Backend("a table that was just opened is missing".into()))
}

/// The request outcomes of one group commit, written with each table opened
/// once (on first use) and the ends of the outbox, the ledger and the audit
/// chain read once, however many requests the commit carries: a table opened
/// per request was a share of the writer's CPU per request that grew with
/// every table the chat path writes. While it is open, nothing else in the
/// transaction may open these tables; [`Outcomes::close`] (or dropping it)
/// releases them.
pub struct Outcomes<'t> {
    txn: &'t WriteTransaction,
    idempotency: Option<Table<'t, &'static str, &'static [u8]>>,
    usage: Option<Table<'t, &'static str, &'static [u8]>>,
    ledger: Option<super::usage_ledger::Appender<'t>>,
    outbox: Option<(Table<'t, u64, &'static [u8]>, u64)>,
    audit: Option<audit::Appender<'t>>,
}

impl<'t> Outcomes<'t> {
    pub fn new(txn: &'t WriteTransaction) -> Self {
        Outcomes { txn, idempotency: None, usage: None, ledger: None, outbox: None, audit: None }
    }

    /// Write one request's outcome: its idempotency record, usage totals and
    /// ledger row, events and audit records.
    pub fn apply(&mut self, o: &RequestOutcome) -> StoreResult<()> {
        let txn = self.txn;
        if let Some((scope, record)) = &o.idempotency {
            let t = opened(&mut self.idempotency, || txn.open_table(IDEMPOTENCY).map_err(backend))?;
            match record {
                Some(r) => {
                    t.insert(scope.as_str(), encode(r)?.as_slice()).map_err(backend)?;
                }
                None => {
                    t.remove(scope.as_str()).map_err(backend)?;
                }
            }
        }
        if let Some(u) = &o.usage {
            let t = opened(&mut self.usage, || txn.open_table(USAGE).map_err(backend))?;
            add_usage(t, &format!("user/{}", u.user_id), u.prompt_tokens, u.completion_tokens)?;
            add_usage(t, &format!("key/{}", u.key_id), u.prompt_tokens, u.completion_tokens)?;
            opened(&mut self.ledger, || super::usage_ledger::Appender::open(txn))?.push(u)?;
        }
        if !o.events.is_empty() {
            let (t, next) = opened(&mut self.outbox, || open_outbox(txn))?;
            *next = push_events_at(t, *next, &o.events)?;
        }
        if !o.audit.is_empty() {
            opened(&mut self.audit, || audit::Appender::open(txn))?.push(&o.audit, None)?;
        }
        Ok(())
    }

    /// Store the audit chain's new head and release the tables.
    pub fn close(self) -> StoreResult<()> {
        self.audit.map_or(Ok(()), audit::Appender::close)
    }
}

/// A `RECEIPTS` row. A receipt signed alone is stored as served
/// (`signature`), and so is one of a batch written before schema v3
/// (`signature` and `batch`, its path inline); one of a later batch stores its
/// place in a `RECEIPT_BATCHES` batch (`in_batch`) and gets its path when served.
#[derive(Debug, Serialize, Deserialize)]
struct ReceiptRow<R> {
    receipt: R,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    batch: Option<BatchProof>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    in_batch: Option<InBatch>,
}

/// Which batch, and which leaf of it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct InBatch {
    id: u64,
    leaf: u32,
}

/// Store one commit's sealed receipts: a batch once, then each receipt with its place in it.
pub fn store_sealed(txn: &WriteTransaction, sealed: &Sealed) -> StoreResult<()> {
    let mut t = txn.open_table(RECEIPTS).map_err(backend)?;
    match sealed {
        Sealed::Alone(signed) => {
            t.insert(signed.receipt.bundle_id.as_str(), encode(signed)?.as_slice()).map_err(backend)?;
        }
        Sealed::Batch { batch, receipts } => {
            let mut batches = txn.open_table(RECEIPT_BATCHES).map_err(backend)?;
            let id = batches.last().map_err(backend)?.map_or(1, |(k, _)| k.value() + 1);
            batches.insert(id, encode(batch)?.as_slice()).map_err(backend)?;
            for (leaf, receipt) in (0u32..).zip(receipts) {
                let row = ReceiptRow { receipt, signature: None, batch: None, in_batch: Some(InBatch { id, leaf }) };
                t.insert(receipt.bundle_id.as_str(), encode(&row)?.as_slice()).map_err(backend)?;
            }
        }
    }
    Ok(())
}

pub fn receipt(db: &redb::Database, bundle_id: &str) -> StoreResult<Option<SignedReceipt>> {
    let txn = db.begin_read().map_err(backend)?;
    let t = txn.open_table(RECEIPTS).map_err(backend)?;
    let Some(v) = t.get(bundle_id).map_err(backend)? else {
        return Ok(None);
    };
    let row: ReceiptRow<Receipt> = decode(v.value())?;
    let corrupt = |what: &str| StoreError::Backend(format!("corrupt receipt {bundle_id}: {what}"));
    match (row.in_batch, row.signature) {
        (Some(at), _) => {
            let batches = txn.open_table(RECEIPT_BATCHES).map_err(backend)?;
            let b = batches.get(at.id).map_err(backend)?.ok_or_else(|| corrupt("its batch is missing"))?;
            let batch: SignedBatch = decode(b.value())?;
            batch.receipt_at(at.leaf as usize, row.receipt).map(Some).ok_or_else(|| corrupt("its batch has no such leaf"))
        }
        (None, Some(signature)) => Ok(Some(SignedReceipt { receipt: row.receipt, signature, batch: row.batch })),
        (None, None) => Err(corrupt("no signature")),
    }
}

/// The `QUOTA` row of a key's window.
pub fn quota_row(key_id: &str, window: &str) -> String {
    format!("{key_id}/{window}")
}

pub fn quota_counts(db: &redb::Database, key_id: &str, windows: &[String]) -> StoreResult<Vec<u64>> {
    let txn = db.begin_read().map_err(backend)?;
    let t = txn.open_table(QUOTA).map_err(backend)?;
    windows
        .iter()
        .map(|w| {
            let k = quota_row(key_id, w);
            Ok(t.get(k.as_str()).map_err(backend)?.map(|v| v.value()).unwrap_or(0))
        })
        .collect()
}

pub fn usage_totals(db: &redb::Database) -> StoreResult<(UsageRows, UsageRows)> {
    let txn = db.begin_read().map_err(backend)?;
    let t = txn.open_table(USAGE).map_err(backend)?;
    let (mut users, mut keys) = (Vec::new(), Vec::new());
    for item in t.iter().map_err(backend)? {
        let (k, v) = item.map_err(backend)?;
        let totals: UsageTotals = decode(v.value())?;
        match k.value().split_once('/') {
            Some(("user", id)) => users.push((id.to_owned(), totals)),
            Some(("key", id)) => keys.push((id.to_owned(), totals)),
            _ => {}
        }
    }
    Ok((users, keys))
}

pub fn idempotency_get(db: &redb::Database, scope: &str) -> StoreResult<Option<IdempotencyRecord>> {
    let txn = db.begin_read().map_err(backend)?;
    let t = txn.open_table(IDEMPOTENCY).map_err(backend)?;
    let v = t.get(scope).map_err(backend)?;
    v.map(|v| decode(v.value())).transpose()
}

pub fn idempotency_claim(txn: &WriteTransaction, scope: &str, record: &IdempotencyRecord) -> StoreResult<Claim> {
    let mut t = txn.open_table(IDEMPOTENCY).map_err(backend)?;
    let existing: Option<IdempotencyRecord> = match t.get(scope).map_err(backend)? {
        Some(v) => Some(decode(v.value())?),
        None => None,
    };
    if let Some(e) = existing
        && e.is_live(Utc::now())
    {
        return Ok(Claim::Existing(e));
    }
    t.insert(scope, encode(record)?.as_slice()).map_err(backend)?;
    Ok(Claim::Claimed)
}

pub fn idempotency_renew(txn: &WriteTransaction, scope: &str, lease_until: chrono::DateTime<Utc>) -> StoreResult<()> {
    let mut t = txn.open_table(IDEMPOTENCY).map_err(backend)?;
    let existing: Option<IdempotencyRecord> = match t.get(scope).map_err(backend)? {
        Some(v) => Some(decode(v.value())?),
        None => None,
    };
    if let Some(mut r) = existing
        && let IdempotencyState::InFlight { .. } = r.state
    {
        r.state = IdempotencyState::InFlight { lease_until };
        t.insert(scope, encode(&r)?.as_slice()).map_err(backend)?;
    }
    Ok(())
}

/// Of up to `limit` records after `after` (key order), the scopes of those not
/// live at `now`, and where to go on (`None` at the end of the table). Reads
/// only the expiry and lease of each record, not its stored response.
pub fn idempotency_not_live(
    db: &redb::Database,
    after: Option<&str>,
    limit: usize,
    now: chrono::DateTime<Utc>,
) -> StoreResult<(Vec<String>, Option<String>)> {
    /// The parts of an [`IdempotencyRecord`] that say whether it binds.
    #[derive(serde::Deserialize)]
    struct Head {
        expires_at: chrono::DateTime<Utc>,
        state: StateHead,
    }
    #[derive(serde::Deserialize)]
    struct StateHead {
        lease_until: Option<chrono::DateTime<Utc>>,
    }
    let txn = db.begin_read().map_err(backend)?;
    let t = txn.open_table(IDEMPOTENCY).map_err(backend)?;
    let range = match after {
        Some(a) => t.range::<&str>((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded)),
        None => t.range::<&str>(..),
    }
    .map_err(backend)?;
    let (mut found, mut last, mut seen) = (Vec::new(), None, 0);
    for item in range.take(limit) {
        let (k, v) = item.map_err(backend)?;
        seen += 1;
        let scope = k.value().to_owned();
        let live = match serde_json::from_slice::<Head>(v.value()) {
            Ok(h) => h.expires_at > now && h.state.lease_until.is_none_or(|l| l > now),
            // Unreadable: leave it to the exact check below.
            Err(_) => false,
        };
        if !live {
            found.push(scope.clone());
        }
        last = Some(scope);
    }
    Ok((found, if seen == limit { last } else { None }))
}

/// Delete those of `scopes` whose record does not bind at `now`; how many.
/// A scope claimed again since it was found is live and stays.
pub fn idempotency_remove_not_live(txn: &WriteTransaction, scopes: &[String], now: chrono::DateTime<Utc>) -> StoreResult<usize> {
    let mut t = txn.open_table(IDEMPOTENCY).map_err(backend)?;
    let mut removed = 0;
    for scope in scopes {
        let live = match t.get(scope.as_str()).map_err(backend)? {
            Some(v) => match decode::<IdempotencyRecord>(v.value()) {
                Ok(r) => r.is_live(now),
                // Unreadable, it could never be replayed or claimed again
                // (both read it first): removing it frees the key.
                Err(e) => {
                    tracing::warn!(scope = %scope, error = %e, "removing an unreadable idempotency record");
                    false
                }
            },
            None => continue,
        };
        if !live {
            t.remove(scope.as_str()).map_err(backend)?;
            removed += 1;
        }
    }
    Ok(removed)
}

pub fn enqueue(txn: &WriteTransaction, events: &[OutboxEvent], audit_entries: &[AuditEntry]) -> StoreResult<()> {
    push_events(txn, events)?;
    audit::append(txn, audit_entries)
}

pub fn outbox_after(db: &redb::Database, after: u64, limit: usize) -> StoreResult<Vec<(u64, OutboxEvent)>> {
    let txn = db.begin_read().map_err(backend)?;
    let t = txn.open_table(OUTBOX).map_err(backend)?;
    let mut out = Vec::new();
    for item in t.range((after + 1)..).map_err(backend)?.take(limit) {
        let (k, v) = item.map_err(backend)?;
        out.push((k.value(), decode(v.value())?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;
    use crate::Store;
    use crate::receipts::numbered;
    use crate::redb::RedbStore;
    use crate::usage_ledger::UsageLedger;

    fn record(expires_in: i64, state: IdempotencyState) -> IdempotencyRecord {
        IdempotencyRecord { body_hash: "h".into(), state, expires_at: Utc::now() + Duration::seconds(expires_in) }
    }

    fn completed() -> IdempotencyState {
        IdempotencyState::Completed { status: 200, content_type: "application/json".into(), body: "{\"answer\":\"x\"}".repeat(100) }
    }

    fn in_flight(lease_in: i64) -> IdempotencyState {
        IdempotencyState::InFlight { lease_until: Utc::now() + Duration::seconds(lease_in) }
    }

    #[tokio::test]
    async fn a_sweep_removes_only_records_that_no_longer_bind() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = RedbStore::open(dir.path(), true).expect("open");
        // Claims take over dead records, so put the dead ones in directly.
        let rows = [
            ("k1/a-expired", record(-10, completed())),
            ("k1/b-live", record(3600, completed())),
            ("k1/c-lapsed-lease", record(3600, in_flight(-1))),
            ("k1/d-leased", record(3600, in_flight(30))),
            ("k1/e-expired-in-flight", record(-1, in_flight(30))),
        ];
        for (scope, r) in rows.clone() {
            store
                .writer
                .write(move |txn| {
                    let mut t = txn.open_table(IDEMPOTENCY).map_err(backend)?;
                    t.insert(scope, encode(&r)?.as_slice()).map_err(backend)?;
                    Ok(())
                })
                .await
                .expect("insert");
        }
        store
            .writer
            .write(|txn| {
                let mut t = txn.open_table(IDEMPOTENCY).map_err(backend)?;
                t.insert("k1/f-unreadable", b"not json".as_slice()).map_err(backend)?;
                Ok(())
            })
            .await
            .expect("insert");

        // Pages of two: three steps reach the end of the six rows.
        let (mut after, mut removed, mut steps) = (None, 0, 0);
        loop {
            let page = store.idempotency_sweep(after, 2).await.expect("sweep");
            removed += page.removed;
            steps += 1;
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        assert_eq!((removed, steps), (4, 4), "the fourth step finds the end");
        for (scope, _) in &rows {
            let kept = store.idempotency_get(scope).await.expect("get").is_some();
            assert_eq!(kept, ["k1/b-live", "k1/d-leased"].contains(scope), "{scope}");
        }
        // The unreadable row is gone too (reading it would have failed).
        assert!(store.idempotency_get("k1/f-unreadable").await.expect("read").is_none());
    }

    #[tokio::test]
    async fn a_record_claimed_again_after_it_was_found_is_kept() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = RedbStore::open(dir.path(), true).expect("open");
        let dead = record(-10, completed());
        store
            .writer
            .write(move |txn| {
                let mut t = txn.open_table(IDEMPOTENCY).map_err(backend)?;
                t.insert("k1/x", encode(&dead)?.as_slice()).map_err(backend)?;
                Ok(())
            })
            .await
            .expect("insert");
        let (found, next) = idempotency_not_live(&store.db.get().expect("db"), None, 10, Utc::now()).expect("scan");
        assert_eq!((found.clone(), next), (vec!["k1/x".to_owned()], None));
        // A request claims the key between the scan and the delete.
        assert_eq!(store.idempotency_claim("k1/x", record(3600, in_flight(30))).await.expect("claim"), Claim::Claimed);
        let removed = store.writer.write(move |txn| idempotency_remove_not_live(txn, &found, Utc::now())).await.expect("remove");
        assert_eq!(removed, 0);
        assert!(store.idempotency_get("k1/x").await.expect("get").is_some_and(|r| r.is_live(Utc::now())));
    }

    fn outcome(i: usize) -> RequestOutcome {
        use crate::audit::{Audit, category, kind};
        let user = crate::model::AuditUser { id: format!("usr_{}", i % 3), name: "U".into(), email: "u@example.com".into() };
        RequestOutcome {
            usage: Some(crate::records::UsageDelta {
                user_id: format!("usr_{}", i % 3),
                key_id: "key_a".into(),
                group_id: None,
                model: "echo/default".into(),
                request_id: format!("req-{i}"),
                prompt_tokens: 10,
                completion_tokens: 1,
            }),
            events: vec![OutboxEvent::new("api:request", serde_json::json!({ "n": i })); 1 + i % 2],
            audit: vec![Audit::new(kind::SYSTEM, category::SYSTEM_INTEGRITY, format!("request {i}")).user(Some(user)).build()],
            idempotency: Some((format!("key_a/{i}"), None)),
            receipt: None,
        }
    }

    async fn check_outcomes_written(store: &RedbStore, requests: usize, other_audits: u64) {
        let events = store.outbox_after(0, 10_000).await.expect("outbox");
        let seqs: Vec<u64> = events.iter().map(|(s, _)| *s).collect();
        let expected: usize = (0..requests).map(|i| 1 + i % 2).sum();
        assert_eq!(seqs, (1..=expected as u64).collect::<Vec<_>>(), "one unbroken outbox sequence");
        let page = store.ledger_page(&Default::default(), None, 10_000).await.expect("ledger");
        assert_eq!(page.rows.len(), requests);
        let mut keys: Vec<(u64, u64)> = page.rows.iter().filter_map(|r| parse_key(&r.id)).collect();
        keys.reverse();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "ledger keys strictly increase: {keys:?}");
        let (users, keys) = store.usage_totals().await.expect("totals");
        let total: u64 = users.iter().map(|(_, t)| t.prompt_tokens).sum();
        assert_eq!(total, 10 * requests as u64);
        assert_eq!(keys.iter().map(|(_, t)| t.completion_tokens).sum::<u64>(), requests as u64);
        let chain = store.verify_audit_chain().await.expect("verify");
        assert!(chain.ok, "{chain:?}");
        assert_eq!(chain.records, requests as u64 + other_audits);
    }

    fn parse_key(id: &str) -> Option<(u64, u64)> {
        let (a, b) = id.split_once('.')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    }

    #[tokio::test]
    async fn outcomes_written_together_keep_every_sequence_and_release_their_tables() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = RedbStore::open(dir.path(), false).expect("open");
        let n = 40;
        store
            .writer
            .write(move |txn| {
                let mut outcomes = Outcomes::new(txn);
                for i in 0..n {
                    outcomes.apply(&outcome(i))?;
                }
                outcomes.close()?;
                // The same transaction's other writes open the same tables after it.
                push_events(txn, &[])?;
                audit::append(txn, &[crate::audit::Audit::new("system", "system_integrity", "after").build()])
            })
            .await
            .expect("write");
        check_outcomes_written(&store, n, 1).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_outcomes_and_other_writes_commit_together_consistently() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = std::sync::Arc::new(RedbStore::open(dir.path(), false).expect("open"));
        let mut tasks = Vec::new();
        for i in 0..300 {
            let store = store.clone();
            #[expect(clippy::disallowed_methods, reason = "every task is joined below")]
            tasks.push(tokio::spawn(async move {
                if i % 10 == 0 {
                    // An audit-only write between the outcomes: it opens the audit tables itself.
                    let entry = crate::audit::Audit::new("system", "system_integrity", format!("admin {i}")).build();
                    store.append_audit(vec![entry]).await
                } else {
                    store.finish_request(outcome(i)).await
                }
            }));
        }
        for t in tasks {
            t.await.expect("task").expect("write");
        }
        // Outcomes 0..300 skip every tenth, which wrote an audit record instead.
        let (outcomes, others) = (270, 30);
        assert!(store.writer.commits() < 300, "writes shared commits");
        let events = store.outbox_after(0, 10_000).await.expect("outbox").len();
        let expected: usize = (0..300).filter(|i| i % 10 != 0).map(|i| 1 + i % 2).sum();
        assert_eq!(events, expected);
        let page = store.ledger_page(&Default::default(), None, 10_000).await.expect("ledger");
        assert_eq!(page.rows.len(), outcomes);
        let chain = store.verify_audit_chain().await.expect("verify");
        assert!(chain.ok && chain.records == (outcomes + others) as u64, "{chain:?}");
    }

    async fn put(store: &RedbStore, sealed: Sealed) {
        store.writer.write(move |txn| store_sealed(txn, &sealed)).await.expect("store");
    }

    #[tokio::test]
    async fn batched_receipts_are_stored_once_per_batch_and_served_with_their_paths() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = RedbStore::open(dir.path(), true).expect("open");
        let signer = crate::receipts::Signer25519::load_or_create(dir.path()).expect("key");
        let pk = signer.public_key();
        for (n, prefix) in [(5, "a"), (2, "b"), (1, "c")] {
            let receipts = numbered(n)
                .into_iter()
                .map(|mut r| {
                    r.bundle_id = format!("{prefix}{}", r.bundle_id);
                    r
                })
                .collect();
            put(&store, signer.seal_batch(receipts).expect("sealed")).await;
        }
        let expected = signer.sign_batch(numbered(5));
        for (i, signed) in expected.iter().enumerate() {
            let served = store.receipt(&format!("arcpt_{i}")).await.expect("read").expect("stored");
            assert!(crate::receipts::verify(&pk, &served), "batch of 5, leaf {i}");
            assert_eq!(served.batch.as_ref().map(|b| b.path.len()), signed.batch.as_ref().map(|b| b.path.len()));
        }
        for id in ["brcpt_0", "brcpt_1", "crcpt_0"] {
            let served = store.receipt(id).await.expect("read").expect("stored");
            assert!(crate::receipts::verify(&pk, &served), "{id}");
        }
        assert!(store.receipt("crcpt_0").await.expect("read").expect("stored").batch.is_none(), "alone: signed directly");
        assert!(store.receipt("rcpt_missing").await.expect("read").is_none());

        // Two batches, each stored once; a batched row carries no signature or path.
        let txn = store.db.get().expect("db").begin_read().expect("read");
        assert_eq!(redb::ReadableTableMetadata::len(&txn.open_table(RECEIPT_BATCHES).expect("table")).expect("len"), 2);
        let t = txn.open_table(RECEIPTS).expect("table");
        let row = t.get("arcpt_3").expect("get").expect("row");
        let row: serde_json::Value = serde_json::from_slice(row.value()).expect("json");
        assert!(row.get("signature").is_none() && row.get("batch").is_none(), "{row}");
        assert_eq!(row["in_batch"], serde_json::json!({"id": 1, "leaf": 3}));
    }

    #[tokio::test]
    async fn receipts_stored_before_schema_v3_read_and_verify_as_they_were() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = RedbStore::open(dir.path(), true).expect("open");
        let signer = crate::receipts::Signer25519::load_or_create(dir.path()).expect("key");
        // The v2 rows: each receipt as served, a batched one with its path inline.
        let old: Vec<SignedReceipt> =
            signer.sign_batch(numbered(3)).into_iter().chain([signer.sign(crate::receipts::sample("alone"))]).collect();
        let rows = old.clone();
        store
            .writer
            .write(move |txn| {
                let mut t = txn.open_table(RECEIPTS).map_err(backend)?;
                for r in &rows {
                    t.insert(r.receipt.bundle_id.as_str(), encode(r)?.as_slice()).map_err(backend)?;
                }
                Ok(())
            })
            .await
            .expect("insert");
        for r in &old {
            let served = store.receipt(&r.receipt.bundle_id).await.expect("read").expect("stored");
            assert_eq!(&served, r);
            assert!(crate::receipts::verify(&signer.public_key(), &served));
        }
    }

    #[tokio::test]
    async fn a_receipt_whose_batch_is_missing_or_short_is_an_error_not_an_unverifiable_receipt() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = RedbStore::open(dir.path(), true).expect("open");
        let signer = crate::receipts::Signer25519::load_or_create(dir.path()).expect("key");
        put(&store, signer.seal_batch(numbered(2)).expect("sealed")).await;
        store
            .writer
            .write(|txn| {
                let mut t = txn.open_table(RECEIPTS).map_err(backend)?;
                let r = crate::receipts::sample("far");
                let row = ReceiptRow { receipt: &r, signature: None, batch: None, in_batch: Some(InBatch { id: 1, leaf: 9 }) };
                t.insert("far", encode(&row)?.as_slice()).map_err(backend)?;
                let row = ReceiptRow { receipt: &r, signature: None, batch: None, in_batch: Some(InBatch { id: 7, leaf: 0 }) };
                t.insert("orphan", encode(&row)?.as_slice()).map_err(backend)?;
                let row = ReceiptRow::<&Receipt> { receipt: &r, signature: None, batch: None, in_batch: None };
                t.insert("unsigned", encode(&row)?.as_slice()).map_err(backend)?;
                Ok(())
            })
            .await
            .expect("insert");
        for (id, what) in [("far", "no such leaf"), ("orphan", "batch is missing"), ("unsigned", "no signature")] {
            let err = store.receipt(id).await.expect_err(id).to_string();
            assert!(err.contains(what), "{id}: {err}");
        }
    }
}
