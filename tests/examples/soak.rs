//! Soak: mixed traffic at a fixed rate (see `gatehouse_tests::soak`); reports
//! unexpected errors (must be 0), resident memory after the warm-up and at the
//! end (growth must stay under 10 %), and open file descriptors.
//!
//! Run: `nice cargo run --release -p gatehouse-tests --example soak -- --minutes 10 --rate 50`

use std::time::Duration;

use gatehouse_tests::soak::{self, Options};

#[tokio::main]
async fn main() {
    let (mut minutes, mut rate) = (10.0_f64, 50_u32);
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        match (pair[0].as_str(), pair.get(1)) {
            ("--minutes", Some(v)) => minutes = v.parse().expect("--minutes takes a number"),
            ("--rate", Some(v)) => rate = v.parse().expect("--rate takes requests per second"),
            (other, _) => panic!("unknown argument {other}; use --minutes M --rate R"),
        }
    }
    let duration = Duration::from_secs_f64(minutes * 60.0);
    // Warm-up: a tenth of the run, at least 30 s (or half of a very short run).
    let warmup = (duration / 10).max(Duration::from_secs(30)).min(duration / 2);
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
