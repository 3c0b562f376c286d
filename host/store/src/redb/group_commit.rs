//! Group commit: one writer thread takes every write that is waiting, applies
//! them in one transaction and commits once (fsync once), then answers each
//! caller. Under load the cost of the fsync is shared by all the writes that
//! queued up while the previous commit ran.
//!
//! Counter increments (quota windows) need no answer and commute, so they do
//! not queue as writes of their own: [`GroupCommit::add_counts`] adds them to
//! a pending map, and every batch applies what is pending in its own
//! transaction. A request's count is therefore committed no later than the
//! commit that records the request's outcome, at no commit of its own; when
//! nothing else is being written, they are committed on their own
//! [`COUNTS_DELAY`] after the first of them. That delay is kept by a timer
//! task on the async runtime, which wakes the writer only if the counts are
//! still pending then: a request's count does not wake the writer thread
//! (at 1,000 requests/s that was a second wake-up and two context switches
//! per request, beside the one for its outcome;
//! docs/benchmarks.md#quota-counts). Without a runtime at start, the first count wakes the
//! writer, which waits up to [`COUNTS_DELAY`] for a write to carry them.
//!
//! A write may carry a receipt ([`GroupCommit::write_with_receipt`]): the
//! writer signs the receipts of a batch together, one signature over their
//! Merkle root ([`crate::receipts::ReceiptSealer`]), and stores them in the
//! same transaction — one Ed25519 signature per commit instead of one per
//! request, and a receipt is signed before it is durable.
//!
//! A transaction that cannot begin or commit is a storage failure: the slot
//! records it (for `/health`) and the writer reopens the database, since
//! redb refuses every write after an I/O error until then (see `slot`). A
//! batch that could not begin is run once more on the reopened database; a
//! failed commit is answered with its error, never run again (its fate on
//! disk is redb's to settle on reopen, and a second run could apply it twice).
//!
//! A chat request's outcome is queued as data ([`GroupCommit::finish`]), not
//! as a closure: the writer applies all the outcomes of a batch first, with
//! each table they write opened once (`chat::Outcomes`), then the batch's
//! other writes.
//!
//! Each write must check its preconditions before it changes anything. If one of them fails anyway, the transaction is thrown
//! away and the batch is run again without it, so a failed write never leaves
//! half of itself behind and never takes its neighbours down with it.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use redb::{Durability, ReadableTable, WriteTransaction};
use tokio::sync::{Notify, mpsc, oneshot};

use super::slot::Slot;
use super::tables::QUOTA;
use crate::receipts::{Receipt, ReceiptSealer};
use crate::records::RequestOutcome;
use crate::{StoreError, StoreResult};

type AnyBox = Box<dyn Any + Send>;
type Op = Box<dyn FnMut(&WriteTransaction) -> StoreResult<AnyBox> + Send>;

/// What a queued job writes.
enum Work {
    /// Nothing of its own: a wake-up to commit pending counts.
    Wake,
    Op(Op),
    /// A chat request's outcome, written with the batch's other outcomes
    /// (`chat::Outcomes`: each table opened once per commit).
    Outcome(Box<RequestOutcome>),
}

/// A queued write.
struct Job {
    work: Work,
    /// Signed with the batch's other receipts and stored with the op.
    receipt: Option<Receipt>,
    reply: Option<oneshot::Sender<StoreResult<AnyBox>>>,
}

/// Counter increments waiting for the next commit: `QUOTA` key → amount.
type Counts = Arc<Mutex<HashMap<String, u64>>>;

/// Most writes committed together.
const MAX_BATCH: usize = 512;
/// Bound on queued writes: callers wait (backpressure) rather than grow memory.
const QUEUE: usize = 8192;
/// How long pending counts wait for a real write to ride along with before
/// they are committed on their own.
pub const COUNTS_DELAY: std::time::Duration = std::time::Duration::from_millis(100);

/// Handle to the writer thread. Dropping every handle stops the thread after it
/// has committed what was queued.
#[derive(Clone)]
pub struct GroupCommit {
    tx: mpsc::Sender<Job>,
    counts: Counts,
    /// Commits so far (the writer counts them); read by the tests.
    #[cfg_attr(not(test), expect(dead_code, reason = "only the tests read the count"))]
    commits: Arc<AtomicU64>,
    /// The count timer; `None` without a runtime at start (the writer is
    /// woken at once instead).
    count_timer: Option<Arc<CountTimer>>,
}

