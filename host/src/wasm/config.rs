//! `[plugins]` section of the config file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// Where plugins come from and how they are confined.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginsConfig {
    /// Watched folder; `*.wasm` files here add plugins or override bundled
    /// ones by name. Default `<data_dir>/plugins`. Not recursive; `*.tmp` and
    /// dot-files are ignored (write under such a name, then rename).
    pub dir: Option<PathBuf>,
    /// Compiled-artifact cache. Default `$XDG_CACHE_HOME/gatehouse` or
    /// `~/.cache/gatehouse`; a missing or unwritable cache only costs a recompile.
    pub cache_dir: Option<PathBuf>,
    /// CPU deadline of one plugin call.
    pub call_timeout_ms: u64,
    /// Linear-memory cap of one plugin instance.
    pub memory_limit_mb: u64,
    /// Granularity of the CPU deadline.
    pub epoch_tick_ms: u64,
    /// Debounce of the folder watcher.
    pub reload_debounce_ms: u64,
    /// Per-plugin settings by plugin name.
    pub settings: BTreeMap<String, PluginSettings>,
}

impl Default for PluginsConfig {
    fn default() -> Self {
        PluginsConfig {
            dir: None,
            cache_dir: None,
            call_timeout_ms: 500,
            memory_limit_mb: 64,
            epoch_tick_ms: 5,
            reload_debounce_ms: 100,
            settings: BTreeMap::new(),
        }
    }
}

/// What the operator grants one plugin.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginSettings {
    /// Handed to the plugin as JSON (`config-json`).
    pub config: serde_json::Value,
    /// Hosts the plugin may reach through `outbound-http` (`host` or `host:port`).
    pub allowed_outbound_hosts: Vec<String>,
    /// Host folders mounted read-only into the plugin (guest path = host path's file name).
    pub read_only_dirs: Vec<PathBuf>,
}

impl Default for PluginSettings {
    fn default() -> Self {
        PluginSettings {
            config: serde_json::Value::Object(Default::default()),
            allowed_outbound_hosts: Vec::new(),
            read_only_dirs: Vec::new(),
        }
    }
}

impl PluginsConfig {
    pub fn watched_dir(&self, data_dir: &std::path::Path) -> PathBuf {
        self.dir.clone().unwrap_or_else(|| data_dir.join("plugins"))
    }

    pub fn cache_dir(&self) -> Option<PathBuf> {
        if let Some(d) = &self.cache_dir {
            return Some(d.clone());
        }
        if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
            return Some(PathBuf::from(x).join("gatehouse"));
        }
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("gatehouse"))
    }

    /// The JSON config of a plugin (`{}` when none).
    pub fn plugin_config(&self, name: &str) -> serde_json::Value {
        self.settings
            .get(name)
            .map(|s| s.config.clone())
            .filter(serde_json::Value::is_object)
            .unwrap_or_else(|| serde_json::Value::Object(Default::default()))
    }
}
