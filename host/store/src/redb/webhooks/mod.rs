//! The redb implementation of [`WebhookStore`]: its tables live in the
//! store's file and every write goes through the store's group commit, so an
//! endpoint change and its audit record are one commit.
//!
//! redb tables (values are JSON unless noted):
//! * `webhook_endpoints`: endpoint id → [`Endpoint`]
//! * `webhook_secrets`: endpoint id → `whsec_…` (its own table: listings never read it)
//! * `webhook_cursors`: endpoint id → outbox sequence number (u64)
//! * `webhook_delivery_rows`: (endpoint id, delivery id) → [`Delivery`] — pending, failed and cancelled ones with their body
//! * `webhook_queue`: (endpoint id, due ms, delivery id) → () — pending deliveries by due time
//! * `webhook_finished`: (endpoint id, finished µs, delivery id) → () — the history, oldest pruned first
//! * `webhook_meta`: `finished:<endpoint id>` → number of finished deliveries kept (u64)

#[cfg(test)]
mod tests;
mod tx;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};

use super::tables::OUTBOX;
use super::{RedbStore, audit, backend, decode};
use crate::model::AuditEntry;
use crate::records::OutboxEvent;
use crate::webhooks::{
    Attempt, AttemptEffect, Delivery, DeliveryStatus, Due, Endpoint, EndpointPatch, StoredSecret, WebhookStore, requeue,
};
use crate::{StoreError, StoreResult};
use tx::{Tx, enabled_cursors, finished_key, millis, outbox_head};

pub(super) const ENDPOINTS: TableDefinition<&str, &[u8]> = TableDefinition::new("webhook_endpoints");
pub(super) const SECRETS: TableDefinition<&str, &str> = TableDefinition::new("webhook_secrets");
pub(super) const CURSORS: TableDefinition<&str, u64> = TableDefinition::new("webhook_cursors");
pub(super) const DELIVERIES: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("webhook_delivery_rows");
pub(super) const QUEUE: TableDefinition<(&str, u64, &str), ()> = TableDefinition::new("webhook_queue");
pub(super) const FINISHED: TableDefinition<(&str, u64, &str), ()> = TableDefinition::new("webhook_finished");
pub(super) const META: TableDefinition<&str, u64> = TableDefinition::new("webhook_meta");

/// Above every delivery id, for range ends.
pub(super) const ID_MAX: &str = "\u{10ffff}";

impl RedbStore {
    fn wh_read<T>(&self, f: impl FnOnce(&redb::ReadTransaction) -> StoreResult<T>) -> StoreResult<T> {
        let txn = self.database()?.begin_read().map_err(backend)?;
        f(&txn)
    }
}

#[async_trait]
impl WebhookStore for RedbStore {
    async fn prepare_webhooks(&self) -> StoreResult<()> {
        self.writer()
            .write(|txn| {
                // Opening a table in a write transaction creates it.
                Tx::open(txn)?;
                txn.open_table(SECRETS).map_err(backend)?;
                Ok(())
            })
            .await
    }

    async fn list_endpoints(&self) -> StoreResult<Vec<Endpoint>> {
        self.wh_read(|txn| {
            let t = txn.open_table(ENDPOINTS).map_err(backend)?;
            let mut out = Vec::new();
            for item in t.iter().map_err(backend)? {
                let (_, v) = item.map_err(backend)?;
                out.push(decode(v.value())?);
            }
            Ok(out)
        })
    }

    async fn get_endpoint(&self, id: &str) -> StoreResult<Option<Endpoint>> {
        self.wh_read(|txn| {
            let t = txn.open_table(ENDPOINTS).map_err(backend)?;
            let v = t.get(id).map_err(backend)?;
            v.map(|v| decode(v.value())).transpose()
        })
    }

    async fn endpoint_secret(&self, id: &str) -> StoreResult<Option<StoredSecret>> {
        self.wh_read(|txn| {
            let t = txn.open_table(SECRETS).map_err(backend)?;
            let v = t.get(id).map_err(backend)?;
            Ok(v.map(|v| StoredSecret::new(v.value().to_owned())))
        })
    }

