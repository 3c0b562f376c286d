//! Measures ways of combining the whole-text and window scores on the
//! held-out **validation** split (never the test split), for issue 31.
//!
//! `cargo run --release -p prompt-shield --example shield_tune [-- --split validation]`
//!
//! For each rule (the best window discounted by `offset + penalty * ln(windows)`,
//! or the whole text alone) it prints the ROC-AUC, the recall at FPR
//! 0.01/0.02/0.05, and at the threshold of FPR 0.02 the benign flag rate per
//! length bucket and on documents: a rule whose rate rises with length is the
//! one issue 31 replaces.

#[path = "common/heldout.rs"]
mod heldout;

use prompt_shield::model::{self, Parts};
use prompt_shield::{decode, features, normalize};

struct Item {
    /// The detector's score (`detect::assess`, the constants in `model.rs`).
    score: f32,
    label: bool,
    kind: String,
    slice: String,
    chars: usize,
    parts: Vec<Parts>,
}

fn load(split: &str) -> Vec<Item> {
    heldout::rows(split)
        .iter()
        .map(|v| {
            let text = v["text"].as_str().unwrap_or_default();
            let mut texts = vec![text.to_owned()];
            texts.extend(decode::payloads(text));
            let parts = texts
                .iter()
                .map(|t| {
                    let n = normalize::normalize(t);
                    let h = features::hand_features(&n);
                    model::parts(&n, &h)
                })
                .collect();
            Item {
                score: prompt_shield::detect::assess(text).score,
                label: v["label"].as_i64() == Some(1),
                kind: v["kind"].as_str().unwrap_or("?").into(),
                slice: v["slice"].as_str().unwrap_or("?").into(),
                chars: text.chars().count(),
                parts,
            }
        })
        .collect()
}

/// How the discount grows with the number of windows `k`.
#[derive(Clone, Copy)]
enum Growth {
    Ln,
    SqrtLn,
}

fn rule(p: &Parts, offset: f32, penalty: f32, whole_only: bool, growth: Growth) -> f32 {
    let best = p.windows.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let k = (p.windows.len() as f32).ln();
    let g = match growth {
        Growth::Ln => k,
        Growth::SqrtLn => k.max(0.0).sqrt(),
    };
    let w = if whole_only || p.windows.is_empty() { f32::NEG_INFINITY } else { best - offset - penalty * g };
    p.z_hand + p.whole.max(w)
}

fn auc(s: &[(f32, bool)]) -> f64 {
    let mut v = s.to_vec();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut rank, mut i) = (0.0f64, 0usize);
    while i < v.len() {
        let mut j = i;
        while j < v.len() && v[j].0 == v[i].0 {
            j += 1;
        }
        rank += (i + j + 1) as f64 / 2.0 * v[i..j].iter().filter(|x| x.1).count() as f64;
        i = j;
    }
    let p = v.iter().filter(|x| x.1).count() as f64;
    let n = v.len() as f64 - p;
    (rank - p * (p + 1.0) / 2.0) / (p * n)
}

