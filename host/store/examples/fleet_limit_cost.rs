//! What the fleet limiter costs: `take_limits` (one statement and one commit
//! per counted request) against a throwaway PostgreSQL, from several
//! `PgStore`s as hosts, for one busy key (its requests take turns on its
//! rows) and for many keys. Prints the median and p99 latency per call and
//! the calls per second; the figures go in docs, never in a timed test.
//!
//! `cargo run --release -p gatehouse-store --example fleet_limit_cost -- [calls] [hosts] [concurrency]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use gatehouse_pg_harness::TempPostgres;
use gatehouse_store::fleet::{FleetLimiter, LimitWindow, Take};
use gatehouse_store::postgres::{PgOptions, PgStore};

fn windows() -> Vec<LimitWindow> {
    let ends = Utc::now() + chrono::Duration::minutes(10);
    ["chat:n:x", "chat:h:x", "chat:d:x", "chat:m:x"]
        .iter()
        .map(|id| LimitWindow { id: (*id).into(), ends_at: ends, limit: u64::MAX / 2 })
        .collect()
}

async fn run(hosts: &[Arc<PgStore>], calls: usize, concurrency: usize, one_key: bool, mode: Take) -> (Vec<Duration>, Duration) {
    let started = Instant::now();
    let per_task = calls / concurrency;
    let tasks: Vec<_> = (0..concurrency)
        .map(|t| {
            let host = hosts[t % hosts.len()].clone();
            #[expect(clippy::disallowed_methods, reason = "every handle is joined below")]
            tokio::spawn(async move {
                let w = windows();
                let mut took = Vec::with_capacity(per_task);
                for i in 0..per_task {
                    let key = if one_key { "busy".to_owned() } else { format!("key-{t}-{}", i % 8) };
                    let at = Instant::now();
                    host.take_limits(&key, &w, mode).await.expect("take");
                    took.push(at.elapsed());
                }
                took
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("task"));
    }
    all.sort();
    (all, started.elapsed())
}

fn report(label: &str, (took, wall): (Vec<Duration>, Duration)) {
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    println!(
        "{label:<44} calls {:>6}  median {:>7.2} ms  p99 {:>7.2} ms  {:>7.0} calls/s",
        took.len(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        took.len() as f64 / wall.as_secs_f64()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (calls, hosts, concurrency) =
        (args.first().copied().unwrap_or(2000), args.get(1).copied().unwrap_or(3), args.get(2).copied().unwrap_or(16));
    let pg = TempPostgres::start();
    let url = pg.create_database("cost");
    let mut stores = Vec::new();
    for _ in 0..hosts {
        stores.push(Arc::new(PgStore::connect(PgOptions::new(url.clone())).await.expect("host")));
    }
    println!("{hosts} hosts, {concurrency} concurrent callers, PostgreSQL with its default synchronous_commit");
    report("count, one key, one caller", run(&stores, calls / 4, 1, true, Take::Count).await);
    report("count, one key, all callers", run(&stores, calls, concurrency, true, Take::Count).await);
    report("count, 8 keys per caller, all callers", run(&stores, calls, concurrency, false, Take::Count).await);
    report("peek, one key, all callers", run(&stores, calls, concurrency, true, Take::Peek).await);
}
