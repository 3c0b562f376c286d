//! One config file (TOML) with environment overrides, parsed once at start-up
//! into typed structs. Layers: built-in defaults, then the file, then
//! `GATEHOUSE_*` variables (`GATEHOUSE_LIMITS__CHAT__PER_MINUTE=600` sets
//! `limits.chat.per_minute`), then `WEBHOOKS_ALLOW_PRIVATE` (the contract's name).
//! Secrets are never in the file: a provider names the environment variable
//! or the file that holds its key.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use serde::{Deserialize, Serialize};

use gatehouse_plugin_host::PluginsConfig;

/// Environment variable holding the first admin key on a fresh install.
pub const BOOTSTRAP_KEY_ENV: &str = "GATEHOUSE_BOOTSTRAP_ADMIN_KEY";

/// Top-level keys that `GATEHOUSE_*` variables may set.
const ENV_KEYS: &[&str] = &[
    "listen",
    "data_dir",
    "durable_writes",
    "log",
    "server",
    "limits",
    "providers",
    "indexes",
    "policies",
    "plugins",
    "webhooks",
    "chat",
    "upstream",
    "metrics",
    "store",
];

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Where the redb file, the watched plugin folder and the receipt key live.
    pub data_dir: PathBuf,
    /// Commit every acknowledged write with fsync. Turn off only for benchmarks.
    pub durable_writes: bool,
    pub log: LogConfig,
    pub server: ServerConfig,
    pub limits: LimitsConfig,
    pub chat: ChatConfig,
    pub upstream: UpstreamConfig,
    /// Upstream providers by prefix: model `openai/gpt-4o` uses `[providers.openai]`.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Knowledge bases by name.
    pub indexes: BTreeMap<String, IndexConfig>,
    pub policies: PoliciesConfig,
    pub plugins: PluginsConfig,
    pub webhooks: WebhooksConfig,
    pub metrics: MetricsConfig,
    pub store: StoreConfig,
}

impl Default for Config {
    fn default() -> Self {
        let mut providers = BTreeMap::new();
        providers.insert(
            "echo".to_owned(),
            ProviderConfig {
                plugin: "provider-echo".into(),
                base_url: "echo://local".into(),
                api_key_env: None,
                api_key_file: None,
                confidential: true,
                models: vec!["echo/default".into()],
                config: serde_json::Value::Object(Default::default()),
            },
        );
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("./data"),
            durable_writes: true,
            log: LogConfig::default(),
            server: ServerConfig::default(),
            limits: LimitsConfig::default(),
            chat: ChatConfig::default(),
            upstream: UpstreamConfig::default(),
            providers,
            indexes: BTreeMap::from([(
                DEFAULT_INDEX.to_owned(),
                IndexConfig {
                    retriever: "retriever-local".into(),
                    description: "Gatehouse's own documentation (the bundled example knowledge base)".into(),
                    path: None,
                    top_k: default_top_k(),
                    timeout_ms: default_query_timeout_ms(),
                    build_timeout_ms: default_build_timeout_ms(),
                    config: empty_object(),
                },
            )]),
            policies: PoliciesConfig::default(),
            plugins: PluginsConfig::default(),
            webhooks: WebhooksConfig::default(),
            metrics: MetricsConfig::default(),
            store: StoreConfig::default(),
        }
    }
}

/// Which store the host keeps its state in.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum StoreBackend {
    /// One file under `data_dir`: one host.
    #[default]
    Redb,
    /// A PostgreSQL database shared by a fleet of hosts.
    Postgres,
}

/// `[store]`: where state lives. The PostgreSQL URL (it may carry a
/// password) is read from the environment variable `url_env` names, never
/// from the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    pub backend: StoreBackend,
    /// Environment variable holding `postgres://user:password@host:port/db?sslmode=…`.
    pub url_env: String,
    /// Connections this host keeps open to PostgreSQL.
    pub pool_size: usize,
    /// PEM file of the CA that signed PostgreSQL's certificate; without it, the system's roots.
    pub ca_file: Option<PathBuf>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig { backend: StoreBackend::Redb, url_env: "GATEHOUSE_DATABASE_URL".into(), pool_size: 16, ca_file: None }
    }
}

