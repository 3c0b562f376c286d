//! The plugin's own config: the `config` table of the provider entry, handed
//! over as a JSON object in `upstream.config-json`.

use serde::Deserialize;

use crate::errors::adapter_fault;
use gatehouse_sdk::provider::ProviderError;

/// Options for servers that deviate from OpenAI. Unknown keys are ignored.
///
/// ```toml
/// [providers.ollama.config]
/// include_usage = false          # the server rejects `stream_options`
/// max_tokens_field = "max_completion_tokens"
/// extra_headers = { "OpenAI-Organization" = "org-123" }
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct OpenAiConfig {
    /// Send `stream_options: {"include_usage": true}` on streams so that the
    /// last chunk carries token usage. Default `true`; turn it off for servers
    /// that reject the field.
    pub include_usage: bool,
    /// Name of the body field that carries the token limit: `max_tokens`
    /// (default, understood by every compatible server) or
    /// `max_completion_tokens` (required by OpenAI's reasoning models).
    pub max_tokens_field: String,
    /// Headers added to every request (organisation, project, routing).
    /// They cannot replace `Authorization` or `Content-Type`.
    pub extra_headers: std::collections::BTreeMap<String, String>,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self { include_usage: true, max_tokens_field: "max_tokens".to_string(), extra_headers: Default::default() }
    }
}

impl OpenAiConfig {
    /// Parse `config-json`; `""` and `null` mean the defaults. A broken config
    /// is an operator error on this provider entry, reported as a
    /// server-error so that the chain can move on to another provider.
    pub fn parse(config_json: &str) -> Result<Self, ProviderError> {
        let trimmed = config_json.trim();
        if trimmed.is_empty() || trimmed == "null" {
            return Ok(Self::default());
        }
        let cfg: Self = serde_json::from_str(trimmed).map_err(|e| adapter_fault(format!("invalid provider-openai config: {e}")))?;
        if cfg.max_tokens_field != "max_tokens" && cfg.max_tokens_field != "max_completion_tokens" {
            return Err(adapter_fault(format!(
                "invalid provider-openai config: max_tokens_field must be `max_tokens` or `max_completion_tokens`, not `{}`",
                cfg.max_tokens_field
            )));
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_null_mean_defaults() {
        for s in ["", "null", "{}", "  "] {
            let c = OpenAiConfig::parse(s).expect("defaults");
            assert!(c.include_usage);
            assert_eq!(c.max_tokens_field, "max_tokens");
        }
    }

    #[test]
    fn options_are_read_and_unknown_keys_ignored() {
        let c = OpenAiConfig::parse(
            r#"{"include_usage":false,"max_tokens_field":"max_completion_tokens","extra_headers":{"X-A":"1"},"other":1}"#,
        )
        .expect("valid");
        assert!(!c.include_usage);
        assert_eq!(c.max_tokens_field, "max_completion_tokens");
        assert_eq!(c.extra_headers.get("X-A").map(String::as_str), Some("1"));
    }

    #[test]
    fn bad_config_is_a_server_error() {
        let e = OpenAiConfig::parse(r#"{"include_usage":"yes"}"#).expect_err("bad type");
        assert!(matches!(e.class, gatehouse_sdk::provider::ErrorClass::ServerError));
        let e = OpenAiConfig::parse(r#"{"max_tokens_field":"limit"}"#).expect_err("bad field");
        assert!(e.message.contains("max_tokens_field"));
    }
}
