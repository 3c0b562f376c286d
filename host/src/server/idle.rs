//! Traffic tracking for the keep-alive idle timeout: a connection's stream
//! notes the time of its last read or write; the connection task shuts the
//! connection down once nothing has moved for the timeout.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// When a connection last carried bytes, in milliseconds since it opened.
#[derive(Debug)]
pub struct Activity {
    opened: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    pub fn new() -> Self {
        Activity { opened: Instant::now(), last_ms: AtomicU64::new(0) }
    }

    fn touch(&self) {
        self.last_ms.store(self.opened.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.opened + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }

    /// How long the connection has carried nothing.
    pub fn idle_for(&self) -> Duration {
        Instant::now().saturating_duration_since(self.last())
    }

    /// When the connection will have idled for `timeout` if nothing moves before.
    pub fn idle_deadline(&self, timeout: Duration) -> Instant {
        self.last() + timeout
    }
}

/// A stream that records its traffic in an [`Activity`].
pub struct Tracked<T> {
    inner: T,
    activity: Arc<Activity>,
}

impl<T> Tracked<T> {
    pub fn new(inner: T, activity: Arc<Activity>) -> Self {
        Tracked { inner, activity }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Tracked<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(res, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        res
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tracked<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(res, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        res
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(res, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        res
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn reads_and_writes_move_the_deadline_and_silence_does_not() {
        let activity = Arc::new(Activity::new());
        let (a, mut b) = tokio::io::duplex(64);
        let mut tracked = Tracked::new(a, activity.clone());
        let timeout = Duration::from_secs(10);
        let opened = activity.idle_deadline(timeout);

        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(activity.idle_deadline(timeout), opened, "nothing moved yet");
        assert!(activity.idle_for() >= Duration::from_secs(4));

        b.write_all(b"GET").await.expect("write");
        let mut buf = [0u8; 3];
        tracked.read_exact(&mut buf).await.expect("read");
        assert!(activity.idle_deadline(timeout) >= opened + Duration::from_secs(4), "a read counts");
        assert_eq!(activity.idle_for(), Duration::ZERO);

        tokio::time::advance(Duration::from_secs(3)).await;
        tracked.write_all(b"200").await.expect("write");
        assert_eq!(activity.idle_for(), Duration::ZERO, "a write counts");

        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(activity.idle_for() >= timeout, "silence does not");
    }
}
