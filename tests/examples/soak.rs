//! Soak: mixed traffic at a fixed rate (see `gatehouse_tests::soak`); reports
//! unexpected errors (must be 0), resident memory after the warm-up and at the
//! end (growth must stay under 10 %), and open file descriptors.
//!
//! Run: `nice cargo run --release -p gatehouse-tests --example soak -- --minutes 10 --rate 50 [--warmup-secs 120]`
//!
//! Warm-up: the server's caches (redb's 8 MiB page cache, allocator arenas,
//! the warm retriever instances) fill during the first two minutes at 50
//! requests/s; growth is measured from the end of the warm-up.

use std::time::Duration;

use gatehouse_tests::soak::{self, Options};

#[tokio::main]
async fn main() {
    let (mut minutes, mut rate, mut warmup_secs) = (10.0_f64, 50_u32, None::<f64>);
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        match (pair[0].as_str(), pair.get(1)) {
            ("--minutes", Some(v)) => minutes = v.parse().expect("--minutes takes a number"),
            ("--rate", Some(v)) => rate = v.parse().expect("--rate takes requests per second"),
            ("--warmup-secs", Some(v)) => warmup_secs = Some(v.parse().expect("--warmup-secs takes a number")),
            (other, _) => panic!("unknown argument {other}; use --minutes M --rate R [--warmup-secs S]"),
        }
    }
    let duration = Duration::from_secs_f64(minutes * 60.0);
    // Warm-up: two minutes by default (a fifth of a 10-minute run), at most half of the run.
    let warmup = warmup_secs.map(Duration::from_secs_f64).unwrap_or(Duration::from_secs(120)).min(duration / 2);
    let opts = Options { duration, rate, warmup, max_in_flight: 500 };
    let report = match soak::run(opts).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("soak FAILED to run: {e:#}");
            std::process::exit(2);
        }
    };
    println!("{report}");
    for s in &report.samples {
        println!("  unexpected: {s}");
    }
    let growth = report.rss_growth_pct();
    let fd_growth = report.fds_end as i64 - report.fds_warm as i64;
    let ok = report.unexpected == 0 && growth < 10.0;
    println!(
        "soak verdict: {} (unexpected errors {}, RSS growth {:+.1} % (limit 10 %), fds {:+})",
        if ok { "PASS" } else { "FAIL" },
        report.unexpected,
        growth,
        fd_growth
    );
    if !ok {
        std::process::exit(1);
    }
}
