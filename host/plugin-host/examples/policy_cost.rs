//! What one call of a policy component costs, as the server makes it (a
//! fresh instance from the pre-instantiated component, CPU deadline, memory
//! cap): p50/p99 of `evaluate` at concurrency 1, then paced at the benchmark
//! harness's 1,000 requests per second over four threads, and the process's
//! resident memory after loading and at its peak.
//!
//!   cargo run --release -p gatehouse-plugin-host --example policy_cost -- A.wasm [B.wasm ...]
//!
//! docs/benchmarks.md#tenant-policies-per-language quotes its output for the
//! example policy in Rust, Python and JavaScript (`gatehouse plugin build`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use gatehouse_plugin_host::plugin::policy_calls::{Message, PolicyContext, Role};
use gatehouse_plugin_host::{PluginRuntime, PluginsConfig};

const SEQUENTIAL: usize = 2000;
const RATE: u64 = 1000;
const PACED_SECONDS: u64 = 3;
const THREADS: u64 = 4;

fn context(i: usize) -> PolicyContext {
    PolicyContext {
        policy_name: "bench".into(),
        key_id: "key".into(),
        user_id: "user".into(),
        group_id: None,
        models: vec!["echo/default".into()],
        index: "Zero-Knowledge".into(),
        messages: vec![
            Message { role: Role::System, content: "You are a helpful assistant.".into() },
            Message { role: Role::User, content: format!("Question {i}: summarise the water cycle in two sentences.") },
        ],
        shield_disable_requested: false,
        config_json: r#"{"deny_terms":["pelican"]}"#.into(),
    }
}

/// Resident and peak resident memory of this process, MiB (Linux).
fn memory_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(0.0, |kib| kib / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn main() -> anyhow::Result<()> {
    let files: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    anyhow::ensure!(!files.is_empty(), "usage: policy_cost A.wasm [B.wasm ...]");
    println!("| component | size, MB | load, ms | RSS after load, MiB | c=1 p50 / p99, ms | 1,000/s p50 / p99, ms | peak RSS, MiB |");
    println!("|---|---|---|---|---|---|---|");
    for file in files {
        let (before, _) = memory_mib();
        let started = Instant::now();
        let plugin = PluginRuntime::load_file(&PluginsConfig::default(), &file)?;
        let load_ms = started.elapsed().as_secs_f64() * 1000.0;
        let (loaded, _) = memory_mib();
        for i in 0..200 {
            plugin.evaluate(&context(i))?;
        }
        let mut seq: Vec<Duration> = (0..SEQUENTIAL)
            .map(|i| {
                let t = Instant::now();
                plugin.evaluate(&context(i)).map(|_| t.elapsed())
            })
            .collect::<Result<_, _>>()?;
        seq.sort();
        // Paced: each thread starts a call every THREADS ms, so the calls together arrive at RATE per second.
        let interval = Duration::from_micros(1_000_000 * THREADS / RATE);
        let mut paced: Vec<Duration> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let plugin = &plugin;
                    s.spawn(move || {
                        let start = Instant::now() + interval.mul_f64(t as f64 / THREADS as f64);
                        let n = (RATE * PACED_SECONDS / THREADS) as u32;
                        let mut out = Vec::with_capacity(n as usize);
                        for k in 0..n {
                            let due = start + interval * k;
                            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                                std::thread::sleep(wait);
                            }
                            // Latency from when the call was due: waiting behind a slow call counts.
                            if plugin.evaluate(&context(k as usize)).is_ok() {
                                out.push(due.elapsed());
                            }
                        }
                        out
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
        });
        paced.sort();
        let (_, peak) = memory_mib();
        println!(
            "| {} ({}) | {:.2} | {load_ms:.0} | +{:.0} | {:.3} / {:.3} | {:.3} / {:.3} | {peak:.0} |",
            plugin.name,
            file.display(),
            plugin.size as f64 / 1e6,
            loaded - before,
            percentile(&seq, 0.5),
            percentile(&seq, 0.99),
            percentile(&paced, 0.5),
            percentile(&paced, 0.99),
        );
    }
    Ok(())
}
