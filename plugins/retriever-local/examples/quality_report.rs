//! Retrieval quality of retriever-local against plain BM25 (whole pages and
//! 300-word chunks) on the tuning corpus and the held-out corpora.
//!
//! `cargo run --release -p retriever-local --example quality_report`
//!
//! Corpora, questions and method: `plugins/retriever-local/eval/README.md`.

use retriever_local::{Options, eval};

fn main() {
    println!("page-level, top_k {}; a page counts if it is among the question's answering pages", eval::TOP_K);
    println!("| corpus | ranker | recall@1 | recall@3 | MRR@3 |");
    println!("|---|---|---|---|---|");
    for c in eval::corpora() {
        let row = match eval::report_corpus(&c, &Options::default()) {
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
