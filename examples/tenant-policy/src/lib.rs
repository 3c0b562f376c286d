//! `my-policy`: a tenant security policy for Gatehouse ("Write a tenant policy" in the README).
//!
//! It refuses every request that mentions a word of `DENY_TERMS`, or of the host config's
//! `[plugins.settings.my-policy.config] deny_terms = ["…"]`, and lets the rest through with
//! the SDK's default constraints (PII flagged, secrets blocked, Prompt Shield balanced).

use gatehouse_sdk::policy::prelude::*;

/// The registry name: requests select this policy with `"smltp_policy": "my-policy"`.
const NAME: &str = "my-policy";
/// The words refused, in any letter case, in every message of a request.
const DENY_TERMS: &[&str] = &["forbidden-word"];

struct MyPolicy;

impl Guest for MyPolicy {
    fn info() -> PluginInfo {
        plugin_info(NAME, env!("CARGO_PKG_VERSION"), "Tenant policy: refuses chosen words")
    }

    fn evaluate(ctx: PolicyContext) -> PolicyDecision {
        if ctx.mentions_any(DENY_TERMS) || ctx.mentions_any(ctx.config_list("deny_terms")) {
            // Say what is wrong, not which word: the word itself may be sensitive.
            return deny(format!("{NAME}: the request mentions a word this tenant does not allow"));
        }
        allow()
    }
}

export_policy!(MyPolicy);

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_sdk::policy::testing::context;

    #[test]
    fn refuses_every_listed_word_in_any_case() {
        for word in DENY_TERMS {
            let decision = MyPolicy::evaluate(context(&format!("Tell me about {}.", word.to_uppercase())));
            assert!(!decision.allow, "{word} is refused");
            assert!(decision.reason.is_some_and(|r| r.starts_with(NAME)), "the caller learns which policy refused");
        }
    }

    #[test]
    fn refuses_words_from_the_host_config() {
        let ctx = PolicyContext { config_json: r#"{"deny_terms": ["pelican"]}"#.into(), ..context("About Pelicans") };
        assert!(!MyPolicy::evaluate(ctx).allow);
    }

    #[test]
    fn a_request_that_mentions_no_listed_word_gets_the_defaults() {
        assert_eq!(MyPolicy::evaluate(context("")), allow());
    }
}
