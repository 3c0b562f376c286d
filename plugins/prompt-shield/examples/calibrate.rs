//! Fits and measures the calibration of user input (`src/calibrate.rs`) on
//! the held-out **validation** split (never the test split).
//!
//! `cargo run --release -p prompt-shield --example calibrate [-- --fit | --dump FILE]`
//!
//! `--fit` fits the calibration's weights (a logistic regression, Newton's
//! method; L2 1.0 on all but the intercept, benign texts weighted 3) on the
//! whole validation split and prints them as `calibrate::WEIGHTS`, after the
//! out-of-fold comparison that decides whether it pays: ten times five folds
//! by `group` (a template, a document, a seed never in two folds), fitted on
//! four, scored on the fifth, against the model's own score. Without `--fit`
//! it prints, for the committed weights, the threshold and recall at each
//! validation FPR (for `detect::default_thresholds`) and the benign flag rate
//! per length bucket there. `--dump FILE` writes every validation row's
//! calibration inputs (`x`), label, group, slice, kind and text as JSON lines,
//! for measuring another input outside Rust (`eval/tools/second_scorer_oof.py`).

#[path = "common/heldout.rs"]
mod heldout;

use prompt_shield::calibrate::{self, FEATURES};
use prompt_shield::detect;
use prompt_shield::features::fnv64;

struct Item {
    label: bool,
    group: String,
    chars: usize,
    slice: String,
    raw: f64,
    x: [f64; FEATURES],
    score: f32,
}

fn load(split: &str) -> Vec<Item> {
    heldout::rows(split)
        .iter()
        .map(|v| {
            let text = v["text"].as_str().unwrap_or_default();
            let a = detect::assess(text);
            let chars = text.chars().count();
            Item {
                label: v["label"].as_i64() == Some(1),
                group: v["group"].as_str().unwrap_or_default().to_owned(),
                chars,
                slice: v["slice"].as_str().unwrap_or_default().to_owned(),
                raw: f64::from(a.logit),
                x: calibrate::features(&a, chars).map(f64::from),
                score: calibrate::score(&a, chars),
            }
        })
        .collect()
}

const L2: f64 = 1.0;
const BENIGN_WEIGHT: f64 = 3.0;

/// Solves `a x = b` (Gaussian elimination, partial pivoting).
fn solve(mut a: [[f64; FEATURES]; FEATURES], mut b: [f64; FEATURES]) -> [f64; FEATURES] {
    for c in 0..FEATURES {
        let p = (c..FEATURES).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs())).unwrap_or(c);
        a.swap(c, p);
        b.swap(c, p);
        let pivot = a[c];
        for r in c + 1..FEATURES {
            let f = a[r][c] / pivot[c];
            a[r].iter_mut().zip(&pivot).skip(c).for_each(|(x, p)| *x -= f * p);
            b[r] -= f * b[c];
        }
    }
    let mut x = [0.0; FEATURES];
    for c in (0..FEATURES).rev() {
        let s: f64 = (c + 1..FEATURES).map(|k| a[c][k] * x[k]).sum();
        x[c] = (b[c] - s) / a[c][c];
    }
    x
}

fn fit(items: &[&Item]) -> [f64; FEATURES] {
    let mut w = [0.0f64; FEATURES];
    for _ in 0..50 {
        let mut g = [0.0f64; FEATURES];
        let mut h = [[0.0f64; FEATURES]; FEATURES];
        for it in items {
            let z: f64 = it.x.iter().zip(&w).map(|(x, w)| x * w).sum();
            let p = 1.0 / (1.0 + (-z).exp());
            let (y, sw) = if it.label { (1.0, 1.0) } else { (0.0, BENIGN_WEIGHT) };
            for (i, row) in h.iter_mut().enumerate() {
                g[i] += (p - y) * sw * it.x[i];
                row.iter_mut().zip(&it.x).for_each(|(hij, xj)| *hij += p * (1.0 - p) * sw * it.x[i] * xj);
            }
        }
        for i in 0..FEATURES {
            let l2 = if i + 1 == FEATURES { 1e-6 } else { L2 };
            g[i] += l2 * w[i];
            h[i][i] += l2;
        }
        let step = solve(h, g);
        w.iter_mut().zip(step).for_each(|(w, s)| *w -= s);
    }
    w
}

/// Recall at the lowest threshold with at most `fpr` of the benign scores at or above it.
fn recall_at(s: &[(f64, bool)], fpr: f64) -> f64 {
    let mut b: Vec<f64> = s.iter().filter(|x| !x.1).map(|x| x.0).collect();
    b.sort_by(|x, y| y.total_cmp(x));
    let k = (fpr * b.len() as f64).floor() as usize;
    let t = b.get(k).map_or(f64::NEG_INFINITY, |v| v + 1e-9);
    let a = s.iter().filter(|x| x.1).count() as f64;
    s.iter().filter(|x| x.1 && x.0 >= t).count() as f64 / a
}

