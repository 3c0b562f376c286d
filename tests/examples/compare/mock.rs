//! A minimal, fast OpenAI-compatible upstream for the comparison: a fixed
//! answer time, bodies serialised once at start, nothing recorded (the test
//! mock in `gatehouse_tests::mock_upstream` records every request and builds
//! its answer per request, which is right for tests and wrong for a load
//! generator's counterpart).
//!
//! `POST /v1/chat/completions` and `POST /chat/completions`: after
//! `delay`, a `chat.completion` JSON, or with `"stream": true` an SSE stream:
//! a role-only chunk and the first content delta at once, then one delta per
//! `chunk_delay`, the finish chunk, the usage chunk when
//! `stream_options.include_usage` is set, and `data: [DONE]`.

use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use serde::Deserialize;
use serde_json::json;

/// The answer, one streamed delta per word.
pub const WORDS: [&str; 8] = ["Gatehouse ", "benchmark ", "answer: ", "the ", "quick ", "brown ", "fox ", "jumps."];

#[derive(Clone)]
struct Shared {
    delay: Duration,
    chunk_delay: Duration,
    full: Bytes,
    opening: Bytes,
    deltas: Vec<Bytes>,
    closing: Bytes,
    usage: Bytes,
}

#[derive(Deserialize)]
struct Req {
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

fn frame(v: &serde_json::Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

fn chunk(delta: serde_json::Value, finish: Option<&str>) -> serde_json::Value {
    json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "gpt-mock",
           "system_fingerprint": "fp_mock", "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
}

fn shared(delay: Duration, chunk_delay: Duration) -> Shared {
    let usage = json!({"prompt_tokens": 12, "completion_tokens": WORDS.len(), "total_tokens": 12 + WORDS.len()});
    let full = json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-mock",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": WORDS.concat(), "refusal": null},
                     "logprobs": null, "finish_reason": "stop"}],
        "usage": usage, "system_fingerprint": "fp_mock",
    });
    let mut last = chunk(json!({}), None);
    last["choices"] = json!([]);
    last["usage"] = usage;
    Shared {
        delay,
        chunk_delay,
        full: Bytes::from(full.to_string()),
        opening: frame(&chunk(json!({"role": "assistant", "content": "", "refusal": null}), None)),
        deltas: WORDS.iter().map(|w| frame(&chunk(json!({"content": w}), None))).collect(),
        closing: frame(&chunk(json!({}), Some("stop"))),
        usage: frame(&last),
    }
}

async fn chat(State(s): State<Shared>, body: Bytes) -> Response {
    let Ok(req) = serde_json::from_slice::<Req>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            r#"{"error":{"message":"bad JSON","type":"invalid_request_error"}}"#,
        )
            .into_response();
    };
    tokio::time::sleep(s.delay).await;
    if !req.stream {
        return ([(header::CONTENT_TYPE, "application/json")], s.full.clone()).into_response();
    }
    let include_usage = req.stream_options.is_some_and(|o| o.include_usage);
    // Frames in order; `None` is a pause of `chunk_delay`.
    let mut steps: Vec<Option<Bytes>> = vec![Some(s.opening.clone())];
    for (i, d) in s.deltas.iter().enumerate() {
        if i > 0 && !s.chunk_delay.is_zero() {
            steps.push(None);
        }
        steps.push(Some(d.clone()));
    }
    steps.push(Some(s.closing.clone()));
    if include_usage {
        steps.push(Some(s.usage.clone()));
    }
    steps.push(Some(Bytes::from_static(b"data: [DONE]\n\n")));
    let pause = s.chunk_delay;
    let stream = futures::stream::unfold(steps.into_iter(), move |mut it| async move {
        loop {
            match it.next()? {
                Some(b) => return Some((Ok::<_, std::io::Error>(b), it)),
                None => tokio::time::sleep(pause).await,
            }
        }
    });
    ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], Body::from_stream(stream)).into_response()
}

/// Serve on `127.0.0.1:port` until killed (one thread: the mock shares core 0 with the load generator).
pub fn serve(port: u16, delay: Duration, chunk_delay: Duration) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async move {
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/chat/completions", post(chat))
            .route("/health", axum::routing::get(|| async { "ok" }))
            .with_state(shared(delay, chunk_delay));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        println!("mock listening on {}", listener.local_addr()?);
        // As real model servers do: without it, a delta written while the previous one is
        // unacknowledged waits for the peer's delayed ACK (~40 ms on Linux).
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app).await?;
        Ok(())
    })
}
