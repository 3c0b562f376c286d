//! The rules that turn one attempt's outcome into what is stored, shared by
//! both backends (each does the reads and writes in its own transaction).

use super::model::{Attempt, AttemptEffect, Delivery, DeliveryStatus, Endpoint};

/// The delivery an attempt's outcome applies to, given the stored row of
/// its id: a pending row (its attempt count wins; a row stored without its
/// body takes the attempt's), or, for a fresh attempt of an outbox event,
/// the attempt's own delivery. `None` (nothing to record) when the row was
/// finished or cancelled meanwhile, or a retry's row is gone.
pub fn attempt_target(stored: Option<Delivery>, a: &Attempt) -> Option<Delivery> {
    match stored {
        Some(row) if row.status == DeliveryStatus::Pending => {
            if row.body.is_empty() {
                Some(Delivery { body: a.delivery.body.clone(), ..row })
            } else {
                Some(row)
            }
        }
        Some(_) => None,
        None if a.fresh => Some(a.delivery.clone()),
        None => None,
    }
}

/// What the backend writes after [`apply_attempt`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Store the delivery as pending again, due at its `next_attempt_at`; the endpoint is unchanged.
    Retry,
    /// The delivery is finished (succeeded or failed): store it among the
    /// finished ones; write the endpoint back if `endpoint_changed`.
    Finished { effect: AttemptEffect, endpoint_changed: bool },
}

impl Applied {
    /// Did this attempt disable the endpoint?
    pub fn disabled(&self) -> bool {
        matches!(self, Applied::Finished { effect: AttemptEffect::Failed { disabled: true }, .. })
    }
}

/// Apply attempt `a` to its delivery `d` and endpoint `ep`: the attempt's
/// details, then acknowledged (the failure counter resets), scheduled again,
/// or failed (counted, if the endpoint is enabled: attempts in flight when
/// it was disabled do not count, so the counter says what led to the
/// disable; at `disable_after` in a row the endpoint is disabled, and its
/// pending deliveries are cancelled by the dispatcher as they come due).
pub fn apply_attempt(d: &mut Delivery, ep: &mut Endpoint, a: &Attempt) -> Applied {
    d.attempts += 1;
    d.last_status_code = a.status_code;
    d.last_latency_ms = Some(a.latency_ms);
    d.last_error = a.error.clone();
    d.updated_at = a.at;
    let effect = match (&a.error, a.retry_at) {
        (None, _) => {
            d.status = DeliveryStatus::Succeeded;
            if ep.failure_count == 0 {
                return Applied::Finished { effect: AttemptEffect::Acknowledged, endpoint_changed: false };
            }
            ep.failure_count = 0;
            AttemptEffect::Acknowledged
        }
        (Some(_), Some(at)) => {
            d.next_attempt_at = Some(at);
            return Applied::Retry;
        }
        (Some(_), None) => {
            d.status = DeliveryStatus::Failed;
            if ep.enabled {
                ep.failure_count += 1;
            }
            AttemptEffect::Failed { disabled: ep.enabled && ep.failure_count >= a.disable_after }
        }
    };
    if effect == (AttemptEffect::Failed { disabled: true }) {
        ep.enabled = false;
        ep.disabled_at = Some(a.at);
        ep.disabled_reason =
            Some(format!("{} consecutive failed deliveries (last: {})", ep.failure_count, a.error.as_deref().unwrap_or("unknown error")));
        ep.updated_at = a.at;
    }
    Applied::Finished { effect, endpoint_changed: true }
}