fn auc(s: &[(f64, bool)]) -> f64 {
    let (a, b): (Vec<f64>, Vec<f64>) = (s.iter().filter(|x| x.1).map(|x| x.0).collect(), s.iter().filter(|x| !x.1).map(|x| x.0).collect());
    let wins: f64 = a
        .iter()
        .map(|x| {
            b.iter()
                .map(|y| {
                    if x > y {
                        1.0
                    } else if x == y {
                        0.5
                    } else {
                        0.0
                    }
                })
                .sum::<f64>()
        })
        .sum();
    wins / (a.len() * b.len()) as f64
}

const FPRS: [f64; 6] = [0.005, 0.01, 0.015, 0.02, 0.03, 0.05];

fn main() {
    let fit_mode = std::env::args().any(|a| a == "--fit");
    let items = load("validation");
    if let Some(i) = std::env::args().position(|a| a == "--dump") {
        // The rows in `load`'s order, so each item meets its own text.
        let path = std::env::args().nth(i + 1).expect("--dump FILE");
        let rows = heldout::rows("validation");
        let mut out = String::new();
        for (it, v) in items.iter().zip(&rows) {
            out.push_str(&serde_json::json!({"label": it.label, "group": it.group, "slice": it.slice, "x": it.x, "text": v["text"], "kind": v["kind"]}).to_string());
            out.push('\n');
        }
        std::fs::write(path, out).expect("write");
        return;
    }
    let (na, nb) = (items.iter().filter(|i| i.label).count(), items.iter().filter(|i| !i.label).count());
    println!("validation split: {na} attacks, {nb} benign");
    if fit_mode {
        println!("\nOut of fold (10 x 5 folds by group): recall at FPR {FPRS:?}, ROC-AUC");
        let mut sums = [[0.0f64; 7]; 2];
        for rep in 0..10u32 {
            let fold = |it: &Item| (fnv64(&format!("{rep}/{}", it.group)) % 5) as u32;
            let mut oof = vec![0.0f64; items.len()];
            for k in 0..5 {
                let train: Vec<&Item> = items.iter().filter(|it| fold(it) != k).collect();
                let w = fit(&train);
                for (o, it) in oof.iter_mut().zip(&items) {
                    if fold(it) == k {
                        *o = it.x.iter().zip(&w).map(|(x, w)| x * w).sum();
                    }
                }
            }
            let raw: Vec<(f64, bool)> = items.iter().map(|it| (it.raw, it.label)).collect();
            let cal: Vec<(f64, bool)> = items.iter().zip(&oof).map(|(it, o)| (*o, it.label)).collect();
            for (row, s) in sums.iter_mut().zip([&raw, &cal]) {
                for (i, f) in FPRS.iter().enumerate() {
                    row[i] += recall_at(s, *f) / 10.0;
                }
                row[6] += auc(s) / 10.0;
            }
        }
        for (name, row) in ["model's score", "calibrated"].iter().zip(&sums) {
            println!("  {name:<14} {}  AUC {:.4}", row[..6].iter().map(|v| format!("{v:.3}")).collect::<Vec<_>>().join(" "), row[6]);
        }
        let all: Vec<&Item> = items.iter().collect();
        let w = fit(&all);
        println!("\nWeights on the whole validation split:");
        for (n, v) in calibrate::NAMES.iter().zip(&w) {
            println!("  {n:<34} {v:>8.4}");
        }
        println!("pub const WEIGHTS: [f32; FEATURES] = [{}];", w.iter().map(|v| format!("{:.4}", v)).collect::<Vec<_>>().join(", "));
        return;
    }
    let mut benign: Vec<f32> = items.iter().filter(|i| !i.label).map(|i| i.score).collect();
    benign.sort_by(|a, b| b.total_cmp(a));
    println!(
        "\ncommitted calibration: threshold at each validation FPR, recall, benign flag rate < 500 / 500-2,000 / >= 2,000 chars, documents and long texts"
    );
    for fpr in [0.004, 0.005, 0.01, 0.012, 0.015, 0.017, 0.02, 0.03, 0.05, 0.06] {
        let k = (fpr * benign.len() as f64).floor() as usize;
        let t = benign.get(k).map_or(0.0, |s| s.next_up());
        let rate = |f: &dyn Fn(&Item) -> bool, label: bool| {
            let sel: Vec<&Item> = items.iter().filter(|i| i.label == label && f(i)).collect();
            sel.iter().filter(|i| i.score >= t).count() as f64 / sel.len().max(1) as f64
        };
        println!(
            "  FPR <= {fpr:<5} threshold {t:.4}  recall {:.3}  FPR {:.4}  by length {:.3} / {:.3} / {:.3}  doc/long {:.4}",
            rate(&|_| true, true),
            rate(&|_| true, false),
            rate(&|i| i.chars < 500, false),
            rate(&|i| (500..2000).contains(&i.chars), false),
            rate(&|i| i.chars >= 2000, false),
            rate(&|i| i.slice == "document" || i.chars >= 2000, false),
        );
    }
}
