//! One write transaction's webhook tables, and the row-level steps the
//! domain operations are made of.

use chrono::{DateTime, Utc};
use redb::{ReadableTable, Table, WriteTransaction};

use super::{CURSORS, DELIVERIES, ENDPOINTS, FINISHED, ID_MAX, META, QUEUE};
use crate::redb::tables::OUTBOX;
use crate::redb::{backend, decode, encode};
use crate::webhooks::{Applied, Attempt, AttemptEffect, Delivery, DeliveryStatus, Endpoint, apply_attempt, attempt_target, keeps_body};
use crate::{StoreError, StoreResult};

/// The outbox cursor of every enabled endpoint (0 if it has none). A disabled
/// endpoint has none that matters: enabling it moves it to the head.
pub(super) fn enabled_cursors(
    endpoints: &impl ReadableTable<&'static str, &'static [u8]>,
    cursors: &impl ReadableTable<&'static str, u64>,
) -> StoreResult<Vec<u64>> {
    let mut out = Vec::new();
    for item in endpoints.iter().map_err(backend)? {
        let (_, v) = item.map_err(backend)?;
        let ep: Endpoint = decode(v.value())?;
        if ep.enabled {
            out.push(cursors.get(ep.id.as_str()).map_err(backend)?.map_or(0, |c| c.value()));
        }
    }
    Ok(out)
}

pub(super) fn finished_key(endpoint_id: &str) -> String {
    format!("finished:{endpoint_id}")
}

pub(super) fn millis(t: DateTime<Utc>) -> u64 {
    t.timestamp_millis().max(0) as u64
}

fn micros(t: DateTime<Utc>) -> u64 {
    t.timestamp_micros().max(0) as u64
}

fn due_ms(d: &Delivery) -> u64 {
    d.next_attempt_at.map(millis).unwrap_or(0)
}

/// The webhook tables of one write transaction, each opened once.
pub(super) struct Tx<'t> {
    pub(super) endpoints: Table<'t, &'static str, &'static [u8]>,
    pub(super) cursors: Table<'t, &'static str, u64>,
    pub(super) deliveries: Table<'t, (&'static str, &'static str), &'static [u8]>,
    pub(super) queue: Table<'t, (&'static str, u64, &'static str), ()>,
    pub(super) finished: Table<'t, (&'static str, u64, &'static str), ()>,
    pub(super) meta: Table<'t, &'static str, u64>,
}

impl<'t> Tx<'t> {
    pub(super) fn open(txn: &'t WriteTransaction) -> StoreResult<Self> {
        Ok(Tx {
            endpoints: txn.open_table(ENDPOINTS).map_err(backend)?,
            cursors: txn.open_table(CURSORS).map_err(backend)?,
            deliveries: txn.open_table(DELIVERIES).map_err(backend)?,
            queue: txn.open_table(QUEUE).map_err(backend)?,
            finished: txn.open_table(FINISHED).map_err(backend)?,
            meta: txn.open_table(META).map_err(backend)?,
        })
    }

    pub(super) fn endpoint(&self, id: &str) -> StoreResult<Option<Endpoint>> {
        self.endpoints.get(id).map_err(backend)?.map(|v| decode(v.value())).transpose()
    }

    pub(super) fn existing_endpoint(&self, id: &str) -> StoreResult<Endpoint> {
        self.endpoint(id)?.ok_or_else(|| StoreError::NotFound(format!("webhook endpoint {id}")))
    }

    pub(super) fn put_endpoint(&mut self, e: &Endpoint) -> StoreResult<()> {
        self.endpoints.insert(e.id.as_str(), encode(e)?.as_slice()).map_err(backend)?;
        Ok(())
    }

    /// Move a cursor forward (never back).
    pub(super) fn advance(&mut self, endpoint_id: &str, to: u64) -> StoreResult<()> {
        let at = self.cursors.get(endpoint_id).map_err(backend)?.map(|v| v.value()).unwrap_or(0);
        if to > at {
            self.cursors.insert(endpoint_id, to).map_err(backend)?;
        }
        Ok(())
    }

    pub(super) fn delivery(&self, endpoint_id: &str, id: &str) -> StoreResult<Option<Delivery>> {
        self.deliveries.get((endpoint_id, id)).map_err(backend)?.map(|v| decode(v.value())).transpose()
    }

