//! An example tenant policy, `acme`: what a tenant writes to enforce its own rules.
//!
//! * requests mentioning a term from `deny_terms` (config) are denied;
//! * only models listed in `allowed_models` (config; default: all) may be used;
//! * PII is blocked outright, secrets too; Prompt Shield is strict.
//!
//! Config (host `[plugins.settings.acme.config]`): `deny_terms = ["..."]`,
//! `allowed_models = ["openai/gpt-4o-mini"]`.

use gatehouse_sdk::policy::exports::gatehouse::plugin::policy_api::{DataAction, Guest, PolicyContext, PolicyDecision};
use gatehouse_sdk::policy::gatehouse::plugin::types::{PluginInfo, PluginKind};

fn list(config: &serde_json::Value, field: &str) -> Vec<String> {
    config
        .get(field)
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_lowercase)).collect())
        .unwrap_or_default()
}

/// The decision, as plain Rust (unit-tested natively).
pub fn decide(ctx: &PolicyContext) -> PolicyDecision {
    let config: serde_json::Value = serde_json::from_str(&ctx.config_json).unwrap_or_default();
    let deny = list(&config, "deny_terms");
    let models = list(&config, "allowed_models");
    let mut reason = None;
    if let Some(term) = deny.iter().find(|t| ctx.messages.iter().any(|m| m.content.to_lowercase().contains(t.as_str()))) {
        let _ = term; // never echo the term back: it may itself be sensitive
        reason = Some("acme policy: the request mentions a restricted term".to_owned());
    } else if !models.is_empty()
        && let Some(m) = ctx.models.iter().find(|m| !models.contains(&m.to_lowercase()))
    {
        reason = Some(format!("acme policy: model {m} is not approved"));
    }
    PolicyDecision {
        allow: reason.is_none(),
        reason,
        allowed_providers: None,
        allowed_indexes: None,
        pii_action: DataAction::Block,
        dlp_action: DataAction::Block,
        restore_pii: false,
        shield_mode: "strict".into(),
        shield_may_disable: false,
        withhold_on_canary_leak: true,
        log_prompts: false,
    }
}

struct Acme;

impl Guest for Acme {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "acme".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Policy,
            description: "Example tenant policy: restricted terms, approved models, PII blocked".into(),
        }
    }

    fn evaluate(context: PolicyContext) -> PolicyDecision {
        decide(&context)
    }
}

gatehouse_sdk::export_policy!(Acme);

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_sdk::policy::gatehouse::plugin::types::{Message, Role};

    fn ctx(text: &str, models: &[&str]) -> PolicyContext {
        PolicyContext {
            policy_name: "acme".into(),
            key_id: "k".into(),
            user_id: "u".into(),
            group_id: Some("g".into()),
            models: models.iter().map(|m| (*m).to_owned()).collect(),
            index: "Zero-Knowledge".into(),
            messages: vec![Message { role: Role::User, content: text.into() }],
            shield_disable_requested: false,
            config_json: r#"{"deny_terms":["Project Falcon"],"allowed_models":["echo/approved"]}"#.into(),
        }
    }

    #[test]
    fn denies_restricted_terms_without_echoing_them() {
        let d = decide(&ctx("tell me about project falcon", &["echo/approved"]));
        assert!(!d.allow);
        assert!(!d.reason.expect("reason").to_lowercase().contains("falcon"));
    }

    #[test]
    fn limits_models() {
        assert!(!decide(&ctx("hello", &["echo/other"])).allow);
        assert!(decide(&ctx("hello", &["echo/approved"])).allow);
    }
}
