//! The security pipeline around the model chain (docs/decisions/security-pipeline.md):
//! policy → Prompt Shield on the input → PII/DLP → (retrieval →
//! Prompt Shield on passages) → model chain → output checks (canary, PII
//! restore). Policies and detectors are plugins; this module owns the order,
//! the outcomes (403 `Access denied` with the reason, events, audit records)
//! and the bookkeeping that must survive until the answer is out.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::screen::{FieldTexts, Hidden};
use super::types::{Message, Role};
use crate::error::{ChatError, text};
use gatehouse_store::audit::{Audit, category, kind, outcome};
use gatehouse_store::model::{AuditEntry, Severity};
use gatehouse_store::records::OutboxEvent;

/// Prompt Shield strictness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    Monitor,
    Balanced,
    Strict,
}

impl Strictness {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "monitor" => Some(Strictness::Monitor),
            "balanced" | "block" => Some(Strictness::Balanced),
            "strict" => Some(Strictness::Strict),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Strictness::Monitor => "monitor",
            Strictness::Balanced => "balanced",
            Strictness::Strict => "strict",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Input,
    Retrieved,
    Output,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Input => "input",
            Stage::Retrieved => "retrieved",
            Stage::Output => "output",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    Allow,
    Flag,
    Redact,
    Block,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Flag => "flag",
            Action::Redact => "redact",
            Action::Block => "block",
        }
    }
}

/// A span to replace, in byte offsets of the inspected text.
#[derive(Debug, Clone, PartialEq)]
pub struct Redaction {
    pub start: usize,
    pub end: usize,
    pub kind: String,
    pub replacement: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub action: Action,
    pub score: f32,
    pub reasons: Vec<String>,
    pub redactions: Vec<Redaction>,
}

/// A canary as the pipeline uses it: `(token, instruction)`.
pub type CanaryText = (String, String);

/// A Prompt Shield / PII / DLP component as the pipeline sees it.
pub trait Detector: Send + Sync {
    fn inspect(&self, stage: Stage, strictness: Strictness, config_json: &str, texts: &[String]) -> Result<Vec<Verdict>, String>;
    /// `(token, instruction)` for a per-request seed.
    fn make_canary(&self, seed: &str) -> Result<Option<CanaryText>, String>;
    /// `inspect`, then `make_canary(seed)`; a plugin serves both from one
    /// instance. The outer error is the inspection's; a failed canary is the inner one.
    fn inspect_then_canary(
        &self,
        stage: Stage,
        strictness: Strictness,
        config_json: &str,
        texts: &[String],
        seed: &str,
    ) -> InspectAndCanary {
        let verdicts = self.inspect(stage, strictness, config_json, texts)?;
        Ok((verdicts, self.make_canary(seed)))
    }
}

/// Verdicts, and the canary made after them (or why not).
pub type InspectAndCanary = Result<(Vec<Verdict>, Result<Option<CanaryText>, String>), String>;

/// What a policy sees, borrowed from the request: the adapter copies it once,
/// into the plugin call's own arguments.
#[derive(Debug, Clone)]
pub struct PolicyInput<'a> {
    pub policy_name: &'a str,
    pub key_id: &'a str,
    pub user_id: &'a str,
    pub group_id: Option<&'a str>,
    pub models: Vec<String>,
    pub index: &'a str,
    pub messages: &'a [Message],
    /// Other caller text the policy reads after the messages (as `tool`
    /// messages): the pass-through fields' strings, hidden tag text.
    pub extra_texts: &'a [String],
    pub shield_disable_requested: bool,
    pub config_json: &'a str,
}

/// A policy's decision and constraints.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyDecision {
    pub allow: bool,
    pub reason: Option<String>,
    pub allowed_providers: Option<Vec<String>>,
    pub allowed_indexes: Option<Vec<String>>,
    pub pii_action: Action,
    pub dlp_action: Action,
    pub restore_pii: bool,
    pub shield_mode: String,
    pub shield_may_disable: bool,
    pub withhold_on_canary_leak: bool,
    pub log_prompts: bool,
}

