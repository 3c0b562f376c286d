//! The fleet store: PostgreSQL shared by N hosts (docs/decisions/postgres-store.md).
//!
//! Every write is one transaction of its own, committed before the call
//! returns (PostgreSQL's commit is durable with its default
//! `synchronous_commit`); concurrent hosts are kept correct by the database
//! (unique keys, row locks, the audit chain's head row), not by a writer in
//! this process. The schema lives in versioned SQL files ([`migrate`]).
//! docs/decisions/postgres-store.md says why each table and lock is as it is.

mod admin;
pub mod audit;
mod chat;
pub mod import;
mod key_cache;
mod knowledge_bases;
mod limits;
mod listen;
pub mod migrate;
mod quota;
mod receipt_keys;
mod registry;
mod store_impl;
mod tls;
mod usage_ledger;
mod webhooks;

use std::path::PathBuf;
use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

pub use key_cache::TTL as KEY_CACHE_TTL;
pub use migrate::{MigrateError, Migrated, migrate};

use crate::receipts::ReceiptSealer;
use crate::{StoreError, StoreResult};

/// Longest wait for a connection (to open one, or for a free one in the
/// pool): a database that does not answer turns into errors (503 and
/// `degraded`) within this, not requests hanging for the operating system's
/// TCP timeout. A URL's own `connect_timeout` wins for opening one.
const WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// NOTIFY channel of key writes.
const KEYS_CHANNEL: &str = "gatehouse_keys";

/// How to reach the database.
#[derive(Clone)]
pub struct PgOptions {
    /// `postgres://user:password@host:port/db?sslmode=…` (from the environment, never the config file).
    pub url: String,
    /// Connections kept by this host.
    pub pool_size: usize,
    /// A PEM file of the CA that signed the server's certificate; `None`: the system's roots.
    pub ca_file: Option<PathBuf>,
}

impl std::fmt::Debug for PgOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password.
        f.debug_struct("PgOptions").field("url", &"***").field("pool_size", &self.pool_size).field("ca_file", &self.ca_file).finish()
    }
}

impl PgOptions {
    pub fn new(url: impl Into<String>) -> Self {
        PgOptions { url: url.into(), pool_size: 16, ca_file: None }
    }
}

/// PostgreSQL-backed store for one host of a fleet.
pub struct PgStore {
    pool: Pool,
    keys: Arc<key_cache::KeyCache>,
    /// Signs each request's receipt in its transaction.
    sealer: Option<Arc<dyn ReceiptSealer>>,
    /// Quota counts not written yet, and the thread that reads them synchronously.
    counts: Arc<quota::Pending>,
    quota_reader: quota::Reader,
    /// Why the last attempt to reach the database failed, until one succeeds.
    failure: Arc<std::sync::Mutex<Option<String>>>,
    /// The key-change listener, the quota flusher and the health probe, aborted on drop.
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Moves when any host writes the plugin registry (`registry::listen`).
    registry_changes: tokio::sync::watch::Sender<u64>,
}

impl Drop for PgStore {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

pub(crate) fn backend<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Backend(e.to_string())
}

/// A driver error as a store error: a unique violation is a conflict.
pub(crate) fn db_error(e: tokio_postgres::Error) -> StoreError {
    if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) {
        return StoreError::Conflict(e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_owned()));
    }
    if is_unavailable(&e) {
        return StoreError::Unavailable(chain(&e));
    }
    StoreError::Backend(e.as_db_error().map_or_else(|| chain(&e), |d| d.message().to_owned()))
}

/// Is this driver error the database being away rather than a fault of the
/// request: the connection closed or failed at the socket, or the server says it
/// is shutting down or not accepting connections (SQLSTATE class 08, 57P01..57P03)?
pub(crate) fn is_unavailable(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(code) = e.code() {
        let code = code.code();
        return code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03");
    }
    let mut next = std::error::Error::source(e);
    while let Some(s) = next {
        if s.is::<std::io::Error>() {
            return true;
        }
        next = s.source();
    }
    false
}

/// An error and its sources, `: `-separated: the driver's and the pool's
/// messages leave the cause (a refused certificate, a refused connection) to their source.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = s.source();
    }
    out
}

pub(crate) fn encode<T: serde::Serialize>(v: &T) -> StoreResult<String> {
    serde_json::to_string(v).map_err(backend)
}

pub(crate) fn decode<T: serde::de::DeserializeOwned>(text: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| StoreError::Backend(format!("corrupt record: {e}")))
}

/// What a store (or the `db migrate` command) opens: the driver's config, TLS, the pool.
struct Connection {
    config: tokio_postgres::Config,
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    pool: Pool,
}

impl Connection {
    /// Parse the URL and build the pool; nothing is connected yet.
    fn open(options: &PgOptions) -> anyhow::Result<Connection> {
        let url = tls::normalise_url(&options.url);
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| anyhow::anyhow!("invalid PostgreSQL URL: {e}"))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(WAIT);
        }
        let tls = tls::connector(config.get_ssl_mode(), options.ca_file.as_deref())?;
        let manager_config = ManagerConfig { recycling_method: RecyclingMethod::Fast };
        let manager = match &tls {
            Some(tls) => Manager::from_config(config.clone(), tls.clone(), manager_config),
            None => Manager::from_config(config.clone(), NoTls, manager_config),
        };
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(WAIT))
            .create_timeout(Some(WAIT))
            .recycle_timeout(Some(WAIT))
            .build()
            .map_err(|e| anyhow::anyhow!("PostgreSQL pool: {e}"))?;
        Ok(Connection { config, tls, pool })
    }
}

