//! Retrieval quality of retriever-local against plain BM25 over whole pages.
//!
//! `cargo run --release -p retriever-local --example quality_report`
//!
//! Corpus, questions and method: `plugins/retriever-local/eval/README.md`.

use retriever_local::eval;

fn main() {
    let (local, plain) = match eval::report() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("quality_report: {e}");
            std::process::exit(1);
        }
    };
    println!("{} questions, page-level (a page counts if it is among the question's answering pages)", local.questions);
    println!("{:<34} {:>9} {:>9} {:>7}", "ranker", "recall@1", "recall@3", "MRR");
    for (name, m) in [("retriever-local (BM25F, passages)", local), ("plain BM25 (whole pages)", plain)] {
        println!("{name:<34} {:>9.3} {:>9.3} {:>7.3}", m.recall_at_1, m.recall_at_3, m.mrr);
    }
    println!(
        "difference                         {:>+9.3} {:>+9.3} {:>+7.3}",
        local.recall_at_1 - plain.recall_at_1,
        local.recall_at_3 - plain.recall_at_3,
        local.mrr - plain.mrr
    );
}
