//! A loaded, checked, pre-instantiated plugin, and its calls. Each call gets a
//! fresh `Store` from the `InstancePre`, a CPU deadline and a memory cap; a
//! trap, a missed deadline or a refused allocation becomes a [`PluginError`]
//! naming the plugin, never a host crash.
//!
//! Calls go through wasmtime's async entry points, driven by [`drive`] on the
//! calling thread: a call that finishes within its first epoch tick (all
//! normal ones: tens of µs) costs no thread hand-off. A call that runs past a
//! tick yields, and [`drive`] finishes it in `block_in_place`, so a slow or
//! looping plugin never holds up the other tasks of an async worker; a call
//! waiting on WASI I/O is finished the same way.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use arc_swap::ArcSwap;
use chrono::{DateTime, Utc};
use serde::Serialize;
use wasmtime::component::Component;
use wasmtime::{Engine, Store, Trap, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use super::bindings;
use super::outbound::Grant;
use super::state::CallState;

mod executor;
mod linkers;
mod load;
pub mod policy_calls;
pub mod provider_calls;
pub mod retriever_calls;
mod session;
pub mod shield_calls;
mod store;
mod summary;
mod write_guard;

pub(crate) use executor::{drive, off_async};
pub(crate) use linkers::Linkers;
pub(crate) use load::load;
pub use session::{ProviderSession, provider_sessions_held};
use store::set_deadline;
pub use summary::{PluginSummary, Stats};

/// The plugin kinds, one per world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Provider,
    Shield,
    Policy,
    Retriever,
}

impl Kind {
    /// The world's name: `provider`, `shield`, `policy`, `retriever`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Provider => "provider",
            Kind::Shield => "shield",
            Kind::Policy => "policy",
            Kind::Retriever => "retriever",
        }
    }
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The epoch deadline interrupted the call (an endless or too slow loop).
    #[error("plugin {plugin} exceeded its CPU deadline of {ms} ms")]
    Deadline { plugin: String, ms: u64 },
    /// The store's limiter refused a `memory.grow` beyond the cap.
    #[error("plugin {plugin} hit its memory limit of {mb} MiB")]
    Memory { plugin: String, mb: u64 },
    /// Any other trap: a panic (`unreachable`), stack exhaustion, out-of-bounds access…
    #[error("plugin {plugin} trapped: {detail}")]
    Trap { plugin: String, detail: String },
    /// Not a trap: bad output, a failed instantiation, a wrong kind.
    #[error("plugin {plugin} failed: {detail}")]
    Failed { plugin: String, detail: String },
}

/// Where a plugin came from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Embedded in the binary at build time.
    Bundled,
    /// A file of the watched folder (this host only).
    File(PathBuf),
    /// A version published to the plugin registry (every host of the store).
    Published { version: u32 },
}

/// `{"type": "bundled"}`, `{"type": "published", "version": n}` or
/// `{"type": "file", "path": …, "hostOnly": true}`, the path escaped
/// ([`super::folder::shown`]): one line, and any name serialises. A file
/// serves on this host only, whatever the registry publishes: `hostOnly`
/// says so to whoever reads a fleet's listings.
impl Serialize for Source {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match self {
            Source::Bundled => m.serialize_entry("type", "bundled")?,
            Source::File(p) => {
                m.serialize_entry("type", "file")?;
                m.serialize_entry("path", &super::folder::shown_path(p))?;
                m.serialize_entry("hostOnly", &true)?;
            }
            Source::Published { version } => {
                m.serialize_entry("type", "published")?;
                m.serialize_entry("version", version)?;
            }
        }
        m.end()
    }
}

/// What the operator granted the plugin, and its limits. A config reload
/// replaces them ([`Plugin::regrant`]); a call uses the ones current when its
/// store is made.
#[derive(Debug, PartialEq)]
pub struct Grants {
    /// Host folders mounted read-only (`[plugins.settings.<name>] read_only_dirs`).
    pub read_only_dirs: Vec<PathBuf>,
    /// Hosts `outbound-http` may reach (`allowed_outbound_hosts`).
    pub outbound: Arc<Grant>,
    /// The call's epoch deadline, in ticks of `epoch_tick_ms`.
    pub deadline_ticks: u64,
    /// The same deadline in milliseconds, for error messages.
    pub deadline_ms: u64,
    /// Length of one epoch tick in milliseconds.
    pub tick_ms: u64,
    /// Linear-memory cap of one instance.
    pub memory_bytes: usize,
    /// The plugin's own writable folder, mounted at `cache_folder::GUEST_PATH`
    /// (`writable_cache`); `None` when not granted or it could not be made.
    pub cache: Option<Arc<crate::cache_folder::CacheFolder>>,
}

