//! Quota counters on PostgreSQL, behind the two synchronous methods the
//! limiter calls under its lock.
//!
//! `count_quota` must not wait: counts are kept in memory ([`Pending`]) and
//! written by the request's own outcome transaction (`finish_request`), or
//! by a flusher every [`FLUSH_EVERY`] for requests that end without one. An
//! increment is one `INSERT … ON CONFLICT DO UPDATE SET count = count + n`,
//! so hosts never overwrite each other's counts, into one of 16 shard rows
//! per transaction, so a busy key's outcomes do not queue behind one row.
//!
//! `quota_counts` must answer synchronously: it asks a thread of its own
//! (its own connection and a one-thread runtime) and waits for the answer,
//! at most [`READ_TIMEOUT`]. Blocking a runtime thread that long is what a
//! redb read does too; the fleet-wide limiter will replace both.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use tokio_postgres::Transaction;

use super::db_error;
use crate::{StoreError, StoreResult};

/// How often pending counts are written when no request outcome carries them.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Longest wait of `quota_counts` for the database.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Shard rows per counter (the migration's `CHECK` allows 0 to 15).
const SHARDS: u8 = 16;

/// (key id, window) → requests counted and not yet written.
pub type Counts = HashMap<(String, String), i64>;

/// Counts taken by `count_quota`, waiting for a transaction.
#[derive(Default)]
pub struct Pending(Mutex<Counts>);

impl Pending {
    pub fn add(&self, key_id: &str, windows: &[String]) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for w in windows {
            *m.entry((key_id.to_owned(), w.clone())).or_default() += 1;
        }
    }

    /// Everything pending, for a transaction to write.
    pub fn take(&self) -> Counts {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Put back counts whose transaction failed.
    pub fn restore(&self, counts: Counts) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for (k, n) in counts {
            *m.entry(k).or_default() += n;
        }
    }
}

/// Add `counts` inside `txn`.
pub async fn write_counts(txn: &Transaction<'_>, counts: &Counts) -> StoreResult<()> {
    if counts.is_empty() {
        return Ok(());
    }
    let upsert = txn
        .prepare(
            "INSERT INTO quota_windows AS q (key_id, window_id, shard, count) VALUES ($1, $2, $4, $3)
             ON CONFLICT (key_id, window_id, shard) DO UPDATE SET count = q.count + EXCLUDED.count",
        )
        .await
        .map_err(db_error)?;
    // One shard for the whole batch, and rows in key order: two transactions
    // lock the rows they share in the same order (no deadlock).
    let shard = i16::from(rand::random::<u8>() % SHARDS);
    let mut rows: Vec<_> = counts.iter().collect();
    rows.sort();
    for ((key, window), n) in rows {
        txn.execute(&upsert, &[key, window, n, &shard]).await.map_err(db_error)?;
    }
    Ok(())
}

/// Write pending counts every [`FLUSH_EVERY`] until aborted.
pub async fn flusher(pool: deadpool_postgres::Pool, pending: Arc<Pending>) {
    loop {
        tokio::time::sleep(FLUSH_EVERY).await;
        let counts = pending.take();
        if counts.is_empty() {
            continue;
        }
        let result = async {
            let mut client = pool.get().await.map_err(|e| StoreError::Unavailable(e.to_string()))?;
            let txn = client.transaction().await.map_err(db_error)?;
            write_counts(&txn, &counts).await?;
            txn.commit().await.map_err(db_error)
        }
        .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "quota counts not written yet; kept for the next try");
            pending.restore(counts);
        }
    }
}

/// Opens the reader's connection (TLS or not) and drives it on the reader's runtime.
pub type Connect = std::pin::Pin<Box<dyn std::future::Future<Output = Result<tokio_postgres::Client, tokio_postgres::Error>> + Send>>;

type Request = (String, Vec<String>, mpsc::SyncSender<StoreResult<Vec<u64>>>);

/// The synchronous reader: a thread with its own connection.
pub struct Reader {
    tx: Mutex<mpsc::SyncSender<Request>>,
}

impl Reader {
    /// Start the thread; it ends when the reader is dropped.
    pub fn start(connect: impl Fn() -> Connect + Send + 'static) -> std::io::Result<Reader> {
        let (tx, rx) = mpsc::sync_channel::<Request>(64);
        std::thread::Builder::new().name("gatehouse-pg-quota".into()).spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
            rt.block_on(async move {
                let mut client: Option<tokio_postgres::Client> = None;
                while let Ok((key_id, windows, reply)) = rx.recv() {
                    if client.as_ref().is_none_or(|c| c.is_closed()) {
                        client = connect().await.ok();
                    }
                    let answer = match &client {
                        Some(c) => read(c, &key_id, &windows).await,
                        None => Err(StoreError::Unavailable("PostgreSQL unreachable".into())),
                    };
                    let _ = reply.send(answer);
                }
            });
        })?;
        Ok(Reader { tx: Mutex::new(tx) })
    }

    /// Persisted counts of a key's windows, in the order given.
    pub fn counts(&self, key_id: &str, windows: &[String]) -> StoreResult<Vec<u64>> {
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        let sent = self.tx.lock().unwrap_or_else(|p| p.into_inner()).try_send((key_id.to_owned(), windows.to_vec(), reply_tx));
        if sent.is_err() {
            return Err(StoreError::Backend("the quota reader is busy or gone".into()));
        }
        reply_rx
            .recv_timeout(READ_TIMEOUT)
            .map_err(|_| StoreError::Unavailable("PostgreSQL did not answer the quota read in time".into()))?
    }
}

async fn read(client: &tokio_postgres::Client, key_id: &str, windows: &[String]) -> StoreResult<Vec<u64>> {
    let rows = client
        .query(
            "SELECT window_id, sum(count)::bigint FROM quota_windows WHERE key_id = $1 AND window_id = ANY($2) GROUP BY window_id",
            &[&key_id, &windows],
        )
        .await
        .map_err(db_error)?;
    let found: HashMap<&str, i64> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    Ok(windows.iter().map(|w| found.get(w.as_str()).map_or(0, |n| *n as u64)).collect())
}
