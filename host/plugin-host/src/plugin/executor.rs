//! The sync-over-async executor plugin calls run on: a wasmtime async call
//! driven to completion on the calling thread ([`drive`]), and blocking host
//! work done where blocking is allowed ([`off_async`]).

use super::*;

/// Run blocking work where blocking is allowed: on a multi-threaded runtime's
/// worker, `block_in_place` hands the worker's tasks to another thread first
/// (nested calls, and threads that are not workers, just run `f`).
pub(crate) fn off_async<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Wakes the thread that drives a call.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A runtime for WASI's timers and blocking file work when the caller has
/// none that can drive them (no runtime, or a current-thread one that this
/// thread would be blocking).
static FALLBACK: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("gatehouse-wasi")
        .enable_all()
        .build()
        .expect("cannot start the WASI fallback runtime")
});

/// Run a plugin call (a wasmtime async call) to completion on this thread.
///
/// On a multi-threaded runtime the call is polled once in place: it either
/// finishes (the normal case) or yields — a tick passed, or it waits on WASI
/// I/O — and is then finished in `block_in_place`, parked between polls, while
/// another thread runs the worker's tasks and the runtime's drivers. Anywhere
/// else (no runtime, or a current-thread one this thread would block) it runs
/// with the fallback runtime's context entered, which drives WASI's timers.
pub(crate) fn drive<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                return v;
            }
            tokio::task::block_in_place(|| park_until_ready(fut, &mut cx))
        }
        _ => {
            let _guard = FALLBACK.enter();
            park_until_ready(fut, &mut cx)
        }
    }
}

fn park_until_ready<F: Future>(mut fut: std::pin::Pin<&mut F>, cx: &mut Context<'_>) -> F::Output {
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return v;
        }
        std::thread::park();
    }
}