    async fn create_endpoint(&self, endpoint: Endpoint, secret: StoredSecret, audit_entry: AuditEntry) -> StoreResult<Endpoint> {
        self.writer()
            .write(move |txn| {
                let head = outbox_head(txn)?;
                let mut tx = Tx::open(txn)?;
                if tx.endpoint(&endpoint.id)?.is_some() {
                    return Err(StoreError::Conflict(format!("webhook endpoint {} already exists", endpoint.id)));
                }
                tx.put_endpoint(&endpoint)?;
                tx.cursors.insert(endpoint.id.as_str(), head).map_err(backend)?;
                drop(tx);
                txn.open_table(SECRETS).map_err(backend)?.insert(endpoint.id.as_str(), secret.expose()).map_err(backend)?;
                audit::append(txn, std::slice::from_ref(&audit_entry))?;
                Ok(endpoint.clone())
            })
            .await
    }

    async fn update_endpoint(&self, id: &str, patch: EndpointPatch, audit_entry: AuditEntry) -> StoreResult<Endpoint> {
        let id = id.to_owned();
        self.writer()
            .write(move |txn| {
                let head = outbox_head(txn)?;
                let mut tx = Tx::open(txn)?;
                let mut ep = tx.existing_endpoint(&id)?;
                let now = Utc::now();
                if let Some(url) = &patch.url {
                    ep.url = url.clone();
                }
                if let Some(d) = &patch.description {
                    ep.description = d.clone();
                }
                if let Some(ev) = &patch.events {
                    ep.events = ev.clone();
                }
                match patch.enabled {
                    Some(true) if !ep.enabled => {
                        ep.enabled = true;
                        ep.failure_count = 0;
                        ep.disabled_reason = None;
                        ep.disabled_at = None;
                        tx.advance(&id, head)?;
                    }
                    Some(false) if ep.enabled => {
                        ep.enabled = false;
                        ep.disabled_reason = Some("disabled by an administrator".into());
                        ep.disabled_at = Some(now);
                    }
                    _ => {}
                }
                ep.updated_at = now;
                tx.put_endpoint(&ep)?;
                drop(tx);
                audit::append(txn, std::slice::from_ref(&audit_entry))?;
                Ok(ep)
            })
            .await
    }

    async fn rotate_secret(&self, id: &str, secret: StoredSecret, audit_entry: AuditEntry) -> StoreResult<Endpoint> {
        let id = id.to_owned();
        self.writer()
            .write(move |txn| {
                let mut tx = Tx::open(txn)?;
                let mut ep = tx.existing_endpoint(&id)?;
                ep.updated_at = Utc::now();
                tx.put_endpoint(&ep)?;
                drop(tx);
                txn.open_table(SECRETS).map_err(backend)?.insert(id.as_str(), secret.expose()).map_err(backend)?;
                audit::append(txn, std::slice::from_ref(&audit_entry))?;
                Ok(ep)
            })
            .await
    }

    async fn delete_endpoint(&self, id: &str, audit_entry: AuditEntry) -> StoreResult<()> {
        let id = id.to_owned();
        self.writer()
            .write(move |txn| {
                let mut tx = Tx::open(txn)?;
                let ep = id.as_str();
                tx.existing_endpoint(ep)?;
                tx.endpoints.remove(ep).map_err(backend)?;
                tx.cursors.remove(ep).map_err(backend)?;
                tx.meta.remove(finished_key(ep).as_str()).map_err(backend)?;
                tx.deliveries.retain_in((ep, "")..(ep, ID_MAX), |_, _| false).map_err(backend)?;
                tx.finished.retain_in((ep, 0u64, "")..=(ep, u64::MAX, ID_MAX), |_, _| false).map_err(backend)?;
                tx.queue.retain_in((ep, 0u64, "")..=(ep, u64::MAX, ID_MAX), |_, _| false).map_err(backend)?;
                drop(tx);
                txn.open_table(SECRETS).map_err(backend)?.remove(ep).map_err(backend)?;
                audit::append(txn, std::slice::from_ref(&audit_entry))
            })
            .await
    }

