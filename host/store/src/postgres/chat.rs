//! The chat path on PostgreSQL: a finished request's usage (a ledger row and
//! the totals), events, audit records, idempotency outcome and receipt in
//! one transaction; idempotency claims with leases; the outbox.

use chrono::{DateTime, Utc};
use tokio_postgres::Transaction;

use super::{PgStore, audit, backend, db_error, decode, encode};
use crate::receipts::{Receipt, Sealed, SignedBatch, SignedReceipt};
use crate::records::{Claim, IdempotencyRecord, IdempotencyState, OutboxEvent, RequestOutcome, UsageTotals};
use crate::{StoreError, StoreResult, SweepPage, UsageRows};

/// Append events to the outbox, numbered under the head row's lock (see the migration).
pub async fn push_events(txn: &Transaction<'_>, events: &[OutboxEvent]) -> StoreResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let n = events.len() as i64;
    let last: i64 =
        txn.query_one("UPDATE outbox_head SET seq = seq + $1 WHERE singleton RETURNING seq", &[&n]).await.map_err(db_error)?.get(0);
    let insert = txn.prepare("INSERT INTO outbox (seq, event_id, created, event) VALUES ($1, $2, $3, $4)").await.map_err(db_error)?;
    for (seq, ev) in (last - n + 1..).zip(events) {
        txn.execute(&insert, &[&seq, &ev.id, &ev.created, &encode(ev)?]).await.map_err(db_error)?;
    }
    Ok(())
}

/// A `receipts` row as stored: a receipt signed alone with its signature,
/// or one of a batch (its place in `receipt_batches` is in the columns).
/// `batch` is only in rows imported from a redb file written before its
/// batches had a table of their own: the receipt's path to its batch's
/// signed root, kept inline.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct ReceiptRow {
    pub(super) receipt: Receipt,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) batch: Option<crate::receipts::BatchProof>,
}

/// Store sealed receipts: a batch once, then each receipt with its place in it.
pub async fn store_sealed(txn: &Transaction<'_>, sealed: &Sealed) -> StoreResult<()> {
    let insert = "INSERT INTO receipts (bundle_id, batch_id, leaf, row) VALUES ($1, $2, $3, $4)";
    match sealed {
        Sealed::Alone(signed) => {
            let row = ReceiptRow { receipt: signed.receipt.clone(), signature: Some(signed.signature.clone()), batch: None };
            txn.execute(insert, &[&signed.receipt.bundle_id, &None::<i64>, &None::<i32>, &encode(&row)?]).await.map_err(db_error)?;
        }
        Sealed::Batch { batch, receipts } => {
            let id: i64 = txn
                .query_one("INSERT INTO receipt_batches (batch) VALUES ($1) RETURNING id", &[&encode(batch)?])
                .await
                .map_err(db_error)?
                .get(0);
            for (leaf, receipt) in (0i32..).zip(receipts) {
                let row = ReceiptRow { receipt: receipt.clone(), signature: None, batch: None };
                txn.execute(insert, &[&receipt.bundle_id, &Some(id), &Some(leaf), &encode(&row)?]).await.map_err(db_error)?;
            }
        }
    }
    Ok(())
}

async fn finish(txn: &Transaction<'_>, o: &RequestOutcome, sealed: Option<&Sealed>) -> StoreResult<()> {
    if let Some((scope, record)) = &o.idempotency {
        match record {
            Some(r) => put_idempotency(txn, scope, r).await?,
            None => {
                txn.execute("DELETE FROM idempotency WHERE scope = $1", &[scope]).await.map_err(db_error)?;
            }
        }
    }
    if let Some(u) = &o.usage {
        let (prompt, completion) = (u.prompt_tokens as i64, u.completion_tokens as i64);
        txn.execute(
            "INSERT INTO usage_ledger (at, user_id, key_id, prompt_tokens, completion_tokens, group_id, model, request_id)
             VALUES (now(), $1, $2, $3, $4, $5, $6, $7)",
            &[&u.user_id, &u.key_id, &prompt, &completion, &u.group_id, &u.model, &u.request_id],
        )
        .await
        .map_err(db_error)?;
        // One shard row of each total (see the migration); user before key, so two requests lock in one order.
        let shard = i16::from(rand::random::<u8>() % USAGE_SHARDS);
        txn.execute(
            "INSERT INTO usage_totals AS t (scope, id, shard, requests, prompt_tokens, completion_tokens)
             VALUES ('user', $1, $5, 1, $3, $4), ('key', $2, $5, 1, $3, $4)
             ON CONFLICT (scope, id, shard) DO UPDATE SET requests = t.requests + 1,
                 prompt_tokens = t.prompt_tokens + EXCLUDED.prompt_tokens,
                 completion_tokens = t.completion_tokens + EXCLUDED.completion_tokens",
            &[&u.user_id, &u.key_id, &prompt, &completion, &shard],
        )
        .await
        .map_err(db_error)?;
    }
    push_events(txn, &o.events).await?;
    if let Some(sealed) = sealed {
        store_sealed(txn, sealed).await?;
    }
    audit::append(txn, &o.audit).await
}

