//! The featuriser's output on the whole labelled set, as one digest.
//!
//! The normaliser and the featuriser are tuned for speed (they run on every
//! prompt, in a fresh instance); a speed-up must not change what the model
//! sees. This digest covers, for every text of `data/*.jsonl`, the normalised
//! text, what the normaliser undid, the hand features, every n-gram (position
//! and bucket) and the score. A change that alters any of them on purpose
//! (new features, new data, a retrained model) updates `EXPECTED` in the same
//! commit, and says so.

use prompt_shield::{detect, features, normalize};

const EXPECTED: u64 = 0x432e_86d8_a6bf_6191;

struct Digest(u64);

impl Digest {
    fn add(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn add_u32(&mut self, v: u32) {
        self.add(&v.to_le_bytes());
    }
}

#[test]
fn the_featurisation_of_the_labelled_set_is_unchanged() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("data/")
        .map(|e| e.expect("data/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut d = Digest(0xcbf2_9ce4_8422_2325);
    let mut texts = 0;
    for file in files {
        for line in std::fs::read_to_string(&file).expect("a data file").lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            let text = v["text"].as_str().expect("a text");
            let norm = normalize::normalize(text);
            d.add(norm.text().as_bytes());
            let t = norm.tricks;
            for x in [t.invisible, t.compat, t.mixed_script_words, t.leet_words, t.spaced_runs] {
                d.add_u32(x);
            }
            for h in features::hand_features(&norm) {
                d.add_u32(h.to_bits());
            }
            features::for_each_gram(&norm.chars, |p, b| {
                d.add_u32(p as u32);
                d.add_u32(b as u32);
            });
            d.add_u32(detect::assess(text).score.to_bits());
            texts += 1;
        }
    }
    assert!(texts > 4000, "{texts} texts");
    assert_eq!(d.0, EXPECTED, "the featurisation changed: {:#018x} (see this file's header)", d.0);
}
