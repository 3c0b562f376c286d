//! Prompt Shield on the input and on retrieved passages: the worst verdict decides
//! (block → refusal; flag → event and audit record), and the canary is made in the same call.

use serde_json::json;

use super::*;
use gatehouse_store::audit::outcome;
use gatehouse_store::model::Severity;

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
