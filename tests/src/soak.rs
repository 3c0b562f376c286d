//! Soak: mixed traffic at a fixed rate for a fixed time against the real
//! server, watching for unexpected errors, resident-memory growth and
//! file-descriptor leaks. Used by `tests/examples/soak.rs`.
//!
//! The mix, per request (open loop: a request starts every `1/rate` seconds
//! whether or not the previous ones finished):
//! - 30 % plain chat completions, 25 % streamed ones (mock upstream, a few
//!   milliseconds between deltas);
//! - 20 % failover chains (`fail500` then `ok`): each commits an
//!   `api:model_failover` event that goes out to a webhook receiver;
//! - 15 % retrieval-augmented chats on a knowledge base (the bundled one when
//!   the server has it, otherwise `Zero-Knowledge`);
//! - 5 % idempotent retries (the same key and body twice: the second must replay);
//! - 5 % admin reads and webhook test deliveries.
//!
//! Every answer must be 2xx (a complete stream ending in `[DONE]`); anything
//! else is an unexpected error. Resident memory (`VmRSS`) and open file
//! descriptors of the server are read from `/proc` after the warm-up and at
//! the end.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use reqwest::Method;
use serde_json::{Value, json};

use crate::Server;
use crate::mock_upstream::{MockOptions, MockUpstream};
use crate::procfs;

#[derive(Debug, Clone)]
pub struct Options {
    pub duration: Duration,
    /// Requests per second.
    pub rate: u32,
    /// Memory and descriptors are first measured after this.
    pub warmup: Duration,
    /// Requests allowed in flight before a tick counts as an error (the server fell behind).
    pub max_in_flight: usize,
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub seconds: u64,
    pub rate: u32,
    pub requests: u64,
    pub unexpected: u64,
    pub index: String,
    pub rss_warm_kib: u64,
    pub rss_end_kib: u64,
    pub rss_max_kib: u64,
    pub fds_warm: usize,
    pub fds_end: usize,
    pub failover_events: usize,
    pub events_delivered: usize,
    pub p50_ms: u64,
    pub p99_ms: u64,
    /// The first few unexpected answers, for the log.
    pub samples: Vec<String>,
}

impl Report {
    pub fn rss_growth_pct(&self) -> f64 {
        (self.rss_end_kib as f64 / self.rss_warm_kib.max(1) as f64 - 1.0) * 100.0
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "soak: {} s at {} req/s, index {:?}: {} requests, {} unexpected errors",
            self.seconds, self.rate, self.index, self.requests, self.unexpected
        )?;
        writeln!(f, "  latency p50 {} ms, p99 {} ms", self.p50_ms, self.p99_ms)?;
        writeln!(
            f,
            "  RSS after warm-up {} KiB, at the end {} KiB ({:+.1} %), max {} KiB",
            self.rss_warm_kib,
            self.rss_end_kib,
            self.rss_growth_pct(),
            self.rss_max_kib
        )?;
        writeln!(f, "  open fds after warm-up {}, at the end {}", self.fds_warm, self.fds_end)?;
        write!(f, "  webhooks: {} failover events in the outbox, {} delivered to the receiver", self.failover_events, self.events_delivered)
    }
}

#[derive(Clone, Default)]
struct Receiver {
    ids: Arc<Mutex<HashSet<String>>>,
}

async fn receive(State(r): State<Receiver>, body: Bytes) -> StatusCode {
    if let Some(id) = serde_json::from_slice::<Value>(&body).ok().and_then(|v| v["id"].as_str().map(str::to_owned)) {
        r.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(id);
    }
    StatusCode::OK
}

#[derive(Default)]
struct Tally {
    requests: AtomicU64,
    unexpected: AtomicU64,
    samples: Mutex<Vec<String>>,
    latencies_ms: Mutex<Vec<u64>>,
}

impl Tally {
    fn bad(&self, what: String) {
        self.unexpected.fetch_add(1, Ordering::Relaxed);
        let mut s = self.samples.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if s.len() < 10 {
            s.push(what);
        }
    }
}

/// Shared by the request tasks.
struct Ctx {
    client: reqwest::Client,
    base: String,
    key: String,
    index: String,
    endpoint: String,
    tally: Tally,
    seq: AtomicU64,
}

