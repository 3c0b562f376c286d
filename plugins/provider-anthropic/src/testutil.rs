//! Helpers shared by the unit tests.

use gatehouse_sdk::provider::exports::gatehouse::plugin::provider_api::{ErrorClass, Upstream};

/// An Anthropic upstream with an optional key and plugin config.
pub fn upstream(key: Option<&str>, config: &str) -> Upstream {
    Upstream { base_url: "https://api.anthropic.com".to_string(), api_key: key.map(str::to_string), config_json: config.to_string() }
}

/// The WIT name of an error class, for short assertions.
pub fn class_name(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::Timeout => "timeout",
        ErrorClass::ServerError => "server-error",
        ErrorClass::RateLimit => "rate-limit",
        ErrorClass::ClientError => "client-error",
    }
}
