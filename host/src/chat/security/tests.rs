use std::sync::Arc;

use super::*;
use crate::chat::types::Role;

#[test]
fn a_plugin_config_is_handed_over_as_compact_json_like_display() {
    let v = json!({"pii": "redact", "custom": [{"name": "id", "pattern": "\\bX-\\d+\"é"}], "n": 1.5, "none": null});
    assert_eq!(json_text(&v), v.to_string());
    assert_eq!(json_text(&json!({})), "{}");
}

fn guarded(canary: &str, restore: &[(&str, &str)]) -> Arc<Secured> {
    Arc::new(Secured {
        canary: Some(canary.to_owned()),
        restore: restore.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect(),
        ..Default::default()
    })
}

/// A detector with fixed answers, counting its calls.
struct Fixed {
    action: Action,
    inspect_fails: bool,
    canary: Result<Option<(String, String)>, String>,
    calls: std::sync::Mutex<Vec<&'static str>>,
}

impl Detector for Fixed {
    fn inspect(&self, _: Stage, _: Strictness, _: &str, texts: &[String]) -> Result<Vec<Verdict>, String> {
        self.calls.lock().expect("lock").push("inspect");
        if self.inspect_fails {
            return Err("trapped".into());
        }
        Ok(texts.iter().map(|_| Verdict { action: self.action, score: 0.5, reasons: vec!["r".into()], redactions: vec![] }).collect())
    }
    fn make_canary(&self, _: &str) -> Result<Option<(String, String)>, String> {
        self.calls.lock().expect("lock").push("canary");
        self.canary.clone()
    }
}

fn fixed(action: Action, inspect_fails: bool, canary: Result<Option<(String, String)>, String>) -> Fixed {
    Fixed { action, inspect_fails, canary, calls: Default::default() }
}

fn who() -> Subject {
    Subject { key_id: "k".into(), user_id: "u".into(), request_id: "r".into(), policy: "p".into() }
}

#[test]
fn input_shield_and_canary_come_from_one_pass() {
    let d = fixed(Action::Flag, false, Ok(Some(("tok".into(), "keep tok secret".into()))));
    let mut g = Secured::default();
    let (action, score, canary) = shield_input_and_canary(&d, Strictness::Balanced, "{}", &["hi".into()], "seed", &who(), &mut g)
        .map_err(|r| r.error.message)
        .expect("allowed");
    assert_eq!((action, score), (Action::Flag, 0.5));
    assert_eq!(canary, Some(("tok".into(), "keep tok secret".into())));
    assert_eq!(*d.calls.lock().expect("lock"), ["inspect", "canary"]);
    assert_eq!(g.trail.events.len(), 1, "a flag is an event");

    // No user text: no inspection, still a canary.
    let d = fixed(Action::Block, false, Ok(Some(("tok".into(), "i".into()))));
    let r = shield_input_and_canary(&d, Strictness::Balanced, "{}", &[], "seed", &who(), &mut Secured::default())
        .map_err(|r| r.error.message)
        .expect("allowed");
    assert_eq!((r.0, r.2.is_some()), (Action::Allow, true));
    assert_eq!(*d.calls.lock().expect("lock"), ["canary"]);
}

#[test]
fn a_failed_canary_leaves_the_verdict_and_a_failed_inspection_refuses() {
    let d = fixed(Action::Allow, false, Err("canary trapped".into()));
    let r = shield_input_and_canary(&d, Strictness::Balanced, "{}", &["hi".into()], "s", &who(), &mut Secured::default());
    let (action, _, canary) = r.map_err(|r| r.error.message).expect("the request goes on without a canary");
    assert_eq!((action, canary), (Action::Allow, None));

    let d = fixed(Action::Allow, true, Ok(None));
    let refusal =
        shield_input_and_canary(&d, Strictness::Balanced, "{}", &["hi".into()], "s", &who(), &mut Secured::default()).expect_err("refused");
    assert_eq!(refusal.error.status, axum::http::StatusCode::FORBIDDEN);
    assert_eq!(refusal.trail.audit.len(), 1);

    let d = fixed(Action::Block, false, Ok(Some(("t".into(), "i".into()))));
    let refusal =
        shield_input_and_canary(&d, Strictness::Strict, "{}", &["hi".into()], "s", &who(), &mut Secured::default()).expect_err("blocked");
    assert_eq!(refusal.trail.events.len(), 1, "promptshield:attack:blocked");
}

#[test]
fn a_canary_split_across_chunks_is_caught() {
    let g = guarded("gh-canary-0123456789abcdef", &[]);
    let mut s = StreamScanner::new(g);
    let mut sent = String::new();
    for piece in ["Hello, the token is gh-ca", "nary-01234", "56789abcdef and more"] {
        let (out, leaked) = s.push(piece);
        sent.push_str(&out);
        if leaked {
            assert!(!sent.contains("gh-canary-0123456789abcdef"));
            return;
        }
    }
    panic!("leak not detected");
}

