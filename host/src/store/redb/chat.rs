//! redb side of the chat path: usage totals, quota counters, idempotency
//! records and the outbox.

use chrono::Utc;
use redb::{ReadableDatabase, ReadableTable, WriteTransaction};

use super::tables::{IDEMPOTENCY, OUTBOX, QUOTA, RECEIPTS, USAGE};
use super::{audit, backend, decode, encode};
use crate::store::model::AuditEntry;
use crate::store::records::{Claim, IdempotencyRecord, IdempotencyState, OutboxEvent, RequestOutcome, UsageTotals};
use crate::store::{StoreResult, UsageRows};

/// Add the tokens to each row of `keys` (`user/<id>`, `key/<id>`), with the table opened once.
pub fn add_usage(txn: &WriteTransaction, keys: &[&str], prompt: u64, completion: u64) -> StoreResult<()> {
    let mut t = txn.open_table(USAGE).map_err(backend)?;
    for key in keys {
        let mut totals: UsageTotals = match t.get(*key).map_err(backend)? {
            Some(v) => decode(v.value())?,
            None => UsageTotals::default(),
        };
        totals.add(prompt, completion);
        t.insert(*key, encode(&totals)?.as_slice()).map_err(backend)?;
    }
    Ok(())
}

pub fn push_events(txn: &WriteTransaction, events: &[OutboxEvent]) -> StoreResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let mut t = txn.open_table(OUTBOX).map_err(backend)?;
    let first = t.last().map_err(backend)?.map_or(1, |(k, _)| k.value() + 1);
    for (seq, ev) in (first..).zip(events) {
        t.insert(seq, encode(ev)?.as_slice()).map_err(backend)?;
    }
    Ok(())
}

pub fn finish(txn: &WriteTransaction, o: &RequestOutcome) -> StoreResult<()> {
    if let Some((scope, record)) = &o.idempotency {
        let mut t = txn.open_table(IDEMPOTENCY).map_err(backend)?;
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
        let (user, key) = (format!("user/{}", u.user_id), format!("key/{}", u.key_id));
        add_usage(txn, &[&user, &key], u.prompt_tokens, u.completion_tokens)?;
    }
    push_events(txn, &o.events)?;
    audit::append(txn, &o.audit)
}

pub fn receipt(db: &redb::Database, bundle_id: &str) -> StoreResult<Option<crate::receipts::SignedReceipt>> {
    let txn = db.begin_read().map_err(backend)?;
    let t = txn.open_table(RECEIPTS).map_err(backend)?;
    let v = t.get(bundle_id).map_err(backend)?;
    v.map(|v| decode(v.value())).transpose()
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
