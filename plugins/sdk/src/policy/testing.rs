//! Helpers for a policy's native unit tests.

use super::{Message, PolicyContext, Role};

/// A request of one user message `text`, selecting policy `test`, with an
/// empty config. Change other fields with struct update syntax:
/// `PolicyContext { config_json: r#"{"deny_terms":["x"]}"#.into(), ..context("hi") }`.
pub fn context(text: &str) -> PolicyContext {
    PolicyContext {
        policy_name: "test".into(),
        key_id: "key".into(),
        user_id: "user".into(),
        group_id: None,
        models: vec!["echo/default".into()],
        index: "Zero-Knowledge".into(),
        messages: vec![Message { role: Role::User, content: text.into() }],
        shield_disable_requested: false,
        config_json: "{}".into(),
    }
}
