//! The server's own background loops that work on the app state: the
//! console overview's sampler (`api::admin::overview::run`), the merge of
//! stored knowledge bases into the running config (`api::admin::indexes::run`),
//! and the plugin registry's own work (`AppState::run_registry_work`: shadow
//! counts saved; at shutdown, the registry's follower and the shadow policy
//! worker stopped).
//!
//! They are started here, once per server, after the state exists, and are
//! stopped and joined at shutdown before the store closes, like the other
//! tracked tasks: each loop waits on the same stop signal at every await, so
//! it ends at once, even in the middle of a store call. Their state lives in
//! the app state, never in process-wide globals, so two servers in one
//! process (tests) each have their own loops and their own state.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::app::AppState;

/// How long shutdown waits for the loops after telling them to stop; they
/// stop at their next await, so only a loop that ignores the signal meets it.
const JOIN_WITHIN: Duration = Duration::from_secs(2);

/// The running loops and the signal that stops them.
pub struct Background {
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl Background {
    /// Start every loop for `app`. Call once per server, inside the runtime.
    pub fn start(app: &AppState) -> Background {
        let mut b = Background::new();
        b.spawn(|stop| crate::api::admin::overview::run(app.clone(), stop));
        b.spawn(|stop| crate::api::admin::indexes::run(app.clone(), stop));
        // Saves shadow counts; at the stop, stops the plugin registry's
        // follower and the shadow policy worker (running from the state's start).
        b.spawn(|stop| app.clone().run_registry_work(stop));
        b
    }

    fn new() -> Background {
        Background { stop: watch::channel(false).0, tasks: JoinSet::new() }
    }

    /// Run `body` until it returns; it gets the stop signal to wait on.
    fn spawn<F, Fut>(&mut self, body: F)
    where
        F: FnOnce(watch::Receiver<bool>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.tasks.spawn(body(self.stop.subscribe()));
    }

    /// Stop the loops and wait for them; those still running after
    /// [`JOIN_WITHIN`] are aborted and logged. Returns how many ended by themselves.
    pub async fn shutdown(mut self) -> usize {
        let _ = self.stop.send(true);
        let mut ended = 0;
        let joined = tokio::time::timeout(JOIN_WITHIN, async {
            while let Some(done) = self.tasks.join_next().await {
                ended += 1;
                if let Err(e) = done {
                    tracing::error!(error = %e, "a background loop failed");
                }
            }
        })
        .await;
        if joined.is_err() {
            tracing::error!(left = self.tasks.len(), "background loops still running after the stop signal; aborting them");
            self.tasks.abort_all();
            while self.tasks.join_next().await.is_some() {}
        }
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shutdown::stopped;

    /// A loop like the server's: a long wait for its next round, raced with the stop signal.
    async fn looping(mut stop: watch::Receiver<bool>, rounds: std::sync::Arc<std::sync::atomic::AtomicU32>) {
        loop {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(60)) => {}
                () = stopped(&mut stop) => return,
            }
            rounds.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_stops_and_joins_loops_in_the_middle_of_a_wait() {
        let rounds = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let mut b = Background::new();
        for _ in 0..2 {
            let rounds = rounds.clone();
            b.spawn(move |stop| looping(stop, rounds));
        }
        tokio::time::sleep(Duration::from_secs(90)).await;
        let at = tokio::time::Instant::now();
        assert_eq!(b.shutdown().await, 2, "both loops ended by themselves");
        assert!(at.elapsed() < Duration::from_millis(10), "joined at once, not after the wait: {:?}", at.elapsed());
        assert_eq!(rounds.load(std::sync::atomic::Ordering::SeqCst), 2, "each ran its one round before the stop");
    }

    #[tokio::test(start_paused = true)]
    async fn a_loop_that_ignores_the_signal_is_aborted_after_the_bound() {
        let mut b = Background::new();
        b.spawn(|_stop| std::future::pending::<()>());
        b.spawn(|mut stop| async move { stopped(&mut stop).await });
        let at = tokio::time::Instant::now();
        assert_eq!(b.shutdown().await, 1);
        assert!(at.elapsed() >= JOIN_WITHIN, "{:?}", at.elapsed());
    }
}