fn thr_at(benign: &mut [f32], fpr: f64) -> f32 {
    benign.sort_by(|a, b| b.total_cmp(a));
    let k = (fpr * benign.len() as f64).floor() as usize;
    benign.get(k).map_or(f32::NEG_INFINITY, |s| s.next_up())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let split = args.iter().position(|a| a == "--split").and_then(|i| args.get(i + 1)).map_or("validation", String::as_str);
    let items = load(split);
    println!("split {split}: {} items; rule: z_hand + max(whole, best window - offset - penalty*ln(windows))", items.len());
    println!(
        "{:<22} {:>6} {:>7} {:>7} {:>7} | at FPR .02: {:>6} {:>6} {:>6} {:>6} | rec <500 ind obf leak",
        "rule", "AUC", "r@.01", "r@.02", "r@.05", "<500", "500-2k", ">=2k", "docs"
    );
    let mut rules: Vec<(String, f32, f32, bool, Growth)> = vec![("whole only".into(), 0.0, 0.0, true, Growth::Ln)];
    for off in [0.0f32, 0.5, 1.0, 2.0] {
        for pen in [0.0f32, 0.5, 1.0, 1.5, 2.0, 3.0] {
            rules.push((format!("off {off} pen {pen}"), off, pen, false, Growth::Ln));
            rules.push((format!("off {off} pen {pen} sqrt"), off, pen, false, Growth::SqrtLn));
        }
    }
    for (name, off, pen, whole, growth) in rules {
        let s: Vec<(f32, bool)> = items
            .iter()
            .map(|it| (it.parts.iter().map(|p| rule(p, off, pen, whole, growth)).fold(f32::NEG_INFINITY, f32::max), it.label))
            .collect();
        let mut benign: Vec<f32> = s.iter().filter(|x| !x.1).map(|x| x.0).collect();
        let attacks = s.iter().filter(|x| x.1).count() as f64;
        let rec = |t: f32| s.iter().filter(|x| x.1 && x.0 >= t).count() as f64 / attacks;
        let (t1, t2, t5) = (thr_at(&mut benign, 0.01), thr_at(&mut benign, 0.02), thr_at(&mut benign, 0.05));
        let rate = |f: &dyn Fn(&Item) -> bool, lab: bool| {
            let sel: Vec<f32> = items.iter().zip(&s).filter(|(it, x)| x.1 == lab && f(it)).map(|(_, x)| x.0).collect();
            sel.iter().filter(|&&v| v >= t2).count() as f64 / sel.len().max(1) as f64
        };
        println!(
            "{:<22} {:>6.3} {:>7.3} {:>7.3} {:>7.3} |             {:>6.3} {:>6.3} {:>6.3} {:>6.3} | {:.2} {:.2} {:.2} {:.2}",
            name,
            auc(&s),
            rec(t1),
            rec(t2),
            rec(t5),
            rate(&|i| i.chars < 500, false),
            rate(&|i| (500..2000).contains(&i.chars), false),
            rate(&|i| i.chars >= 2000, false),
            rate(&|i| i.slice == "document", false),
            rate(&|i| i.chars < 500, true),
            rate(&|i| i.kind == "indirect", true),
            rate(&|i| i.kind == "obfuscated", true),
            rate(&|i| i.kind == "prompt_leak", true),
        );
    }

    // Thresholds of the detector's own score, for `detect::default_thresholds`.
    let mut benign: Vec<f32> = items.iter().filter(|i| !i.label).map(|i| i.score).collect();
    let attacks: Vec<f32> = items.iter().filter(|i| i.label).map(|i| i.score).collect();
    println!("\ndetector score (model.rs constants): threshold at benign FPR, recall there");
    for fpr in [0.005, 0.01, 0.015, 0.02, 0.03, 0.035, 0.04, 0.045, 0.05, 0.06, 0.07, 0.08, 0.1] {
        let t = thr_at(&mut benign, fpr);
        let rec = attacks.iter().filter(|&&s| s >= t).count() as f64 / attacks.len() as f64;
        println!("  FPR <= {fpr:<5}  threshold {t:.4}  recall {rec:.3}");
    }
    // Document mode: passages and documents (document, hard_negative, code, multilingual slices).
    let doc = |i: &Item| ["document", "hard_negative", "code", "multilingual"].contains(&i.slice.as_str());
    let mut docs: Vec<f32> = items.iter().filter(|i| !i.label && doc(i)).map(|i| i.score).collect();
    let ind: Vec<f32> = items.iter().filter(|i| i.label && i.kind == "indirect").map(|i| i.score).collect();
    println!("document mode: {} benign documents/passages, {} indirect attacks", docs.len(), ind.len());
    for fpr in [0.0, 0.005, 0.01, 0.02] {
        let t = thr_at(&mut docs, fpr);
        let rec = ind.iter().filter(|&&s| s >= t).count() as f64 / ind.len() as f64;
        println!("  removed <= {fpr:<5}  threshold {t:.4}  indirect recall {rec:.3}");
    }
}
