//! The plugin registry's side of this host: the published plugins loaded
//! into the plugin runtime and kept in line with the store, and what
//! requests need to know of the registry's policies ([`PublishedPolicies`]):
//! which names belong to a group, each group's base policy, and the shadow
//! versions loaded beside the serving ones.
//!
//! All of it is this server's own: [`RegistrySync`] writes the policies into
//! a handle the server hands it (the chat side reads the same handle), never
//! into a process-wide global, so two servers in one process (tests, an
//! embedder) each see their own registry's groups and shadows.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::shutdown::stopped;
use arc_swap::ArcSwap;
use gatehouse_plugin_host::{Plugin, PluginRuntime};
use gatehouse_store::registry::{PluginRegistry, PluginState, PublishedPlugin, ShadowCounts};

/// A shadow version loaded beside the serving snapshot.
pub struct ShadowVersion {
    pub version: u32,
    /// The component's SHA-256.
    pub sha256: String,
    /// Loaded with [`PluginRuntime::load_detached`]: the serving runtime's
    /// engine, checks and limits, outside its snapshot.
    pub plugin: Arc<Plugin>,
    /// What this host had counted for it when it last saved (before a restart).
    pub restored: Option<ShadowCounts>,
}

/// The registry's policies as a request needs them, replaced whole after
/// every sync (docs/decisions/tenant-policies.md).
#[derive(Default)]
pub struct PublishedPolicies {
    /// A tenant policy's name → the group it is registered to.
    pub groups: HashMap<String, String>,
    /// A group → the base policy the operator named for it (absent: the
    /// server default, `policies.default`).
    pub bases: HashMap<String, String>,
    /// A policy's name → its shadow version, where this host loaded it.
    pub shadows: HashMap<String, ShadowVersion>,
    /// Shadow versions this host refused: name → (version, why). Not tried
    /// again until another version is the shadow.
    pub refused_shadows: HashMap<String, (u32, String)>,
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

    /// The base policy of `group`'s policies: the one the operator named, or `server_default`.
    pub fn base_of<'a>(&'a self, group: &str, server_default: &'a str) -> &'a str {
        self.bases.get(group).map_or(server_default, String::as_str)
    }
}

/// The handle [`RegistrySync`] publishes into and requests read from.
pub type Policies = Arc<ArcSwap<PublishedPolicies>>;

