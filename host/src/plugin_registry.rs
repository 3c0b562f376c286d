//! The plugin registry's side of this host: the published plugins loaded
//! into the plugin runtime and kept in line with the store, and what
//! requests need to know of the registry's policies ([`policies`]): which
//! names belong to a group, and which have a shadow version.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use gatehouse_plugin_host::{PluginRuntime, PluginsConfig};
use gatehouse_store::registry::{PluginRegistry, PluginState, PublishedPlugin};

/// The registry's policies as a request needs them, replaced whole after
/// every sync (docs/decisions/tenant-policies.md).
#[derive(Default)]
pub struct PublishedPolicies {
    /// A tenant policy's name → the group it is registered to.
    pub groups: HashMap<String, String>,
    /// A policy's name → its shadow version (version, component SHA-256),
    /// loaded in `shadow_runtime`.
    pub shadows: HashMap<String, (u32, String)>,
    /// Where the shadow versions are loaded: a runtime of their own, so a
    /// name's shadow never takes its place in the serving snapshot.
    pub shadow_runtime: Option<Arc<PluginRuntime>>,
}

impl PublishedPolicies {
    /// The group a policy name is registered to (`None`: the operator's).
    pub fn owner(&self, name: &str) -> Option<&str> {
        self.groups.get(name).map(String::as_str)
    }

    /// May a key of `group` (none: a key without a group) run `name`? A
    /// group's policy serves only that group's keys.
    pub fn visible(&self, name: &str, group: Option<&str>) -> bool {
        self.owner(name).is_none_or(|g| group == Some(g))
    }
}

/// One per process, as the host serves one registry (a second server in the
/// same process, as in some unit tests, would share it).
static POLICIES: LazyLock<ArcSwap<PublishedPolicies>> = LazyLock::new(Default::default);

/// The registry's policies as of the last sync.
pub fn policies() -> Arc<PublishedPolicies> {
    POLICIES.load_full()
}

/// Keeps the plugin runtime's published layer in line with the plugin
/// registry: once at start, then on every change the registry announces
/// (this host's writes, and with PostgreSQL any host's), and after a failed
/// read, a second later. Each host compiles and checks what it loads itself,
/// with the same audit records as a file drop (`plugin_loaded`,
/// `plugin_reloaded`, `plugin_failed`, `plugin_removed`).
pub struct RegistrySync {
    pub registry: Arc<dyn PluginRegistry>,
    runtime: Arc<gatehouse_plugin_host::PluginRuntime>,
    /// One sync at a time (the follower's and a publishing request's).
    running: tokio::sync::Mutex<()>,
    /// Started at the first shadow version (a second engine costs threads and address space).
    shadow_runtime: Mutex<Option<Arc<PluginRuntime>>>,
}

