//! The built-in `internal` policy: for internal tools: every provider, PII flagged, secrets blocked, balanced Prompt Shield that callers may switch off, prompts may be logged.

policy_common::builtin_policy!(
    "internal",
    "for internal tools: every provider, PII flagged, secrets blocked, balanced Prompt Shield that callers may switch off, prompts may be logged.",
    policy_common::Profile {
        confidential_providers_only: false,
        pii: gatehouse_sdk::policy::exports::gatehouse::plugin::policy_api::DataAction::Flag,
        dlp: gatehouse_sdk::policy::exports::gatehouse::plugin::policy_api::DataAction::Block,
        restore_pii: false,
        shield_mode: "balanced",
        shield_may_disable: true,
        withhold_on_canary_leak: false,
        log_prompts: true,
    }
);
