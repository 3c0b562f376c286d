//! The WebAssembly plugin runtime: one engine, pre-instantiated components,
//! a fresh store per call with a CPU deadline and a memory cap, and hot
//! reload from a watched folder.
//!
//! The registry of loaded plugins is an immutable snapshot behind an atomic
//! pointer: a request takes the snapshot when it starts and keeps it to the
//! end; a reload compiles and checks new files off the request path, then
//! swaps the pointer. A file that fails the check never replaces a working
//! plugin. Every load, reload, failure and removal is logged and audited.
//!
//! Providers, shields and policies are stateless: every call instantiates
//! from the `InstancePre` (microseconds with the pooling allocator), so no
//! call sees another's state; their expensive setup (compiled pattern sets,
//! model weights) is built into the component at compile time. Retrievers
//! hold an index, so they live in pools of warm instances (`warm_retriever`).
//!
//! This crate imports nothing from the host. It speaks in its own terms: the
//! WIT worlds' data types ([`plugin::provider_calls`] and the other call
//! modules), [`PluginEvent`]s for whoever records them, metric handles the
//! host registers ([`metrics`]). The host adapts it to the chat path's traits
//! and embeds the bundled components, handing them to [`PluginRuntime::start`]
//! as data.

mod bindings;
pub mod cache_folder;
pub mod config;
mod engine;
pub mod folder;
pub mod metrics;
mod outbound;
pub mod plugin;
mod published;
mod state;
pub mod stderr;
mod watcher;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use serde::Serialize;

pub use config::{PluginSettings, PluginsConfig};
pub use engine::PROVIDER_SESSIONS;
pub use plugin::{Kind, Plugin, PluginError, PluginSummary, Source};
pub use published::ActiveVersion;

/// Components that ship inside the binary: (crate name, component bytes).
pub type Bundled = &'static [(&'static str, &'static [u8])];

/// Hex SHA-256 of `bytes`: a plugin's identity in listings, events and the folder's state.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// What happened to a plugin, for the log and the audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginAction {
    /// A plugin was loaded (bundled at start, or a new file in the watched folder).
    Loaded,
    /// A file replaced a loaded plugin of the same name (or overrides a bundled one).
    Reloaded,
    /// A file failed the check; whatever served before keeps serving.
    Failed,
    /// A file was removed; a bundled plugin of that name serves again.
    Removed,
}

impl PluginAction {
    /// `loaded`, `reloaded`, `failed`, `removed` (audit `operation` is `plugin_<this>`).
    pub fn as_str(self) -> &'static str {
        match self {
            PluginAction::Loaded => "loaded",
            PluginAction::Reloaded => "reloaded",
            PluginAction::Failed => "failed",
            PluginAction::Removed => "removed",
        }
    }
}

/// One plugin event.
#[derive(Debug, Clone)]
pub struct PluginEvent {
    pub action: PluginAction,
    /// Plugin name (the file's escaped name when it was refused).
    pub plugin: String,
    /// The plugin's kind, when the component got far enough to tell.
    pub kind: Option<Kind>,
    /// Hex SHA-256 of the component bytes, when they could be read.
    pub sha256: Option<String>,
    /// `bundled` or the file's path (escaped: see [`folder::shown`]).
    pub source: String,
    /// What happened, for operators.
    pub message: String,
}

/// Receives plugin events (the server writes them to the audit log).
pub trait PluginEventSink: Send + Sync {
    /// Called from loader threads; must not block for long.
    fn event(&self, event: PluginEvent);
}

/// Logs events only.
pub struct LogSink;

impl PluginEventSink for LogSink {
    fn event(&self, e: PluginEvent) {
        log_event(&e);
    }
}

/// Log an event and count it in the metrics (what every sink does first).
pub fn log_event(e: &PluginEvent) {
    crate::metrics::get().reloaded(e.action.as_str());
    match e.action {
        PluginAction::Failed => tracing::error!(plugin = %e.plugin, source = %e.source, "plugin not loaded: {}", e.message),
        _ => tracing::info!(plugin = %e.plugin, kind = ?e.kind, sha256 = ?e.sha256, source = %e.source, "plugin {}", e.action.as_str()),
    }
}

/// An immutable set of loaded plugins.
#[derive(Default)]
pub struct Registry {
    plugins: BTreeMap<String, Arc<Plugin>>,
}

impl Registry {
    /// A plugin of any kind by name.
    pub fn get(&self, name: &str) -> Option<&Arc<Plugin>> {
        self.plugins.get(name)
    }

    /// A plugin of the given kind by name.
    pub fn of_kind(&self, name: &str, kind: Kind) -> Option<Arc<Plugin>> {
        self.plugins.get(name).filter(|p| p.kind == kind).cloned()
    }

    /// How many plugins are loaded.
    pub fn len(&self) -> usize {
        self.plugins.len()
    }

