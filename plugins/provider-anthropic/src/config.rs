//! The plugin's own config: the `config` table of the provider entry, handed
//! over as a JSON object in `upstream.config-json`.

use serde::Deserialize;

use crate::errors::adapter_fault;
use gatehouse_sdk::provider::ProviderError;

/// The API version this adapter speaks.
pub const DEFAULT_VERSION: &str = "2023-06-01";

/// Options of the Anthropic adapter. Unknown keys are ignored.
///
/// ```toml
/// [providers.anthropic.config]
/// anthropic_beta = "prompt-caching-2024-07-31"
/// extra_headers = { "x-team" = "search" }
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct AnthropicConfig {
    /// `anthropic-version` header; default `2023-06-01`.
    pub anthropic_version: String,
    /// `anthropic-beta` header, sent when set.
    pub anthropic_beta: Option<String>,
    /// Headers added to every request. They cannot replace `x-api-key`,
    /// `anthropic-version` or `content-type`.
    pub extra_headers: std::collections::BTreeMap<String, String>,
}

impl Default for AnthropicConfig {
    fn default() -> Self {
        Self { anthropic_version: DEFAULT_VERSION.to_string(), anthropic_beta: None, extra_headers: Default::default() }
    }
}

impl AnthropicConfig {
    /// Parse `config-json`; `""` and `null` mean the defaults. A broken config
    /// is an operator error on this provider entry, reported as a
    /// server-error so that the chain can move on to another provider.
    pub fn parse(config_json: &str) -> Result<Self, ProviderError> {
        let trimmed = config_json.trim();
        if trimmed.is_empty() || trimmed == "null" {
            return Ok(Self::default());
        }
        let cfg: Self = serde_json::from_str(trimmed).map_err(|e| adapter_fault(format!("invalid provider-anthropic config: {e}")))?;
        if cfg.anthropic_version.trim().is_empty() {
            return Err(adapter_fault("invalid provider-anthropic config: anthropic_version is empty".to_string()));
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::class_name;

    #[test]
    fn defaults() {
        for s in ["", "null", "{}"] {
            let c = AnthropicConfig::parse(s).expect("defaults");
            assert_eq!(c.anthropic_version, "2023-06-01");
            assert!(c.anthropic_beta.is_none());
        }
    }

    #[test]
    fn bad_config_is_a_server_error() {
        let e = AnthropicConfig::parse(r#"{"anthropic_version": 5}"#).expect_err("bad");
        assert_eq!(class_name(e.class), "server-error");
        assert!(AnthropicConfig::parse(r#"{"anthropic_version": " "}"#).is_err());
    }
}
