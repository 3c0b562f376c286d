//! One attempt against one provider: build the request with the provider
//! adapter, send it through the transport, and parse the answer — whole, or
//! as a stream up to its first token.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use super::sse::{SseDecoder, SseEvent};
use super::transport::{ByteStream, Transport};
use super::types::{AttemptError, ChainEntry, Completion, HttpRequestDesc, NormalizedRequest, StreamPiece, Trigger, UpstreamTarget, Usage};

/// A provider adapter as the chat path sees it. Implemented over the plugin
/// runtime's provider components; a plugin fault is a `server_error`.
pub trait ProviderAdapter: Send + Sync {
    /// The calls of one attempt. Over plugins they share one instance (one
    /// instantiation per attempt, not per call) while the runtime has a
    /// session slot free.
    fn attempt(&self) -> Result<Box<dyn AttemptCalls>, AttemptError>;
}

/// The adapter calls of one attempt: build the request, then parse the whole
/// answer or each stream event.
pub trait AttemptCalls: Send {
    /// `model` is the model name without the provider prefix.
    fn build_request(&mut self, up: &UpstreamTarget, model: &str, req: &NormalizedRequest) -> Result<HttpRequestDesc, AttemptError>;
    fn parse_response(&mut self, up: &UpstreamTarget, status: u16, body: &str) -> Result<Completion, AttemptError>;
    fn parse_stream_event(&mut self, up: &UpstreamTarget, state: &str, event: &SseEvent) -> Result<StreamPiece, AttemptError>;
}

/// A model resolved to its provider entry and adapter.
#[derive(Clone)]
pub struct Resolved {
    pub target: UpstreamTarget,
    pub adapter: Arc<dyn ProviderAdapter>,
}

fn timed_out(what: &str, d: Duration) -> AttemptError {
    AttemptError::new(Trigger::Timeout, format!("{what} within {} ms", d.as_millis()))
}

/// Non-streaming attempt: the whole answer within `entry.timeout`.
pub async fn complete(
    transport: &Transport,
    resolved: &Resolved,
    entry: &ChainEntry,
    req: &NormalizedRequest,
) -> Result<Completion, AttemptError> {
    let mut calls = resolved.adapter.attempt()?;
    let http = calls.build_request(&resolved.target, entry.model.name(), req)?;
    let work = async {
        let resp = transport.send(http).await?;
        let body = transport.read_all(resp.body).await?;
        calls.parse_response(&resolved.target, resp.status, &body)
    };
    tokio::time::timeout(entry.timeout, work).await.map_err(|_| timed_out("no complete answer", entry.timeout))?
}

/// A stream that has produced its first token.
pub struct OpenStream {
    pub resolved: Resolved,
    /// The attempt's adapter calls: every event is parsed on them.
    calls: Box<dyn AttemptCalls>,
    body: ByteStream,
    decoder: SseDecoder,
    state: String,
    /// Events decoded but not yet parsed.
    queued: std::collections::VecDeque<SseEvent>,
    /// Pieces read before and including the first token.
    pub first: Vec<StreamPiece>,
    /// Longest silence allowed between events from now on.
    pub idle_timeout: Duration,
    pub finished: bool,
}

/// Open a streaming attempt and read until the first non-empty content delta,
/// within `entry.first_token_timeout` (from the start of the attempt).
pub async fn open_stream(
    transport: &Transport,
    resolved: &Resolved,
    entry: &ChainEntry,
    req: &NormalizedRequest,
) -> Result<OpenStream, AttemptError> {
    let mut calls = resolved.adapter.attempt()?;
    let http = calls.build_request(&resolved.target, entry.model.name(), req)?;
    let deadline = tokio::time::Instant::now() + entry.first_token_timeout;
    let resp = tokio::time::timeout_at(deadline, transport.send(http))
        .await
        .map_err(|_| timed_out("no first token", entry.first_token_timeout))??;
    if !(200..300).contains(&resp.status) {
        let body = tokio::time::timeout_at(deadline, transport.read_all(resp.body))
            .await
            .map_err(|_| timed_out("no first token", entry.first_token_timeout))??;
        return Err(match calls.parse_response(&resolved.target, resp.status, &body) {
            Err(e) => e,
            Ok(_) => AttemptError::new(Trigger::ServerError, format!("upstream answered status {} to a stream request", resp.status)),
        });
    }
    let mut open = OpenStream {
        resolved: resolved.clone(),
        calls,
        body: resp.body,
        decoder: SseDecoder::new(),
        state: String::new(),
        queued: Default::default(),
        first: Vec::new(),
        idle_timeout: entry.timeout,
        finished: false,
    };
    loop {
        let piece = tokio::time::timeout_at(deadline, open.next_piece())
            .await
            .map_err(|_| timed_out("no first token", entry.first_token_timeout))??;
        let Some(piece) = piece else {
            return Err(AttemptError::new(Trigger::ServerError, "the upstream stream ended before any content"));
        };
        let has_token = !piece.content.is_empty();
        let done = piece.done;
        open.first.push(piece);
        if has_token {
            return Ok(open);
        }
        if done {
            // A complete answer with no content at all is still an answer.
            open.finished = true;
            return Ok(open);
        }
    }
}

impl OpenStream {
    /// The next parsed piece, `None` when the stream has ended cleanly.
    pub async fn next_piece(&mut self) -> Result<Option<StreamPiece>, AttemptError> {
        loop {
            if self.finished {
                return Ok(None);
            }
            if let Some(ev) = self.queued.pop_front() {
                let piece = self.calls.parse_stream_event(&self.resolved.target, &self.state, &ev)?;
                self.state.clone_from(&piece.state);
                if piece.done {
                    self.finished = true;
                }
                return Ok(Some(piece));
            }
            match self.body.next().await {
                Some(Ok(bytes)) => {
                    let events = self
                        .decoder
                        .push(&bytes)
                        .map_err(|e| AttemptError::new(Trigger::ServerError, format!("malformed upstream stream: {e}")))?;
                    self.queued.extend(events);
                }
                Some(Err(e)) => return Err(e),
                None => {
                    let tail = self
                        .decoder
                        .finish()
                        .map_err(|e| AttemptError::new(Trigger::ServerError, format!("malformed upstream stream: {e}")))?;
                    if tail.is_empty() {
                        return Err(AttemptError::new(Trigger::ServerError, "the upstream closed the stream before it was complete"));
                    }
                    self.queued.extend(tail);
                }
            }
        }
    }

    /// The next piece with the idle timeout applied.
    pub async fn next_piece_timed(&mut self) -> Result<Option<StreamPiece>, AttemptError> {
        let idle = self.idle_timeout;
        tokio::time::timeout(idle, self.next_piece()).await.map_err(|_| timed_out("no stream event", idle))?
    }
}

/// Usage of a finished or interrupted answer: the upstream's if it reported
/// it, otherwise counted by the host.
pub fn settle_usage(reported: Option<Usage>, prompt_text_bytes: &str, output: &str) -> Usage {
    reported.unwrap_or_else(|| Usage {
        prompt_tokens: super::types::estimate_tokens(prompt_text_bytes),
        completion_tokens: super::types::estimate_tokens(output),
    })
}
