//! The OpenAI Chat Completions side of the mock (`POST /v1/chat/completions`
//! and `POST /chat/completions`).

use axum::response::Response;
use serde_json::{Value, json};

use super::mode::{Mode, answer_for, limited_pieces, prompt_tokens};
use super::wire::{self, Step, StreamShape, frame};
use super::{MockOptions, RecordedRequest};

/// An OpenAI error response.
fn error(status: u16, message: &str) -> Response {
    let (kind, code) = match status {
        401 => ("invalid_request_error", json!("invalid_api_key")),
        404 => ("invalid_request_error", json!("model_not_found")),
        429 => ("requests", json!("rate_limit_exceeded")),
        400..=499 => ("invalid_request_error", Value::Null),
        _ => ("server_error", Value::Null),
    };
    let body = json!({ "error": { "message": message, "type": kind, "param": null, "code": code } });
    let retry: &[(&'static str, &str)] = if status == 429 { &[("retry-after", "1")] } else { &[] };
    wire::json(status, &body, retry)
}

/// Answer one request.
pub async fn respond(opts: &MockOptions, req: &RecordedRequest, seq: usize) -> Response {
    let body = &req.json;
    let Some(model) = body.get("model").and_then(Value::as_str) else {
        return error(400, "you must provide a model parameter");
    };
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return error(400, "'messages' is a required property");
    };
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let stream_options = body.get("stream_options").filter(|v| !v.is_null());
    if stream_options.is_some() && !stream {
        return error(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.");
    }
    let include_usage = stream_options.and_then(|o| o.get("include_usage")).and_then(Value::as_bool) == Some(true);
    let mode = match Mode::parse(model) {
        Ok(m) => m,
        Err(e) => return error(400, &e),
    };
    tokio::time::sleep(opts.answer_delay).await;
    match mode {
        Mode::Fail(status) => {
            return error(status, &format!("mock upstream: simulated HTTP {status}"));
        }
        Mode::Hang => std::future::pending::<()>().await,
        Mode::Slow(d) => tokio::time::sleep(d).await,
        Mode::SlowFirst(d) | Mode::Stall(d) if !stream => tokio::time::sleep(d).await,
        Mode::StreamError if !stream => return error(500, "mock upstream: simulated HTTP 500"),
        _ => {}
    }

    let answer = answer_for(messages);
    let max = body.get("max_tokens").or_else(|| body.get("max_completion_tokens")).and_then(Value::as_u64);
    let (pieces, truncated) = limited_pieces(&answer, max);
    let finish = if truncated { "length" } else { "stop" };
    let prompt = prompt_tokens(messages, None);
    let usage = json!({ "prompt_tokens": prompt, "completion_tokens": pieces.len(), "total_tokens": prompt + pieces.len() as u64 });
    let id = format!("chatcmpl-mock{seq}");
    let created = wire::unix_now();

    if !stream {
        let full = json!({
            "id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": pieces.concat(), "refusal": null },
                          "logprobs": null, "finish_reason": finish }],
            "usage": usage, "system_fingerprint": "fp_mock",
        });
        return match mode {
            Mode::Malformed => wire::json_steps(vec![wire::half_of(&full)]),
            Mode::Drop => wire::json_steps(vec![wire::half_of(&full), Step::Cut]),
            _ => wire::json(200, &full, &[]),
        };
    }

    let chunk = |delta: Value, finish: Option<&str>| -> String {
        let mut c = json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": "fp_mock",
            "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
        });
        if include_usage {
            c["usage"] = Value::Null;
        }
        c.to_string()
    };
    let mut closing = vec![frame(None, &chunk(json!({}), Some(finish)))];
    if include_usage {
        let last = json!({ "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                           "system_fingerprint": "fp_mock", "choices": [], "usage": usage });
        closing.push(frame(None, &last.to_string()));
    }
    closing.push(frame(None, "[DONE]"));
    let shape = StreamShape {
        opening: vec![frame(None, &chunk(json!({ "role": "assistant", "content": "", "refusal": null }), None))],
        deltas: pieces.iter().map(|p| frame(None, &chunk(json!({ "content": p }), None))).collect(),
        closing,
        error: frame(
            None,
            r#"{"error":{"message":"mock upstream: simulated error mid-stream","type":"server_error","param":null,"code":null}}"#,
        ),
        broken: frame(None, &format!(r#"{{"id":"{id}","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":"mo"#)),
    };
    wire::sse(wire::plan(mode, shape, opts.chunk_delay))
}
