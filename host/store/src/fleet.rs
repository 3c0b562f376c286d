//! What a fleet of hosts needs from its store beyond [`crate::Store`]: rate
//! limits and quotas counted once for the whole fleet.
//!
//! A single host counts in memory and persists its day and month counts
//! ([`crate::Store::count_quota`]); that is exact for one host only. A fleet
//! store implements [`FleetLimiter`]: each request is checked and counted
//! against every window of its key in one atomic step in the database, so
//! with limit L and requests spread over any number of hosts exactly L are
//! admitted per window, and nothing counted is lost when a host restarts.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::StoreResult;

/// One window of a key's limits, as the limiter names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitWindow {
    /// Unique per key and window, e.g. `chat:n:2026-11-27T05:41` (the bucket set, the kind, the start).
    pub id: String,
    /// When the window ends (old rows are removed after it).
    pub ends_at: DateTime<Utc>,
    pub limit: u64,
}

/// What [`FleetLimiter::take_limits`] does besides deciding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Count one request in every window if all are under their limits.
    Count,
    /// Decide as `Count` would, counting nothing.
    Peek,
    /// Count one request in every window given, over its limit or not; decide nothing.
    Rates,
}

impl Take {
    pub fn as_str(self) -> &'static str {
        match self {
            Take::Count => "count",
            Take::Peek => "peek",
            Take::Rates => "rates",
        }
    }
}

/// The answer: the windows' counts after the step, and the decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// Per window, in the order given.
    pub counts: Vec<u64>,
    pub allowed: bool,
    /// On refusal: the index of the window at its limit that resets last.
    pub exceeded: Option<usize>,
    /// On refusal: the first refusal in that window across the fleet (the
    /// `api:limit_reached` event fires once per key, limit and window).
    pub first: bool,
}

/// Limits counted once for the whole fleet.
#[async_trait]
pub trait FleetLimiter: Send + Sync + 'static {
    /// Check (and per `mode` count) one request of `key_id` against
    /// `windows`, listed in the order they reset (the last resets last), in
    /// one atomic step shared by every host.
    async fn take_limits(&self, key_id: &str, windows: &[LimitWindow], mode: Take) -> StoreResult<Taken>;
}
