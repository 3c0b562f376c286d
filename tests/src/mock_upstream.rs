//! An in-process mock LLM upstream that speaks the real OpenAI Chat
//! Completions and Anthropic Messages wire formats, JSON and SSE, with
//! failures chosen by the model name.
//!
//! ```text
//! let mock = MockUpstream::start().await;
//! // provider config: base_url = mock.base_url() (OpenAI adapter: also `{base}/v1`)
//! // ... call the gateway with model "openai/fail500-a", "anthropic/ok-b" ...
//! assert_eq!(mock.count_for("fail500-a"), 1);
//! assert!(mock.requests()[0].prompt_text().contains("[REDACTED_EMAIL]"));
//! ```
//!
//! # Routes
//! - `POST /v1/chat/completions` and `POST /chat/completions`: OpenAI.
//! - `POST /v1/messages`: Anthropic (requires `anthropic-version` and
//!   `max_tokens`, rejects `system` inside `messages` and temperatures above 1,
//!   as the real API does).
//! - Anything else: 404. Every request is recorded, whatever the route.
//!
//! # Answers
//! The answer is `mock answer to: <last user message>`, streamed as one
//! delta per word (each word with the whitespace after it). `max_tokens`
//! counts words: a longer answer is cut and finishes with `length` /
//! `max_tokens`. Usage: prompt tokens = whitespace-separated words of every
//! message (and Anthropic's `system`), completion tokens = words sent.
//! OpenAI streams start with a role-only chunk and send the usage chunk only
//! when `stream_options.include_usage` is set; Anthropic streams send
//! `message_start`, `content_block_start` and a `ping` before the text.
//!
//! # Failure modes: the model name's first `-`-separated word
//! | model            | non-streaming                        | streaming                                        |
//! |------------------|--------------------------------------|--------------------------------------------------|
//! | `ok-*`, other    | 200 answer                           | full stream                                      |
//! | `failNNN-*`      | status NNN (400..599) with the format's error body; 429 has `Retry-After: 1`; Anthropic 529 is `overloaded_error` | same, before any byte of stream |
//! | `slow-<ms>-*`    | waits, then answers                  | waits, then streams                              |
//! | `hang-*`         | never answers                        | never answers                                    |
//! | `drop-*`         | half the JSON, then the connection is cut | opening frames and two text deltas, then cut |
//! | `slowfirst-<ms>-*` | like `slow`                        | role chunk / `message_start`+`ping` at once, first text after the pause |
//! | `stall-<ms>-*`   | like `slow`                          | first text delta, pause, then the rest           |
//! | `malformed-*`    | 200 with half a JSON document        | opening frames, then an event with broken JSON   |
//! | `streamerror-*`  | 500 (OpenAI) / 529 (Anthropic)       | one text delta, then the in-band error event (OpenAI `{"error":…}`, Anthropic `event: error` `overloaded_error`) |
//!
//! # Runtime
//! The server runs on its own thread with its own Tokio runtime, so it keeps
//! serving while a test blocks its own thread, works under any test runtime
//! flavour, and stops (hanging requests included) when the
//! [`MockUpstream`] is dropped.

#[path = "mock_upstream/anthropic.rs"]
mod anthropic;
#[path = "mock_upstream/mode.rs"]
mod mode;
#[path = "mock_upstream/openai.rs"]
mod openai;
#[path = "mock_upstream/wire.rs"]
mod wire;

use std::collections::HashMap;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

pub use mode::Mode;

/// Options of a mock upstream.
#[derive(Debug, Clone, Default)]
pub struct MockOptions {
    /// Added before every answer, failures included (a fixed upstream
    /// latency for benchmarks).
    pub answer_delay: Duration,
    /// Slept between two text deltas of a stream (slow generation).
    pub chunk_delay: Duration,
}

/// One request as the mock received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// `POST`, ...
    pub method: String,
    /// Path and query, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Headers in arrival order, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The raw body (lossy UTF-8).
    pub body: String,
    /// The body as JSON; `Null` when it is not JSON.
    pub json: Value,
}

impl RecordedRequest {
    /// The first value of a header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The `model` field of the body.
    pub fn model(&self) -> Option<&str> {
        self.json.get("model").and_then(Value::as_str)
    }

    /// Whether the body asked for a stream.
    pub fn is_stream(&self) -> bool {
        self.json.get("stream").and_then(Value::as_bool).unwrap_or(false)
    }

    /// Every prompt text that reached the upstream, one per line: Anthropic's
    /// top-level `system`, then each message's content (text parts joined).
    /// Handy for asserting on RAG context, redactions and canaries.
    pub fn prompt_text(&self) -> String {
        let mut parts = Vec::new();
        if let Some(system) = self.json.get("system") {
            parts.push(mode::content_text(system));
        }
        if let Some(messages) = self.json.get("messages").and_then(Value::as_array) {
            parts.extend(messages.iter().filter_map(|m| m.get("content")).map(mode::content_text));
        }
        parts.join("\n")
    }
}

