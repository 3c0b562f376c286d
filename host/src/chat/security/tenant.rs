//! The policy engine a request runs: a tenant's policy layered on its base,
//! and a shadow version evaluated beside the active one
//! (docs/decisions/tenant-policies.md).
//!
//! [`Tenants`] is the server's own (in the chat dependencies): the
//! registry's policies as its last sync left them, the shadows' counts and
//! the shadow queue's worker. Nothing here is process-wide, so two servers in
//! one process never share a group's policies or a shadow.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};

use super::layered::LayeredPolicy;
use super::shadow::{Shadow, ShadowQueue};
use super::{PolicyDecision, PolicyEngine, PolicyInput};
use crate::chat::adapters::plugins::PolicyPlugin;
use crate::chat::providers::PluginSet;
use crate::plugin_registry::{Policies, PublishedPolicies};
use gatehouse_store::registry::ShadowCounts;

/// Shadow evaluations waiting for the worker; beyond this a request's offer is dropped (and counted).
const QUEUE: usize = 1024;

/// A shadow with the version it counts for: (version, component SHA-256, counts).
pub type ShadowOf = (u32, String, Arc<Shadow>);

/// One server's tenant-policy state.
#[derive(Default)]
pub struct Tenants {
    /// The registry's policies, published by the server's registry sync
    /// (`crate::plugin_registry::RegistrySync`) after each read.
    pub published: Policies,
    /// The shadows by policy name: a new shadow version starts from zero, the
    /// same one keeps counting across syncs.
    shadows: Mutex<HashMap<String, ShadowOf>>,
    /// The shadow worker, started at the first shadow evaluation (`None`:
    /// it could not start, and shadows do not run).
    queue: OnceLock<Option<ShadowQueue>>,
}

impl Tenants {
    /// The registry's policies as of the last sync.
    pub fn policies(&self) -> Arc<PublishedPolicies> {
        self.published.load_full()
    }

    fn queue(&self) -> Option<&ShadowQueue> {
        self.queue
            .get_or_init(|| match ShadowQueue::start(QUEUE) {
                Ok(q) => Some(q),
                Err(e) => {
                    tracing::error!(error = %e, "cannot start the shadow policy worker; shadows do not run");
                    None
                }
            })
            .as_ref()
    }

    /// Stop the shadow worker and wait for it (server shutdown). Blocking.
    pub fn stop(&self) {
        if let Some(Some(q)) = self.queue.get() {
            q.stop();
        }
    }

    /// The counts of every shadow this host runs: (name, version, counts).
    pub fn counts(&self) -> Vec<(String, u32, ShadowCounts)> {
        let published = self.policies();
        let shadows = self.shadows.lock().unwrap_or_else(|p| p.into_inner());
        shadows
            .iter()
            .filter(|(name, (v, sha, _))| published.shadows.get(*name).is_some_and(|s| s.version == *v && s.sha256 == *sha))
            .map(|(name, (v, _, shadow))| (name.clone(), *v, shadow.stats.counts()))
            .collect()
    }

    /// The shadow of `name` this host runs, if any: (version, component SHA-256, counts).
    pub fn shadow_of(&self, name: &str) -> Option<ShadowOf> {
        let published = self.policies();
        let s = published.shadows.get(name)?;
        Some((s.version, s.sha256.clone(), self.shadow(&published, name)?))
    }

    /// The shadow of `name`, made (and its counts started) on first use.
    fn shadow(&self, published: &PublishedPolicies, name: &str) -> Option<Arc<Shadow>> {
        let loaded = published.shadows.get(name)?;
        let mut shadows = self.shadows.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((v, s, shadow)) = shadows.get(name)
            && *v == loaded.version
            && *s == loaded.sha256
        {
            return Some(shadow.clone());
        }
        // The shadow's own hash is never reported: a request's is the active version's.
        let engine = Arc::new(PolicyPlugin::new(loaded.plugin.clone(), loaded.sha256.clone()));
        let shadow = Shadow::new(name, engine);
        if let Some(saved) = &loaded.restored {
            shadow.stats.restore(saved);
        }
        shadows.insert(name.to_owned(), (loaded.version, loaded.sha256.clone(), shadow.clone()));
        Some(shadow)
    }

    /// The engine that decides a request under policy `name`: the policy
    /// itself, or for a group's policy the policy layered on the group's base
    /// (the one the operator named for the group, else `server_default`; the
    /// stricter of the two, field by field); with a shadow version, one that
    /// also hands each evaluation to the shadow queue. `Err` says why the
    /// request cannot be evaluated (a missing policy or base).
    pub fn engine(self: &Arc<Self>, adapters: &dyn PluginSet, name: &str, server_default: &str) -> Result<Arc<dyn PolicyEngine>, String> {
        let policy = adapters.policy(name).ok_or_else(|| format!("policy {name} is not loaded"))?;
        let published = self.policies();
        let base_engine = match published.owner(name) {
            None => None,
            Some(group) => {
                let base = published.base_of(group, server_default);
                let which = if published.bases.contains_key(group) { "the group's base policy" } else { "`policies.default`" };
                if base == name || published.owner(base).is_some() {
                    return Err(format!(
                        "the base policy of tenant policy {name} ({which}, {base}) is itself a tenant policy; the request was refused"
                    ));
                }
                Some(adapters.policy(base).ok_or_else(|| {
                    format!("the base policy {base} ({which}) of tenant policy {name} is not loaded; the request was refused")
                })?)
            }
        };
        let layered = |tenant: Arc<dyn PolicyEngine>| -> Arc<dyn PolicyEngine> {
            match &base_engine {
                Some(base) => Arc::new(LayeredPolicy { base: base.clone(), tenant }) as Arc<dyn PolicyEngine>,
                None => tenant,
            }
        };
        let active = layered(policy);
        match self.shadow(&published, name) {
            Some(shadow) => {
                let engine = layered(shadow.engine.clone());
                Ok(Arc::new(Shadowed { tenants: self.clone(), active, shadow, engine }))
            }
            None => Ok(active),
        }
    }
}

/// The active engine, with each decision it makes offered to the shadow.
struct Shadowed {
    tenants: Arc<Tenants>,
    active: Arc<dyn PolicyEngine>,
    shadow: Arc<Shadow>,
    /// The shadow version as this request would run it (on the same base).
    engine: Arc<dyn PolicyEngine>,
}

impl PolicyEngine for Shadowed {
    fn evaluate(&self, input: &PolicyInput<'_>) -> Result<PolicyDecision, String> {
        let decision = self.active.evaluate(input)?;
        match self.tenants.queue() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_servers_tenants_have_their_own_groups_and_shadow_worker() {
        let (a, b) = (Tenants::default(), Tenants::default());
        a.published
            .store(Arc::new(PublishedPolicies { groups: [("acme-policy".to_owned(), "grp_a".to_owned())].into(), ..Default::default() }));
        assert_eq!(a.policies().owner("acme-policy"), Some("grp_a"));
        assert!(b.policies().owner("acme-policy").is_none(), "B's keys would otherwise lose sight of its own names, or see A's");
        assert!(a.shadow_of("acme-policy").is_none() && b.shadow_of("acme-policy").is_none());
        // Each server's worker is its own, started on first use and stopped with its server.
        assert!(a.queue().is_some());
        assert!(b.queue.get().is_none(), "B started no worker");
        a.stop();
        b.stop();
    }
}