impl StoreConfig {
    /// The PostgreSQL URL from the environment variable the config names.
    pub fn database_url(&self) -> Result<String, String> {
        match std::env::var(&self.url_env) {
            Ok(url) if !url.trim().is_empty() => Ok(url),
            _ => Err(format!(
                "store.url_env: environment variable {} is not set; put the PostgreSQL URL there (never in the file)",
                self.url_env
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// `text` for people, `json` for log shippers. Levels come from `RUST_LOG`.
    pub format: LogFormat,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Largest request body accepted (413 beyond it).
    pub max_body_bytes: usize,
    /// Time a client has to send the request line and headers (HTTP/1) from
    /// the moment the connection is idle; a slower client is disconnected.
    pub header_read_timeout_ms: u64,
    /// Time an authenticated client has to send the whole body once the
    /// headers are in; a slower one gets 408.
    pub body_read_timeout_ms: u64,
    /// A connection that carries nothing for this long is closed (after the
    /// answer to a request still running). Like nginx's `keepalive_timeout`.
    pub keep_alive_timeout_ms: u64,
    /// On SIGTERM/SIGINT, how long in-flight requests may take to finish.
    pub shutdown_grace_ms: u64,
    /// Bytes of request bodies being received at once, all connections
    /// together; a body that would pass it gets 503 `Server busy`.
    pub max_buffered_body_bytes: usize,
    /// Streams one HTTP/2 connection may have open at once (announced in
    /// SETTINGS_MAX_CONCURRENT_STREAMS).
    pub http2_max_concurrent_streams: u32,
    /// Connections one client address may hold open; 0 (the default) is no
    /// cap. Behind a load balancer every client has the balancer's address:
    /// name it in `trusted_proxies`.
    pub max_connections_per_ip: usize,
    /// Load balancers (addresses or ranges such as `10.0.0.0/8`) whose
    /// `X-Forwarded-For` / `Forwarded` names the client (`server::peers`).
    pub trusted_proxies: Vec<crate::net::Cidr>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_body_bytes: 2 * 1024 * 1024,
            header_read_timeout_ms: 30_000,
            body_read_timeout_ms: 30_000,
            keep_alive_timeout_ms: 75_000,
            shutdown_grace_ms: 30_000,
            max_buffered_body_bytes: 256 * 1024 * 1024,
            http2_max_concurrent_streams: 100,
            max_connections_per_ip: 0,
            trusted_proxies: Vec::new(),
        }
    }
}

/// One set of rate limits (per minute and hour) and quotas (per UTC day and month).
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RateLimits {
    pub per_minute: u64,
    pub per_hour: u64,
    pub per_day: u64,
    pub per_month: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Chat routes, per key.
    pub chat: RateLimits,
    /// `/audit-logs` and `/groups`, per key.
    pub admin_read: RateLimits,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            chat: RateLimits { per_minute: 60, per_hour: 1_000, per_day: 100, per_month: 10_000 },
            admin_read: RateLimits {
                per_minute: 100,
                // The spec sets no hourly limit for admin reads; equal to the
                // daily quota, it never binds first.
                per_hour: 10_000,
                per_day: 10_000,
                per_month: 300_000,
            },
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChatConfig {
    /// Per-attempt deadline for the whole answer (non-streaming) or the longest
    /// silence between stream events after the first token.
    pub timeout_ms: u64,
    /// Per-attempt deadline for the first non-empty content delta (streams).
    pub first_token_timeout_ms: u64,
    /// Idempotency records are kept this long.
    pub idempotency_ttl_secs: u64,
    /// Chat requests served at once (a stream counts until it ends); one more
    /// gets 503 `Server busy` with `Retry-After` (`chat::admission`).
    pub max_in_flight: usize,
    /// The fraction of `max_in_flight` one key may hold (requests in flight,
    /// and bodies being received, each); one more gets 429 with `Retry-After`.
    pub key_share: f64,
}

impl Default for ChatConfig {
    fn default() -> Self {
        ChatConfig {
            timeout_ms: 60_000,
            first_token_timeout_ms: 15_000,
            idempotency_ttl_secs: 24 * 3600,
            max_in_flight: 4096,
            key_share: 0.125,
        }
    }
}

/// How the host reaches upstream providers. `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY`
/// are honoured from the environment.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Extra CA certificate(s) (PEM) trusted besides the system roots.
    pub ca_file: Option<PathBuf>,
    pub connect_timeout_ms: u64,
    /// Largest upstream response body read (non-streaming).
    pub max_response_bytes: usize,
    /// Consecutive failures that put a model into cooldown.
    pub breaker_failures: u32,
    /// How long a model stays in cooldown before one probe request is let through.
    pub breaker_cooldown_ms: u64,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            ca_file: None,
            connect_timeout_ms: 10_000,
            max_response_bytes: 16 * 1024 * 1024,
            breaker_failures: 5,
            breaker_cooldown_ms: 30_000,
        }
    }
}