/// A policy component.
pub trait PolicyEngine: Send + Sync {
    fn evaluate(&self, input: &PolicyInput<'_>) -> Result<PolicyDecision, String>;
    /// Hex SHA-256 of the component and its config (`smltp_policy_hash`).
    fn hash(&self) -> String;
}

/// Names of the bundled detector components.
pub const PROMPT_SHIELD: &str = "prompt-shield";
pub const PII_DLP: &str = "pii-dlp";

/// Where a request stands after the input checks.
#[derive(Debug, Clone, Default)]
pub struct Secured {
    pub decision: Option<PolicyDecision>,
    /// Canary planted in the system context.
    pub canary: Option<String>,
    /// Placeholder → original value, restored in the answer when the policy says so.
    pub restore: Vec<(String, String)>,
    /// `metadata.prompt_shield_policy`.
    pub shield_meta: Option<Value>,
    /// `allow`, `flag` or `redact` — for the receipt.
    pub verdict: &'static str,
    /// What the checks so far leave to record.
    pub trail: Trail,
}

/// What one request leaves behind besides its answer, gathered along the
/// pipeline and committed with it: webhook events, audit records, and the
/// verdict of every check (`{stage, plugin, action, score, reasons}`, listed by
/// the policy-check route). Each stage appends to the request's one trail; a
/// refusal carries the trail up to and including the refusing check.
#[derive(Debug, Clone, Default)]
pub struct Trail {
    pub events: Vec<OutboxEvent>,
    pub audit: Vec<AuditEntry>,
    pub verdicts: Vec<Value>,
}

impl Trail {
    /// A trail of events and audit records (no verdicts).
    pub fn of(events: Vec<OutboxEvent>, audit: Vec<AuditEntry>) -> Self {
        Trail { events, audit, verdicts: Vec::new() }
    }

    /// Append what a later stage recorded.
    pub fn append(&mut self, mut later: Trail) {
        self.events.append(&mut later.events);
        self.audit.append(&mut later.audit);
        self.verdicts.append(&mut later.verdicts);
    }
}

impl Secured {
    /// The fixed patterns the output scanner looks for: the canary and the
    /// placeholders it restores.
    fn patterns(&self) -> impl Iterator<Item = &str> {
        self.canary.as_deref().into_iter().chain(self.restore.iter().map(|(p, _)| p.as_str()))
    }

    /// Bytes at the end of `text` that could still become a pattern: the
    /// longest suffix that is a proper prefix of one. Anything before it can
    /// be released — a pattern that started there would already be whole.
    pub fn undecided_tail(&self, text: &str) -> usize {
        let mut longest = 0;
        for p in self.patterns() {
            // Candidate suffixes start at char boundaries of `text` within the last len(p) - 1 bytes.
            let mut from = text.len().saturating_sub(p.len().saturating_sub(1));
            while !text.is_char_boundary(from) {
                from += 1;
            }
            for (i, _) in text[from..].char_indices() {
                let tail = &text[from + i..];
                if tail.len() > longest && p.starts_with(tail) {
                    longest = tail.len();
                    break;
                }
            }
        }
        longest
    }

    pub fn needs_output_scan(&self) -> bool {
        self.canary.is_some() || !self.restore.is_empty()
    }
}

/// A refusal with what it leaves to record.
pub struct Refusal {
    pub error: ChatError,
    pub trail: Trail,
}

impl Refusal {
    /// A refusal that records nothing (yet).
    pub fn new(error: ChatError) -> Self {
        Refusal { error, trail: Trail::default() }
    }
}

fn denied(message: String) -> ChatError {
    ChatError::new(StatusCode::FORBIDDEN, text::ACCESS_DENIED, message)
}

/// A refusal by the policy stage — the policy's own deny or a constraint it
/// sets (knowledge base, providers, Prompt Shield's mode): 403, its `block`
/// verdict and an audit record.
pub(super) fn policy_refusal(who: &Subject, reason: String) -> Box<Refusal> {
    Box::new(Refusal {
        error: denied(reason.clone()),
        trail: Trail {
            audit: vec![who.audit(
                format!("Request denied by policy {}: {reason}", who.policy),
                outcome::BLOCKED,
                Severity::Warning,
                json!({"operation": "policy_deny"}),
            )],
            verdicts: vec![json!({"stage": "policy", "plugin": who.policy, "action": "block", "score": 1.0, "reasons": [reason]})],
            ..Default::default()
        },
    })
}

/// Who a security record is about (never the offending text).
#[derive(Debug, Clone)]
pub struct Subject {
    pub key_id: String,
    pub user_id: String,
    pub request_id: String,
    pub policy: String,
}

impl Subject {
    fn event(&self, kind: &str, mut data: Value) -> OutboxEvent {
        data["apiKeyId"] = json!(self.key_id);
        data["userId"] = json!(self.user_id);
        data["requestId"] = json!(self.request_id);
        data["policy"] = json!(self.policy);
        OutboxEvent::new(kind, data)
    }

