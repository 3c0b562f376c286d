//! Crash safety under load: mixed traffic, SIGKILL at random moments, restart,
//! and check that every acknowledged write survived (see `gatehouse_tests::kill_loop`).
//!
//! Run: `cargo run --release -p gatehouse-tests --example kill_loop -- --cycles 20 [--seed N] [--fleet]`
//!
//! `--fleet`: three hosts on a throwaway PostgreSQL (started here, as the
//! fleet tests start it; run as an unprivileged user), one killed per cycle.

use gatehouse_tests::kill_loop::{self, Options};

#[tokio::main]
async fn main() {
    let mut opts = Options::default();
    // Kept until the end: dropping it stops the cluster.
    let mut cluster = None;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = args.get(i + 1).map(String::as_str);
        match (args[i].as_str(), value) {
            ("--fleet", _) => {
                let pg = gatehouse_tests::TempPostgres::start();
                opts.postgres = Some(pg.create_database("killloop"));
                cluster = Some(pg);
                i += 1;
                continue;
            }
            ("--cycles", Some(v)) => opts.cycles = v.parse().expect("--cycles takes a number"),
            ("--seed", Some(v)) => {
                opts.seed = v
                    .trim_start_matches("0x")
                    .parse::<u64>()
                    .or_else(|_| u64::from_str_radix(v.trim_start_matches("0x"), 16))
                    .expect("--seed takes a number")
            }
            (other, _) => panic!("unknown argument {other}; use --cycles N [--seed N]"),
        }
        i += 2;
    }
    let outcome = kill_loop::run(opts).await;
    drop(cluster);
    match outcome {
        Ok(report) => {
            println!("{report}");
            if report.lost > 0 {
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("kill loop FAILED: {e:#}");
            std::process::exit(1);
        }
    }
}
