//! The policy engine a request runs: a tenant's policy layered on its base,
//! and a shadow version evaluated beside the active one
//! (docs/decisions/tenant-policies.md).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock, Mutex};

use arc_swap::ArcSwap;

use super::layered::LayeredPolicy;
use super::shadow::{Shadow, ShadowQueue};
use super::{PolicyDecision, PolicyEngine, PolicyInput};
use crate::chat::providers::{PluginSet, PluginSource};
use crate::config::Config;
use crate::plugin_registry::PublishedPolicies;

/// Shadow evaluations waiting for the worker; beyond this a request's offer is dropped (and counted).
const QUEUE: usize = 1024;

/// One worker for the process, started at the first shadow evaluation.
fn queue() -> Option<&'static ShadowQueue> {
    static Q: LazyLock<Option<ShadowQueue>> = LazyLock::new(|| match ShadowQueue::start(QUEUE) {
        Ok(q) => Some(q),
        Err(e) => {
            tracing::error!(error = %e, "cannot start the shadow policy worker; shadows do not run");
            None
        }
    });
    Q.as_ref()
}

/// A shadow with the version it counts for: (version, component SHA-256, counts).
pub type ShadowOf = (u32, String, Arc<Shadow>);

/// The shadows by policy name: a new shadow version starts from zero, the
/// same one keeps counting across syncs.
static SHADOWS: LazyLock<Mutex<HashMap<String, ShadowOf>>> = LazyLock::new(Default::default);

/// The shadow of `name` this host runs, if any: (version, component SHA-256, counts).
pub fn shadow_of(name: &str, config: &Arc<ArcSwap<Config>>) -> Option<ShadowOf> {
    let published = crate::plugin_registry::policies();
    let (version, sha) = published.shadows.get(name)?;
    Some((*version, sha.clone(), shadow(&published, name, config)?))
}

/// The shadow of `name`, made (and its counts started) on first use.
fn shadow(published: &PublishedPolicies, name: &str, config: &Arc<ArcSwap<Config>>) -> Option<Arc<Shadow>> {
    let (version, sha) = published.shadows.get(name)?;
    let mut shadows = SHADOWS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((v, s, shadow)) = shadows.get(name)
        && v == version
        && s == sha
    {
        return Some(shadow.clone());
    }
    let runtime = published.shadow_runtime.clone()?;
    let adapters = crate::chat::adapters::plugins::RuntimeAdapters { runtime, config: config.clone() };
    let engine = adapters.snapshot().policy(name)?;
    let shadow = Shadow::new(name, engine);
    shadows.insert(name.to_owned(), (*version, sha.clone(), shadow.clone()));
    Some(shadow)
}

/// The engine that decides a request under policy `name`: the policy
/// itself, or for a group's policy the policy layered on `base` (the
/// stricter of the two, field by field); with a shadow version, one that
/// also hands each evaluation to the shadow queue. `Err` says why the
/// request cannot be evaluated (a missing policy or base).
pub fn engine(adapters: &dyn PluginSet, name: &str, base: &str, config: &Arc<ArcSwap<Config>>) -> Result<Arc<dyn PolicyEngine>, String> {
    let policy = adapters.policy(name).ok_or_else(|| format!("policy {name} is not loaded"))?;
    let published = crate::plugin_registry::policies();
    let base_engine = match published.owner(name) {
        None => None,
        Some(_) if base == name || published.owner(base).is_some() => {
            return Err(format!(
                "the base policy of tenant policy {name} (`policies.default`, {base}) is itself a tenant policy; the request was refused"
            ));
        }
        Some(_) => Some(
            adapters
                .policy(base)
                .ok_or_else(|| format!("the base policy {base} of tenant policy {name} is not loaded; the request was refused"))?,
        ),
    };
    let layered = |tenant: Arc<dyn PolicyEngine>| -> Arc<dyn PolicyEngine> {
        match &base_engine {
            Some(base) => Arc::new(LayeredPolicy { base: base.clone(), tenant }) as Arc<dyn PolicyEngine>,
            None => tenant,
        }
    };
    let active = layered(policy);
    match shadow(&published, name, config) {
        Some(shadow) => {
            let engine = layered(shadow.engine.clone());
            Ok(Arc::new(Shadowed { active, shadow, engine }))
        }
        None => Ok(active),
    }
}

/// The active engine, with each decision it makes offered to the shadow.
struct Shadowed {
    active: Arc<dyn PolicyEngine>,
    shadow: Arc<Shadow>,
    /// The shadow version as this request would run it (on the same base).
    engine: Arc<dyn PolicyEngine>,
}

impl PolicyEngine for Shadowed {
    fn evaluate(&self, input: &PolicyInput<'_>) -> Result<PolicyDecision, String> {
        let decision = self.active.evaluate(input)?;
        match queue() {
            Some(q) => {
                q.offer_with(&self.shadow, self.engine.clone(), input, &decision);
            }
            None => {
                self.shadow.stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(decision)
    }

    fn hash(&self) -> String {
        self.active.hash()
    }
}