/// An upstream provider entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// Name of the provider-adapter plugin (`provider-openai`, `provider-anthropic`, ...).
    pub plugin: String,
    /// Base URL of the upstream API.
    pub base_url: String,
    /// Environment variable holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// File holding the API key (re-read on config reload).
    #[serde(default)]
    pub api_key_file: Option<PathBuf>,
    /// Fit to receive data under the `confidential` policy.
    #[serde(default)]
    pub confidential: bool,
    /// Models advertised by discovery routes (`<provider>/<model>`).
    #[serde(default)]
    pub models: Vec<String>,
    /// Plugin-specific settings, handed to the plugin as JSON.
    #[serde(default = "empty_object")]
    pub config: serde_json::Value,
}

/// A knowledge base.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexConfig {
    /// Name of the retriever plugin.
    pub retriever: String,
    #[serde(default)]
    pub description: String,
    /// Folder of documents, mounted read-only into the retriever at `/kb` and
    /// watched: a change re-indexes without a restart. Default for a retriever
    /// that reads files: `<data_dir>/knowledge/<name>`. `none` for a remote
    /// backend that reads no folder.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// Passages put into the model's context (1–20).
    #[serde(default = "default_top_k")]
    pub top_k: u32,
    /// CPU-and-wait deadline of one query, in ms (a remote backend's HTTP time counts).
    #[serde(default = "default_query_timeout_ms")]
    pub timeout_ms: u64,
    /// Deadline of building the index in a fresh instance (first query, re-index), in ms.
    #[serde(default = "default_build_timeout_ms")]
    pub build_timeout_ms: u64,
    /// Retriever-specific settings, handed to the plugin as JSON.
    #[serde(default = "empty_object")]
    pub config: serde_json::Value,
}

/// The knowledge base every fresh install has: Gatehouse's own documentation,
/// written into `<data_dir>/knowledge/gatehouse-docs` on first start.
pub const DEFAULT_INDEX: &str = "gatehouse-docs";

fn default_top_k() -> u32 {
    4
}

fn default_query_timeout_ms() -> u64 {
    5_000
}

fn default_build_timeout_ms() -> u64 {
    30_000
}

