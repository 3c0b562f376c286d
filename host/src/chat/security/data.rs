//! PII and DLP on the input and on retrieved passages: block, redact (with the
//! placeholders remembered for the answer) or flag, as the policy says.

use serde_json::json;

use super::*;
use crate::chat::screen::{FieldTexts, Hidden};
use crate::chat::types::Message;
use gatehouse_store::audit::outcome;
use gatehouse_store::model::Severity;

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
