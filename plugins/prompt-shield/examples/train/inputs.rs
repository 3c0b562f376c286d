//! What the committed model depends on: every training file and the sources
//! that turn a text into features (and the trainer itself). Their SHA-256s,
//! one line per file in `sha256sum` format, make the manifest
//! `model/shield.inputs`; the model file's header carries the SHA-256 of that
//! manifest. Shared by the trainer (`examples/train/main.rs`, which writes
//! both) and the test that fails when an input changed without retraining
//! (`tests/model_file.rs`).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The command that retrains the model and rewrites the manifest.
pub const RETRAIN: &str = "cargo run --release -p prompt-shield --example train";

/// The manifest, relative to the crate root.
pub const MANIFEST: &str = "model/shield.inputs";

/// The model file, relative to the crate root.
pub const MODEL: &str = "model/shield.bin";

/// Sources whose change can change the weights: the featuriser (normaliser,
/// decoder, rewriter, n-grams and hand features) and the trainer.
const SOURCES: [&str; 6] =
    ["src/normalize.rs", "src/decode.rs", "src/rewrite.rs", "src/features.rs", "examples/train/main.rs", "examples/train/inputs.rs"];

/// The training files: `data/*.jsonl`, sorted (`data/eval/` is never trained on).
pub fn data_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(root.join("data")).map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "jsonl"));
    files.sort();
    files
}

/// Windows of long benign texts, trained as benign beside the text, so that a
/// benign document's best window (which the detector also scores, see
/// `model.rs`) is not an attack to the model.
pub fn windows(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let (w, step) = (256, 256);
    let mut out = Vec::new();
    let mut start = 0;
    while chars.len() > w * 2 && start + w <= chars.len() {
        out.push(chars[start..start + w].iter().collect());
        start += step;
    }
    out
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The manifest of the inputs as they are on disk now.
pub fn manifest(root: &Path) -> std::io::Result<String> {
    let mut out = String::from("# SHA-256 of every input of model/shield.bin; written by the trainer, checked by tests/model_file.rs\n");
    let mut paths: Vec<PathBuf> = data_files(root);
    paths.extend(SOURCES.iter().map(|s| root.join(s)));
    for p in paths {
        let bytes = std::fs::read(&p)?;
        let rel = p.strip_prefix(root).unwrap_or(&p).to_string_lossy().replace('\\', "/");
        out.push_str(&format!("{}  {rel}\n", hex(&sha256(&bytes))));
    }
    Ok(out)
}
