//! Rate limits (per minute, per hour) and usage quotas (per UTC day, per UTC
//! month), per key and per bucket set, in fixed calendar windows.
//!
//! Counting (DECISIONS.md): every authenticated request that passes the
//! limiter counts, whatever its outcome; rejected requests and idempotent
//! replays do not. Day and month counts are persisted (they ride along with
//! the next group commit, which is no later than the commit of the request's
//! outcome; no commit of their own) and read back after a restart.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Datelike, Duration, TimeZone, Utc};

use crate::config::RateLimits;
use crate::store::Store;
use crate::store::model::LimitOverrides;

/// Which set of limits a route counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BucketSet {
    Chat,
    AdminRead,
}

impl BucketSet {
    fn tag(self) -> &'static str {
        match self {
            BucketSet::Chat => "chat",
            BucketSet::AdminRead => "admin",
        }
    }
}

/// One of the four windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Window {
    Minute,
    Hour,
    Day,
    Month,
}

impl Window {
    pub const ALL: [Window; 4] = [Window::Minute, Window::Hour, Window::Day, Window::Month];

    /// Name used in events and messages.
    pub fn name(self) -> &'static str {
        match self {
            Window::Minute => "per_minute",
            Window::Hour => "per_hour",
            Window::Day => "per_day",
            Window::Month => "per_month",
        }
    }

    fn limit(self, l: &RateLimits) -> u64 {
        match self {
            Window::Minute => l.per_minute,
            Window::Hour => l.per_hour,
            Window::Day => l.per_day,
            Window::Month => l.per_month,
        }
    }

    /// Start of the window containing `t`, and start of the next one.
    fn bounds(self, t: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
        let ts = t.timestamp();
        match self {
            Window::Minute => {
                let s = ts - ts.rem_euclid(60);
                (at(s), at(s + 60))
            }
            Window::Hour => {
                let s = ts - ts.rem_euclid(3600);
                (at(s), at(s + 3600))
            }
            Window::Day => {
                let s = ts - ts.rem_euclid(86_400);
                (at(s), at(s + 86_400))
            }
            Window::Month => {
                let start = Utc.with_ymd_and_hms(t.year(), t.month(), 1, 0, 0, 0).single().unwrap_or(t);
                let (y, m) = if t.month() == 12 { (t.year() + 1, 1) } else { (t.year(), t.month() + 1) };
                let next = Utc.with_ymd_and_hms(y, m, 1, 0, 0, 0).single().unwrap_or(t + Duration::days(31));
                (start, next)
            }
        }
    }

    fn persisted(self) -> bool {
        matches!(self, Window::Day | Window::Month)
    }
}

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(secs, 0).single().unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
}

/// Apply a key's overrides to the global limits.
pub fn effective(global: RateLimits, o: &LimitOverrides) -> RateLimits {
    RateLimits {
        per_minute: o.per_minute.unwrap_or(global.per_minute),
        per_hour: o.per_hour.unwrap_or(global.per_hour),
        per_day: o.per_day.unwrap_or(global.per_day),
        per_month: o.per_month.unwrap_or(global.per_month),
    }
}

#[derive(Debug, Clone, Copy)]
struct Counter {
    window_start: i64,
    count: u64,
    /// The first rejection in this window has been reported.
    reported: bool,
}

/// The limiter's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// For the headers: the window closest to its limit.
    pub limit: u64,
    pub remaining: u64,
    /// Unix seconds when that window resets.
    pub reset: i64,
    /// On rejection: the exceeded window, seconds until it resets, and whether
    /// this is the first rejection in that window (fire the event once).
    pub exceeded: Option<Exceeded>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    pub window: Window,
    pub limit: u64,
    pub reset_at: DateTime<Utc>,
    pub retry_after_secs: u64,
    pub first: bool,
}

/// Per-key counters for both bucket sets.
pub struct Limiter {
    store: Arc<dyn Store>,
    counters: Mutex<HashMap<(BucketSet, String, Window), Counter>>,
}

