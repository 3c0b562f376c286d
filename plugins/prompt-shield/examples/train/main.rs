//! Trains Prompt Shield's linear model and writes it to `model/shield.bin`,
//! with the SHA-256 of every input in `model/shield.inputs`.
//!
//! `cargo run --release -p prompt-shield --example train [-- --out PATH]`
//!
//! Reads the labelled set `data/*.jsonl` (`{"text", "label", "source",
//! "group"}`), featurises every text exactly as the detector does (it calls
//! the crate's own normaliser, decoder and featuriser), fits an
//! L2-regularised logistic regression with AdaGrad on eight orders of the
//! examples (each model the average of its second half of epochs), averages
//! the eight weight vectors and writes the result in
//! the format `model.rs` reads (`model/README.md`). Deterministic: same data
//! and sources, same bytes (IEEE arithmetic does not depend on the
//! optimisation level). Training runs here rather than in `build.rs` so that
//! a build of the server only embeds the committed file; `tests/model_file.rs`
//! fails when an input changed and the model was not retrained.
//!
//! The constants below may be overridden from the environment (`PS_LAMBDA`,
//! `PS_EPOCHS`, `PS_WNEG`, `PS_BIAS0`, `PS_BAGS`, `PS_TAIL_AVERAGE`) for experiments; such a model is
//! written only to an explicit `--out` path, never over the committed one.

mod inputs;

use std::path::{Path, PathBuf};

use prompt_shield::features::{self, BUCKETS, DIM, HAND};
use prompt_shield::{decode, model, normalize};

/// One training example: sparse (bucket, value) pairs plus hand features.
struct Example {
    sparse: Vec<(u32, f32)>,
    hand: [f32; HAND],
    label: f32,
    weight: f32,
}

fn featurise(text: &str) -> (Vec<(u32, f32)>, [f32; HAND]) {
    let norm = normalize::normalize(text);
    let mut buckets: Vec<u32> = Vec::with_capacity(norm.chars.len() * 4);
    features::for_each_gram(&norm.chars, |_, b| buckets.push(b as u32));
    buckets.sort_unstable();
    let scale = features::gram_scale(buckets.len());
    let mut sparse: Vec<(u32, f32)> = Vec::new();
    for b in buckets {
        match sparse.last_mut() {
            Some((last, v)) if *last == b => *v += scale,
            _ => sparse.push((b, scale)),
        }
    }
    (sparse, features::hand_features(&norm))
}

/// (text, label) of every line of the training files.
fn load(root: &Path) -> Vec<(String, f32)> {
    let mut rows = Vec::new();
    for f in inputs::data_files(root) {
        let body = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for (n, line) in body.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{}:{}: {e}", f.display(), n + 1));
            let text = v["text"].as_str().unwrap_or_default().to_owned();
            rows.push((text, v["label"].as_f64().unwrap_or(0.0) as f32));
        }
    }
    rows
}

/// A training constant, overridable from the environment for experiments.
fn knob(name: &str, default: f32, overridden: &mut bool) -> f32 {
    match std::env::var(name).ok().and_then(|v| v.parse().ok()) {
        Some(v) => {
            *overridden = true;
            v
        }
        None => default,
    }
}

/// Training constants (the committed model uses the defaults).
struct Knobs {
    lambda: f32,
    epochs: usize,
    /// Extra weight of a benign example (false alarms matter more).
    wneg: f32,
    /// The fixed intercept. Not learnt: with mean-normalised n-grams a learnt
    /// intercept went strongly positive (the common words of the many benign
    /// documents took negative weights), so a short text of unfamiliar words
    /// scored as an attack. Fixed below zero, unknown text is benign until
    /// its n-grams say otherwise.
    bias0: f32,
    /// Models trained on different orders of the examples, whose weights are
    /// averaged: one linear model (no cost at run time) with less of the
    /// noise that one order of stochastic gradient steps leaves (validation
    /// split: recall at FPR 0.005-0.03 up by about 0.03 with 8).
    bags: usize,
    /// Each model's weights are the average over the epochs of the second
    /// half rather than the last ones (Polyak averaging: the same noise, less).
    tail_average: bool,
}

