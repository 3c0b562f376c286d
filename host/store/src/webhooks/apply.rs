//! The rules that turn one attempt's outcome into what is stored, shared by
//! both backends (each does the reads and writes in its own transaction).

use chrono::{DateTime, Utc};

use super::model::{Attempt, AttemptEffect, Delivery, DeliveryStatus, Endpoint};
use crate::{StoreError, StoreResult};

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

/// Does a finished delivery keep its body? Only one that was not delivered:
/// an administrator may send it again; a success's body is never needed.
pub fn keeps_body(d: &Delivery) -> bool {
    matches!(d.status, DeliveryStatus::Failed | DeliveryStatus::Cancelled)
}

/// Turn a finished, undelivered delivery back into a pending one due at
/// `due`, for a manual retry: the same id and body (receivers deduplicate on
/// the id), attempts counted afresh, `retries` one more. `Conflict` when it
/// is pending (a retry would race the attempts it has left), succeeded
/// (nothing to redo), or finished without a body (stored before bodies were
/// kept, so there is nothing to send). The endpoint's checks are the caller's.
pub fn requeue(d: &mut Delivery, due: DateTime<Utc>, now: DateTime<Utc>) -> StoreResult<()> {
    let state = match d.status {
        DeliveryStatus::Pending => Some("is still pending (its attempts are not used up)"),
        DeliveryStatus::Succeeded => Some("has already succeeded"),
        DeliveryStatus::Failed | DeliveryStatus::Cancelled => None,
    };
    if let Some(state) = state {
        return Err(StoreError::Conflict(format!("delivery {} {state}; only a failed or cancelled delivery can be retried", d.id)));
    }
    if d.body.is_empty() {
        return Err(StoreError::Conflict(format!("delivery {} finished before bodies were kept; it cannot be sent again", d.id)));
    }
    d.status = DeliveryStatus::Pending;
    d.attempts = 0;
    d.retries += 1;
    d.next_attempt_at = Some(due);
    d.updated_at = now;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::OutboxEvent;
    use chrono::Utc;

    fn endpoint(failures: u32, enabled: bool) -> Endpoint {
        let now = Utc::now();
        Endpoint {
            id: "wh_1".into(),
            url: "https://example.com/hook".into(),
            description: String::new(),
            events: vec!["*".into()],
            enabled,
            failure_count: failures,
            disabled_reason: None,
            disabled_at: None,
            created_at: now,
            updated_at: now,
        }
    }

    fn attempt(error: Option<&str>, retry: bool) -> Attempt {
        let now = Utc::now();
        let event = OutboxEvent::new("api:limit_reached", serde_json::json!({}));
        Attempt {
            delivery: Delivery::new("wh_1", &event, now, now).expect("delivery"),
            fresh: true,
            at: now,
            status_code: error.is_none().then_some(200),
            latency_ms: 5,
            error: error.map(str::to_owned),
            retry_at: retry.then(|| now + chrono::Duration::seconds(10)),
            disable_after: 3,
            keep: 10,
            disable_audit: crate::audit::Audit::new("webhook", "system", "disabled").build(),
        }
    }

    #[test]
    fn an_acknowledgement_resets_the_failure_count_and_writes_the_endpoint_only_then() {
        let a = attempt(None, false);
        let (mut d, mut ep) = (a.delivery.clone(), endpoint(0, true));
        assert_eq!(apply_attempt(&mut d, &mut ep, &a), Applied::Finished { effect: AttemptEffect::Acknowledged, endpoint_changed: false });
        assert_eq!((d.status, d.attempts, d.last_status_code), (DeliveryStatus::Succeeded, 1, Some(200)));
        let mut ep = endpoint(2, true);
        assert_eq!(apply_attempt(&mut d, &mut ep, &a), Applied::Finished { effect: AttemptEffect::Acknowledged, endpoint_changed: true });
        assert_eq!(ep.failure_count, 0);
    }

    #[test]
    fn a_failure_with_attempts_left_is_scheduled_and_the_last_one_counts_towards_disabling() {
        let a = attempt(Some("HTTP 500"), true);
        let (mut d, mut ep) = (a.delivery.clone(), endpoint(2, true));
        assert_eq!(apply_attempt(&mut d, &mut ep, &a), Applied::Retry);
        assert_eq!((d.status, d.next_attempt_at, ep.failure_count), (DeliveryStatus::Pending, a.retry_at, 2));
        let last = attempt(Some("HTTP 500"), false);
        let applied = apply_attempt(&mut d, &mut ep, &last);
        assert!(applied.disabled(), "the third failed delivery in a row disables");
        assert!(!ep.enabled && ep.disabled_reason.as_deref().is_some_and(|r| r.contains("3 consecutive") && r.contains("HTTP 500")));
        // An attempt in flight when the endpoint was disabled does not count.
        let mut ep = endpoint(3, false);
        let applied = apply_attempt(&mut d, &mut ep, &last);
        assert_eq!(applied, Applied::Finished { effect: AttemptEffect::Failed { disabled: false }, endpoint_changed: true });
        assert_eq!(ep.failure_count, 3);
    }

    #[test]
    fn the_stored_row_wins_over_a_fresh_attempt_and_a_finished_one_takes_nothing() {
        let a = attempt(None, false);
        assert_eq!(attempt_target(None, &a), Some(a.delivery.clone()), "a fresh attempt without a row");
        let stored = Delivery { attempts: 4, body: String::new(), ..a.delivery.clone() };
        let target = attempt_target(Some(stored), &a).expect("pending row");
        assert_eq!((target.attempts, target.body.as_str()), (4, a.delivery.body.as_str()), "the row's count, the attempt's body");
        let finished = Delivery { status: DeliveryStatus::Cancelled, ..a.delivery.clone() };
        assert_eq!(attempt_target(Some(finished), &a), None);
        assert_eq!(attempt_target(None, &Attempt { fresh: false, ..a }), None, "a retry whose row is gone");
    }

    #[test]
    fn only_an_undelivered_delivery_with_its_body_is_requeued_with_attempts_afresh() {
        let a = attempt(Some("HTTP 500"), false);
        let now = Utc::now();
        let mut failed = Delivery { status: DeliveryStatus::Failed, attempts: 3, next_attempt_at: None, ..a.delivery.clone() };
        requeue(&mut failed, now, now).expect("failed");
        assert_eq!((failed.status, failed.attempts, failed.retries, failed.next_attempt_at), (DeliveryStatus::Pending, 0, 1, Some(now)));
        assert_eq!((failed.id.as_str(), failed.body.as_str()), (a.delivery.id.as_str(), a.delivery.body.as_str()));
        let mut cancelled = Delivery { status: DeliveryStatus::Cancelled, ..a.delivery.clone() };
        requeue(&mut cancelled, now, now).expect("cancelled");
        for status in [DeliveryStatus::Pending, DeliveryStatus::Succeeded] {
            let mut d = Delivery { status, ..a.delivery.clone() };
            assert!(matches!(requeue(&mut d, now, now), Err(StoreError::Conflict(_))), "{status:?}");
            assert_eq!(d.status, status, "unchanged");
        }
        let mut bodiless = Delivery { status: DeliveryStatus::Failed, body: String::new(), ..a.delivery.clone() };
        assert!(matches!(requeue(&mut bodiless, now, now), Err(StoreError::Conflict(m)) if m.contains("before bodies were kept")));
    }
}
