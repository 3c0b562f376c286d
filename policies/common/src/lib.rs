//! What the built-in policies have in common: a profile (one row of the table
//! in the README) turned into a decision, and the reading of the
//! host-provided config (`confidential_providers`, `deny_terms`).

use gatehouse_sdk::policy::exports::gatehouse::plugin::policy_api::{DataAction, PolicyContext, PolicyDecision};

/// Declare a built-in policy component: its name, description and profile.
///
/// ```text
/// policy_common::builtin_policy!("public", "for public-facing apps", Profile { .. });
/// ```
#[macro_export]
macro_rules! builtin_policy {
    ($name:literal, $description:literal, $profile:expr) => {
        /// The profile of this policy (see the README's policy table).
        pub const PROFILE: $crate::Profile = $profile;

        struct Policy;

        impl gatehouse_sdk::policy::exports::gatehouse::plugin::policy_api::Guest for Policy {
            fn info() -> gatehouse_sdk::policy::gatehouse::plugin::types::PluginInfo {
                gatehouse_sdk::policy::gatehouse::plugin::types::PluginInfo {
                    name: $name.into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    kind: gatehouse_sdk::policy::gatehouse::plugin::types::PluginKind::Policy,
                    description: $description.into(),
                }
            }

            fn evaluate(
                context: gatehouse_sdk::policy::exports::gatehouse::plugin::policy_api::PolicyContext,
            ) -> gatehouse_sdk::policy::exports::gatehouse::plugin::policy_api::PolicyDecision {
                $crate::decide(&PROFILE, &context)
            }
        }

        gatehouse_sdk::export_policy!(Policy);
    };
}

/// How one built-in policy treats a request.
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    /// Only providers marked `confidential = true` in the host config may receive the data.
    pub confidential_providers_only: bool,
    pub pii: DataAction,
    pub dlp: DataAction,
    pub restore_pii: bool,
    /// `monitor`, `balanced` or `strict`.
    pub shield_mode: &'static str,
    pub shield_may_disable: bool,
    pub withhold_on_canary_leak: bool,
    pub log_prompts: bool,
}

/// String values of a JSON array field of the config.
fn string_list(config: &serde_json::Value, field: &str) -> Vec<String> {
    config
        .get(field)
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// Decide on a request with `profile`.
///
/// Config keys (all optional): `confidential_providers` (set by the host:
/// providers fit for confidential data), `deny_terms` (case-insensitive words
/// that deny a request, e.g. project code names).
pub fn decide(profile: &Profile, ctx: &PolicyContext) -> PolicyDecision {
    let config: serde_json::Value = serde_json::from_str(&ctx.config_json).unwrap_or(serde_json::Value::Null);
    // Lower-cased once; with no terms (the usual case) no message is lower-cased.
    let deny_terms: Vec<String> = string_list(&config, "deny_terms").iter().filter(|t| !t.is_empty()).map(|t| t.to_lowercase()).collect();
    let mut allow = true;
    let mut reason = None;
    if !deny_terms.is_empty()
        && ctx.messages.iter().any(|m| {
            let lower = m.content.to_lowercase();
            deny_terms.iter().any(|t| lower.contains(t.as_str()))
        })
    {
        allow = false;
        reason = Some(format!("policy {} forbids a term in the request", ctx.policy_name));
    }
    if allow && ctx.shield_disable_requested && !profile.shield_may_disable {
        allow = false;
        reason = Some(format!("policy {} does not allow switching Prompt Shield off", ctx.policy_name));
    }
    let allowed_providers = profile.confidential_providers_only.then(|| string_list(&config, "confidential_providers"));
    PolicyDecision {
        allow,
        reason,
        allowed_providers,
        allowed_indexes: None,
        pii_action: profile.pii,
        dlp_action: profile.dlp,
        restore_pii: profile.restore_pii,
        shield_mode: profile.shield_mode.to_owned(),
        shield_may_disable: profile.shield_may_disable,
        withhold_on_canary_leak: profile.withhold_on_canary_leak,
        log_prompts: profile.log_prompts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_sdk::policy::gatehouse::plugin::types::{Message, Role};

    fn ctx(text: &str, config: &str, disable: bool) -> PolicyContext {
        PolicyContext {
            policy_name: "p".into(),
            key_id: "k".into(),
            user_id: "u".into(),
            group_id: None,
            models: vec!["echo/x".into()],
            index: "Zero-Knowledge".into(),
            messages: vec![Message { role: Role::User, content: text.into() }],
            shield_disable_requested: disable,
            config_json: config.into(),
        }
    }

    const STRICT: Profile = Profile {
        confidential_providers_only: true,
        pii: DataAction::Redact,
        dlp: DataAction::Block,
        restore_pii: true,
        shield_mode: "strict",
        shield_may_disable: false,
        withhold_on_canary_leak: true,
        log_prompts: false,
    };

    #[test]
    fn deny_terms_deny_case_insensitively() {
        let d = decide(&STRICT, &ctx("About Project Falcon", r#"{"deny_terms":["falcon"]}"#, false));
        assert!(!d.allow);
        assert!(d.reason.expect("reason").contains("forbids"));
        assert!(decide(&STRICT, &ctx("About birds", r#"{"deny_terms":["falcon"]}"#, false)).allow);
        assert!(!decide(&STRICT, &ctx("about falcon", r#"{"deny_terms":["", "FALCON"]}"#, false)).allow, "terms are lower-cased too");
        assert!(decide(&STRICT, &ctx("anything", r#"{"deny_terms":[""]}"#, false)).allow, "an empty term denies nothing");
    }

    #[test]
    fn confidential_lists_only_fit_providers() {
        let d = decide(&STRICT, &ctx("hi", r#"{"confidential_providers":["local"]}"#, false));
        assert_eq!(d.allowed_providers, Some(vec!["local".to_owned()]));
    }

    #[test]
    fn shield_cannot_be_switched_off_when_the_profile_forbids_it() {
        let d = decide(&STRICT, &ctx("hi", "{}", true));
        assert!(!d.allow);
    }
}
