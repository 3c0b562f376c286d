//! Webhook delivery benchmark (not a test): a real dispatcher over a durable
//! redb store (fsync on every commit) delivering to receivers on loopback.
//!
//! Run: `cargo run --release -p gatehouse --example webhooks_bench [-- EVENTS]`
//!
//! 1. Throughput: EVENTS outbox events (default 5000) to 1 endpoint, then to
//!    10 endpoints (EVENTS/10 events, so EVENTS deliveries), timed from the first commit to
//!    the last acknowledgement; deliveries per second.
//! 2. Isolation: 1,000 single-event outbox commits, 5 ms apart (the commit a
//!    chat request makes for its events, through the shared group-commit
//!    writer), with no endpoints and then with 20 endpoints that never answer
//!    (5 s timeout, 8 connections each) plus one healthy endpoint. Prints the
//!    commit latency p50/p99 and the healthy endpoint's commit-to-arrival latency.
//!    The chat-level figure (chat p99 with and without 20 hanging endpoints)
//!    needs the chat path; see the webhooks section of the README.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use gatehouse::config::Config;
use gatehouse::webhooks::{WebhookSecret, Webhooks};
use gatehouse_store::Store;
use gatehouse_store::audit::{Audit, category, kind};
use gatehouse_store::records::OutboxEvent;
use gatehouse_store::redb::RedbStore;
use gatehouse_store::webhooks::{Endpoint, WebhookStore};

fn clock() -> &'static Instant {
    static T0: OnceLock<Instant> = OnceLock::new();
    T0.get_or_init(Instant::now)
}

#[derive(Clone, Default)]
struct Rx {
    hits: Arc<AtomicUsize>,
    /// Commit-to-arrival latencies (µs), from `data.sentUs`.
    latencies: Arc<Mutex<Vec<u64>>>,
    hang: bool,
}

async fn receive(State(rx): State<Rx>, body: Bytes) -> StatusCode {
    if rx.hang {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    let now = clock().elapsed().as_micros() as u64;
    let sent = serde_json::from_slice::<serde_json::Value>(&body).ok().and_then(|v| v["data"]["sentUs"].as_u64());
    if let (Some(sent), Ok(mut l)) = (sent, rx.latencies.lock()) {
        l.push(now.saturating_sub(sent));
    }
    rx.hits.fetch_add(1, Ordering::Relaxed);
    StatusCode::NO_CONTENT
}

async fn receiver(hang: bool) -> (String, Rx) {
    let rx = Rx { hang, ..Rx::default() };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let app = axum::Router::new().fallback(receive).with_state(rx.clone());
    #[expect(clippy::disallowed_methods, reason = "a benchmark's receiver, dropped with its runtime")]
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, rx)
}

/// A durable store with an endpoint (subscribed to `*`) per URL, and the dispatcher.
async fn setup(poll_ms: u64, urls: &[String]) -> (tempfile::TempDir, Arc<RedbStore>, Arc<Webhooks>) {
    let dir = tempfile::tempdir().expect("tmp");
    let store = Arc::new(RedbStore::open(dir.path(), true).expect("store"));
    store.prepare_webhooks().await.expect("tables");
    for (n, url) in urls.iter().enumerate() {
        add_endpoint(&store, n, url).await;
    }
    let mut config = Config::default();
    config.webhooks.allow_private = true;
    config.webhooks.poll_interval_ms = poll_ms;
    let config = Arc::new(ArcSwap::from_pointee(config));
    let wh = Webhooks::start(store.clone(), config).await.expect("webhooks");
    (dir, store, wh)
}

async fn add_endpoint(store: &RedbStore, n: usize, url: &str) {
    let now = chrono::Utc::now();
    let ep = Endpoint {
        id: format!("wh_bench_{n}"),
        url: url.to_owned(),
        description: String::new(),
        events: vec!["*".into()],
        enabled: true,
        failure_count: 0,
        disabled_reason: None,
        disabled_at: None,
        created_at: now,
        updated_at: now,
    };
    let audit = Audit::new(kind::WEBHOOK_MANAGEMENT, category::SYSTEM_INTEGRITY, "bench").build();
    store.create_endpoint(ep, WebhookSecret::generate().into(), audit).await.expect("endpoint");
}

