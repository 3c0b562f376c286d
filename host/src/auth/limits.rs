//! Rate limits (per minute, per hour) and usage quotas (per UTC day, per UTC
//! month), per key and per bucket set, in fixed calendar windows.
//!
//! Counting (docs/decisions/limits.md): every authenticated request that passes the
//! limiter counts, whatever its outcome; rejected requests and idempotent
//! replays do not. Day and month counts are persisted (they ride along with
//! the next group commit, which is no later than the commit of the request's
//! outcome; no commit of their own) and read back after a restart.
//!
//! On a fleet store ([`FleetLimiter`], PostgreSQL) every window is counted
//! in the database instead, in one atomic step per request shared by every
//! host (docs/decisions/fleet-limits.md): with limit L and requests spread
//! over the hosts, exactly L are admitted per window, and the first refusal
//! is reported once for the whole fleet. The in-memory counters then serve
//! only while the database cannot be reached (each host counting on its own,
//! as a single host would).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Datelike, Duration, TimeZone, Utc};

use crate::config::RateLimits;
use gatehouse_store::Store;
use gatehouse_store::fleet::{FleetLimiter, LimitWindow, Take};
use gatehouse_store::model::LimitOverrides;

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

/// What [`Limiter::apply`] does besides deciding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Count an allowed request in every window.
    Count,
    /// Count nothing.
    Peek,
    /// Count in the minute and hour windows only, and decide nothing.
    RatesOnly,
}

/// Per-key counters for both bucket sets.
pub struct Limiter {
    store: Arc<dyn Store>,
    /// Counts shared by a fleet; `None` on a single host's store.
    fleet: Option<Arc<dyn FleetLimiter>>,
    /// By key id, then by bucket set ([`BucketSet::slot`]).
    counters: Mutex<HashMap<String, [Buckets; 2]>>,
}

/// One key's counters in one bucket set: one per window (in [`Window::ALL`]
/// order), and the names of the current day and month windows in the store
/// (`chat:d:2026-11-25`, `chat:m:2026-11`), made when those windows start.
#[derive(Default)]
struct Buckets {
    counters: [Counter; 4],
    persisted: [String; 2],
}

impl Default for Counter {
    /// No window yet: the first check starts (or reloads) every window.
    fn default() -> Self {
        Counter { window_start: i64::MIN, count: 0, reported: false }
    }
}

impl BucketSet {
    fn slot(self) -> usize {
        match self {
            BucketSet::Chat => 0,
            BucketSet::AdminRead => 1,
        }
    }
}

