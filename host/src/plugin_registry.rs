//! The plugin registry's side of this host: the published plugins loaded
//! into the plugin runtime and kept in line with the store.

use std::sync::Arc;
use std::time::Duration;

use gatehouse_store::registry::{PluginRegistry, PluginState};

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
}

impl RegistrySync {
    /// Load the active set now (when the runtime allows blocking), then follow changes.
    pub fn start(registry: Arc<dyn PluginRegistry>, runtime: Arc<gatehouse_plugin_host::PluginRuntime>) -> Arc<RegistrySync> {
        let sync = Arc::new(RegistrySync { registry, runtime, running: Default::default() });
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
            current.into_iter().filter(|p| p.state == PluginState::Active).map(|p| (p.name, p.version, p.sha256)).collect();
        let wanted = self.runtime.wanted(&active);
        let mut versions = Vec::with_capacity(active.len());
        for (name, version, sha256) in active {
            let bytes = if wanted.contains(&name) { self.registry.component(&name, version).await? } else { None };
            versions.push(gatehouse_plugin_host::ActiveVersion { name, version, sha256, bytes });
        }
        let runtime = self.runtime.clone();
        tokio::task::spawn_blocking(move || runtime.sync_published(versions))
            .await
            .map_err(|e| gatehouse_store::StoreError::Backend(e.to_string()))
    }
}
