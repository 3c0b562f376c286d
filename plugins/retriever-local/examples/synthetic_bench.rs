//! Index build time, memory and query latency on the synthetic corpus.
//!
//! `cargo run --release -p retriever-local --example synthetic_bench [-- DOCS [RANKER [FOLDER]]]`
//!
//! Builds the index over `DOCS` (default 10,000) documents from
//! [`retriever_local::synthetic::corpus`], then runs 2,000 queries of two to
//! five words drawn from the corpus's own text (so they match) and prints the
//! median and p99 latency of `search(query, 4)`, for the lexical index and for
//! the hybrid one (lexical + dense vectors, the query's embedding included).

use std::time::{Duration, Instant};

use retriever_local::{Index, Options, synthetic};

/// Timed passes over the queries.
const REPEATS: usize = 5;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let started = Instant::now();
    // A third argument names a folder to read instead (a real corpus, such as
    // an evaluation corpus with its long passages; in wasm, mounted at its path).
    let corpus = match std::env::args().nth(3) {
        Some(dir) => retriever_local::eval::load_corpus(std::path::Path::new(&dir)).unwrap_or_else(|e| panic!("{e}")),
        None => synthetic::corpus(n, 42),
    };
    let n = corpus.len();
    let generated = started.elapsed();
    let bytes: usize = corpus.iter().map(|(_, t)| t.len()).sum();
    println!("corpus: {n} documents, {:.2} MB (generated in {} ms)", bytes as f64 / 1e6, generated.as_millis());
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

    // The model file (in wasm, its folder must be mounted at the same path).
    let hybrid = Options::hybrid(retriever_local::dense::SHIPPED_MODEL);
    for (name, opts) in [
        ("lexical", Options::default()),
        ("hybrid", hybrid.clone()),
        ("dense side alone", Options { lexical_weight: 0.0, ..hybrid.clone() }),
    ] {
        // A second argument runs only the rankers whose name contains it.
        if std::env::args().nth(2).is_some_and(|only| !name.contains(only.as_str())) {
            continue;
        }
        println!("-- {name} ({opts:?})");
        bench(&corpus, &queries, opts);
    }
}

fn bench(corpus: &[(String, String)], queries: &[String], opts: Options) {
    let dense = opts.dense_model.is_some();
    let started = Instant::now();
    let mut index = Index::build(corpus.iter().map(|(p, t)| (p, t)), opts.clone());
    let build = started.elapsed();
    if dense {
        // A rebuild (a changed file, a new instance in the same process)
        // takes the vectors from the process's cache.
        drop(index);
        let started = Instant::now();
        index = Index::build(corpus.iter().map(|(p, t)| (p, t)), opts);
        println!("index:  rebuilt with every vector from the cache in {} ms", started.elapsed().as_millis());
    }
    let s = index.stats();
    println!(
        "index:  built in {} ms; {} documents, {} passages, {} terms; ~{:.1} MB in memory",
        build.as_millis(),
        s.documents,
        s.passages,
        s.terms,
        index.memory_bytes() as f64 / 1e6
    );
    for q in queries.iter().take(200) {
        std::hint::black_box(index.search(q, 4));
    }
    // Each query is timed in REPEATS passes and its fastest time kept: on a
    // shared machine one pass's tail is mostly other processes' time slices.
    let one_pass = || -> Vec<Duration> {
        queries
            .iter()
            .map(|q| {
                let t = Instant::now();
                std::hint::black_box(index.search(q, 4));
                t.elapsed()
            })
            .collect()
    };
    let passes: Vec<Vec<Duration>> = (0..REPEATS).map(|_| one_pass()).collect();
    let mut single = passes[0].clone();
    single.sort();
    let mut times: Vec<Duration> = (0..queries.len()).map(|i| passes.iter().map(|p| p[i]).min().unwrap_or_default()).collect();
    times.sort();
    let pct = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    println!(
        "query (one pass): median {:.3} ms, p99 {:.3} ms",
        single[single.len() / 2].as_secs_f64() * 1e3,
        single[(single.len() - 1) * 99 / 100].as_secs_f64() * 1e3
    );
    println!(
        "query (fastest of {REPEATS} passes each): {} queries of 2-5 words, k = 4: median {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        times.len(),
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3
    );
}
