//! The held-out rows of one split (`eval/heldout/attacks.jsonl` and
//! `benign.jsonl`, see `eval/README.md`), for the examples that tune on the
//! validation split.

/// Every row whose `split` is `split`, attacks first.
pub fn rows(split: &str) -> Vec<serde_json::Value> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("eval/heldout");
    let mut out = Vec::new();
    for f in ["attacks.jsonl", "benign.jsonl"] {
        for line in std::fs::read_to_string(dir.join(f)).expect("held-out file").lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            if v["split"].as_str() == Some(split) {
                out.push(v);
            }
        }
    }
    out
}