impl Limiter {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Limiter { store, counters: Mutex::new(HashMap::new()) }
    }

    fn window_key(set: BucketSet, w: Window, start: DateTime<Utc>) -> String {
        match w {
            Window::Day => format!("{}:d:{}", set.tag(), start.format("%Y-%m-%d")),
            Window::Month => format!("{}:m:{}", set.tag(), start.format("%Y-%m")),
            _ => String::new(),
        }
    }

    /// Check and (if allowed) count one request.
    pub fn check(&self, set: BucketSet, key_id: &str, limits: RateLimits, now: DateTime<Utc>) -> Decision {
        let mut map = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        let mut to_load = Vec::new();
        for w in Window::ALL {
            let (start, _) = w.bounds(now);
            let fresh = map.get(&(set, key_id.to_owned(), w)).is_none_or(|c| c.window_start != start.timestamp());
            if fresh && w.persisted() {
                to_load.push((w, Self::window_key(set, w, start)));
            }
        }
        let loaded = if to_load.is_empty() {
            Vec::new()
        } else {
            let names: Vec<String> = to_load.iter().map(|(_, n)| n.clone()).collect();
            self.store.quota_counts(key_id, &names).unwrap_or_else(|e| {
                tracing::error!(error = %e, "reading quota counters failed; counting from zero");
                vec![0; names.len()]
            })
        };
        let mut counters = [Counter { window_start: 0, count: 0, reported: false }; 4];
        for (i, w) in Window::ALL.into_iter().enumerate() {
            let (start, _) = w.bounds(now);
            let entry =
                map.entry((set, key_id.to_owned(), w)).or_insert(Counter { window_start: start.timestamp(), count: 0, reported: false });
            if entry.window_start != start.timestamp() {
                *entry = Counter { window_start: start.timestamp(), count: 0, reported: false };
            }
            if let Some(pos) = to_load.iter().position(|(lw, _)| *lw == w) {
                entry.count = entry.count.max(loaded.get(pos).copied().unwrap_or(0));
            }
            counters[i] = *entry;
        }
        // Any window at its limit rejects; report the one that resets last.
        let mut exceeded: Option<(usize, Window)> = None;
        for (i, w) in Window::ALL.into_iter().enumerate() {
            if counters[i].count >= w.limit(&limits) {
                exceeded = Some((i, w));
            }
        }
        if let Some((_, w)) = exceeded {
            let (_, next) = w.bounds(now);
            let entry = map.get_mut(&(set, key_id.to_owned(), w));
            let first = match entry {
                Some(c) if !c.reported => {
                    c.reported = true;
                    true
                }
                _ => false,
            };
            let retry = (next - now).num_seconds().max(1) as u64;
            crate::metrics::get()
                .rate_limit_hits
                .get_or_create(&crate::metrics::LimitLabel { bucket: set.tag().to_owned(), window: w.name().to_owned() })
                .inc();
            return Decision {
                allowed: false,
                limit: w.limit(&limits),
                remaining: 0,
                reset: next.timestamp(),
                exceeded: Some(Exceeded { window: w, limit: w.limit(&limits), reset_at: next, retry_after_secs: retry, first }),
            };
        }
        let mut windows_to_persist = Vec::new();
        let mut tightest: Option<(u64, u64, i64)> = None;
        for w in Window::ALL {
            let (start, next) = w.bounds(now);
            if let Some(c) = map.get_mut(&(set, key_id.to_owned(), w)) {
                c.count += 1;
                let limit = w.limit(&limits);
                let remaining = limit.saturating_sub(c.count);
                if tightest.is_none_or(|(_, r, _)| remaining < r) {
                    tightest = Some((limit, remaining, next.timestamp()));
                }
            }
            if w.persisted() {
                windows_to_persist.push(Self::window_key(set, w, start));
            }
        }
        drop(map);
        self.store.count_quota(key_id, &windows_to_persist);
        let (limit, remaining, reset) = tightest.unwrap_or((0, 0, 0));
        Decision { allowed: true, limit, remaining, reset, exceeded: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_bounds() {
        let t = Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 30).single().expect("time");
        let (s, n) = Window::Minute.bounds(t);
        assert_eq!((n - s).num_seconds(), 60);
        assert_eq!(n, Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).single().expect("t"));
        let (s, n) = Window::Month.bounds(t);
        assert_eq!(s, Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).single().expect("t"));
        assert_eq!(n, Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).single().expect("t"));
        let (s, _) = Window::Day.bounds(t);
        assert_eq!(s, Utc.with_ymd_and_hms(2026, 12, 31, 0, 0, 0).single().expect("t"));
    }

    #[test]
    fn overrides_apply_per_field() {
        let g = RateLimits { per_minute: 60, per_hour: 1000, per_day: 100, per_month: 10_000 };
        let e = effective(g, &LimitOverrides { per_minute: Some(5), ..Default::default() });
        assert_eq!(e.per_minute, 5);
        assert_eq!(e.per_day, 100);
    }
}
