//! What a failover costs beyond the upstream's own answer time.
//!
//! Against the mock upstream on loopback, with the release gateway:
//! * A: a chain `[openai/fail500-x, openai/ok-y]` (one failed attempt, then an answer);
//! * B: `[openai/ok-y]` alone;
//! * C: the mock's own time to answer the 500, measured directly.
//!   The overhead of failing over is A − B − C (medians over many requests).
//!
//! Run: `cargo bench -p gatehouse-tests --bench failover`

use std::time::{Duration, Instant};

use gatehouse_tests::Server;
use gatehouse_tests::mock_upstream::MockUpstream;
use serde_json::json;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[(v.len() * 99) / 100]
}

#[tokio::main]
async fn main() {
    let mock = MockUpstream::start().await;
    let s = Server::builder()
        .plugin(gatehouse_tests::plugins::OPEN_POLICY, "open.wasm")
        .toml(&format!(
            "durable_writes = false\n[policies]\ndefault = \"open\"\n[upstream]\nbreaker_failures = 1000000\n\
             [providers.openai]\nplugin = \"provider-openai\"\nbase_url = \"{}\"\n",
            mock.openai_base_url()
        ))
        .start();
    let client = reqwest::Client::new();
    let n = 2000;
    let run = |models: serde_json::Value| {
        let client = client.clone();
        let url = s.url("/chat/completions");
        let key = s.admin_key.clone();
        async move {
            let mut out = Vec::with_capacity(n);
            for i in 0..n + 200 {
                let t = Instant::now();
                let r = client
                    .post(&url)
                    .bearer_auth(&key)
                    .json(&json!({"index": "Zero-Knowledge", "models": models, "prompt": "hi"}))
                    .send()
                    .await
                    .expect("send");
                assert_eq!(r.status(), 200);
                let _ = r.bytes().await;
                if i >= 200 {
                    out.push(t.elapsed());
                }
            }
            out
        }
    };
    let direct_500 = {
        let url = format!("{}/chat/completions", mock.openai_base_url());
        let mut out = Vec::with_capacity(n);
        for i in 0..n + 200 {
            let t = Instant::now();
            let r = client
                .post(&url)
                .json(&json!({"model": "fail500-x", "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .expect("send");
            let _ = r.bytes().await;
            if i >= 200 {
                out.push(t.elapsed());
            }
        }
        out
    };
    let a = run(json!(["openai/fail500-x", "openai/ok-y"])).await;
    let b = run(json!(["openai/ok-y"])).await;
    let (ma, mb, mc) = (median(a.clone()), median(b.clone()), median(direct_500));
    let overhead = ma.saturating_sub(mb).saturating_sub(mc);
    println!("chain with one failover (A): median {:?}, p99 {:?}", ma, p99(a));
    println!("single model (B):            median {:?}, p99 {:?}", mb, p99(b));
    println!("mock answering the 500 (C):  median {:?}", mc);
    println!("failover overhead A - B - C: median {:?}  (target < 1 ms)", overhead);
}
