//! Group commit: one writer thread takes every write that is waiting, applies
//! them in one transaction and commits once (fsync once), then answers each
//! caller. Under load the cost of the fsync is shared by all the writes that
//! queued up while the previous commit ran.
//!
//! Each write is a closure that must check its preconditions before it
//! changes anything. If one of them fails anyway, the transaction is thrown
//! away and the batch is run again without it, so a failed write never leaves
//! half of itself behind and never takes its neighbours down with it.

use std::any::Any;
use std::sync::Arc;

use redb::{Database, Durability, WriteTransaction};
use tokio::sync::{mpsc, oneshot};

use crate::store::{StoreError, StoreResult};

type AnyBox = Box<dyn Any + Send>;
type Op = Box<dyn FnMut(&WriteTransaction) -> StoreResult<AnyBox> + Send>;

struct Job {
    op: Op,
    reply: oneshot::Sender<StoreResult<AnyBox>>,
}

/// Most writes committed together.
const MAX_BATCH: usize = 512;
/// Bound on queued writes: callers wait (backpressure) rather than grow memory.
const QUEUE: usize = 8192;

/// Handle to the writer thread. Dropping every handle stops the thread after it
/// has committed what was queued.
#[derive(Clone)]
pub struct GroupCommit {
    tx: mpsc::Sender<Job>,
}

impl GroupCommit {
    pub fn start(db: Arc<Database>, durability: Durability) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>(QUEUE);
        std::thread::Builder::new().name("gatehouse-store-writer".into()).spawn(move || writer_loop(db, durability, rx))?;
        Ok(GroupCommit { tx })
    }

    /// Run `op` in the next group commit and return its result once it is durable.
    pub async fn write<T, F>(&self, mut op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnMut(&WriteTransaction) -> StoreResult<T> + Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let op: Op = Box::new(move |txn| op(txn).map(|v| Box::new(v) as AnyBox));
        self.tx.send(Job { op, reply }).await.map_err(|_| StoreError::Backend("the store writer has stopped".into()))?;
        let out = rx.await.map_err(|_| StoreError::Backend("the store writer stopped before committing".into()))??;
        out.downcast::<T>().map(|b| *b).map_err(|_| StoreError::Backend("store writer returned a value of the wrong type".into()))
    }

    /// Wait until everything queued before this call is committed.
    pub async fn flush(&self) -> StoreResult<()> {
        self.write(|_| Ok(())).await
    }
}

fn writer_loop(db: Arc<Database>, durability: Durability, mut rx: mpsc::Receiver<Job>) {
    let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        run_batch(&db, durability, &mut batch);
        batch.clear();
    }
    tracing::debug!("store writer stopped");
}

/// Apply the jobs in one transaction; jobs whose op fails are answered with
/// their error and the rest run again in a fresh transaction.
fn run_batch(db: &Database, durability: Durability, batch: &mut Vec<Job>) {
    let mut pending: Vec<Job> = std::mem::take(batch);
    loop {
        let mut txn = match db.begin_write() {
            Ok(t) => t,
            Err(e) => return fail_all(pending, &format!("begin write: {e}")),
        };
        if let Err(e) = txn.set_durability(durability) {
            return fail_all(pending, &format!("set durability: {e}"));
        }
        let mut results = Vec::with_capacity(pending.len());
        let mut failed = None;
        for (i, job) in pending.iter_mut().enumerate() {
            match (job.op)(&txn) {
                Ok(v) => results.push(v),
                Err(e) => {
                    failed = Some((i, e));
                    break;
                }
            }
        }
        if let Some((i, err)) = failed {
            drop(results);
            if let Err(e) = txn.abort() {
                tracing::error!(error = %e, "aborting a store transaction failed");
            }
            let job = pending.remove(i);
            let _ = job.reply.send(Err(err));
            if pending.is_empty() {
                return;
            }
            continue;
        }
        match txn.commit() {
            Ok(()) => {
                for (job, value) in pending.into_iter().zip(results) {
                    let _ = job.reply.send(Ok(value));
                }
            }
            Err(e) => fail_all(pending, &format!("commit: {e}")),
        }
        return;
    }
}

fn fail_all(jobs: Vec<Job>, msg: &str) {
    tracing::error!(error = msg, "store write failed");
    for job in jobs {
        let _ = job.reply.send(Err(StoreError::Backend(msg.to_owned())));
    }
}
