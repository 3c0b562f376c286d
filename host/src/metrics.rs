//! Prometheus metrics, served at `/metrics` (`api::metrics`) to admin keys and to the scrape
//! key of `metrics.scrape_key_env` (docs/decisions/metrics.md). One
//! process-wide registry so every module can record without threading a
//! handle through its signatures.
//!
//! Every label value comes from a bounded set the operator controls: route
//! templates, plugin and index names, fixed reasons — and models only as the
//! config lists them ([`Metrics::model_label`]); any other model a caller
//! names is `other`, so no tenant can grow the exposition.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::config::Config;

/// The model label of every model the config does not list.
pub const OTHER_MODEL: &str = "other";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteStatus {
    pub route: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabel {
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabel {
    pub model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IndexLabel {
    pub index: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TableLabel {
    pub table: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabel {
    pub bucket: String,
    pub window: String,
}

fn latency_buckets() -> impl Iterator<Item = f64> {
    // 100 µs to ~100 s.
    prometheus_client::metrics::histogram::exponential_buckets(0.0001, 2.5, 16)
}

/// Every metric of the gateway.
pub struct Metrics {
    registry: Registry,
    pub requests: Family<RouteStatus, Counter>,
    pub request_duration: Family<RouteLabel, Histogram>,
    pub upstream_latency: Family<ModelLabel, Histogram>,
    pub time_to_first_token: Family<ModelLabel, Histogram>,
    pub failovers: Family<ReasonLabel, Counter>,
    pub plugin_call_duration: Family<gatehouse_plugin_host::metrics::PluginLabel, Histogram>,
    pub plugin_faults: Family<gatehouse_plugin_host::metrics::PluginLabel, Counter>,
    pub plugin_reloads: Family<gatehouse_plugin_host::metrics::OutcomeLabel, Counter>,
    /// Scans of the watched plugin folder (one per debounced change, none while idle).
    pub plugin_scans: Counter,
    pub webhook_queue_depth: Gauge,
    pub provider_sessions: Gauge,
    pub chat_in_flight: Gauge,
    pub chat_shed: Counter,
    pub webhook_deliveries: Family<OutcomeLabel, Counter>,
    pub rate_limit_hits: Family<LimitLabel, Counter>,
    pub auth_failures: Family<ReasonLabel, Counter>,
    pub retrieval_duration: Family<IndexLabel, Histogram>,
    pub retrieval_failures: Family<IndexLabel, Counter>,
    pub store_commits: Counter,
    pub store_commit_writes: Histogram,
    pub store_commit_duration: Histogram,
    pub retention_deleted: Family<TableLabel, Counter>,
    /// Models that may name a series (see [`Metrics::configure_models`]).
    configured_models: ArcSwap<HashSet<String>>,
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("gatehouse");
        let requests = Family::<RouteStatus, Counter>::default();
        let request_duration = Family::<RouteLabel, Histogram>::new_with_constructor(|| Histogram::new(latency_buckets()) as Histogram);
        let upstream_latency = Family::<ModelLabel, Histogram>::new_with_constructor(|| Histogram::new(latency_buckets()) as Histogram);
        let time_to_first_token = Family::<ModelLabel, Histogram>::new_with_constructor(|| Histogram::new(latency_buckets()) as Histogram);
        let failovers = Family::<ReasonLabel, Counter>::default();
        // The plugin runtime crate records these; registered here under their names.
        let plugins = gatehouse_plugin_host::metrics::get();
        let plugin_call_duration = plugins.call_duration.clone();
        let plugin_faults = plugins.faults.clone();
        let plugin_reloads = plugins.reloads.clone();
        let plugin_scans = plugins.scans.clone();
        let webhook_queue_depth = Gauge::default();
        let provider_sessions = Gauge::default();
        let chat_in_flight = Gauge::default();
        let chat_shed = Counter::default();
        let webhook_deliveries = Family::<OutcomeLabel, Counter>::default();
        let rate_limit_hits = Family::<LimitLabel, Counter>::default();
        let auth_failures = Family::<ReasonLabel, Counter>::default();
        let retrieval_duration = Family::<IndexLabel, Histogram>::new_with_constructor(|| Histogram::new(latency_buckets()) as Histogram);
        let retrieval_failures = Family::<IndexLabel, Counter>::default();
        // The store crate records these; registered here under their names.
        let store = gatehouse_store::metrics::get();
        let store_commits = store.commits.clone();
        let retention_deleted = Family::<TableLabel, Counter>::default();
        let store_commit_writes = store.commit_writes.clone();
        let store_commit_duration = store.commit_duration.clone();
        registry.register("http_requests", "HTTP requests by route and status", requests.clone());
        registry.register("http_request_duration_seconds", "HTTP request latency by route", request_duration.clone());
        registry.register("upstream_latency_seconds", "Upstream answer time by model (successful attempts)", upstream_latency.clone());
        registry.register(
            "time_to_first_token_seconds",
            "Time to the first content delta of a stream, by model",
            time_to_first_token.clone(),
        );
        registry.register("failovers", "Moves from a failed model to the next, by reason", failovers.clone());
        registry.register(
            "plugin_call_duration_seconds",
            "Plugin call time (instantiate, call, drop) by plugin",
            plugin_call_duration.clone(),
        );
        registry.register("plugin_faults", "Plugin calls that trapped, ran out of time or memory, by plugin", plugin_faults.clone());
        registry.register("plugin_reloads", "Plugin loads and reloads by outcome", plugin_reloads.clone());
        registry.register("plugin_scans", "Scans of the watched plugin folder", plugin_scans.clone());
        registry.register("webhook_queue_depth", "Webhook deliveries waiting", webhook_queue_depth.clone());
        registry.register(
            "plugin_provider_sessions",
            "Provider attempts holding an instance of their own (at most half the instance pool)",
            provider_sessions.clone(),
        );
        registry.register(
            "chat_in_flight",
            "Chat requests being served, a stream until it ends (sampled at each scrape)",
            chat_in_flight.clone(),
        );
        registry.register(
            "chat_shed",
            "Chat requests refused with 503 `Server busy` because chat.max_in_flight were being served",
            chat_shed.clone(),
        );
        registry.register("webhook_deliveries", "Webhook delivery outcomes", webhook_deliveries.clone());
        registry.register("rate_limit_hits", "Requests rejected by a rate limit or quota", rate_limit_hits.clone());
        registry.register(
            "auth_failures",
            "Requests refused for a missing, malformed, invalid or revoked API key, by reason",
            auth_failures.clone(),
        );
        registry.register("retrieval_duration_seconds", "Knowledge-base retrieval time by index", retrieval_duration.clone());
        registry.register("retrieval_failures", "Retrievals that failed, by index", retrieval_failures.clone());
        registry.register("store_commits", "Group commits of the store (each one fsync when writes are durable)", store_commits.clone());
        registry.register(
            "store_commit_writes",
            "Writes per group commit (a request's outcome is one; pending quota counts ride along)",
            store_commit_writes.clone(),
        );
        registry.register(
            "store_commit_duration_seconds",
            "Time of a group commit's redb commit, from the start of the commit to its return (with durable writes, the writes and their fsync)",
            store_commit_duration.clone(),
        );
        registry.register(
            "retention_deleted",
            "Rows deleted by retention: `idempotency` (records past their TTL), `outbox` (events past webhooks.events_retention_days)",
            retention_deleted.clone(),
        );
        Metrics {
            registry,
            requests,
            request_duration,
            upstream_latency,
            time_to_first_token,
            failovers,
            plugin_call_duration,
            plugin_faults,
            plugin_reloads,
            plugin_scans,
            webhook_queue_depth,
            provider_sessions,
            chat_in_flight,
            chat_shed,
            webhook_deliveries,
            rate_limit_hits,
            auth_failures,
            retrieval_duration,
            retrieval_failures,
            store_commits,
            store_commit_writes,
            store_commit_duration,
            retention_deleted,
            configured_models: ArcSwap::from_pointee(HashSet::new()),
        }
    }

    /// The models that may name a series: those `providers.<name>.models`
    /// lists under its own provider (what `GET /api/models` shows). Called at
    /// start and on every config reload.
    pub fn configure_models(&self, cfg: &Config) {
        let listed = cfg.providers.iter().flat_map(|(name, p)| {
            p.models
                .iter()
                .map(|m| m.trim())
                .filter(move |m| m.split_once('/').is_some_and(|(prov, rest)| prov == name && !rest.is_empty()))
        });
        self.configured_models.store(Arc::new(listed.map(str::to_owned).collect()));
    }

    /// The label of `model`: itself when the config lists it, otherwise
    /// `other`. One lookup and the one string a label always took.
    pub fn model_label(&self, model: &str) -> ModelLabel {
        let listed = self.configured_models.load().contains(model);
        ModelLabel { model: if listed { model } else { OTHER_MODEL }.to_owned() }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "encoding metrics failed");
        }
        out
    }

    /// A request served on `route` (its template, or `unmatched`), counted
    /// and timed (`request_id::scoped` calls this for every request).
    pub fn request_served(&self, route: String, status: u16, took: Duration) {
        let key = RouteStatus { route, status };
        self.requests.get_or_create(&key).inc();
        self.request_duration.get_or_create(&RouteLabel { route: key.route }).observe(took.as_secs_f64());
    }

    pub fn retrieval(&self, index: &str, took: Duration, failed: bool) {
        let label = IndexLabel { index: index.to_owned() };
        self.retrieval_duration.get_or_create(&label).observe(took.as_secs_f64());
        if failed {
            self.retrieval_failures.get_or_create(&label).inc();
        }
    }

    /// Webhook attempts by what came of them: `delivered`, `retry` (failed, scheduled again),
    /// `failed` (attempts used up) and `cancelled` (the endpoint was disabled before it was due).
    /// Rows of `table` deleted by a retention sweep.
    pub fn retention_deleted(&self, table: &str, n: usize) {
        self.retention_deleted.get_or_create(&TableLabel { table: table.to_owned() }).inc_by(n as u64);
    }

    pub fn webhook_outcome(&self, outcome: &'static str, n: u64) {
        self.webhook_deliveries.get_or_create(&OutcomeLabel { outcome: outcome.to_owned() }).inc_by(n);
    }
}

/// The process-wide metrics.
pub fn get() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(Metrics::new)
}