/// Handle of the [`count_timer`] task: starts it when counts become pending,
/// and stops it with the last [`GroupCommit`] handle.
struct CountTimer {
    start: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CountTimer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl GroupCommit {
    /// Start the writer; `sealer` signs the receipts of writes that carry one
    /// (without it such a write fails).
    pub fn start(db: Arc<Slot>, durability: Durability, sealer: Option<Arc<dyn ReceiptSealer>>) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>(QUEUE);
        let counts = Counts::default();
        let commits = Arc::new(AtomicU64::new(0));
        let count_timer = tokio::runtime::Handle::try_current().ok().map(|rt| {
            let start = Arc::new(Notify::new());
            let task = rt.spawn(count_timer(start.clone(), counts.clone(), tx.downgrade()));
            Arc::new(CountTimer { start, task })
        });
        let writer =
            Writer { db, durability, counts: counts.clone(), commits: commits.clone(), sealer, waits_for_counts: count_timer.is_none() };
        std::thread::Builder::new().name("gatehouse-store-writer".into()).spawn(move || writer_loop(writer, rx))?;
        Ok(GroupCommit { tx, counts, commits, count_timer })
    }

    /// Transactions committed so far.
    #[cfg(test)]
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Add one to each counter in `keys` (rows of the `QUOTA` table) with the
    /// next commit, without waiting for it. Writes queued after this call are
    /// committed together with, or after, these increments.
    pub fn add_counts<'a>(&self, keys: impl IntoIterator<Item = &'a str>) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let wake = counts.is_empty();
        for k in keys {
            match counts.get_mut(k) {
                Some(n) => *n += 1,
                None => {
                    counts.insert(k.to_owned(), 1);
                }
            }
        }
        drop(counts);
        // The first pending count starts the timer (or wakes the writer);
        // later ones ride along.
        if wake {
            match self.count_timer.as_deref().filter(|t| !t.task.is_finished()) {
                Some(timer) => timer.start.notify_one(),
                // No runtime at start, or it has shut down since: the writer
                // commits the counts as soon as it is woken.
                None => wake_writer(&self.tx),
            }
        }
    }

    /// Run `op` in the next group commit and return its result once it is durable.
    pub async fn write<T, F>(&self, op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnMut(&WriteTransaction) -> StoreResult<T> + Send + 'static,
    {
        self.write_with_receipt(None, op).await
    }

    /// [`GroupCommit::write`], and store `receipt` signed (with the batch's
    /// other receipts) in the same transaction.
    pub async fn write_with_receipt<T, F>(&self, receipt: Option<Receipt>, mut op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnMut(&WriteTransaction) -> StoreResult<T> + Send + 'static,
    {
        let op: Op = Box::new(move |txn| op(txn).map(|v| Box::new(v) as AnyBox));
        let out = self.submit(Work::Op(op), receipt).await?;
        out.downcast::<T>().map(|b| *b).map_err(|_| StoreError::Backend("store writer returned a value of the wrong type".into()))
    }

    /// Write a chat request's outcome (and its receipt, signed with the
    /// batch's others) in the next group commit; returns once it is durable.
    pub async fn finish(&self, mut outcome: RequestOutcome) -> StoreResult<()> {
        let receipt = outcome.receipt.take();
        self.submit(Work::Outcome(Box::new(outcome)), receipt).await.map(drop)
    }

    async fn submit(&self, work: Work, receipt: Option<Receipt>) -> StoreResult<AnyBox> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job { work, receipt, reply: Some(reply) })
            .await
            .map_err(|_| StoreError::Backend("the store writer has stopped".into()))?;
        rx.await.map_err(|_| StoreError::Backend("the store writer stopped before committing".into()))?
    }

    /// Wait until everything queued before this call is committed.
    pub async fn flush(&self) -> StoreResult<()> {
        self.write(|_| Ok(())).await
    }
}