impl Limiter {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Limiter { store, fleet: None, counters: Mutex::new(HashMap::new()) }
    }

    /// A limiter whose counts are the fleet's (`fleet`), with in-memory
    /// counters for when the database cannot be reached.
    pub fn fleet(store: Arc<dyn Store>, fleet: Arc<dyn FleetLimiter>) -> Self {
        Limiter { store, fleet: Some(fleet), counters: Mutex::new(HashMap::new()) }
    }

    /// The fleet's name of a window starting at `start` (every window, not only the persisted ones).
    fn fleet_window_key(set: BucketSet, w: Window, start: DateTime<Utc>) -> String {
        let tag = set.tag();
        match w {
            Window::Minute => format!("{tag}:n:{}", start.format("%Y-%m-%dT%H:%M")),
            Window::Hour => format!("{tag}:h:{}", start.format("%Y-%m-%dT%H")),
            Window::Day | Window::Month => Self::window_key(set, w, start),
        }
    }

    /// The decision on the fleet's counts; `None` if the database did not
    /// answer (the caller then counts in memory).
    fn apply_fleet(
        &self,
        fleet: &Arc<dyn FleetLimiter>,
        set: BucketSet,
        key_id: &str,
        limits: RateLimits,
        now: DateTime<Utc>,
        mode: Mode,
    ) -> Option<Decision> {
        let windows: &[Window] = if mode == Mode::RatesOnly { &[Window::Minute, Window::Hour] } else { &Window::ALL };
        let spans: Vec<(Window, DateTime<Utc>)> = windows.iter().map(|w| (*w, w.bounds(now).1)).collect();
        let asked: Vec<LimitWindow> = windows
            .iter()
            .map(|w| {
                let (start, ends_at) = w.bounds(now);
                LimitWindow { id: Self::fleet_window_key(set, *w, start), ends_at, limit: w.limit(&limits) }
            })
            .collect();
        let take = match mode {
            Mode::Count => Take::Count,
            Mode::Peek => Take::Peek,
            Mode::RatesOnly => Take::Rates,
        };
        let taken = match block_on(fleet.take_limits(key_id, &asked, take))? {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "the fleet's limit counts could not be read; counting on this host until the database answers");
                return None;
            }
        };
        if mode == Mode::RatesOnly {
            return Some(Decision { allowed: true, limit: 0, remaining: 0, reset: 0, exceeded: None });
        }
        if let Some(i) = taken.exceeded.filter(|_| !taken.allowed) {
            let (w, next) = spans[i];
            crate::metrics::get()
                .rate_limit_hits
                .get_or_create(&crate::metrics::LimitLabel { bucket: set.tag().to_owned(), window: w.name().to_owned() })
                .inc();
            let limit = w.limit(&limits);
            let retry = (next - now).num_seconds().max(1) as u64;
            return Some(Decision {
                allowed: false,
                limit,
                remaining: 0,
                reset: next.timestamp(),
                exceeded: Some(Exceeded { window: w, limit, reset_at: next, retry_after_secs: retry, first: taken.first }),
            });
        }
        let mut tightest: Option<(u64, u64, i64)> = None;
        for ((w, next), count) in spans.iter().zip(&taken.counts) {
            let limit = w.limit(&limits);
            let remaining = limit.saturating_sub(*count);
            if tightest.is_none_or(|(_, r, _)| remaining < r) {
                tightest = Some((limit, remaining, next.timestamp()));
            }
        }
        let (limit, remaining, reset) = tightest.unwrap_or((0, 0, 0));
        Some(Decision { allowed: true, limit, remaining, reset, exceeded: None })
    }

    /// The store's name of a persisted window starting at `start`.
    fn window_key(set: BucketSet, w: Window, start: DateTime<Utc>) -> String {
        match w {
            Window::Day => format!("{}:d:{:04}-{:02}-{:02}", set.tag(), start.year(), start.month(), start.day()),
            Window::Month => format!("{}:m:{:04}-{:02}", set.tag(), start.year(), start.month()),
            _ => String::new(),
        }
    }

    /// Check and (if allowed) count one request.
    pub fn check(&self, set: BucketSet, key_id: &str, limits: RateLimits, now: DateTime<Utc>) -> Decision {
        self.apply(set, key_id, limits, now, Mode::Count)
    }

    /// The decision [`Limiter::check`] would make, counting nothing: the
    /// pre-check on a request's headers, so that a key over a limit is
    /// refused before its body is read. A refusal is reported (`first`) as
    /// `check`'s would be, once per window.
    pub fn peek(&self, set: BucketSet, key_id: &str, limits: RateLimits, now: DateTime<Utc>) -> Decision {
        self.apply(set, key_id, limits, now, Mode::Peek)
    }

    /// Count one request in the per-minute and per-hour windows only, over
    /// their limits or not: a request body its client abandoned held a place
    /// without doing work, so it costs rate but no quota.
    pub fn count_rates(&self, set: BucketSet, key_id: &str, now: DateTime<Utc>) {
        let unlimited = RateLimits { per_minute: u64::MAX, per_hour: u64::MAX, per_day: u64::MAX, per_month: u64::MAX };
        self.apply(set, key_id, unlimited, now, Mode::RatesOnly);
    }

    fn apply(&self, set: BucketSet, key_id: &str, limits: RateLimits, now: DateTime<Utc>, mode: Mode) -> Decision {
        // A store that reports its database away (its probe says so within
        // a second) is not waited on: each request would wait out the pool's
        // timeout first.
        if let Some(fleet) = &self.fleet
            && self.store.healthy()
            && let Some(d) = self.apply_fleet(fleet, set, key_id, limits, now, mode)
        {
            return d;
        }
        let bounds = Window::ALL.map(|w| w.bounds(now));
        let mut map = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        if !map.contains_key(key_id) {
            map.insert(key_id.to_owned(), Default::default());
        }
        let buckets = &mut map.get_mut(key_id).expect("inserted above")[set.slot()];
        // A window that has rolled over starts from zero; a persisted one
        // from the count stored for it (a restart keeps day and month counts).
        let mut to_load: Vec<usize> = Vec::new();
        for (i, w) in Window::ALL.into_iter().enumerate() {
            let start = bounds[i].0;
            if buckets.counters[i].window_start != start.timestamp() {
                buckets.counters[i] = Counter { window_start: start.timestamp(), count: 0, reported: false };
                if w.persisted() {
                    buckets.persisted[i - 2] = Self::window_key(set, w, start);
                    to_load.push(i);
                }
            }
        }
        // On a fleet the persisted counts are the fleet's (not kept by
        // `count_quota`): this host counts from zero until the database answers.
        if !to_load.is_empty() && self.fleet.is_none() {
            let names: Vec<String> = to_load.iter().map(|i| buckets.persisted[i - 2].clone()).collect();
            let loaded = self.store.quota_counts(key_id, &names).unwrap_or_else(|e| {
                tracing::error!(error = %e, "reading quota counters failed; counting from zero");
                vec![0; names.len()]
            });
            for (i, n) in to_load.iter().zip(loaded) {
                buckets.counters[*i].count = buckets.counters[*i].count.max(n);
            }
        }
        if mode == Mode::RatesOnly {
            buckets.counters[0].count += 1;
            buckets.counters[1].count += 1;
            return Decision { allowed: true, limit: 0, remaining: 0, reset: 0, exceeded: None };
        }
        // Any window at its limit rejects; report the one that resets last.
        let exceeded = Window::ALL.into_iter().enumerate().rev().find(|(i, w)| buckets.counters[*i].count >= w.limit(&limits));
        if let Some((i, w)) = exceeded {
            let next = bounds[i].1;
            let first = !buckets.counters[i].reported;
            buckets.counters[i].reported = true;
            drop(map);
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
        let mut tightest: Option<(u64, u64, i64)> = None;
        for (i, w) in Window::ALL.into_iter().enumerate() {
            let c = &mut buckets.counters[i];
            if mode == Mode::Count {
                c.count += 1;
            }
            let limit = w.limit(&limits);
            let remaining = limit.saturating_sub(c.count);
            if tightest.is_none_or(|(_, r, _)| remaining < r) {
                tightest = Some((limit, remaining, bounds[i].1.timestamp()));
            }
        }
        // The day and month counts ride along with the next group commit.
        if mode == Mode::Count && self.fleet.is_none() {
            self.store.count_quota(key_id, &buckets.persisted);
        }
        drop(map);
        let (limit, remaining, reset) = tightest.unwrap_or((0, 0, 0));
        Decision { allowed: true, limit, remaining, reset, exceeded: None }
    }
}

