//! `my-policy`: a tenant security policy for Gatehouse.
//!
//! It denies any request that mentions the word in `DENIED_WORD` (or the
//! words listed in the host config: `[plugins.settings.my-policy.config]
//! deny_words = ["..."]`), and otherwise lets the request through with
//! balanced Prompt Shield, PII flagged and secrets blocked.

use gatehouse_sdk::policy::exports::gatehouse::plugin::policy_api::{DataAction, Guest, PolicyContext, PolicyDecision};
use gatehouse_sdk::policy::gatehouse::plugin::types::{PluginInfo, PluginKind};

/// The registry name: requests select this policy with `"smltp_policy": "my-policy"`.
const NAME: &str = "my-policy";
/// The word this policy refuses (case-insensitive).
const DENIED_WORD: &str = "forbidden-word";

/// Words from the host config, plus the built-in one.
fn denied_words(config_json: &str) -> Vec<String> {
    let config: serde_json::Value = serde_json::from_str(config_json).unwrap_or_default();
    let mut words = vec![DENIED_WORD.to_owned()];
    if let Some(list) = config.get("deny_words").and_then(|v| v.as_array()) {
        words.extend(list.iter().filter_map(|w| w.as_str()).map(str::to_lowercase).filter(|w| !w.is_empty()));
    }
    words
}

/// The decision, as plain Rust so it is unit-tested with `cargo test`.
pub fn decide(ctx: &PolicyContext) -> PolicyDecision {
    let words = denied_words(&ctx.config_json);
    let hit = ctx
        .messages
        .iter()
        .any(|m| words.iter().any(|w| m.content.to_lowercase().contains(w.as_str())));
    PolicyDecision {
        allow: !hit,
        reason: hit.then(|| format!("{NAME}: the request mentions a word this tenant does not allow")),
        allowed_providers: None,
        allowed_indexes: None,
        pii_action: DataAction::Flag,
        dlp_action: DataAction::Block,
        restore_pii: false,
        shield_mode: "balanced".into(),
        shield_may_disable: true,
        withhold_on_canary_leak: true,
        log_prompts: false,
    }
}

struct MyPolicy;

impl Guest for MyPolicy {
    fn info() -> PluginInfo {
        PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Policy,
            description: "Tenant policy: denies a chosen word".into(),
        }
    }

    fn evaluate(context: PolicyContext) -> PolicyDecision {
        decide(&context)
    }
}

gatehouse_sdk::export_policy!(MyPolicy);

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_sdk::policy::gatehouse::plugin::types::{Message, Role};

    fn ctx(text: &str, config: &str) -> PolicyContext {
        PolicyContext {
            policy_name: NAME.into(),
            key_id: "key".into(),
            user_id: "user".into(),
            group_id: None,
            models: vec!["echo/default".into()],
            index: "Zero-Knowledge".into(),
            messages: vec![Message { role: Role::User, content: text.into() }],
            shield_disable_requested: false,
            config_json: config.into(),
        }
    }

    #[test]
    fn denies_the_word_and_allows_the_rest() {
        assert!(!decide(&ctx("this has a FORBIDDEN-WORD in it", "{}")).allow);
        assert!(decide(&ctx("all good", "{}")).allow);
        assert!(!decide(&ctx("about pelicans", r#"{"deny_words": ["pelican"]}"#)).allow);
    }
}
