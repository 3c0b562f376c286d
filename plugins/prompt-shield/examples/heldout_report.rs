//! Prompt Shield on the held-out evaluation set (`eval/heldout/*.jsonl`), which
//! shares no source with the training data in `data/` (see `eval/README.md`).
//!
//! `cargo run --release -p prompt-shield --example heldout_report [-- --split test|validation|all] [--errors N] [--scores FILE]`
//!
//! Every text is judged exactly as the plugin's `inspect` judges a user
//! message (`inspect_texts` at stage `input`, default config), once per
//! strictness. It prints each mode's operating point (recall and FPR, block or
//! flag, and block only), recall per attack kind, FPR per benign slice, both per
//! length bucket, per source, the ROC-AUC of the score and the recall at FPR
//! 0.01 / 0.02 / 0.05. `--split test` (the default) is the frozen split: choose
//! thresholds on `validation`, never on `test`. `--errors N` lists the N
//! highest-scoring benign texts and the N lowest-scoring attacks; `--scores FILE`
//! writes every row's score as JSON lines (for error analysis).

use std::collections::BTreeMap;

use prompt_shield::detect::{Action, Stage, Strictness};
use prompt_shield::inspect_texts;

struct Row {
    text: String,
    label: bool,
    source: String,
    kind: String,
    slice: String,
    chars: usize,
    score: f32,
    balanced: Action,
    strict: Action,
}

/// Hits and totals of one cell: (flag or block, block only, n) per mode.
#[derive(Default, Clone, Copy)]
struct Cell {
    n: u32,
    bal_any: u32,
    bal_block: u32,
    strict_any: u32,
    strict_block: u32,
}

impl Cell {
    fn add(&mut self, r: &Row) {
        self.n += 1;
        self.bal_any += u32::from(r.balanced != Action::Allow);
        self.bal_block += u32::from(r.balanced == Action::Block);
        self.strict_any += u32::from(r.strict != Action::Allow);
        self.strict_block += u32::from(r.strict == Action::Block);
    }
    fn rate(&self, x: u32) -> f64 {
        f64::from(x) / f64::from(self.n.max(1))
    }
    fn line(&self) -> String {
        format!(
            "n={:<5} balanced {:.3} (block {:.3})   strict {:.3} (block {:.3})",
            self.n,
            self.rate(self.bal_any),
            self.rate(self.bal_block),
            self.rate(self.strict_any),
            self.rate(self.strict_block)
        )
    }
}

fn load(split: &str) -> Vec<(String, bool, String, String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("eval/heldout");
    let mut files: Vec<_> = std::fs::read_dir(&dir).map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    files.retain(|p: &std::path::PathBuf| p.extension().is_some_and(|e| e == "jsonl"));
    files.sort();
    let mut rows = Vec::new();
    for f in files {
        for line in std::fs::read_to_string(&f).unwrap_or_default().lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).expect("held-out line is JSON");
            let s = |k: &str| v[k].as_str().unwrap_or("?").to_owned();
            if split == "all" || v["split"].as_str() == Some(split) {
                rows.push((s("text"), v["label"].as_i64() == Some(1), s("source"), s("kind"), s("slice")));
            }
        }
    }
    rows
}

fn bucket(chars: usize) -> &'static str {
    match chars {
        0..500 => "< 500",
        500..2000 => "500-2000",
        _ => ">= 2000",
    }
}

/// ROC-AUC as the Mann-Whitney statistic (ties count one half).
fn roc_auc(rows: &[Row]) -> f64 {
    let mut s: Vec<(f32, bool)> = rows.iter().map(|r| (r.score, r.label)).collect();
    s.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut rank_sum, mut i) = (0.0f64, 0usize);
    while i < s.len() {
        let mut j = i;
        while j < s.len() && s[j].0 == s[i].0 {
            j += 1;
        }
        let avg = (i + j + 1) as f64 / 2.0; // ranks i+1 ..= j
        rank_sum += avg * s[i..j].iter().filter(|x| x.1).count() as f64;
        i = j;
    }
    let p = s.iter().filter(|x| x.1).count() as f64;
    let n = s.len() as f64 - p;
    if p == 0.0 || n == 0.0 { f64::NAN } else { (rank_sum - p * (p + 1.0) / 2.0) / (p * n) }
}