/// A wake-up: the writer commits the pending counts. A full queue means the
/// writer has batches to run, which apply them.
fn wake_writer(tx: &mpsc::Sender<Job>) {
    let _ = tx.try_send(Job { work: Work::Wake, receipt: None, reply: None });
}

/// Wakes the writer [`COUNTS_DELAY`] after counts became pending, if no
/// commit has carried them meanwhile. A count that arrives while it sleeps
/// is pending since after the sleep began, so it waits no longer than the
/// delay either. Ends when the writer's channel is gone.
async fn count_timer(started: Arc<Notify>, counts: Counts, tx: mpsc::WeakSender<Job>) {
    loop {
        started.notified().await;
        tokio::time::sleep(COUNTS_DELAY).await;
        let Some(tx) = tx.upgrade() else { return };
        if !counts.lock().unwrap_or_else(|p| p.into_inner()).is_empty() {
            wake_writer(&tx);
        }
    }
}

/// What the writer thread owns.
struct Writer {
    db: Arc<Slot>,
    durability: Durability,
    counts: Counts,
    commits: Arc<AtomicU64>,
    sealer: Option<Arc<dyn ReceiptSealer>>,
    /// Without a count timer a wake-up comes with the first count, so the
    /// writer keeps a timer of its own to wait for a write to carry them;
    /// with one it comes when they are due, and they are committed at once.
    waits_for_counts: bool,
}

fn writer_loop(w: Writer, mut rx: mpsc::Receiver<Job>) {
    // Only for the timed wait below (without a count timer); this thread is
    // not part of the server's runtime.
    let timer = match w.waits_for_counts.then(|| tokio::runtime::Builder::new_current_thread().enable_time().build()) {
        None => None,
        Some(Ok(rt)) => Some(rt),
        Some(Err(e)) => {
            tracing::error!(error = %e, "store writer: no timer; pending counts are committed at once");
            None
        }
    };
    let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
    let drain = |rx: &mut mpsc::Receiver<Job>, batch: &mut Vec<Job>| {
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
    };
    let mut open = true;
    while open {
        let Some(first) = rx.blocking_recv() else { break };
        batch.push(first);
        // Let the request threads (often on the same core) queue what they
        // are about to write before this batch closes.
        std::thread::yield_now();
        drain(&mut rx, &mut batch);
        // Only wake-ups for pending counts, and no count timer: give a real
        // write a moment to carry them.
        if let Some(rt) = &timer
            && batch.iter().all(|j| matches!(j.work, Work::Wake))
        {
            match rt.block_on(async { tokio::time::timeout(COUNTS_DELAY, rx.recv()).await }) {
                Ok(Some(job)) => {
                    batch.push(job);
                    drain(&mut rx, &mut batch);
                }
                Ok(None) => open = false,
                Err(_) => {}
            }
        }
        run_batch(&w, &mut batch);
        batch.clear();
    }
    // Every handle is gone: commit what is still pending.
    run_batch(&w, &mut batch);
    tracing::debug!("store writer stopped");
}

