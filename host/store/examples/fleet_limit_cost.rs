//! What the fleet limiter costs: `take_limits` (one statement and one commit
//! per counted request) against a throwaway PostgreSQL, from several
//! `PgStore`s as hosts, for one busy key (its requests take turns on its
//! rows) and for many keys. Prints the median and p99 latency per call and
//! the calls per second; the figures go in docs, never in a timed test.
//!
//! Each case runs on a database of its own: migration 2's step, the current
//! step with a synchronous commit, and the current step, so one run shows
//! what each change gains.
//!
//! `cargo run -p gatehouse-store --example fleet_limit_cost -- [calls] [hosts] [concurrency]`

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

/// The step as migration 2 made it, for a before/after in one run: every
/// call a plain commit (waiting for the WAL flush under the rows' locks).
fn function_of_migration_2() -> String {
    let sql = include_str!("../src/postgres/migrations/0002_fleet_limits.sql");
    let at = sql.find("CREATE FUNCTION").expect("the function in migration 2");
    sql[at..].replacen("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
}

/// The current step with its commit synchronous again: what the shorter
/// statement alone gains, apart from the commit that no longer waits for the flush.
fn current_function_synchronous() -> String {
    let sql = include_str!("../src/postgres/migrations/0007_import_and_limits.sql");
    let at = sql.find("CREATE OR REPLACE FUNCTION gatehouse_limit_take").expect("the function in migration 7");
    sql[at..].replacen("PERFORM set_config('synchronous_commit', 'off', true);", "", 1)
}

async fn hosts_on(url: &str, hosts: usize) -> Vec<Arc<PgStore>> {
    let mut stores = Vec::new();
    for _ in 0..hosts {
        stores.push(Arc::new(PgStore::connect(PgOptions::new(url.to_owned())).await.expect("host")));
    }
    stores
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (calls, hosts, concurrency) =
        (args.first().copied().unwrap_or(2000), args.get(1).copied().unwrap_or(3), args.get(2).copied().unwrap_or(16));
    let pg = TempPostgres::start();
    println!("{hosts} hosts, {concurrency} concurrent callers, PostgreSQL with its default synchronous_commit");
    let cases = [("before", "migration 2's step"), ("sync", "the current step, its commit synchronous"), ("after", "the current step")];
    for (db, label) in cases {
        let url = pg.create_database(db);
        let stores = hosts_on(&url, hosts).await;
        let replace = match db {
            "before" => Some(function_of_migration_2()),
            "sync" => Some(current_function_synchronous()),
            _ => None,
        };
        if let Some(sql) = replace {
            let out = pg.psql(db, &sql);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
        println!("-- {label}");
        report("count, one key, one caller", run(&stores, calls / 4, 1, true, Take::Count).await);
        report("count, one key, all callers", run(&stores, calls, concurrency, true, Take::Count).await);
        report("count, 8 keys per caller, all callers", run(&stores, calls, concurrency, false, Take::Count).await);
        report("peek, one key, all callers", run(&stores, calls, concurrency, true, Take::Peek).await);
        let row = stores[0]
            .pool()
            .get()
            .await
            .expect("client")
            .query_one("SELECT count FROM limit_windows WHERE key_id = 'busy' AND window_id = 'chat:n:x'", &[])
            .await
            .expect("count");
        let counted: i64 = row.get(0);
        assert_eq!(counted as usize, calls / 4 + calls / concurrency * concurrency, "every call counted once");
    }
}