pub async fn run(opts: Options) -> Result<Report> {
    let mock = MockUpstream::start_with(MockOptions { chunk_delay: Duration::from_millis(2), ..MockOptions::default() }).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let hook_url = format!("http://{}/hook", listener.local_addr()?);
    let receiver = Receiver::default();
    let app = axum::Router::new().fallback(receive).with_state(receiver.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let mut s = Server::builder()
        .env("WEBHOOKS_ALLOW_PRIVATE", "true")
        .env("RUST_LOG", "warn")
        .toml(&format!(
            "[webhooks]\npoll_interval_ms = 100\n[upstream]\nbreaker_failures = 1000000000\n\
             [providers.openai]\nplugin = \"provider-openai\"\nbase_url = \"{}\"\nmodels = [\"openai/*\"]\n",
            mock.openai_base_url()
        ))
        .start();
    let pid = s.pid().ok_or_else(|| anyhow!("no server pid"))?;
    let endpoint: Value =
        s.admin(Method::POST, "/api/admin/webhooks").json(&json!({"url": hook_url, "events": ["*"]})).send().await?.json().await?;
    let endpoint = endpoint["data"]["endpoint"]["id"].as_str().ok_or_else(|| anyhow!("no endpoint id: {endpoint}"))?.to_owned();
    let indexes: Value = s.admin(Method::GET, "/api/indexes").send().await?.json().await?;
    let index = first_index(&indexes).unwrap_or_else(|| "Zero-Knowledge".to_owned());

    let ctx = Arc::new(Ctx {
        client: reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?,
        base: s.base_url.clone(),
        key: s.admin_key.clone(),
        index: index.clone(),
        endpoint,
        tally: Tally::default(),
        seq: AtomicU64::new(0),
    });
    let in_flight = Arc::new(tokio::sync::Semaphore::new(opts.max_in_flight));
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(opts.rate.max(1))));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut warm: Option<(u64, usize)> = None;
    let mut rss_max = 0;
    let mut last_sample = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < opts.duration {
        tick.tick().await;
        n += 1;
        if last_sample.elapsed() >= Duration::from_secs(5) {
            last_sample = Instant::now();
            rss_max = rss_max.max(procfs::rss_kib(pid).unwrap_or(0));
            if warm.is_none() && started.elapsed() >= opts.warmup {
                warm = Some((procfs::rss_kib(pid).unwrap_or(0), procfs::fd_count(pid).unwrap_or(0)));
                println!(
                    "soak: warm-up over after {} s: RSS {} KiB, {} fds",
                    started.elapsed().as_secs(),
                    warm.unwrap_or_default().0,
                    warm.unwrap_or_default().1
                );
            }
            if started.elapsed().as_secs() % 60 < 5 {
                println!(
                    "soak: {:>4} s, {} requests, {} unexpected, RSS {} KiB, {} fds",
                    started.elapsed().as_secs(),
                    ctx.tally.requests.load(Ordering::Relaxed),
                    ctx.tally.unexpected.load(Ordering::Relaxed),
                    procfs::rss_kib(pid).unwrap_or(0),
                    procfs::fd_count(pid).unwrap_or(0)
                );
            }
        }
        let Ok(permit) = in_flight.clone().try_acquire_owned() else {
            ctx.tally.bad(format!("more than {} requests in flight: the server fell behind", opts.max_in_flight));
            continue;
        };
        let ctx = ctx.clone();
        tokio::spawn(async move {
            one(&ctx, n).await;
            drop(permit);
        });
    }
    // Let the last requests finish, then measure.
    let _ = in_flight.acquire_many(opts.max_in_flight as u32).await;
    let (rss_warm, fds_warm) = warm.unwrap_or_default();
    let rss_end = procfs::rss_kib(pid).unwrap_or(0);
    let fds_end = procfs::fd_count(pid).unwrap_or(0);

    // Every failover event of the outbox reaches the receiver.
    let failover_ids = outbox_ids(&s, "api:model_failover").await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let delivered = loop {
        let got = receiver.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let delivered = failover_ids.iter().filter(|id| got.contains(*id)).count();
        if delivered == failover_ids.len() || Instant::now() > deadline {
            break delivered;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    for _ in delivered..failover_ids.len() {
        ctx.tally.bad("a failover event was never delivered".into());
    }
    let mut lat = ctx.tally.latencies_ms.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    lat.sort_unstable();
    let pct = |p: f64| lat.get(((lat.len().saturating_sub(1)) as f64 * p) as usize).copied().unwrap_or(0);
    let report = Report {
        seconds: started.elapsed().as_secs(),
        rate: opts.rate,
        requests: ctx.tally.requests.load(Ordering::Relaxed),
        unexpected: ctx.tally.unexpected.load(Ordering::Relaxed),
        index,
        rss_warm_kib: rss_warm,
        rss_end_kib: rss_end,
        rss_max_kib: rss_max.max(rss_end),
        fds_warm,
        fds_end,
        failover_events: failover_ids.len(),
        events_delivered: delivered,
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
        samples: ctx.tally.samples.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone(),
    };
    s.terminate();
    Ok(report)
}

/// A knowledge base the server lists, if any.
fn first_index(v: &Value) -> Option<String> {
    let list = v["data"].as_array().or_else(|| v["data"]["indexes"].as_array()).or_else(|| v["indexes"].as_array())?;
    list.iter().filter_map(|ix| ix["name"].as_str().or_else(|| ix.as_str())).find(|n| *n != "Zero-Knowledge").map(str::to_owned)
}

async fn outbox_ids(s: &Server, kind: &str) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    let mut after = 0;
    loop {
        let v: Value =
            s.admin(Method::GET, &format!("/api/admin/events?after={after}&limit=1000&type={kind}")).send().await?.json().await?;
        let page = v["data"].as_array().cloned().ok_or_else(|| anyhow!("bad events answer: {v}"))?;
        let Some(last) = page.last().and_then(|e| e["seq"].as_u64()) else { break };
        after = last;
        ids.extend(page.iter().filter_map(|e| e["event"]["id"].as_str().map(str::to_owned)));
    }
    Ok(ids)
}

