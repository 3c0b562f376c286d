//! The end of the shutdown grace for streams still running.
//!
//! A stream still open when the grace ends is cut the way an upstream
//! failure cuts it: an `error` frame (code [`CODE`]) and `[DONE]`, then its
//! usage, receipt and idempotency outcome are committed like any other
//! stream's, and only then does the server close the store
//! (docs/decisions/shutdown.md). Without this, the runtime dropped the
//! stream's task when `main` returned: no final frame, nothing billed, and an
//! idempotency key left in flight until its lease lapsed.
//!
//! One `watch` channel does both jobs: each stream holds a receiver and
//! watches it for the cut, and the sender learns that every stream has ended
//! when the last receiver is gone.

use std::time::Duration;

use tokio::sync::watch;

/// `data.code` of the error frame of a stream cut at shutdown.
pub const CODE: &str = "server_shutdown";

/// How long a cut stream's last frames may wait for a client that does not read.
pub const LAST_FRAMES: Duration = Duration::from_secs(1);

/// The streams being served, and the signal that cuts them.
pub struct Streams {
    cut: watch::Sender<bool>,
}

impl Default for Streams {
    fn default() -> Self {
        Streams { cut: watch::Sender::new(false) }
    }
}

impl Streams {
    /// Register a stream: it watches the returned receiver and drops it when it has ended.
    pub fn open(&self) -> watch::Receiver<bool> {
        self.cut.subscribe()
    }

    /// Cut every open stream (and any opened from now on).
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Streams not ended yet.
    pub fn open_count(&self) -> usize {
        self.cut.receiver_count()
    }

    /// Wait until every stream has ended (its outcome committed), at most `limit`;
    /// false if some were still running then.
    pub async fn ended(&self, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.cut.closed()).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cut_reaches_open_streams_and_ended_waits_for_them() {
        let streams = Streams::default();
        let mut a = streams.open();
        assert!(!streams.ended(Duration::from_millis(10)).await, "an open stream has not ended");
        streams.cut();
        a.wait_for(|c| *c).await.expect("cut seen");
        assert!(*streams.open().borrow(), "a stream opened after the cut sees it at once");
        drop(a);
        assert!(streams.ended(Duration::from_secs(5)).await);
        assert_eq!(streams.open_count(), 0);
    }
}
