//! Retrieval quality of retriever-local (lexical, dense only, hybrid) against
//! plain BM25 (whole pages and 300-word chunks) on the tuning corpus and the
//! held-out corpora.
//!
//! `cargo run --release -p retriever-local --example quality_report`
//!
//! `... --example quality_report -- tune` sweeps the hybrid parameters
//! (passage size, fusion) on the tuning corpus only (the held-out corpora
//! are never looked at).
//!
//! Corpora, questions and method: `plugins/retriever-local/eval/README.md`.

use retriever_local::{Options, eval};

fn main() {
    if std::env::args().nth(1).as_deref() == Some("tune") {
        tune();
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("runners-up") {
        runners_up();
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("cost") {
        cost();
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("windows") {
        windows();
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("minmax") {
        min_max();
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("feedback") {
        feedback();
        return;
    }
    println!("page-level, top_k {}; a page counts if it is among the question's answering pages", eval::TOP_K);
    println!("| corpus | ranker | recall@1 | recall@3 | MRR@3 |");
    println!("|---|---|---|---|---|");
    for c in eval::corpora() {
        let row = match eval::report_corpus(&c, &Options::default(), &eval::hybrid_options()) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("quality_report: {e}");
                std::process::exit(1);
            }
        };
        let label = format!("{}{} ({} q)", row.corpus, if row.tuning { ", tuning" } else { "" }, row.rankers[0].1.questions);
        for (name, m) in &row.rankers {
            println!("| {label} | {name} | {:.3} | {:.3} | {:.3} |", m.recall_at_1, m.recall_at_3, m.mrr_at_3);
        }
    }
}

/// Passage size and fusion parameters on the tuning corpus.
fn tune() {
    let c = eval::corpora().into_iter().find(|c| c.tuning).expect("a tuning corpus");
    println!("tuning corpus {}: hybrid recall@1 / recall@3 / MRR@3 (dense only beside)", c.name);
    let fusion: Vec<(f32, f32)> = [10.0, 30.0, 60.0]
        .into_iter()
        .flat_map(|k| [0.25, 0.5, 1.0, 1.5].map(|w| (k, w)))
        .chain([0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0].map(|w| (0.0, w)))
        .collect();
    for chunk_words in [60, 100, 150, 200, 250, 300, 400] {
        for &(rrf_k, dense_weight) in &fusion {
            let hybrid = Options { chunk_words, dense_weight, rrf_k, ..eval::hybrid_options() };
            let row = eval::report_corpus(&c, &Options::default(), &hybrid).expect("evaluation data");
            let (h, d) = (row.get(eval::HYBRID).expect("hybrid"), row.get(eval::DENSE).expect("dense"));
            println!(
                "chunk_words {chunk_words:>3} rrf_k {rrf_k:>4} (0 = linear) dense_weight {dense_weight:>4}: {:.3} / {:.3} / {:.3}   (dense only {:.3} / {:.3} / {:.3})",
                h.recall_at_1, h.recall_at_3, h.mrr_at_3, d.recall_at_1, d.recall_at_3, d.mrr_at_3
            );
        }
    }
}

/// Dense pseudo-relevance feedback (weight × documents) on the tuning corpus only.
fn feedback() {
    let c = eval::corpora().into_iter().find(|c| c.tuning).expect("a tuning corpus");
    println!("tuning corpus {}: hybrid recall@1 / recall@3 / MRR@3 with dense feedback", c.name);
    for feedback_docs in [1, 2, 3, 5] {
        for dense_feedback in [0.0, 0.25, 0.5, 1.0, 2.0] {
            let hybrid = Options { dense_feedback, feedback_docs, ..eval::hybrid_options() };
            let row = eval::report_corpus(&c, &Options::default(), &hybrid).expect("evaluation data");
            let h = row.get(eval::HYBRID).expect("hybrid");
            println!(
                "feedback_docs {feedback_docs} dense_feedback {dense_feedback:>4}: {:.3} / {:.3} / {:.3}",
                h.recall_at_1, h.recall_at_3, h.mrr_at_3
            );
        }
    }
}

/// Min-max normalised linear fusion (dense weight swept) on the tuning corpus only.
fn min_max() {
    let c = eval::corpora().into_iter().find(|c| c.tuning).expect("a tuning corpus");
    println!("tuning corpus {}: hybrid recall@1 / recall@3 / MRR@3, min-max fusion", c.name);
    for dense_weight in [0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0] {
        let hybrid = Options { dense_weight, min_max_fusion: true, ..eval::hybrid_options() };
        let row = eval::report_corpus(&c, &Options::default(), &hybrid).expect("evaluation data");
        let h = row.get(eval::HYBRID).expect("hybrid");
        println!("dense_weight {dense_weight:>4}: {:.3} / {:.3} / {:.3}", h.recall_at_1, h.recall_at_3, h.mrr_at_3);
    }
}

/// Re-ranking the first fused documents by their best window, on the tuning corpus only.
fn windows() {
    let c = eval::corpora().into_iter().find(|c| c.tuning).expect("a tuning corpus");
    println!("tuning corpus {}: hybrid recall@1 / recall@3 / MRR@3, window re-ranking", c.name);
    for window_words in [20, 30, 40, 60, 120] {
        for window_rerank in [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0] {
            let hybrid = Options { window_words, window_rerank, ..eval::hybrid_options() };
            let row = eval::report_corpus(&c, &Options::default(), &hybrid).expect("evaluation data");
            let h = row.get(eval::HYBRID).expect("hybrid");
            println!(
                "window_words {window_words:>3} window_rerank {window_rerank:>3}: {:.3} / {:.3} / {:.3}",
                h.recall_at_1, h.recall_at_3, h.mrr_at_3
            );
        }
    }
}

/// Query time (native) of the hybrid index with and without the window
/// re-ranking, on every corpus's own questions: real 300-word passages, where
/// the re-ranking embeds the most windows (the synthetic bench's documents are short).
fn cost() {
    for c in eval::corpora() {
        let (files, questions) = eval::load(&c).expect("evaluation data");
        for window_rerank in [0.0, retriever_local::index::WINDOW_RERANK] {
            let opts = Options { window_rerank, ..eval::hybrid_options() };
            let index = retriever_local::Index::build(files.iter().map(|(p, t)| (p, t)), opts);
            let mut times: Vec<f64> = questions
                .iter()
                .map(|q| {
                    (0..5)
                        .map(|_| {
                            let t = std::time::Instant::now();
                            std::hint::black_box(index.search(&q.question, eval::TOP_K));
                            t.elapsed().as_secs_f64() * 1e3
                        })
                        .fold(f64::INFINITY, f64::min)
                })
                .collect();
            times.sort_by(f64::total_cmp);
            let at = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
            println!("{} window_rerank {window_rerank}: median {:.3} ms, p99 {:.3} ms (native, fastest of 5)", c.name, at(0.5), at(0.99));
        }
    }
}

/// Disclosure, run after the choice and not used for it: the held-out recall@1
/// margins over chunked BM25 of the window re-ranking's runners-up on the tuning corpus.
fn runners_up() {
    for (window_words, window_rerank) in [(20, 1.5), (20, 2.0), (30, 1.5), (30, 2.0), (30, 1.0), (20, 0.0)] {
        let hybrid = Options { window_words, window_rerank, ..eval::hybrid_options() };
        let margins: Vec<String> = eval::corpora()
            .iter()
            .filter(|c| !c.tuning)
            .map(|c| {
                let row = eval::report_corpus(c, &Options::default(), &hybrid).expect("evaluation data");
                let (h, b) = (row.get(eval::HYBRID).expect("hybrid"), row.get(eval::BM25_CHUNKS).expect("chunks"));
                format!("{} {:+.3}", c.name, h.recall_at_1 - b.recall_at_1)
            })
            .collect();
        println!("window_words {window_words} window_rerank {window_rerank}: {}", margins.join(", "));
    }
}
