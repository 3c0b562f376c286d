//! Start-up, serving and graceful shutdown.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::net::TcpListener;

use crate::app::AppState;
use crate::bootstrap::{self, Bootstrap};
use crate::config::Config;

pub mod background;
mod idle;
pub mod peers;
mod waiting;

/// Run the server until SIGTERM or SIGINT, then drain and flush. `bundled` are
/// the components built into the binary (`gatehouse_bundled::BUNDLED`).
pub async fn run(config: Config, config_path: Option<std::path::PathBuf>, bundled: gatehouse_plugin_host::Bundled) -> anyhow::Result<()> {
    run_then(config, config_path, bundled, || {}).await
}

/// [`run`], calling `ready` once the server answers: the binary hands its
/// allocator the start-up garbage back there (`gatehouse-cli`'s `main`).
pub async fn run_then(
    config: Config,
    config_path: Option<std::path::PathBuf>,
    bundled: gatehouse_plugin_host::Bundled,
    ready: impl FnOnce(),
) -> anyhow::Result<()> {
    let started = Instant::now();
    catch_file_size_signal();
    let receipts = Arc::new(gatehouse_store::receipts::Signer25519::load_or_create(&config.data_dir)?);
    let listener = TcpListener::bind(config.listen).await.map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
    let backend = waiting::open_store(&config, receipts.clone(), &listener).await?;
    let store_dyn: Arc<dyn gatehouse_store::Store> = backend.store();
    // Each host signs with its own key: registered in a shared store, it is
    // published by every host, so a receipt verifies whichever host signed it.
    store_dyn.register_receipt_key(&receipts.published()).await?;
    let bootstrapped = match bootstrap::ensure_admin(store_dyn.as_ref()).await {
        // Hosts of a fleet starting at once with the same bootstrap key: one
        // registers it, the others find its hash taken; they now find an admin key.
        Err(e) if matches!(e.downcast_ref::<gatehouse_store::StoreError>(), Some(gatehouse_store::StoreError::Conflict(_))) => {
            bootstrap::ensure_admin(store_dyn.as_ref()).await?
        }
        other => other?,
    };
    match bootstrapped {
        Bootstrap::Generated(secret) => {
            // Shown once, on the terminal only: never through the logger.
            eprintln!(
                "\n  First start: created an admin API key. It is shown only this once:\n\n      {secret}\n\n  \
                 Keep it safe; create more keys with POST /api/admin/keys.\n"
            );
        }
        Bootstrap::FromEnvironment | Bootstrap::AlreadyInitialised => {}
    }
    let addr = listener.local_addr()?;
    let grace = Duration::from_millis(config.server.shutdown_grace_ms);
    let targets = crate::chat::providers::targets(&config)?;
    config.plugins.check_secrets().map_err(|e| anyhow::anyhow!(e))?;
    crate::metrics::get().configure_models(&config);
    let transport = crate::chat::transport::Transport::new(&config.upstream)?;
    let breakers =
        crate::chat::breaker::Breakers::new(config.upstream.breaker_failures, Duration::from_millis(config.upstream.breaker_cooldown_ms));
    let plugins = gatehouse_plugin_host::PluginRuntime::start(
        &config.plugins,
        &config.data_dir,
        bundled,
        crate::plugin_audit::AuditSink::start(store_dyn.clone()),
    )?;
    let config_swap = Arc::new(ArcSwap::from_pointee(config.clone()));
    let adapters: Arc<dyn crate::chat::providers::PluginSource> =
        Arc::new(crate::chat::adapters::plugins::RuntimeAdapters { runtime: plugins.clone(), config: config_swap.clone() });
    let knowledge = crate::chat::adapters::knowledge::Knowledge::new(plugins.clone(), config_swap.clone());
    knowledge.seed_folders()?;
    let webhooks = crate::webhooks::Webhooks::start_with(
        backend.webhook_store(),
        store_dyn.clone(),
        config_swap.clone(),
        Arc::new(crate::webhooks::ssrf::SystemLookup),
    )
    .await?;
    let sweeper = crate::chat::idempotency::spawn_sweeper(store_dyn.clone());
    let limiter = Arc::new(backend.limiter());
    let chat = crate::chat::deps::ChatDeps::new(crate::chat::deps::Deps {
        config: config_swap.clone(),
        targets: Arc::new(ArcSwap::from_pointee(targets)),
        store: store_dyn.clone(),
        limiter: limiter.clone(),
        transport,
        breakers: Arc::new(breakers),
        adapters,
        knowledge: knowledge.clone(),
        receipts: receipts.clone(),
        admission: Default::default(),
        streams: Default::default(),
        config_texts: Default::default(),
        tenants: Default::default(),
    });
    // The plugin registry of this store: a fleet's is the PostgreSQL store itself.
    let registry = backend.plugin_registry(&config.data_dir);
    let app = AppState::with_registry(
        crate::app::Shared {
            config: config_swap,
            plugins: plugins.clone(),
            limiter,
            auth_failures: crate::auth::failures::FailureWatch::start(store_dyn.clone()),
            store: store_dyn,
            receipts,
            webhooks: webhooks.clone(),
            started,
            overview: Default::default(),
            knowledge_bases: Default::default(),
            chat,
        },
        registry,
    );
    crate::chat::policy_select::log_stored_defaults(
        app.store.as_ref(),
        app.chat.adapters.snapshot().as_ref(),
        &app.chat.tenants.policies(),
    )
    .await;
    plugins.watch(Duration::from_millis(app.config().plugins.reload_debounce_ms))?;
    // Index the knowledge bases in the background; queries before it finishes build their own.
    tokio::task::spawn_blocking(move || knowledge.prewarm());
    if let Some(path) = config_path {
        crate::reload::spawn(app.clone(), path)?;
    }
    let router = crate::api::routes::router(app.clone());
    let background = background::Background::start(&app);

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    #[expect(
        clippy::disallowed_methods,
        reason = "the handle is kept: shutdown awaits it within the grace period, then cuts streams and awaits it again"
    )]
    let server = tokio::spawn(serve(listener, router, app.clone(), stop_rx));
    // Tests and scripts read this line to find the port.
    println!("gatehouse listening on http://{addr}");
    tracing::info!(%addr, startup_ms = started.elapsed().as_millis() as u64, "gatehouse is serving");
    ready();

    shutdown_signal().await;
    tracing::info!("shutting down: no new connections, finishing requests in flight");
    let _ = stop_tx.send(true);
    let mut server = server;
    match tokio::time::timeout(grace, &mut server).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "server task failed"),
        Err(_) => {
            // Streams still open are cut with an error frame, and their
            // outcomes committed, before the store closes.
            let open = app.chat.streams.open_count();
            tracing::warn!(
                grace_ms = grace.as_millis() as u64,
                streams = open,
                "requests still running after the grace period; cutting streams"
            );
            app.chat.streams.cut();
            if !app.chat.streams.ended(CUT_STREAMS_END).await {
                tracing::error!(streams = app.chat.streams.open_count(), "streams still running after the cut; their outcomes are lost");
            }
            // Let the connections write the last frames.
            let _ = tokio::time::timeout(crate::chat::cutoff::LAST_FRAMES, &mut server).await;
        }
    }
    background.shutdown().await;
    webhooks.shutdown().await;
    sweeper.abort();
    backend.flush().await?;
    tracing::info!("storage flushed; bye");
    Ok(())
}