enum Pre {
    Provider(bindings::provider::ProviderPre<CallState>),
    Shield(bindings::shield::ShieldPre<CallState>),
    Policy(bindings::policy::PolicyPre<CallState>),
    Retriever(bindings::retriever::RetrieverPre<CallState>),
}

/// A loaded plugin.
pub struct Plugin {
    /// Registry name, from `info()`.
    pub name: String,
    /// The world it implements (checked against `info()`).
    pub kind: Kind,
    /// The plugin's own version, from `info()`.
    pub version: String,
    /// One line for operators, from `info()`.
    pub description: String,
    /// Hex SHA-256 of the component bytes.
    pub sha256: String,
    /// Size of the component in bytes.
    pub size: usize,
    /// Bundled or a file of the watched folder.
    pub source: Source,
    /// When this version was loaded.
    pub loaded_at: DateTime<Utc>,
    /// Calls, faults and time spent, since load.
    pub stats: Stats,
    engine: Engine,
    pre: Pre,
    grants: ArcSwap<Grants>,
    /// `gatehouse_plugin_call_duration_seconds{plugin=<name>}`, looked up once
    /// the name is known (none while `info()` is probed at load).
    call_metric: Option<prometheus_client::metrics::histogram::Histogram>,
}

impl Plugin {
    /// The grants and limits calls get now.
    pub fn grants(&self) -> Arc<Grants> {
        self.grants.load_full()
    }

    /// Replace the grants and limits (config reload): calls that start from
    /// now on get them; calls under way keep theirs. Returns whether they changed.
    pub fn regrant(&self, grants: Grants) -> bool {
        if **self.grants.load() == grants {
            return false;
        }
        self.grants.store(Arc::new(grants));
        true
    }

    /// One call on a fresh instance: a new store, `instantiate`, then `call`;
    /// the store is dropped after the call is recorded.
    fn fresh_call<I, R>(
        &self,
        instantiate: impl AsyncFnOnce(&mut Store<CallState>) -> wasmtime::Result<I>,
        call: impl AsyncFnOnce(&mut Store<CallState>, &I) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        let mut store = self.store()?;
        let started = Instant::now();
        let r = drive(async {
            let inst = instantiate(&mut store).await?;
            call(&mut store, &inst).await
        });
        self.finish(&store, started, r)
    }

    fn finish<R>(&self, store: &Store<CallState>, started: Instant, r: wasmtime::Result<R>) -> Result<R, PluginError> {
        let took = started.elapsed();
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        self.stats.nanos.fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
        let out = r.map_err(|e| self.classify(store, e));
        if let Some(h) = &self.call_metric {
            h.observe(took.as_secs_f64());
        }
        if let Err(e) = &out {
            self.record_fault(e);
        }
        out
    }

    fn record_fault(&self, e: &PluginError) {
        self.stats.faults.fetch_add(1, Ordering::Relaxed);
        crate::metrics::get().fault(&self.name);
        tracing::warn!(plugin = %self.name, error = %e, "plugin call failed");
    }

    /// What a failed call's error means: memory cap, deadline, trap or other.
    fn classify(&self, store: &Store<CallState>, e: wasmtime::Error) -> PluginError {
        let plugin = self.name.clone();
        if store.data().limiter.refused {
            PluginError::Memory { plugin, mb: (store.data().limiter.max_memory / (1024 * 1024)) as u64 }
        } else if let Some(trap) = e.downcast_ref::<Trap>() {
            match trap {
                Trap::Interrupt => PluginError::Deadline { plugin, ms: self.grants.load().deadline_ms },
                other => PluginError::Trap { plugin, detail: with_stderr(other.to_string(), store) },
            }
        } else {
            let detail: String = format!("{e:#}").chars().take(500).collect();
            PluginError::Failed { plugin, detail: with_stderr(detail, store) }
        }
    }

    fn wrong_kind(&self, want: Kind) -> PluginError {
        PluginError::Failed { plugin: self.name.clone(), detail: format!("is a {} plugin, not a {}", self.kind.as_str(), want.as_str()) }
    }
}

/// A failed call's detail with what the guest reported on stderr before it
/// failed (a panic's message and location), when it reported anything.
fn with_stderr(detail: String, store: &Store<CallState>) -> String {
    match store.data().panic_message() {
        Some(m) => format!("{detail}; the plugin reported: {m}"),
        None => detail,
    }
}
