//! Detection report of Prompt Shield on the held-out split of `data/*.jsonl`.
//!
//! `cargo run --release -p prompt-shield --example detection_report [-- --train]`
//!
//! The split is `features::held_out`; the committed model is trained by
//! `examples/train` on every group (`data/README.md`), so neither split is
//! held out any more (`eval/heldout` is: `examples/heldout_report.rs`);
//! `--train` reports on the other split. Per strictness it prints precision, recall,
//! F1 and false-positive rate, counting a text as detected when the verdict is
//! not `allow` (flag or block), and separately when it is `block`; then a
//! breakdown per source, a threshold sweep and the best recall reachable at
//! FPR <= 2 %. `--errors` also lists the misclassified texts (balanced mode).

use std::collections::BTreeMap;

use prompt_shield::detect::{self, Action, Strictness};
use prompt_shield::{features, model};

struct Row {
    text: String,
    label: bool,
    source: String,
    score: f32,
}

#[derive(Default, Clone, Copy)]
struct Counts {
    tp: u32,
    fp: u32,
    tn: u32,
    fn_: u32,
}

impl Counts {
    fn add(&mut self, label: bool, hit: bool) {
        match (label, hit) {
            (true, true) => self.tp += 1,
            (true, false) => self.fn_ += 1,
            (false, true) => self.fp += 1,
            (false, false) => self.tn += 1,
        }
    }
    fn line(&self) -> String {
        let p = f64::from(self.tp) / f64::from((self.tp + self.fp).max(1));
        let r = f64::from(self.tp) / f64::from((self.tp + self.fn_).max(1));
        let f1 = if p + r > 0.0 { 2.0 * p * r / (p + r) } else { 0.0 };
        let fpr = f64::from(self.fp) / f64::from((self.fp + self.tn).max(1));
        format!(
            "precision {p:.3}  recall {r:.3}  F1 {f1:.3}  FPR {fpr:.4}   (TP {} FP {} TN {} FN {})",
            self.tp, self.fp, self.tn, self.fn_
        )
    }
}

fn load(train: bool) -> Vec<(String, bool, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    let mut files: Vec<_> = std::fs::read_dir(&dir).map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    files.retain(|p: &std::path::PathBuf| p.extension().is_some_and(|e| e == "jsonl"));
    files.sort();
    let mut rows = Vec::new();
    for f in files {
        for line in std::fs::read_to_string(&f).unwrap_or_default().lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let text = v["text"].as_str().unwrap_or_default().to_owned();
            let group = v["group"].as_str().map(str::to_owned).unwrap_or_else(|| text.clone());
            if features::held_out(&group) != train {
                rows.push((text, v["label"].as_i64() == Some(1), v["source"].as_str().unwrap_or("?").to_owned()));
            }
        }
    }
    rows
}

fn main() {
    let train = std::env::args().any(|a| a == "--train");
    let started = std::time::Instant::now();
    let rows: Vec<Row> = load(train)
        .into_iter()
        .map(|(text, label, source)| {
            let score = detect::assess(&text).score;
            Row { text, label, source, score }
        })
        .collect();
    let attacks = rows.iter().filter(|r| r.label).count();
    println!(
        "Prompt Shield detection report — {} split: {attacks} attacks, {} benign (model trained on {:?} attack/benign examples; scored in {:.1?})\n",
        if train { "TRAINING" } else { "held-out" },
        rows.len() - attacks,
        model::TRAIN_EXAMPLES,
        started.elapsed()
    );
    for (name, s) in [("monitor", Strictness::Monitor), ("balanced", Strictness::Balanced), ("strict", Strictness::Strict)] {
        let t = detect::default_thresholds(s);
        let (mut detected, mut blocked) = (Counts::default(), Counts::default());
        for r in &rows {
            let action = if r.score >= t.block {
                Action::Block
            } else if r.score >= t.flag {
                Action::Flag
            } else {
                Action::Allow
            };
            detected.add(r.label, action != Action::Allow);
            blocked.add(r.label, action == Action::Block);
        }
        println!("{name:<9} (block >= {:.2}, flag >= {:.2})", t.block, t.flag);
        println!("  flag or block: {}", detected.line());
        if s != Strictness::Monitor {
            println!("  block only:    {}", blocked.line());
        }
    }

    println!("\nPer source (held-out rows; rate of verdicts that are not allow / block in balanced mode):");
    let bal = detect::default_thresholds(Strictness::Balanced);
    let mut by: BTreeMap<(bool, &str), (u32, u32, u32)> = BTreeMap::new();
    for r in &rows {
        let e = by.entry((r.label, r.source.as_str())).or_default();
        e.0 += 1;
        e.1 += u32::from(r.score >= bal.flag);
        e.2 += u32::from(r.score >= bal.block);
    }
    for ((label, source), (n, det, blk)) in by.iter().rev() {
        let kind = if *label { "attack" } else { "benign" };
        println!(
            "  {kind} {source:<38} n={n:<4} flagged-or-blocked {:>6.1}%  blocked {:>6.1}%",
            100.0 * f64::from(*det) / f64::from(*n),
            100.0 * f64::from(*blk) / f64::from(*n)
        );
    }

    println!("\nThreshold sweep (a text counts as detected when its score is at or above the threshold):");
    for thr in [0.3f32, 0.4, 0.5, 0.55, 0.6, 0.7, 0.8, 0.9, 0.95] {
        let mut c = Counts::default();
        for r in &rows {
            c.add(r.label, r.score >= thr);
        }
        println!("  >= {thr:.2}: {}", c.line());
    }

    if std::env::args().any(|a| a == "--errors") {
        println!("\nMisclassified in balanced mode (flag threshold {:.2}):", bal.flag);
        for r in rows.iter().filter(|r| r.label != (r.score >= bal.flag)) {
            let short: String = r.text.chars().take(110).collect::<String>().replace('\n', " ");
            println!("  {} {:.3} [{}] {short}", if r.label { "FN" } else { "FP" }, r.score, r.source);
        }
    }

    // Best recall at FPR <= 2 %: the threshold that lets at most 2 % of benign through.
    let mut benign: Vec<f32> = rows.iter().filter(|r| !r.label).map(|r| r.score).collect();
    benign.sort_by(|a, b| b.total_cmp(a));
    let allowed_fp = benign.len() / 50;
    let thr = benign.get(allowed_fp).copied().unwrap_or(1.0) + 1e-6;
    let rec = rows.iter().filter(|r| r.label && r.score >= thr).count() as f64 / attacks.max(1) as f64;
    println!(
        "\nOperating point: threshold {thr:.3} gives recall {rec:.3} at FPR <= 0.02 ({allowed_fp} of {} benign above it)",
        benign.len()
    );
}
