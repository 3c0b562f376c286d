//! What both wire formats share: timed response bodies and the stream plan
//! that applies a failure mode to a stream.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::mode::Mode;

/// One step of a response body.
#[derive(Debug, Clone)]
pub enum Step {
    /// Write these bytes.
    Send(Bytes),
    /// Wait before the next step.
    Sleep(Duration),
    /// Abort the connection (no terminating chunk: the client sees a broken body).
    Cut,
}

/// A streaming body that plays `steps` in order.
pub fn body_of(steps: Vec<Step>) -> Body {
    let stream = futures::stream::unfold(steps.into_iter(), |mut steps| async move {
        loop {
            match steps.next()? {
                Step::Send(bytes) => return Some((Ok(bytes), steps)),
                Step::Sleep(d) => tokio::time::sleep(d).await,
                Step::Cut => {
                    // Let the bytes before the cut reach the client first:
                    // a pending body makes hyper flush what it buffered.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let cut = std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "mock upstream cut the connection");
                    return Some((Err(cut), steps));
                }
            }
        }
    });
    Body::from_stream(stream)
}

/// A JSON response with a status and extra headers.
pub fn json(status: u16, value: &Value, headers: &[(&'static str, &str)]) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (status, [(header::CONTENT_TYPE, "application/json")], value.to_string()).into_response();
    for (name, value) in headers {
        if let Ok(v) = HeaderValue::from_str(value) {
            resp.headers_mut().insert(*name, v);
        }
    }
    resp
}

/// A 200 JSON response whose body is played step by step (for `drop` and `malformed`).
pub fn json_steps(steps: Vec<Step>) -> Response {
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body_of(steps)).into_response()
}

/// The first half of a JSON document's bytes: a body cut off mid-way.
pub fn half_of(value: &Value) -> Step {
    let text = value.to_string();
    Step::Send(Bytes::copy_from_slice(&text.as_bytes()[..text.len() / 2]))
}

/// A 200 `text/event-stream` response.
pub fn sse(steps: Vec<Step>) -> Response {
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], body_of(steps)).into_response()
}

/// One SSE frame: an optional `event:` line and one `data:` line.
pub fn frame(event: Option<&str>, data: &str) -> Bytes {
    match event {
        Some(e) => Bytes::from(format!("event: {e}\ndata: {data}\n\n")),
        None => Bytes::from(format!("data: {data}\n\n")),
    }
}

/// The frames of one streamed answer in a given wire format.
#[derive(Debug, Default)]
pub struct StreamShape {
    /// Frames before any text (OpenAI's role-only chunk; Anthropic's
    /// `message_start`, `content_block_start` and a `ping`).
    pub opening: Vec<Bytes>,
    /// One frame per text piece.
    pub deltas: Vec<Bytes>,
    /// Frames after the text (finish reason, usage, `[DONE]` / `message_stop`).
    pub closing: Vec<Bytes>,
    /// The format's in-band error event.
    pub error: Bytes,
    /// An event whose JSON is cut off.
    pub broken: Bytes,
}

/// Apply a mode to a stream: where the pauses go and how it ends.
///
/// - `slowfirst`: opening frames at once, then the pause, then the text.
/// - `stall`: the first text frame, then the pause, then the rest.
/// - `drop`: two text frames (fewer if the answer is shorter), then a cut.
/// - `streamerror`: one text frame, then the error event, then the end of the body.
/// - `malformed`: the opening frames, then a broken event.
///
/// `chunk_delay` is slept between text frames.
pub fn plan(mode: Mode, shape: StreamShape, chunk_delay: Duration) -> Vec<Step> {
    let mut steps: Vec<Step> = shape.opening.into_iter().map(Step::Send).collect();
    if mode == Mode::Malformed {
        steps.push(Step::Send(shape.broken));
        return steps;
    }
    if let Mode::SlowFirst(d) = mode {
        steps.push(Step::Sleep(d));
    }
    let stop_after = match mode {
        Mode::Drop => Some(2),
        Mode::StreamError => Some(1),
        _ => None,
    };
    for (i, delta) in shape.deltas.into_iter().enumerate() {
        if stop_after.is_some_and(|n| i >= n) {
            break;
        }
        if i > 0 && !chunk_delay.is_zero() {
            steps.push(Step::Sleep(chunk_delay));
        }
        steps.push(Step::Send(delta));
        if let (0, Mode::Stall(d)) = (i, mode) {
            steps.push(Step::Sleep(d));
        }
    }
    match mode {
        Mode::Drop => steps.push(Step::Cut),
        Mode::StreamError => steps.push(Step::Send(shape.error)),
        _ => steps.extend(shape.closing.into_iter().map(Step::Send)),
    }
    steps
}

/// Now, in Unix seconds (for `created` fields).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}
