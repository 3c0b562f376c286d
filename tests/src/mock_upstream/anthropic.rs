//! The Anthropic Messages side of the mock (`POST /v1/messages`).
//!
//! Like the real API it insists on `anthropic-version`, `max_tokens`, no
//! `system` role inside `messages`, and a temperature within 0..1, so an
//! adapter that gets these wrong fails loudly in tests.

use axum::response::Response;
use serde_json::{Value, json};

use super::mode::{Mode, answer_for, limited_pieces, prompt_tokens};
use super::wire::{self, Step, StreamShape, frame};
use super::{MockOptions, RecordedRequest};

/// Anthropic's error `type` for an HTTP status.
fn error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// An Anthropic error response.
fn error(status: u16, message: &str) -> Response {
    let body = json!({
        "type": "error",
        "error": { "type": error_type(status), "message": message },
        "request_id": "req_mock",
    });
    let retry: &[(&'static str, &str)] = if status == 429 { &[("retry-after", "1")] } else { &[] };
    wire::json(status, &body, retry)
}

/// Answer one request.
pub async fn respond(opts: &MockOptions, req: &RecordedRequest, seq: usize) -> Response {
    let body = &req.json;
    if req.header("anthropic-version").is_none() {
        return error(400, "anthropic-version: header is required");
    }
    let Some(model) = body.get("model").and_then(Value::as_str) else {
        return error(400, "model: Field required");
    };
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return error(400, "messages: Field required");
    };
    let Some(max_tokens) = body.get("max_tokens").and_then(Value::as_u64) else {
        return error(400, "max_tokens: Field required");
    };
    if messages.iter().any(|m| m.get("role").and_then(Value::as_str) == Some("system")) {
        return error(
            400,
            "messages: Unexpected role \"system\". The Messages API accepts a top-level `system` parameter, not \"system\" as an input message role.",
        );
    }
    if body.get("temperature").and_then(Value::as_f64).is_some_and(|t| !(0.0..=1.0).contains(&t)) {
        return error(400, "temperature: range: 0..1");
    }
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let mode = match Mode::parse(model) {
        Ok(m) => m,
        Err(e) => return error(400, &e),
    };
    tokio::time::sleep(opts.answer_delay).await;
    match mode {
        Mode::Fail(status) => {
            let message = if status == 529 { "Overloaded".to_string() } else { format!("mock upstream: simulated HTTP {status}") };
            return error(status, &message);
        }
        Mode::Hang => std::future::pending::<()>().await,
        Mode::Slow(d) => tokio::time::sleep(d).await,
        Mode::SlowFirst(d) | Mode::Stall(d) if !stream => tokio::time::sleep(d).await,
        Mode::StreamError if !stream => return error(529, "Overloaded"),
        _ => {}
    }

    let answer = answer_for(messages);
    let (pieces, truncated) = limited_pieces(&answer, Some(max_tokens));
    let stop_reason = if truncated { "max_tokens" } else { "end_turn" };
    let input = prompt_tokens(messages, body.get("system"));
    let id = format!("msg_mock{seq}");

    if !stream {
        let full = json!({
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": [{ "type": "text", "text": pieces.concat() }],
            "stop_reason": stop_reason, "stop_sequence": null,
            "usage": { "input_tokens": input, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                       "output_tokens": pieces.len() },
        });
        return match mode {
            Mode::Malformed => wire::json_steps(vec![wire::half_of(&full)]),
            Mode::Drop => wire::json_steps(vec![wire::half_of(&full), Step::Cut]),
            _ => wire::json(200, &full, &[]),
        };
    }

    let start = json!({
        "type": "message_start",
        "message": { "id": id, "type": "message", "role": "assistant", "content": [], "model": model,
                     "stop_reason": null, "stop_sequence": null,
                     "usage": { "input_tokens": input, "cache_creation_input_tokens": 0,
                                "cache_read_input_tokens": 0, "output_tokens": 1 } },
    });
    let delta =
        |text: &str| json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": text } }).to_string();
    let message_delta = json!({
        "type": "message_delta",
        "delta": { "stop_reason": stop_reason, "stop_sequence": null },
        "usage": { "output_tokens": pieces.len() },
    });
    let shape = StreamShape {
        opening: vec![
            frame(Some("message_start"), &start.to_string()),
            frame(Some("content_block_start"), r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
            frame(Some("ping"), r#"{"type": "ping"}"#),
        ],
        deltas: pieces.iter().map(|p| frame(Some("content_block_delta"), &delta(p))).collect(),
        closing: vec![
            frame(Some("content_block_stop"), r#"{"type":"content_block_stop","index":0}"#),
            frame(Some("message_delta"), &message_delta.to_string()),
            frame(Some("message_stop"), r#"{"type":"message_stop"}"#),
        ],
        error: frame(Some("error"), r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#),
        broken: frame(Some("content_block_delta"), r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_del"#),
    };
    wire::sse(wire::plan(mode, shape, opts.chunk_delay))
}
