//! The built-in `public` policy: for public-facing apps: every provider, PII redacted and restored, secrets blocked, strict Prompt Shield that cannot be switched off, canary leaks withheld, prompts never logged.

use gatehouse_sdk::policy::prelude::*;

builtin_policy!(
    "public",
    "for public-facing apps: every provider, PII redacted and restored, secrets blocked, strict Prompt Shield that cannot be switched off, canary leaks withheld, prompts never logged.",
    Profile {
        confidential_providers_only: false,
        pii: DataAction::Redact,
        dlp: DataAction::Block,
        restore_pii: true,
        shield_mode: ShieldMode::Strict,
        shield_may_disable: false,
        withhold_on_canary_leak: true,
        log_prompts: false,
    }
);
