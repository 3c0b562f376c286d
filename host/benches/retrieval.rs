//! Retrieval through the plugin boundary: the bundled `retriever-local`
//! component over a generated corpus of 10,000 documents (about 5 MB),
//! served the way the server serves it (a warm instance from the knowledge
//! base's pool, the folder mounted read-only). Prints the corpus size, the
//! index build time in the component, and query latency median / p90 / p99.
//!
//! Run: `cargo bench -p gatehouse --bench retrieval [-- DOCS]` (default 10000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use gatehouse::chat::adapters::knowledge::Knowledge;
use gatehouse::chat::retrieval::KnowledgeBases;
use gatehouse::config::{Config, IndexConfig};
use gatehouse_plugin_host::{LogSink, PluginRuntime};

const QUERIES: usize = 2000;

fn main() {
    let docs: usize = std::env::args().skip(1).find(|a| !a.starts_with('-')).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let data = tempfile::tempdir().expect("tmp");
    let kb = data.path().join("kb");
    let corpus = retriever_local::synthetic::corpus(docs, 7);
    let mut bytes = 0usize;
    for (path, text) in &corpus {
        let p = kb.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
        bytes += text.len();
    }
    println!("corpus: {} documents, {:.2} MB", corpus.len(), bytes as f64 / 1e6);

    let mut config = Config { data_dir: data.path().to_path_buf(), ..Config::default() };
    config.indexes.clear();
    config.indexes.insert(
        "bench".into(),
        IndexConfig {
            retriever: "retriever-local".into(),
            description: String::new(),
            path: Some(kb.clone()),
            top_k: 4,
            timeout_ms: 5_000,
            build_timeout_ms: 120_000,
            config: serde_json::json!({}),
        },
    );
    let runtime = PluginRuntime::start(&config.plugins, data.path(), gatehouse_bundled::BUNDLED, Arc::new(LogSink)).expect("runtime");
    let knowledge = Knowledge::new(runtime, Arc::new(ArcSwap::from_pointee(config)));

    // Index build: the first query builds the index in a fresh instance.
    let t = Instant::now();
    let first = knowledge.retrieve("bench", "warm up", 4).expect("first query");
    println!("index build in the component (first query): {:.0} ms ({} passages)", t.elapsed().as_secs_f64() * 1e3, first.len());

    // Queries: two or three words drawn from the corpus itself, so they hit postings of every length.
    let words: Vec<&str> = corpus.iter().flat_map(|(_, t)| t.split_whitespace()).filter(|w| w.len() > 3).step_by(97).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let queries: Vec<String> = (0..QUERIES)
        .map(|_| {
            let n = 2 + (next() % 2) as usize;
            (0..n).map(|_| words[(next() % words.len() as u64) as usize]).collect::<Vec<_>>().join(" ")
        })
        .collect();
    for q in queries.iter().take(100) {
        knowledge.retrieve("bench", q, 4).expect("warm-up query");
    }
    let mut wall: Vec<Duration> = Vec::with_capacity(QUERIES);
    let mut cpu: Vec<Duration> = Vec::with_capacity(QUERIES);
    let mut empty = 0;
    for q in &queries {
        let (t, c) = (Instant::now(), thread_cpu());
        let hits = knowledge.retrieve("bench", q, 4).expect("query");
        wall.push(t.elapsed());
        cpu.push(thread_cpu().saturating_sub(c));
        if hits.is_empty() {
            empty += 1;
        }
    }
    // Wall time includes waiting for a core on a busy machine; the thread's CPU
    // time is the work of the query itself (the call runs on this thread).
    for (what, mut samples) in [("wall", wall), ("thread CPU", cpu)] {
        samples.sort();
        let pick = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1e3;
        println!(
            "query {what:<10} (k=4, through the plugin boundary): n={} median {:.3} ms   p90 {:.3} ms   p99 {:.3} ms   max {:.3} ms",
            samples.len(),
            pick(0.5),
            pick(0.9),
            pick(0.99),
            samples.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
        );
    }
    println!("queries with no hit: {empty}; machine load average: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
}

/// CPU time consumed by the calling thread so far.
fn thread_cpu() -> Duration {
    cpu_time::ThreadTime::now().as_duration()
}
