//! The failover chain: try each entry in order, skip models in cooldown,
//! stop at the first success or at a failure whose trigger is not in `on`.
//! The runner is generic over what one attempt does, so the non-streaming
//! path (whole answer) and the streaming path (up to the first token) share it.
//!
//! A model skipped because it is cooling down is a failure of the class that
//! opened its breaker: recorded with reason `cooldown`, a failover hop like any
//! other, and the end of the chain when that class is not in `on`. What counts
//! against a breaker is decided here ([`Counting`]); see
//! docs/decisions/breakers-and-failover.md.

use std::collections::HashSet;
use std::future::Future;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::breaker::{Availability, Breakers};
use super::types::{AttemptError, ChainEntry, Trigger};

/// One line of `attempts[]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attempt {
    pub model: String,
    /// `success`, `failed` or `skipped`.
    pub status: &'static str,
    /// Trigger name, `cooldown` or `policy`; none for a success.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    pub latency_ms: u64,
    /// What went wrong, for the caller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A move from a failed model to the next one (`api:model_failover`).
#[derive(Debug, Clone, PartialEq)]
pub struct Failover {
    pub failed_model: String,
    pub reason: &'static str,
    pub next_model: String,
    pub latency_ms: u64,
}

/// How a chain ended.
pub enum ChainResult<T> {
    Served {
        value: T,
        /// Index of the serving entry.
        index: usize,
        attempts: Vec<Attempt>,
        failovers: Vec<Failover>,
    },
    Exhausted {
        attempts: Vec<Attempt>,
        failovers: Vec<Failover>,
        /// Every failure was a rate limit (429 rather than 502).
        all_rate_limited: bool,
    },
}

/// Which failed attempts count against a model's breaker. Breakers are
/// shared by every key, so they count by the operator's deadlines: a timeout
/// under a deadline the caller set below the operator's says nothing of the
/// model's health. Client errors never count.
#[derive(Debug, Clone, Copy)]
pub struct Counting {
    /// The operator's deadline for a whole answer (`chat.timeout_ms`).
    pub timeout: Duration,
    /// The operator's deadline for a stream's first token (`chat.first_token_timeout_ms`).
    pub first_token_timeout: Duration,
    /// The chain runs up to a stream's first token, so the first-token deadline is the one that fires.
    pub stream: bool,
}

impl Counting {
    fn counts(&self, entry: &ChainEntry, trigger: Trigger) -> bool {
        match trigger {
            Trigger::ClientError => false,
            Trigger::Timeout if self.stream => entry.first_token_timeout >= self.first_token_timeout,
            Trigger::Timeout => entry.timeout >= self.timeout,
            Trigger::ServerError | Trigger::RateLimit => true,
        }
    }
}

