//! The stop signal every background loop of a server waits on: a `watch`
//! channel that turns true once, when the server shuts down
//! (docs/decisions/shutdown.md).

use tokio::sync::watch;

/// Wait until `stop` says true (or its sender is gone).
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
