//! The built-in `public` policy: for public-facing apps: every provider, PII redacted and restored, secrets blocked, strict Prompt Shield that cannot be switched off, canary leaks withheld, prompts never logged.

policy_common::builtin_policy!(
    "public",
    "for public-facing apps: every provider, PII redacted and restored, secrets blocked, strict Prompt Shield that cannot be switched off, canary leaks withheld, prompts never logged.",
    policy_common::Profile {
        confidential_providers_only: false,
        pii: gatehouse_sdk::policy::exports::gatehouse::plugin::policy_api::DataAction::Redact,
        dlp: gatehouse_sdk::policy::exports::gatehouse::plugin::policy_api::DataAction::Block,
        restore_pii: true,
        shield_mode: "strict",
        shield_may_disable: false,
        withhold_on_canary_leak: true,
        log_prompts: false,
    }
);
