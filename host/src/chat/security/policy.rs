//! The policy stage: run the policy plugin, turn its deny or fault into a refusal.

use serde_json::{Value, json};

use super::*;
use gatehouse_store::audit::outcome;
use gatehouse_store::model::Severity;

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
