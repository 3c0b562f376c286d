//! The security pipeline around the model chain (docs/decisions/security-pipeline.md):
//! policy → Prompt Shield on the input → PII/DLP → (retrieval →
//! Prompt Shield on passages) → model chain → output checks (canary, PII
//! restore). Policies and detectors are plugins; this module owns the order,
//! the outcomes (403 `Access denied` with the reason, events, audit records)
//! and the bookkeeping that must survive until the answer is out.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::types::Message;
use crate::error::{ChatError, text};
use gatehouse_store::audit::{Audit, category, kind, outcome};
use gatehouse_store::model::{AuditEntry, Severity};
use gatehouse_store::records::OutboxEvent;

mod data;
pub mod layered;
mod output;
mod policy;
pub mod shadow;
mod shield;
pub mod tenant;
#[cfg(test)]
mod tests;

pub use data::{pii_dlp, pii_dlp_passages};
pub use output::{OutputScan, StreamScanner, plant_canary};
pub use policy::{apply_policy, json_text};
pub use shield::{shield, shield_input_and_canary};

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
