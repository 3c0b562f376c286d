//! Hot reload: watch the plugin folder with `notify`, debounce, rescan off
//! the request path (on the blocking pool), swap the registry.
//!
//! Only changes count. Access events (a file opened, read or closed without
//! writing) are ignored: the rescan's own reads produce them, and reacting to
//! them rescanned the folder for ever, idle or not. Temporary names (`*.tmp`,
//! dot-files) are ignored; any other name counts, so a near miss (`*.WASM`)
//! is reported rather than silently skipped.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};

use super::PluginRuntime;

/// Whether an event can change what the folder serves.
fn relevant(ev: &notify::Event) -> bool {
    if ev.need_rescan() {
        return true;
    }
    if matches!(ev.kind, EventKind::Access(_)) {
        return false;
    }
    let temporary =
        |p: &Path| p.file_name().is_none_or(|n| n.as_encoded_bytes().starts_with(b".") || n.as_encoded_bytes().ends_with(b".tmp"));
    ev.paths.iter().any(|p| !temporary(p))
}

pub fn spawn(rt: Arc<PluginRuntime>, debounce: Duration) -> anyhow::Result<()> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(64);
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res
            && relevant(&ev)
        {
            let _ = tx.try_send(());
        }
    })?;
    watcher.watch(rt.watched_dir(), RecursiveMode::NonRecursive)?;
    #[expect(clippy::disallowed_methods, reason = "lives as long as the process: it owns the folder watcher and only triggers rescans")]
    tokio::spawn(async move {
        let _watcher = watcher;
        while rx.recv().await.is_some() {
            tokio::time::sleep(debounce).await;
            while rx.try_recv().is_ok() {}
            let rt = rt.clone();
            if let Err(e) = tokio::task::spawn_blocking(move || rt.rescan()).await {
                tracing::error!(error = %e, "plugin rescan failed");
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RenameMode};

    use super::*;

    fn ev(kind: EventKind, names: &[&str]) -> notify::Event {
        names.iter().fold(notify::Event::new(kind), |e, n| e.add_path(Path::new("/plugins").join(n)))
    }

    #[test]
    fn reads_and_temporary_names_are_no_change_but_near_misses_are() {
        assert!(!relevant(&ev(EventKind::Access(AccessKind::Open(AccessMode::Read)), &["a.wasm"])), "the rescan's own open");
        assert!(!relevant(&ev(EventKind::Access(AccessKind::Close(AccessMode::Read)), &["a.wasm"])));
        assert!(!relevant(&ev(EventKind::Create(CreateKind::File), &[".a.wasm.tmp"])));
        assert!(!relevant(&ev(EventKind::Modify(ModifyKind::Any), &["a.wasm.tmp"])));
        assert!(relevant(&ev(EventKind::Modify(ModifyKind::Name(RenameMode::Both)), &[".a.wasm.tmp", "a.wasm"])), "a rename into place");
        assert!(relevant(&ev(EventKind::Create(CreateKind::File), &["A.WASM"])));
        assert!(relevant(&ev(EventKind::Remove(notify::event::RemoveKind::File), &["a.wasm"])));
    }
}