fn event() -> OutboxEvent {
    OutboxEvent::new(
        "api:model_failover",
        serde_json::json!({
            "failedModel": "openai/gpt-4o", "reason": "timeout", "nextModel": "anthropic/claude",
            "latencyMs": 5000, "userId": "usr_bench", "apiKeyId": "key_bench",
            "sentUs": clock().elapsed().as_micros() as u64,
        }),
    )
}

async fn throughput(events: usize, endpoints: usize) {
    let (mut urls, mut rxs) = (Vec::new(), Vec::new());
    for _ in 0..endpoints {
        let (url, rx) = receiver(false).await;
        urls.push(url);
        rxs.push(rx);
    }
    let (_dir, store, wh) = setup(20, &urls).await;
    let total = events * endpoints;
    let t0 = Instant::now();
    for chunk in (0..events).collect::<Vec<_>>().chunks(100) {
        let batch = chunk.iter().map(|_| event()).collect();
        store.enqueue_events(batch, Vec::new()).await.expect("enqueue");
        wh.notify();
    }
    loop {
        let done: usize = rxs.iter().map(|r| r.hits.load(Ordering::Relaxed)).sum();
        if done >= total {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(600), "stalled at {done}/{total}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "throughput: {total:>6} deliveries to {endpoints:>2} endpoint(s) in {secs:>6.2} s = {:>7.0} deliveries/s",
        total as f64 / secs
    );
    wh.shutdown().await;
}

fn pct(v: &mut [u64], p: f64) -> f64 {
    v.sort_unstable();
    v.get(((v.len().saturating_sub(1)) as f64 * p) as usize).copied().unwrap_or(0) as f64 / 1000.0
}

/// Commit latencies as a chat request sees them (default poll interval; the
/// chat path does not call `notify`).
async fn isolation(hanging: usize) -> (f64, f64) {
    let (url, healthy) = receiver(false).await;
    let mut urls = Vec::new();
    if hanging > 0 {
        urls.push(url);
    }
    for _ in 0..hanging {
        urls.push(receiver(true).await.0);
    }
    let (_dir, store, wh) = setup(100, &urls).await;
    let mut commits = Vec::with_capacity(1000);
    for _ in 0..1000 {
        let t = Instant::now();
        store.enqueue_events(vec![event()], Vec::new()).await.expect("enqueue");
        commits.push(t.elapsed().as_micros() as u64);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let label = if hanging > 0 { format!("{hanging} hanging endpoints + 1 healthy") } else { "no endpoints".to_owned() };
    let (p50, p99) = (pct(&mut commits, 0.5), pct(&mut commits, 0.99));
    print!("outbox commit, {label:<32}: p50 {p50:>6.2} ms  p99 {p99:>6.2} ms");
    if hanging > 0 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut lat = healthy.latencies.lock().map(|l| l.clone()).unwrap_or_default();
        print!(
            "   healthy endpoint got {}/1000, commit→arrival p50 {:.2} ms p99 {:.2} ms",
            lat.len(),
            pct(&mut lat, 0.5),
            pct(&mut lat, 0.99)
        );
    }
    println!();
    wh.shutdown().await;
    (p50, p99)
}

#[tokio::main]
async fn main() {
    let events: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5000);
    clock();
    throughput(events, 1).await;
    throughput(events / 10, 10).await;
    // Interleaved rounds, so drift of the machine hits both sides alike.
    let (mut base, mut hang) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        base.push(isolation(0).await.1);
        hang.push(isolation(20).await.1);
    }
    base.sort_by(f64::total_cmp);
    hang.sort_by(f64::total_cmp);
    println!(
        "median of 3 rounds: commit p99 {:.2} ms without endpoints, {:.2} ms with 20 hanging ({:+.0} %)",
        base[1],
        hang[1],
        (hang[1] / base[1] - 1.0) * 100.0
    );
}
