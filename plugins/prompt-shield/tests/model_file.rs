//! The committed model (`model/shield.bin`) was trained on the inputs as they
//! are now: every training file and every featuriser source hashes to what
//! `model/shield.inputs` says, and the model file carries that manifest's
//! SHA-256. A change to the data or the featuriser without retraining fails
//! here with the command that retrains.

#[path = "../examples/train/inputs.rs"]
#[expect(dead_code, reason = "the trainer's windows are its own; this test reads only the manifest")]
mod inputs;

use std::path::Path;

use prompt_shield::features::{BUCKETS, HAND};
use prompt_shield::model::file;

#[test]
fn the_committed_model_was_trained_on_the_current_inputs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let committed = std::fs::read_to_string(root.join(inputs::MANIFEST)).unwrap_or_default();
    let now = inputs::manifest(root).expect("the model's inputs are readable");
    let changed: Vec<&str> = now.lines().filter(|l| !committed.lines().any(|c| c == *l)).collect();
    let gone: Vec<&str> = committed.lines().filter(|l| !now.lines().any(|c| c == *l)).collect();
    assert!(
        changed.is_empty() && gone.is_empty(),
        "the model's inputs changed since it was trained; retrain with `{}` and commit model/:\nnow:\n{}\nwhen trained:\n{}",
        inputs::RETRAIN,
        changed.join("\n"),
        gone.join("\n")
    );
    assert_eq!(
        inputs::sha256(committed.as_bytes()),
        file::INPUTS_SHA256,
        "model/shield.bin was not written with this manifest; retrain with `{}`",
        inputs::RETRAIN
    );
}

#[test]
fn the_committed_model_fits_the_featuriser() {
    let on_disk = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(inputs::MODEL)).expect("model/shield.bin");
    let u32_at = |at: usize| on_disk.get(at..at + 4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    assert!(
        on_disk.starts_with(file::MAGIC)
            && u32_at(8) == BUCKETS
            && u32_at(12) == HAND
            && u32_at(24) == file::WEIGHT_BITS
            && on_disk.len() == file::HEADER + file::PACKED,
        "model/shield.bin does not fit {BUCKETS} buckets of {} bits and {HAND} hand features; retrain with `{}`",
        file::WEIGHT_BITS,
        inputs::RETRAIN
    );
    // What the crate embedded is that file (a file that does not fit embeds
    // an all-zero codebook and weights).
    assert!(std::hint::black_box(file::VALID), "the embedded model is not the valid file on disk");
    assert_eq!(file::BIAS.to_le_bytes(), on_disk[28..32]);
    assert_eq!(file::INPUTS_SHA256, on_disk[32..64]);
    assert_eq!(file::WEIGHTS[..], on_disk[file::HEADER..]);
    let (attacks, benign) = file::TRAIN_EXAMPLES;
    assert!(attacks > 1000 && benign > 1000, "{attacks} attack and {benign} benign training examples");
    assert!(file::BIAS < 0.0 && file::HAND_WEIGHTS.iter().any(|w| *w != 0.0));
    // Code 0 is exactly 0 (buckets no n-gram reached), the others are
    // distinct and used: the codebook spends its levels on the weights.
    assert_eq!(file::CODEBOOK[0], 0.0);
    let mut used = [false; file::LEVELS];
    (0..BUCKETS).for_each(|b| used[file::code(b)] = true);
    assert!(used.iter().filter(|u| **u).count() > file::LEVELS * 9 / 10, "codes used: {}", used.iter().filter(|u| **u).count());
}