    async fn queue_delivery(&self, delivery: Delivery, audit_entry: AuditEntry) -> StoreResult<()> {
        self.writer()
            .write(move |txn| {
                let mut tx = Tx::open(txn)?;
                let ep = tx.existing_endpoint(&delivery.endpoint_id)?;
                if !ep.enabled {
                    return Err(StoreError::Conflict(format!("webhook endpoint {} is disabled; enable it first", ep.id)));
                }
                tx.schedule(&delivery)?;
                drop(tx);
                audit::append(txn, std::slice::from_ref(&audit_entry))
            })
            .await
    }

    async fn requeue_delivery(
        &self,
        endpoint_id: &str,
        delivery_id: &str,
        due: DateTime<Utc>,
        audit_entry: AuditEntry,
    ) -> StoreResult<Delivery> {
        let (ep_id, id) = (endpoint_id.to_owned(), delivery_id.to_owned());
        self.writer()
            .write(move |txn| {
                let mut tx = Tx::open(txn)?;
                let ep = tx.existing_endpoint(&ep_id)?;
                let stored =
                    tx.delivery(&ep_id, &id)?.ok_or_else(|| StoreError::NotFound(format!("delivery {id} of webhook endpoint {ep_id}")))?;
                let mut d = stored.clone();
                requeue(&mut d, due, Utc::now())?;
                if !ep.enabled {
                    return Err(StoreError::Conflict(format!("webhook endpoint {} is disabled; enable it first", ep.id)));
                }
                tx.unfinish(&stored)?;
                tx.schedule(&d)?;
                drop(tx);
                audit::append(txn, std::slice::from_ref(&audit_entry))?;
                d.body.clear();
                Ok(d)
            })
            .await
    }

