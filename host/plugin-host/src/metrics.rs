//! The plugin runtime's own metric handles. The host registers them in its
//! registry (under the names `/metrics` has always shown); the runtime only
//! records. Labels are plugin names and fixed outcomes: a bounded set the
//! operator controls.

use std::sync::OnceLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabel {
    pub plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: String,
}

/// What the runtime records.
pub struct PluginMetrics {
    /// Call time (instantiate, call, drop) by plugin.
    pub call_duration: Family<PluginLabel, Histogram>,
    /// Calls that trapped, ran out of time or memory, by plugin.
    pub faults: Family<PluginLabel, Counter>,
    /// Loads and reloads by outcome (`loaded`, `reloaded`, `failed`, `removed`).
    pub reloads: Family<OutcomeLabel, Counter>,
    /// Scans of the watched folder (one per debounced change, none while idle).
    pub scans: Counter,
}

impl PluginMetrics {
    /// The call-time series of one plugin, to keep and observe without a
    /// label lookup per call (a clone shares the series).
    pub fn call_histogram(&self, plugin: &str) -> Histogram {
        self.call_duration.get_or_create(&PluginLabel { plugin: plugin.to_owned() }).clone()
    }

    /// A call (or one of several calls on one instance) that trapped, ran out of time or memory, or failed.
    pub fn fault(&self, plugin: &str) {
        self.faults.get_or_create(&PluginLabel { plugin: plugin.to_owned() }).inc();
    }

    /// A plugin event of kind `outcome`.
    pub fn reloaded(&self, outcome: &str) {
        self.reloads.get_or_create(&OutcomeLabel { outcome: outcome.to_owned() }).inc();
    }
}

/// The process-wide handles.
pub fn get() -> &'static PluginMetrics {
    static M: OnceLock<PluginMetrics> = OnceLock::new();
    M.get_or_init(|| PluginMetrics {
        // 100 µs to ~100 s, as every latency histogram of the host.
        call_duration: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.0001, 2.5, 16))),
        faults: Family::default(),
        reloads: Family::default(),
        scans: Counter::default(),
    })
}