    pub(super) fn audit(&self, description: String, out: &str, severity: Severity, meta: Value) -> AuditEntry {
        let mut a = Audit::new(kind::SECURITY_EVENT, category::SECURITY_MONITORING, description)
            .severity(severity)
            .outcome(out)
            .meta("apiKeyId", self.key_id.clone())
            .meta("requestId", self.request_id.clone())
            .meta("policyName", self.policy.clone());
        if let Value::Object(m) = meta {
            for (k, v) in m {
                a = a.meta(&k, v);
            }
        }
        a.build()
    }
}

/// Evaluate the policy; a deny is a refusal.
pub fn apply_policy(engine: &dyn PolicyEngine, input: &PolicyInput<'_>, who: &Subject) -> Result<PolicyDecision, Box<Refusal>> {
    let decision = engine.evaluate(input).map_err(|e| {
        tracing::error!(policy = %input.policy_name, error = %e, "policy plugin failed");
        Refusal {
            error: denied(format!("policy {} could not be evaluated; the request was refused", input.policy_name)),
            trail: Trail {
                audit: vec![who.audit(
                    format!("Policy {} failed; request refused", input.policy_name),
                    outcome::FAILURE,
                    Severity::Error,
                    json!({"operation": "policy_error"}),
                )],
                ..Default::default()
            },
        }
    })?;
    if !decision.allow {
        let reason = decision.reason.clone().unwrap_or_else(|| format!("denied by policy {}", input.policy_name));
        return Err(policy_refusal(who, reason));
    }
    Ok(decision)
}

/// A JSON value as the text a plugin is handed (`config-json`).
pub fn json_text(v: &Value) -> String {
    // A `Value` always serialises (its keys are strings); `Display` would do
    // the same through `fmt`'s machinery, byte by byte slower.
    serde_json::to_string(v).unwrap_or_else(|_| "{}".to_owned())
}

/// Prompt Shield on `texts` at `stage`. Block → refusal; flag → event.
pub fn shield(
    detector: &dyn Detector,
    stage: Stage,
    strictness: Strictness,
    config_json: &str,
    texts: &[String],
    who: &Subject,
    guarded: &mut Secured,
) -> Result<(Action, f32), Box<Refusal>> {
    if texts.is_empty() {
        return Ok((Action::Allow, 0.0));
    }
    let verdicts = detector.inspect(stage, strictness, config_json, texts).map_err(|e| shield_failed(&e, who))?;
    judge(verdicts, stage, strictness, who, guarded)
}

/// [`shield`] on the input, then the request's canary from the same plugin
/// instance (`seed`: host-chosen, per request). A canary that could not be
/// made is logged and the request goes on without one.
#[allow(clippy::too_many_arguments)]
pub fn shield_input_and_canary(
    detector: &dyn Detector,
    strictness: Strictness,
    config_json: &str,
    texts: &[String],
    seed: &str,
    who: &Subject,
    guarded: &mut Secured,
) -> Result<(Action, f32, Option<CanaryText>), Box<Refusal>> {
    let (judged, canary) = if texts.is_empty() {
        ((Action::Allow, 0.0), detector.make_canary(seed))
    } else {
        let (verdicts, canary) =
            detector.inspect_then_canary(Stage::Input, strictness, config_json, texts, seed).map_err(|e| shield_failed(&e, who))?;
        (judge(verdicts, Stage::Input, strictness, who, guarded)?, canary)
    };
    let canary = canary.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "Prompt Shield made no canary");
        None
    });
    Ok((judged.0, judged.1, canary))
}

