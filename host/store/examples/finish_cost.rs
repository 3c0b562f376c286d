//! The store's cost of finishing one chat request (usage totals, and with the
//! ledger its per-request row, an event and an audit record) through the redb
//! group commit, with durable writes off (CPU only) and on. Prints median, p90
//! and p99 of one `finish_request` at a time, and the rate and the process's
//! CPU time per request with 64 in flight (the CPU figure holds on a busy
//! machine, where the rate does not).
//!
//! Run: `cargo run --release -p gatehouse-store --example finish_cost`

use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse_store::Store;
use gatehouse_store::audit::{Audit, category, kind};
use gatehouse_store::records::{OutboxEvent, RequestOutcome, UsageDelta};
use gatehouse_store::redb::RedbStore;

const N: usize = 5_000;

fn outcome(i: usize) -> RequestOutcome {
    RequestOutcome {
        usage: Some(UsageDelta {
            user_id: format!("usr_{}", i % 50),
            key_id: format!("key_{}", i % 200),
            group_id: Some("grp_bench".into()),
            model: "echo/default".into(),
            request_id: format!("req-{i:032x}"),
            prompt_tokens: 42,
            completion_tokens: 8,
        }),
        events: vec![OutboxEvent::new("api:request", serde_json::json!({"n": i}))],
        audit: vec![Audit::new(kind::SYSTEM, category::SYSTEM_INTEGRITY, "bench").build()],
        ..Default::default()
    }
}

/// CPU time this process has used (user and system), from `/proc/self/stat`.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at its ')'.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are the 14th and 15th fields: 12th and 13th after the name.
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn pick(samples: &mut [Duration], q: f64) -> f64 {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1e6
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    for durable in [false, true] {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(RedbStore::open(dir.path(), durable).expect("open"));
        for i in 0..500 {
            store.finish_request(outcome(i)).await.expect("warm-up");
        }
        let n = if durable { N / 5 } else { N };
        let mut samples = Vec::with_capacity(n);
        for i in 0..n {
            let t = Instant::now();
            store.finish_request(outcome(i)).await.expect("finish");
            samples.push(t.elapsed());
        }
        let (p50, p90, p99) = (pick(&mut samples, 0.5), pick(&mut samples, 0.9), pick(&mut samples, 0.99));
        let in_flight = n * 4;
        let (started, cpu) = (Instant::now(), cpu_seconds());
        let mut tasks = Vec::new();
        for w in 0..64 {
            let store = store.clone();
            #[expect(clippy::disallowed_methods, reason = "every task is joined below")]
            tasks.push(tokio::spawn(async move {
                for i in 0..in_flight / 64 {
                    store.finish_request(outcome(w * 100_000 + i)).await.expect("finish");
                }
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
        let done = (in_flight / 64 * 64) as f64;
        let rate = done / started.elapsed().as_secs_f64();
        let cpu = (cpu_seconds() - cpu) / done * 1e6;
        println!(
            "finish_request durable={durable:<5} one at a time: median {p50:>8.1} µs  p90 {p90:>8.1} µs  p99 {p99:>8.1} µs   64 in flight: {rate:>8.0}/s, {cpu:>5.1} µs CPU each"
        );
    }
}
