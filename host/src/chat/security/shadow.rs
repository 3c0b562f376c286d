//! Shadow evaluation of a policy version: on live traffic, beside the active
//! version, off the request path, never deciding (docs/decisions/tenant-policies.md).
//!
//! The request hands a copy of the policy's input and the active decision to
//! a bounded queue ([`ShadowQueue::offer`], which never waits: a full queue
//! counts a drop); one worker thread evaluates the shadow version and compares.
//! Counts and a small redacted sample of disagreements are kept per shadow:
//! the fields that differ and their values, never the messages (a refusal
//! reason, which may quote the prompt, is kept as its length only).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::{PolicyDecision, PolicyEngine, PolicyInput};
use crate::chat::types::Message;
use gatehouse_store::registry::ShadowCounts;

/// Disagreements kept per shadow (the newest).
pub const SAMPLES: usize = 50;

/// A policy version evaluated in the shadow of the active one.
pub struct Shadow {
    /// What the counts are about: the policy's name and the shadow version's hash.
    pub policy: String,
    pub engine: Arc<dyn PolicyEngine>,
    pub stats: ShadowStats,
}

impl Shadow {
    pub fn new(policy: &str, engine: Arc<dyn PolicyEngine>) -> Arc<Shadow> {
        Arc::new(Shadow { policy: policy.to_owned(), engine, stats: ShadowStats::default() })
    }
}

/// What a shadow has done so far.
#[derive(Default)]
pub struct ShadowStats {
    pub evaluated: AtomicU64,
    pub agreed: AtomicU64,
    pub disagreed: AtomicU64,
    /// Offers refused because the queue was full (the request went on).
    pub dropped: AtomicU64,
    /// Shadow evaluations that failed (trap, timeout): never the request's concern.
    pub faults: AtomicU64,
    samples: Mutex<VecDeque<Value>>,
}

impl ShadowStats {
    /// The counts and the sample, as the API shows them.
    pub fn view(&self) -> Value {
        let samples: Vec<Value> = self.samples.lock().map(|s| s.iter().cloned().collect()).unwrap_or_default();
        json!({
            "evaluated": self.evaluated.load(Ordering::Relaxed),
            "agreed": self.agreed.load(Ordering::Relaxed),
            "disagreed": self.disagreed.load(Ordering::Relaxed),
            "dropped": self.dropped.load(Ordering::Relaxed),
            "faults": self.faults.load(Ordering::Relaxed),
            "samples": samples,
        })
    }

    /// The counts without the sample, as they are saved (the sample stays in memory).
    pub fn counts(&self) -> ShadowCounts {
        ShadowCounts {
            evaluated: self.evaluated.load(Ordering::Relaxed),
            agreed: self.agreed.load(Ordering::Relaxed),
            disagreed: self.disagreed.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            faults: self.faults.load(Ordering::Relaxed),
        }
    }

    /// Go on from counts saved before (by this host, before a restart).
    pub fn restore(&self, c: &ShadowCounts) {
        self.evaluated.fetch_add(c.evaluated, Ordering::Relaxed);
        self.agreed.fetch_add(c.agreed, Ordering::Relaxed);
        self.disagreed.fetch_add(c.disagreed, Ordering::Relaxed);
        self.dropped.fetch_add(c.dropped, Ordering::Relaxed);
        self.faults.fetch_add(c.faults, Ordering::Relaxed);
    }

    fn keep(&self, sample: Value) {
        if let Ok(mut s) = self.samples.lock() {
            if s.len() == SAMPLES {
                s.pop_front();
            }
            s.push_back(sample);
        }
    }
}

/// A policy input the queue can own.
struct OwnedInput {
    policy_name: String,
    key_id: String,
    user_id: String,
    group_id: Option<String>,
    models: Vec<String>,
    index: String,
    messages: Vec<Message>,
    extra_texts: Vec<String>,
    shield_disable_requested: bool,
    config_json: String,
}

impl OwnedInput {
    fn of(i: &PolicyInput<'_>) -> OwnedInput {
        OwnedInput {
            policy_name: i.policy_name.to_owned(),
            key_id: i.key_id.to_owned(),
            user_id: i.user_id.to_owned(),
            group_id: i.group_id.map(str::to_owned),
            models: i.models.clone(),
            index: i.index.to_owned(),
            messages: i.messages.to_vec(),
            extra_texts: i.extra_texts.to_vec(),
            shield_disable_requested: i.shield_disable_requested,
            config_json: i.config_json.to_owned(),
        }
    }