    fn put_delivery(&mut self, d: &Delivery) -> StoreResult<()> {
        self.deliveries.insert((d.endpoint_id.as_str(), d.id.as_str()), encode(d)?.as_slice()).map_err(backend)?;
        Ok(())
    }

    /// Store `d` as pending and queue it at its due time.
    pub(super) fn schedule(&mut self, d: &Delivery) -> StoreResult<()> {
        self.put_delivery(d)?;
        self.queue.insert((d.endpoint_id.as_str(), due_ms(d), d.id.as_str()), ()).map_err(backend)?;
        Ok(())
    }

    pub(super) fn unqueue(&mut self, d: &Delivery) -> StoreResult<()> {
        self.queue.remove((d.endpoint_id.as_str(), due_ms(d), d.id.as_str())).map_err(backend)?;
        Ok(())
    }

    /// Store `d` as finished (unqueued and updated by the caller), with its
    /// body only if it was not delivered, and prune the endpoint's oldest
    /// finished deliveries beyond `keep`.
    pub(super) fn finish(&mut self, d: &mut Delivery, keep: usize) -> StoreResult<()> {
        if !keeps_body(d) {
            d.body.clear();
        }
        d.next_attempt_at = None;
        self.put_delivery(d)?;
        let ep = d.endpoint_id.as_str();
        self.finished.insert((ep, micros(d.updated_at), d.id.as_str()), ()).map_err(backend)?;
        let key = finished_key(ep);
        let mut count = self.meta.get(key.as_str()).map_err(backend)?.map(|v| v.value()).unwrap_or(0) + 1;
        if count as usize > keep {
            let excess = count as usize - keep;
            let mut old = Vec::with_capacity(excess);
            for item in self.finished.range((ep, 0u64, "")..=(ep, u64::MAX, ID_MAX)).map_err(backend)?.take(excess) {
                let (k, _) = item.map_err(backend)?;
                let (_, at, id) = k.value();
                old.push((at, id.to_owned()));
            }
            for (at, id) in &old {
                self.finished.remove((ep, *at, id.as_str())).map_err(backend)?;
                self.deliveries.remove((ep, id.as_str())).map_err(backend)?;
            }
            count -= old.len() as u64;
        }
        self.meta.insert(key.as_str(), count).map_err(backend)?;
        Ok(())
    }

    /// Take finished delivery `d` (as stored) out of the endpoint's history,
    /// before it is scheduled again.
    pub(super) fn unfinish(&mut self, d: &Delivery) -> StoreResult<()> {
        let ep = d.endpoint_id.as_str();
        if self.finished.remove((ep, micros(d.updated_at), d.id.as_str())).map_err(backend)?.is_some() {
            let key = finished_key(ep);
            let count = self.meta.get(key.as_str()).map_err(backend)?.map(|v| v.value()).unwrap_or(0);
            self.meta.insert(key.as_str(), count.saturating_sub(1)).map_err(backend)?;
        }
        Ok(())
    }

    /// Apply one attempt's outcome; the endpoint it disabled, if any.
    pub(super) fn record(&mut self, a: &Attempt) -> StoreResult<(AttemptEffect, bool)> {
        let given = &a.delivery;
        let stored = self.delivery(&given.endpoint_id, &given.id)?;
        if let Some(row) = stored.as_ref().filter(|r| r.status == DeliveryStatus::Pending) {
            self.unqueue(row)?;
        }
        let Some(mut d) = attempt_target(stored, a) else {
            return Ok((AttemptEffect::Gone, false));
        };
        let Some(mut ep) = self.endpoint(&d.endpoint_id)? else {
            return Ok((AttemptEffect::Gone, false));
        };
        let applied = apply_attempt(&mut d, &mut ep, a);
        let disabled = applied.disabled();
        match applied {
            Applied::Retry => {
                self.schedule(&d)?;
                Ok((AttemptEffect::Retry, false))
            }
            Applied::Finished { effect, endpoint_changed } => {
                self.finish(&mut d, a.keep)?;
                if endpoint_changed {
                    self.put_endpoint(&ep)?;
                }
                Ok((effect, disabled))
            }
        }
    }
}

/// The last outbox sequence number, inside `txn`.
pub(super) fn outbox_head(txn: &WriteTransaction) -> StoreResult<u64> {
    let t = txn.open_table(OUTBOX).map_err(backend)?;
    Ok(t.last().map_err(backend)?.map(|(k, _)| k.value()).unwrap_or(0))
}
