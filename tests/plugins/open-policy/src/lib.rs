//! Test policy `open`: allows everything and asks for no detectors, so tests
//! of the plugin runtime and the model chain do not depend on them.

use gatehouse_sdk::policy::exports::gatehouse::plugin::policy_api::{DataAction, Guest, PolicyContext, PolicyDecision};
use gatehouse_sdk::policy::gatehouse::plugin::types::{PluginInfo, PluginKind};

struct Open;

impl Guest for Open {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "open".into(),
            version: "0.0.1".into(),
            kind: PluginKind::Policy,
            description: "test policy: allows everything".into(),
        }
    }

    fn evaluate(_context: PolicyContext) -> PolicyDecision {
        PolicyDecision {
            allow: true,
            reason: None,
            allowed_providers: None,
            allowed_indexes: None,
            pii_action: DataAction::Allow,
            dlp_action: DataAction::Allow,
            restore_pii: false,
            shield_mode: "off".into(),
            shield_may_disable: true,
            withhold_on_canary_leak: false,
            log_prompts: true,
        }
    }
}

gatehouse_sdk::export_policy!(Open);
