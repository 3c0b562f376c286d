//! How strict Prompt Shield runs for one request: the policy's mode, raised
//! by the request at will, lowered (or switched off) only where the policy
//! says `shield_may_disable` (docs/decisions/policy-resolution.md).

use super::request::PromptShieldOption;
use super::security::{PolicyDecision, Strictness};

/// What Prompt Shield does for a request (`metadata.prompt_shield_policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShieldSetting {
    pub enabled: bool,
    pub mode: Strictness,
    /// `request` when the request's own setting is in force, else `policy`.
    pub source: &'static str,
}

/// Why a request's Prompt Shield setting was not honoured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// `prompt_shield.policy` names no mode (400).
    Invalid(String),
    /// It would lower the policy's strictness, which the policy forbids (403).
    Lowered(String),
}

/// Off < monitor < balanced < strict.
fn rank(enabled: bool, mode: Strictness) -> u8 {
    match (enabled, mode) {
        (false, _) => 0,
        (true, Strictness::Monitor) => 1,
        (true, Strictness::Balanced) => 2,
        (true, Strictness::Strict) => 3,
    }
}

/// The setting for `requested` under `decision` (the policy `policy`).
pub fn resolve(requested: &PromptShieldOption, decision: &PolicyDecision, policy: &str) -> Result<ShieldSetting, Refused> {
    let policy_on = decision.shield_mode != "off";
    // An unknown mode from a policy plugin runs as balanced, as before.
    let policy_mode = Strictness::parse(&decision.shield_mode).unwrap_or(Strictness::Balanced);
    let asked_mode = match requested.policy.as_deref() {
        Some(m) => Some(
            Strictness::parse(m)
                .ok_or_else(|| Refused::Invalid(format!("`prompt_shield.policy` is `{m}`; use monitor, balanced or strict")))?,
        ),
        None => None,
    };
    let enabled = match requested.enabled {
        Some(e) => e,
        // Naming a mode switches the shield on, even where the policy has it off.
        None => policy_on || asked_mode.is_some(),
    };
    let mode = asked_mode.unwrap_or(policy_mode);
    if rank(enabled, mode) < rank(policy_on, policy_mode) && !decision.shield_may_disable {
        let policy_runs = if policy_on { policy_mode.as_str() } else { "off" };
        return Err(Refused::Lowered(if enabled {
            format!(
                "policy {policy} does not let a request lower Prompt Shield (asked for {}, the policy runs it {policy_runs}); \
                 send `prompt_shield.policy` {policy_runs} or stricter, or leave it out",
                mode.as_str()
            )
        } else {
            format!("policy {policy} does not let a request switch Prompt Shield off; leave `prompt_shield.enabled` out or set it to true")
        }));
    }
    let source = if requested.enabled == Some(false) || (enabled && asked_mode.is_some()) { "request" } else { "policy" };
    Ok(ShieldSetting { enabled, mode, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::security::Action;

    fn policy(mode: &str, may_disable: bool) -> PolicyDecision {
        PolicyDecision {
            allow: true,
            reason: None,
            allowed_providers: None,
            allowed_indexes: None,
            pii_action: Action::Allow,
            dlp_action: Action::Allow,
            restore_pii: false,
            shield_mode: mode.into(),
            shield_may_disable: may_disable,
            withhold_on_canary_leak: false,
            log_prompts: false,
        }
    }

    fn ask(enabled: Option<bool>, mode: Option<&str>) -> PromptShieldOption {
        PromptShieldOption { enabled, policy: mode.map(str::to_owned) }
    }

    fn on(mode: Strictness, source: &'static str) -> Result<ShieldSetting, Refused> {
        Ok(ShieldSetting { enabled: true, mode, source })
    }

    #[test]
    fn a_strict_policy_can_only_be_raised_to() {
        let public = policy("strict", false);
        assert_eq!(resolve(&ask(None, None), &public, "public"), on(Strictness::Strict, "policy"));
        assert_eq!(resolve(&ask(Some(true), Some("strict")), &public, "public"), on(Strictness::Strict, "request"));
        for (enabled, mode) in [(None, Some("monitor")), (None, Some("balanced")), (Some(false), None), (Some(false), Some("strict"))] {
            match resolve(&ask(enabled, mode), &public, "public") {
                Err(Refused::Lowered(m)) => assert!(m.contains("policy public") && m.contains("Prompt Shield"), "{m}"),
                other => panic!("{enabled:?} {mode:?}: {other:?}"),
            }
        }
        let balanced = policy("balanced", false);
        assert_eq!(resolve(&ask(None, Some("strict")), &balanced, "b"), on(Strictness::Strict, "request"));
        assert!(matches!(resolve(&ask(None, Some("monitor")), &balanced, "b"), Err(Refused::Lowered(_))));
    }

    #[test]
    fn a_policy_that_allows_it_may_be_lowered_or_switched_off() {
        let internal = policy("balanced", true);
        assert_eq!(resolve(&ask(None, Some("monitor")), &internal, "internal"), on(Strictness::Monitor, "request"));
        let off = resolve(&ask(Some(false), None), &internal, "internal").expect("off");
        assert_eq!((off.enabled, off.source), (false, "request"));
    }

    #[test]
    fn a_policy_with_the_shield_off_may_have_it_switched_on() {
        let open = policy("off", false);
        let s = resolve(&ask(None, None), &open, "open").expect("off");
        assert_eq!((s.enabled, s.source), (false, "policy"));
        assert_eq!(resolve(&ask(None, Some("monitor")), &open, "open"), on(Strictness::Monitor, "request"));
        assert_eq!(resolve(&ask(Some(true), None), &open, "open"), on(Strictness::Balanced, "policy"));
        assert!(resolve(&ask(Some(false), None), &open, "open").is_ok_and(|s| !s.enabled), "off is not lower than off");
    }

    #[test]
    fn an_unknown_mode_is_invalid() {
        assert!(matches!(resolve(&ask(None, Some("lax")), &policy("strict", true), "p"), Err(Refused::Invalid(_))));
    }
}