/// The hop from the last failed model (if any) to `next`.
fn hop(pending: &mut Option<(String, &'static str, u64)>, failovers: &mut Vec<Failover>, next: &str) {
    if let Some((failed_model, reason, latency_ms)) = pending.take() {
        crate::metrics::get().failovers.get_or_create(&crate::metrics::ReasonLabel { reason: reason.to_owned() }).inc();
        failovers.push(Failover { failed_model, reason, next_model: next.to_owned(), latency_ms });
    }
}

/// Run the chain. `skip` may exclude an entry before it is tried (reason recorded).
pub async fn run<'a, T, F, Fut>(
    chain: &'a [ChainEntry],
    on: &HashSet<Trigger>,
    breakers: &Breakers,
    counting: Counting,
    skip: impl Fn(&ChainEntry) -> Option<&'static str>,
    mut attempt: F,
) -> ChainResult<T>
where
    F: FnMut(usize, &'a ChainEntry) -> Fut,
    Fut: Future<Output = Result<T, AttemptError>>,
{
    let mut attempts = Vec::with_capacity(chain.len());
    let mut failovers = Vec::new();
    let mut failures = 0usize;
    let mut rate_limited = 0usize;
    let mut pending_failover: Option<(String, &'static str, u64)> = None;
    // Models whose breaker this request already counted a failure against (at most 3 distinct).
    let mut counted: Vec<&'a str> = Vec::new();
    for (i, entry) in chain.iter().enumerate() {
        let model = entry.model.as_str().to_owned();
        if let Some(reason) = skip(entry) {
            attempts.push(Attempt { model, status: "skipped", reason: Some(reason), latency_ms: 0, message: None });
            continue;
        }
        if let Availability::Cooldown(class) = breakers.availability(&model, Instant::now()) {
            // A failure of the class that opened the breaker, without a call.
            hop(&mut pending_failover, &mut failovers, &model);
            failures += 1;
            if class == Trigger::RateLimit {
                rate_limited += 1;
            }
            attempts.push(Attempt {
                model: model.clone(),
                status: "skipped",
                reason: Some("cooldown"),
                latency_ms: 0,
                message: Some(format!("the model failed repeatedly ({}) and is cooling down", class.as_str())),
            });
            if !on.contains(&class) {
                break;
            }
            pending_failover = Some((model, "cooldown", 0));
            continue;
        }
        hop(&mut pending_failover, &mut failovers, &model);
        let started = Instant::now();
        let result = attempt(i, entry).await;
        let latency_ms = started.elapsed().as_millis() as u64;
        match result {
            Ok(value) => {
                breakers.success(&model);
                attempts.push(Attempt { model, status: "success", reason: None, latency_ms, message: None });
                return ChainResult::Served { value, index: i, attempts, failovers };
            }
            Err(err) => {
                let name = entry.model.as_str();
                if counting.counts(entry, err.trigger) && !counted.contains(&name) {
                    breakers.failure(&model, err.trigger, Instant::now());
                    counted.push(name);
                } else {
                    breakers.inconclusive(&model);
                }
                failures += 1;
                if err.trigger == Trigger::RateLimit {
                    rate_limited += 1;
                }
                let reason = err.trigger.as_str();
                attempts.push(Attempt {
                    model: model.clone(),
                    status: "failed",
                    reason: Some(reason),
                    latency_ms,
                    message: Some(err.message),
                });
                if !on.contains(&err.trigger) {
                    break;
                }
                pending_failover = Some((model, reason, latency_ms));
            }
        }
    }
    ChainResult::Exhausted { attempts, failovers, all_rate_limited: failures > 0 && failures == rate_limited }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::types::ModelId;
    use std::time::Duration;

    fn chain(models: &[&str]) -> Vec<ChainEntry> {
        models
            .iter()
            .map(|m| ChainEntry {
                model: ModelId::parse(m).expect("model"),
                timeout: Duration::from_secs(1),
                first_token_timeout: Duration::from_secs(1),
            })
            .collect()
    }

    fn default_on() -> HashSet<Trigger> {
        [Trigger::Timeout, Trigger::ServerError, Trigger::RateLimit].into()
    }

    fn outcome(m: &str) -> Result<String, AttemptError> {
        match m.split('/').nth(1).unwrap_or_default() {
            "ok" => Ok(format!("answer from {m}")),
            "e500" => Err(AttemptError::new(Trigger::ServerError, "boom")),
            "e429" => Err(AttemptError::new(Trigger::RateLimit, "slow down")),
            "e400" => Err(AttemptError::new(Trigger::ClientError, "bad")),
            _ => Err(AttemptError::new(Trigger::Timeout, "late")),
        }
    }

    /// The operator's deadlines: those of `chain()`'s entries.
    const OPERATOR: Counting = Counting { timeout: Duration::from_secs(1), first_token_timeout: Duration::from_secs(1), stream: false };

    async fn go(models: &[&str], on: HashSet<Trigger>, b: &Breakers) -> ChainResult<String> {
        run(
            &chain(models),
            &on,
            b,
            OPERATOR,
            |_| None,
            |_, e| {
                let m = e.model.as_str().to_owned();
                async move { outcome(&m) }
            },
        )
        .await
    }

    fn breakers() -> Breakers {
        Breakers::new(100, Duration::from_secs(30))
    }

    #[tokio::test]
    async fn fails_over_to_the_next_model() {
        match go(&["a/e500", "b/ok"], default_on(), &breakers()).await {
            ChainResult::Served { value, index, attempts, failovers } => {
                assert_eq!(value, "answer from b/ok");
                assert_eq!(index, 1);
                assert_eq!(attempts.len(), 2);
                assert_eq!(attempts[0].reason, Some("server_error"));
                assert_eq!(attempts[1].status, "success");
                assert_eq!(failovers.len(), 1);
                assert_eq!(failovers[0].failed_model, "a/e500");
                assert_eq!(failovers[0].next_model, "b/ok");
            }
            ChainResult::Exhausted { .. } => panic!("should be served"),
        }
    }

    #[tokio::test]
    async fn all_rate_limits_vs_mixed() {
        match go(&["a/e429", "b/e429"], default_on(), &breakers()).await {
            ChainResult::Exhausted { all_rate_limited, attempts, .. } => {
                assert!(all_rate_limited);
                assert_eq!(attempts.len(), 2);
            }
            _ => panic!("exhausted"),
        }
        match go(&["a/e429", "b/e500"], default_on(), &breakers()).await {
            ChainResult::Exhausted { all_rate_limited, .. } => assert!(!all_rate_limited),
            _ => panic!("exhausted"),
        }
    }

    #[tokio::test]
    async fn a_trigger_not_in_on_ends_the_chain() {
        match go(&["a/e400", "b/ok"], default_on(), &breakers()).await {
            ChainResult::Exhausted { attempts, failovers, .. } => {
                assert_eq!(attempts.len(), 1);
                assert!(failovers.is_empty());
            }
            _ => panic!("client errors are not in the default `on`"),
        }
        let on: HashSet<Trigger> = [Trigger::ClientError].into();
        assert!(matches!(go(&["a/e400", "b/ok"], on.clone(), &breakers()).await, ChainResult::Served { .. }));
        assert!(matches!(go(&["a/e500", "b/ok"], on, &breakers()).await, ChainResult::Exhausted { .. }));
    }

    #[tokio::test]
    async fn models_in_cooldown_are_skipped() {
        let b = Breakers::new(1, Duration::from_secs(30));
        let _ = go(&["a/e500"], default_on(), &b).await;
        match go(&["a/e500", "b/ok"], default_on(), &b).await {
            ChainResult::Served { attempts, failovers, .. } => {
                assert_eq!(attempts[0].status, "skipped");
                assert_eq!(attempts[0].reason, Some("cooldown"));
                assert_eq!(attempts[0].latency_ms, 0);
                assert_eq!(failovers.len(), 1, "a cooldown skip is a failover hop");
                assert_eq!((failovers[0].failed_model.as_str(), failovers[0].reason), ("a/e500", "cooldown"));
                assert_eq!(failovers[0].next_model, "b/ok");
            }
            _ => panic!("served by b"),
        }
    }

    #[tokio::test]
    async fn every_hop_into_and_out_of_a_cooling_model_is_a_failover() {
        let b = Breakers::new(1, Duration::from_secs(30));
        let _ = go(&["b/e429"], default_on(), &b).await;
        match go(&["a/e500", "b/e429", "c/ok"], default_on(), &b).await {
            ChainResult::Served { failovers, .. } => {
                let hops: Vec<(&str, &str, &str)> =
                    failovers.iter().map(|f| (f.failed_model.as_str(), f.reason, f.next_model.as_str())).collect();
                assert_eq!(hops, [("a/e500", "server_error", "b/e429"), ("b/e429", "cooldown", "c/ok")]);
            }
            _ => panic!("served by c"),
        }
    }

    #[tokio::test]
    async fn a_cooldown_whose_class_is_not_in_on_ends_the_chain() {
        let b = Breakers::new(1, Duration::from_secs(30));
        let _ = go(&["a/e429"], default_on(), &b).await;
        let on: HashSet<Trigger> = [Trigger::ServerError, Trigger::Timeout].into();
        match go(&["a/e429", "b/ok"], on, &b).await {
            ChainResult::Exhausted { attempts, failovers, all_rate_limited } => {
                assert_eq!(attempts.len(), 1);
                assert_eq!(attempts[0].reason, Some("cooldown"));
                assert!(failovers.is_empty());
                assert!(all_rate_limited, "a rate-limit cooldown is a rate-limit failure");
            }
            _ => panic!("rate_limit is not in `on`"),
        }
        // Listed: the chain moves on.
        assert!(matches!(go(&["a/e429", "b/ok"], default_on(), &b).await, ChainResult::Served { index: 1, .. }));
    }

    async fn timeouts(entries: Vec<ChainEntry>, counting: Counting, b: &Breakers) {
        let _ =
            run(&entries, &default_on(), b, counting, |_| None, |_, _| async { Err::<(), _>(AttemptError::new(Trigger::Timeout, "late")) })
                .await;
    }

    #[tokio::test]
    async fn only_deadlines_at_least_the_operators_count_against_the_breaker() {
        let b = Breakers::new(2, Duration::from_secs(30));
        let mut short = chain(&["a/m"; 6]);
        for e in &mut short {
            e.timeout = Duration::from_millis(1);
            e.first_token_timeout = Duration::from_millis(1);
        }
        for _ in 0..3 {
            timeouts(short.clone(), OPERATOR, &b).await;
            timeouts(short.clone(), Counting { stream: true, ..OPERATOR }, &b).await;
        }
        assert_eq!(b.availability("a/m", Instant::now()), Availability::Available, "shortened deadlines do not count");
        // A stream is judged by its first-token deadline only.
        let mut stream_entry = chain(&["a/m"]);
        stream_entry[0].timeout = Duration::from_millis(1);
        timeouts(stream_entry.clone(), Counting { stream: true, ..OPERATOR }, &b).await;
        // Longer than the operator's counts; so does the operator's own.
        let mut long = chain(&["a/m"]);
        long[0].timeout = Duration::from_secs(5);
        timeouts(long, OPERATOR, &b).await;
        assert_eq!(b.availability("a/m", Instant::now()), Availability::Cooldown(Trigger::Timeout));
    }

    #[tokio::test]
    async fn one_request_counts_once_however_often_it_repeats_a_model() {
        let b = Breakers::new(2, Duration::from_secs(30));
        match go(&["a/e500"; 6], default_on(), &b).await {
            ChainResult::Exhausted { attempts, .. } => {
                assert_eq!(attempts.len(), 6);
                assert!(attempts.iter().all(|a| a.status == "failed"), "each repeat was tried");
            }
            _ => panic!("exhausted"),
        }
        assert_eq!(b.availability("a/e500", Instant::now()), Availability::Available);
        let _ = go(&["a/e500"], default_on(), &b).await;
        assert_eq!(b.availability("a/e500", Instant::now()), Availability::Cooldown(Trigger::ServerError));
    }

    #[tokio::test]
    async fn repeated_entries_are_retries() {
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let r = run(
            &chain(&["a/x", "a/x", "a/x"]),
            &default_on(),
            &breakers(),
            OPERATOR,
            |_| None,
            |_, _| {
                let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                async move { if n < 2 { Err(AttemptError::new(Trigger::ServerError, "flaky")) } else { Ok(n) } }
            },
        )
        .await;
        assert!(matches!(r, ChainResult::Served { value: 2, .. }));
    }
}