    /// True when no plugin is loaded.
    pub fn is_empty(&self) -> bool {
        self.plugins.is_empty()
    }

    /// Names of the loaded plugins of a kind, sorted.
    pub fn names_of(&self, kind: Kind) -> Vec<String> {
        self.plugins.values().filter(|p| p.kind == kind).map(|p| p.name.clone()).collect()
    }

    /// Every loaded plugin as `GET /api/admin/plugins` shows it, sorted by name.
    pub fn list(&self) -> Vec<PluginSummary> {
        self.plugins.values().map(|p| p.summary()).collect()
    }
}

/// Shared pieces for loading.
struct Loader {
    engine: wasmtime::Engine,
    linkers: plugin::Linkers,
    config: ArcSwap<PluginsConfig>,
    /// Fixed at start: the epoch ticker's period and the pool's memory slots
    /// (`epoch_tick_ms`, `memory_limit_mb`); a reload can lower the memory cap, not raise it.
    tick_ms: u64,
    max_memory_bytes: usize,
    /// The server's data dir (the default home of the plugins' cache
    /// folders); `None` when a file is only inspected.
    data_dir: Option<PathBuf>,
}

impl Loader {
    fn new(cfg: &PluginsConfig, data_dir: Option<&Path>) -> anyhow::Result<Loader> {
        let engine = engine::build(cfg)?;
        let tick_ms = cfg.epoch_tick_ms.max(1);
        engine::start_ticker(&engine, Duration::from_millis(tick_ms));
        Ok(Loader {
            linkers: plugin::Linkers::new(&engine)?,
            engine,
            config: ArcSwap::from_pointee(cfg.clone()),
            tick_ms,
            max_memory_bytes: memory_bytes(cfg),
            data_dir: data_dir.map(Path::to_path_buf),
        })
    }

    fn grants(&self, name: &str) -> plugin::Grants {
        let cfg = self.config.load();
        let settings = cfg.settings.get(name).cloned().unwrap_or_default();
        // Checked before a config is taken (start, reload); a variable unset since then loses its header.
        let headers = cfg.outbound_headers(name).unwrap_or_else(|e| {
            tracing::error!(plugin = name, "{e}; its outbound requests go without that header");
            Vec::new()
        });
        plugin::Grants {
            read_only_dirs: settings.read_only_dirs.clone(),
            outbound: Arc::new(outbound::Grant::new(&settings.allowed_outbound_hosts, headers)),
            deadline_ticks: cfg.call_timeout_ms.div_ceil(self.tick_ms) + 1,
            deadline_ms: cfg.call_timeout_ms,
            tick_ms: self.tick_ms,
            memory_bytes: memory_bytes(&cfg).min(self.max_memory_bytes),
            cache: self.cache_folder(&cfg, name, &settings),
        }
    }

    /// The plugin's writable cache folder, when granted and it can be made.
    fn cache_folder(&self, cfg: &PluginsConfig, name: &str, settings: &PluginSettings) -> Option<Arc<cache_folder::CacheFolder>> {
        if !settings.writable_cache || name.is_empty() {
            return None;
        }
        let root = cfg.plugin_cache_root(self.data_dir.as_deref()?);
        let limit = settings.cache_limit_mb.saturating_mul(1024 * 1024);
        match cache_folder::CacheFolder::prepare(&root, name, limit) {
            Ok(f) => Some(f),
            Err(e) => {
                tracing::error!(plugin = name, "plugins.settings.{name}.writable_cache: {e}; the plugin runs without it");
                None
            }
        }
    }

    fn load(&self, bytes: &[u8], source: Source) -> Result<Plugin, String> {
        plugin::load(&self.engine, &self.linkers, bytes, source, |name| Arc::new(self.grants(name)))
    }
}

fn memory_bytes(cfg: &PluginsConfig) -> usize {
    (cfg.memory_limit_mb.max(1) * 1024 * 1024) as usize
}

/// The runtime: bundled plugins, the watched folder's overrides, the current snapshot.
pub struct PluginRuntime {
    loader: Loader,
    bundled: BTreeMap<String, Arc<Plugin>>,
    /// The watched folder: each file's state and what it serves.
    folder: std::sync::Mutex<folder::Folder<Plugin>>,
    /// The plugin registry's active versions (locked after `folder` when both are).
    published: std::sync::Mutex<published::Published>,
    /// Versions loaded beside the snapshot ([`PluginRuntime::load_detached`]),
    /// held by their callers: a config reload regrants them with the rest.
    detached: std::sync::Mutex<Vec<std::sync::Weak<Plugin>>>,
    current: ArcSwap<Registry>,
    dir: PathBuf,
    events: Arc<dyn PluginEventSink>,
}

