//! Webhooks end to end: management routes, signatures checked the way the
//! example receivers check them, retries, timeouts, auto-disable, rotation,
//! the URL guard, isolation of a dead endpoint, outbox fan-out, and delivery
//! across a SIGKILL. Receivers are real HTTP servers (axum) on loopback, so
//! these servers run with `WEBHOOKS_ALLOW_PRIVATE=true` (except the guard test).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use gatehouse_tests::Server;
use gatehouse_tests::windows;
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Sha256;

// ---------------------------------------------------------------- receiver

/// What the receiver answers to one request.
#[derive(Debug, Clone)]
enum Reply {
    Status(u16),
    /// Never answer (the gateway's timeout ends it).
    Hang,
    /// Answer `status` after a pause.
    After(Duration, u16),
    /// A redirect to another URL (must not be followed).
    Redirect(String),
}

#[derive(Debug, Clone)]
struct Hit {
    at: Instant,
    headers: HeaderMap,
    body: Bytes,
}

impl Hit {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("delivery body is JSON")
    }
}

/// An HTTP receiver on loopback that records every request and answers from
/// a script, then with a default reply.
#[derive(Clone)]
struct Receiver {
    url: String,
    hits: Arc<Mutex<Vec<Hit>>>,
    script: Arc<Mutex<VecDeque<Reply>>>,
    default: Arc<Mutex<Reply>>,
}

impl Receiver {
    async fn start(default: Reply) -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind receiver");
        let addr = listener.local_addr().expect("addr");
        let r = Receiver {
            url: format!("http://{addr}/hook"),
            hits: Arc::default(),
            script: Arc::default(),
            default: Arc::new(Mutex::new(default)),
        };
        let app = axum::Router::new().fallback(receive).with_state(r.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        r
    }

    fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.script.lock().expect("lock").extend(replies);
    }

    fn set_default(&self, reply: Reply) {
        *self.default.lock().expect("lock") = reply;
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().expect("lock").clone()
    }

    /// Wait until at least `n` requests arrived.
    async fn wait_for(&self, n: usize, within: Duration) -> Vec<Hit> {
        let deadline = Instant::now() + within;
        loop {
            let hits = self.hits();
            if hits.len() >= n {
                return hits;
            }
            assert!(Instant::now() < deadline, "expected {n} deliveries within {within:?}, got {}", hits.len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> Response {
    r.hits.lock().expect("lock").push(Hit { at: Instant::now(), headers, body });
    let reply = r.script.lock().expect("lock").pop_front().unwrap_or_else(|| r.default.lock().expect("lock").clone());
    let status = |c: u16| StatusCode::from_u16(c).expect("status");
    match reply {
        Reply::Status(c) => status(c).into_response(),
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            StatusCode::OK.into_response()
        }
        Reply::After(d, c) => {
            tokio::time::sleep(d).await;
            status(c).into_response()
        }
        Reply::Redirect(to) => (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, to)]).into_response(),
    }
}

// ---------------------------------------------------------------- signature

/// The check of the example receivers (`examples/webhooks/`): one `t`, one
/// `v1`, HMAC-SHA256 keyed by the whole `whsec_…` string over `<t>.<raw body>`,
/// 300 s tolerance.
fn verify(secret: &str, signature: &str, body: &[u8]) -> bool {
    let (mut t, mut v1) = (None, None);
    for part in signature.split(',') {
        let Some((k, v)) = part.trim().split_once('=') else {
            return false;
        };
        let slot = match k {
            "t" => &mut t,
            "v1" => &mut v1,
            _ => continue,
        };
        if slot.replace(v).is_some() {
            return false;
        }
    }
    let (Some(Ok(t)), Some(v1)) = (t.map(str::parse::<i64>), v1) else {
        return false;
    };
    if (chrono::Utc::now().timestamp() - t).abs() > 300 {
        return false;
    }
    let Ok(sig) = hex::decode(v1) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    mac.verify_slice(&sig).is_ok()
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/webhooks")
}