fn shield_failed(e: &str, who: &Subject) -> Refusal {
    tracing::error!(error = %e, "Prompt Shield failed");
    Refusal {
        error: denied("Prompt Shield could not inspect the request; it was refused".into()),
        trail: Trail {
            audit: vec![who.audit(
                "Prompt Shield failed; request refused".into(),
                outcome::FAILURE,
                Severity::Error,
                json!({"operation": "shield_error"}),
            )],
            ..Default::default()
        },
    }
}

/// The worst of the verdicts decides: block → refusal; flag or redact → events and audit.
fn judge(
    verdicts: Vec<Verdict>,
    stage: Stage,
    strictness: Strictness,
    who: &Subject,
    guarded: &mut Secured,
) -> Result<(Action, f32), Box<Refusal>> {
    let worst = verdicts.iter().map(|v| v.action).max().unwrap_or(Action::Allow);
    let score = verdicts.iter().map(|v| v.score).fold(0.0f32, f32::max);
    let mut reasons: Vec<String> = verdicts.iter().flat_map(|v| v.reasons.iter().cloned()).collect();
    reasons.sort();
    reasons.dedup();
    guarded.trail.verdicts.push(json!({
        "stage": stage.as_str(), "plugin": PROMPT_SHIELD, "action": worst.as_str(), "score": score, "reasons": reasons,
    }));
    let data = json!({"stage": stage.as_str(), "mode": strictness.as_str(), "score": score, "reasons": reasons});
    match worst {
        Action::Block => {
            let reason = reasons.first().cloned().unwrap_or_else(|| "prompt injection detected".into());
            Err(Box::new(Refusal {
                error: denied(if stage == Stage::Retrieved { format!("{reason} in retrieved documents") } else { reason.clone() }),
                trail: Trail {
                    events: vec![who.event("promptshield:attack:blocked", data.clone())],
                    audit: vec![who.audit(
                        format!("Prompt Shield blocked a request ({} stage): {reason}", stage.as_str()),
                        outcome::BLOCKED,
                        Severity::Warning,
                        json!({"operation": "prompt_shield_block", "stage": stage.as_str(), "score": score}),
                    )],
                    ..Default::default()
                },
            }))
        }
        Action::Flag | Action::Redact => {
            guarded.trail.events.push(who.event("promptshield:attack:detected", data));
            guarded.trail.audit.push(who.audit(
                format!("Prompt Shield flagged a request ({} stage)", stage.as_str()),
                outcome::DETECTED,
                Severity::Info,
                json!({"operation": "prompt_shield_flag", "stage": stage.as_str(), "score": score}),
            ));
            Ok((Action::Flag, score))
        }
        Action::Allow => Ok((Action::Allow, score)),
    }
}

/// Is a finding kind personal data (else a secret / DLP rule)?
fn is_pii(kind: &str) -> bool {
    !kind.starts_with("dlp")
        && !matches!(kind, k if k.contains("key") || k.contains("token") || k.contains("secret") || k.contains("password") || k.contains("jwt") || k.starts_with("custom"))
}