impl PluginRuntime {
    /// Load the `bundled` components and the watched folder; start the epoch ticker.
    /// (The folder watcher is started separately with [`PluginRuntime::watch`].)
    pub fn start(
        cfg: &PluginsConfig,
        data_dir: &Path,
        bundled_components: Bundled,
        events: Arc<dyn PluginEventSink>,
    ) -> anyhow::Result<Arc<Self>> {
        let loader = Loader::new(cfg, Some(data_dir))?;
        let mut bundled = BTreeMap::new();
        for (crate_name, bytes) in bundled_components {
            match loader.load(bytes, Source::Bundled) {
                Ok(p) => {
                    events.event(PluginEvent {
                        action: PluginAction::Loaded,
                        plugin: p.name.clone(),
                        kind: Some(p.kind),
                        sha256: Some(p.sha256.clone()),
                        source: "bundled".into(),
                        message: format!("bundled plugin {} {} loaded", p.name, p.version),
                    });
                    bundled.insert(p.name.clone(), Arc::new(p));
                }
                Err(e) => events.event(PluginEvent {
                    action: PluginAction::Failed,
                    plugin: (*crate_name).to_owned(),
                    kind: None,
                    sha256: None,
                    source: "bundled".into(),
                    message: e,
                }),
            }
        }
        let dir = cfg.watched_dir(data_dir);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot create the watched plugin folder");
        }
        let rt = Arc::new(PluginRuntime {
            loader,
            current: ArcSwap::from_pointee(Registry { plugins: bundled.clone() }),
            bundled,
            folder: std::sync::Mutex::new(folder::Folder::new(dir.clone())),
            published: Default::default(),
            detached: Default::default(),
            dir,
            events,
        });
        rt.rescan();
        Ok(rt)
    }

    /// The current registry; keep it for the whole request.
    pub fn snapshot(&self) -> Arc<Registry> {
        self.current.load_full()
    }

    /// The folder watched for `*.wasm` files.
    pub fn watched_dir(&self) -> &Path {
        &self.dir
    }

    /// Config reload: plugins loaded from now on, and every loaded plugin's
    /// next call, get the new grants and limits (`[plugins.settings.<name>]`
    /// `allowed_outbound_hosts`, `read_only_dirs` and `writable_cache`, `call_timeout_ms`,
    /// `memory_limit_mb` up to its value at start). Warm retriever instances
    /// made under the old grants are replaced (by their owner: the host's knowledge bases). Returns the names
    /// of the plugins whose grants changed.
    pub fn update_config(&self, cfg: &PluginsConfig) -> Vec<String> {
        if memory_bytes(cfg) > self.loader.max_memory_bytes {
            tracing::warn!(
                memory_limit_mb = cfg.memory_limit_mb,
                "plugins.memory_limit_mb can only be raised by a restart; the value at start stays the cap"
            );
        }
        let old = self.loader.config.swap(Arc::new(cfg.clone()));
        let mut folder = self.folder.lock().unwrap_or_else(|p| p.into_inner());
        if old.max_component_mb != cfg.max_component_mb {
            // Files refused by the old size limit are looked at again at the next scan.
            folder.recheck_refused();
        }
        let published = self.published.lock().unwrap_or_else(|p| p.into_inner());
        let detached = self.detached();
        let loaded =
            self.bundled.values().chain(published.serving.values()).chain(folder.served().map(|(_, (_, p))| p)).chain(detached.iter());
        let mut changed: Vec<String> = loaded.filter(|p| p.regrant(self.loader.grants(&p.name))).map(|p| p.name.clone()).collect();
        changed.sort();
        changed.dedup();
        for name in &changed {
            tracing::info!(plugin = %name, "plugin grants and limits updated from the reloaded config");
        }
        changed
    }

    /// Bring the registry in line with the watched folder: look at the files
    /// that changed (by size, mtime, ctime and inode; unchanged ones are not
    /// read), load those whose hash changed, apply the folder's rules
    /// ([`folder`]), swap the snapshot. Blocking (compiles). Run after a
    /// folder event and after a config reload (the rules may have changed).
    ///
    /// Events are published only after the new snapshot is in place, so whoever
    /// sees "reloaded" or "removed" also sees the registry that matches it.
    pub fn rescan(&self) {
        crate::metrics::get().scans.inc();
        let rules = self.rules();
        let mut folder = self.folder.lock().unwrap_or_else(|p| p.into_inner());
        let report = folder.scan(&rules, |bytes, path| self.loader.load(bytes, Source::File(path.to_path_buf())));
        if report.changed {
            let published = self.published.lock().unwrap_or_else(|p| p.into_inner());
            self.current.store(Arc::new(self.merged(&folder, &published)));
        }
        drop(folder);
        for mut c in report.changes {
            let source = folder::shown_path(&self.dir.join(&c.file));
            if let (PluginAction::Loaded | PluginAction::Reloaded, Some(p)) = (c.action, &c.version) {
                c.message.push_str(&format!(" (version {})", folder::shown_text(&p.version)));
            }
            self.events.event(PluginEvent {
                action: c.action,
                plugin: c.plugin,
                kind: c.version.as_ref().map(|p| p.kind),
                sha256: c.sha256.or_else(|| c.version.as_ref().map(|p| p.sha256.clone())),
                source,
                message: c.message,
            });
        }
    }

    /// The folder's rules under the current config.
    fn rules(&self) -> folder::Rules {
        let cfg = self.loader.config.load();
        folder::Rules {
            max_bytes: cfg.max_component_bytes(),
            allow_policy_overrides: cfg.allow_policy_overrides.clone(),
            bundled: self.bundled.iter().map(|(n, p)| (n.clone(), p.kind)).collect(),
        }
    }

    /// The watched folder's files as `GET /api/admin/plugins` shows them
    /// (`files`): each plugin file and near miss, serving or refused with why.
    pub fn files(&self) -> Vec<FileSummary> {
        let folder = self.folder.lock().unwrap_or_else(|p| p.into_inner());
        folder
            .files()
            .map(|(name, f)| {
                let declared = if f.check_error.is_none() { f.offered.as_ref() } else { None };
                FileSummary {
                    file: folder::shown(name),
                    status: if f.error().is_some() { "refused" } else { "serving" },
                    plugin: declared.map(|p| p.name.clone()),
                    kind: declared.map(|p| p.kind),
                    sha256: f.sha256.clone(),
                    size: f.size,
                    error: f.error().map(str::to_owned),
                    previous: folder.previous(name).map(|p| PreviousVersion { plugin: p.name.clone(), sha256: p.sha256.clone() }),
                }
            })
            .collect()
    }

    /// Inspect a component file offline (CLI): kind, name, version, size, hash.
    pub fn inspect_file(cfg: &PluginsConfig, path: &Path) -> anyhow::Result<PluginSummary> {
        let size = std::fs::metadata(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?.len();
        if size > cfg.max_component_bytes() {
            anyhow::bail!("{}: {size} bytes, over plugins.max_component_mb ({} MiB)", path.display(), cfg.max_component_mb);
        }
        let bytes = std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let loader = Loader::new(cfg, None)?;
        loader.load(&bytes, Source::File(path.to_path_buf())).map(|p| p.summary()).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    /// Load a component file as the server would, outside any server, to call
    /// it (`gatehouse plugin test` and `check`): the same checks, limits and
    /// grants (those `cfg` gives its name).
    pub fn load_file(cfg: &PluginsConfig, path: &Path) -> anyhow::Result<Plugin> {
        let size = std::fs::metadata(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?.len();
        if size > cfg.max_component_bytes() {
            anyhow::bail!("{}: {size} bytes, over plugins.max_component_mb ({} MiB)", path.display(), cfg.max_component_mb);
        }
        let bytes = std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let loader = Loader::new(cfg, None)?;
        loader.load(&bytes, Source::File(path.to_path_buf())).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    /// Every serving plugin (`GET /api/admin/plugins`, CLI `plugins list`);
    /// one served from a file whose current content was refused carries that
    /// refusal in `fileError`.
    pub fn list(&self) -> Vec<PluginSummary> {
        let mut list = self.snapshot().list();
        let folder = self.folder.lock().unwrap_or_else(|p| p.into_inner());
        for s in list.iter_mut() {
            let Some((file, _)) = folder.serving(&s.name) else { continue };
            if folder.previous(file).is_some() {
                s.file_error = folder.file(file).and_then(|f| f.check_error.clone());
            }
        }
        drop(folder);
        for s in list.iter_mut() {
            self.published_notes(s);
        }
        list
    }

    /// Start watching the folder (notify, debounced).
    pub fn watch(self: &Arc<Self>, debounce: Duration) -> anyhow::Result<()> {
        watcher::spawn(self.clone(), debounce)
    }
}

impl folder::Offer for Plugin {
    fn name(&self) -> &str {
        &self.name
    }
    fn kind(&self) -> Kind {
        self.kind
    }
    fn sha256(&self) -> &str {
        &self.sha256
    }
}

/// A file of the watched folder as `GET /api/admin/plugins` lists it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileSummary {
    /// The file name, escaped ([`folder::shown`]).
    pub file: String,
    /// `serving` or `refused`.
    pub status: &'static str,
    /// The plugin its current content declares, when it loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
    /// Hex SHA-256 of the file's current content, when it was read (never an earlier version's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Size on disk in bytes (regular files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Why the file is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For a refused file whose earlier version still serves: that version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous: Option<PreviousVersion>,
}

/// The version of a plugin that serves on from a file whose new content was refused.
#[derive(Debug, Clone, Serialize)]
pub struct PreviousVersion {
    pub plugin: String,
    pub sha256: String,
}