async fn put_idempotency(txn: &Transaction<'_>, scope: &str, r: &IdempotencyRecord) -> StoreResult<()> {
    let lease = match &r.state {
        IdempotencyState::InFlight { lease_until } => Some(*lease_until),
        IdempotencyState::Completed { .. } => None,
    };
    txn.execute(
        "INSERT INTO idempotency (scope, expires_at, lease_until, record) VALUES ($1, $2, $3, $4)
         ON CONFLICT (scope) DO UPDATE SET expires_at = EXCLUDED.expires_at, lease_until = EXCLUDED.lease_until, record = EXCLUDED.record",
        &[&scope, &r.expires_at, &lease, &encode(r)?],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Shard rows per usage total (the migration's `CHECK` allows 0 to 15).
const USAGE_SHARDS: u8 = 16;

/// A record's liveness at `$2`, in SQL: what `IdempotencyRecord::is_live` says in Rust.
const LIVE: &str = "expires_at > $2 AND (lease_until IS NULL OR lease_until > $2)";

impl PgStore {
    pub async fn finish_request(&self, mut outcome: RequestOutcome) -> StoreResult<()> {
        // One request, one transaction: its receipt is signed alone.
        let sealed = match (outcome.receipt.take(), &self.sealer) {
            (Some(r), Some(sealer)) => sealer.seal(vec![r]),
            _ => None,
        };
        let mut client = self.client().await?;
        let txn = client.transaction().await.map_err(db_error)?;
        let counts = self.counts.take();
        let result = async {
            super::quota::write_counts(&txn, &counts).await?;
            finish(&txn, &outcome, sealed.as_ref()).await?;
            txn.commit().await.map_err(db_error)
        }
        .await;
        if result.is_err() {
            self.counts.restore(counts);
        }
        result
    }

    pub async fn usage_totals(&self) -> StoreResult<(UsageRows, UsageRows)> {
        let rows = self
            .client()
            .await?
            .query(
                "SELECT scope, id, sum(requests)::bigint, sum(prompt_tokens)::bigint, sum(completion_tokens)::bigint
                 FROM usage_totals GROUP BY scope, id ORDER BY scope, id",
                &[],
            )
            .await
            .map_err(db_error)?;
        let (mut users, mut keys) = (Vec::new(), Vec::new());
        for r in rows {
            let scope: &str = r.get(0);
            let totals = UsageTotals {
                requests: r.get::<_, i64>(2) as u64,
                prompt_tokens: r.get::<_, i64>(3) as u64,
                completion_tokens: r.get::<_, i64>(4) as u64,
            };
            match scope {
                "user" => users.push((r.get(1), totals)),
                _ => keys.push((r.get(1), totals)),
            }
        }
        Ok((users, keys))
    }

    pub async fn idempotency_get(&self, scope: &str) -> StoreResult<Option<IdempotencyRecord>> {
        let row = self.client().await?.query_opt("SELECT record FROM idempotency WHERE scope = $1", &[&scope]).await.map_err(db_error)?;
        row.map(|r| decode(r.get(0))).transpose()
    }

    /// Claim a key unless a live record exists. Two hosts claiming at once:
    /// the row lock (or the insert's unique key) orders them, and the
    /// second sees the first's claim.
    pub async fn idempotency_claim(&self, scope: &str, record: IdempotencyRecord) -> StoreResult<Claim> {
        let lease = match &record.state {
            IdempotencyState::InFlight { lease_until } => Some(*lease_until),
            IdempotencyState::Completed { .. } => None,
        };
        let text = encode(&record)?;
        self.in_txn(async |txn| {
            // A live record that a sweep deletes between the two statements
            // leaves nothing to read: then the claim is tried again.
            for _ in 0..3 {
                // Insert, or take over a row that no longer binds; nothing if a live one is there.
                let claimed = txn
                    .execute(
                        "INSERT INTO idempotency AS i (scope, expires_at, lease_until, record) VALUES ($1, $3, $4, $5)
                         ON CONFLICT (scope) DO UPDATE SET expires_at = EXCLUDED.expires_at, lease_until = EXCLUDED.lease_until, record = EXCLUDED.record
                         WHERE NOT (i.expires_at > $2 AND (i.lease_until IS NULL OR i.lease_until > $2))",
                        &[&scope, &Utc::now(), &record.expires_at, &lease, &text],
                    )
                    .await
                    .map_err(db_error)?;
                if claimed == 1 {
                    return Ok(Claim::Claimed);
                }
                let row = txn.query_opt("SELECT record FROM idempotency WHERE scope = $1", &[&scope]).await.map_err(db_error)?;
                if let Some(row) = row {
                    return Ok(Claim::Existing(decode(row.get(0))?));
                }
            }
            Err(StoreError::Backend(format!("idempotency key {scope}: claimed and removed repeatedly while claiming")))
        })
        .await
    }

    pub async fn idempotency_renew(&self, scope: &str, lease_until: DateTime<Utc>) -> StoreResult<()> {
        self.in_txn(async |txn| {
            let row = txn.query_opt("SELECT record FROM idempotency WHERE scope = $1 FOR UPDATE", &[&scope]).await.map_err(db_error)?;
            if let Some(row) = row {
                let mut r: IdempotencyRecord = decode(row.get(0))?;
                if let IdempotencyState::InFlight { .. } = r.state {
                    r.state = IdempotencyState::InFlight { lease_until };
                    put_idempotency(txn, scope, &r).await?;
                }
            }
            Ok(())
        })
        .await
    }

    pub async fn idempotency_sweep(&self, after: Option<String>, limit: usize) -> StoreResult<SweepPage> {
        let limit_i = i64::try_from(limit).unwrap_or(i64::MAX);
        let after = after.unwrap_or_default();
        let now = Utc::now();
        let (scopes, removed) = self
            .in_txn(async |txn| {
                // The page of scopes, in key order; the delete re-checks liveness
                // under the row locks, so a record claimed again meanwhile is kept.
                let scopes: Vec<String> = txn
                    .query("SELECT scope FROM idempotency WHERE scope > $1 ORDER BY scope LIMIT $2", &[&after, &limit_i])
                    .await
                    .map_err(db_error)?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                let removed = txn
                    .execute(&format!("DELETE FROM idempotency WHERE scope = ANY($1) AND NOT ({LIVE})"), &[&scopes, &now])
                    .await
                    .map_err(db_error)?;
                Ok((scopes, removed))
            })
            .await?;
        let next = if scopes.len() == limit { scopes.last().cloned() } else { None };
        Ok(SweepPage { removed: removed as usize, next })
    }

    pub async fn enqueue_events(&self, events: Vec<OutboxEvent>, audit_entries: Vec<crate::model::AuditEntry>) -> StoreResult<()> {
        self.in_txn(async |txn| {
            push_events(txn, &events).await?;
            audit::append(txn, &audit_entries).await
        })
        .await
    }

    pub async fn receipt(&self, bundle_id: &str) -> StoreResult<Option<SignedReceipt>> {
        let row = self
            .client()
            .await?
            .query_opt(
                "SELECT r.row, r.leaf, b.batch FROM receipts r LEFT JOIN receipt_batches b ON b.id = r.batch_id WHERE r.bundle_id = $1",
                &[&bundle_id],
            )
            .await
            .map_err(db_error)?;
        let Some(row) = row else { return Ok(None) };
        let stored: ReceiptRow = decode(row.get(0))?;
        let corrupt = |what: &str| StoreError::Backend(format!("corrupt receipt {bundle_id}: {what}"));
        match (row.get::<_, Option<i32>>(1), row.get::<_, Option<&str>>(2), stored.signature) {
            (Some(leaf), Some(batch), _) => {
                let batch: SignedBatch = decode(batch)?;
                let leaf = usize::try_from(leaf).map_err(backend)?;
                batch.receipt_at(leaf, stored.receipt).map(Some).ok_or_else(|| corrupt("its batch has no such leaf"))
            }
            (None, _, Some(signature)) => Ok(Some(SignedReceipt { receipt: stored.receipt, signature, batch: stored.batch })),
            _ => Err(corrupt("no signature")),
        }
    }

    pub async fn outbox_after(&self, after: u64, limit: usize) -> StoreResult<Vec<(u64, OutboxEvent)>> {
        let (after, limit) = (i64::try_from(after).unwrap_or(i64::MAX), i64::try_from(limit).unwrap_or(i64::MAX));
        let rows = self
            .client()
            .await?
            .query("SELECT seq, event FROM outbox WHERE seq > $1 ORDER BY seq LIMIT $2", &[&after, &limit])
            .await
            .map_err(db_error)?;
        rows.iter().map(|r| Ok((r.get::<_, i64>(0) as u64, decode(r.get(1))?))).collect()
    }
}