/// Apply the pending counts and the jobs in one transaction; jobs whose op
/// fails are answered with their error and the rest run again in a fresh
/// transaction. Counts that cannot be committed are put back for the next batch.
fn run_batch(w: &Writer, batch: &mut Vec<Job>) {
    let (durability, counts) = (w.durability, &w.counts);
    let pending_counts = std::mem::take(&mut *counts.lock().unwrap_or_else(|p| p.into_inner()));
    let mut pending: Vec<Job> = std::mem::take(batch);
    // Wake-ups carry nothing of their own.
    pending.retain(|j| !matches!(j.work, Work::Wake));
    if w.sealer.is_none() {
        let (unsigned, rest): (Vec<Job>, Vec<Job>) = pending.into_iter().partition(|j| j.receipt.is_some());
        pending = rest;
        for job in unsigned {
            reply(job, Err(StoreError::Backend("this store has no receipt signer; a receipt cannot be stored".into())));
        }
    }
    if pending.is_empty() && pending_counts.is_empty() {
        return;
    }
    // One more run of the batch on a reopened database, if it could not begin.
    let mut may_retry = true;
    let committed = loop {
        let db = match w.db.get() {
            Ok(db) => db,
            Err(_) => match w.db.reopen() {
                Ok(()) => continue,
                Err(e) => break fail_all(pending, &format!("storage unavailable: reopening the database failed: {e}")),
            },
        };
        let mut txn = match db.begin_write() {
            Ok(t) => t,
            Err(e) => {
                let why = format!("begin write: {e}");
                drop(db);
                if storage_failed(&w.db, &why) && std::mem::take(&mut may_retry) {
                    continue;
                }
                break fail_all(pending, &why);
            }
        };
        if let Err(e) = txn.set_durability(durability) {
            break fail_all(pending, &format!("set durability: {e}"));
        }
        if let Err(e) = apply_counts(&txn, &pending_counts) {
            let _ = txn.abort();
            break fail_all(pending, &format!("quota counters: {e}"));
        }
        if let Err(e) = store_receipts(&txn, w.sealer.as_deref(), &pending) {
            let _ = txn.abort();
            break fail_all(pending, &format!("receipts: {e}"));
        }
        let mut results = Vec::with_capacity(pending.len());
        // The outcomes first, together: their tables are released before
        // the other writes open what they need.
        let mut failed = write_outcomes(&txn, &pending).err();
        if failed.is_none() {
            for (i, job) in pending.iter_mut().enumerate() {
                let value = match &mut job.work {
                    Work::Op(op) => op(&txn),
                    Work::Outcome(_) | Work::Wake => Ok(Box::new(()) as AnyBox),
                };
                match value {
                    Ok(v) => results.push(v),
                    Err(e) => {
                        failed = Some((i, e));
                        break;
                    }
                }
            }
        }
        if let Some((i, err)) = failed {
            drop(results);
            if let Err(e) = txn.abort() {
                tracing::error!(error = %e, "aborting a store transaction failed");
            }
            let job = pending.remove(i);
            reply(job, Err(err));
            if pending.is_empty() && pending_counts.is_empty() {
                break true;
            }
            continue;
        }
        let committing = std::time::Instant::now();
        match txn.commit() {
            Ok(()) => {
                w.db.commit_succeeded();
                w.commits.fetch_add(1, Ordering::Relaxed);
                let m = crate::metrics::get();
                m.commit_duration.observe(committing.elapsed().as_secs_f64());
                m.commits.inc();
                m.commit_writes.observe(pending.len().max(1) as f64);
                for (job, value) in pending.into_iter().zip(results) {
                    reply(job, Ok(value));
                }
                break true;
            }
            Err(e) => {
                let why = format!("commit: {e}");
                drop(db);
                storage_failed(&w.db, &why);
                break fail_all(pending, &why);
            }
        }
    };
    if !committed && !pending_counts.is_empty() {
        let mut counts = counts.lock().unwrap_or_else(|p| p.into_inner());
        for (k, n) in pending_counts {
            *counts.entry(k).or_insert(0) += n;
        }
    }
}

/// A transaction could not begin or commit: record it and reopen the
/// database. True if it is open again.
fn storage_failed(db: &Slot, why: &str) -> bool {
    db.commit_failed(why);
    match db.reopen() {
        Ok(()) => true,
        Err(e) => {
            tracing::error!(error = %e, "storage: reopening the database failed; the next write tries again");
            false
        }
    }
}

/// Write the batch's request outcomes; on failure, which job failed. A
/// failure to close is put on the last outcome's job, so the batch is still
/// run again without one job at a time.
fn write_outcomes(txn: &WriteTransaction, jobs: &[Job]) -> Result<(), (usize, StoreError)> {
    let mut outcomes = super::chat::Outcomes::new(txn);
    let mut last = None;
    for (i, job) in jobs.iter().enumerate() {
        if let Work::Outcome(o) = &job.work {
            outcomes.apply(o).map_err(|e| (i, e))?;
            last = Some(i);
        }
    }
    match last {
        Some(i) => outcomes.close().map_err(|e| (i, e)),
        None => Ok(()),
    }
}

