//! The open database, closed and opened again after a storage I/O error.
//!
//! Once a write fails on I/O (EFBIG past a file-size limit, ENOSPC, EIO),
//! redb refuses every later transaction ("Previous I/O error occurred.
//! Please close and re-open the database") for as long as that `Database`
//! lives. Left so, the server was a zombie: every write a 500 until a
//! restart, while `/health` said ok. The writer thread therefore reopens the
//! file after a failed commit (redb's repair brings back the last durable
//! commit, so acknowledged data stays), and the slot remembers why the last
//! commit failed until one succeeds, which `/health` reports as `degraded`
//! (docs/decisions/storage-failures.md).
//!
//! Readers take the database from the slot for the length of one read; a
//! reopen takes it out, waits for them to let go (redb allows one open
//! instance of a file), and puts the new one in.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use redb::Database;

use crate::{StoreError, StoreResult};

/// redb's page cache (at most half of it buffers writes before a commit).
/// Its default (1 GiB) lets resident memory follow the file's growth for as
/// long as the server runs (the soak saw +50 % in ten minutes); 8 MiB keeps
/// the hot pages (keys, limit counters, recent outbox) and leaves the rest to
/// the operating system's page cache.
const CACHE_BYTES: usize = 8 * 1024 * 1024;

/// How long a reopen waits for readers to let go of the old database before
/// it leaves the rest to the next attempt.
const READERS_LET_GO: Duration = Duration::from_millis(500);

/// Opens the database again (the file, or in tests a backend that fails on demand).
pub type Opener = Box<dyn Fn() -> anyhow::Result<Database> + Send + Sync>;

/// The database of a redb store, and the state of its writes.
pub struct Slot {
    db: ArcSwapOption<Database>,
    open: Opener,
    /// Set while the last commit failed; checked on every commit without a lock.
    failing: AtomicBool,
    /// Why the last commit failed.
    failure: Mutex<Option<String>>,
    /// An old database taken out for a reopen that readers still held.
    closing: Mutex<Option<Weak<Database>>>,
}

/// Open (or create) the file; `DatabaseAlreadyOpen` is named for what it means.
pub fn open_file(path: &Path) -> anyhow::Result<Database> {
    Database::builder().set_cache_size(CACHE_BYTES).create(path).map_err(|e| match e {
        redb::DatabaseError::DatabaseAlreadyOpen => {
            anyhow::anyhow!("{} is in use by another gatehouse process (stop the server first)", path.display())
        }
        other => anyhow::anyhow!("cannot open {}: {other}", path.display()),
    })
}

impl Slot {
    /// The database open at `path`, reopened from there.
    pub fn new(db: Database, path: &Path) -> Self {
        let path: PathBuf = path.to_path_buf();
        Self::with_opener(db, Box::new(move || open_file(&path)))
    }

    pub fn with_opener(db: Database, open: Opener) -> Self {
        Slot {
            db: ArcSwapOption::from_pointee(db),
            open,
            failing: AtomicBool::new(false),
            failure: Mutex::new(None),
            closing: Mutex::new(None),
        }
    }

    /// The open database, for one read or one write transaction.
    pub fn get(&self) -> StoreResult<Arc<Database>> {
        self.db
            .load_full()
            .ok_or_else(|| StoreError::Backend("the database is being reopened after a storage I/O error; retry in a moment".into()))
    }

    /// Why the last commit failed, while commits fail.
    pub fn failure(&self) -> Option<String> {
        if !self.failing.load(Ordering::Acquire) {
            return None;
        }
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(super) fn commit_failed(&self, why: &str) {
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.to_owned());
        self.failing.store(true, Ordering::Release);
    }

    pub(super) fn commit_succeeded(&self) {
        if self.failing.load(Ordering::Acquire) {
            self.failing.store(false, Ordering::Release);
            *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = None;
            tracing::info!("storage: commits succeed again");
        }
    }

    /// Close the database and open it again (the writer thread only, between
    /// transactions). Until it succeeds, reads and writes fail with a
    /// message that says so; a later call tries again.
    pub(super) fn reopen(&self) -> Result<(), String> {
        let mut closing = self.closing.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = self.db.swap(None) {
            *closing = Some(Arc::downgrade(&old));
        }
        if let Some(old) = closing.as_ref() {
            let deadline = Instant::now() + READERS_LET_GO;
            while old.strong_count() > 0 {
                if Instant::now() >= deadline {
                    return Err("readers still hold the old database".into());
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        *closing = None;
        let db = (self.open)().map_err(|e| format!("{e:#}"))?;
        self.db.store(Some(Arc::new(db)));
        tracing::warn!("storage: reopened the database after an I/O error");
        Ok(())
    }
}
