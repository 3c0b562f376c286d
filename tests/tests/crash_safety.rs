//! Crash safety: the kill loop of `tests/examples/kill_loop.rs`, two cycles.

use std::time::Duration;

use gatehouse_tests::kill_loop::{self, Options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_repeated_sigkill_under_load() {
    let opts = Options {
        cycles: 2,
        chat_workers: 2,
        min_run: Duration::from_millis(800),
        max_run: Duration::from_millis(1500),
        ..Options::default()
    };
    let report = kill_loop::run(opts).await.unwrap_or_else(|e| panic!("{e:#}"));
    println!("{report}");
    assert_eq!(report.cycles, 2);
    assert_eq!(report.lost, 0);
    assert!(report.acknowledged > 0, "nothing was acknowledged before the kills: the test proved nothing");
    assert!(report.writes_checked >= report.acknowledged, "{report}");
}