fn train(examples: &[Example], k: &Knobs, seed: u64) -> Vec<f32> {
    let mut w = vec![0.0f32; DIM];
    let mut g2 = vec![1e-6f32; DIM];
    let lr = 0.5f32;
    let mut order: Vec<usize> = (0..examples.len()).collect();
    let mut seed = seed;
    // The average of the weights after each epoch of the second half
    // (Polyak averaging), when `k.tail_average`.
    let mut avg = vec![0.0f32; DIM];
    let mut averaged = 0.0f32;
    for epoch in 0..k.epochs {
        // Fisher-Yates with a fixed LCG: deterministic.
        for i in (1..order.len()).rev() {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            order.swap(i, (seed >> 33) as usize % (i + 1));
        }
        for &i in &order {
            let ex = &examples[i];
            let mut z = k.bias0;
            for &(b, v) in &ex.sparse {
                z += w[b as usize] * v;
            }
            for (j, &h) in ex.hand.iter().enumerate() {
                z += w[BUCKETS + j] * h;
            }
            let p = 1.0 / (1.0 + (-z).exp());
            let g = (p - ex.label) * ex.weight;
            let mut step = |idx: usize, grad: f32| {
                let grad = grad + k.lambda * w[idx];
                g2[idx] += grad * grad;
                w[idx] -= lr * grad / g2[idx].sqrt();
            };
            for &(b, v) in &ex.sparse {
                step(b as usize, g * v);
            }
            for (j, &h) in ex.hand.iter().enumerate() {
                if h != 0.0 {
                    step(BUCKETS + j, g * h);
                }
            }
        }
        if k.tail_average && epoch >= k.epochs / 2 {
            avg.iter_mut().zip(&w).for_each(|(a, x)| *a += x);
            averaged += 1.0;
        }
    }
    if averaged > 0.0 {
        avg.iter_mut().for_each(|a| *a /= averaged);
        return avg;
    }
    w
}

/// A codebook of `LEVELS` values for the n-gram weights: entry 0 is exactly
/// 0 (buckets no training n-gram reached), the others the centres of a 1-D
/// k-means (Lloyd's iterations from the quantiles) of the non-zero weights,
/// so the codes are dense where the weights are and the few large weights
/// keep their size.
fn codebook(w: &[f32]) -> Vec<f32> {
    let levels = model::file::LEVELS;
    let mut nz: Vec<f32> = w.iter().copied().filter(|x| *x != 0.0).collect();
    nz.sort_by(f32::total_cmp);
    let free = levels - 1;
    let mut centres: Vec<f32> = (0..free).map(|i| nz.get(((2 * i + 1) * nz.len()) / (2 * free)).copied().unwrap_or(0.0)).collect();
    for _ in 0..40 {
        centres.sort_by(f32::total_cmp);
        centres.dedup();
        let (mut sum, mut count) = (vec![0.0f64; centres.len()], vec![0usize; centres.len()]);
        for &x in &nz {
            let k = nearest(&centres, x);
            sum[k] += f64::from(x);
            count[k] += 1;
        }
        for (k, c) in centres.iter_mut().enumerate() {
            if count[k] > 0 {
                *c = (sum[k] / count[k] as f64) as f32;
            }
        }
    }
    centres.sort_by(f32::total_cmp);
    centres.dedup();
    let mut book = vec![0.0f32];
    book.extend(centres);
    book.resize(levels, 0.0);
    book
}

/// The index of the centre nearest `x` (`centres` sorted).
fn nearest(centres: &[f32], x: f32) -> usize {
    let i = centres.partition_point(|c| *c < x);
    match (i.checked_sub(1), centres.get(i)) {
        (Some(lo), Some(hi)) if (x - centres[lo]).abs() <= (hi - x).abs() => lo,
        (Some(lo), None) => lo,
        _ => i,
    }
}