/// One request of the mix.
async fn one(ctx: &Ctx, n: u64) {
    let started = Instant::now();
    let pick = n % 20;
    let what;
    let result = match pick {
        0..=5 => {
            what = "chat";
            chat(ctx, json!({"index": "Zero-Knowledge", "model": "openai/ok-soak", "prompt": format!("soak {n} hello there")}), None).await
        }
        6..=10 => {
            what = "stream";
            chat(ctx, json!({"index": "Zero-Knowledge", "model": "openai/ok-soak", "prompt": format!("soak {n} stream me a few words"), "stream": true}), None)
                .await
        }
        11..=14 => {
            what = "failover";
            chat(
                ctx,
                json!({"index": "Zero-Knowledge", "models": ["openai/fail500-soak", "openai/ok-soak"], "prompt": format!("soak {n}")}),
                None,
            )
            .await
        }
        15..=17 => {
            what = "rag";
            chat(
                ctx,
                json!({"index": ctx.index, "model": "openai/ok-soak", "prompt": format!("soak {n}: how do I rotate a webhook secret?")}),
                None,
            )
            .await
        }
        18 => {
            what = "idempotent retry";
            let key = format!("soak-{}-{n}", ctx.seq.fetch_add(1, Ordering::Relaxed));
            let body = json!({"index": "Zero-Knowledge", "model": "openai/ok-soak", "prompt": format!("soak {n} once")});
            match chat(ctx, body.clone(), Some(&key)).await {
                Ok(first) => match chat(ctx, body, Some(&key)).await {
                    Ok(second) if second == first => Ok(String::new()),
                    Ok(_) => Err("the retry did not replay the first answer".to_owned()),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            }
        }
        _ => {
            if n % 40 == 19 {
                what = "webhook test";
                let r =
                    ctx.client.post(format!("{}/api/admin/webhooks/{}/test", ctx.base, ctx.endpoint)).bearer_auth(&ctx.key).send().await;
                expect(r, 202).await
            } else {
                what = "admin read";
                let r = ctx.client.get(format!("{}/audit-logs?limit=5", ctx.base)).bearer_auth(&ctx.key).send().await;
                expect(r, 200).await
            }
        }
    };
    ctx.tally.requests.fetch_add(1, Ordering::Relaxed);
    ctx.tally.latencies_ms.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(started.elapsed().as_millis() as u64);
    if let Err(e) = result {
        ctx.tally.bad(format!("{what}: {e}"));
    }
}

async fn expect(r: reqwest::Result<reqwest::Response>, status: u16) -> Result<String, String> {
    let r = r.map_err(|e| e.to_string())?;
    let got = r.status().as_u16();
    let text = r.text().await.map_err(|e| e.to_string())?;
    if got == status { Ok(text) } else { Err(format!("status {got}: {}", text.chars().take(300).collect::<String>())) }
}

/// A chat that must succeed; returns the answer without its volatile parts
/// (for comparing a replay with the original).
async fn chat(ctx: &Ctx, body: Value, idempotency_key: Option<&str>) -> Result<String, String> {
    let stream = body["stream"] == true;
    let mut req = ctx.client.post(format!("{}/chat/completions", ctx.base)).bearer_auth(&ctx.key).json(&body);
    if let Some(k) = idempotency_key {
        req = req.header("Idempotency-Key", k);
    }
    let text = expect(req.send().await, 200).await?;
    if stream {
        if !text.contains("data: [DONE]") || text.contains("\"type\":\"error\"") {
            return Err(format!("stream did not finish cleanly: {}", text.chars().rev().take(300).collect::<String>()));
        }
    } else {
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("answer is not JSON: {e}"))?;
        if v["success"] != true || v["choices"][0]["message"]["content"].as_str().is_none_or(str::is_empty) {
            return Err(format!("unexpected answer: {}", text.chars().take(300).collect::<String>()));
        }
    }
    Ok(text)
}