/// Keeps the plugin runtime's published layer in line with the plugin
/// registry: once at start, then on every change the registry announces
/// (this host's writes, and with PostgreSQL any host's), and after a failed
/// read, a second later. Each host compiles and checks what it loads itself,
/// with the same audit records as a file drop (`plugin_loaded`,
/// `plugin_reloaded`, `plugin_failed`, `plugin_removed`).
pub struct RegistrySync {
    pub registry: Arc<dyn PluginRegistry>,
    runtime: Arc<PluginRuntime>,
    /// What requests read of the registry's policies (the server's own handle).
    policies: Policies,
    /// This host in saved shadow counts (its receipt-signing key id).
    host: String,
    /// One sync at a time (the follower's and a publishing request's).
    running: tokio::sync::Mutex<()>,
    /// Tells the follower to end (shutdown).
    stop: tokio::sync::watch::Sender<bool>,
    follower: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl RegistrySync {
    /// Load the active set now (when the runtime allows blocking), then follow
    /// changes until [`RegistrySync::shutdown`]. The registry's policies are
    /// published into `policies`; `host` names this host's saved shadow counts.
    pub fn start(registry: Arc<dyn PluginRegistry>, runtime: Arc<PluginRuntime>, policies: Policies, host: String) -> Arc<RegistrySync> {
        let sync = Arc::new(RegistrySync {
            registry,
            runtime,
            policies,
            host,
            running: Default::default(),
            stop: tokio::sync::watch::channel(false).0,
            follower: Mutex::new(None),
        });
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
        let mut stop = sync.stop.subscribe();
        #[expect(
            clippy::disallowed_methods,
            reason = "joined by RegistrySync::shutdown; also ends when the registry's announcements end or the state is dropped"
        )]
        let task = tokio::spawn(async move {
            let mut pending = true;
            loop {
                if pending {
                    let Some(sync) = follower.upgrade() else { return };
                    pending = tokio::select! {
                        done = sync.sync() => match done {
                            Ok(()) => false,
                            Err(e) => {
                                tracing::error!(error = %e, "reading the plugin registry failed; retrying in a second");
                                true
                            }
                        },
                        () = stopped(&mut stop) => return,
                    };
                }
                let wait = if pending { Duration::from_secs(1) } else { Duration::from_secs(3600) };
                tokio::select! {
                    changed = tokio::time::timeout(wait, changes.changed()) => match changed {
                        Ok(Ok(())) => pending = true,
                        Ok(Err(_)) => return,
                        // Hourly, a read of its own: a safety net should an announcement be lost.
                        Err(_) => pending = true,
                    },
                    () = stopped(&mut stop) => return,
                }
            }
        });
        *sync.follower.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        sync
    }

    /// Stop following the registry and wait for the follower (shutdown: no
    /// registry read may run once the store is closing).
    pub async fn shutdown(&self) {
        let _ = self.stop.send(true);
        let task = self.follower.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task
            && let Err(e) = task.await
        {
            tracing::error!(error = %e, "the plugin registry follower failed");
        }
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
        self.sync_policies(&current).await
    }

    /// Load the shadow versions of policies beside the serving snapshot and
    /// publish what requests need ([`PublishedPolicies`]). A shadow already
    /// loaded (same version and hash) is kept, so its compiled code and its
    /// counts carry over; one this host refused is not tried again.
    async fn sync_policies(&self, current: &[PublishedPlugin]) -> gatehouse_store::StoreResult<()> {
        let groups = current.iter().filter_map(|p| Some((p.name.clone(), p.group_id.clone()?))).collect();
        let bases = self.registry.group_bases().await?.into_iter().collect();
        let before = self.policies.load_full();
        let mut shadows = HashMap::new();
        let mut refused_shadows = HashMap::new();
        for p in current.iter().filter(|p| p.state == PluginState::Shadow && p.kind == "policy") {
            if let Some(s) = before.shadows.get(&p.name)
                && s.version == p.version
                && s.sha256 == p.sha256
            {
                let kept = ShadowVersion { version: s.version, sha256: s.sha256.clone(), plugin: s.plugin.clone(), restored: s.restored };
                shadows.insert(p.name.clone(), kept);
                continue;
            }
            if let Some((v, why)) = before.refused_shadows.get(&p.name)
                && *v == p.version
            {
                refused_shadows.insert(p.name.clone(), (*v, why.clone()));
                continue;
            }
            let Some(bytes) = self.registry.component(&p.name, p.version).await? else { continue };
            let (runtime, name, version) = (self.runtime.clone(), p.name.clone(), p.version);
            let loaded = tokio::task::spawn_blocking(move || runtime.load_detached(&name, version, &bytes))
                .await
                .map_err(|e| gatehouse_store::StoreError::Backend(e.to_string()))?;
            match loaded {
                Ok(plugin) => {
                    tracing::info!(plugin = %p.name, version = p.version, "shadow version loaded beside the serving one");
                    // Counts this host saved before a restart go on from where they were.
                    let saved = self.registry.shadow_counts(&p.name, p.version).await?;
                    let restored = saved.into_iter().find(|h| h.host == self.host).map(|h| h.counts);
                    shadows.insert(p.name.clone(), ShadowVersion { version: p.version, sha256: p.sha256.clone(), plugin, restored });
                }
                Err(why) => {
                    let why = gatehouse_plugin_host::folder::shown_text(&why);
                    tracing::error!(plugin = %p.name, version = p.version, error = %why, "shadow version not loaded; no shadow runs for it here");
                    refused_shadows.insert(p.name.clone(), (p.version, why));
                }
            }
        }
        self.policies.store(Arc::new(PublishedPolicies { groups, bases, shadows, refused_shadows }));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_store::redb::registry::RedbRegistry;
    use gatehouse_store::registry::NewVersion;

    #[test]
    fn a_groups_policy_is_visible_to_that_groups_keys_only() {
        let p = PublishedPolicies { groups: [("acme-policy".to_owned(), "grp_a".to_owned())].into(), ..Default::default() };
        assert!(p.visible("acme-policy", Some("grp_a")));
        assert!(!p.visible("acme-policy", Some("grp_b")), "another group's key");
        assert!(!p.visible("acme-policy", None), "a key of no group, an admin's included");
        assert!(p.visible("public", None) && p.visible("public", Some("grp_b")), "the operator's policies are everyone's");
        assert_eq!(p.owner("acme-policy"), Some("grp_a"));
    }

    #[test]
    fn a_group_without_a_named_base_layers_on_the_server_default() {
        let p = PublishedPolicies { bases: [("grp_a".to_owned(), "strict-floor".to_owned())].into(), ..Default::default() };
        assert_eq!(p.base_of("grp_a", "internal"), "strict-floor");
        assert_eq!(p.base_of("grp_b", "internal"), "internal");
    }

    /// One server's registry sync: its own registry file, runtime and policies.
    fn server(dir: &std::path::Path) -> (Arc<RegistrySync>, Policies) {
        let cfg = gatehouse_plugin_host::PluginsConfig { cache_dir: Some(dir.join("cache")), ..Default::default() };
        let runtime = PluginRuntime::start(&cfg, dir, &[], Arc::new(gatehouse_plugin_host::LogSink)).expect("runtime");
        let registry = Arc::new(RedbRegistry::open(dir).expect("registry"));
        let policies = Policies::default();
        (RegistrySync::start(registry, runtime, policies.clone(), "test-host".into()), policies)
    }

    fn tenant_version(name: &str, group: &str, state: PluginState) -> NewVersion {
        // Not a component: the registry stores what it is given, the runtime
        // refuses to load it; which names are whose comes from the registry alone.
        let bytes = format!("not a component {name}").into_bytes();
        NewVersion {
            name: name.into(),
            kind: "policy".into(),
            plugin_version: "1.0.0".into(),
            sha256: gatehouse_plugin_host::sha256_hex(&bytes),
            checks: Vec::new(),
            uploaded_by: None,
            group_id: Some(group.into()),
            state,
            bytes,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_servers_in_one_process_see_only_their_own_groups_policies_bases_and_shadows() {
        let (dir_a, dir_b) = (tempfile::tempdir().expect("tmp"), tempfile::tempdir().expect("tmp"));
        let (a, seen_by_a) = server(dir_a.path());
        let (b, seen_by_b) = server(dir_b.path());
        a.registry.publish(tenant_version("acme-policy", "grp_a", PluginState::Active)).await.expect("publish");
        a.registry.publish(tenant_version("acme-policy", "grp_a", PluginState::Shadow)).await.expect("shadow");
        a.registry.set_group_base("grp_a", Some("internal")).await.expect("base");
        b.registry.publish(tenant_version("beta-policy", "grp_b", PluginState::Active)).await.expect("publish");
        // Each syncs after the other wrote: a process-wide state would now hold only the last.
        a.sync().await.expect("sync a");
        b.sync().await.expect("sync b");
        let (pa, pb) = (seen_by_a.load_full(), seen_by_b.load_full());
        assert_eq!(pa.owner("acme-policy"), Some("grp_a"));
        assert!(pa.visible("beta-policy", None), "server A has no beta-policy of a group");
        assert_eq!(pb.owner("beta-policy"), Some("grp_b"));
        assert!(pb.owner("acme-policy").is_none() && pb.bases.is_empty(), "server B knows nothing of A's group");
        assert_eq!(pa.base_of("grp_a", "public"), "internal");
        assert_eq!(pa.refused_shadows.get("acme-policy").map(|r| r.0), Some(2), "A tried its shadow (and refused the bytes)");
        assert!(pb.refused_shadows.is_empty() && pb.shadows.is_empty(), "B has no shadow");
        a.shutdown().await;
        b.shutdown().await;
    }
}