/// Run an example receiver's `verify` on a captured delivery, if its
/// interpreter is installed: `Some(valid)`, or `None` when it is not.
fn example_verifies(interpreter: &str, secret: &str, hit: &Hit) -> Option<bool> {
    let available = std::process::Command::new(interpreter).arg("--version").output().is_ok_and(|o| o.status.success());
    if !available {
        eprintln!("{interpreter} not found: skipping its example receiver's check");
        return None;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let body_path = dir.path().join("body");
    std::fs::write(&body_path, &hit.body).expect("write body");
    let (flag, program) = match interpreter {
        "python3" => (
            "-c",
            "import os, sys\n\
             sys.path.insert(0, os.environ['EXAMPLE_DIR'])\n\
             from receiver import verify\n\
             body = open(os.environ['BODY_FILE'], 'rb').read()\n\
             sys.exit(0 if verify(os.environ['SECRET'], os.environ['SIGNATURE'], body) else 3)\n",
        ),
        _ => (
            "-e",
            "const fs = require('fs'); const path = require('path');\n\
             const { verify } = require(path.join(process.env.EXAMPLE_DIR, 'receiver.js'));\n\
             const body = fs.readFileSync(process.env.BODY_FILE);\n\
             process.exit(verify(process.env.SECRET, process.env.SIGNATURE, body) ? 0 : 3);\n",
        ),
    };
    let sub = if interpreter == "python3" { "python" } else { "node" };
    let out = std::process::Command::new(interpreter)
        .arg(flag)
        .arg(program)
        .env("EXAMPLE_DIR", examples_dir().join(sub))
        .env("BODY_FILE", &body_path)
        .env("SECRET", secret)
        .env("SIGNATURE", hit.header("x-gatehouse-signature"))
        .output()
        .expect("run example");
    match out.status.code() {
        Some(0) => Some(true),
        Some(3) => Some(false),
        _ => panic!("{interpreter} example failed: {}", String::from_utf8_lossy(&out.stderr)),
    }
}

// ---------------------------------------------------------------- gateway helpers

/// A gateway allowed to call loopback, with fast retries (`retries`: the
/// `retry_delays_secs` or `retry_delays_ms` line).
fn gateway(retries: &str, timeout_ms: u64, extra: &str) -> Server {
    Server::builder()
        .env("WEBHOOKS_ALLOW_PRIVATE", "true")
        .toml(&format!("[webhooks]\n{retries}\ntimeout_ms = {timeout_ms}\npoll_interval_ms = 50\n{extra}"))
        .start()
}

async fn call(s: &Server, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = s.admin(method, path);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("send");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// Create an endpoint; returns (id, secret).
async fn create(s: &Server, url: &str, events: Value) -> (String, String) {
    let (st, v) =
        call(s, Method::POST, "/api/admin/webhooks", Some(json!({"url": url, "events": events, "description": "test receiver"}))).await;
    assert_eq!(st, 201, "{v}");
    (v["data"]["endpoint"]["id"].as_str().expect("id").to_owned(), v["data"]["secret"].as_str().expect("secret").to_owned())
}

/// Queue a test delivery; returns (event id, delivery id).
async fn send_test(s: &Server, id: &str) -> (String, String) {
    let (st, v) = call(s, Method::POST, &format!("/api/admin/webhooks/{id}/test"), None).await;
    assert_eq!(st, 202, "{v}");
    (v["data"]["eventId"].as_str().expect("event id").to_owned(), v["data"]["deliveryId"].as_str().expect("delivery id").to_owned())
}

async fn endpoint(s: &Server, id: &str) -> Value {
    let (st, v) = call(s, Method::GET, &format!("/api/admin/webhooks/{id}"), None).await;
    assert_eq!(st, 200, "{v}");
    v["data"].clone()
}

async fn deliveries(s: &Server, id: &str) -> Vec<Value> {
    let (st, v) = call(s, Method::GET, &format!("/api/admin/webhooks/{id}/deliveries?limit=200"), None).await;
    assert_eq!(st, 200, "{v}");
    v["data"]["deliveries"].as_array().expect("array").clone()
}

/// One sample of `GET /metrics` (0 when the series has not appeared yet).
async fn metric(s: &Server, series: &str) -> f64 {
    let text = s.admin(Method::GET, "/metrics").send().await.expect("metrics").text().await.expect("text");
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

/// Poll `GET /metrics` until `series` satisfies `pred`.
async fn wait_metric(s: &Server, series: &str, within: Duration, pred: impl Fn(f64) -> bool) -> f64 {
    let deadline = Instant::now() + within;
    loop {
        let v = metric(s, series).await;
        if pred(v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{series} is {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Poll the deliveries view until `pred` holds.
async fn wait_deliveries(s: &Server, id: &str, within: Duration, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + within;
    loop {
        let d = deliveries(s, id).await;
        if pred(&d) {
            return d;
        }
        assert!(Instant::now() < deadline, "deliveries never reached the expected state: {d:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_endpoint(s: &Server, id: &str, within: Duration, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let e = endpoint(s, id).await;
        if pred(&e) {
            return e;
        }
        assert!(Instant::now() < deadline, "endpoint never reached the expected state: {e:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------- tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn management_routes_show_the_secret_once_and_validate_events() {
    let rx = Receiver::start(Reply::Status(200)).await;
    let s = gateway("retry_delays_secs = [0, 1, 2]", 2000, "");

    let (st, v) = call(
        &s,
        Method::POST,
        "/api/admin/webhooks",
        Some(json!({"url": rx.url, "events": ["api:model_failover", "dlp:incident", "dlp:incident"]})),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    let secret = v["data"]["secret"].as_str().expect("secret").to_owned();
    assert!(secret.starts_with("whsec_") && secret.len() == 49, "{secret}");
    let ep = &v["data"]["endpoint"];
    let id = ep["id"].as_str().expect("id").to_owned();
    assert!(id.starts_with("wh_"));
    assert_eq!(ep["events"], json!(["api:model_failover", "dlp:incident"]));
    assert_eq!(ep["enabled"], true);
    assert_eq!(ep["status"], "enabled");
    assert_eq!(ep["failureCount"], 0);
    assert_eq!(ep["description"], "");

    // The list carries the catalog and never a secret.
    let (st, list) = call(&s, Method::GET, "/api/admin/webhooks", None).await;
    assert_eq!(st, 200);
    let names: Vec<&str> = list["data"]["events"].as_array().expect("catalog").iter().map(|e| e["name"].as_str().expect("name")).collect();
    for n in [
        "*",
        "promptshield:attack:blocked",
        "promptshield:attack:detected",
        "promptshield:canary:leaked",
        "dlp:incident",
        "pii:incident",
        "api:limit_reached",
        "api:model_failover",
        "webhook:test",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    assert_eq!(list["data"]["endpoints"][0]["id"], id.as_str());
    let one = endpoint(&s, &id).await;
    for text in [list.to_string(), one.to_string()] {
        assert!(!text.contains(&secret) && !text.contains("whsec_"), "secret leaked: {text}");
    }

    // Unknown events are refused at create and update; `*` is accepted.
    for bad in [json!(["api:model_failover", "api:nonsense"]), json!([]), json!(["WEBHOOK:TEST"])] {
        let (st, v) = call(&s, Method::POST, "/api/admin/webhooks", Some(json!({"url": rx.url, "events": bad}))).await;
        assert_eq!(st, 400, "{v}");
        assert_eq!(v["error"]["code"], "VALIDATION_ERROR");
    }
    let (st, v) = call(&s, Method::PUT, &format!("/api/admin/webhooks/{id}"), Some(json!({"events": ["nope"]}))).await;
    assert_eq!(st, 400, "{v}");
    assert!(v["error"]["message"].as_str().expect("msg").contains("nope"));
    // Other validation: scheme, unknown fields, empty update, 404s.
    for body in [
        json!({"url": "ftp://127.0.0.1/", "events": ["*"]}),
        json!({"url": "http://user:pw@127.0.0.1/", "events": ["*"]}),
        json!({"url": rx.url, "events": ["*"], "secret": "whsec_mine"}),
        json!({"events": ["*"]}),
    ] {
        let (st, v) = call(&s, Method::POST, "/api/admin/webhooks", Some(body.clone())).await;
        assert_eq!(st, 400, "{body} → {v}");
    }
    let (st, _) = call(&s, Method::PUT, &format!("/api/admin/webhooks/{id}"), Some(json!({}))).await;
    assert_eq!(st, 400);
    for (m, p) in [
        (Method::GET, "/api/admin/webhooks/wh_missing"),
        (Method::PUT, "/api/admin/webhooks/wh_missing"),
        (Method::DELETE, "/api/admin/webhooks/wh_missing"),
        (Method::POST, "/api/admin/webhooks/wh_missing/rotate-secret"),
        (Method::POST, "/api/admin/webhooks/wh_missing/test"),
        (Method::GET, "/api/admin/webhooks/wh_missing/deliveries"),
    ] {
        let (st, v) = call(&s, m.clone(), p, Some(json!({"enabled": true}))).await;
        assert_eq!(st, 404, "{m} {p}: {v}");
        assert_eq!(v["error"]["code"], "NOT_FOUND");
    }

    let (st, v) =
        call(&s, Method::PUT, &format!("/api/admin/webhooks/{id}"), Some(json!({"events": ["*"], "description": "all of it"}))).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["data"]["events"], json!(["*"]));
    assert_eq!(v["data"]["description"], "all of it");

    // A non-admin key is refused.
    let (_, plain, _) = s.create_key(json!({"name": "plain"})).await;
    let r = s.client.get(s.url("/api/admin/webhooks")).bearer_auth(&plain).send().await.expect("send");
    assert_eq!(r.status(), 403);

    let (st, _) = call(&s, Method::DELETE, &format!("/api/admin/webhooks/{id}"), None).await;
    assert_eq!(st, 200);
    let (st, _) = call(&s, Method::GET, &format!("/api/admin/webhooks/{id}"), None).await;
    assert_eq!(st, 404);

    // Every change was audited, none with the secret.
    let (st, logs) = call(&s, Method::GET, "/audit-logs?type=webhook_management&limit=100", None).await;
    assert_eq!(st, 200);
    let ops: Vec<&str> =
        logs["data"]["logs"].as_array().expect("logs").iter().map(|l| l["metadata"]["operation"].as_str().unwrap_or_default()).collect();
    for op in ["create_webhook", "update_webhook", "delete_webhook"] {
        assert!(ops.contains(&op), "{op} not audited: {ops:?}");
    }
    assert!(!logs.to_string().contains(&secret));
    assert!(!s.log().contains(&secret), "the secret is in the server log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_deliveries_are_signed_verifiable_and_shown_in_the_view() {
    let rx = Receiver::start(Reply::Status(204)).await;
    let s = gateway("retry_delays_secs = [0, 1, 2]", 2000, "");
    let (id, secret) = create(&s, &rx.url, json!(["api:limit_reached"])).await;
    let (event_id, delivery_id) = send_test(&s, &id).await;
    assert!(event_id.starts_with("evt_test_"), "{event_id}");
    assert!(uuid_like(&delivery_id), "{delivery_id}");

    let hit = rx.wait_for(1, Duration::from_secs(10)).await.remove(0);
    assert_eq!(hit.header("content-type"), "application/json");
    assert_eq!(hit.header("x-gatehouse-event"), "webhook:test");
    assert_eq!(hit.header("x-gatehouse-delivery"), delivery_id);
    let sig = hit.header("x-gatehouse-signature");
    assert!(sig.starts_with("t=") && sig.contains(",v1="), "{sig}");
    assert!(verify(&secret, sig, &hit.body), "signature does not verify");
    assert!(!verify(&secret, sig, &[hit.body.as_ref(), b" "].concat()), "a changed body must not verify");
    assert!(!verify("whsec_wrong", sig, &hit.body));
    for interpreter in ["python3", "node"] {
        if let Some(ok) = example_verifies(interpreter, &secret, &hit) {
            assert!(ok, "the {interpreter} example receiver rejected a real delivery");
        }
    }
    let body = hit.json();
    assert_eq!(body["id"], event_id.as_str());
    assert_eq!(body["type"], "webhook:test");
    assert!(body["created"].is_i64());
    assert_eq!(body["data"]["endpointId"], id.as_str());
    assert!(body["data"]["message"].is_string());

    let d = wait_deliveries(&s, &id, Duration::from_secs(5), |d| d.first().is_some_and(|x| x["status"] == "succeeded")).await;
    assert_eq!(d[0]["id"], delivery_id.as_str());
    assert_eq!(d[0]["eventId"], event_id.as_str());
    assert_eq!(d[0]["eventType"], "webhook:test");
    assert_eq!(d[0]["attempts"], 1);
    assert_eq!(d[0]["lastStatusCode"], 204);
    assert!(d[0]["lastLatencyMs"].is_u64());
    assert_eq!(d[0]["lastError"], Value::Null);
    let (st, _) = call(&s, Method::GET, &format!("/api/admin/webhooks/{id}/deliveries?limit=0"), None).await;
    assert_eq!(st, 400);
}

fn uuid_like(s: &str) -> bool {
    s.len() == 36 && s.chars().filter(|c| *c == '-').count() == 4 && s.chars().all(|c| c == '-' || c.is_ascii_hexdigit())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_attempts_are_retried_on_schedule_with_the_same_delivery_id() {
    let rx = Receiver::start(Reply::Status(200)).await;
    rx.script([Reply::Status(500), Reply::Status(503)]);
    // Delays under a second and between whole seconds.
    let s = gateway("retry_delays_ms = [0, 600, 1250]", 2000, "");
    let (id, secret) = create(&s, &rx.url, json!(["*"])).await;
    let (_, delivery_id) = send_test(&s, &id).await;
    let hits = rx.wait_for(3, Duration::from_secs(15)).await;
    for h in &hits {
        assert_eq!(h.header("x-gatehouse-delivery"), delivery_id);
        assert!(verify(&secret, h.header("x-gatehouse-signature"), &h.body));
        assert_eq!(h.body, hits[0].body, "every attempt sends the same bytes");
    }
    let gap1 = hits[1].at - hits[0].at;
    let gap2 = hits[2].at - hits[1].at;
    assert!(gap1 >= Duration::from_millis(550) && gap1 < Duration::from_millis(2500), "{gap1:?}");
    assert!(gap2 >= Duration::from_millis(1200) && gap2 < Duration::from_millis(3500), "{gap2:?}");
    let d = wait_deliveries(&s, &id, Duration::from_secs(5), |d| d[0]["status"] == "succeeded").await;
    assert_eq!(d[0]["attempts"], 3);
    assert_eq!(d[0]["lastStatusCode"], 200);
    assert_eq!(endpoint(&s, &id).await["failureCount"], 0);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rx.hits().len(), 3, "no attempt after the acknowledgement");
    let outcomes = |o: &str| format!("gatehouse_webhook_deliveries_total{{outcome=\"{o}\"}}");
    assert_eq!(metric(&s, &outcomes("retry")).await, 2.0);
    assert_eq!(metric(&s, &outcomes("delivered")).await, 1.0);
    assert_eq!(metric(&s, "gatehouse_webhook_queue_depth").await, 0.0);

    // All three attempts fail: the delivery fails and counts once.
    rx.set_default(Reply::Status(500));
    send_test(&s, &id).await;
    // Between its attempts the delivery waits in the queue.
    wait_metric(&s, "gatehouse_webhook_queue_depth", Duration::from_secs(5), |v| v >= 1.0).await;
    let d = wait_deliveries(&s, &id, Duration::from_secs(15), |d| d[0]["status"] == "failed").await;
    assert_eq!(d[0]["attempts"], 3);
    assert_eq!(d[0]["lastStatusCode"], 500);
    assert_eq!(d[0]["lastError"], "HTTP 500");
    assert_eq!(endpoint(&s, &id).await["failureCount"], 1);
    assert_eq!(rx.hits().len(), 6);
    assert_eq!(metric(&s, &outcomes("retry")).await, 4.0);
    assert_eq!(metric(&s, &outcomes("failed")).await, 1.0);
    assert_eq!(metric(&s, &outcomes("delivered")).await, 1.0);
    wait_metric(&s, "gatehouse_webhook_queue_depth", Duration::from_secs(5), |v| v == 0.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_and_redirects_are_failures_and_redirects_are_not_followed() {
    let hang = Receiver::start(Reply::Hang).await;
    let target = Receiver::start(Reply::Status(200)).await;
    let redirect = Receiver::start(Reply::Redirect(target.url.clone())).await;
    let s = gateway("retry_delays_secs = [0]", 500, "");
    let (slow, _) = create(&s, &hang.url, json!(["*"])).await;
    let (moved, _) = create(&s, &redirect.url, json!(["*"])).await;
    let started = Instant::now();
    send_test(&s, &slow).await;
    send_test(&s, &moved).await;
    let d = wait_deliveries(&s, &slow, Duration::from_secs(10), |d| d[0]["status"] == "failed").await;
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_eq!(d[0]["attempts"], 1);
    assert_eq!(d[0]["lastStatusCode"], Value::Null);
    assert!(d[0]["lastError"].as_str().expect("error").contains("timed out"), "{}", d[0]);
    assert!(d[0]["lastLatencyMs"].as_u64().expect("latency") >= 500);
    let d = wait_deliveries(&s, &moved, Duration::from_secs(10), |d| d[0]["status"] == "failed").await;
    assert_eq!(d[0]["lastStatusCode"], 307);
    assert_eq!(redirect.hits().len(), 1);
    assert!(target.hits().is_empty(), "the redirect was followed");
    assert_eq!(endpoint(&s, &slow).await["failureCount"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_failed_deliveries_disable_and_re_enabling_resets_the_counter() {
    let rx = Receiver::start(Reply::Status(500)).await;
    // One attempt at a time, so which deliveries come after the 20th failure is known.
    let s = gateway("retry_delays_secs = [0]", 2000, "max_in_flight_per_endpoint = 1");
    let (id, _) = create(&s, &rx.url, json!(["*"])).await;
    for _ in 0..19 {
        send_test(&s, &id).await;
    }
    let e = wait_endpoint(&s, &id, Duration::from_secs(15), |e| e["failureCount"] == 19).await;
    assert_eq!(e["enabled"], true, "19 failures do not disable");
    // The 20th (answered slowly, so the next 5 queue up behind it) disables;
    // those queued behind it are cancelled, never sent (one may already be
    // in flight: it fails without counting).
    rx.set_default(Reply::After(Duration::from_millis(700), 500));
    for _ in 0..6 {
        send_test(&s, &id).await;
    }
    let e = wait_endpoint(&s, &id, Duration::from_secs(10), |e| e["enabled"] == false).await;
    assert_eq!(e["status"], "disabled");
    assert_eq!(e["failureCount"], 20);
    let reason = e["disabledReason"].as_str().expect("reason");
    assert!(reason.contains("20 consecutive") && reason.contains("HTTP 500"), "{reason}");
    assert!(e["disabledAt"].is_string());
    let d = wait_deliveries(&s, &id, Duration::from_secs(10), |d| d.len() == 25 && d.iter().all(|x| x["status"] != "pending")).await;
    let failed = d.iter().filter(|x| x["status"] == "failed").count();
    let cancelled = d.iter().filter(|x| x["status"] == "cancelled").count();
    assert!(cancelled >= 4 && failed + cancelled == 25, "{failed} failed, {cancelled} cancelled");
    assert_eq!(rx.hits().len(), failed, "nothing cancelled was sent");

    // Disabled: the test route refuses, nothing is delivered.
    let (st, v) = call(&s, Method::POST, &format!("/api/admin/webhooks/{id}/test"), None).await;
    assert_eq!(st, 409, "{v}");
    let (st, logs) = call(&s, Method::GET, "/audit-logs?type=webhook_management&search=auto_disable_webhook", None).await;
    assert_eq!(st, 200);
    assert_eq!(logs["data"]["logs"].as_array().expect("logs").len(), 1, "{logs}");
    assert_eq!(logs["data"]["logs"][0]["severity"], "warning");

    // Re-enable: the counter is back to 0 and deliveries flow again.
    let (st, v) = call(&s, Method::PUT, &format!("/api/admin/webhooks/{id}"), Some(json!({"enabled": true}))).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["data"]["failureCount"], 0);
    assert_eq!(v["data"]["status"], "enabled");
    assert_eq!(v["data"]["disabledReason"], Value::Null);
    rx.set_default(Reply::Status(200));
    let (_, delivery) = send_test(&s, &id).await;
    let hits = rx.wait_for(failed + 1, Duration::from_secs(10)).await;
    assert_eq!(hits.len(), failed + 1, "the cancelled deliveries stay cancelled");
    assert_eq!(hits[failed].header("x-gatehouse-delivery"), delivery);
    wait_deliveries(&s, &id, Duration::from_secs(5), |d| d[0]["status"] == "succeeded").await;
    assert_eq!(endpoint(&s, &id).await["failureCount"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_rotation_only_the_new_secret_verifies() {
    let rx = Receiver::start(Reply::Status(200)).await;
    let s = gateway("retry_delays_secs = [0, 1, 2]", 2000, "");
    let (id, old) = create(&s, &rx.url, json!(["*"])).await;
    send_test(&s, &id).await;
    let first = rx.wait_for(1, Duration::from_secs(10)).await.remove(0);
    assert!(verify(&old, first.header("x-gatehouse-signature"), &first.body));

    let (st, v) = call(&s, Method::POST, &format!("/api/admin/webhooks/{id}/rotate-secret"), None).await;
    assert_eq!(st, 200, "{v}");
    let new = v["data"]["secret"].as_str().expect("secret").to_owned();
    assert!(new.starts_with("whsec_") && new != old);
    assert_eq!(v["data"]["endpoint"]["id"], id.as_str());
    assert!(!endpoint(&s, &id).await.to_string().contains("whsec_"));

    send_test(&s, &id).await;
    let second = rx.wait_for(2, Duration::from_secs(10)).await.remove(1);
    let sig = second.header("x-gatehouse-signature");
    assert!(verify(&new, sig, &second.body), "the new secret must verify");
    assert!(!verify(&old, sig, &second.body), "the old secret must no longer verify");
    let (_, logs) = call(&s, Method::GET, "/audit-logs?type=webhook_management&search=rotate_webhook_secret", None).await;
    assert_eq!(logs["data"]["logs"].as_array().expect("logs").len(), 1);
    assert_eq!(logs["data"]["logs"][0]["complianceCategory"], "data_protection");
    let log = s.log();
    assert!(!log.contains(&old) && !log.contains(&new), "a secret is in the server log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_targets_are_refused_without_the_setting() {
    let s = Server::builder().start();
    for url in [
        "http://127.0.0.1:9/hook",
        "http://2130706433/",
        "http://0x7f.1/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:0:127.0.0.1]/",
        "http://[::ffff:0:a00:1]/",
        "http://localhost:8080/",
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://evil@127.0.0.1/",
        "file:///etc/passwd",
    ] {
        let (st, v) = call(&s, Method::POST, "/api/admin/webhooks", Some(json!({"url": url, "events": ["*"]}))).await;
        assert_eq!(st, 400, "{url}: {v}");
        assert_eq!(v["error"]["code"], "VALIDATION_ERROR");
        assert!(v["error"]["message"].as_str().expect("msg").starts_with("`url`"), "{v}");
    }
    let (st, list) = call(&s, Method::GET, "/api/admin/webhooks", None).await;
    assert_eq!(st, 200);
    assert_eq!(list["data"]["endpoints"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_endpoint_does_not_delay_a_healthy_one() {
    let dead = Receiver::start(Reply::Hang).await;
    let alive = Receiver::start(Reply::Status(200)).await;
    let s = gateway("retry_delays_secs = [0, 10]", 5000, "");
    let (dead_id, _) = create(&s, &dead.url, json!(["*"])).await;
    let (alive_id, _) = create(&s, &alive.url, json!(["*"])).await;
    for _ in 0..30 {
        send_test(&s, &dead_id).await;
    }
    dead.wait_for(8, Duration::from_secs(5)).await;
    let t0 = Instant::now();
    send_test(&s, &alive_id).await;
    alive.wait_for(1, Duration::from_secs(5)).await;
    let took = t0.elapsed();
    assert!(took < Duration::from_millis(1500), "a healthy endpoint waited {took:?} behind a dead one");
    // The dead endpoint holds at most its in-flight limit (8 by default) of connections.
    assert_eq!(dead.hits().len(), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_events_fan_out_to_subscribed_endpoints() {
    let all = Receiver::start(Reply::Status(200)).await;
    let limits = Receiver::start(Reply::Status(200)).await;
    let other = Receiver::start(Reply::Status(200)).await;
    // One admin read per minute: the second `/audit-logs` is refused and
    // fires `api:limit_reached` through the outbox.
    let s = Server::builder()
        .env("WEBHOOKS_ALLOW_PRIVATE", "true")
        .toml("[limits.admin_read]\nper_minute = 1\nper_hour = 1000\nper_day = 1000\nper_month = 1000\n[webhooks]\npoll_interval_ms = 50")
        .start();
    let (all_id, all_secret) = create(&s, &all.url, json!(["*"])).await;
    create(&s, &limits.url, json!(["api:limit_reached"])).await;
    let (other_id, _) = create(&s, &other.url, json!(["dlp:incident", "pii:incident"])).await;
    // Both reads in one minute window.
    windows::room_in_window(windows::MINUTE, Duration::from_secs(20)).await;
    let (st, _) = call(&s, Method::GET, "/audit-logs", None).await;
    assert_eq!(st, 200);
    let (st, _) = call(&s, Method::GET, "/audit-logs", None).await;
    assert_eq!(st, 429);

    let a = all.wait_for(1, Duration::from_secs(10)).await.remove(0);
    let l = limits.wait_for(1, Duration::from_secs(10)).await.remove(0);
    for h in [&a, &l] {
        assert_eq!(h.header("x-gatehouse-event"), "api:limit_reached");
        let body = h.json();
        assert_eq!(body["type"], "api:limit_reached");
        assert!(body["id"].as_str().expect("id").starts_with("evt_"));
    }
    assert!(verify(&all_secret, a.header("x-gatehouse-signature"), &a.body));
    assert_eq!(a.json()["id"], l.json()["id"], "one event, one id");
    assert_ne!(a.header("x-gatehouse-delivery"), l.header("x-gatehouse-delivery"), "one delivery per endpoint");
    // The outbox view shows the same event.
    let (_, events) = call(&s, Method::GET, "/api/admin/events?type=api:limit_reached", None).await;
    assert_eq!(events["data"][0]["event"]["id"], a.json()["id"]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(other.hits().is_empty(), "an endpoint got an event it did not subscribe to");
    assert!(deliveries(&s, &other_id).await.is_empty());
    assert_eq!(deliveries(&s, &all_id).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_survive_sigkill_and_duplicates_keep_their_delivery_id() {
    // Slow acknowledgements, so deliveries are in flight when the server dies.
    let rx = Receiver::start(Reply::After(Duration::from_millis(1500), 200)).await;
    let mut s = Server::builder()
        .env("WEBHOOKS_ALLOW_PRIVATE", "true")
        .toml("[limits.admin_read]\nper_minute = 1\nper_hour = 1000\nper_day = 1000\nper_month = 1000\n[webhooks]\nretry_delays_secs = [0, 1, 1]\ntimeout_ms = 5000\npoll_interval_ms = 50")
        .start();
    let (id, secret) = create(&s, &rx.url, json!(["*"])).await;
    // Seven events through the outbox (one admin read per minute: each key's
    // second `/audit-logs` fires `api:limit_reached`), committed before the crash ...
    let mut keys = vec![s.admin_key.clone()];
    for _ in 0..6 {
        keys.push(s.create_key(json!({"admin": true})).await.1);
    }
    // Each key's two reads in one minute window.
    windows::room_in_window(windows::MINUTE, Duration::from_secs(20)).await;
    for key in &keys {
        for expected in [200, 429] {
            let r = s.client.get(s.url("/audit-logs")).bearer_auth(key).send().await.expect("send");
            assert_eq!(r.status(), expected);
        }
    }
    // ... and twelve test deliveries.
    let mut expected: HashMap<String, String> = HashMap::new(); // event id → delivery id
    for _ in 0..12 {
        let (event, delivery) = send_test(&s, &id).await;
        expected.insert(event, delivery);
    }
    rx.wait_for(3, Duration::from_secs(10)).await;
    s.kill9();
    let before = rx.hits().len();
    assert!(before < 19, "everything arrived before the kill ({before}); the test proves nothing");
    s.restart();

    // Every event arrives (at least once) and is acknowledged after the restart.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let d = deliveries(&s, &id).await;
        if d.len() == 19 && d.iter().all(|x| x["status"] == "succeeded") {
            break;
        }
        assert!(Instant::now() < deadline, "not all deliveries succeeded after the restart: {d:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let hits = rx.hits();
    let mut by_event: HashMap<String, Vec<String>> = HashMap::new();
    for h in &hits {
        assert!(verify(&secret, h.header("x-gatehouse-signature"), &h.body));
        let event = h.json()["id"].as_str().expect("id").to_owned();
        by_event.entry(event).or_default().push(h.header("x-gatehouse-delivery").to_owned());
    }
    assert_eq!(by_event.len(), 19, "every committed event arrives");
    let mut duplicates = 0;
    for (event, ids) in &by_event {
        assert!(ids.iter().all(|d| d == &ids[0]), "{event} arrived with different delivery ids: {ids:?}");
        if let Some(d) = expected.get(event) {
            assert_eq!(&ids[0], d);
        }
        duplicates += ids.len() - 1;
    }
    assert!(duplicates >= 1, "deliveries in flight at the kill were sent again");
    assert!(
        by_event.iter().any(|(e, ids)| !expected.contains_key(e) && ids.len() > 1),
        "an outbox event in flight at the kill was sent again, with the same delivery id"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delivery_is_retried_by_an_admin_with_the_same_id_and_attempts_afresh() {
    // The receiver fails until told otherwise.
    let rx = Receiver::start(Reply::Status(500)).await;
    let s = gateway("retry_delays_ms = [0, 100]", 2000, "");
    let (id, secret) = create(&s, &rx.url, json!(["*"])).await;
    let (_, delivery_id) = send_test(&s, &id).await;
    let retry = format!("/api/admin/webhooks/{id}/deliveries/{delivery_id}/retry");
    let d = wait_deliveries(&s, &id, Duration::from_secs(10), |d| d.first().is_some_and(|x| x["status"] != "pending")).await;
    assert_eq!(
        (d[0]["id"].as_str(), &d[0]["status"], &d[0]["attempts"], &d[0]["retries"]),
        (Some(delivery_id.as_str()), &json!("failed"), &json!(2), &json!(0))
    );
    assert_eq!(rx.hits().len(), 2);

    // Unknown ids are 404; a non-admin key is 403 whatever the ids.
    let (st, v) =
        call(&s, Method::POST, &format!("/api/admin/webhooks/{id}/deliveries/00000000-0000-8000-8000-000000000000/retry"), None).await;
    assert_eq!((st, &v["error"]["code"]), (404, &json!("NOT_FOUND")), "{v}");
    let (st, _) = call(&s, Method::POST, &format!("/api/admin/webhooks/wh_none/deliveries/{delivery_id}/retry"), None).await;
    assert_eq!(st, 404);
    let (_, plain, _) = s.create_key(json!({"name": "not an admin"})).await;
    let r = s.client.post(s.url(&retry)).bearer_auth(&plain).send().await.expect("send");
    assert_eq!(r.status(), 403);

    // The retry: accepted, and still refused while the delivery is pending again.
    rx.set_default(Reply::Status(200));
    let (st, v) = call(&s, Method::POST, &retry, None).await;
    assert_eq!(st, 202, "{v}");
    assert_eq!(
        (&v["data"]["id"], &v["data"]["status"], &v["data"]["attempts"], &v["data"]["retries"]),
        (&json!(delivery_id), &json!("pending"), &json!(0), &json!(1))
    );
    let d = wait_deliveries(&s, &id, Duration::from_secs(10), |d| d[0]["status"] == "succeeded").await;
    assert_eq!((&d[0]["attempts"], &d[0]["retries"], &d[0]["lastStatusCode"]), (&json!(1), &json!(1), &json!(200)));
    let hits = rx.hits();
    assert_eq!(hits.len(), 3);
    for h in &hits {
        assert_eq!(h.header("x-gatehouse-delivery"), delivery_id, "receivers deduplicate on it");
        assert_eq!(h.body, hits[0].body, "the same bytes");
        assert!(verify(&secret, h.header("x-gatehouse-signature"), &h.body));
    }
    // Delivered: a second retry is a conflict, and nothing is sent.
    let (st, v) = call(&s, Method::POST, &retry, None).await;
    assert_eq!((st, &v["error"]["code"]), (409, &json!("CONFLICT")), "{v}");
    assert!(v["error"]["message"].as_str().is_some_and(|m| m.contains("succeeded")), "{v}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rx.hits().len(), 3);

    // Audited, naming the delivery.
    let (st, v) = call(&s, Method::GET, "/audit-logs?type=webhook_management&limit=100", None).await;
    assert_eq!(st, 200, "{v}");
    let text = v.to_string();
    assert!(text.contains("retry_webhook_delivery") && text.contains(&delivery_id), "{v:#}");
}