/// How long cut streams get to send their last frames and commit their outcomes.
const CUT_STREAMS_END: Duration = Duration::from_secs(5);

/// Accept connections until `stop` turns true, then let the open ones finish.
///
/// hyper's own connection builder rather than `axum::serve`, because a client
/// that trickles its request line and headers (slowloris) must be cut off:
/// `header_read_timeout` closes such an HTTP/1 connection. The body has its
/// own deadline (`api::intake`); header floods are refused by hyper's limits
/// (100 headers, 64 KiB of head) with 431 or a closed connection; an HTTP/2
/// connection may open at most `http2_max_concurrent_streams` streams at
/// once. A connection with no request for `keep_alive_timeout_ms` is shut
/// down gracefully (a request still running is answered first; PINGs are
/// not requests, see `idle`). With `max_connections_per_ip` set, a client
/// address past it is closed at once (`peers`). These settings are read per
/// connection, so a config reload applies to the next ones.
async fn serve(listener: TcpListener, router: axum::Router, app: AppState, mut stop: tokio::sync::watch::Receiver<bool>) {
    // Every connection task holds a sender; the channel closes when the last one ends.
    let (alive, mut all_closed) = tokio::sync::mpsc::channel::<()>(1);
    let stop_conn = stop.clone();
    let stopped = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    tokio::pin!(stopped);
    let peers = Arc::new(peers::Peers::default());
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, addr)) => (stream, addr.ip().to_canonical()),
                Err(e) => {
                    accept_error(e).await;
                    continue;
                }
            },
            () = &mut stopped => break,
        };
        let settings = {
            let cfg = app.config();
            Settings {
                header: Duration::from_millis(cfg.server.header_read_timeout_ms),
                keep_alive: Duration::from_millis(cfg.server.keep_alive_timeout_ms),
                h2_streams: cfg.server.http2_max_concurrent_streams,
                per_ip: cfg.server.max_connections_per_ip,
                trusted: (!cfg.server.trusted_proxies.is_empty() && crate::net::is_trusted(&cfg.server.trusted_proxies, Some(peer)))
                    .then(|| Arc::new(cfg.server.trusted_proxies.clone())),
            }
        };
        // A balancer's connections carry many clients: its requests are counted by the address they name.
        let place = if settings.per_ip > 0 && settings.trusted.is_none() {
            match peers.enter(peer, settings.per_ip) {
                Some(place) => Some(place),
                None => {
                    tracing::debug!(%peer, cap = settings.per_ip, "connection closed: server.max_connections_per_ip reached");
                    continue;
                }
            }
        } else {
            None
        };
        let _ = stream.set_nodelay(true);
        let conn = Conn { peer, place, peers: peers.clone(), settings };
        #[expect(
            clippy::disallowed_methods,
            reason = "a connection task: `serve` counts it in `alive` and waits for the count to drop before returning"
        )]
        tokio::spawn(connection(stream, router.clone(), conn, stop_conn.clone(), alive.clone()));
    }
    drop(listener);
    drop(alive);
    let _ = all_closed.recv().await;
}

