//! Config reload: on SIGHUP or when the config file changes, load and check
//! the new config, then swap it in whole. A config that fails to load (or
//! whose provider secrets cannot be read) keeps the old one serving; either
//! way the attempt is logged and audited (`config_management`).
//!
//! Reloaded: providers (base URLs, secrets from env or files, plugins, the
//! models that name metric series), the metrics scrape key,
//! knowledge bases, policies, limits, chat timeouts, webhook settings, and
//! plugin grants and limits (outbound hosts, read-only folders, call timeout,
//! memory cap up to its value at start), which apply from each plugin's next call,
//! and the watched plugin folder's rules (`max_component_mb`,
//! `allow_policy_overrides`), applied by a rescan of the folder.
//! `listen` and `data_dir` need a restart; a change to them is reported and ignored.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};

use crate::app::AppState;
use crate::config::Config;
use gatehouse_store::audit::{Audit, category, kind, outcome};
use gatehouse_store::model::Severity;

/// Load, check and swap. Returns whether the new config is serving.
pub async fn reload(app: &AppState, path: &Path, trigger: &str) -> bool {
    let result = Config::load(Some(path)).map_err(|e| e.to_string()).and_then(|cfg| {
        let targets = crate::chat::providers::targets(&cfg).map_err(|e| format!("{e:#}"))?;
        cfg.plugins.check_secrets()?;
        Ok((cfg, targets))
    });
    let (ok, description, severity) = match result {
        Ok((mut cfg, targets)) => {
            let old = app.config();
            if cfg.listen != old.listen || cfg.data_dir != old.data_dir {
                tracing::warn!("`listen` and `data_dir` changes need a restart; keeping the running values");
                cfg.listen = old.listen;
                cfg.data_dir.clone_from(&old.data_dir);
            }
            drop(old);
            // Logs each plugin whose grants changed.
            app.plugins.update_config(&cfg.plugins);
            crate::metrics::get().configure_models(&cfg);
            // The watched folder's rules (size cap, policy overrides) may have changed.
            let plugins = app.plugins.clone();
            tokio::task::spawn_blocking(move || plugins.rescan());
            app.config.store(Arc::new(cfg));
            app.chat.targets.store(Arc::new(targets));
            tracing::info!(%trigger, path = %path.display(), "config reloaded");
            (true, format!("Config reloaded from {} ({trigger})", path.display()), Severity::Info)
        }
        Err(e) => {
            tracing::error!(%trigger, error = %e, "config reload failed; the previous config keeps serving");
            (false, format!("Config reload failed ({trigger}): {e}"), Severity::Error)
        }
    };
    let audit = Audit::new(kind::CONFIG_MANAGEMENT, category::SYSTEM_INTEGRITY, description)
        .severity(severity)
        .outcome(if ok { outcome::SUCCESS } else { outcome::FAILURE })
        .meta("operation", "reload_config")
        .meta("trigger", trigger)
        .build();
    if let Err(e) = app.store.append_audit(vec![audit]).await {
        tracing::error!(error = %e, "auditing a config reload failed");
    }
    ok
}

/// Reload on SIGHUP and on changes to the file (debounced), until the process ends.
pub fn spawn(app: AppState, path: PathBuf) -> anyhow::Result<()> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<&'static str>(16);
    #[cfg(unix)]
    {
        let tx = tx.clone();
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        #[expect(clippy::disallowed_methods, reason = "lives as long as the process: it only forwards SIGHUP to the reload loop")]
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                let _ = tx.send("SIGHUP").await;
            }
        });
    }
    // Watch the directory, not the file: editors and atomic writers replace the file.
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let name = path.file_name().map(|n| n.to_os_string());
    let watch_tx = tx.clone();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res {
            let touches = ev.paths.iter().any(|p| p.file_name().map(|n| n.to_os_string()) == name);
            if touches && (ev.kind.is_modify() || ev.kind.is_create()) {
                let _ = watch_tx.try_send("file change");
            }
        }
    })?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;
    #[expect(
        clippy::disallowed_methods,
        reason = "lives as long as the process: a reload swaps the config and records its audit entry through the store's own commit"
    )]
    tokio::spawn(async move {
        // The watcher lives as long as this task.
        let _watcher = watcher;
        while let Some(trigger) = rx.recv().await {
            // Debounce: a save is often several events.
            tokio::time::sleep(Duration::from_millis(200)).await;
            while rx.try_recv().is_ok() {}
            reload(&app, &path, trigger).await;
        }
    });
    Ok(())
}
