//! Admission control for the chat routes (load shedding).
//!
//! At most `chat.max_in_flight` chat requests are served at once; a stream
//! counts until its pump has committed the outcome. One more is refused at
//! once, right after authentication and before its body is read (the intake,
//! `api::intake`, asks [`admit`]), with 503 `Server busy` and `Retry-After: 1`
//! in the route's error format. A refused request is not counted by the rate
//! limiter, claims no idempotency key and writes nothing, so it costs the
//! server a few microseconds and the client can retry it unchanged.
//!
//! Without it, a server offered more than its cores can serve queues work
//! without bound: every queued request holds its connection, body and task,
//! memory grows with the backlog and every answer waits behind it. Shedding
//! keeps the requests it admits at the latency it can serve them in.
//!
//! The limit is read from the live config at each request, so a reload
//! changes it at once (requests above a lowered limit finish normally).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};

use crate::api::error::{ChatError, ErrorFormat};
use crate::app::AppState;

/// Seconds a refused client is asked to wait (`Retry-After`).
pub const RETRY_AFTER_SECS: u64 = 1;

/// The routes admission applies to.
pub fn is_chat_route(path: &str) -> bool {
    path == "/chat/completions" || path == "/api/external/v1/chat/completions"
}

/// The count of chat requests being served.
#[derive(Debug, Default)]
pub struct Admission {
    in_flight: AtomicUsize,
}

impl Admission {
    /// A slot if fewer than `max` requests hold one; `None` when full.
    pub fn enter(self: &Arc<Self>, max: usize) -> Option<Slot> {
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        if before >= max {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Slot { _held: Arc::new(Held { gate: Arc::clone(self) }) })
    }

    /// Requests holding a slot now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }
}

/// One admitted chat request's place, freed when its last holder drops it:
/// the end of a JSON request, or a stream's pump when it finishes. (Cloneable
/// only because request extensions must be; the handler takes the one copy.)
#[derive(Debug, Clone)]
pub struct Slot {
    _held: Arc<Held>,
}

#[derive(Debug)]
struct Held {
    gate: Arc<Admission>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.gate.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// For the intake: a chat request gets its slot (put in the request's
/// extensions for [`Admitted`]) or [`Busy`]; other routes pass.
pub fn admit(app: &AppState, path: &str) -> Result<Option<Slot>, Busy> {
    if !is_chat_route(path) {
        return Ok(None);
    }
    let max = app.config().chat.max_in_flight;
    match app.admission.enter(max) {
        Some(slot) => Ok(Some(slot)),
        None => {
            crate::metrics::get().chat_shed.inc();
            tracing::debug!(max, "chat request refused: the server is at chat.max_in_flight");
            Err(Busy { format: ErrorFormat::for_path(path), max })
        }
    }
}

/// The refusal: 503 with `Retry-After` in the route's format.
#[derive(Debug)]
pub struct Busy {
    format: ErrorFormat,
    max: usize,
}

impl IntoResponse for Busy {
    fn into_response(self) -> Response {
        let message = format!("the gateway is serving its limit of {} chat requests at once; retry after {RETRY_AFTER_SECS} s", self.max);
        self.format.busy(&message, RETRY_AFTER_SECS)
    }
}

/// Extractor: the slot the intake took for this request.
pub struct Admitted(pub Slot);

impl<S: Send + Sync> FromRequestParts<S> for Admitted {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        match parts.extensions.remove::<Slot>() {
            Some(slot) => Ok(Admitted(slot)),
            None => {
                tracing::error!(path = parts.uri.path(), "a chat handler ran without an admission slot (is the route in `is_chat_route`?)");
                Err(ChatError::internal().into_response())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_and_freed() {
        let gate = Arc::new(Admission::default());
        let a = gate.enter(2).expect("first of two");
        let b = gate.enter(2).expect("second of two");
        assert!(gate.enter(2).is_none(), "a third over a limit of two is refused");
        assert_eq!(gate.in_flight(), 2, "a refusal leaves the count as it was");
        drop(a);
        let c = gate.enter(2).expect("a freed slot is reused");
        drop(b);
        drop(c);
        assert_eq!(gate.in_flight(), 0);
    }

    #[test]
    fn a_lowered_limit_refuses_until_enough_slots_are_freed() {
        let gate = Arc::new(Admission::default());
        let held: Vec<Slot> = (0..3).map(|_| gate.enter(3).expect("under the limit")).collect();
        assert!(gate.enter(1).is_none());
        drop(held);
        assert!(gate.enter(1).is_some());
    }

    #[test]
    fn concurrent_entries_never_exceed_the_limit() {
        let gate = Arc::new(Admission::default());
        // Holders are counted apart from the gate: its own count includes a
        // refused entrant's brief increment.
        let holders = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (gate, holders, peak) = (Arc::clone(&gate), Arc::clone(&holders), Arc::clone(&peak));
                std::thread::spawn(move || {
                    for _ in 0..2_000 {
                        if let Some(slot) = gate.enter(3) {
                            let now = holders.fetch_add(1, Ordering::AcqRel) + 1;
                            peak.fetch_max(now, Ordering::AcqRel);
                            holders.fetch_sub(1, Ordering::AcqRel);
                            drop(slot);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("no thread panics");
        }
        assert!(peak.load(Ordering::Acquire) <= 3, "peak {} over the limit", peak.load(Ordering::Acquire));
        assert_eq!(gate.in_flight(), 0);
    }
}
