//! The failover chain: try each entry in order, skip models in cooldown,
//! stop at the first success or at a failure whose trigger is not in `on`.
//! The runner is generic over what one attempt does, so the non-streaming
//! path (whole answer) and the streaming path (up to the first token) share it.

use std::collections::HashSet;
use std::future::Future;
use std::time::Instant;

use serde::Serialize;

use super::breaker::{Admission, Breakers};
use super::types::{AttemptError, ChainEntry, Trigger};

/// One line of `attempts[]` (spec 2.4).
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

/// Run the chain. `skip` may exclude an entry before it is tried (reason recorded).
pub async fn run<'a, T, F, Fut>(
    chain: &'a [ChainEntry],
    on: &HashSet<Trigger>,
    breakers: &Breakers,
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
    for (i, entry) in chain.iter().enumerate() {
        let model = entry.model.as_str().to_owned();
        if let Some(reason) = skip(entry) {
            attempts.push(Attempt { model, status: "skipped", reason: Some(reason), latency_ms: 0, message: None });
            continue;
        }
        if breakers.admit(&model, Instant::now()) == Admission::Cooldown {
            attempts.push(Attempt {
                model,
                status: "skipped",
                reason: Some("cooldown"),
                latency_ms: 0,
                message: Some("the model failed repeatedly and is cooling down".into()),
            });
            continue;
        }
        if let Some((failed_model, reason, latency_ms)) = pending_failover.take() {
            crate::metrics::get().failovers.get_or_create(&crate::metrics::ReasonLabel { reason: reason.to_owned() }).inc();
            failovers.push(Failover { failed_model, reason, next_model: model.clone(), latency_ms });
        }
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
                breakers.failure(&model, err.trigger, Instant::now());
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

    async fn go(models: &[&str], on: HashSet<Trigger>, b: &Breakers) -> ChainResult<String> {
        run(
            &chain(models),
            &on,
            b,
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
                assert!(failovers.is_empty(), "a skip is not a failover");
            }
            _ => panic!("served by b"),
        }
    }

    #[tokio::test]
    async fn repeated_entries_are_retries() {
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let r = run(
            &chain(&["a/x", "a/x", "a/x"]),
            &default_on(),
            &breakers(),
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
