//! Index build time, memory and query latency on the synthetic corpus.
//!
//! `cargo run --release -p retriever-local --example synthetic_bench [-- DOCS]`
//!
//! Builds the index over `DOCS` (default 10,000) documents from
//! [`retriever_local::synthetic::corpus`], then runs 2,000 queries of two to
//! five words drawn from the corpus's own text (so they match) and prints the
//! median and p99 latency of `search(query, 5)`.

use std::time::{Duration, Instant};

use retriever_local::{Index, Options, synthetic};

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let started = Instant::now();
    let corpus = synthetic::corpus(n, 42);
    let generated = started.elapsed();
    let bytes: usize = corpus.iter().map(|(_, t)| t.len()).sum();
    // Queries: consecutive words from passages of the corpus, lower-cased.
    let words: Vec<Vec<String>> = corpus
        .iter()
        .step_by(7)
        .map(|(_, t)| t.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2).map(str::to_lowercase).collect())
        .collect();
    let queries: Vec<String> = (0..2000)
        .map(|i| {
            let doc = &words[i % words.len()];
            let len = 2 + i % 4;
            let start = (i * 31) % doc.len().saturating_sub(len).max(1);
            doc[start..(start + len).min(doc.len())].join(" ")
        })
        .collect();

    let started = Instant::now();
    let index = Index::build(corpus, Options::default());
    let build = started.elapsed();
    let s = index.stats();
    println!("corpus: {n} documents, {:.2} MB (generated in {} ms)", bytes as f64 / 1e6, generated.as_millis());
    println!(
        "index:  built in {} ms; {} documents, {} passages, {} terms; ~{:.1} MB in memory",
        build.as_millis(),
        s.documents,
        s.passages,
        s.terms,
        index.memory_bytes() as f64 / 1e6
    );
    for q in queries.iter().take(200) {
        std::hint::black_box(index.search(q, 5));
    }
    let mut times: Vec<Duration> = queries
        .iter()
        .map(|q| {
            let t = Instant::now();
            std::hint::black_box(index.search(q, 5));
            t.elapsed()
        })
        .collect();
    times.sort();
    let pct = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    println!(
        "query:  {} queries of 2-5 words, k = 5: median {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        times.len(),
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3
    );
}
