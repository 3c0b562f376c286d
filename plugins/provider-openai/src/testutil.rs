//! Helpers shared by the unit tests (the generic ones come from the SDK).

use gatehouse_sdk::provider::Upstream;
pub use gatehouse_sdk::provider::testing::{class_name, sse_events};

/// An OpenAI upstream with an optional key and plugin config.
pub fn upstream(key: Option<&str>, config: &str) -> Upstream {
    gatehouse_sdk::provider::testing::upstream("https://api.openai.com/v1", key, config)
}