/// How often the health probe asks the database whether it answers.
pub const PROBE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Ask the database every [`PROBE_EVERY`] whether it answers, and keep
/// `failure` (what `/health` reports) to the answer: a host that serves
/// nothing still turns `degraded` when the database goes away, and back
/// when it returns, without a request to notice either.
async fn probe(pool: Pool, failure: Arc<std::sync::Mutex<Option<String>>>) {
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        let outcome = match pool.get().await {
            Ok(client) => match tokio::time::timeout(WAIT, client.simple_query("SELECT 1")).await {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(format!("PostgreSQL unreachable: {}", chain(&e))),
                Err(_) => Some(format!("PostgreSQL did not answer within {} s", WAIT.as_secs())),
            },
            Err(e) => Some(format!("PostgreSQL unreachable: {}", chain(&e))),
        };
        *failure.lock().unwrap_or_else(|p| p.into_inner()) = outcome;
    }
}

/// Apply the migrations to the database `options` names and say what was
/// done, without starting a store: what `gatehouse db migrate` runs.
pub async fn migrate_database(options: &PgOptions) -> anyhow::Result<Migrated> {
    let Connection { pool, .. } = Connection::open(options)?;
    Ok(migrate(&pool).await?)
}

impl PgStore {
    /// Connect, apply migrations, and start listening for key changes. Fails
    /// if the database cannot be reached or its schema is newer than this binary's.
    pub async fn connect(options: PgOptions) -> anyhow::Result<PgStore> {
        Self::connect_with(options, None).await
    }

    /// [`PgStore::connect`] with the signer of chat receipts (each request's
    /// receipt is signed alone, in its transaction).
    pub async fn connect_with(options: PgOptions, sealer: Option<Arc<dyn ReceiptSealer>>) -> anyhow::Result<PgStore> {
        let Connection { config, tls, pool } = Connection::open(&options)?;
        migrate(&pool).await?;
        let keys = Arc::new(key_cache::KeyCache::default());
        let counts = Arc::new(quota::Pending::default());
        let (reader_config, reader_tls) = (config.clone(), tls.clone());
        let quota_reader = quota::Reader::start(move || Box::pin(listen::connect(reader_config.clone(), reader_tls.clone())))?;
        let failure: Arc<std::sync::Mutex<Option<String>>> = Default::default();
        let registry_changes = tokio::sync::watch::channel(0).0;
        #[expect(clippy::disallowed_methods, reason = "the handles are kept and the tasks aborted when the store is dropped")]
        let tasks = vec![
            tokio::spawn(registry::listen(config.clone(), tls.clone(), registry_changes.clone())),
            tokio::spawn(listen::run(config, tls, KEYS_CHANNEL, keys.clone())),
            tokio::spawn(quota::flusher(pool.clone(), counts.clone())),
            tokio::spawn(probe(pool.clone(), failure.clone())),
        ];
        Ok(PgStore { pool, keys, sealer, counts, quota_reader, failure, tasks, registry_changes })
    }

    /// The connection pool (for `postgres::migrate` and for tests).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// True while key changes of other hosts reach this one by notification.
    pub fn listening(&self) -> bool {
        self.keys.is_listening()
    }

    /// Key-cache invalidations so far (notifications received, this host's
    /// own key writes, listener reconnects): rises when any host changes a key.
    pub fn key_invalidations(&self) -> u64 {
        self.keys.generation()
    }

    /// Write the quota counts still in memory (at shutdown, before the
    /// store is dropped: what the flusher has not written yet would be lost).
    pub async fn flush(&self) -> StoreResult<()> {
        let counts = self.counts.take();
        if counts.is_empty() {
            return Ok(());
        }
        let written = self.in_txn(async |txn| quota::write_counts(txn, &counts).await).await;
        if written.is_err() {
            self.counts.restore(counts);
        }
        written
    }

    /// Run `f` in a transaction and commit it; an error rolls it back.
    pub(crate) async fn in_txn<T>(&self, f: impl AsyncFnOnce(&tokio_postgres::Transaction<'_>) -> StoreResult<T>) -> StoreResult<T> {
        let mut client = self.client().await?;
        let txn = client.transaction().await.map_err(db_error)?;
        let out = f(&txn).await?;
        txn.commit().await.map_err(db_error)?;
        Ok(out)
    }

    /// A pooled connection. A failure to get one is what `/health` reports
    /// until a later call gets one again.
    pub(crate) async fn client(&self) -> StoreResult<deadpool_postgres::Object> {
        match self.pool.get().await {
            Ok(c) => {
                *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = None;
                Ok(c)
            }
            Err(e) => {
                let message = format!("PostgreSQL unreachable: {}", chain(&e));
                *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(message.clone());
                Err(StoreError::Unavailable(message))
            }
        }
    }
}
