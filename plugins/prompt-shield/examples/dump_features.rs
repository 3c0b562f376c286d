//! Writes the hashed features of every training text and of the held-out
//! validation and test splits, exactly as the detector's featuriser computes
//! them, for measuring other models over the same features outside Rust
//! (`eval/tools/hidden_layer.py`).
//!
//! `cargo run --release -p prompt-shield --example dump_features -- DIR`
//!
//! Writes `DIR/meta.jsonl` (one row a line: `split` `train`, `validation` or
//! `test`; `role` `text`, `payload` or `window`; `parent`, the row of the
//! text a payload or window belongs to; label, source, group, kind, slice,
//! the text's characters, its hand features, its n-gram count `grams` and
//! `scale`, the factor [`features::gram_scale`] gives that count; `offset`
//! and `n`, where its pairs sit in the other file) and `DIR/grams.bin`
//! (little-endian `u32` pairs: bucket, how many of the row's n-grams fell in
//! it, sorted by bucket). A row's n-gram vector as the model sees it is each
//! count times `scale`.
//!
//! Training rows are what `examples/train` trains on: every text of
//! `data/*.jsonl`, its decoded payloads, and the 256-character windows of
//! its raw text when it is benign. Held-out rows are each text and, when it
//! is longer than one window, its windows as `model.rs` scores them (the
//! n-grams starting in 256 normalised characters, stride 128, with the whole
//! text's hand features). The test split is written so that a model that
//! clears its bar on validation can be measured once; nothing here tunes
//! on it.

#[path = "common/heldout.rs"]
mod heldout;
#[path = "train/inputs.rs"]
#[allow(dead_code)]
mod inputs;

use std::io::Write;
use std::path::Path;

use prompt_shield::features::{self, HAND};
use prompt_shield::{decode, normalize};

/// The model's window length and stride (`model::WINDOW`, `model::STRIDE`).
use prompt_shield::model::{STRIDE, WINDOW};

/// What one row carries besides its n-grams.
struct Meta<'a> {
    split: &'a str,
    role: &'a str,
    parent: usize,
    row: &'a serde_json::Value,
    chars: usize,
    hand: [f32; HAND],
}

struct Writer {
    meta: std::io::BufWriter<std::fs::File>,
    grams: std::io::BufWriter<std::fs::File>,
    rows: usize,
    pairs: u64,
}

impl Writer {
    /// Writes one row from its n-gram buckets (any order, repeats counted).
    fn row(&mut self, m: &Meta, mut buckets: Vec<u32>) -> usize {
        buckets.sort_unstable();
        let total = buckets.len();
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for b in buckets {
            match pairs.last_mut() {
                Some((last, c)) if *last == b => *c += 1,
                _ => pairs.push((b, 1)),
            }
        }
        for (b, c) in &pairs {
            self.grams.write_all(&b.to_le_bytes()).expect("write");
            self.grams.write_all(&c.to_le_bytes()).expect("write");
        }
        let id = self.rows;
        let line = serde_json::json!({
            "id": id, "split": m.split, "role": m.role, "parent": m.parent,
            "label": m.row["label"].as_i64().unwrap_or(0), "source": m.row["source"], "group": m.row["group"],
            "kind": m.row["kind"], "slice": m.row["slice"], "chars": m.chars, "hand": m.hand,
            "grams": total, "scale": features::gram_scale(total), "offset": self.pairs, "n": pairs.len(),
        });
        writeln!(self.meta, "{line}").expect("write");
        self.pairs += pairs.len() as u64;
        self.rows += 1;
        id
    }
}

/// Every (start position, bucket) of a normalised text's n-grams.
fn grams(chars: &[char]) -> Vec<(usize, u32)> {
    let mut out = Vec::with_capacity(chars.len() * 4);
    features::for_each_gram(chars, |p, b| out.push((p, b as u32)));
    out
}

/// A text featurised as a whole (normalised here): its buckets, hand features, characters.
fn whole(text: &str) -> (Vec<u32>, [f32; HAND], usize) {
    let norm = normalize::normalize(text);
    let g = grams(&norm.chars).into_iter().map(|(_, b)| b).collect();
    (g, features::hand_features(&norm), text.chars().count())
}

fn main() {
    let dir = std::env::args().nth(1).expect("usage: dump_features DIR");
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir).expect("create DIR");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let file = |name: &str| std::io::BufWriter::new(std::fs::File::create(dir.join(name)).expect("create"));
    let mut w = Writer { meta: file("meta.jsonl"), grams: file("grams.bin"), rows: 0, pairs: 0 };

    for f in inputs::data_files(root) {
        let body = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for line in body.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            let text = v["text"].as_str().unwrap_or_default();
            let (g, hand, chars) = whole(text);
            let id = w.row(&Meta { split: "train", role: "text", parent: w.rows, row: &v, chars, hand }, g);
            let benign = v["label"].as_i64() != Some(1);
            let extra = decode::payloads(text).into_iter().map(|t| ("payload", t));
            let wins = if benign { inputs::windows(text) } else { Vec::new() };
            for (role, t) in extra.chain(wins.into_iter().map(|t| ("window", t))) {
                let (g, hand, chars) = whole(&t);
                w.row(&Meta { split: "train", role, parent: id, row: &v, chars, hand }, g);
            }
        }
    }
    for split in ["validation", "test"] {
        for v in heldout::rows(split) {
            let text = v["text"].as_str().unwrap_or_default();
            let norm = normalize::normalize(text);
            let hand = features::hand_features(&norm);
            let all = grams(&norm.chars);
            let chars = text.chars().count();
            let id = w.row(&Meta { split, role: "text", parent: w.rows, row: &v, chars, hand }, all.iter().map(|g| g.1).collect());
            let n = norm.chars.len();
            if n > WINDOW {
                let mut start = 0;
                loop {
                    let end = (start + WINDOW).min(n);
                    let g = all.iter().filter(|(p, _)| (start..end).contains(p)).map(|g| g.1).collect();
                    w.row(&Meta { split, role: "window", parent: id, row: &v, chars: end - start, hand }, g);
                    if end == n {
                        break;
                    }
                    start += STRIDE;
                }
            }
        }
    }
    w.meta.flush().expect("flush");
    w.grams.flush().expect("flush");
    println!("{} rows, {} (bucket, count) pairs, in {}", w.rows, w.pairs, dir.display());
}