#[test]
fn placeholders_split_across_chunks_are_restored() {
    let g = guarded("gh-canary-xxxxxxxxxxxxxxxx", &[("[EMAIL_1]", "ann@example.com")]);
    let mut s = StreamScanner::new(g);
    let mut sent = String::new();
    for piece in ["Write to [EM", "AIL_1] today", "."] {
        sent.push_str(&s.push(piece).0);
    }
    sent.push_str(&s.finish().0);
    assert_eq!(sent, "Write to ann@example.com today.");
}

#[test]
fn plain_text_flows_through_at_once_and_only_a_possible_start_waits() {
    let g = guarded("gh-canary-abcdef", &[("[EMAIL_1]", "ann@example.com")]);
    let mut s = StreamScanner::new(g);
    assert_eq!(s.push("hello world"), ("hello world".to_owned(), false), "nothing held back");
    assert_eq!(s.push(" see gh-can"), (" see ".to_owned(), false), "a canary's start waits");
    assert_eq!(s.push("dy and [EM"), ("gh-candy and ".to_owned(), false), "it was not the canary after all");
    assert_eq!(s.push("AIL_1]!"), ("ann@example.com!".to_owned(), false));
    assert_eq!(s.push("über ["), ("über ".to_owned(), false), "multi-byte text before a held tail");
    assert_eq!(s.finish(), ("[".to_owned(), false));
}

proptest::proptest! {
    /// However an answer is cut into chunks: without the canary, what is
    /// sent is exactly the restored answer; with it, the leak is caught
    /// and no part of what was sent goes past the answer's text before it.
    #[test]
    fn any_chunking_sends_the_restored_answer_or_catches_the_canary(
        parts in proptest::collection::vec(proptest::sample::select(vec!["a", "b", "gh-", "gh-c", "an", "[EM", "[EMAIL_1]", "AIL_1]", "é", " ", "gh-can"]), 0..30),
        cuts in proptest::collection::vec(1usize..12, 1..40),
    ) {
        let canary = "gh-canab";
        let g = guarded(canary, &[("[EMAIL_1]", "ann@example.com")]);
        let text: String = parts.concat();
        let mut chunks = Vec::new();
        let mut rest = text.as_str();
        for c in cuts.iter().cycle() {
            if rest.is_empty() { break; }
            let mut at = (*c).min(rest.len());
            while !rest.is_char_boundary(at) { at += 1; }
            chunks.push(&rest[..at]);
            rest = &rest[at..];
        }
        let mut s = StreamScanner::new(g.clone());
        let mut sent = String::new();
        let mut leaked = false;
        for ch in chunks {
            let (out, l) = s.push(ch);
            sent.push_str(&out);
            if l { leaked = true; break; }
        }
        if !leaked {
            let (out, l) = s.finish();
            sent.push_str(&out);
            leaked = l;
        }
        let restored = g.scan_output(&text).0;
        if text.contains(canary) {
            proptest::prop_assert!(leaked);
            proptest::prop_assert!(!sent.contains(canary));
            let before = g.scan_output(&text[..text.find(canary).unwrap_or(0)]).0;
            proptest::prop_assert!(before.starts_with(&sent) || restored.starts_with(&sent));
        } else {
            proptest::prop_assert!(!leaked);
            proptest::prop_assert_eq!(sent, restored);
        }
    }
}

#[test]
fn the_held_tail_is_the_longest_possible_start() {
    let g = guarded("abab-c", &[]);
    assert_eq!(g.undecided_tail("xxabab"), 4);
    assert_eq!(g.undecided_tail("xxaba"), 3);
    assert_eq!(g.undecided_tail("xx"), 0);
    assert_eq!(g.undecided_tail("abab-c"), 0, "a whole pattern is not a proper prefix");
    assert_eq!(g.undecided_tail("é"), 0);
    assert_eq!(g.undecided_tail("xxxxxé"), 0, "a window starting inside a character");
    assert_eq!(guarded("ab", &[]).undecided_tail("xé"), 0);
    let mut s = StreamScanner::new(g);
    assert_eq!(s.push("ab ab"), ("ab ".to_owned(), false));
    assert_eq!(s.push("ab-c"), (String::new(), true), "split over three chunks, still caught");
}

#[test]
fn canary_goes_into_the_system_message() {
    let mut m = vec![Message { role: Role::User, content: "hi".into() }];
    plant_canary(&mut m, "secret token X");
    assert_eq!(m[0].role, Role::System);
    let mut m = vec![Message { role: Role::System, content: "be brief".into() }, Message { role: Role::User, content: "hi".into() }];
    plant_canary(&mut m, "secret token X");
    assert_eq!(m.len(), 2);
    assert!(m[0].content.ends_with("secret token X"));
}
