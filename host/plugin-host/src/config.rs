//! `[plugins]` section of the config file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// Where plugins come from and how they are confined.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginsConfig {
    /// Watched folder; regular `*.wasm` files here add plugins or override
    /// bundled ones by name (built-in policies only when
    /// `allow_policy_overrides` names them). Default `<data_dir>/plugins`. Not
    /// recursive; `*.tmp` and dot-files are ignored (write under such a name,
    /// then rename); links and near-miss names are refused (`super::folder`).
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
    /// Largest component file the watched folder reads; a bigger one is
    /// refused unread (and audited).
    pub max_component_mb: u64,
    /// Built-in security policies (`internal`, `public`, `confidential`) a
    /// watched-folder file may replace, by name. Empty by default: a file
    /// declaring one of those names is refused.
    pub allow_policy_overrides: Vec<String>,
    /// Where the writable cache folders of plugins granted one
    /// (`settings.<name>.writable_cache`) live: `<this>/<plugin name>/`.
    /// Default `<data_dir>/plugin-cache`. Not inside `cache_dir`: wasmtime's
    /// compile-cache cleaner deletes every file there it did not write.
    pub plugin_cache_dir: Option<PathBuf>,
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
            max_component_mb: 64,
            allow_policy_overrides: Vec::new(),
            plugin_cache_dir: None,
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
    /// Headers the host adds to every `outbound-http` request of the plugin,
    /// header name → environment variable holding the value (an API key of a
    /// search backend, say). The plugin never sees the value, and a header of
    /// the same name that it sets itself is replaced. Read at start and at
    /// every config reload; a variable that is not set stops either.
    pub outbound_header_env: BTreeMap<String, String>,
    /// A folder of its own the plugin may write, mounted read-write at
    /// `/cache` (`plugins.plugin_cache_dir/<plugin name>/`, created by the
    /// host): a retriever keeps its passage vectors there across restarts.
    /// Writes past `cache_limit_mb` fail; links cannot be made.
    pub writable_cache: bool,
    /// Size cap of the writable cache folder (bytes of its files), MiB.
    pub cache_limit_mb: u64,
}

impl Default for PluginSettings {
    fn default() -> Self {
        PluginSettings {
            config: serde_json::Value::Object(Default::default()),
            allowed_outbound_hosts: Vec::new(),
            read_only_dirs: Vec::new(),
            outbound_header_env: BTreeMap::new(),
            writable_cache: false,
            cache_limit_mb: 256,
        }
    }
}

impl PluginsConfig {
    pub fn watched_dir(&self, data_dir: &std::path::Path) -> PathBuf {
        self.dir.clone().unwrap_or_else(|| data_dir.join("plugins"))
    }

    /// `max_component_mb` in bytes.
    pub fn max_component_bytes(&self) -> u64 {
        self.max_component_mb.saturating_mul(1024 * 1024)
    }

    /// The folder holding the plugins' writable cache folders.
    pub fn plugin_cache_root(&self, data_dir: &std::path::Path) -> PathBuf {
        self.plugin_cache_dir.clone().unwrap_or_else(|| data_dir.join("plugin-cache"))
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

    /// The headers `outbound_header_env` gives `plugin`, with their values
    /// read from the environment now (names as written; `outbound::Grant` normalises them).
    pub fn outbound_headers(&self, plugin: &str) -> Result<Vec<(String, String)>, String> {
        let Some(settings) = self.settings.get(plugin) else { return Ok(Vec::new()) };
        settings
            .outbound_header_env
            .iter()
            .map(|(header, var)| match std::env::var(var) {
                Ok(value) => Ok((header.clone(), value)),
                Err(_) => Err(format!("plugins.settings.{plugin}.outbound_header_env.{header}: environment variable {var} is not set")),
            })
            .collect()
    }

    /// Every plugin's `outbound_header_env` can be read (at start and before a reload is taken).
    pub fn check_secrets(&self) -> Result<(), String> {
        self.settings.keys().try_for_each(|plugin| self.outbound_headers(plugin).map(drop))
    }

    /// The JSON config of a plugin (`{}` when none).
    pub fn plugin_config(&self, name: &str) -> serde_json::Value {
        self.plugin_config_ref(name).cloned().unwrap_or_else(|| serde_json::Value::Object(Default::default()))
    }

    /// The JSON config of a plugin as written, when it has one (an object).
    pub fn plugin_config_ref(&self, name: &str) -> Option<&serde_json::Value> {
        self.settings.get(name).map(|s| &s.config).filter(|c| c.is_object())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outbound_headers_come_from_the_environment_and_a_missing_variable_is_named() {
        let mut cfg = PluginsConfig::default();
        let mut settings = PluginSettings::default();
        // Variables only this test sets.
        settings.outbound_header_env.insert("X-Api-Key".into(), "GATEHOUSE_UNIT_OUTBOUND_KEY".into());
        cfg.settings.insert("retriever-http".into(), settings);
        assert!(cfg.outbound_headers("other-plugin").expect("none").is_empty());
        let err = cfg.check_secrets().expect_err("unset");
        assert!(err.contains("plugins.settings.retriever-http.outbound_header_env.X-Api-Key"), "{err}");
        assert!(err.contains("GATEHOUSE_UNIT_OUTBOUND_KEY"), "{err}");
        // The value side (a set variable reaching the backend) is tested end to end in tests/rag.rs.
    }
}
