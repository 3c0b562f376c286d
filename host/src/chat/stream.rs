//! Streaming answers (docs/api.md#streaming).
//!
//! The chain runs until one model produces its first token; until then
//! nothing is sent, so an exhausted chain answers with the same JSON 429/502
//! as a non-streaming request. Then the response starts: a `metadata` frame,
//! `chunk` frames, a `usage` frame and `data: [DONE]`. After the first token
//! there is no failover: an upstream failure or a silence longer than the
//! attempt's timeout sends an `error` frame and `[DONE]`.
//!
//! Frames go through a bounded channel (16 frames): a slow client stops the
//! host reading from the upstream rather than growing a buffer, and a client
//! that goes away drops the upstream request. Whatever was generated is billed.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::{mpsc, watch};

use super::admission::Slot;
use super::attempt::{self, OpenStream};
use super::cutoff;
use super::deps::ChatDeps;
use super::format::Format;
use super::idempotency::HeldClaim;
use super::pipeline::{Latency, Prepared, Served, finish, run_chain};
use super::security::{Secured, StreamScanner, Trail};
use super::types::StreamPiece;
use super::types::{Trigger, Usage};
use crate::auth::AuthContext;
use gatehouse_store::records::{RequestOutcome, UsageDelta};

/// Frames buffered between the upstream reader and the client.
const CHANNEL_FRAMES: usize = 16;

pub async fn serve(
    deps: ChatDeps,
    ctx: AuthContext,
    mut p: Prepared,
    mut secured: Secured,
    claim: Option<HeldClaim>,
    slot: Slot,
) -> Response {
    let Served { value: open, trail } = match run_chain(&deps, &ctx, &mut p, &mut secured, Latency::FirstToken, attempt::open_stream).await
    {
        Ok(served) => served,
        Err(reply) => return finish(&deps, reply, claim).await,
    };
    let bill_user = p.bill_user.clone();
    let prompt_text: String = p.normalized.messages.iter().map(|m| m.content.as_str()).collect();
    let (tx, rx) = mpsc::channel::<Bytes>(CHANNEL_FRAMES);
    let job = Pump {
        deps: deps.clone(),
        ctx: ctx.clone(),
        trail,
        usage_owner: (bill_user, ctx.key.id.clone()),
        prompt_text,
        claim,
        prepared: p,
        secured: Arc::new(secured),
        _slot: slot,
        cut: deps.streams.open(),
    };
    #[expect(
        clippy::disallowed_methods,
        reason = "a stream's pump: it holds the request's admission slot and is registered with `cutoff::Streams`, which shutdown cuts and waits for"
    )]
    tokio::spawn(job.run(open, tx));
    let body =
        Body::from_stream(futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx)) }));
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

struct Pump {
    deps: ChatDeps,
    ctx: AuthContext,
    /// The request's events and audit records, committed with the answer.
    trail: Trail,
    usage_owner: (String, String),
    prompt_text: String,
    claim: Option<HeldClaim>,
    prepared: Prepared,
    secured: Arc<Secured>,
    /// The stream's place under `chat.max_in_flight`, freed when the pump ends.
    _slot: Slot,
    /// The shutdown cut; dropped (with its clones) once the outcome is committed.
    cut: watch::Receiver<bool>,
}

/// Sends frames and keeps a copy for idempotent replay.
struct Sink {
    tx: mpsc::Sender<Bytes>,
    record: Option<String>,
    client_gone: bool,
    /// Turns true when the shutdown grace ends (`cutoff`).
    cut: watch::Receiver<bool>,
}

impl Sink {
    async fn send(&mut self, frame: String) {
        if self.client_gone {
            return;
        }
        if let Some(r) = &mut self.record {
            r.push_str(&frame);
        }
        let frame = Bytes::from(frame);
        // A client that stops reading must not keep the stream (and its
        // outcome) from ending once the grace is over.
        let delivered = if *self.cut.borrow() {
            matches!(tokio::time::timeout(cutoff::LAST_FRAMES, self.tx.send(frame)).await, Ok(Ok(())))
        } else {
            tokio::select! {
                sent = self.tx.send(frame) => sent.is_ok(),
                _ = self.cut.wait_for(|c| *c) => false,
            }
        };
        if !delivered {
            self.client_gone = true;
        }
    }
}

/// Turns upstream pieces into chunk frames, through the output scanner when
/// the policy needs one.
struct Emitter {
    format: Format,
    rid: String,
    created: i64,
    model: String,
    /// What the model generated (billed), before restore.
    generated: String,
    /// What the client was sent.
    sent: String,
    reported: Option<Usage>,
    scanner: Option<StreamScanner>,
    /// Finish reason held back with the tail.
    held_finish: Option<String>,
    leaked: bool,
}

