//! Replays every committed fuzz corpus (`tests/fuzz/corpus/<target>/`)
//! through the very function its cargo-fuzz target calls, so an input that
//! once crashed the gateway (and was fixed) is checked on every test run.
//! Fuzzing itself is `cargo fuzz run` (docs/reliability.md, "Fuzzing").

use std::path::{Path, PathBuf};

#[path = "../fuzz/src/adapters.rs"]
mod adapters;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// Feed every file of `corpus/<target>` to `run`; fail naming each input that panics.
fn replay(target: &str, run: fn(&[u8])) {
    let dir = fuzz_dir().join("corpus").join(target);
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).map(|e| e.expect("corpus entry").path()).collect();
    files.sort();
    assert!(files.len() >= 10, "{} holds only {} inputs", dir.display(), files.len());
    let mut failed = Vec::new();
    for f in &files {
        let data = std::fs::read(f).expect("read a corpus file");
        if std::panic::catch_unwind(|| run(&data)).is_err() {
            failed.push(f.display().to_string());
        }
    }
    assert!(failed.is_empty(), "{target}: {} of {} inputs panic: {failed:#?}", failed.len(), files.len());
}

#[test]
fn chat_request() {
    replay("chat_request", gatehouse::fuzzing::chat_request);
}

#[test]
fn sse_decoder() {
    replay("sse_decoder", gatehouse::fuzzing::sse);
}

#[test]
fn provider_adapters() {
    replay("provider_adapters", adapters::provider_adapters);
}

#[test]
fn webhook_url() {
    replay("webhook_url", gatehouse::fuzzing::webhook_url);
}

#[test]
fn config() {
    replay("config", gatehouse::fuzzing::config);
}

#[test]
fn audit_query() {
    replay("audit_query", gatehouse::fuzzing::audit_query);
}

/// Every `[[bin]]` of the fuzz crate has a replay test above, and a corpus.
#[test]
fn every_fuzz_target_is_replayed() {
    const REPLAYED: &[&str] = &["chat_request", "sse_decoder", "provider_adapters", "webhook_url", "config", "audit_query"];
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("tests/fuzz/Cargo.toml");
    let mut bins: Vec<&str> = manifest
        .split("[[bin]]")
        .skip(1)
        .filter_map(|section| section.lines().find_map(|l| l.trim().strip_prefix("name = ")))
        .map(|n| n.trim_matches('"'))
        .collect();
    bins.sort_unstable();
    let mut replayed = REPLAYED.to_vec();
    replayed.sort_unstable();
    assert_eq!(bins, replayed, "add a replay test for each new fuzz target");
    for t in REPLAYED {
        assert!(fuzz_dir().join("corpus").join(t).is_dir(), "no corpus for {t}");
    }
}
