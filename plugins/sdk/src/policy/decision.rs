//! Building a [`PolicyDecision`]: [`allow()`] or [`deny()`], then chainable
//! setters for whatever differs from the defaults.
//!
//! The defaults are the cautious middle that suits a tenant policy: every
//! provider and knowledge base, PII flagged, secrets (DLP) blocked, Prompt
//! Shield `balanced` and not switchable off by the caller, the rest of an
//! answer withheld when a canary leaks, prompts not logged. A tenant policy
//! is layered on the operator's base policy and the host keeps the stricter
//! value field by field, so a default here never loosens the base policy.

use super::{DataAction, PolicyDecision};

/// Prompt Shield's strictness, as a policy sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShieldMode {
    /// No Prompt Shield for requests under this policy.
    Off,
    /// Score and report, never block.
    Monitor,
    /// Block what the shield is confident about.
    Balanced,
    /// Block at the lower threshold.
    Strict,
}

impl ShieldMode {
    /// The name the host reads (`shield-mode` in the WIT).
    pub const fn as_str(self) -> &'static str {
        match self {
            ShieldMode::Off => "off",
            ShieldMode::Monitor => "monitor",
            ShieldMode::Balanced => "balanced",
            ShieldMode::Strict => "strict",
        }
    }
}

/// Let the request through, with the default constraints (see the module docs).
pub fn allow() -> PolicyDecision {
    PolicyDecision {
        allow: true,
        reason: None,
        allowed_providers: None,
        allowed_indexes: None,
        pii_action: DataAction::Flag,
        dlp_action: DataAction::Block,
        restore_pii: false,
        shield_mode: ShieldMode::Balanced.as_str().to_owned(),
        shield_may_disable: false,
        withhold_on_canary_leak: true,
        log_prompts: false,
    }
}

/// Refuse the request: the caller gets 403 `Access denied` with `reason` as
/// the message, so say what was wrong without echoing sensitive text back.
pub fn deny(reason: impl Into<String>) -> PolicyDecision {
    PolicyDecision { allow: false, reason: Some(reason.into()), ..allow() }
}

impl PolicyDecision {
    /// Why the request was denied, or (on an allowed one) flagged.
    #[must_use]
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Only these providers (the part before `/` in a model name) may receive the data.
    #[must_use]
    pub fn providers<S: Into<String>>(mut self, providers: impl IntoIterator<Item = S>) -> Self {
        self.allowed_providers = Some(providers.into_iter().map(Into::into).collect());
        self
    }

    /// Only these knowledge bases may be used.
    #[must_use]
    pub fn indexes<S: Into<String>>(mut self, indexes: impl IntoIterator<Item = S>) -> Self {
        self.allowed_indexes = Some(indexes.into_iter().map(Into::into).collect());
        self
    }

    /// What PII findings lead to.
    #[must_use]
    pub fn pii(mut self, action: DataAction) -> Self {
        self.pii_action = action;
        self
    }

    /// What DLP (secret) findings lead to.
    #[must_use]
    pub fn dlp(mut self, action: DataAction) -> Self {
        self.dlp_action = action;
        self
    }

    /// Put redacted PII back into the answer.
    #[must_use]
    pub fn restore_pii(mut self, restore: bool) -> Self {
        self.restore_pii = restore;
        self
    }

    /// Prompt Shield's strictness.
    #[must_use]
    pub fn shield(mut self, mode: ShieldMode) -> Self {
        self.shield_mode = mode.as_str().to_owned();
        self
    }

    /// Whether a caller may switch Prompt Shield off for a request.
    #[must_use]
    pub fn shield_may_disable(mut self, may: bool) -> Self {
        self.shield_may_disable = may;
        self
    }

    /// Withhold the rest of an answer in which a canary leaks.
    #[must_use]
    pub fn withhold_on_canary_leak(mut self, withhold: bool) -> Self {
        self.withhold_on_canary_leak = withhold;
        self
    }

    /// Whether prompt text may be kept in logs.
    #[must_use]
    pub fn log_prompts(mut self, log: bool) -> Self {
        self.log_prompts = log;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_has_cautious_defaults() {
        let d = allow();
        assert!(d.allow && d.reason.is_none());
        assert_eq!((d.allowed_providers, d.allowed_indexes), (None, None));
        assert_eq!((d.pii_action, d.dlp_action), (DataAction::Flag, DataAction::Block));
        assert_eq!(d.shield_mode, "balanced");
        assert!(!d.restore_pii && !d.shield_may_disable && d.withhold_on_canary_leak && !d.log_prompts);
    }

    #[test]
    fn deny_keeps_the_defaults_and_carries_the_reason() {
        let d = deny("no");
        assert!(!d.allow);
        assert_eq!(d.reason.as_deref(), Some("no"));
        assert_eq!(PolicyDecision { allow: true, reason: None, ..d }, allow());
    }

    #[test]
    fn setters_change_only_their_field() {
        let d = allow()
            .providers(["local"])
            .indexes(vec!["docs".to_owned()])
            .pii(DataAction::Redact)
            .dlp(DataAction::Redact)
            .restore_pii(true)
            .shield(ShieldMode::Strict)
            .shield_may_disable(true)
            .withhold_on_canary_leak(false)
            .log_prompts(true)
            .reason("flagged");
        assert_eq!(d.allowed_providers, Some(vec!["local".to_owned()]));
        assert_eq!(d.allowed_indexes, Some(vec!["docs".to_owned()]));
        assert_eq!((d.pii_action, d.dlp_action), (DataAction::Redact, DataAction::Redact));
        assert_eq!(d.shield_mode, "strict");
        assert!(d.allow && d.restore_pii && d.shield_may_disable && !d.withhold_on_canary_leak && d.log_prompts);
        assert_eq!(d.reason.as_deref(), Some("flagged"));
        for (mode, name) in [(ShieldMode::Off, "off"), (ShieldMode::Monitor, "monitor"), (ShieldMode::Balanced, "balanced")] {
            assert_eq!(allow().shield(mode).shield_mode, name);
        }
    }
}