impl Emitter {
    async fn piece(&mut self, sink: &mut Sink, piece: &StreamPiece) {
        if let Some(u) = piece.usage {
            self.reported = Some(u);
        }
        if piece.content.is_empty() && piece.finish_reason.is_none() {
            return;
        }
        self.generated.push_str(&piece.content);
        let (text, finish) = match &mut self.scanner {
            None => (piece.content.clone(), piece.finish_reason.clone()),
            Some(scanner) => {
                let (text, leaked) = scanner.push(&piece.content);
                if leaked {
                    self.leaked = true;
                    return;
                }
                if piece.finish_reason.is_some() {
                    // The finish reason goes out with the released tail.
                    self.held_finish.clone_from(&piece.finish_reason);
                }
                (text, None)
            }
        };
        if !text.is_empty() || finish.is_some() {
            self.sent.push_str(&text);
            sink.send(self.format.chunk(&self.rid, self.created, &self.model, &text, finish.as_deref())).await;
        }
    }

    /// Release the held tail (scanned) at the end of the stream.
    async fn flush(&mut self, sink: &mut Sink) {
        let Some(scanner) = &mut self.scanner else { return };
        let (tail, leaked) = scanner.finish();
        if leaked {
            self.leaked = true;
            return;
        }
        let finish = self.held_finish.take();
        if !tail.is_empty() || finish.is_some() {
            self.sent.push_str(&tail);
            sink.send(self.format.chunk(&self.rid, self.created, &self.model, &tail, finish.as_deref())).await;
        }
    }
}

impl Pump {
    async fn run(mut self, mut open: OpenStream, tx: mpsc::Sender<Bytes>) {
        let mut cut = self.cut.clone();
        let mut sink = Sink { tx, record: self.claim.as_ref().map(|_| String::new()), client_gone: false, cut: self.cut.clone() };
        let mut em = Emitter {
            format: self.prepared.format,
            rid: self.prepared.request_id.clone(),
            created: self.prepared.created,
            model: self.prepared.meta.served_model.clone(),
            generated: String::new(),
            sent: String::new(),
            reported: None,
            scanner: self.secured.needs_output_scan().then(|| StreamScanner::new(self.secured.clone())),
            held_finish: None,
            leaked: false,
        };
        let withhold = self.secured.decision.as_ref().is_some_and(|d| d.withhold_on_canary_leak);
        if let Some(open_frame) = em.format.opening(&em.rid, em.created, &self.prepared.meta) {
            sink.send(open_frame).await;
        }

        let mut failure = None;
        let mut shutdown = false;
        for piece in std::mem::take(&mut open.first) {
            em.piece(&mut sink, &piece).await;
        }
        while !(open.finished || sink.client_gone || (em.leaked && withhold)) {
            let next = tokio::select! {
                _ = sink.tx.closed() => {
                    sink.client_gone = true;
                    break;
                }
                _ = cut.wait_for(|c| *c) => {
                    shutdown = true;
                    break;
                }
                r = open.next_piece_timed() => r,
            };
            match next {
                Ok(Some(piece)) => em.piece(&mut sink, &piece).await,
                Ok(None) => break,
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        // Dropping the upstream body here cancels the upstream request if it is still running.
        drop(open);
        if !(em.leaked && withhold) {
            em.flush(&mut sink).await;
        }
        let usage = attempt::settle_usage(em.reported, &self.prompt_text, &em.generated);
        if em.leaked {
            let (ev, au) = self.secured.canary_leak(&super::input::subject(&self.ctx, &self.prepared), withhold);
            self.trail.events.push(ev);
            self.trail.audit.push(au);
        }
        if em.leaked && withhold {
            let msg = "output withheld: the answer leaked the system context (canary token)";
            sink.send(em.format.failure("output_blocked", msg, &em.rid)).await;
        } else {
            match &failure {
                None if shutdown => {
                    let msg = "the server is shutting down: the answer stops here and what was generated is billed; \
                               send the request again (the same Idempotency-Key replays this answer)";
                    sink.send(em.format.failure(cutoff::CODE, msg, &em.rid)).await;
                }
                Some(e) => {
                    let code = if e.trigger == Trigger::Timeout { "timeout" } else { "upstream_error" };
                    let msg = format!("the model stopped mid-answer: {}", e.message);
                    sink.send(em.format.failure(code, &msg, &em.rid)).await;
                }
                None => sink.send(em.format.closing(&em.rid, em.created, &em.model, usage)).await,
            }
        }

        let idem = match (&self.claim, sink.record.take()) {
            (Some(g), Some(recorded)) => Some(g.outcome(StatusCode::OK, "text/event-stream", recorded)),
            _ => None,
        };
        let verdict = if em.leaked {
            "canary_leaked"
        } else if failure.is_some() || shutdown {
            "interrupted"
        } else {
            self.secured.verdict
        };
        let receipt = self.prepared.receipt(&self.deps, &self.ctx, &em.model, &em.sent, verdict);
        let outcome = RequestOutcome {
            receipt: Some(receipt),
            usage: Some(UsageDelta {
                user_id: self.usage_owner.0.clone(),
                key_id: self.usage_owner.1.clone(),
                group_id: self.ctx.key.group_id.clone(),
                model: em.model.clone(),
                request_id: em.rid.clone(),
                prompt_tokens: usage.prompt_tokens,
                completion_tokens: usage.completion_tokens,
            }),
            events: self.trail.events,
            audit: self.trail.audit,
            idempotency: idem,
        };
        if let Err(e) = self.deps.store.finish_request(outcome).await {
            tracing::error!(error = %e, "recording a streamed chat request failed");
        }
        drop(self.claim);
    }
}
