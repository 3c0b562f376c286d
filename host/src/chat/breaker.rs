//! Provider health: a circuit breaker per model.
//!
//! After `failures` consecutive counted failures (timeouts, server errors,
//! rate limits) a model is in cooldown for `cooldown`: chains skip it at once,
//! as a failure of the class that opened the breaker (`chat::chain`). When the
//! cooldown ends, one request is let through as a probe; its success closes
//! the breaker, its failure starts a new cooldown.
//!
//! The breaker is shared by every key, so what counts is decided by the chain
//! (docs/decisions/breakers-and-failover.md): a client error, or a timeout
//! under a deadline the caller set below the operator's, says nothing of the
//! model's health and is [`Breakers::inconclusive`]; one request counts once
//! however many chain entries repeat the model.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::types::Trigger;

#[derive(Debug, Clone, Copy)]
struct State {
    consecutive: u32,
    open_until: Option<Instant>,
    /// When the probe now running was let through. A probe whose request
    /// never reports (its client went away mid-attempt) lapses after one
    /// cooldown, so no caller can keep a model cooling for ever.
    probe_since: Option<Instant>,
    /// The trigger of the last counted failure: the class that opened the breaker.
    class: Trigger,
}

/// What the breaker says about an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    Available,
    /// In cooldown after failures of this class: skip this entry.
    Cooldown(Trigger),
}

pub struct Breakers {
    failures: u32,
    cooldown: Duration,
    models: Mutex<HashMap<String, State>>,
}

impl Breakers {
    pub fn new(failures: u32, cooldown: Duration) -> Self {
        Breakers { failures: failures.max(1), cooldown, models: Mutex::new(HashMap::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, State>> {
        self.models.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// May this model be tried now?
    pub fn availability(&self, model: &str, now: Instant) -> Availability {
        let mut map = self.lock();
        let Some(st) = map.get_mut(model) else {
            return Availability::Available;
        };
        match (st.open_until, st.probe_since) {
            (Some(until), _) if now < until => Availability::Cooldown(st.class),
            (Some(_), Some(since)) if now < since + self.cooldown => Availability::Cooldown(st.class),
            (Some(_), _) => {
                st.probe_since = Some(now);
                Availability::Available
            }
            (None, _) => Availability::Available,
        }
    }

    pub fn success(&self, model: &str) {
        self.lock().remove(model);
    }

    /// A failure that counts against the model (the chain decides which do).
    pub fn failure(&self, model: &str, trigger: Trigger, now: Instant) {
        let mut map = self.lock();
        let st = map.entry(model.to_owned()).or_insert(State { consecutive: 0, open_until: None, probe_since: None, class: trigger });
        st.consecutive = st.consecutive.saturating_add(1);
        st.class = trigger;
        if st.probe_since.is_some() || st.consecutive >= self.failures {
            st.open_until = Some(now + self.cooldown);
            st.probe_since = None;
        }
    }

    /// An attempt that says nothing of the model's health (a client error, a
    /// deadline the caller shortened, a repeat within one request): the count
    /// stays as it is, and a probe ends so that the next request probes.
    pub fn inconclusive(&self, model: &str) {
        if let Some(st) = self.lock().get_mut(model) {
            st.probe_since = None;
        }
    }

    /// Models currently in cooldown (for metrics and admin views).
    pub fn open_models(&self, now: Instant) -> Vec<String> {
        self.lock().iter().filter(|(_, s)| s.open_until.is_some_and(|u| now < u)).map(|(m, _)| m.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_consecutive_failures_and_probes_after_cooldown() {
        let b = Breakers::new(3, Duration::from_secs(10));
        let t0 = Instant::now();
        for _ in 0..2 {
            b.failure("a/m", Trigger::ServerError, t0);
        }
        assert_eq!(b.availability("a/m", t0), Availability::Available);
        b.failure("a/m", Trigger::Timeout, t0);
        assert_eq!(b.availability("a/m", t0), Availability::Cooldown(Trigger::Timeout));
        assert_eq!(b.availability("a/m", t0 + Duration::from_secs(9)), Availability::Cooldown(Trigger::Timeout));
        // One probe after the cooldown, others still skip.
        let later = t0 + Duration::from_secs(11);
        assert_eq!(b.availability("a/m", later), Availability::Available);
        assert_eq!(b.availability("a/m", later), Availability::Cooldown(Trigger::Timeout));
        // A failed probe starts a new cooldown, of the probe's class.
        b.failure("a/m", Trigger::ServerError, later);
        assert_eq!(b.availability("a/m", later + Duration::from_secs(5)), Availability::Cooldown(Trigger::ServerError));
        // A successful probe closes it.
        let much_later = later + Duration::from_secs(11);
        assert_eq!(b.availability("a/m", much_later), Availability::Available);
        b.success("a/m");
        assert_eq!(b.availability("a/m", much_later), Availability::Available);
        assert_eq!(b.availability("a/m", much_later), Availability::Available);
    }

    #[test]
    fn success_resets_and_inconclusive_attempts_do_not_count() {
        let b = Breakers::new(2, Duration::from_secs(10));
        let t = Instant::now();
        b.failure("m", Trigger::ServerError, t);
        b.success("m");
        b.failure("m", Trigger::ServerError, t);
        assert_eq!(b.availability("m", t), Availability::Available);
        b.inconclusive("m");
        b.inconclusive("m");
        assert_eq!(b.availability("m", t), Availability::Available);
        assert!(b.open_models(t).is_empty());
        b.failure("m", Trigger::RateLimit, t);
        assert_eq!(b.availability("m", t), Availability::Cooldown(Trigger::RateLimit), "the class that opened it");
    }

    #[test]
    fn an_inconclusive_probe_hands_the_probe_to_the_next_request() {
        let b = Breakers::new(1, Duration::from_secs(10));
        let t0 = Instant::now();
        b.failure("m", Trigger::ServerError, t0);
        let later = t0 + Duration::from_secs(11);
        assert_eq!(b.availability("m", later), Availability::Available);
        b.inconclusive("m");
        assert_eq!(b.availability("m", later), Availability::Available, "the next request probes");
    }

    #[test]
    fn an_abandoned_probe_does_not_keep_the_model_cooling_for_ever() {
        let b = Breakers::new(1, Duration::from_secs(10));
        let t0 = Instant::now();
        b.failure("m", Trigger::Timeout, t0);
        let later = t0 + Duration::from_secs(11);
        // The probe's request is dropped (its client went away): nothing reports.
        assert_eq!(b.availability("m", later), Availability::Available);
        assert_eq!(b.availability("m", later + Duration::from_secs(9)), Availability::Cooldown(Trigger::Timeout));
        assert_eq!(b.availability("m", later + Duration::from_secs(10)), Availability::Available, "the lapsed probe is replaced");
    }
}