/// PII and DLP on what the caller sends upstream — every message, every
/// string of the pass-through fields (`fields`), and what invisible tags
/// spelled (`hidden`, screened only: it is never forwarded): block → refusal;
/// redact → the messages and field strings are rewritten and placeholders
/// remembered; flag → events. `config_json` carries the policy's actions in
/// `pii` and `dlp` (`config_texts::ConfigTexts::pii_dlp`). `Ok(true)` when a
/// field string was rewritten (the fields must be serialised again).
#[allow(clippy::too_many_arguments)]
pub fn pii_dlp(
    detector: &dyn Detector,
    decision: &PolicyDecision,
    config_json: &str,
    messages: &mut [Message],
    fields: &mut FieldTexts,
    hidden: &[Hidden],
    who: &Subject,
    guarded: &mut Secured,
) -> Result<bool, Box<Refusal>> {
    if decision.pii_action == Action::Allow && decision.dlp_action == Action::Allow {
        return Ok(false);
    }
    let mut texts: Vec<String> = Vec::with_capacity(messages.len() + fields.texts.len() + hidden.len());
    texts.extend(messages.iter().map(|m| m.content.clone()));
    texts.extend(fields.texts.iter().cloned());
    texts.extend(hidden.iter().map(|h| h.text.clone()));
    let verdicts = detector.inspect(Stage::Input, Strictness::Balanced, config_json, &texts).map_err(|e| {
        tracing::error!(error = %e, "PII/DLP detector failed");
        Refusal::new(denied("the data-protection check failed; the request was refused".into()))
    })?;
    let (pii_kinds, dlp_kinds) = kinds(&verdicts);
    let worst = verdicts.iter().map(|v| v.action).max().unwrap_or(Action::Allow);
    let mut all_kinds: Vec<String> = pii_kinds.iter().chain(&dlp_kinds).map(|k| k.to_string()).collect();
    all_kinds.sort();
    guarded.trail.verdicts.push(json!({
        "stage": "input",
        "plugin": PII_DLP,
        "action": worst.as_str(),
        "score": verdicts.iter().map(|v| v.score).fold(0.0f32, f32::max),
        "reasons": all_kinds,
    }));
    let record = |event: &str, kinds: &[String], action: Action, guarded: &mut Secured| {
        record_incident(who, Stage::Input, event, kinds, action, guarded)
    };
    if worst == Action::Block {
        let mut g = Secured::default();
        let pii_action = if pii_kinds.is_empty() { Action::Allow } else { decision.pii_action };
        let dlp_action = if dlp_kinds.is_empty() { Action::Allow } else { decision.dlp_action };
        record("pii:incident", &pii_kinds, pii_action, &mut g);
        record("dlp:incident", &dlp_kinds, dlp_action, &mut g);
        let what = if !dlp_kinds.is_empty() && dlp_action == Action::Block { "secrets" } else { "personal data" };
        return Err(Box::new(Refusal {
            error: denied(format!("the request contains {what} that policy {} does not let leave", who.policy)),
            trail: Trail { events: g.trail.events, audit: g.trail.audit, ..Default::default() },
        }));
    }
    record("pii:incident", &pii_kinds, decision.pii_action, guarded);
    record("dlp:incident", &dlp_kinds, decision.dlp_action, guarded);
    // Field names and stop sequences cannot be rewritten: a finding to redact in one refuses the request.
    let (m_len, f_len) = (messages.len(), fields.texts.len());
    if verdicts.iter().enumerate().any(|(i, v)| i >= m_len && i < m_len + f_len && fields.fixed[i - m_len] && !v.redactions.is_empty()) {
        return Err(Box::new(Refusal {
            error: denied(format!(
                "a field name in the pass-through fields (`tools`, `response_format`, …) or a `stop` sequence holds personal data \
                 that policy {} redacts; rename the field or change the stop sequence",
                who.policy
            )),
            trail: std::mem::take(&mut guarded.trail),
        }));
    }
    // Apply redactions to what is forwarded (messages, then field values);
    // the decoded hidden text is not forwarded, so there is nothing to rewrite.
    let mut fields_changed = false;
    let targets = messages.iter_mut().map(|m| (&mut m.content, false)).chain(fields.texts.iter_mut().map(|t| (t, true)));
    for ((text, is_field), v) in targets.zip(&verdicts) {
        if v.action != Action::Redact || v.redactions.is_empty() {
            continue;
        }
        redact(text, &v.redactions, decision.restore_pii, guarded);
        fields_changed |= is_field;
        guarded.verdict = "redact";
    }
    Ok(fields_changed)
}

/// The personal-data and secret kinds the verdicts found, sorted, each once.
fn kinds(verdicts: &[Verdict]) -> (Vec<String>, Vec<String>) {
    let mut pii_kinds = Vec::new();
    let mut dlp_kinds = Vec::new();
    for v in verdicts {
        for r in &v.redactions {
            if is_pii(&r.kind) { pii_kinds.push(r.kind.clone()) } else { dlp_kinds.push(r.kind.clone()) }
        }
        for reason in &v.reasons {
            if let Some(k) = reason.strip_prefix("pii:") {
                pii_kinds.push(k.to_owned());
            } else if let Some(k) = reason.strip_prefix("dlp:") {
                dlp_kinds.push(k.to_owned());
            }
        }
    }
    for list in [&mut pii_kinds, &mut dlp_kinds] {
        list.sort();
        list.dedup();
    }
    (pii_kinds, dlp_kinds)
}

