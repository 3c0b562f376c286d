//! What a plugin has done since load, as the admin API shows it.

use super::*;

/// Call statistics.
#[derive(Debug, Default)]
pub struct Stats {
    /// Calls made.
    pub calls: AtomicU64,
    /// Calls that ended in a [`PluginError`].
    pub faults: AtomicU64,
    /// Total wall time of all calls.
    pub nanos: AtomicU64,
}

/// A plugin as `GET /api/admin/plugins` shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginSummary {
    /// Registry name.
    pub name: String,
    /// `provider`, `shield`, `policy` or `retriever`.
    pub kind: Kind,
    /// The plugin's own version.
    pub version: String,
    /// One line for operators.
    pub description: String,
    /// The WIT world, e.g. `gatehouse:plugin/provider@0.1.0`.
    pub world: String,
    /// Hex SHA-256 of the component bytes.
    pub sha256: String,
    /// Component size in bytes.
    pub size: usize,
    /// `{"type": "bundled"}` or `{"type": "file", "path": …}`.
    pub source: Source,
    /// RFC 3339 load time.
    pub loaded_at: String,
    /// Calls since load (including the `info()` call of the load check).
    pub calls: u64,
    /// Calls that ended in a [`PluginError`].
    pub faults: u64,
    /// Mean wall time of a call (instantiate + call + drop), in µs.
    pub mean_call_us: f64,
    /// For a plugin served from a file whose current content was refused: why
    /// (this earlier version serves on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_error: Option<String>,
    /// For a plugin served from a file of the watched folder: the version
    /// published to the registry under the same name that the file hides on this host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hides_published: Option<u32>,
    /// Why the registry's active version of this name was refused on this
    /// host (what is listed serves on instead).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry_error: Option<String>,
}

impl Plugin {
    /// The plugin and its statistics as the admin API shows them.
    pub fn summary(&self) -> PluginSummary {
        let calls = self.stats.calls.load(Ordering::Relaxed);
        let nanos = self.stats.nanos.load(Ordering::Relaxed);
        PluginSummary {
            name: self.name.clone(),
            kind: self.kind,
            version: self.version.clone(),
            description: self.description.clone(),
            world: format!("gatehouse:plugin/{}@0.1.0", self.kind.as_str()),
            sha256: self.sha256.clone(),
            size: self.size,
            source: self.source.clone(),
            // RFC 3339 with milliseconds and `Z`, as every time the API shows.
            loaded_at: self.loaded_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            calls,
            faults: self.stats.faults.load(Ordering::Relaxed),
            mean_call_us: if calls == 0 { 0.0 } else { nanos as f64 / calls as f64 / 1000.0 },
            file_error: None,
            hides_published: None,
            registry_error: None,
        }
    }
}