fn apply_counts(txn: &WriteTransaction, counts: &HashMap<String, u64>) -> Result<(), redb::Error> {
    if counts.is_empty() {
        return Ok(());
    }
    let mut t = txn.open_table(QUOTA)?;
    for (k, add) in counts {
        let n = t.get(k.as_str())?.map(|v| v.value()).unwrap_or(0);
        t.insert(k.as_str(), n + add)?;
    }
    Ok(())
}

/// Sign the batch's receipts together and insert them. Run again (one more
/// signature) when a failed write leaves the batch, so only committed
/// receipts are in a signed batch.
fn store_receipts(txn: &WriteTransaction, sealer: Option<&dyn ReceiptSealer>, jobs: &[Job]) -> StoreResult<()> {
    let receipts: Vec<Receipt> = jobs.iter().filter_map(|j| j.receipt.clone()).collect();
    let Some(sealer) = sealer.filter(|_| !receipts.is_empty()) else {
        return Ok(());
    };
    sealer.seal(receipts).map_or(Ok(()), |sealed| super::chat::store_sealed(txn, &sealed))
}

fn reply(job: Job, result: StoreResult<AnyBox>) {
    if let Some(tx) = job.reply {
        let _ = tx.send(result);
    }
}

/// Answer every job with the error; false (nothing was committed).
fn fail_all(jobs: Vec<Job>, msg: &str) -> bool {
    tracing::error!(error = msg, "store write failed");
    for job in jobs {
        reply(job, Err(StoreError::Backend(msg.to_owned())));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::ReadableDatabase;

    use crate::redb::tables::RECEIPTS;

    fn open() -> (tempfile::TempDir, Arc<Slot>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.redb");
        let db = redb::Database::create(&path).expect("db");
        (dir, Arc::new(Slot::new(db, &path)))
    }

    fn count(db: &Slot, k: &str) -> u64 {
        let txn = db.get().expect("db").begin_read().expect("read");
        match txn.open_table(QUOTA) {
            Ok(t) => t.get(k).expect("get").map(|v| v.value()).unwrap_or(0),
            Err(redb::TableError::TableDoesNotExist(_)) => 0,
            Err(e) => panic!("{e}"),
        }
    }

    /// An in-memory file whose writes and syncs fail while `fail` is set.
    #[derive(Debug)]
    struct Flaky {
        inner: Arc<redb::backends::InMemoryBackend>,
        fail: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Flaky {
        fn check(&self) -> std::io::Result<()> {
            if self.fail.load(Ordering::SeqCst) { Err(std::io::Error::from_raw_os_error(27)) } else { Ok(()) }
        }
    }

    impl redb::StorageBackend for Flaky {
        fn len(&self) -> std::io::Result<u64> {
            self.inner.len()
        }
        fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
            self.inner.read(offset, out)
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            self.check()?;
            self.inner.set_len(len)
        }
        fn sync_data(&self) -> std::io::Result<()> {
            self.check()?;
            self.inner.sync_data()
        }
        fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
            self.check()?;
            self.inner.write(offset, data)
        }
    }

    fn put(gc: &GroupCommit, k: &'static str, n: u64) -> impl std::future::Future<Output = StoreResult<()>> {
        gc.write(move |txn| {
            txn.open_table(QUOTA)
                .map_err(|e| StoreError::Backend(e.to_string()))?
                .insert(k, n)
                .map_err(|e| StoreError::Backend(e.to_string()))?;
            Ok(())
        })
    }

    #[tokio::test]
    async fn after_an_io_error_the_writer_reopens_and_reports_until_a_commit_succeeds() {
        let memory = Arc::new(redb::backends::InMemoryBackend::new());
        let fail = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open = {
            let (memory, fail) = (memory.clone(), fail.clone());
            move || redb::Database::builder().create_with_backend(Flaky { inner: memory.clone(), fail: fail.clone() })
        };
        let first = open().expect("open");
        let slot = Arc::new(Slot::with_opener(first, Box::new(move || Ok(open()?))));
        let gc = GroupCommit::start(slot.clone(), Durability::Immediate, None).expect("start");
        put(&gc, "acknowledged", 1).await.expect("a healthy commit");
        assert_eq!(slot.failure(), None);

        fail.store(true, Ordering::SeqCst);
        let r = put(&gc, "lost", 2).await;
        assert!(matches!(r, Err(StoreError::Backend(_))), "{r:?}");
        assert!(slot.failure().is_some(), "the failed commit is reported");
        // redb alone would refuse every write from now on ("Previous I/O error").
        fail.store(false, Ordering::SeqCst);
        put(&gc, "after", 3).await.expect("a write after the disk recovered commits on the reopened database");
        assert_eq!(slot.failure(), None, "a commit that succeeds clears the report");
        assert_eq!(count(&slot, "acknowledged"), 1, "acknowledged data survives the reopen");
        assert_eq!(count(&slot, "lost"), 0, "the failed commit left nothing");
        assert_eq!(count(&slot, "after"), 3);
    }

    #[tokio::test]
    async fn counts_ride_with_the_next_write_and_commit_alone_when_idle() {
        let (_dir, db) = open();
        let gc = GroupCommit::start(db.clone(), Durability::Immediate, None).expect("start");
        for _ in 0..5 {
            gc.add_counts(["k/d:1", "k/m:1"]);
        }
        // A write queued after the counts is committed with them, in one commit.
        gc.write(|_| Ok(())).await.expect("write");
        assert_eq!(count(&db, "k/d:1"), 5);
        assert_eq!(count(&db, "k/m:1"), 5);
        assert_eq!(gc.commits(), 1, "the counts rode along with the write");
        // With nothing else written, the wake-up commits them on its own.
        gc.add_counts(["k/d:1"]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while count(&db, "k/d:1") != 6 {
            assert!(std::time::Instant::now() < deadline, "the pending count was never committed");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn a_failing_write_does_not_lose_the_counts_or_its_neighbours() {
        let (_dir, db) = open();
        let gc = GroupCommit::start(db.clone(), Durability::Immediate, None).expect("start");
        gc.add_counts(["k/d:1"]);
        let bad = gc.write(|_| -> StoreResult<()> { Err(StoreError::Conflict("no".into())) });
        let good = gc.write(|txn| {
            txn.open_table(QUOTA)
                .map_err(|e| StoreError::Backend(e.to_string()))?
                .insert("other", 7)
                .map_err(|e| StoreError::Backend(e.to_string()))?;
            Ok(())
        });
        let (bad, good) = tokio::join!(bad, good);
        assert!(matches!(bad, Err(StoreError::Conflict(_))));
        good.expect("the neighbour commits");
        assert_eq!(count(&db, "k/d:1"), 1, "counted once, not once per attempt");
        assert_eq!(count(&db, "other"), 7);
    }

    /// Records the size of every batch it signs.
    #[derive(Default)]
    struct Recording(Mutex<Vec<usize>>);

    impl ReceiptSealer for Recording {
        fn seal(&self, receipts: Vec<Receipt>) -> Option<crate::receipts::Sealed> {
            self.0.lock().expect("lock").push(receipts.len());
            let batch = crate::receipts::SignedBatch { root: String::new(), signature: "sig".into(), leaves: Vec::new() };
            Some(crate::receipts::Sealed::Batch { batch, receipts })
        }
    }

    fn receipt(id: &str) -> Receipt {
        crate::receipts::sample(id)
    }

    fn stored(db: &Slot, id: &str) -> bool {
        let txn = db.get().expect("db").begin_read().expect("read");
        txn.open_table(RECEIPTS).ok().and_then(|t| t.get(id).expect("get")).is_some()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_receipts_of_one_commit_are_signed_together_and_a_failed_write_leaves_its_batch() {
        let (_dir, db) = open();
        let sealer = Arc::new(Recording::default());
        let gc = GroupCommit::start(db.clone(), Durability::Immediate, Some(sealer.clone())).expect("start");
        // Hold the writer in a first write while six receipts queue up behind it.
        let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let release_rx = Mutex::new(release_rx);
        #[expect(clippy::disallowed_methods, reason = "a test's blocking writer, joined by the test")]
        let blocker = tokio::spawn({
            let gc = gc.clone();
            async move {
                gc.write(move |_| {
                    let _ = entered_tx.send(());
                    let _ = release_rx.lock().expect("lock").recv_timeout(std::time::Duration::from_secs(10));
                    Ok(())
                })
                .await
            }
        });
        entered_rx.recv_timeout(std::time::Duration::from_secs(10)).expect("the writer runs the blocker");
        let writes: Vec<_> = (0..6)
            .map(|i| {
                let gc = gc.clone();
                #[expect(clippy::disallowed_methods, reason = "a test's writers, joined by the test")]
                tokio::spawn(async move {
                    gc.write_with_receipt(Some(receipt(&format!("rcpt_{i}"))), move |_| {
                        if i == 3 { Err(StoreError::Conflict("refused".into())) } else { Ok(()) }
                    })
                    .await
                })
            })
            .collect();
        // Let them queue, then let the writer go on.
        while gc.tx.capacity() > QUEUE - 6 {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        release_tx.send(()).expect("release");
        blocker.await.expect("join").expect("blocker commits");
        for (i, w) in writes.into_iter().enumerate() {
            let r = w.await.expect("join");
            assert_eq!(r.is_ok(), i != 3, "write {i}: {r:?}");
        }
        // One batch: signed with all six, then again without the failed one.
        assert_eq!(*sealer.0.lock().expect("lock"), vec![6, 5]);
        for i in 0..6 {
            assert_eq!(stored(&db, &format!("rcpt_{i}")), i != 3, "receipt {i}");
        }
    }

    #[tokio::test]
    async fn without_a_signer_a_receipt_write_fails_and_others_commit() {
        let (_dir, db) = open();
        let gc = GroupCommit::start(db.clone(), Durability::Immediate, None).expect("start");
        let r = gc.write_with_receipt(Some(receipt("rcpt_x")), |_| Ok(())).await;
        assert!(matches!(r, Err(StoreError::Backend(ref m)) if m.contains("receipt signer")), "{r:?}");
        assert!(!stored(&db, "rcpt_x"));
        gc.write(|_| Ok(())).await.expect("a write without a receipt commits");
    }

    #[tokio::test(start_paused = true)]
    async fn pending_counts_are_committed_when_the_count_timer_is_due() {
        let (_dir, db) = open();
        let gc = GroupCommit::start(db.clone(), Durability::Immediate, None).expect("start");
        gc.add_counts(["k/d:2"]);
        gc.add_counts(["k/d:2"]);
        // The timer task takes the start and sleeps on the (paused) runtime clock.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(gc.commits(), 0, "a count alone wakes no one before it is due");
        tokio::time::advance(COUNTS_DELAY).await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while count(&db, "k/d:2") != 2 {
            assert!(std::time::Instant::now() < deadline, "the due counts were never committed");
            tokio::task::yield_now().await;
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert_eq!(gc.commits(), 1, "both counts in one commit");
    }

    #[test]
    fn without_a_runtime_the_first_count_wakes_the_writer_and_it_commits_them() {
        let (_dir, db) = open();
        let gc = GroupCommit::start(db.clone(), Durability::Immediate, None).expect("start outside a runtime");
        assert!(gc.count_timer.is_none());
        gc.add_counts(["k/d:3"]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while count(&db, "k/d:3") != 1 {
            assert!(std::time::Instant::now() < deadline, "the pending count was never committed");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    #[test]
    fn counts_are_committed_when_the_runtime_of_the_timer_has_shut_down() {
        let (_dir, db) = open();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let gc = rt.block_on(async { GroupCommit::start(db.clone(), Durability::Immediate, None) }).expect("start");
        assert!(gc.count_timer.is_some());
        drop(rt);
        gc.add_counts(["k/d:4"]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while count(&db, "k/d:4") != 1 {
            assert!(std::time::Instant::now() < deadline, "the count waited for a timer whose runtime is gone");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    #[tokio::test]
    async fn pending_counts_are_committed_when_the_last_handle_goes() {
        let (_dir, db) = open();
        let gc = GroupCommit::start(db.clone(), Durability::Immediate, None).expect("start");
        // The wake-up may or may not have run when the handle goes.
        gc.add_counts(["k/d:9", "k/d:9"]);
        drop(gc);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while count(&db, "k/d:9") != 2 {
            assert!(std::time::Instant::now() < deadline, "counts lost at shutdown");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
}
