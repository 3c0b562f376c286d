//! `gatehouse plugin check --calls N`: what one call of the component costs
//! as the server makes it (a fresh instance from the pre-instantiated
//! component, with the CPU deadline and memory cap): p50/p99 one call at a
//! time, then paced at the benchmark harness's 1,000 requests per second
//! over four threads (latency counted from when a call was due, so waiting
//! behind a slow call counts), and the process's resident memory.

use std::time::{Duration, Instant};

use gatehouse_plugin_host::Plugin;
use gatehouse_plugin_host::plugin::policy_calls::PolicyContext;

const RATE: u64 = 1000;
const THREADS: u64 = 4;

/// Resident and peak resident memory of this process in MiB (Linux; 0 elsewhere).
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

fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len().saturating_sub(1)) as f64 * p).round() as usize;
    sorted.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

pub fn measure(plugin: &Plugin, ctx: &PolicyContext, calls: usize) -> anyhow::Result<()> {
    for _ in 0..calls.min(200) {
        plugin.evaluate(ctx)?;
    }
    let (rss, _) = memory_mib();
    let mut one: Vec<Duration> = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        plugin.evaluate(ctx)?;
        one.push(t.elapsed());
    }
    one.sort();
    let interval = Duration::from_micros(1_000_000 * THREADS / RATE);
    let per_thread = calls.div_ceil(THREADS as usize);
    let mut paced: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let start = Instant::now() + interval.mul_f64(t as f64 / THREADS as f64);
                    let mut out = Vec::with_capacity(per_thread);
                    for k in 0..per_thread {
                        let due = start + interval * k as u32;
                        if let Some(wait) = due.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                        if plugin.evaluate(ctx).is_ok() {
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
        "cost        one at a time: p50 {:.3} ms, p99 {:.3} ms ({calls} calls); at {RATE}/s over {THREADS} threads: p50 {:.3} ms, p99 {:.3} ms ({} calls)",
        percentile_ms(&one, 0.5),
        percentile_ms(&one, 0.99),
        percentile_ms(&paced, 0.5),
        percentile_ms(&paced, 0.99),
        paced.len()
    );
    println!("memory      {rss:.0} MiB resident with the component loaded, {peak:.0} MiB at the peak");
    Ok(())
}