impl IndexConfig {
    /// The folder this knowledge base reads, if any (`path = "none"` opts out).
    pub fn folder(&self, name: &str, data_dir: &Path) -> Option<PathBuf> {
        match &self.path {
            Some(p) if p.as_os_str() == "none" => None,
            Some(p) => Some(p.clone()),
            None => Some(data_dir.join("knowledge").join(name)),
        }
    }
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PoliciesConfig {
    /// Policy used when neither the request, the key nor its group names one.
    pub default: String,
}

impl Default for PoliciesConfig {
    fn default() -> Self {
        PoliciesConfig { default: "internal".into() }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhooksConfig {
    /// Allow private, loopback and link-local targets (`WEBHOOKS_ALLOW_PRIVATE=true`).
    pub allow_private: bool,
    /// Delay before each attempt, in seconds (default: 0, 10, 60); its
    /// length is the number of attempts. See [`WebhooksConfig::retry_delays`].
    pub retry_delays_secs: Option<Vec<u64>>,
    /// The same in milliseconds, for delays under a second or between whole
    /// seconds; set one of the two.
    pub retry_delays_ms: Option<Vec<u64>>,
    /// Timeout of one attempt.
    pub timeout_ms: u64,
    /// Consecutive failed deliveries that disable an endpoint.
    pub disable_after: u32,
    /// How often the dispatcher looks for new events in the outbox (it is also
    /// woken at once by the test route). Bounds the added delivery latency.
    pub poll_interval_ms: u64,
    /// Attempts in flight at once towards one endpoint; a slow endpoint holds
    /// at most this many connections and never delays the others.
    pub max_in_flight_per_endpoint: usize,
    /// Finished deliveries kept per endpoint for the deliveries view; older
    /// ones are pruned (pending deliveries are never pruned).
    pub deliveries_kept_per_endpoint: usize,
    /// Days an event stays in the outbox (the `GET /api/admin/events` log and
    /// the webhooks' source) once every enabled endpoint has dealt with it;
    /// 0 keeps events forever.
    pub events_retention_days: u64,
}

impl WebhooksConfig {
    /// The delay before each attempt, from whichever of `retry_delays_ms` and
    /// `retry_delays_secs` is set (`Config::check` refuses both), else 0, 10 and
    /// 60 seconds. Checked to fit `chrono::Duration` and a date when loaded.
    pub fn retry_delays(&self) -> Vec<chrono::Duration> {
        match (&self.retry_delays_ms, &self.retry_delays_secs) {
            (Some(ms), _) => ms.iter().map(|&m| chrono::Duration::milliseconds(m as i64)).collect(),
            (None, Some(secs)) => secs.iter().map(|&s| chrono::Duration::seconds(s as i64)).collect(),
            (None, None) => [0, 10, 60].into_iter().map(chrono::Duration::seconds).collect(),
        }
    }
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        WebhooksConfig {
            allow_private: false,
            retry_delays_secs: None,
            retry_delays_ms: None,
            timeout_ms: 5_000,
            disable_after: 20,
            poll_interval_ms: 100,
            max_in_flight_per_endpoint: 8,
            deliveries_kept_per_endpoint: 200,
            events_retention_days: 30,
        }
    }
}

/// Who may read `/metrics` besides admin keys (docs/decisions/metrics.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Environment variable holding the scrape key: a bearer token (at least
    /// 32 visible ASCII characters) that reads `/metrics` and nothing else.
    /// Unset: only admin keys read `/metrics`.
    pub scrape_key_env: Option<String>,
    /// The scrape key's SHA-256, read from `scrape_key_env` when the config loads.
    #[serde(skip)]
    pub scrape_key: Option<ScrapeKey>,
}

/// SHA-256 of the scrape key; the key itself is not kept.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ScrapeKey([u8; 32]);

impl std::fmt::Debug for ScrapeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScrapeKey(***)")
    }
}

impl ScrapeKey {
    pub fn of(secret: &str) -> Self {
        use sha2::Digest as _;
        ScrapeKey(sha2::Sha256::digest(secret.as_bytes()).into())
    }

    /// Is `token` the scrape key? Compared in constant time.
    pub fn matches(&self, token: &str) -> bool {
        use subtle::ConstantTimeEq as _;
        ScrapeKey::of(token).0.ct_eq(&self.0).into()
    }
}

impl MetricsConfig {
    /// Read the scrape key from the environment variable the config names.
    fn resolve(&mut self) -> Result<(), String> {
        let Some(var) = &self.scrape_key_env else {
            self.scrape_key = None;
            return Ok(());
        };
        let key = std::env::var(var).map_err(|_| format!("metrics.scrape_key_env: environment variable {var} is not set"))?;
        let key = key.trim();
        if key.len() < 32 || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!("metrics.scrape_key_env: the key in {var} must be at least 32 visible ASCII characters"));
        }
        self.scrape_key = Some(ScrapeKey::of(key));
        Ok(())
    }
}

