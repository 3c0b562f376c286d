//! A tenant policy on top of its base: both are evaluated and the stricter
//! value of every field is kept, so a tenant can tighten the operator's
//! policy but never loosen it (docs/decisions/tenant-policies.md).

use std::sync::Arc;

use super::{PolicyDecision, PolicyEngine, PolicyInput};

/// The decision of a tenant policy layered on `base`, field by field:
/// `allow` both; allowed providers and indexes the intersection (absent =
/// all); PII and DLP actions the stricter (`allow < flag < redact < block`);
/// Prompt Shield the stricter mode (`off < monitor < balanced < strict`, a
/// mode the host does not know leaves the other side's); `shield_may_disable`,
/// `log_prompts` and `restore_pii` both; `withhold_on_canary_leak` either.
/// A refusal's reason is the base's when the base refuses, else the tenant's.
pub fn stricter(base: PolicyDecision, tenant: PolicyDecision) -> PolicyDecision {
    let reason = match (base.allow, tenant.allow) {
        (false, _) => base.reason,
        (true, false) => tenant.reason,
        (true, true) => base.reason.or(tenant.reason),
    };
    PolicyDecision {
        allow: base.allow && tenant.allow,
        reason,
        allowed_providers: intersection(base.allowed_providers, tenant.allowed_providers),
        allowed_indexes: intersection(base.allowed_indexes, tenant.allowed_indexes),
        pii_action: base.pii_action.max(tenant.pii_action),
        dlp_action: base.dlp_action.max(tenant.dlp_action),
        restore_pii: base.restore_pii && tenant.restore_pii,
        shield_mode: stricter_mode(base.shield_mode, tenant.shield_mode),
        shield_may_disable: base.shield_may_disable && tenant.shield_may_disable,
        withhold_on_canary_leak: base.withhold_on_canary_leak || tenant.withhold_on_canary_leak,
        log_prompts: base.log_prompts && tenant.log_prompts,
    }
}

/// `None` allows everything; two lists keep what both name, in the base's order.
fn intersection(base: Option<Vec<String>>, tenant: Option<Vec<String>>) -> Option<Vec<String>> {
    match (base, tenant) {
        (None, other) | (other, None) => other,
        (Some(b), Some(t)) => Some(b.into_iter().filter(|x| t.contains(x)).collect()),
    }
}

fn mode_rank(mode: &str) -> Option<u8> {
    match mode {
        "off" => Some(0),
        "monitor" => Some(1),
        "balanced" => Some(2),
        "strict" => Some(3),
        _ => None,
    }
}

fn stricter_mode(base: String, tenant: String) -> String {
    match (mode_rank(&base), mode_rank(&tenant)) {
        (Some(b), Some(t)) if t > b => tenant,
        (None, Some(_)) => tenant,
        _ => base,
    }
}

/// A tenant's policy component run together with the base policy the
/// operator names for it. Either failing fails the evaluation (the request
/// is refused, as for any policy fault). Its hash is the tenant version's,
/// which `smltp_policy_hash` reports.
pub struct LayeredPolicy {
    pub base: Arc<dyn PolicyEngine>,
    pub tenant: Arc<dyn PolicyEngine>,
}

impl PolicyEngine for LayeredPolicy {
    fn evaluate(&self, input: &PolicyInput<'_>) -> Result<PolicyDecision, String> {
        let base = self.base.evaluate(input).map_err(|e| format!("base policy: {e}"))?;
        let tenant = self.tenant.evaluate(input).map_err(|e| format!("tenant policy: {e}"))?;
        Ok(stricter(base, tenant))
    }

    fn hash(&self) -> String {
        self.tenant.hash()
    }
}

#[cfg(test)]
mod tests {
    use super::super::Action;
    use super::*;

    fn open() -> PolicyDecision {
        PolicyDecision {
            allow: true,
            reason: None,
            allowed_providers: None,
            allowed_indexes: None,
            pii_action: Action::Allow,
            dlp_action: Action::Flag,
            restore_pii: true,
            shield_mode: "balanced".into(),
            shield_may_disable: true,
            withhold_on_canary_leak: false,
            log_prompts: true,
        }
    }