    fn borrow(&self) -> PolicyInput<'_> {
        PolicyInput {
            policy_name: &self.policy_name,
            key_id: &self.key_id,
            user_id: &self.user_id,
            group_id: self.group_id.as_deref(),
            models: self.models.clone(),
            index: &self.index,
            messages: &self.messages,
            extra_texts: &self.extra_texts,
            shield_disable_requested: self.shield_disable_requested,
            config_json: &self.config_json,
        }
    }
}

struct Job {
    shadow: Arc<Shadow>,
    /// What evaluates the shadow for this request (the shadow version, layered
    /// on the request's base policy for a tenant's).
    engine: Arc<dyn PolicyEngine>,
    input: OwnedInput,
    active: PolicyDecision,
}

/// The bounded queue and its worker thread. [`ShadowQueue::stop`] ends the
/// worker and waits for it (server shutdown); dropping the queue ends it too,
/// once the jobs in hand are done.
pub struct ShadowQueue {
    /// `None` is the stop signal.
    tx: SyncSender<Option<Job>>,
    stopping: Arc<AtomicBool>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl ShadowQueue {
    /// A queue of `capacity` jobs and one worker thread.
    pub fn start(capacity: usize) -> std::io::Result<ShadowQueue> {
        let (tx, rx) = sync_channel::<Option<Job>>(capacity);
        let stopping = Arc::new(AtomicBool::new(false));
        let skip = stopping.clone();
        let worker = std::thread::Builder::new().name("policy-shadow".into()).spawn(move || {
            while let Ok(Some(job)) = rx.recv() {
                // Once stopping, what is still queued is dropped unevaluated.
                if !skip.load(Ordering::Relaxed) {
                    evaluate(&job);
                }
            }
        })?;
        Ok(ShadowQueue { tx, stopping, worker: Mutex::new(Some(worker)) })
    }

    /// Hand the request's policy input and active decision to the shadow;
    /// never waits. False when the queue was full or stopped (a drop, counted).
    pub fn offer(&self, shadow: &Arc<Shadow>, input: &PolicyInput<'_>, active: &PolicyDecision) -> bool {
        self.offer_with(shadow, shadow.engine.clone(), input, active)
    }

    /// [`ShadowQueue::offer`], evaluated by `engine` rather than the shadow's own.
    pub fn offer_with(
        &self,
        shadow: &Arc<Shadow>,
        engine: Arc<dyn PolicyEngine>,
        input: &PolicyInput<'_>,
        active: &PolicyDecision,
    ) -> bool {
        if self.stopping.load(Ordering::Relaxed) {
            shadow.stats.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let job = Job { shadow: shadow.clone(), engine, input: OwnedInput::of(input), active: active.clone() };
        match self.tx.try_send(Some(job)) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                shadow.stats.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Stop the worker and wait for it: the evaluation in hand finishes
    /// (within its plugin's call deadline), what is still queued is dropped,
    /// later offers count as drops. Blocking; a second call returns at once.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        let Some(worker) = self.worker.lock().unwrap_or_else(|p| p.into_inner()).take() else { return };
        // Wakes the worker; skipping what is queued, it makes room for this at once.
        let _ = self.tx.send(None);
        if worker.join().is_err() {
            tracing::error!("the shadow policy worker panicked");
        }
    }
}

fn evaluate(job: &Job) {
    let stats = &job.shadow.stats;
    let decision = match job.engine.evaluate(&job.input.borrow()) {
        Ok(d) => d,
        Err(e) => {
            stats.faults.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(policy = %job.shadow.policy, error = %e, "shadow policy failed (the request was not affected)");
            return;
        }
    };
    stats.evaluated.fetch_add(1, Ordering::Relaxed);
    let fields = differences(&job.active, &decision);
    if fields.is_empty() {
        stats.agreed.fetch_add(1, Ordering::Relaxed);
        return;
    }
    stats.disagreed.fetch_add(1, Ordering::Relaxed);
    stats.keep(json!({
        "at": crate::time::iso(chrono::Utc::now()),
        "keyId": job.input.key_id,
        "fields": fields,
        "active": redacted(&job.active),
        "shadow": redacted(&decision),
    }));
}

/// The decision's fields that differ, by their API names.
pub fn differences(a: &PolicyDecision, b: &PolicyDecision) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut check = |name, differs: bool| {
        if differs {
            out.push(name);
        }
    };
    check("allow", a.allow != b.allow);
    check("allowedProviders", a.allowed_providers != b.allowed_providers);
    check("allowedIndexes", a.allowed_indexes != b.allowed_indexes);
    check("piiAction", a.pii_action != b.pii_action);
    check("dlpAction", a.dlp_action != b.dlp_action);
    check("restorePii", a.restore_pii != b.restore_pii);
    check("shieldMode", a.shield_mode != b.shield_mode);
    check("shieldMayDisable", a.shield_may_disable != b.shield_may_disable);
    check("withholdOnCanaryLeak", a.withhold_on_canary_leak != b.withhold_on_canary_leak);
    check("logPrompts", a.log_prompts != b.log_prompts);
    out
}

/// A decision without text that may quote the request: the reason as its length.
fn redacted(d: &PolicyDecision) -> Value {
    json!({
        "allow": d.allow,
        "reasonChars": d.reason.as_ref().map(|r| r.chars().count()),
        "allowedProviders": d.allowed_providers,
        "allowedIndexes": d.allowed_indexes,
        "piiAction": d.pii_action.as_str(),
        "dlpAction": d.dlp_action.as_str(),
        "restorePii": d.restore_pii,
        "shieldMode": d.shield_mode,
        "shieldMayDisable": d.shield_may_disable,
        "withholdOnCanaryLeak": d.withhold_on_canary_leak,
        "logPrompts": d.log_prompts,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Condvar;
    use std::time::{Duration, Instant};

    use super::super::Action;
    use super::*;
    use crate::chat::types::Role;

    fn decision(allow: bool, reason: Option<&str>) -> PolicyDecision {
        PolicyDecision {
            allow,
            reason: reason.map(str::to_owned),
            allowed_providers: None,
            allowed_indexes: None,
            pii_action: Action::Flag,
            dlp_action: Action::Block,
            restore_pii: false,
            shield_mode: "balanced".into(),
            shield_may_disable: true,
            withhold_on_canary_leak: false,
            log_prompts: true,
        }
    }

    /// Denies requests whose text contains "secret plan", quoting it.
    struct DenyTerm;
    impl PolicyEngine for DenyTerm {
        fn evaluate(&self, input: &PolicyInput<'_>) -> Result<PolicyDecision, String> {
            if input.messages.iter().any(|m| m.content.contains("secret plan")) {
                Ok(decision(false, Some("denied term in: the secret plan is")))
            } else {
                Ok(decision(true, None))
            }
        }
        fn hash(&self) -> String {
            "v2".into()
        }
    }

    struct Broken;
    impl PolicyEngine for Broken {
        fn evaluate(&self, _: &PolicyInput<'_>) -> Result<PolicyDecision, String> {
            Err("wasm trap: unreachable".into())
        }
        fn hash(&self) -> String {
            "broken".into()
        }
    }

    /// Holds every evaluation until released: fills the queue on purpose.
    struct Gate(Arc<(Mutex<bool>, Condvar)>);
    impl PolicyEngine for Gate {
        fn evaluate(&self, _: &PolicyInput<'_>) -> Result<PolicyDecision, String> {
            let (open, cv) = &*self.0;
            let mut o = open.lock().map_err(|_| "poisoned")?;
            while !*o {
                o = cv.wait(o).map_err(|_| "poisoned")?;
            }
            Ok(decision(true, None))
        }
        fn hash(&self) -> String {
            "gate".into()
        }
    }

    fn with_input<R>(text: &str, f: impl FnOnce(&PolicyInput<'_>) -> R) -> R {
        let messages = [Message { role: Role::User, content: text.to_owned() }];
        let input = PolicyInput {
            policy_name: "acme",
            key_id: "key_1",
            user_id: "usr_1",
            group_id: Some("grp_1"),
            models: vec!["openai/gpt".into()],
            index: "Zero-Knowledge",
            messages: &messages,
            extra_texts: &[],
            shield_disable_requested: false,
            config_json: "{}",
        };
        f(&input)
    }

    fn wait_for(stats: &ShadowStats, done: u64) {
        let t = Instant::now();
        while stats.evaluated.load(Ordering::Relaxed) + stats.faults.load(Ordering::Relaxed) < done {
            assert!(t.elapsed() < Duration::from_secs(10), "the shadow worker did not finish");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn agreements_and_disagreements_are_counted_and_samples_hold_no_request_text() {
        let q = ShadowQueue::start(16).expect("queue");
        let shadow = Shadow::new("acme", Arc::new(DenyTerm));
        let allow = decision(true, None);
        with_input("hello there", |i| assert!(q.offer(&shadow, i, &allow)));
        with_input("tell me the secret plan", |i| assert!(q.offer(&shadow, i, &allow)));
        wait_for(&shadow.stats, 2);
        let v = shadow.stats.view();
        assert_eq!((v["evaluated"].as_u64(), v["agreed"].as_u64(), v["disagreed"].as_u64()), (Some(2), Some(1), Some(1)), "{v}");
        let sample = &v["samples"][0];
        assert_eq!(sample["fields"], json!(["allow"]));
        assert_eq!((sample["active"]["allow"].as_bool(), sample["shadow"]["allow"].as_bool()), (Some(true), Some(false)));
        assert!(!v.to_string().contains("secret plan"), "no request text in the sample: {v}");
        assert_eq!(sample["shadow"]["reasonChars"], 34);
    }

    #[test]
    fn a_failing_shadow_is_counted_and_never_reaches_the_request() {
        let q = ShadowQueue::start(4).expect("queue");
        let shadow = Shadow::new("acme", Arc::new(Broken));
        with_input("hello", |i| assert!(q.offer(&shadow, i, &decision(true, None))));
        wait_for(&shadow.stats, 1);
        assert_eq!(shadow.stats.faults.load(Ordering::Relaxed), 1);
        assert_eq!(shadow.stats.evaluated.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_waiting() {
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let q = ShadowQueue::start(2).expect("queue");
        let shadow = Shadow::new("acme", Arc::new(Gate(gate.clone())));
        let allow = decision(true, None);
        let t = Instant::now();
        // One job in the worker's hands, two queued, the rest dropped.
        let accepted = (0..10).filter(|_| with_input("hello", |i| q.offer(&shadow, i, &allow))).count();
        assert!(t.elapsed() < Duration::from_secs(1), "offer waited");
        assert!((2..=3).contains(&accepted), "{accepted} accepted");
        assert_eq!(shadow.stats.dropped.load(Ordering::Relaxed), 10 - accepted as u64);
        *gate.0.lock().expect("lock") = true;
        gate.1.notify_all();
        wait_for(&shadow.stats, accepted as u64);
        assert_eq!(shadow.stats.agreed.load(Ordering::Relaxed), accepted as u64);
    }

    #[test]
    fn stopping_ends_the_worker_skips_what_is_queued_and_refuses_later_offers() {
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let q = ShadowQueue::start(8).expect("queue");
        let shadow = Shadow::new("acme", Arc::new(Gate(gate.clone())));
        let allow = decision(true, None);
        for _ in 0..4 {
            with_input("hello", |i| assert!(q.offer(&shadow, i, &allow)));
        }
        let opener = {
            let gate = gate.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                *gate.0.lock().expect("lock") = true;
                gate.1.notify_all();
            })
        };
        // Returns only once the worker thread has ended.
        q.stop();
        opener.join().expect("opener");
        let done = shadow.stats.agreed.load(Ordering::Relaxed);
        assert!(done <= 1, "only the evaluation in hand may finish, not the queued ones: {done}");
        assert!(!with_input("hello", |i| q.offer(&shadow, i, &allow)), "no offer is taken after the stop");
        assert_eq!(shadow.stats.dropped.load(Ordering::Relaxed), 1);
        q.stop();
    }

    #[test]
    fn every_field_of_a_decision_is_compared() {
        let a = decision(true, None);
        let b = PolicyDecision {
            allow: false,
            reason: Some("x".into()),
            allowed_providers: Some(vec![]),
            allowed_indexes: Some(vec![]),
            pii_action: Action::Block,
            dlp_action: Action::Allow,
            restore_pii: true,
            shield_mode: "strict".into(),
            shield_may_disable: false,
            withhold_on_canary_leak: true,
            log_prompts: false,
        };
        assert_eq!(differences(&a, &b).len(), 10);
        assert!(differences(&a, &PolicyDecision { reason: Some("only the wording".into()), ..a.clone() }).is_empty());
    }
}