/// A connection's settings, read from the config when it was accepted.
#[derive(Clone)]
struct Settings {
    header: Duration,
    keep_alive: Duration,
    h2_streams: u32,
    per_ip: usize,
    /// The trusted proxies, when this peer is one of them.
    trusted: Option<Arc<Vec<crate::net::Cidr>>>,
}

/// One accepted connection: its peer and the place it holds under the per-IP cap.
struct Conn {
    peer: std::net::IpAddr,
    place: Option<peers::PeerPlace>,
    peers: Arc<peers::Peers>,
    settings: Settings,
}

/// Serve one connection until the client closes it, it has no request for
/// the keep-alive timeout, or the server stops.
async fn connection(
    stream: tokio::net::TcpStream,
    router: axum::Router,
    conn: Conn,
    mut stop: tokio::sync::watch::Receiver<bool>,
    _alive: tokio::sync::mpsc::Sender<()>,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::conn::auto::Builder;

    let Conn { peer, place: _place, peers, settings } = conn;
    // hyper's header timer starts with the first byte; a connection that
    // never sends one is closed after the same timeout (or at shutdown).
    let mut first = [0u8; 1];
    tokio::select! {
        got = tokio::time::timeout(settings.header, stream.peek(&mut first)) => if got.is_err() { return },
        _ = stop.wait_for(|s| *s) => return,
    }
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(settings.header).max_buf_size(HEAD_BUFFER_BYTES);
    builder.http2().timer(TokioTimer::new()).max_concurrent_streams(settings.h2_streams);
    let activity = Arc::new(idle::Activity::new());
    let io = TokioIo::new(stream);
    let per_request = {
        let activity = activity.clone();
        let (per_ip, trusted) = (settings.per_ip, settings.trusted.clone());
        tower::service_fn(move |mut req: axum::http::Request<hyper::body::Incoming>| {
            let in_request = activity.begin();
            // The client's address, for the failed-authentication watch: the
            // peer's, or the one a trusted balancer forwarded.
            let forwarded = trusted.as_deref().and_then(|t| crate::net::forwarded_client(t, req.headers()));
            req.extensions_mut().insert(crate::auth::failures::ClientAddr(Some(forwarded.unwrap_or(peer))));
            // Behind a balancer, a request counts against its client's address
            // while it runs; over the cap, the auth layer refuses it (in the
            // router, so that it gets a request id like any answer).
            let place = match forwarded {
                Some(ip) if per_ip > 0 => {
                    let place = peers.enter(ip, per_ip);
                    if place.is_none() {
                        req.extensions_mut().insert(crate::api::middleware::Crowded { ip, cap: per_ip });
                    }
                    place
                }
                _ => None,
            };
            let router = router.clone();
            async move {
                let resp = tower::ServiceExt::oneshot(router, req).await?;
                Ok::<_, std::convert::Infallible>(resp.map(|body| idle::Holding::new(body, (in_request, place))))
            }
        })
    };
    let conn = builder.serve_connection_with_upgrades(io, hyper_util::service::TowerToHyperService::new(per_request));
    tokio::pin!(conn);
    let mut closing = false;
    // After an idle shutdown: an HTTP/2 client that does not answer the
    // GOAWAY's PING would hold the connection open; with no request running
    // after another timeout, it is dropped.
    let mut drop_at: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            res = conn.as_mut() => {
                if let Err(e) = res {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            _ = stop.wait_for(|s| *s), if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
            () = tokio::time::sleep_until(activity.idle_deadline(settings.keep_alive)), if !closing => {
                if activity.idle_for() >= settings.keep_alive {
                    tracing::debug!(idle_ms = settings.keep_alive.as_millis() as u64, "closing an idle keep-alive connection");
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                    drop_at = Some(tokio::time::Instant::now() + settings.keep_alive);
                }
            }
            () = tokio::time::sleep_until(drop_at.unwrap_or_else(tokio::time::Instant::now)), if drop_at.is_some() => {
                if activity.idle_for() >= settings.keep_alive {
                    tracing::debug!("dropping an idle connection that did not close after GOAWAY");
                    return;
                }
                drop_at = Some(activity.idle_deadline(settings.keep_alive));
            }
        }
    }
}

/// Largest request line plus headers hyper buffers for one HTTP/1 request.
const HEAD_BUFFER_BYTES: usize = 64 * 1024;

/// Connection-level errors concern one client only; anything else (out of
/// file descriptors) is worth a pause before accepting again, as hyper 0.14 did.
async fn accept_error(e: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(e.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        return;
    }
    tracing::error!(error = %e, "accept failed; pausing for a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// A write past a file-size limit (`ulimit -f`, systemd's `LimitFSIZE`)
/// raises SIGXFSZ, whose default action kills the process with a core dump.
/// Caught, the write fails with EFBIG instead, which the store handles like
/// any storage I/O error: it reports itself degraded and reopens the database
/// (docs/decisions/storage-failures.md). tokio's handler stays installed for
/// the life of the process.
fn catch_file_size_signal() {
    #[cfg(unix)]
    if let Err(e) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::from_raw(libc::SIGXFSZ)) {
        tracing::warn!(error = %e, "cannot catch SIGXFSZ; a write past a file-size limit will stop the process");
    }
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