/// What the handlers share with the test.
#[derive(Debug, Default)]
struct Shared {
    options: MockOptions,
    requests: Mutex<Vec<RecordedRequest>>,
    per_model: Mutex<HashMap<String, usize>>,
}

/// A poisoned lock only means another handler panicked; the data is still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Record a request; returns it and its sequence number.
    fn record(&self, method: &Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> (RecordedRequest, usize) {
        let req = RecordedRequest {
            method: method.to_string(),
            path: uri.path_and_query().map_or_else(|| uri.path().to_string(), ToString::to_string),
            headers: headers.iter().map(|(n, v)| (n.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect(),
            body: String::from_utf8_lossy(body).into_owned(),
            json: serde_json::from_slice(body).unwrap_or(Value::Null),
        };
        if let Some(model) = req.model() {
            *lock(&self.per_model).entry(model.to_string()).or_default() += 1;
        }
        let mut all = lock(&self.requests);
        all.push(req.clone());
        (req, all.len())
    }
}

/// A running mock upstream; stops when dropped.
#[derive(Debug)]
pub struct MockUpstream {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MockUpstream {
    /// Start on `127.0.0.1:<free port>` with default options.
    ///
    /// # Panics
    /// If no loopback port or thread can be had (test support: fail loudly).
    pub async fn start() -> MockUpstream {
        Self::start_with(MockOptions::default()).await
    }

    /// Start with options (e.g. a fixed answer delay for benchmarks).
    ///
    /// # Panics
    /// If no loopback port or thread can be had (test support: fail loudly).
    pub async fn start_with(options: MockOptions) -> MockUpstream {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the mock upstream to a loopback port");
        listener.set_nonblocking(true).expect("make the mock upstream socket non-blocking");
        let addr = listener.local_addr().expect("local address of the mock upstream");
        let shared = Arc::new(Shared { options, ..Shared::default() });
        let app = router(shared.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("mock-upstream-{}", addr.port()))
            .spawn(move || serve(listener, app, rx))
            .expect("spawn the mock upstream thread");
        MockUpstream { addr, shared, shutdown: Some(tx), thread: Some(thread) }
    }

    /// `http://127.0.0.1:<port>`: the base URL for the Anthropic adapter, and
    /// for the OpenAI adapter (which then calls `/chat/completions`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Config for two providers: `openai` at this mock, and `echo` (offline,
    /// marked confidential) — the security tests' pair.
    pub fn openai_and_confidential_echo(&self) -> String {
        format!(
            "[providers.openai]\nplugin = \"provider-openai\"\nbase_url = \"{}\"\n\
             [providers.echo]\nplugin = \"provider-echo\"\nbase_url = \"echo://local\"\nconfidential = true\n",
            self.openai_base_url()
        )
    }

    /// `http://127.0.0.1:<port>/v1`: the OpenAI-style base URL (calls land on
    /// `/v1/chat/completions`).
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The socket address the mock listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The most recent request.
    pub fn last_request(&self) -> Option<RecordedRequest> {
        lock(&self.shared.requests).last().cloned()
    }

    /// How many requests arrived (any route).
    pub fn request_count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    /// How many requests named this model (as sent upstream, without the
    /// gateway's provider prefix).
    pub fn count_for(&self, model: &str) -> usize {
        lock(&self.shared.per_model).get(model).copied().unwrap_or(0)
    }

    /// Requests per model.
    pub fn counts(&self) -> HashMap<String, usize> {
        lock(&self.shared.per_model).clone()
    }

    /// Forget recorded requests and counters.
    pub fn reset(&self) {
        lock(&self.shared.requests).clear();
        lock(&self.shared.per_model).clear();
    }
}

impl Drop for MockUpstream {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            // The port is closed once this returns.
            let _ = thread.join();
        }
    }
}

/// The mock's thread: its own runtime, serving until the shutdown signal;
/// dropping the runtime then ends every connection, hanging ones included.
fn serve(listener: std::net::TcpListener, app: Router, shutdown: tokio::sync::oneshot::Receiver<()>) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mock upstream: no runtime: {e}");
            return;
        }
    };
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("mock upstream: bad listener: {e}");
                return;
            }
        };
        tokio::select! {
            result = axum::serve(listener, app).into_future() => {
                if let Err(e) = result {
                    eprintln!("mock upstream stopped: {e}");
                }
            }
            _ = shutdown => {}
        }
    });
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(openai_route))
        .route("/chat/completions", post(openai_route))
        .route("/v1/messages", post(anthropic_route))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(shared)
}

async fn openai_route(State(shared): State<Arc<Shared>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let (req, seq) = shared.record(&method, &uri, &headers, &body);
    openai::respond(&shared.options, &req, seq).await
}

async fn anthropic_route(State(shared): State<Arc<Shared>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let (req, seq) = shared.record(&method, &uri, &headers, &body);
    anthropic::respond(&shared.options, &req, seq).await
}

async fn not_found(State(shared): State<Arc<Shared>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let (req, _) = shared.record(&method, &uri, &headers, &body);
    let message = format!("mock upstream: no route for {} {}", req.method, req.path);
    wire::json(404, &json!({ "error": { "message": message, "type": "invalid_request_error" } }), &[])
}
