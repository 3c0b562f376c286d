//! Before the store is open: a host on PostgreSQL whose database cannot be
//! reached at start keeps trying (`app::Backend::open`) and never exits for
//! it; meanwhile its port answers every request with 503 (`/health`:
//! `degraded`, a readiness signal a balancer routes around), so it is not
//! mistaken for a dead process. Once the store opens, the same listener
//! serves the real routes.

use std::sync::Arc;

use axum::Json;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::net::TcpListener;

use crate::app::Backend;
use crate::config::Config;

/// `Retry-After` of the answers given while waiting.
const RETRY_AFTER_SECS: u64 = 1;

/// Open the store; until it is open, answer connections on `listener` with 503.
pub(super) async fn open_store(
    config: &Config,
    sealer: Arc<dyn gatehouse_store::receipts::ReceiptSealer>,
    listener: &TcpListener,
) -> anyhow::Result<Backend> {
    let router = axum::Router::new().route("/health", axum::routing::get(health)).fallback(refuse);
    let open = Backend::open(config, sealer);
    tokio::pin!(open);
    loop {
        tokio::select! {
            // First: on redb (or a database that answers) the store opens at the first poll.
            biased;
            opened = &mut open => return opened,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                #[expect(clippy::disallowed_methods, reason = "one request without keep-alive: the task ends with its answer")]
                tokio::spawn(answer(stream, router.clone()));
            }
        }
    }
}

/// Serve one request on `stream` and close it (no keep-alive: a balancer's
/// connection must not stay on this router once the real one serves).
async fn answer(stream: tokio::net::TcpStream, router: axum::Router) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder.http1().keep_alive(false);
    let service = hyper_util::service::TowerToHyperService::new(router);
    let served = tokio::time::timeout(std::time::Duration::from_secs(10), builder.serve_connection(TokioIo::new(stream), service)).await;
    if let Ok(Err(e)) = served {
        tracing::debug!(error = %e, "a connection while waiting for the store ended with an error");
    }
}

const WAITING: &str = "the host is waiting for its database (PostgreSQL is not reachable yet)";

async fn health() -> (StatusCode, Json<serde_json::Value>) {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({
            "status": "degraded",
            "version": env!("CARGO_PKG_VERSION"),
            "storage": { "ok": false, "error": WAITING },
        })),
    )
}

async fn refuse(uri: Uri) -> Response {
    let message = format!("{WAITING}; retry after {RETRY_AFTER_SECS} s");
    let mut resp = crate::error::ErrorFormat::for_path(uri.path()).busy(&message, RETRY_AFTER_SECS);
    *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    resp.into_response()
}