/// The lowest threshold at which at most `fpr` of benign texts score at or above it; recall there.
fn recall_at(rows: &[Row], fpr: f64) -> (f32, f64, f64) {
    let mut benign: Vec<f32> = rows.iter().filter(|r| !r.label).map(|r| r.score).collect();
    benign.sort_by(|a, b| b.total_cmp(a));
    let k = (fpr * benign.len() as f64).floor() as usize;
    let thr = benign.get(k).map_or(0.0, |s| s.next_up());
    let attacks = rows.iter().filter(|r| r.label).count().max(1) as f64;
    let rec = rows.iter().filter(|r| r.label && r.score >= thr).count() as f64 / attacks;
    let real = benign.iter().filter(|&&s| s >= thr).count() as f64 / benign.len().max(1) as f64;
    (thr, rec, real)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let split = arg("--split").unwrap_or_else(|| "test".into());
    let errors: usize = arg("--errors").and_then(|n| n.parse().ok()).unwrap_or(0);
    let started = std::time::Instant::now();
    let rows: Vec<Row> = load(&split)
        .into_iter()
        .map(|(text, label, source, kind, slice)| {
            let one = [text];
            let b = &inspect_texts(Stage::Input, Strictness::Balanced, "{}", &one)[0];
            let s = &inspect_texts(Stage::Input, Strictness::Strict, "{}", &one)[0];
            let [text] = one;
            Row { chars: text.chars().count(), text, label, source, kind, slice, score: b.score, balanced: b.action, strict: s.action }
        })
        .collect();
    let elapsed = started.elapsed();
    assert!(!rows.is_empty(), "no held-out rows for split {split:?}");
    let (attacks, benign): (Vec<&Row>, Vec<&Row>) = rows.iter().partition(|r| r.label);
    println!(
        "Prompt Shield on the held-out set, split {split}: {} attacks, {} benign (scored twice each, balanced and strict, in {elapsed:.1?})\n",
        attacks.len(),
        benign.len()
    );

    let mut atk = Cell::default();
    let mut ben = Cell::default();
    attacks.iter().for_each(|r| atk.add(r));
    benign.iter().for_each(|r| ben.add(r));
    println!("Operating points (a text is detected when the verdict is not allow; \"block\" counts blocks only):");
    println!("  {:<26} {:>8} {:>8} {:>10}", "mode", "recall", "FPR", "precision");
    for (name, tp, fp) in [
        ("balanced (internal)", atk.bal_any, ben.bal_any),
        ("balanced, block only", atk.bal_block, ben.bal_block),
        ("strict (confidential)", atk.strict_any, ben.strict_any),
        ("strict, block only", atk.strict_block, ben.strict_block),
    ] {
        let prec = f64::from(tp) / f64::from((tp + fp).max(1));
        println!("  {name:<26} {:>8.3} {:>8.3} {prec:>10.3}", atk.rate(tp), ben.rate(fp));
    }

    // Issue 31's document/long-text slice: benign documents and every benign text of at least 2,000 characters.
    let mut doc_long = Cell::default();
    benign.iter().filter(|r| r.slice == "document" || r.chars >= 2000).for_each(|r| doc_long.add(r));
    println!(
        "  {:<26} {:>8} {:>8}   (benign documents and texts >= 2,000 chars, n={})",
        "balanced, doc/long slice",
        "",
        format!("{:.3}", doc_long.rate(doc_long.bal_any)),
        doc_long.n
    );
    println!("  {:<26} {:>8} {:>8}", "strict, doc/long slice", "", format!("{:.3}", doc_long.rate(doc_long.strict_any)));

    // Document mode: stage `retrieved`, where a blocked passage is left out of the context.
    let doc_like = |r: &Row| !r.label && ["document", "hard_negative", "code", "multilingual"].contains(&r.slice.as_str());
    let docs: Vec<String> = rows.iter().filter(|r| doc_like(r)).map(|r| r.text.clone()).collect();
    let indirect: Vec<String> = rows.iter().filter(|r| r.label && r.kind == "indirect").map(|r| r.text.clone()).collect();
    println!("\nDocument mode (stage retrieved; a blocked passage is removed from the context):");
    for (name, mode) in [("balanced", Strictness::Balanced), ("strict", Strictness::Strict)] {
        let removed = |texts: &[String]| {
            let out = inspect_texts(Stage::Retrieved, mode, "{}", texts);
            out.iter().filter(|d| d.action == Action::Block).count() as f64 / texts.len().max(1) as f64
        };
        println!(
            "  {name:<9} benign documents/passages removed {:.4} (n={})   indirect attacks removed {:.3} (n={})",
            removed(&docs),
            docs.len(),
            removed(&indirect),
            indirect.len()
        );
    }

    let auc = roc_auc(&rows);
    println!("\nScore: ROC-AUC {auc:.3}");
    for fpr in [0.01, 0.02, 0.05] {
        let (thr, rec, real) = recall_at(&rows, fpr);
        println!("  recall at FPR <= {fpr:.2}: {rec:.3}  (threshold {thr:.4}, FPR there {real:.4})");
    }

    let mut by_kind: BTreeMap<&str, Cell> = BTreeMap::new();
    let mut by_slice: BTreeMap<&str, Cell> = BTreeMap::new();
    let mut by_len: BTreeMap<(bool, &str), Cell> = BTreeMap::new();
    let mut by_slice_len: BTreeMap<(&str, &str), Cell> = BTreeMap::new();
    let mut by_source: BTreeMap<(bool, &str), Cell> = BTreeMap::new();
    let mut atk_lang: BTreeMap<&str, Cell> = BTreeMap::new();
    for r in &rows {
        if r.label {
            by_kind.entry(&r.kind).or_default().add(r);
            atk_lang.entry(&r.slice).or_default().add(r);
        } else {
            by_slice.entry(&r.slice).or_default().add(r);
            by_slice_len.entry((&r.slice, bucket(r.chars))).or_default().add(r);
        }
        by_len.entry((r.label, bucket(r.chars))).or_default().add(r);
        by_source.entry((r.label, &r.source)).or_default().add(r);
    }
    println!("\nRecall per attack kind:");
    for (k, c) in &by_kind {
        println!("  {k:<16} {}", c.line());
    }
    for (k, c) in &atk_lang {
        println!("  {:<16} {}", format!("({k})"), c.line());
    }
    println!("\nFalse-positive rate per benign slice:");
    for (k, c) in &by_slice {
        println!("  {k:<16} {}", c.line());
    }
    println!("\nPer length bucket (characters): attack recall / benign FPR:");
    for b in ["< 500", "500-2000", ">= 2000"] {
        for label in [true, false] {
            if let Some(c) = by_len.get(&(label, b)) {
                println!("  {b:<9} {:<7} {}", if label { "recall" } else { "FPR" }, c.line());
            }
        }
    }
    println!("\nBenign FPR per slice and length bucket:");
    for ((s, b), c) in &by_slice_len {
        println!("  {s:<14} {b:<9} {}", c.line());
    }
    println!("\nPer source (attack: recall; benign: FPR):");
    for ((label, s), c) in by_source.iter().rev() {
        println!("  {} {s:<20} {}", if *label { "attack" } else { "benign" }, c.line());
    }

    if let Some(path) = arg("--scores") {
        let lines: Vec<String> = rows
            .iter()
            .map(|r| {
                serde_json::json!({"text": r.text, "label": u8::from(r.label), "source": r.source, "kind": r.kind, "slice": r.slice, "score": r.score})
                    .to_string()
            })
            .collect();
        std::fs::write(&path, lines.join("\n") + "\n").unwrap_or_else(|e| panic!("{path}: {e}"));
    }

    if errors > 0 {
        let mut fp: Vec<&&Row> = benign.iter().collect();
        fp.sort_by(|a, b| b.score.total_cmp(&a.score));
        println!("\nHighest-scoring benign texts:");
        for r in fp.iter().take(errors) {
            let short: String = r.text.chars().take(100).collect::<String>().replace('\n', " ");
            println!("  {:.3} [{} {} {}c] {short}", r.score, r.source, r.slice, r.chars);
        }
        let mut fneg: Vec<&&Row> = attacks.iter().collect();
        fneg.sort_by(|a, b| a.score.total_cmp(&b.score));
        println!("\nLowest-scoring attacks:");
        for r in fneg.iter().take(errors) {
            let short: String = r.text.chars().take(100).collect::<String>().replace('\n', " ");
            println!("  {:.3} [{} {} {}c] {short}", r.score, r.source, r.kind, r.chars);
        }
    }
}
