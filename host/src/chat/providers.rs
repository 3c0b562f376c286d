//! Provider entries of the config, resolved once per config (re)load into
//! upstream targets with their secrets, and matched to adapter plugins per request.

use std::collections::HashMap;
use std::sync::Arc;

use super::attempt::{ProviderAdapter, Resolved};
use super::security::{Detector, PolicyEngine};
use super::types::{AttemptError, ModelId, Trigger, UpstreamTarget};
use crate::config::Config;

/// The plugins a request may use — provider adapters, policies and detectors —
/// from one snapshot of the plugin registry, taken when the request starts and
/// kept until it ends.
pub trait PluginSet: Send + Sync {
    fn provider(&self, plugin: &str) -> Option<Arc<dyn ProviderAdapter>>;
    /// A policy component by name.
    fn policy(&self, name: &str) -> Option<Arc<dyn PolicyEngine>>;
    /// Is a policy component of that name loaded? (No policy hash computed.)
    fn has_policy(&self, name: &str) -> bool;
    /// A shield-world component (Prompt Shield, PII/DLP) by name.
    fn detector(&self, name: &str) -> Option<Arc<dyn Detector>>;
    /// Names of the loaded policy components.
    fn policy_names(&self) -> Vec<String>;
}

/// Hands out registry snapshots.
pub trait PluginSource: Send + Sync {
    fn snapshot(&self) -> Arc<dyn PluginSet>;
}

/// Provider entries by prefix, secrets resolved.
pub type Targets = HashMap<String, UpstreamTarget>;

/// Build the targets of a config: read each secret from its environment
/// variable or file. A named but missing secret is a config error.
pub fn targets(cfg: &Config) -> anyhow::Result<Targets> {
    let mut out = HashMap::new();
    for (name, p) in &cfg.providers {
        let api_key = match (&p.api_key_env, &p.api_key_file) {
            (Some(_), Some(_)) => anyhow::bail!("providers.{name}: set api_key_env or api_key_file, not both"),
            (Some(var), None) => Some(
                std::env::var(var).map_err(|_| anyhow::anyhow!("providers.{name}.api_key_env: environment variable {var} is not set"))?,
            ),
            (None, Some(path)) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("providers.{name}.api_key_file {}: {e}", path.display()))?
                    .trim()
                    .to_owned(),
            ),
            (None, None) => None,
        };
        out.insert(
            name.clone(),
            UpstreamTarget {
                provider: name.clone(),
                plugin: p.plugin.clone(),
                base_url: p.base_url.trim_end_matches('/').to_owned(),
                api_key,
                config_json: p.config.to_string(),
            },
        );
    }
    Ok(out)
}

/// Resolve a model to its target and adapter. A provider entry whose plugin is
/// not loaded fails the attempt (server error), so the chain can fail over.
pub fn resolve(targets: &Targets, adapters: &dyn PluginSet, model: &ModelId) -> Result<Resolved, AttemptError> {
    let target = targets
        .get(model.provider())
        .ok_or_else(|| AttemptError::new(Trigger::ClientError, format!("no provider `{}` is configured", model.provider())))?;
    let adapter = adapters
        .provider(&target.plugin)
        .ok_or_else(|| AttemptError::new(Trigger::ServerError, format!("the provider adapter plugin `{}` is not loaded", target.plugin)))?;
    Ok(Resolved { target: target.clone(), adapter })
}

/// Does a key's model allow-list permit `model`? Entries are model strings or
/// patterns ending in `*`.
pub fn model_permitted(allowed: &Option<Vec<String>>, model: &ModelId) -> bool {
    match allowed {
        None => true,
        Some(list) => list.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => model.as_str().starts_with(prefix),
            None => p == model.as_str(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_lists() {
        let m = ModelId::parse("openai/gpt-4o").expect("model");
        assert!(model_permitted(&None, &m));
        assert!(model_permitted(&Some(vec!["openai/*".into()]), &m));
        assert!(model_permitted(&Some(vec!["openai/gpt-4o".into()]), &m));
        assert!(!model_permitted(&Some(vec!["openai/gpt-4o-mini".into()]), &m));
        assert!(!model_permitted(&Some(vec!["anthropic/*".into()]), &m));
        assert!(!model_permitted(&Some(vec![]), &m));
    }
}
