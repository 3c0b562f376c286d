//! The connection that listens for key changes made by any host, and turns
//! them into cache invalidations (`key_cache`). It reconnects after a
//! second when lost; meanwhile the cache is off.

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{AsyncMessage, NoTls, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::key_cache::KeyCache;

pub async fn run(config: tokio_postgres::Config, tls: Option<MakeRustlsConnect>, channel: &'static str, cache: Arc<KeyCache>) {
    loop {
        let result = match &tls {
            Some(tls) => listen_once(&config, tls.clone(), channel, || cache.set_listening(true), || cache.invalidate()).await,
            None => listen_once(&config, NoTls, channel, || cache.set_listening(true), || cache.invalidate()).await,
        };
        cache.set_listening(false);
        if let Err(e) = result {
            tracing::warn!(error = %e, "the key-change listener lost PostgreSQL; keys are read from the database until it is back");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A client of its own (not from the pool), its connection driven by a task
/// of the current runtime until the client is dropped.
pub async fn connect(
    config: tokio_postgres::Config,
    tls: Option<MakeRustlsConnect>,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    #[expect(clippy::disallowed_methods, reason = "the task ends with the connection, which ends when the client is dropped")]
    match tls {
        Some(tls) => {
            let (client, connection) = config.connect(tls).await?;
            tokio::spawn(connection);
            Ok(client)
        }
        None => {
            let (client, connection) = config.connect(NoTls).await?;
            tokio::spawn(connection);
            Ok(client)
        }
    }
}

/// One connection that `LISTEN`s on `channel`: `listening` once it does,
/// `notified` for every notification (several arriving at once may count as
/// one). Returns when the connection ends.
pub(super) async fn listen_once<T>(
    config: &tokio_postgres::Config,
    tls: T,
    channel: &str,
    listening: impl Fn(),
    notified: impl Fn(),
) -> Result<(), tokio_postgres::Error>
where
    T: MakeTlsConnect<Socket>,
    T::Stream: Send + 'static,
{
    let (client, mut connection) = config.connect(tls).await?;
    // A notification only needs to wake the loop below: one pending wake-up is enough.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
    #[expect(
        clippy::disallowed_methods,
        reason = "joined below; if this future is aborted the client drops with it, the connection closes and the task ends"
    )]
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(_))) => {
                    let _ = tx.try_send(());
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            }
        }
    });
    client.batch_execute(&format!("LISTEN {channel}")).await?;
    listening();
    while rx.recv().await.is_some() {
        notified();
    }
    // The driver ended: the connection is gone.
    drop(client);
    match driver.await {
        Ok(result) => result,
        Err(_) => Ok(()),
    }
}
