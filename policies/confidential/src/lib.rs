//! The built-in `confidential` policy: for confidential data: only providers marked confidential, PII redacted and restored, secrets blocked, strict Prompt Shield that cannot be switched off, canary leaks withheld, prompts never logged.

policy_common::builtin_policy!(
    "confidential",
    "for confidential data: only providers marked confidential, PII redacted and restored, secrets blocked, strict Prompt Shield that cannot be switched off, canary leaks withheld, prompts never logged.",
    policy_common::Profile {
        confidential_providers_only: true,
        pii: gatehouse_sdk::policy::exports::gatehouse::plugin::policy_api::DataAction::Redact,
        dlp: gatehouse_sdk::policy::exports::gatehouse::plugin::policy_api::DataAction::Block,
        restore_pii: true,
        shield_mode: "strict",
        shield_may_disable: false,
        withhold_on_canary_leak: true,
        log_prompts: false,
    }
);
