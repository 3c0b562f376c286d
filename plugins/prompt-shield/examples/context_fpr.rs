//! False-positive rate of Prompt Shield on benign text in non-user roles
//! (system, assistant, developer messages; pass-through fields such as tool
//! descriptions), and what the non-user thresholds cost in recall.
//!
//! `cargo run -p prompt-shield --example context_fpr [-- --errors]`
//!
//! The benign slice is `data/eval/system_benign.jsonl` (system prompts and
//! prompt templates shipped in MIT-licensed PyPI packages; see
//! `data/tools/build_system_benign.py`): it is never trained on. Recall is
//! measured on the validation attacks of the frozen held-out set
//! (`eval/heldout`), scored as if they came in a non-user role. A text counts as a false positive when its verdict is
//! not `allow` (a flag counts), and the non-user thresholds must keep that at
//! or below 1 % in every mode.

use prompt_shield::detect::{self, Strictness, Thresholds};

fn jsonl(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

fn main() {
    let errors = std::env::args().any(|a| a == "--errors");
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    let started = std::time::Instant::now();
    // (text, source, score, whether the non-user rule counts the score at all).
    let gated = |t: &str| {
        let a = detect::assess(t);
        (a.score, a.overrides || a.persona || a.encoded || a.obfuscated)
    };
    let benign: Vec<(String, String, f32, bool)> = jsonl(&data.join("eval/system_benign.jsonl"))
        .into_iter()
        .map(|v| {
            let t = v["text"].as_str().unwrap_or_default().to_owned();
            let (s, g) = gated(&t);
            (t, v["source"].as_str().unwrap_or("?").to_owned(), s, g)
        })
        .collect();
    let mut attacks = Vec::new();
    // The frozen held-out set's validation attacks: the model trains on all
    // of `data/`, so its own held-out groups are no longer unseen.
    let heldout = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("eval/heldout/attacks.jsonl");
    for v in jsonl(&heldout) {
        if v["split"].as_str() == Some("validation") {
            attacks.push(gated(v["text"].as_str().unwrap_or_default()));
        }
    }
    let chars: usize = benign.iter().map(|b| b.0.chars().count()).sum();
    println!(
        "benign non-user slice: {} texts ({chars} characters); held-out validation attacks: {}; all scored in {:.1?}\n",
        benign.len(),
        attacks.len(),
        started.elapsed()
    );
    let rate = |hits: usize, n: usize| 100.0 * hits as f64 / n.max(1) as f64;
    // `gate`: the non-user rule (a score counts only with override,
    // extraction, encoding or obfuscation evidence); without it, the user rule.
    let line = |name: &str, t: Thresholds, gate: bool| {
        let hit = |score: f32, evidence: bool, at: f32| score >= at && (evidence || !gate);
        let fp = benign.iter().filter(|b| hit(b.2, b.3, t.flag)).count();
        let fp_block = benign.iter().filter(|b| hit(b.2, b.3, t.block)).count();
        let rec = attacks.iter().filter(|a| hit(a.0, a.1, t.flag)).count();
        let rec_block = attacks.iter().filter(|a| hit(a.0, a.1, t.block)).count();
        println!(
            "  {name:<28} flag >= {:.2} block >= {:.2}: FPR {:5.2} % ({fp}), blocked {:5.2} % ({fp_block}); attack recall {:5.1} %, blocked {:5.1} %",
            t.flag,
            t.block.min(9.99),
            rate(fp, benign.len()),
            rate(fp_block, benign.len()),
            rate(rec, attacks.len()),
            rate(rec_block, attacks.len()),
        );
    };
    for (name, s) in [("monitor", Strictness::Monitor), ("balanced", Strictness::Balanced), ("strict", Strictness::Strict)] {
        println!("{name}");
        line("user rule", detect::default_thresholds(s), false);
        line("non-user rule", detect::context_thresholds(s), true);
    }
    println!("\nnon-user rule, threshold sweep:");
    for thr in [0.3f32, 0.4, 0.5, 0.6, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99] {
        line(&format!(">= {thr:.2}"), Thresholds { block: thr, flag: thr }, true);
    }
    let mut sorted: Vec<f32> = benign.iter().map(|b| b.2).collect();
    sorted.sort_by(f32::total_cmp);
    let q = |p: f64| sorted[((sorted.len() as f64 - 1.0) * p).round() as usize];
    println!("\nbenign scores: median {:.3}, p90 {:.3}, p99 {:.3}, max {:.3}", q(0.5), q(0.9), q(0.99), q(1.0));
    if errors {
        let mut worst: Vec<_> = benign.iter().collect();
        worst.retain(|b| b.3);
        worst.sort_by(|a, b| b.2.total_cmp(&a.2));
        println!("benign texts with evidence, highest scores first:");
        for (t, src, s, _) in worst.iter().take(10) {
            println!("  {s:.3} {src}: {}", t.chars().take(160).collect::<String>().replace('\n', " "));
        }
    }
}
