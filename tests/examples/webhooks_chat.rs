//! Chat latency with and without 20 webhook endpoints that never answer
//! (issue 9: the p99 may not rise by more than 10 %).
//!
//! The release gateway with durable writes, the mock upstream, and a chain
//! `[openai/fail500-x, openai/ok-y]`: every request fails over once, so every
//! request commits an `api:model_failover` event to the outbox. In the "with"
//! rounds, 20 endpoints subscribed to `*` hang (5 s timeout, 8 connections
//! each, retries queued), so every request adds 20 deliveries for the
//! dispatcher. Rounds alternate without/with so drift of the machine hits
//! both sides alike.
//!
//! Run: `cargo run --release -p gatehouse-tests --example webhooks_chat [-- REQUESTS]`

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use gatehouse_tests::Server;
use gatehouse_tests::mock_upstream::MockUpstream;
use serde_json::{Value, json};

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p) as usize]
}

async fn hanging_receiver() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let app = axum::Router::new().fallback(|| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        StatusCode::OK
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

async fn round(s: &Server, client: &reqwest::Client, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n + 100 {
        let t = Instant::now();
        let r = client
            .post(s.url("/chat/completions"))
            .bearer_auth(&s.admin_key)
            .json(&json!({"index": "Zero-Knowledge", "models": ["openai/fail500-x", "openai/ok-y"], "prompt": "hi"}))
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 200);
        let _ = r.bytes().await;
        if i >= 100 {
            out.push(t.elapsed());
        }
    }
    out
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let mock = MockUpstream::start().await;
    let s = Server::builder()
        .plugin(gatehouse_tests::plugins::OPEN_POLICY, "open.wasm")
        .env("WEBHOOKS_ALLOW_PRIVATE", "true")
        .toml(&format!(
            "[policies]\ndefault = \"open\"\n[upstream]\nbreaker_failures = 1000000\n\
             [providers.openai]\nplugin = \"provider-openai\"\nbase_url = \"{}\"\n",
            mock.openai_base_url()
        ))
        .start();
    let client = reqwest::Client::new();
    let mut hang_urls = Vec::new();
    for _ in 0..20 {
        hang_urls.push(hanging_receiver().await);
    }
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for r in 0..3 {
        let mut a = round(&s, &client, n).await;
        let mut ids = Vec::new();
        for url in &hang_urls {
            let v: Value = s
                .admin(reqwest::Method::POST, "/api/admin/webhooks")
                .json(&json!({"url": url, "events": ["*"]}))
                .send()
                .await
                .expect("create")
                .json()
                .await
                .expect("json");
            ids.push(v["data"]["endpoint"]["id"].as_str().expect("id").to_owned());
        }
        let mut b = round(&s, &client, n).await;
        for id in &ids {
            let _ = s.admin(reqwest::Method::DELETE, &format!("/api/admin/webhooks/{id}")).send().await;
        }
        println!(
            "round {r}: without endpoints p50 {:?} p99 {:?} | with 20 hanging p50 {:?} p99 {:?}",
            pct(&mut a, 0.5),
            pct(&mut a, 0.99),
            pct(&mut b, 0.5),
            pct(&mut b, 0.99)
        );
        without.push(pct(&mut a, 0.99));
        with.push(pct(&mut b, 0.99));
    }
    without.sort();
    with.sort();
    println!(
        "median of the rounds' p99: without {:?}, with 20 hanging endpoints {:?} ({:+.1} %)",
        without[1],
        with[1],
        (with[1].as_secs_f64() / without[1].as_secs_f64() - 1.0) * 100.0
    );
}
