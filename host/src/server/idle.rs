//! Activity for the keep-alive idle timeout: only requests count. A request
//! is active from its arrival until its response body has been sent (or
//! dropped); the connection is idle when none is active, counted from when
//! the last one ended. Bytes on the wire do not count, so an HTTP/2 client
//! that only sends PINGs (which the server answers) or SETTINGS is closed
//! like a silent one.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use tokio::time::Instant;

/// One connection's requests: how many are active, and when the last ended
/// (milliseconds since the connection opened).
#[derive(Debug)]
pub struct Activity {
    opened: Instant,
    last_ms: AtomicU64,
    active: AtomicUsize,
}

impl Activity {
    pub fn new() -> Self {
        Activity { opened: Instant::now(), last_ms: AtomicU64::new(0), active: AtomicUsize::new(0) }
    }

    fn touch(&self) {
        self.last_ms.store(self.opened.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.opened + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }

    /// A request arrived; it is active until the returned guard is dropped.
    pub fn begin(self: &Arc<Self>) -> InRequest {
        self.active.fetch_add(1, Ordering::AcqRel);
        self.touch();
        InRequest { activity: Arc::clone(self) }
    }

    /// How long the connection has had no request.
    pub fn idle_for(&self) -> Duration {
        if self.active.load(Ordering::Acquire) > 0 {
            return Duration::ZERO;
        }
        Instant::now().saturating_duration_since(self.last())
    }

    /// When the connection will have idled for `timeout` if no request comes
    /// (while one is active, a timeout from now: checked again then).
    pub fn idle_deadline(&self, timeout: Duration) -> Instant {
        if self.active.load(Ordering::Acquire) > 0 {
            return Instant::now() + timeout;
        }
        self.last() + timeout
    }
}

/// An active request; dropped when its response has been sent.
#[derive(Debug)]
pub struct InRequest {
    activity: Arc<Activity>,
}

impl Drop for InRequest {
    fn drop(&mut self) {
        // Touch first: the connection idles from now, not from the request's start.
        self.activity.touch();
        self.activity.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that holds `guard` until hyper has sent its end (or
/// dropped it, for a reset stream or a closed connection).
pub struct Holding<B, G> {
    inner: B,
    _guard: G,
}

impl<B, G> Holding<B, G> {
    pub fn new(inner: B, guard: G) -> Self {
        Holding { inner, _guard: guard }
    }
}

impl<B: Body + Unpin, G: Unpin> Body for Holding<B, G> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn requests_move_the_deadline_and_nothing_else_does() {
        let activity = Arc::new(Activity::new());
        let timeout = Duration::from_secs(10);
        let opened = activity.idle_deadline(timeout);

        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(activity.idle_deadline(timeout), opened, "nothing happened yet");
        assert!(activity.idle_for() >= Duration::from_secs(4));

        let request = activity.begin();
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(activity.idle_for(), Duration::ZERO, "a request running longer than the timeout keeps it open");
        assert!(activity.idle_deadline(timeout) > Instant::now(), "the deadline moves with a running request");
        drop(request);
        assert_eq!(activity.idle_for(), Duration::ZERO, "idle from the end of the request");

        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(activity.idle_for() >= timeout, "silence (or pings) does not count");
    }
}
