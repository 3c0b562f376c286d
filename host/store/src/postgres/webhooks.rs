//! [`WebhookStore`] on PostgreSQL: endpoints, secrets (a table of their
//! own, never read by listings), each endpoint's cursor into the outbox,
//! and deliveries (pending ones with their body; finished ones, the newest
//! `keep` per endpoint, with their body only if they were not delivered).
//!
//! Each operation is one transaction. Rows are locked in one order
//! (endpoints by id, then their deliveries), so two hosts recording attempts
//! while a third deletes an endpoint wait for each other rather than deadlock.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio_postgres::Transaction;

use super::{PgStore, audit, db_error, decode, encode};
use crate::model::AuditEntry;
use crate::webhooks::{
    Applied, Attempt, AttemptEffect, Delivery, DeliveryStatus, Due, Endpoint, EndpointPatch, StoredSecret, WebhookStore, apply_attempt,
    attempt_target, keeps_body, requeue,
};
use crate::{StoreError, StoreResult};

pub(super) fn status_str(s: DeliveryStatus) -> &'static str {
    match s {
        DeliveryStatus::Pending => "pending",
        DeliveryStatus::Succeeded => "succeeded",
        DeliveryStatus::Failed => "failed",
        DeliveryStatus::Cancelled => "cancelled",
    }
}

/// Due times compare in milliseconds, as the redb queue keys them.
fn millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

async fn outbox_head(txn: &Transaction<'_>) -> StoreResult<i64> {
    Ok(txn.query_one("SELECT seq FROM outbox_head WHERE singleton", &[]).await.map_err(db_error)?.get(0))
}

async fn endpoint_for_update(txn: &Transaction<'_>, id: &str) -> StoreResult<Endpoint> {
    let row = txn.query_opt("SELECT record FROM webhook_endpoints WHERE id = $1 FOR UPDATE", &[&id]).await.map_err(db_error)?;
    decode(row.ok_or_else(|| StoreError::NotFound(format!("webhook endpoint {id}")))?.get(0))
}

async fn put_endpoint(txn: &Transaction<'_>, e: &Endpoint) -> StoreResult<()> {
    txn.execute("UPDATE webhook_endpoints SET record = $2 WHERE id = $1", &[&e.id, &encode(e)?]).await.map_err(db_error)?;
    Ok(())
}