/// Longest time span a setting may give, in seconds (ten years).
const MAX_SPAN_SECS: u64 = 10 * 365 * 24 * 3600;

/// A config that could not be loaded; the message names the file and the key.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration ({source_desc}): {message}")]
pub struct ConfigError {
    pub source_desc: String,
    pub message: String,
}

impl Config {
    /// Defaults, then `path` (if given), then the environment.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let source_desc = match path {
            Some(p) => p.display().to_string(),
            None => "built-in defaults and environment".to_owned(),
        };
        let mut fig = Figment::new();
        if let Some(p) = path {
            if !p.is_file() {
                return Err(ConfigError { source_desc, message: "file not found".into() });
            }
            fig = fig.merge(Toml::file_exact(p));
        }
        fig = fig
            .merge(Env::prefixed("GATEHOUSE_").split("__").filter(|k| {
                let top = k.as_str().split('.').next().unwrap_or_default().to_ascii_lowercase();
                ENV_KEYS.contains(&top.as_str())
            }))
            .merge(Env::raw().only(&["WEBHOOKS_ALLOW_PRIVATE"]).map(|_| "webhooks.allow_private".into()));
        let mut cfg: Config = fig.extract().map_err(|e| ConfigError { source_desc: source_desc.clone(), message: e.to_string() })?;
        cfg.validate().map_err(|message| ConfigError { source_desc: source_desc.clone(), message })?;
        cfg.metrics.resolve().map_err(|message| ConfigError { source_desc, message })?;
        Ok(cfg)
    }

    /// Checks that serde cannot express.
    fn validate(&self) -> Result<(), String> {
        for (name, p) in &self.providers {
            if name.is_empty() || name.contains('/') {
                return Err(format!("providers.{name}: a provider name may not be empty or contain `/`"));
            }
            if p.plugin.trim().is_empty() {
                return Err(format!("providers.{name}.plugin: name the provider-adapter plugin"));
            }
            if !p.config.is_object() {
                return Err(format!("providers.{name}.config: must be a table"));
            }
        }
        for (name, ix) in &self.indexes {
            if name == "Zero-Knowledge" {
                return Err("indexes.Zero-Knowledge: this name is reserved for \"no retrieval\"".into());
            }
            if ix.retriever.trim().is_empty() {
                return Err(format!("indexes.{name}.retriever: name the retriever plugin"));
            }
            if !(1..=20).contains(&ix.top_k) {
                return Err(format!("indexes.{name}.top_k: must be between 1 and 20"));
            }
            if ix.timeout_ms == 0 || ix.build_timeout_ms == 0 {
                return Err(format!("indexes.{name}: timeouts must be at least 1 ms"));
            }
            if !ix.config.is_object() {
                return Err(format!("indexes.{name}.config: must be a table"));
            }
        }
        for (plugin, settings) in &self.plugins.settings {
            if settings.writable_cache {
                if settings.cache_limit_mb == 0 {
                    return Err(format!("plugins.settings.{plugin}.cache_limit_mb: must be at least 1"));
                }
                let guest = gatehouse_plugin_host::cache_folder::GUEST_PATH.trim_start_matches('/');
                if let Some(dir) = settings.read_only_dirs.iter().find(|d| d.file_name().is_some_and(|n| n == guest)) {
                    return Err(format!(
                        "plugins.settings.{plugin}.read_only_dirs: {} would appear at /{guest}, where writable_cache mounts the plugin's cache folder; rename the folder",
                        dir.display()
                    ));
                }
            }
            for (header, var) in &settings.outbound_header_env {
                if axum::http::HeaderName::from_bytes(header.as_bytes()).is_err() {
                    return Err(format!("plugins.settings.{plugin}.outbound_header_env: `{header}` is not a valid header name"));
                }
                if var.trim().is_empty() {
                    return Err(format!("plugins.settings.{plugin}.outbound_header_env.{header}: name an environment variable"));
                }
            }
        }
        for (what, l) in [("limits.chat", &self.limits.chat), ("limits.admin_read", &self.limits.admin_read)] {
            if l.per_minute == 0 || l.per_hour == 0 || l.per_day == 0 || l.per_month == 0 {
                return Err(format!("{what}: limits must be at least 1"));
            }
        }
        if self.server.header_read_timeout_ms == 0 || self.server.body_read_timeout_ms == 0 || self.server.keep_alive_timeout_ms == 0 {
            return Err(
                "server.header_read_timeout_ms, server.body_read_timeout_ms, server.keep_alive_timeout_ms: must be at least 1".into()
            );
        }
        if self.chat.max_in_flight == 0 {
            return Err("chat.max_in_flight: must be at least 1".into());
        }
        if !(self.chat.key_share > 0.0 && self.chat.key_share <= 1.0) {
            return Err("chat.key_share: a fraction of chat.max_in_flight above 0 and at most 1 (1 lets one key use the whole host)".into());
        }
        if self.server.http2_max_concurrent_streams == 0 {
            return Err("server.http2_max_concurrent_streams: must be at least 1".into());
        }
        if self.server.max_buffered_body_bytes < self.server.max_body_bytes {
            return Err("server.max_buffered_body_bytes: must be at least server.max_body_bytes, or no large body could arrive".into());
        }
        if self.server.max_body_bytes < 300 * 1024 {
            return Err("server.max_body_bytes: must be at least 307200 so a 256 KB message fits".into());
        }
        if self.store.backend == StoreBackend::Postgres {
            if self.store.url_env.trim().is_empty() {
                return Err("store.url_env: name the environment variable that holds the PostgreSQL URL".into());
            }
            if !(1..=1000).contains(&self.store.pool_size) {
                return Err("store.pool_size: between 1 and 1000 connections".into());
            }
            if let Some(ca) = &self.store.ca_file
                && !ca.is_file()
            {
                return Err(format!("store.ca_file: {} is not a file", ca.display()));
            }
        }
        match (&self.webhooks.retry_delays_secs, &self.webhooks.retry_delays_ms) {
            (Some(_), Some(_)) => return Err("webhooks: set retry_delays_secs or retry_delays_ms, not both".into()),
            (Some(d), None) | (None, Some(d)) if d.is_empty() => {
                let name = if self.webhooks.retry_delays_ms.is_some() { "retry_delays_ms" } else { "retry_delays_secs" };
                return Err(format!("webhooks.{name}: give at least one attempt"));
            }
            _ => {}
        }
        // These are added to dates with chrono, which panics on overflow
        // (found by the `config` fuzz target): keep them to sane spans.
        let too_long = |secs: u64| secs > MAX_SPAN_SECS;
        if too_long(self.chat.idempotency_ttl_secs) {
            return Err(format!("chat.idempotency_ttl_secs: at most {MAX_SPAN_SECS} (ten years)"));
        }
        if self.webhooks.retry_delays_secs.iter().flatten().any(|&s| too_long(s)) {
            return Err(format!("webhooks.retry_delays_secs: each delay at most {MAX_SPAN_SECS} (ten years)"));
        }
        if self.webhooks.retry_delays_ms.iter().flatten().any(|&ms| too_long(ms / 1000)) {
            return Err(format!("webhooks.retry_delays_ms: each delay at most {MAX_SPAN_SECS}000 (ten years)"));
        }
        if too_long(self.webhooks.poll_interval_ms / 1000) {
            return Err(format!("webhooks.poll_interval_ms: at most {MAX_SPAN_SECS}000 (ten years)"));
        }
        if too_long(self.webhooks.events_retention_days.saturating_mul(24 * 3600)) {
            return Err(format!(
                "webhooks.events_retention_days: at most {} (ten years; 0 keeps events forever)",
                MAX_SPAN_SECS / (24 * 3600)
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(contents: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::Builder::new().suffix(".toml").tempfile().expect("temp file");
        f.write_all(contents.as_bytes()).expect("write");
        f
    }

    #[test]
    fn defaults_are_the_spec_values() {
        let c = Config::default();
        assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(c.limits.chat.per_minute, 60);
        assert_eq!(c.limits.chat.per_day, 100);
        assert_eq!(c.webhooks.retry_delays(), [0, 10, 60].map(chrono::Duration::seconds));
        assert!(c.providers.contains_key("echo"));
    }

    #[test]
    fn file_values_override_defaults() {
        let f = write("listen = \"127.0.0.1:9999\"\n[limits.chat]\nper_minute = 5\nper_hour = 6\nper_day = 7\nper_month = 8\n");
        let c = Config::load(Some(f.path())).expect("valid");
        assert_eq!(c.listen.port(), 9999);
        assert_eq!(c.limits.chat.per_month, 8);
    }

    #[test]
    fn errors_name_the_file_and_the_key() {
        let f = write("[limits.chat]\nper_minute = \"lots\"\n");
        let e = Config::load(Some(f.path())).expect_err("invalid");
        let msg = e.to_string();
        assert!(msg.contains(&f.path().display().to_string()), "{msg}");
        assert!(msg.contains("per_minute"), "{msg}");
    }

    #[test]
    fn unknown_keys_are_refused() {
        let f = write("lisen = \"127.0.0.1:1\"\n");
        let msg = Config::load(Some(f.path())).expect_err("unknown").to_string();
        assert!(msg.contains("lisen"), "{msg}");
    }

    #[test]
    fn semantic_errors_name_the_key() {
        let f = write("[providers.x]\nplugin = \"\"\nbase_url = \"http://x\"\n");
        let msg = Config::load(Some(f.path())).expect_err("empty plugin").to_string();
        assert!(msg.contains("providers.x.plugin"), "{msg}");
        let f = write("[chat]\nmax_in_flight = 0\n");
        let msg = Config::load(Some(f.path())).expect_err("no slot at all").to_string();
        assert!(msg.contains("chat.max_in_flight"), "{msg}");
        for (toml, key) in [
            ("[chat]\nkey_share = 0.0\n", "chat.key_share"),
            ("[chat]\nkey_share = 1.5\n", "chat.key_share"),
            ("[server]\nhttp2_max_concurrent_streams = 0\n", "server.http2_max_concurrent_streams"),
            ("[server]\ntrusted_proxies = [\"10.0.0.0/40\"]\n", "trusted_proxies"),
            ("[plugins.settings.r]\nwritable_cache = true\ncache_limit_mb = 0\n", "plugins.settings.r.cache_limit_mb"),
            // A read-only folder named `cache` would hide the writable one at /cache.
            ("[plugins.settings.r]\nwritable_cache = true\nread_only_dirs = [\"/srv/cache\"]\n", "plugins.settings.r.read_only_dirs"),
        ] {
            let msg = Config::load(Some(write(toml).path())).expect_err(key).to_string();
            assert!(msg.contains(key), "{msg}");
        }
        let f = write("[server]\nmax_connections_per_ip = 4\ntrusted_proxies = [\"10.0.0.0/8\", \"192.0.2.7\"]\n");
        assert_eq!(Config::load(Some(f.path())).expect("valid").server.trusted_proxies.len(), 2);
    }

    #[test]
    fn the_example_config_is_valid() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/gatehouse.toml");
        let c = Config::load(Some(&p)).expect("examples/gatehouse.toml must stay valid");
        assert!(c.providers.contains_key("openai"));
    }

    #[test]
    fn webhook_retry_delays_come_in_seconds_or_milliseconds() {
        let c = Config::load(Some(write("[webhooks]\nretry_delays_ms = [0, 250, 1500]\n").path())).expect("valid");
        assert_eq!(c.webhooks.retry_delays(), [0, 250, 1500].map(chrono::Duration::milliseconds));
        let c = Config::load(Some(write("[webhooks]\nretry_delays_secs = [1, 2]\n").path())).expect("valid");
        assert_eq!(c.webhooks.retry_delays(), [1, 2].map(chrono::Duration::seconds));
    }

    #[test]
    fn spans_that_would_overflow_a_date_are_refused() {
        for (toml, key) in [
            ("[chat]\nidempotency_ttl_secs = 9223372036854775807\n", "chat.idempotency_ttl_secs"),
            ("[webhooks]\nretry_delays_secs = [0, 99999999999999]\n", "webhooks.retry_delays_secs"),
            ("[webhooks]\nretry_delays_ms = [0, 99999999999999999]\n", "webhooks.retry_delays_ms"),
            ("[webhooks]\nretry_delays_ms = []\n", "webhooks.retry_delays_ms"),
            ("[webhooks]\nretry_delays_secs = []\n", "webhooks.retry_delays_secs"),
            ("[webhooks]\nretry_delays_secs = [0]\nretry_delays_ms = [0]\n", "not both"),
            ("[webhooks]\npoll_interval_ms = 9223372036854775807\n", "webhooks.poll_interval_ms"),
            ("[webhooks]\nevents_retention_days = 9223372036854775807\n", "webhooks.events_retention_days"),
        ] {
            let f = write(toml);
            let msg = Config::load(Some(f.path())).expect_err(key).to_string();
            assert!(msg.contains(key), "{msg}");
        }
        let f = write("[chat]\nidempotency_ttl_secs = 315360000\n[webhooks]\nretry_delays_secs = [0, 315360000]\n");
        assert!(Config::load(Some(f.path())).is_ok());
    }

    #[test]
    fn a_scrape_key_must_come_from_a_set_variable() {
        let f = write("[metrics]\nscrape_key_env = \"GATEHOUSE_TEST_SURELY_UNSET_SCRAPE_KEY\"\n");
        let msg = Config::load(Some(f.path())).expect_err("unset variable").to_string();
        assert!(msg.contains("metrics.scrape_key_env") && msg.contains("GATEHOUSE_TEST_SURELY_UNSET_SCRAPE_KEY"), "{msg}");
        let key = ScrapeKey::of("scrape-0123456789abcdefghijklmnopqrstuvwxyz");
        assert!(key.matches("scrape-0123456789abcdefghijklmnopqrstuvwxyz"));
        assert!(!key.matches("scrape-0123456789abcdefghijklmnopqrstuvwxyZ"));
        assert_eq!(format!("{key:?}"), "ScrapeKey(***)");
        assert!(Config::load(Some(write("").path())).expect("no scrape key").metrics.scrape_key.is_none());
    }

    #[test]
    fn the_store_section_names_the_backend_and_where_the_url_comes_from() {
        let c = Config::load(Some(write("").path())).expect("defaults");
        assert_eq!(c.store.backend, StoreBackend::Redb);
        assert_eq!(c.store.url_env, "GATEHOUSE_DATABASE_URL");
        let f = write("[store]\nbackend = \"postgres\"\nurl_env = \"GATEHOUSE_TEST_SURELY_UNSET_DB_URL\"\npool_size = 4\n");
        let c = Config::load(Some(f.path())).expect("valid");
        assert_eq!((c.store.backend, c.store.pool_size), (StoreBackend::Postgres, 4));
        let msg = c.store.database_url().expect_err("unset variable");
        assert!(msg.contains("GATEHOUSE_TEST_SURELY_UNSET_DB_URL"), "{msg}");
        // The URL itself is not a config key: it would put a password in the file.
        let msg = Config::load(Some(write("[store]\nurl = \"postgres://x\"\n").path())).expect_err("url in the file").to_string();
        assert!(msg.contains("url"), "{msg}");
        for (toml, key) in [
            ("[store]\nbackend = \"postgres\"\npool_size = 0\n", "store.pool_size"),
            ("[store]\nbackend = \"postgres\"\nurl_env = \"\"\n", "store.url_env"),
            ("[store]\nbackend = \"postgres\"\nca_file = \"/nonexistent/ca.pem\"\n", "store.ca_file"),
            ("[store]\nbackend = \"mysql\"\n", "backend"),
        ] {
            let msg = Config::load(Some(write(toml).path())).expect_err(key).to_string();
            assert!(msg.contains(key), "{msg}");
        }
    }

    #[test]
    fn missing_file_is_an_error() {
        let e = Config::load(Some(Path::new("/nonexistent/gatehouse.toml"))).expect_err("missing");
        assert!(e.to_string().contains("file not found"));
    }
}
