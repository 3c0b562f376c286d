//! Building the wasmtime `Store` of a call: the grants, the mounts, the
//! memory cap and the CPU deadline.

use super::*;

impl Plugin {
    pub(super) fn store(&self) -> Result<Store<CallState>, PluginError> {
        self.store_with(&[])
    }

    /// A store with the plugin's grants plus `mounts` (host folder, guest path), read-only.
    pub(super) fn store_with(&self, mounts: &[(&Path, &str)]) -> Result<Store<CallState>, PluginError> {
        let grants = self.grants.load();
        // With folders to mount the context is built now, so a folder that
        // cannot be opened fails this call rather than a later WASI call.
        let wasi = if grants.read_only_dirs.is_empty() && mounts.is_empty() && grants.cache.is_none() {
            None
        } else {
            let mut b = WasiCtxBuilder::new();
            let granted = grants.read_only_dirs.iter().map(|dir| {
                let guest = dir.file_name().map(|n| format!("/{}", n.to_string_lossy())).unwrap_or_else(|| "/data".into());
                (dir.as_path(), guest)
            });
            for (dir, guest) in granted.chain(mounts.iter().map(|(d, g)| (*d, (*g).to_owned()))) {
                b.preopened_dir(dir, &guest, FsPerms::ReadOnly).map_err(|e| PluginError::Failed {
                    plugin: self.name.clone(),
                    detail: format!("cannot mount {}: {e}", dir.display()),
                })?;
            }
            if let Some(cache) = &grants.cache {
                b.preopened_dir(&cache.host_path, crate::cache_folder::GUEST_PATH, FsPerms::ReadWrite).map_err(|e| {
                    PluginError::Failed { plugin: self.name.clone(), detail: format!("cannot mount {}: {e}", cache.host_path.display()) }
                })?;
            }
            let stderr = crate::stderr::GuestStderr::default();
            b.stderr(stderr.clone());
            Some((b.build(), stderr))
        };
        let state =
            CallState::new(self.name.as_str().into(), wasi, grants.memory_bytes, grants.outbound.clone()).with_cache(grants.cache.clone());
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        set_deadline(&mut store, grants.deadline_ticks);
        Ok(store)
    }
}

/// Give the call `ticks` epoch ticks of CPU time: it yields at every tick
/// (so [`drive`] can move it off an async worker) and traps with
/// `Trap::Interrupt` when the ticks are used up.
pub(super) fn set_deadline(store: &mut Store<CallState>, ticks: u64) {
    let mut left = ticks.max(1);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        left = left.saturating_sub(1);
        Ok(if left == 0 { UpdateDeadline::Interrupt } else { UpdateDeadline::Yield(1) })
    });
}
