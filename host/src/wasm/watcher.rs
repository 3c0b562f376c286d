//! Hot reload: watch the plugin folder with `notify`, debounce, rescan off
//! the request path (on the blocking pool), swap the registry.

use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};

use super::PluginRuntime;

pub fn spawn(rt: Arc<PluginRuntime>, debounce: Duration) -> anyhow::Result<()> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(64);
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res {
            // Temporary names and dot-files are ignored; a rename into place is a create/modify of the final name.
            let relevant = ev
                .paths
                .iter()
                .any(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| !n.starts_with('.') && n.ends_with(".wasm")));
            if relevant {
                let _ = tx.try_send(());
            }
        }
    })?;
    watcher.watch(rt.watched_dir(), RecursiveMode::NonRecursive)?;
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