/// One `pii:incident` or `dlp:incident` event and audit record (never the value found).
fn record_incident(who: &Subject, stage: Stage, event: &str, kinds: &[String], action: Action, guarded: &mut Secured) {
    if kinds.is_empty() {
        return;
    }
    guarded.trail.events.push(who.event(event, json!({"kinds": kinds, "action": action.as_str(), "stage": stage.as_str()})));
    guarded.trail.audit.push(who.audit(
        format!("{event} ({}): {}", action.as_str(), kinds.join(", ")),
        if action == Action::Block { outcome::BLOCKED } else { outcome::DETECTED },
        if action == Action::Block { Severity::Warning } else { Severity::Info },
        json!({"operation": event.replace(':', "_"), "kinds": kinds, "stage": stage.as_str()}),
    ));
}

/// PII and DLP on retrieved passages, as the policy says for the input: a
/// passage with something to redact is rewritten (and restored in the answer
/// when the policy restores); a passage the policy would block is left out —
/// one document holding a secret must not take the knowledge base down — and
/// reported as `Some("pii" | "dlp")` at its index; a flag is recorded.
pub fn pii_dlp_passages(
    detector: &dyn Detector,
    decision: &PolicyDecision,
    config_json: &str,
    texts: &mut [String],
    who: &Subject,
    guarded: &mut Secured,
) -> Result<Vec<Option<&'static str>>, Box<Refusal>> {
    let mut removed = vec![None; texts.len()];
    if texts.is_empty() || (decision.pii_action == Action::Allow && decision.dlp_action == Action::Allow) {
        return Ok(removed);
    }
    let verdicts = detector.inspect(Stage::Retrieved, Strictness::Balanced, config_json, texts).map_err(|e| {
        tracing::error!(error = %e, "PII/DLP detector failed on retrieved passages");
        Box::new(Refusal::new(denied("the data-protection check of the retrieved documents failed; the request was refused".into())))
    })?;
    let (pii_kinds, dlp_kinds) = kinds(&verdicts);
    let worst = verdicts.iter().map(|v| v.action).max().unwrap_or(Action::Allow);
    let mut all_kinds: Vec<String> = pii_kinds.iter().chain(&dlp_kinds).cloned().collect();
    all_kinds.sort();
    guarded.trail.verdicts.push(json!({
        "stage": Stage::Retrieved.as_str(),
        "plugin": PII_DLP,
        "action": worst.as_str(),
        "score": verdicts.iter().map(|v| v.score).fold(0.0f32, f32::max),
        "reasons": all_kinds,
    }));
    record_incident(who, Stage::Retrieved, "pii:incident", &pii_kinds, decision.pii_action, guarded);
    record_incident(who, Stage::Retrieved, "dlp:incident", &dlp_kinds, decision.dlp_action, guarded);
    for (i, (text, v)) in texts.iter_mut().zip(&verdicts).enumerate() {
        match v.action {
            Action::Block => {
                let (_, dlp) = kinds(std::slice::from_ref(v));
                removed[i] = Some(if dlp.is_empty() { "pii" } else { "dlp" });
            }
            Action::Redact if !v.redactions.is_empty() => {
                redact(text, &v.redactions, decision.restore_pii, guarded);
                guarded.verdict = "redact";
            }
            _ => {}
        }
    }
    Ok(removed)
}

/// Replace `spans` in `text`, last span first so earlier offsets stay valid,
/// and remember placeholder → original when the policy restores them.
fn redact(text: &mut String, spans: &[Redaction], restore: bool, guarded: &mut Secured) {
    let mut spans = spans.to_vec();
    spans.sort_by_key(|s| std::cmp::Reverse(s.start));
    for r in spans {
        if r.start <= r.end && r.end <= text.len() && text.is_char_boundary(r.start) && text.is_char_boundary(r.end) {
            let original = text[r.start..r.end].to_owned();
            text.replace_range(r.start..r.end, &r.replacement);
            if restore && !guarded.restore.iter().any(|(p, _)| p == &r.replacement) {
                guarded.restore.push((r.replacement.clone(), original));
            }
        }
    }
}