/// The model file (`model/README.md`): the n-gram weights as codes of
/// `WEIGHT_BITS` bits into a fitted codebook (the weight table is linear
/// memory the host resets after every call), the hand weights and the
/// intercept as `f32`, the example counts and the manifest's SHA-256.
fn encode(w: &[f32], bias: f32, counts: (usize, usize), manifest_sha: &[u8; 32]) -> Vec<u8> {
    use model::file::{HEADER, LEVELS, MAGIC, PACKED, PREAMBLE, WEIGHT_BITS};
    let book = codebook(&w[..BUCKETS]);
    let mut out = Vec::with_capacity(HEADER + PACKED);
    out.extend_from_slice(MAGIC);
    for v in [BUCKETS, HAND, counts.0, counts.1, WEIGHT_BITS] {
        out.extend_from_slice(&u32::try_from(v).expect("fits u32").to_le_bytes());
    }
    out.extend_from_slice(&bias.to_le_bytes());
    out.extend_from_slice(manifest_sha);
    for x in &w[BUCKETS..] {
        out.extend_from_slice(&x.to_le_bytes());
    }
    assert_eq!(out.len(), PREAMBLE);
    for c in &book {
        out.extend_from_slice(&c.to_le_bytes());
    }
    assert_eq!(out.len(), HEADER);
    // The codebook sorted but for entry 0 (exactly 0): search the sorted
    // values, then map back to the code.
    let mut sorted: Vec<(f32, usize)> = book.iter().copied().zip(0..).collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    sorted.dedup_by(|a, b| a.0 == b.0);
    let values: Vec<f32> = sorted.iter().map(|v| v.0).collect();
    let per_byte = 8 / WEIGHT_BITS;
    let mut packed = vec![0u8; PACKED];
    for (b, x) in w[..BUCKETS].iter().enumerate() {
        let code = if *x == 0.0 { 0 } else { sorted[nearest(&values, *x)].1 };
        assert!(code < LEVELS);
        packed[b / per_byte] |= (code as u8) << ((b % per_byte) * WEIGHT_BITS);
    }
    out.extend_from_slice(&packed);
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let out_arg = args.iter().position(|a| a == "--out").and_then(|i| args.get(i + 1)).map(PathBuf::from);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let started = std::time::Instant::now();

    let mut overridden = false;
    let knobs = Knobs {
        lambda: knob("PS_LAMBDA", 1e-3, &mut overridden),
        epochs: knob("PS_EPOCHS", 14.0, &mut overridden) as usize,
        wneg: knob("PS_WNEG", 1.3, &mut overridden),
        bias0: knob("PS_BIAS0", -4.0, &mut overridden),
        bags: knob("PS_BAGS", 8.0, &mut overridden) as usize,
        tail_average: knob("PS_TAIL_AVERAGE", 1.0, &mut overridden) > 0.0,
    };
    if overridden && out_arg.is_none() {
        eprintln!("PS_* knobs are set: give --out PATH (the committed model, `{}`, uses the defaults)", inputs::RETRAIN);
        std::process::exit(2);
    }
    // Read the inputs' digests before training, so a file edited meanwhile
    // makes the manifest stale (and the test fail) rather than right by luck.
    let manifest = inputs::manifest(root).unwrap_or_else(|e| panic!("reading the inputs: {e}"));

    let rows = load(root);
    let mut examples = Vec::new();
    let (mut pos, mut neg) = (0usize, 0usize);
    for (text, label) in &rows {
        let mut texts = vec![text.clone()];
        texts.extend(decode::payloads(text));
        if *label == 0.0 {
            texts.extend(inputs::windows(text));
        }
        for t in texts {
            let (sparse, hand) = featurise(&t);
            examples.push(Example { sparse, hand, label: *label, weight: 1.0 });
            if *label > 0.5 { pos += 1 } else { neg += 1 }
        }
    }
    assert!(pos > 0 && neg > 0, "no training data of one class in data/*.jsonl");
    // Balance the classes, with benign errors costing a little more (FPR matters).
    let n = (pos + neg) as f32;
    let (wp, wn) = (n / (2.0 * pos as f32), knobs.wneg * n / (2.0 * neg as f32));
    for ex in &mut examples {
        ex.weight = if ex.label > 0.5 { wp } else { wn };
    }
    let featurised = started.elapsed();
    let mut w = vec![0.0f32; DIM];
    for bag in 0..knobs.bags.max(1) {
        let seed = 0x5eed + 0x9e37_79b9 * bag as u64;
        for (sum, x) in w.iter_mut().zip(train(&examples, &knobs, seed)) {
            *sum += x / knobs.bags.max(1) as f32;
        }
    }

    let bytes = encode(&w, knobs.bias0, (pos, neg), &inputs::sha256(manifest.as_bytes()));
    let model_path = out_arg.clone().unwrap_or_else(|| root.join(inputs::MODEL));
    std::fs::write(&model_path, &bytes).unwrap_or_else(|e| panic!("{}: {e}", model_path.display()));
    let manifest_path = match &out_arg {
        Some(p) => p.with_extension("inputs"),
        None => root.join(inputs::MANIFEST),
    };
    std::fs::write(&manifest_path, &manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest_path.display()));
    println!(
        "trained on {pos} attack and {neg} benign examples (featurised in {featurised:.1?}, {:.1?} in all); wrote {} ({} bytes, SHA-256 {}) and {}",
        started.elapsed(),
        model_path.display(),
        bytes.len(),
        inputs::hex(&inputs::sha256(&bytes)),
        manifest_path.display()
    );
}