    fn names(v: &[&str]) -> Option<Vec<String>> {
        Some(v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn a_tenant_cannot_loosen_any_field_of_its_base() {
        let base = PolicyDecision {
            allow: true,
            allowed_providers: names(&["openai", "anthropic"]),
            pii_action: Action::Redact,
            dlp_action: Action::Block,
            restore_pii: false,
            shield_mode: "strict".into(),
            shield_may_disable: false,
            withhold_on_canary_leak: true,
            log_prompts: false,
            ..open()
        };
        let loose = PolicyDecision {
            allowed_providers: None,
            pii_action: Action::Allow,
            dlp_action: Action::Allow,
            shield_mode: "off".into(),
            ..open()
        };
        assert_eq!(stricter(base.clone(), loose), base);
    }

    #[test]
    fn a_tenant_tightens_every_field_it_may() {
        let tight = PolicyDecision {
            allow: false,
            reason: Some("denied term".into()),
            allowed_providers: names(&["anthropic", "local"]),
            allowed_indexes: names(&[]),
            pii_action: Action::Block,
            dlp_action: Action::Redact,
            restore_pii: false,
            shield_mode: "strict".into(),
            shield_may_disable: false,
            withhold_on_canary_leak: true,
            log_prompts: false,
        };
        let base = PolicyDecision { allowed_providers: names(&["openai", "anthropic"]), ..open() };
        let d = stricter(base, tight);
        assert!(!d.allow);
        assert_eq!(d.reason.as_deref(), Some("denied term"));
        assert_eq!(d.allowed_providers, names(&["anthropic"]));
        assert_eq!(d.allowed_indexes, names(&[]), "an empty list allows no index");
        assert_eq!((d.pii_action, d.dlp_action), (Action::Block, Action::Redact));
        assert_eq!(d.shield_mode, "strict");
        assert!(!d.restore_pii && !d.shield_may_disable && d.withhold_on_canary_leak && !d.log_prompts);
    }

    #[test]
    fn the_base_refusal_reason_wins() {
        let base = PolicyDecision { allow: false, reason: Some("base says no".into()), ..open() };
        let tenant = PolicyDecision { allow: false, reason: Some("tenant says no".into()), ..open() };
        assert_eq!(stricter(base, tenant).reason.as_deref(), Some("base says no"));
    }

    #[test]
    fn an_unknown_shield_mode_never_lowers_a_known_one() {
        let base = open();
        let odd = PolicyDecision { shield_mode: "paranoid".into(), ..open() };
        assert_eq!(stricter(base.clone(), odd.clone()).shield_mode, "balanced");
        assert_eq!(stricter(odd, base).shield_mode, "balanced");
    }

    struct Fixed(Result<PolicyDecision, String>, &'static str);
    impl PolicyEngine for Fixed {
        fn evaluate(&self, _: &PolicyInput<'_>) -> Result<PolicyDecision, String> {
            self.0.clone()
        }
        fn hash(&self) -> String {
            self.1.into()
        }
    }

    fn input() -> PolicyInput<'static> {
        PolicyInput {
            policy_name: "acme-policy",
            key_id: "k",
            user_id: "u",
            group_id: Some("acme"),
            models: vec!["openai/gpt".into()],
            index: "Zero-Knowledge",
            messages: &[],
            extra_texts: &[],
            shield_disable_requested: false,
            config_json: "{}",
        }
    }

    #[test]
    fn the_layered_engine_reports_the_tenant_hash_and_fails_closed() {
        let base: Arc<dyn PolicyEngine> = Arc::new(Fixed(Ok(open()), "base-hash"));
        let off = PolicyDecision { shield_mode: "off".into(), ..open() };
        let layered = LayeredPolicy { base: base.clone(), tenant: Arc::new(Fixed(Ok(off), "tenant-hash")) };
        assert_eq!(layered.hash(), "tenant-hash");
        assert_eq!(layered.evaluate(&input()).map(|d| d.shield_mode), Ok("balanced".to_owned()));
        let broken = LayeredPolicy { base, tenant: Arc::new(Fixed(Err("trap".into()), "t")) };
        assert_eq!(broken.evaluate(&input()), Err("tenant policy: trap".to_owned()));
    }
}