    async fn recent_deliveries(&self, endpoint_id: &str, limit: usize) -> StoreResult<Vec<Delivery>> {
        self.wh_read(|txn| {
            let rows = txn.open_table(DELIVERIES).map_err(backend)?;
            let queue = txn.open_table(QUEUE).map_err(backend)?;
            let finished = txn.open_table(FINISHED).map_err(backend)?;
            let mut ids = Vec::new();
            for item in queue.range((endpoint_id, 0u64, "")..=(endpoint_id, u64::MAX, ID_MAX)).map_err(backend)?.take(limit) {
                ids.push(item.map_err(backend)?.0.value().2.to_owned());
            }
            for item in finished.range((endpoint_id, 0u64, "")..=(endpoint_id, u64::MAX, ID_MAX)).map_err(backend)?.rev().take(limit) {
                ids.push(item.map_err(backend)?.0.value().2.to_owned());
            }
            let mut out: Vec<Delivery> = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(v) = rows.get((endpoint_id, id.as_str())).map_err(backend)? {
                    let mut d: Delivery = decode(v.value())?;
                    d.body.clear();
                    out.push(d);
                }
            }
            out.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| b.id.cmp(&a.id)));
            out.truncate(limit);
            Ok(out)
        })
    }

    async fn queue_depth(&self) -> StoreResult<u64> {
        self.wh_read(|txn| {
            let head = txn.open_table(OUTBOX).map_err(backend)?.last().map_err(backend)?.map(|(k, _)| k.value()).unwrap_or(0);
            let cursors = enabled_cursors(&txn.open_table(ENDPOINTS).map_err(backend)?, &txn.open_table(CURSORS).map_err(backend)?)?;
            let queued = txn.open_table(QUEUE).map_err(backend)?.len().map_err(backend)?;
            Ok(queued + cursors.iter().map(|c| head.saturating_sub(*c)).sum::<u64>())
        })
    }

    async fn endpoint_cursor(&self, endpoint_id: &str) -> StoreResult<u64> {
        self.wh_read(|txn| {
            let t = txn.open_table(CURSORS).map_err(backend)?;
            Ok(t.get(endpoint_id).map_err(backend)?.map(|v| v.value()).unwrap_or(0))
        })
    }

    async fn due_deliveries(&self, endpoint_id: &str, now: DateTime<Utc>, limit: usize) -> StoreResult<Due> {
        self.wh_read(|txn| {
            let q = txn.open_table(QUEUE).map_err(backend)?;
            let rows = txn.open_table(DELIVERIES).map_err(backend)?;
            let now_ms = millis(now);
            let mut out = Due::default();
            for item in q.range((endpoint_id, 0u64, "")..=(endpoint_id, u64::MAX, ID_MAX)).map_err(backend)? {
                let (k, _) = item.map_err(backend)?;
                let (_, due, id) = k.value();
                if due > now_ms {
                    out.next_due = DateTime::from_timestamp_millis(due as i64);
                    break;
                }
                if out.due.len() == limit {
                    // More are due; the caller asks again when a slot frees.
                    out.next_due = Some(now);
                    break;
                }
                if let Some(v) = rows.get((endpoint_id, id)).map_err(backend)? {
                    out.due.push(decode(v.value())?);
                }
            }
            Ok(out)
        })
    }

    async fn endpoints_with_pending(&self) -> StoreResult<Vec<String>> {
        self.wh_read(|txn| {
            let q = txn.open_table(QUEUE).map_err(backend)?;
            let mut out: Vec<String> = Vec::new();
            let mut next = q.first().map_err(backend)?.map(|(k, _)| k.value().0.to_owned());
            // Skip from one endpoint to the next rather than reading every entry.
            while let Some(ep) = next {
                let after = (ep.as_str(), u64::MAX, ID_MAX);
                next = match q.range(after..).map_err(backend)?.next() {
                    Some(item) => {
                        let (k, _) = item.map_err(backend)?;
                        let e = k.value().0.to_owned();
                        (e != ep).then_some(e)
                    }
                    None => None,
                };
                out.push(ep);
            }
            Ok(out)
        })
    }

    async fn record(&self, attempts: Vec<Attempt>, cursors: Vec<(String, u64)>) -> StoreResult<Vec<AttemptEffect>> {
        if attempts.is_empty() && cursors.is_empty() {
            return Ok(Vec::new());
        }
        self.writer()
            .write(move |txn| {
                let mut tx = Tx::open(txn)?;
                let mut effects = Vec::with_capacity(attempts.len());
                let mut audits = Vec::new();
                for a in &attempts {
                    let (effect, disabled) = tx.record(a)?;
                    if disabled {
                        audits.push(a.disable_audit.clone());
                    }
                    effects.push(effect);
                }
                for (ep, to) in &cursors {
                    // A deleted endpoint keeps no cursor.
                    if tx.endpoints.get(ep.as_str()).map_err(backend)?.is_some() {
                        tx.advance(ep, *to)?;
                    }
                }
                drop(tx);
                audit::append(txn, &audits)?;
                Ok(effects)
            })
            .await
    }

    async fn cancel_deliveries(&self, endpoint_id: &str, ids: Vec<String>, reason: String, keep: usize) -> StoreResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let ep = endpoint_id.to_owned();
        self.writer()
            .write(move |txn| {
                let mut tx = Tx::open(txn)?;
                let now = Utc::now();
                for id in &ids {
                    let Some(mut d) = tx.delivery(&ep, id)? else {
                        continue;
                    };
                    if d.status != DeliveryStatus::Pending {
                        continue;
                    }
                    tx.unqueue(&d)?;
                    d.status = DeliveryStatus::Cancelled;
                    d.last_error = Some(reason.clone());
                    d.updated_at = now;
                    tx.finish(&mut d, keep)?;
                }
                Ok(())
            })
            .await
    }

    async fn prune_outbox(&self, created_before: i64, limit: usize) -> StoreResult<usize> {
        self.writer()
            .write(move |txn| {
                let head = outbox_head(txn)?;
                // Every enabled endpoint is past its cursor.
                let floor = {
                    let tx = Tx::open(txn)?;
                    enabled_cursors(&tx.endpoints, &tx.cursors)?.into_iter().fold(head, u64::min)
                };
                let mut outbox = txn.open_table(OUTBOX).map_err(backend)?;
                let mut gone = Vec::new();
                for item in outbox.range(..head.min(floor.saturating_add(1))).map_err(backend)?.take(limit) {
                    let (seq, v) = item.map_err(backend)?;
                    let ev: OutboxEvent = decode(v.value())?;
                    // Sequence numbers follow commit order, so creation times
                    // rise along the table (bar clock steps): stop at the first young one.
                    if ev.created >= created_before {
                        break;
                    }
                    gone.push(seq.value());
                }
                for seq in &gone {
                    outbox.remove(*seq).map_err(backend)?;
                }
                Ok(gone.len())
            })
            .await
    }
}