/// Put the canary instruction into the system context.
pub fn plant_canary(messages: &mut Vec<Message>, instruction: &str) {
    match messages.first_mut() {
        Some(m) if m.role == Role::System => {
            m.content.push_str("\n\n");
            m.content.push_str(instruction);
        }
        _ => messages.insert(0, Message { role: Role::System, content: instruction.to_owned() }),
    }
}

/// Output checks over text that is final (a whole answer, or the part of a
/// stream past the hold-back): canary leak and PII restore.
#[derive(Debug, Default)]
pub struct OutputScan {
    pub leaked: bool,
}

impl Secured {
    /// Scan `text`: returns it with placeholders restored, and whether the canary appeared.
    pub fn scan_output(&self, text: &str) -> (String, bool) {
        let leaked = self.canary.as_deref().is_some_and(|c| text.contains(c));
        let mut out = text.to_owned();
        for (placeholder, original) in &self.restore {
            if out.contains(placeholder.as_str()) {
                out = out.replace(placeholder.as_str(), original);
            }
        }
        (out, leaked)
    }

    /// The event and audit record of a canary leak.
    pub fn canary_leak(&self, who: &Subject, withheld: bool) -> (OutboxEvent, AuditEntry) {
        (
            who.event("promptshield:canary:leaked", json!({"withheld": withheld})),
            who.audit(
                format!("Canary token leaked in model output{}", if withheld { "; output withheld" } else { "" }),
                if withheld { outcome::BLOCKED } else { outcome::DETECTED },
                Severity::Critical,
                json!({"operation": "canary_leak"}),
            ),
        )
    }
}

/// Streaming output scanner: releases text as soon as it cannot be part of
/// a pattern, and holds back only a tail that could still become one (so a
/// canary split across chunks is caught before any of it is sent, and a
/// placeholder split across chunks is restored whole). Ordinary text is never
/// delayed to the next chunk.
pub struct StreamScanner {
    guarded: Arc<Secured>,
    pending: String,
}

impl StreamScanner {
    pub fn new(guarded: Arc<Secured>) -> Self {
        StreamScanner { guarded, pending: String::new() }
    }

    /// Add a delta; returns text safe to send and whether a canary leaked.
    pub fn push(&mut self, delta: &str) -> (String, bool) {
        self.pending.push_str(delta);
        if self.guarded.canary.as_deref().is_some_and(|c| self.pending.contains(c)) {
            self.pending.clear();
            return (String::new(), true);
        }
        let mut cut = self.pending.len() - self.guarded.undecided_tail(&self.pending);
        // Never split a whole placeholder: release it entirely or not at all.
        for (p, _) in &self.guarded.restore {
            for (start, m) in self.pending.match_indices(p.as_str()) {
                if start < cut && cut < start + m.len() {
                    cut = start;
                }
            }
        }
        if cut == 0 {
            return (String::new(), false);
        }
        let keep = self.pending.split_off(cut);
        let release = std::mem::replace(&mut self.pending, keep);
        (self.guarded.scan_output(&release).0, false)
    }

    /// The end: scan and release the held tail.
    pub fn finish(&mut self) -> (String, bool) {
        let (restored, leaked) = self.guarded.scan_output(&self.pending);
        self.pending.clear();
        if leaked { (String::new(), true) } else { (restored, false) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let refusal = shield_input_and_canary(&d, Strictness::Balanced, "{}", &["hi".into()], "s", &who(), &mut Secured::default())
            .expect_err("refused");
        assert_eq!(refusal.error.status, axum::http::StatusCode::FORBIDDEN);
        assert_eq!(refusal.trail.audit.len(), 1);

        let d = fixed(Action::Block, false, Ok(Some(("t".into(), "i".into()))));
        let refusal = shield_input_and_canary(&d, Strictness::Strict, "{}", &["hi".into()], "s", &who(), &mut Secured::default())
            .expect_err("blocked");
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
}