/// Move a cursor forward (never back).
async fn advance(txn: &Transaction<'_>, endpoint_id: &str, to: i64) -> StoreResult<()> {
    txn.execute(
        "INSERT INTO webhook_cursors (endpoint_id, seq) VALUES ($1, $2)
         ON CONFLICT (endpoint_id) DO UPDATE SET seq = GREATEST(webhook_cursors.seq, EXCLUDED.seq)",
        &[&endpoint_id, &to],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

async fn put_delivery(txn: &Transaction<'_>, d: &Delivery) -> StoreResult<()> {
    txn.execute(
        "INSERT INTO webhook_deliveries (id, endpoint_id, status, next_at, updated_at, record) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, next_at = EXCLUDED.next_at, updated_at = EXCLUDED.updated_at, record = EXCLUDED.record",
        &[&d.id, &d.endpoint_id, &status_str(d.status), &d.next_attempt_at, &d.updated_at, &encode(d)?],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Store `d` as finished, with its body only if it was not delivered, and
/// drop the endpoint's oldest finished deliveries beyond `keep`.
async fn finish(txn: &Transaction<'_>, d: &mut Delivery, keep: usize) -> StoreResult<()> {
    if !keeps_body(d) {
        d.body.clear();
    }
    d.next_attempt_at = None;
    put_delivery(txn, d).await?;
    let keep = i64::try_from(keep).unwrap_or(i64::MAX);
    txn.execute(
        "DELETE FROM webhook_deliveries WHERE id IN (
             SELECT id FROM webhook_deliveries WHERE endpoint_id = $1 AND status <> 'pending'
             ORDER BY updated_at DESC, id DESC OFFSET $2)",
        &[&d.endpoint_id, &keep],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Apply one attempt's outcome (its endpoint locked by the caller); whether it disabled the endpoint.
async fn record_one(txn: &Transaction<'_>, a: &Attempt) -> StoreResult<(AttemptEffect, bool)> {
    let given = &a.delivery;
    let row = txn
        .query_opt("SELECT record FROM webhook_deliveries WHERE id = $1 AND endpoint_id = $2 FOR UPDATE", &[&given.id, &given.endpoint_id])
        .await
        .map_err(db_error)?;
    let stored: Option<Delivery> = row.map(|r| decode(r.get(0))).transpose()?;
    let Some(mut d) = attempt_target(stored, a) else { return Ok((AttemptEffect::Gone, false)) };
    let row = txn.query_opt("SELECT record FROM webhook_endpoints WHERE id = $1", &[&d.endpoint_id]).await.map_err(db_error)?;
    let Some(row) = row else { return Ok((AttemptEffect::Gone, false)) };
    let mut ep: Endpoint = decode(row.get(0))?;
    let applied = apply_attempt(&mut d, &mut ep, a);
    let disabled = applied.disabled();
    match applied {
        Applied::Retry => {
            put_delivery(txn, &d).await?;
            Ok((AttemptEffect::Retry, false))
        }
        Applied::Finished { effect, endpoint_changed } => {
            finish(txn, &mut d, a.keep).await?;
            if endpoint_changed {
                put_endpoint(txn, &ep).await?;
            }
            Ok((effect, disabled))
        }
    }
}

#[async_trait]
impl WebhookStore for PgStore {
    async fn prepare_webhooks(&self) -> StoreResult<()> {
        // The migrations created the tables.
        Ok(())
    }

    async fn list_endpoints(&self) -> StoreResult<Vec<Endpoint>> {
        let rows = self.client().await?.query("SELECT record FROM webhook_endpoints ORDER BY id", &[]).await.map_err(db_error)?;
        rows.iter().map(|r| decode(r.get(0))).collect()
    }

    async fn get_endpoint(&self, id: &str) -> StoreResult<Option<Endpoint>> {
        let row = self.client().await?.query_opt("SELECT record FROM webhook_endpoints WHERE id = $1", &[&id]).await.map_err(db_error)?;
        row.map(|r| decode(r.get(0))).transpose()
    }

    async fn endpoint_secret(&self, id: &str) -> StoreResult<Option<StoredSecret>> {
        let row =
            self.client().await?.query_opt("SELECT secret FROM webhook_secrets WHERE endpoint_id = $1", &[&id]).await.map_err(db_error)?;
        Ok(row.map(|r| StoredSecret::new(r.get(0))))
    }

    async fn create_endpoint(&self, endpoint: Endpoint, secret: StoredSecret, audit_entry: AuditEntry) -> StoreResult<Endpoint> {
        self.in_txn(async |txn| {
            let n = txn
                .execute(
                    "INSERT INTO webhook_endpoints (id, record) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
                    &[&endpoint.id, &encode(&endpoint)?],
                )
                .await
                .map_err(db_error)?;
            if n == 0 {
                return Err(StoreError::Conflict(format!("webhook endpoint {} already exists", endpoint.id)));
            }
            let head = outbox_head(txn).await?;
            txn.execute("INSERT INTO webhook_cursors (endpoint_id, seq) VALUES ($1, $2)", &[&endpoint.id, &head])
                .await
                .map_err(db_error)?;
            txn.execute("INSERT INTO webhook_secrets (endpoint_id, secret) VALUES ($1, $2)", &[&endpoint.id, &secret.expose()])
                .await
                .map_err(db_error)?;
            audit::append(txn, std::slice::from_ref(&audit_entry)).await?;
            Ok(endpoint.clone())
        })
        .await
    }

    async fn update_endpoint(&self, id: &str, patch: EndpointPatch, audit_entry: AuditEntry) -> StoreResult<Endpoint> {
        self.in_txn(async |txn| {
            let mut ep = endpoint_for_update(txn, id).await?;
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
                    let head = outbox_head(txn).await?;
                    advance(txn, id, head).await?;
                }
                Some(false) if ep.enabled => {
                    ep.enabled = false;
                    ep.disabled_reason = Some("disabled by an administrator".into());
                    ep.disabled_at = Some(now);
                }
                _ => {}
            }
            ep.updated_at = now;
            put_endpoint(txn, &ep).await?;
            audit::append(txn, std::slice::from_ref(&audit_entry)).await?;
            Ok(ep)
        })
        .await
    }

    async fn rotate_secret(&self, id: &str, secret: StoredSecret, audit_entry: AuditEntry) -> StoreResult<Endpoint> {
        self.in_txn(async |txn| {
            let mut ep = endpoint_for_update(txn, id).await?;
            ep.updated_at = Utc::now();
            put_endpoint(txn, &ep).await?;
            txn.execute(
                "INSERT INTO webhook_secrets (endpoint_id, secret) VALUES ($1, $2) ON CONFLICT (endpoint_id) DO UPDATE SET secret = EXCLUDED.secret",
                &[&id, &secret.expose()],
            )
            .await
            .map_err(db_error)?;
            audit::append(txn, std::slice::from_ref(&audit_entry)).await?;
            Ok(ep)
        })
        .await
    }

    async fn delete_endpoint(&self, id: &str, audit_entry: AuditEntry) -> StoreResult<()> {
        self.in_txn(async |txn| {
            endpoint_for_update(txn, id).await?;
            // Secret, cursor and deliveries go with it (ON DELETE CASCADE).
            txn.execute("DELETE FROM webhook_endpoints WHERE id = $1", &[&id]).await.map_err(db_error)?;
            audit::append(txn, std::slice::from_ref(&audit_entry)).await
        })
        .await
    }

    async fn queue_delivery(&self, delivery: Delivery, audit_entry: AuditEntry) -> StoreResult<()> {
        self.in_txn(async |txn| {
            let ep = endpoint_for_update(txn, &delivery.endpoint_id).await?;
            if !ep.enabled {
                return Err(StoreError::Conflict(format!("webhook endpoint {} is disabled; enable it first", ep.id)));
            }
            put_delivery(txn, &delivery).await?;
            audit::append(txn, std::slice::from_ref(&audit_entry)).await
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
        self.in_txn(async |txn| {
            // The endpoint first, then its delivery: the lock order of `record`.
            let ep = endpoint_for_update(txn, endpoint_id).await?;
            let row = txn
                .query_opt(
                    "SELECT record FROM webhook_deliveries WHERE id = $1 AND endpoint_id = $2 FOR UPDATE",
                    &[&delivery_id, &endpoint_id],
                )
                .await
                .map_err(db_error)?
                .ok_or_else(|| StoreError::NotFound(format!("delivery {delivery_id} of webhook endpoint {endpoint_id}")))?;
            let mut d: Delivery = decode(row.get(0))?;
            requeue(&mut d, due, Utc::now())?;
            if !ep.enabled {
                return Err(StoreError::Conflict(format!("webhook endpoint {} is disabled; enable it first", ep.id)));
            }
            put_delivery(txn, &d).await?;
            audit::append(txn, std::slice::from_ref(&audit_entry)).await?;
            d.body.clear();
            Ok(d)
        })
        .await
    }

    async fn recent_deliveries(&self, endpoint_id: &str, limit: usize) -> StoreResult<Vec<Delivery>> {
        let limit_i = i64::try_from(limit).unwrap_or(i64::MAX);
        // The first `limit` pending by due time and the newest `limit` finished, as redb reads them.
        let rows = self
            .client()
            .await?
            .query(
                "(SELECT record FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'pending' ORDER BY next_at, id LIMIT $2)
                 UNION ALL
                 (SELECT record FROM webhook_deliveries WHERE endpoint_id = $1 AND status <> 'pending' ORDER BY updated_at DESC, id DESC LIMIT $2)",
                &[&endpoint_id, &limit_i],
            )
            .await
            .map_err(db_error)?;
        let mut out = rows
            .iter()
            .map(|r| {
                let mut d: Delivery = decode(r.get(0))?;
                d.body.clear();
                Ok(d)
            })
            .collect::<StoreResult<Vec<_>>>()?;
        out.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| b.id.cmp(&a.id)));
        out.truncate(limit);
        Ok(out)
    }

    async fn endpoint_cursor(&self, endpoint_id: &str) -> StoreResult<u64> {
        let row = self
            .client()
            .await?
            .query_opt("SELECT seq FROM webhook_cursors WHERE endpoint_id = $1", &[&endpoint_id])
            .await
            .map_err(db_error)?;
        Ok(row.map_or(0, |r| r.get::<_, i64>(0) as u64))
    }

    async fn due_deliveries(&self, endpoint_id: &str, now: DateTime<Utc>, limit: usize) -> StoreResult<Due> {
        let take = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
        let rows = self
            .client()
            .await?
            .query(
                "SELECT record, next_at FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'pending' ORDER BY next_at, id LIMIT $2",
                &[&endpoint_id, &take],
            )
            .await
            .map_err(db_error)?;
        let now_ms = millis(now);
        let mut out = Due::default();
        for r in rows {
            let due = r.get::<_, Option<DateTime<Utc>>>(1).map_or(0, millis);
            if due > now_ms {
                out.next_due = DateTime::from_timestamp_millis(due);
                break;
            }
            if out.due.len() == limit {
                // More are due; the caller asks again when a slot frees.
                out.next_due = Some(now);
                break;
            }
            out.due.push(decode(r.get(0))?);
        }
        Ok(out)
    }

    async fn endpoints_with_pending(&self) -> StoreResult<Vec<String>> {
        let rows = self
            .client()
            .await?
            .query("SELECT DISTINCT endpoint_id FROM webhook_deliveries WHERE status = 'pending' ORDER BY endpoint_id", &[])
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    async fn queue_depth(&self) -> StoreResult<u64> {
        let row = self
            .client()
            .await?
            .query_one(
                "SELECT
                     (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending')
                   + COALESCE((SELECT sum(GREATEST(h.seq - COALESCE(c.seq, 0), 0))::bigint
                               FROM webhook_endpoints e
                               CROSS JOIN outbox_head h
                               LEFT JOIN webhook_cursors c ON c.endpoint_id = e.id
                               WHERE e.record::json ->> 'enabled' = 'true'), 0)",
                &[],
            )
            .await
            .map_err(db_error)?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    async fn record(&self, attempts: Vec<Attempt>, cursors: Vec<(String, u64)>) -> StoreResult<Vec<AttemptEffect>> {
        if attempts.is_empty() && cursors.is_empty() {
            return Ok(Vec::new());
        }
        self.in_txn(async |txn| {
            // Lock every endpoint involved, in id order, before any delivery.
            let mut ids: Vec<&str> =
                attempts.iter().map(|a| a.delivery.endpoint_id.as_str()).chain(cursors.iter().map(|c| c.0.as_str())).collect();
            ids.sort_unstable();
            ids.dedup();
            txn.query("SELECT 1 FROM webhook_endpoints WHERE id = ANY($1) ORDER BY id FOR UPDATE", &[&ids]).await.map_err(db_error)?;
            let mut effects = Vec::with_capacity(attempts.len());
            let mut audits = Vec::new();
            for a in &attempts {
                let (effect, disabled) = record_one(txn, a).await?;
                if disabled {
                    audits.push(a.disable_audit.clone());
                }
                effects.push(effect);
            }
            for (ep, to) in &cursors {
                // A deleted endpoint keeps no cursor.
                let to = i64::try_from(*to).unwrap_or(i64::MAX);
                txn.execute("UPDATE webhook_cursors SET seq = GREATEST(seq, $2) WHERE endpoint_id = $1", &[ep, &to])
                    .await
                    .map_err(db_error)?;
            }
            audit::append(txn, &audits).await?;
            Ok(effects)
        })
        .await
    }

    async fn cancel_deliveries(&self, endpoint_id: &str, ids: Vec<String>, reason: String, keep: usize) -> StoreResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        self.in_txn(async |txn| {
            txn.query("SELECT 1 FROM webhook_endpoints WHERE id = $1 FOR UPDATE", &[&endpoint_id]).await.map_err(db_error)?;
            let rows = txn
                .query(
                    "SELECT record FROM webhook_deliveries WHERE endpoint_id = $1 AND id = ANY($2) AND status = 'pending' ORDER BY id FOR UPDATE",
                    &[&endpoint_id, &ids],
                )
                .await
                .map_err(db_error)?;
            let now = Utc::now();
            for r in rows {
                let mut d: Delivery = decode(r.get(0))?;
                d.status = DeliveryStatus::Cancelled;
                d.last_error = Some(reason.clone());
                d.updated_at = now;
                finish(txn, &mut d, keep).await?;
            }
            Ok(())
        })
        .await
    }

    async fn prune_outbox(&self, created_before: i64, limit: usize) -> StoreResult<usize> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.in_txn(async |txn| {
            // Below every enabled endpoint's cursor; the newest event stays.
            let n = txn
                .execute(
                    "DELETE FROM outbox WHERE seq IN (
                         SELECT seq FROM outbox
                         WHERE seq < (SELECT seq FROM outbox_head)
                           AND seq <= COALESCE((SELECT min(COALESCE(c.seq, 0)) FROM webhook_endpoints e
                                                LEFT JOIN webhook_cursors c ON c.endpoint_id = e.id
                                                WHERE e.record::json ->> 'enabled' = 'true'), (SELECT seq FROM outbox_head))
                           AND created < $1
                           -- Creation times rise along the outbox (bar clock steps): stop at the first young one.
                           AND seq < COALESCE((SELECT seq FROM outbox WHERE created >= $1 ORDER BY seq LIMIT 1), 9223372036854775807)
                         ORDER BY seq LIMIT $2)",
                    &[&created_before, &limit],
                )
                .await
                .map_err(db_error)?;
            Ok(n as usize)
        })
        .await
    }

    async fn lease_endpoint(&self, endpoint_id: &str, owner: &str, ttl: std::time::Duration) -> StoreResult<bool> {
        // The database's clock decides: hosts whose clocks differ agree on when a lease lapsed.
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let client = self.client().await?;
        let n = client
            .execute(
                "UPDATE webhook_cursors SET lease_owner = $2, lease_until = now() + $3 * interval '1 millisecond'
                 WHERE endpoint_id = $1 AND (lease_owner IS NULL OR lease_owner = $2 OR lease_until < now())",
                &[&endpoint_id, &owner, &(ttl_ms as f64)],
            )
            .await
            .map_err(db_error)?;
        Ok(n == 1)
    }
}
