//! Start-up, serving and graceful shutdown.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::net::TcpListener;

use crate::app::AppState;
use crate::bootstrap::{self, Bootstrap};
use crate::config::Config;
use crate::store::redb::RedbStore;

/// Run the server until SIGTERM or SIGINT, then drain and flush.
pub async fn run(config: Config, config_path: Option<std::path::PathBuf>) -> anyhow::Result<()> {
    let started = Instant::now();
    let store = Arc::new(RedbStore::open(&config.data_dir, config.durable_writes)?);
    match bootstrap::ensure_admin(store.as_ref()).await? {
        Bootstrap::Generated(secret) => {
            // Shown once, on the terminal only: never through the logger.
            eprintln!(
                "\n  First start: created an admin API key. It is shown only this once:\n\n      {secret}\n\n  \
                 Keep it safe; create more keys with POST /api/admin/keys.\n"
            );
        }
        Bootstrap::FromEnvironment | Bootstrap::AlreadyInitialised => {}
    }
    let listener = TcpListener::bind(config.listen).await.map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
    let addr = listener.local_addr()?;
    let grace = Duration::from_millis(config.server.shutdown_grace_ms);
    let store_dyn: Arc<dyn crate::store::Store> = store.clone();
    let targets = crate::chat::providers::targets(&config)?;
    let transport = crate::chat::transport::Transport::new(&config.upstream)?;
    let breakers =
        crate::chat::breaker::Breakers::new(config.upstream.breaker_failures, Duration::from_millis(config.upstream.breaker_cooldown_ms));
    let plugins =
        crate::wasm::PluginRuntime::start(&config.plugins, &config.data_dir, crate::wasm::audit_sink::AuditSink::start(store.clone()))?;
    let config_swap = Arc::new(ArcSwap::from_pointee(config.clone()));
    let adapters: Arc<dyn crate::chat::providers::AdapterSource> =
        Arc::new(crate::wasm::adapters::RuntimeAdapters { runtime: plugins.clone(), config: config_swap.clone() });
    let receipts = Arc::new(crate::receipts::Signer25519::load_or_create(&config.data_dir)?);
    let webhooks = crate::webhooks::Webhooks::start(store.clone(), config_swap.clone()).await?;
    let app = AppState {
        config: config_swap,
        plugins: plugins.clone(),
        targets: Arc::new(ArcSwap::from_pointee(targets)),
        limiter: Arc::new(crate::auth::limits::Limiter::new(store_dyn.clone())),
        store: store_dyn,
        transport,
        breakers: Arc::new(breakers),
        adapters,
        receipts,
        webhooks: webhooks.clone(),
        started,
    };
    plugins.watch(Duration::from_millis(app.config().plugins.reload_debounce_ms))?;
    if let Some(path) = config_path {
        crate::reload::spawn(app.clone(), path)?;
    }
    let router = crate::api::routes::router(app.clone());

    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let server = axum::serve(listener, router).with_graceful_shutdown(async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    });
    let server = tokio::spawn(async move { server.await });
    // Tests and scripts read this line to find the port.
    println!("gatehouse listening on http://{addr}");
    tracing::info!(%addr, startup_ms = started.elapsed().as_millis() as u64, "gatehouse is serving");

    shutdown_signal().await;
    tracing::info!("shutting down: no new connections, finishing requests in flight");
    let _ = stop_tx.send(true);
    match tokio::time::timeout(grace, server).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => tracing::error!(error = %e, "server error during shutdown"),
        Ok(Err(e)) => tracing::error!(error = %e, "server task failed"),
        Err(_) => tracing::warn!(grace_ms = grace.as_millis() as u64, "requests still running after the grace period; stopping anyway"),
    }
    webhooks.shutdown().await;
    store.flush().await?;
    tracing::info!("storage flushed; bye");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
