//! `{{name}}`: a Gatehouse tenant policy (see README.md).
//!
//! Refuses requests that mention a denied term or name a model that is not
//! approved; lets the rest through with PII blocked and Prompt Shield strict.

use gatehouse_sdk::policy::prelude::*;

/// The registry name: requests select this policy with `"smltp_policy": "{{name}}"`.
/// Changing it publishes a different policy; `gatehouse plugin check` shows the name it serves under.
const NAME: &str = "{{name}}";
/// Refused in any letter case, in every message of a request (plus the host config's `deny_terms`).
const DENY_TERMS: &[&str] = &["project falcon", "forbidden-word"];
/// The only models requests under this policy may name.
const APPROVED_MODELS: &[&str] = &["echo/default"];

struct Policy;

impl Guest for Policy {
    fn info() -> PluginInfo {
        plugin_info(NAME, env!("CARGO_PKG_VERSION"), "Tenant policy: denied terms, approved models, PII blocked, strict shield")
    }

    fn evaluate(ctx: PolicyContext) -> PolicyDecision {
        if ctx.mentions_any(DENY_TERMS) || ctx.mentions_any(ctx.config_list("deny_terms")) {
            // Say what is wrong, not which term: the term itself may be sensitive.
            return deny(format!("{NAME}: the request mentions a term this tenant does not allow"));
        }
        if let Some(model) = ctx.models.iter().find(|m| !APPROVED_MODELS.contains(&m.as_str())) {
            return deny(format!("{NAME}: model {model} is not approved for this tenant"));
        }
        allow().pii(DataAction::Block).shield(ShieldMode::Strict)
    }
}

export_policy!(Policy);

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_sdk::policy::testing::context;

    #[test]
    fn refuses_every_listed_term_in_any_case() {
        for term in DENY_TERMS {
            let decision = Policy::evaluate(context(&format!("Tell me about {}.", term.to_uppercase())));
            assert!(!decision.allow, "{term} is refused");
            assert!(decision.reason.is_some_and(|r| r.starts_with(NAME)), "the caller learns which policy refused");
        }
    }

    #[test]
    fn refuses_models_that_are_not_approved() {
        let ctx = PolicyContext { models: vec!["echo/large".into()], ..context("Hello") };
        assert!(!Policy::evaluate(ctx).allow);
    }

    #[test]
    fn lets_the_rest_through_with_pii_blocked_and_a_strict_shield() {
        let ctx = PolicyContext { models: APPROVED_MODELS.iter().map(|m| m.to_string()).collect(), ..context("Hello") };
        assert_eq!(Policy::evaluate(ctx), allow().pii(DataAction::Block).shield(ShieldMode::Strict));
    }
}
