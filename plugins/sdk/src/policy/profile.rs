//! The built-in policies (`internal`, `public`, `confidential`): each is one
//! [`Profile`], declared with [`builtin_policy!`](crate::builtin_policy). A
//! policy that is "one of these, plus a rule" can call [`Profile::decide`]
//! from its own `evaluate` and adjust the result.

use super::{DataAction, PolicyContext, PolicyDecision, ShieldMode, allow};

/// How one built-in policy treats a request (one row of the README's policy table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// Only providers marked `confidential = true` in the host config may receive the data.
    pub confidential_providers_only: bool,
    pub pii: DataAction,
    pub dlp: DataAction,
    pub restore_pii: bool,
    pub shield_mode: ShieldMode,
    pub shield_may_disable: bool,
    pub withhold_on_canary_leak: bool,
    pub log_prompts: bool,
}

impl Profile {
    /// Decide on a request.
    ///
    /// Config keys (all optional): `confidential_providers` (set by the host:
    /// providers fit for confidential data), `deny_terms` (case-insensitive
    /// words that deny a request, e.g. project code names).
    pub fn decide(&self, ctx: &PolicyContext) -> PolicyDecision {
        let mut decision = allow()
            .pii(self.pii)
            .dlp(self.dlp)
            .restore_pii(self.restore_pii)
            .shield(self.shield_mode)
            .shield_may_disable(self.shield_may_disable)
            .withhold_on_canary_leak(self.withhold_on_canary_leak)
            .log_prompts(self.log_prompts);
        if self.confidential_providers_only {
            decision = decision.providers(ctx.config_list("confidential_providers"));
        }
        let refusal = if ctx.mentions_any(ctx.config_list("deny_terms")) {
            Some(format!("policy {} forbids a term in the request", ctx.policy_name))
        } else if ctx.shield_disable_requested && !self.shield_may_disable {
            Some(format!("policy {} does not allow switching Prompt Shield off", ctx.policy_name))
        } else {
            None
        };
        match refusal {
            Some(reason) => PolicyDecision { allow: false, reason: Some(reason), ..decision },
            None => decision,
        }
    }
}

/// Declare a built-in policy component: its registry name, description and
/// [`Profile`]. Defines `pub const PROFILE` and exports the component.
///
/// ```
/// use gatehouse_sdk::policy::prelude::*;
///
/// builtin_policy!(
///     "careful",
///     "PII redacted and restored, secrets blocked, strict Prompt Shield",
///     Profile {
///         confidential_providers_only: false,
///         pii: DataAction::Redact,
///         dlp: DataAction::Block,
///         restore_pii: true,
///         shield_mode: ShieldMode::Strict,
///         shield_may_disable: false,
///         withhold_on_canary_leak: true,
///         log_prompts: false,
///     }
/// );
///
/// fn main() {
///     assert_eq!(PROFILE.shield_mode, ShieldMode::Strict);
/// }
/// ```
#[macro_export]
macro_rules! builtin_policy {
    ($name:literal, $description:literal, $profile:expr) => {
        /// The profile of this policy (see the README's policy table).
        pub const PROFILE: $crate::policy::Profile = $profile;

        struct Policy;

        impl $crate::policy::Guest for Policy {
            fn info() -> $crate::policy::PluginInfo {
                $crate::policy::plugin_info($name, env!("CARGO_PKG_VERSION"), $description)
            }

            fn evaluate(context: $crate::policy::PolicyContext) -> $crate::policy::PolicyDecision {
                PROFILE.decide(&context)
            }
        }

        $crate::export_policy!(Policy);
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testing::context;

    fn ctx(text: &str, config: &str, disable: bool) -> PolicyContext {
        PolicyContext { policy_name: "p".into(), shield_disable_requested: disable, config_json: config.into(), ..context(text) }
    }

    const STRICT: Profile = Profile {
        confidential_providers_only: true,
        pii: DataAction::Redact,
        dlp: DataAction::Block,
        restore_pii: true,
        shield_mode: ShieldMode::Strict,
        shield_may_disable: false,
        withhold_on_canary_leak: true,
        log_prompts: false,
    };

    #[test]
    fn deny_terms_deny_case_insensitively() {
        let d = STRICT.decide(&ctx("About Project Falcon", r#"{"deny_terms":["falcon"]}"#, false));
        assert!(!d.allow);
        assert_eq!(d.reason.as_deref(), Some("policy p forbids a term in the request"));
        assert!(STRICT.decide(&ctx("About birds", r#"{"deny_terms":["falcon"]}"#, false)).allow);
        assert!(!STRICT.decide(&ctx("about falcon", r#"{"deny_terms":["", "FALCON"]}"#, false)).allow, "terms are lower-cased too");
        assert!(STRICT.decide(&ctx("anything", r#"{"deny_terms":[""]}"#, false)).allow, "an empty term denies nothing");
    }

    #[test]
    fn confidential_lists_only_fit_providers() {
        let d = STRICT.decide(&ctx("hi", r#"{"confidential_providers":["local"]}"#, false));
        assert_eq!(d.allowed_providers, Some(vec!["local".to_owned()]));
        let open = Profile { confidential_providers_only: false, ..STRICT };
        assert_eq!(open.decide(&ctx("hi", r#"{"confidential_providers":["local"]}"#, false)).allowed_providers, None);
    }

    #[test]
    fn shield_cannot_be_switched_off_when_the_profile_forbids_it() {
        let d = STRICT.decide(&ctx("hi", "{}", true));
        assert!(!d.allow);
        assert_eq!(d.reason.as_deref(), Some("policy p does not allow switching Prompt Shield off"));
        let lax = Profile { shield_may_disable: true, ..STRICT };
        assert!(lax.decide(&ctx("hi", "{}", true)).allow);
    }

    /// Every field of an allowed decision comes from the profile.
    #[test]
    fn the_profile_sets_every_constraint() {
        let d = STRICT.decide(&ctx("hi", "{}", false));
        assert!(d.allow && d.reason.is_none() && d.allowed_indexes.is_none());
        assert_eq!((d.pii_action, d.dlp_action, d.shield_mode.as_str()), (DataAction::Redact, DataAction::Block, "strict"));
        assert!(d.restore_pii && !d.shield_may_disable && d.withhold_on_canary_leak && !d.log_prompts);
        let other = Profile {
            confidential_providers_only: false,
            pii: DataAction::Flag,
            dlp: DataAction::Allow,
            restore_pii: false,
            shield_mode: ShieldMode::Monitor,
            shield_may_disable: true,
            withhold_on_canary_leak: false,
            log_prompts: true,
        };
        let d = other.decide(&ctx("hi", "{}", false));
        assert_eq!((d.pii_action, d.dlp_action, d.shield_mode.as_str()), (DataAction::Flag, DataAction::Allow, "monitor"));
        assert!(!d.restore_pii && d.shield_may_disable && !d.withhold_on_canary_leak && d.log_prompts);
        assert_eq!(d.allowed_providers, None);
    }
}
