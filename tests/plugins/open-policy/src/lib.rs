//! Test policy `open`: allows everything and asks for no detectors, so tests
//! of the plugin runtime and the model chain do not depend on them.

use gatehouse_sdk::policy::prelude::*;

struct Open;

impl Guest for Open {
    fn info() -> PluginInfo {
        plugin_info("open", "0.0.1", "test policy: allows everything")
    }

    fn evaluate(_context: PolicyContext) -> PolicyDecision {
        allow()
            .pii(DataAction::Allow)
            .dlp(DataAction::Allow)
            .shield(ShieldMode::Off)
            .shield_may_disable(true)
            .withhold_on_canary_leak(false)
            .log_prompts(true)
    }
}

export_policy!(Open);