impl RegistrySync {
    /// Load the active set now (when the runtime allows blocking), then follow changes.
    pub fn start(registry: Arc<dyn PluginRegistry>, runtime: Arc<gatehouse_plugin_host::PluginRuntime>) -> Arc<RegistrySync> {
        let sync = Arc::new(RegistrySync { registry, runtime, running: Default::default(), shadow_runtime: Default::default() });
        let mut changes = sync.registry.subscribe();
        changes.borrow_and_update();
        let handle = tokio::runtime::Handle::current();
        if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
            let first = tokio::task::block_in_place(|| handle.block_on(sync.sync()));
            if let Err(e) = first {
                tracing::error!(error = %e, "reading the plugin registry at start failed; retrying");
            }
        }
        let follower = Arc::downgrade(&sync);
        #[expect(clippy::disallowed_methods, reason = "ends when the registry's announcements end or the state is dropped")]
        tokio::spawn(async move {
            let mut pending = true;
            loop {
                if pending {
                    let Some(sync) = follower.upgrade() else { return };
                    pending = match sync.sync().await {
                        Ok(()) => false,
                        Err(e) => {
                            tracing::error!(error = %e, "reading the plugin registry failed; retrying in a second");
                            true
                        }
                    };
                }
                let wait = if pending { Duration::from_secs(1) } else { Duration::from_secs(3600) };
                match tokio::time::timeout(wait, changes.changed()).await {
                    Ok(Ok(())) => pending = true,
                    Ok(Err(_)) => return,
                    // Hourly, a read of its own: a safety net should an announcement be lost.
                    Err(_) => pending = true,
                }
            }
        });
        sync
    }

    /// Read the registry's active set, fetch what this host has not loaded,
    /// and hand it to the runtime (which compiles off the async workers).
    pub async fn sync(&self) -> gatehouse_store::StoreResult<()> {
        let _one = self.running.lock().await;
        let current = self.registry.current().await?;
        let active: Vec<(String, u32, String)> =
            current.iter().filter(|p| p.state == PluginState::Active).map(|p| (p.name.clone(), p.version, p.sha256.clone())).collect();
        let wanted = self.runtime.wanted(&active);
        let mut versions = Vec::with_capacity(active.len());
        for (name, version, sha256) in active {
            let bytes = if wanted.contains(&name) { self.registry.component(&name, version).await? } else { None };
            versions.push(gatehouse_plugin_host::ActiveVersion { name, version, sha256, bytes });
        }
        let runtime = self.runtime.clone();
        tokio::task::spawn_blocking(move || runtime.sync_published(versions))
            .await
            .map_err(|e| gatehouse_store::StoreError::Backend(e.to_string()))?;
        self.sync_shadows(&current).await
    }

    /// Load the shadow versions of policies into the shadow runtime and
    /// publish what requests need ([`policies`]).
    async fn sync_shadows(&self, current: &[PublishedPlugin]) -> gatehouse_store::StoreResult<()> {
        let groups = current.iter().filter_map(|p| Some((p.name.clone(), p.group_id.clone()?))).collect();
        let shadow: Vec<(String, u32, String)> = current
            .iter()
            .filter(|p| p.state == PluginState::Shadow && p.kind == "policy")
            .map(|p| (p.name.clone(), p.version, p.sha256.clone()))
            .collect();
        let runtime = if shadow.is_empty() { self.shadow_runtime.lock().ok().and_then(|r| r.clone()) } else { self.shadow_runtime() };
        let mut shadows = HashMap::new();
        if let Some(rt) = &runtime {
            let wanted = rt.wanted(&shadow);
            let mut versions = Vec::with_capacity(shadow.len());
            for (name, version, sha256) in &shadow {
                let bytes = if wanted.contains(name) { self.registry.component(name, *version).await? } else { None };
                versions.push(gatehouse_plugin_host::ActiveVersion {
                    name: name.clone(),
                    version: *version,
                    sha256: sha256.clone(),
                    bytes,
                });
            }
            let loader = rt.clone();
            tokio::task::spawn_blocking(move || loader.sync_published(versions))
                .await
                .map_err(|e| gatehouse_store::StoreError::Backend(e.to_string()))?;
            let loaded = rt.snapshot();
            for (name, version, sha256) in shadow {
                let serves = loaded
                    .get(&name)
                    .is_some_and(|p| matches!(p.source, gatehouse_plugin_host::Source::Published { version: v } if v == version));
                if serves {
                    shadows.insert(name, (version, sha256));
                }
            }
        }
        POLICIES.store(Arc::new(PublishedPolicies { groups, shadows, shadow_runtime: runtime }));
        Ok(())
    }

    /// The shadow versions' runtime, started on first use: the serving
    /// runtime's engine settings at their defaults, no bundled plugins, and a
    /// watched folder that stays empty. `None` (logged) if it cannot start:
    /// shadows then do not run, which no request notices.
    fn shadow_runtime(&self) -> Option<Arc<PluginRuntime>> {
        let mut slot = self.shadow_runtime.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            let home = std::env::temp_dir().join(format!("gatehouse-shadow-{}", std::process::id()));
            let cfg = PluginsConfig { dir: Some(home.join("plugins")), ..PluginsConfig::default() };
            match PluginRuntime::start(&cfg, &home, &[], Arc::new(gatehouse_plugin_host::LogSink)) {
                Ok(rt) => *slot = Some(rt),
                Err(e) => tracing::error!(error = %e, "cannot start the runtime of shadow policy versions; shadows do not run"),
            }
        }
        slot.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_groups_policy_is_visible_to_that_groups_keys_only() {
        let p = PublishedPolicies { groups: [("acme-policy".to_owned(), "grp_a".to_owned())].into(), ..Default::default() };
        assert!(p.visible("acme-policy", Some("grp_a")));
        assert!(!p.visible("acme-policy", Some("grp_b")), "another group's key");
        assert!(!p.visible("acme-policy", None), "a key of no group, an admin's included");
        assert!(p.visible("public", None) && p.visible("public", Some("grp_b")), "the operator's policies are everyone's");
        assert_eq!(p.owner("acme-policy"), Some("grp_a"));
    }
}
