//! The built-in `internal` policy: for internal tools: every provider, PII flagged, secrets blocked, balanced Prompt Shield that callers may switch off, prompts may be logged.

use gatehouse_sdk::policy::prelude::*;

builtin_policy!(
    "internal",
    "for internal tools: every provider, PII flagged, secrets blocked, balanced Prompt Shield that callers may switch off, prompts may be logged.",
    Profile {
        confidential_providers_only: false,
        pii: DataAction::Flag,
        dlp: DataAction::Block,
        restore_pii: false,
        shield_mode: ShieldMode::Balanced,
        shield_may_disable: true,
        withhold_on_canary_leak: false,
        log_prompts: true,
    }
);
