//! Provider health: a circuit breaker per model.
//!
//! After `failures` consecutive failed attempts (timeouts, server errors, rate
//! limits — not client errors, which say nothing of the model's health) a
//! model is in cooldown for `cooldown`: chains skip it at once, recording the
//! entry with reason `cooldown`. When the cooldown ends, one request is let
//! through as a probe; its success closes the breaker, its failure starts a
//! new cooldown.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::types::Trigger;

#[derive(Debug, Clone, Copy)]
struct State {
    consecutive: u32,
    open_until: Option<Instant>,
    probing: bool,
}

/// What the breaker says about an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Allowed,
    /// In cooldown: skip this entry.
    Cooldown,
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
    pub fn admit(&self, model: &str, now: Instant) -> Admission {
        let mut map = self.lock();
        let Some(st) = map.get_mut(model) else {
            return Admission::Allowed;
        };
        match st.open_until {
            Some(until) if now < until => Admission::Cooldown,
            Some(_) if st.probing => Admission::Cooldown,
            Some(_) => {
                st.probing = true;
                Admission::Allowed
            }
            None => Admission::Allowed,
        }
    }

    pub fn success(&self, model: &str) {
        self.lock().remove(model);
    }

    pub fn failure(&self, model: &str, trigger: Trigger, now: Instant) {
        if trigger == Trigger::ClientError {
            // The request was refused, the model is fine; a probe still ends.
            if let Some(st) = self.lock().get_mut(model) {
                st.probing = false;
            }
            return;
        }
        let mut map = self.lock();
        let st = map.entry(model.to_owned()).or_insert(State { consecutive: 0, open_until: None, probing: false });
        st.consecutive = st.consecutive.saturating_add(1);
        if st.probing || st.consecutive >= self.failures {
            st.open_until = Some(now + self.cooldown);
            st.probing = false;
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
        assert_eq!(b.admit("a/m", t0), Admission::Allowed);
        b.failure("a/m", Trigger::Timeout, t0);
        assert_eq!(b.admit("a/m", t0), Admission::Cooldown);
        assert_eq!(b.admit("a/m", t0 + Duration::from_secs(9)), Admission::Cooldown);
        // One probe after the cooldown, others still skip.
        let later = t0 + Duration::from_secs(11);
        assert_eq!(b.admit("a/m", later), Admission::Allowed);
        assert_eq!(b.admit("a/m", later), Admission::Cooldown);
        // A failed probe starts a new cooldown.
        b.failure("a/m", Trigger::ServerError, later);
        assert_eq!(b.admit("a/m", later + Duration::from_secs(5)), Admission::Cooldown);
        // A successful probe closes it.
        let much_later = later + Duration::from_secs(11);
        assert_eq!(b.admit("a/m", much_later), Admission::Allowed);
        b.success("a/m");
        assert_eq!(b.admit("a/m", much_later), Admission::Allowed);
        assert_eq!(b.admit("a/m", much_later), Admission::Allowed);
    }

    #[test]
    fn success_resets_and_client_errors_do_not_count() {
        let b = Breakers::new(2, Duration::from_secs(10));
        let t = Instant::now();
        b.failure("m", Trigger::ServerError, t);
        b.success("m");
        b.failure("m", Trigger::ServerError, t);
        assert_eq!(b.admit("m", t), Admission::Allowed);
        b.failure("m", Trigger::ClientError, t);
        b.failure("m", Trigger::ClientError, t);
        assert_eq!(b.admit("m", t), Admission::Allowed);
        assert!(b.open_models(t).is_empty());
    }
}