/// Wait for `f` from the limiter's synchronous callers. The fleet's count
/// is a database round trip: the worker thread hands its other tasks to
/// the runtime while it waits (`block_in_place`). `None` where that is not
/// possible (a single-threaded runtime, or none).
fn block_on<F: std::future::Future>(f: F) -> Option<F::Output> {
    let handle = tokio::runtime::Handle::try_current().ok()?;
    if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
        return None;
    }
    Some(tokio::task::block_in_place(|| handle.block_on(f)))
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

    fn limiter() -> (tempfile::TempDir, Limiter) {
        let dir = tempfile::tempdir().expect("tmp");
        let store = gatehouse_store::redb::RedbStore::open(dir.path(), false).expect("open");
        (dir, Limiter::new(Arc::new(store)))
    }

    #[test]
    fn a_window_rejects_at_its_limit_reports_once_and_opens_again_when_it_rolls_over() {
        let (_dir, l) = limiter();
        let limits = RateLimits { per_minute: 2, per_hour: 100, per_day: 100, per_month: 1000 };
        let t = Utc.with_ymd_and_hms(2026, 11, 25, 10, 0, 10).single().expect("time");
        let d = l.check(BucketSet::Chat, "k1", limits, t);
        assert!(d.allowed);
        assert_eq!((d.limit, d.remaining, d.reset), (2, 1, t.timestamp() + 50), "the minute window is the tightest");
        assert!(l.check(BucketSet::Chat, "k1", limits, t).allowed);
        let refused = l.check(BucketSet::Chat, "k1", limits, t);
        let e = refused.exceeded.expect("over the minute limit");
        assert!(!refused.allowed);
        assert_eq!((e.window, e.limit, e.retry_after_secs, e.first), (Window::Minute, 2, 50, true));
        let again = l.check(BucketSet::Chat, "k1", limits, t).exceeded.expect("still over");
        assert!(!again.first, "the event fires once per window");
        // Another key and the other bucket set count on their own.
        assert!(l.check(BucketSet::Chat, "k2", limits, t).allowed);
        assert!(l.check(BucketSet::AdminRead, "k1", limits, t).allowed);
        // The next minute opens again; the hour and day keep counting (2 counted, rejections not).
        let next = l.check(BucketSet::Chat, "k1", limits, t + Duration::seconds(60));
        assert!(next.allowed);
        assert_eq!((next.limit, next.remaining), (2, 1));
        let tight = RateLimits { per_minute: 100, per_hour: 100, per_day: 4, per_month: 1000 };
        let day = l.check(BucketSet::Chat, "k1", tight, t + Duration::seconds(61));
        assert_eq!((day.limit, day.remaining), (4, 0), "four counted today: two, then one, then this");
        let over = l.check(BucketSet::Chat, "k1", tight, t + Duration::seconds(62)).exceeded.expect("day");
        assert_eq!(over.window, Window::Day);
        let both = RateLimits { per_minute: 1, ..tight };
        let last = l.check(BucketSet::Chat, "k1", both, t + Duration::seconds(63)).exceeded.expect("minute and day");
        assert_eq!(last.window, Window::Day, "of two windows over their limits, the one that resets last is reported");
    }

    #[test]
    fn a_peek_counts_nothing_and_abandoned_bodies_count_in_minute_and_hour_only() {
        let (_dir, l) = limiter();
        let limits = RateLimits { per_minute: 3, per_hour: 100, per_day: 3, per_month: 1000 };
        let t = Utc.with_ymd_and_hms(2026, 11, 25, 10, 0, 10).single().expect("time");
        for _ in 0..5 {
            let d = l.peek(BucketSet::Chat, "k1", limits, t);
            assert!(d.allowed);
            assert_eq!(d.remaining, 3, "a peek counts nothing");
        }
        l.count_rates(BucketSet::Chat, "k1", t);
        l.count_rates(BucketSet::Chat, "k1", t);
        assert_eq!(l.peek(BucketSet::Chat, "k1", limits, t).remaining, 1, "two abandoned bodies in the minute");
        assert!(l.check(BucketSet::Chat, "k1", limits, t).allowed);
        let refused = l.peek(BucketSet::Chat, "k1", limits, t).exceeded.expect("the minute is full");
        assert_eq!(refused.window, Window::Minute, "the day holds one request, not three");
        assert!(refused.first, "a peek reports the first refusal");
        assert!(!l.check(BucketSet::Chat, "k1", limits, t).exceeded.expect("still full").first, "once per window");
        // Next minute: the day quota was charged for the one served request only.
        let later = t + Duration::seconds(60);
        assert_eq!(l.check(BucketSet::Chat, "k1", limits, later).remaining, 1, "day: 3 - 2 served");
    }

    #[test]
    fn persisted_windows_are_named_by_calendar_day_and_month() {
        let t = Utc.with_ymd_and_hms(2026, 1, 5, 23, 59, 59).single().expect("time");
        assert_eq!(Limiter::window_key(BucketSet::Chat, Window::Day, t), "chat:d:2026-01-05");
        assert_eq!(Limiter::window_key(BucketSet::Chat, Window::Month, t), "chat:m:2026-01");
        assert_eq!(Limiter::window_key(BucketSet::AdminRead, Window::Day, t), "admin:d:2026-01-05");
        assert_eq!(Limiter::window_key(BucketSet::Chat, Window::Minute, t), "");
    }

    #[test]
    fn fleet_windows_are_named_by_bucket_set_kind_and_start() {
        let t = Utc.with_ymd_and_hms(2026, 1, 5, 23, 59, 59).single().expect("time");
        let name = |set, w: Window| Limiter::fleet_window_key(set, w, w.bounds(t).0);
        assert_eq!(name(BucketSet::Chat, Window::Minute), "chat:n:2026-01-05T23:59");
        assert_eq!(name(BucketSet::Chat, Window::Hour), "chat:h:2026-01-05T23");
        assert_eq!(name(BucketSet::AdminRead, Window::Day), "admin:d:2026-01-05");
        assert_eq!(name(BucketSet::Chat, Window::Month), "chat:m:2026-01");
    }

    /// A fleet store whose answers the test sets.
    struct FakeFleet {
        answer: Mutex<Option<gatehouse_store::fleet::Taken>>,
        asked: Mutex<Vec<(Vec<String>, Take)>>,
    }

    #[async_trait::async_trait]
    impl FleetLimiter for FakeFleet {
        async fn take_limits(
            &self,
            _key: &str,
            windows: &[LimitWindow],
            mode: Take,
        ) -> gatehouse_store::StoreResult<gatehouse_store::fleet::Taken> {
            self.asked.lock().expect("lock").push((windows.iter().map(|w| w.id.clone()).collect(), mode));
            self.answer.lock().expect("lock").clone().ok_or_else(|| gatehouse_store::StoreError::Backend("PostgreSQL unreachable".into()))
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_a_fleet_the_database_decides_and_an_unreachable_one_leaves_counting_to_the_host() {
        use gatehouse_store::fleet::Taken;
        let dir = tempfile::tempdir().expect("tmp");
        let store: Arc<dyn Store> = Arc::new(gatehouse_store::redb::RedbStore::open(dir.path(), false).expect("open"));
        let fake = Arc::new(FakeFleet { answer: Mutex::new(None), asked: Mutex::new(Vec::new()) });
        let l = Limiter::fleet(store, fake.clone());
        let limits = RateLimits { per_minute: 2, per_hour: 100, per_day: 5, per_month: 1000 };
        let t = Utc.with_ymd_and_hms(2026, 11, 25, 10, 0, 10).single().expect("time");
        *fake.answer.lock().expect("lock") = Some(Taken { counts: vec![0, 1, 4, 1], allowed: true, exceeded: None, first: false });
        let d = l.check(BucketSet::Chat, "k1", limits, t);
        assert_eq!((d.allowed, d.limit, d.remaining), (true, 5, 1), "the day, one left, is the tightest");
        *fake.answer.lock().expect("lock") = Some(Taken { counts: vec![1, 1, 5, 1], allowed: false, exceeded: Some(2), first: true });
        let x = l.peek(BucketSet::Chat, "k1", limits, t).exceeded.expect("refused");
        assert_eq!((x.window, x.limit, x.first), (Window::Day, 5, true), "the fleet's first refusal is reported");
        l.count_rates(BucketSet::Chat, "k1", t);
        let asked = fake.asked.lock().expect("lock").clone();
        assert_eq!(
            asked[0],
            (
                vec!["chat:n:2026-11-25T10:00".into(), "chat:h:2026-11-25T10".into(), "chat:d:2026-11-25".into(), "chat:m:2026-11".into()],
                Take::Count
            )
        );
        assert_eq!(asked[1].1, Take::Peek);
        assert_eq!(
            asked[2],
            (vec!["chat:n:2026-11-25T10:00".into(), "chat:h:2026-11-25T10".into()], Take::Rates),
            "rates: minute and hour only"
        );
        // The database away: the host counts on its own (per minute here).
        *fake.answer.lock().expect("lock") = None;
        assert!(l.check(BucketSet::Chat, "k2", limits, t).allowed);
        assert!(l.check(BucketSet::Chat, "k2", limits, t).allowed);
        assert_eq!(l.check(BucketSet::Chat, "k2", limits, t).exceeded.expect("local minute").window, Window::Minute);
    }

    #[test]
    fn overrides_apply_per_field() {
        let g = RateLimits { per_minute: 60, per_hour: 1000, per_day: 100, per_month: 10_000 };
        let e = effective(g, &LimitOverrides { per_minute: Some(5), ..Default::default() });
        assert_eq!(e.per_minute, 5);
        assert_eq!(e.per_day, 100);
    }
}
