//! The store's own metric handles. The host registers them in its registry
//! (under the names `/metrics` has always shown); the store only records.

use std::sync::OnceLock;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// What the group commit records.
pub struct StoreMetrics {
    /// Group commits (each one fsync when writes are durable).
    pub commits: Counter,
    /// Writes per group commit.
    pub commit_writes: Histogram,
    /// Time of a group commit's redb commit.
    pub commit_duration: Histogram,
}

/// The process-wide handles (a clone shares the series).
pub fn get() -> &'static StoreMetrics {
    static M: OnceLock<StoreMetrics> = OnceLock::new();
    M.get_or_init(|| StoreMetrics {
        commits: Counter::default(),
        commit_writes: Histogram::new(exponential_buckets(1.0, 2.0, 10)),
        // 100 µs to ~100 s, as every latency histogram of the host.
        commit_duration: Histogram::new(exponential_buckets(0.0001, 2.5, 16)),
    })
}
