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
    /// A file of the watched folder.
    File(PathBuf),
}

/// `{"type": "bundled"}` or `{"type": "file", "path": …}`, the path escaped
/// ([`super::folder::shown`]): one line, and any name serialises.
impl Serialize for Source {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match self {
            Source::Bundled => m.serialize_entry("type", "bundled")?,
            Source::File(p) => {
                m.serialize_entry("type", "file")?;
                m.serialize_entry("path", &super::folder::shown_path(p))?;
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
}

enum Pre {
    Provider(bindings::provider::ProviderPre<CallState>),
    Shield(bindings::shield::ShieldPre<CallState>),
    Policy(bindings::policy::PolicyPre<CallState>),
    Retriever(bindings::retriever::RetrieverPre<CallState>),
}

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
            loaded_at: crate::time::iso(self.loaded_at),
            calls,
            faults: self.stats.faults.load(Ordering::Relaxed),
            mean_call_us: if calls == 0 { 0.0 } else { nanos as f64 / calls as f64 / 1000.0 },
            file_error: None,
        }
    }

    fn store(&self) -> Result<Store<CallState>, PluginError> {
        self.store_with(&[])
    }

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

    /// A store with the plugin's grants plus `mounts` (host folder, guest path), read-only.
    fn store_with(&self, mounts: &[(&Path, &str)]) -> Result<Store<CallState>, PluginError> {
        let grants = self.grants.load();
        // With folders to mount the context is built now, so a folder that
        // cannot be opened fails this call rather than a later WASI call.
        let wasi = if grants.read_only_dirs.is_empty() && mounts.is_empty() {
            None
        } else {
            let mut b = WasiCtxBuilder::new();
            let granted = grants.read_only_dirs.iter().map(|dir| {
                let guest = dir.file_name().map(|n| format!("/{}", n.to_string_lossy())).unwrap_or_else(|| "/data".into());
                (dir.as_path(), guest)
            });
            for (dir, guest) in granted.chain(mounts.iter().map(|(d, g)| (*d, (*g).to_owned()))) {
                b.preopened_dir(dir, &guest, FsPerms::ReadOnly).map_err(|e| PluginError::Failed {
                    plugin: self.name.clone(),
                    detail: format!("cannot mount {}: {e}", dir.display()),
                })?;
            }
            Some(b.build())
        };
        let state = CallState::new(self.name.as_str().into(), wasi, grants.memory_bytes, grants.outbound.clone());
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        set_deadline(&mut store, grants.deadline_ticks);
        Ok(store)
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
        crate::metrics::get().plugin_fault(&self.name);
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
                other => PluginError::Trap { plugin, detail: other.to_string() },
            }
        } else {
            PluginError::Failed { plugin, detail: format!("{e:#}").chars().take(500).collect() }
        }
    }

    fn wrong_kind(&self, want: Kind) -> PluginError {
        PluginError::Failed { plugin: self.name.clone(), detail: format!("is a {} plugin, not a {}", self.kind.as_str(), want.as_str()) }
    }
}

/// Give the call `ticks` epoch ticks of CPU time: it yields at every tick
/// (so [`drive`] can move it off an async worker) and traps with
/// `Trap::Interrupt` when the ticks are used up.
fn set_deadline(store: &mut Store<CallState>, ticks: u64) {
    let mut left = ticks.max(1);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        left = left.saturating_sub(1);
        Ok(if left == 0 { UpdateDeadline::Interrupt } else { UpdateDeadline::Yield(1) })
    });
}

/// Run blocking work where blocking is allowed: on a multi-threaded runtime's
/// worker, `block_in_place` hands the worker's tasks to another thread first
/// (nested calls, and threads that are not workers, just run `f`).
pub(crate) fn off_async<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Wakes the thread that drives a call.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A runtime for WASI's timers and blocking file work when the caller has
/// none that can drive them (no runtime, or a current-thread one that this
/// thread would be blocking).
static FALLBACK: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("gatehouse-wasi")
        .enable_all()
        .build()
        .expect("cannot start the WASI fallback runtime")
});

/// Run a plugin call (a wasmtime async call) to completion on this thread.
///
/// On a multi-threaded runtime the call is polled once in place: it either
/// finishes (the normal case) or yields — a tick passed, or it waits on WASI
/// I/O — and is then finished in `block_in_place`, parked between polls, while
/// another thread runs the worker's tasks and the runtime's drivers. Anywhere
/// else (no runtime, or a current-thread one this thread would block) it runs
/// with the fallback runtime's context entered, which drives WASI's timers.
pub(crate) fn drive<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                return v;
            }
            tokio::task::block_in_place(|| park_until_ready(fut, &mut cx))
        }
        _ => {
            let _guard = FALLBACK.enter();
            park_until_ready(fut, &mut cx)
        }
    }
}

fn park_until_ready<F: Future>(mut fut: std::pin::Pin<&mut F>, cx: &mut Context<'_>) -> F::Output {
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Calls of the `provider` world.
pub mod provider_calls {
    use super::*;
    pub use bindings::provider::exports::gatehouse::plugin::provider_api::{
        ChatRequest, Completion, ErrorClass, ProviderError, StreamEvent, StreamOutput, Upstream, Usage,
    };
    pub use bindings::provider::gatehouse::plugin::types::{Header, HttpRequest, Message, Role};

    impl Plugin {
        pub(super) fn provider<R>(
            &self,
            f: impl AsyncFnOnce(&mut Store<CallState>, &bindings::provider::Provider) -> wasmtime::Result<R>,
        ) -> Result<R, PluginError> {
            let Pre::Provider(pre) = &self.pre else {
                return Err(self.wrong_kind(Kind::Provider));
            };
            self.fresh_call(async |s| pre.instantiate_async(s).await, f)
        }

        /// `build-request`: the HTTP request to send upstream (or the adapter's own error).
        pub fn build_request(&self, up: &Upstream, req: &ChatRequest) -> Result<Result<HttpRequest, ProviderError>, PluginError> {
            self.provider(async |s, i| i.gatehouse_plugin_provider_api().call_build_request(s, up, req).await)
        }

        /// `parse-response`: a complete upstream response of any status → completion or classified error.
        pub fn parse_response(&self, up: &Upstream, status: u16, body: &str) -> Result<Result<Completion, ProviderError>, PluginError> {
            self.provider(async |s, i| i.gatehouse_plugin_provider_api().call_parse_response(s, up, status, body).await)
        }

        /// `parse-stream-event`: one SSE event with the state the previous event returned ("" first).
        pub fn parse_stream_event(
            &self,
            up: &Upstream,
            state: &str,
            ev: &StreamEvent,
        ) -> Result<Result<StreamOutput, ProviderError>, PluginError> {
            self.provider(async |s, i| i.gatehouse_plugin_provider_api().call_parse_stream_event(s, up, state, ev).await)
        }
    }
}

/// One provider instance for the calls of one attempt: `build-request`, then
/// `parse-response` or every `parse-stream-event` of the stream. Instantiated
/// at the first call, so each further call costs only the call. It belongs to
/// one request and is dropped with it (DESIGN: a fresh store per request, not
/// per call); after a fault it is dropped and later calls of the attempt get
/// fresh instances, like a poisoned warm retriever.
///
/// An instance held across the upstream wait keeps a pooling-allocator slot
/// for as long as the answer or stream takes. So at most
/// [`super::engine::PROVIDER_SESSIONS`] attempts hold one at a time (half
/// the pool): an attempt that finds none free makes each call on a fresh
/// instance, as before, and the other half of the pool stays for everyone's
/// per-call instances (policy, Prompt Shield, PII/DLP) however many streams
/// are open.
pub struct ProviderSession {
    plugin: Arc<Plugin>,
    held: Held,
}

enum Held {
    /// No call yet: the first one tries to take a session slot.
    NotYet,
    /// The attempt's instance and its session slot.
    Live { store: Store<CallState>, instance: bindings::provider::Provider, _slot: SessionSlot },
    /// No slot was free, or the instance faulted: every call gets a fresh instance.
    PerCall,
}

/// Sessions holding an instance now, across every engine of the process.
static SESSIONS: AtomicU64 = AtomicU64::new(0);

/// One of the [`super::engine::PROVIDER_SESSIONS`] slots; given back on drop.
struct SessionSlot;

impl SessionSlot {
    fn take() -> Option<SessionSlot> {
        let cap = super::engine::PROVIDER_SESSIONS as u64;
        SESSIONS.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < cap).then_some(n + 1)).ok().map(|_| SessionSlot)
    }
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        SESSIONS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Provider sessions holding an instance now (`gatehouse_plugin_provider_sessions`).
pub fn provider_sessions_held() -> u64 {
    SESSIONS.load(Ordering::Acquire)
}

impl Plugin {
    /// A [`ProviderSession`] of this provider; nothing is instantiated until its first call.
    pub fn provider_session(self: &Arc<Self>) -> Result<ProviderSession, PluginError> {
        if !matches!(self.pre, Pre::Provider(_)) {
            return Err(self.wrong_kind(Kind::Provider));
        }
        Ok(ProviderSession { plugin: self.clone(), held: Held::NotYet })
    }
}

impl ProviderSession {
    /// Does this attempt hold its own instance now?
    pub fn holds_instance(&self) -> bool {
        matches!(self.held, Held::Live { .. })
    }

    /// One call: on the held instance (instantiated now if this is the first
    /// call and a slot is free) with a fresh CPU deadline and log budget, or
    /// on a fresh instance.
    fn call<R>(
        &mut self,
        f: impl AsyncFnOnce(&mut Store<CallState>, &bindings::provider::Provider) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        let plugin = self.plugin.clone();
        let Pre::Provider(pre) = &plugin.pre else {
            return Err(plugin.wrong_kind(Kind::Provider));
        };
        if matches!(self.held, Held::NotYet) {
            self.held = Held::PerCall;
            if let Some(slot) = SessionSlot::take() {
                let mut store = plugin.store()?;
                let started = Instant::now();
                let r = drive(async {
                    let instance = pre.instantiate_async(&mut store).await?;
                    let out = f(&mut store, &instance).await;
                    Ok((instance, out))
                });
                // The first call's recorded time includes the instantiation,
                // so the statistics count calls, as per-call instances do.
                return match r {
                    Ok((instance, out)) => {
                        let out = plugin.finish(&store, started, out);
                        if out.is_ok() {
                            self.held = Held::Live { store, instance, _slot: slot };
                        }
                        out
                    }
                    Err(e) => plugin.finish(&store, started, Err(e)),
                };
            }
        }
        match &mut self.held {
            Held::Live { store, instance, .. } => {
                store.data_mut().begin_call();
                set_deadline(store, plugin.grants.load().deadline_ticks);
                let started = Instant::now();
                let r = drive(f(store, instance));
                let out = plugin.finish(store, started, r);
                if out.is_err() {
                    // Its memory may be half-updated: never call it again.
                    self.held = Held::PerCall;
                }
                out
            }
            _ => plugin.provider(f),
        }
    }

    /// `build-request`: the HTTP request to send upstream (or the adapter's own error).
    pub fn build_request(
        &mut self,
        up: &provider_calls::Upstream,
        req: &provider_calls::ChatRequest,
    ) -> Result<Result<provider_calls::HttpRequest, provider_calls::ProviderError>, PluginError> {
        self.call(async |s, i| i.gatehouse_plugin_provider_api().call_build_request(s, up, req).await)
    }

    /// `parse-response`: a complete upstream response of any status → completion or classified error.
    pub fn parse_response(
        &mut self,
        up: &provider_calls::Upstream,
        status: u16,
        body: &str,
    ) -> Result<Result<provider_calls::Completion, provider_calls::ProviderError>, PluginError> {
        self.call(async |s, i| i.gatehouse_plugin_provider_api().call_parse_response(s, up, status, body).await)
    }

    /// `parse-stream-event`: one SSE event with the state the previous event returned ("" first).
    pub fn parse_stream_event(
        &mut self,
        up: &provider_calls::Upstream,
        state: &str,
        ev: &provider_calls::StreamEvent,
    ) -> Result<Result<provider_calls::StreamOutput, provider_calls::ProviderError>, PluginError> {
        self.call(async |s, i| i.gatehouse_plugin_provider_api().call_parse_stream_event(s, up, state, ev).await)
    }
}

/// Calls of the `shield` world.
pub mod shield_calls {
    use super::*;
    pub use bindings::shield::exports::gatehouse::plugin::shield_api::{
        Action, Canary, InspectRequest, Redaction, Stage, Strictness, Verdict,
    };

    /// The canary made after an inspection, or why not (the inspection's verdicts stand either way).
    pub type CanaryOutcome = Result<Option<Canary>, PluginError>;

    impl Plugin {
        fn shield<R>(
            &self,
            f: impl AsyncFnOnce(&mut Store<CallState>, &bindings::shield::Shield) -> wasmtime::Result<R>,
        ) -> Result<R, PluginError> {
            let Pre::Shield(pre) = &self.pre else {
                return Err(self.wrong_kind(Kind::Shield));
            };
            self.fresh_call(async |s| pre.instantiate_async(s).await, f)
        }

        /// `inspect`: one verdict per text, in order.
        pub fn inspect(&self, req: &InspectRequest) -> Result<Vec<Verdict>, PluginError> {
            self.shield(async |s, i| i.gatehouse_plugin_shield_api().call_inspect(s, req).await)
        }

        /// `make-canary`: a canary token and its system instruction, from a host-chosen seed.
        pub fn make_canary(&self, seed: &str) -> Result<Option<Canary>, PluginError> {
            self.shield(async |s, i| i.gatehouse_plugin_shield_api().call_make_canary(s, seed).await)
        }

        /// `inspect`, then `make-canary(seed)` on the same instance: one
        /// instantiation for the two calls a request's input makes (DESIGN: a
        /// fresh store per request). A failed `make-canary` does not undo the
        /// verdicts; it is reported on its own (the instance is dropped either way).
        /// The two calls share the one CPU deadline of the store.
        pub fn inspect_then_canary(&self, req: &InspectRequest, seed: &str) -> Result<(Vec<Verdict>, CanaryOutcome), PluginError> {
            let (verdicts, canary) = self.shield(async |s, i| {
                let api = i.gatehouse_plugin_shield_api();
                let verdicts = api.call_inspect(&mut *s, req).await?;
                let canary = api.call_make_canary(&mut *s, seed).await.map_err(|e| self.classify(s, e));
                Ok((verdicts, canary))
            })?;
            if let Err(e) = &canary {
                self.record_fault(e);
            }
            Ok((verdicts, canary))
        }
    }
}

/// Calls of the `policy` world.
pub mod policy_calls {
    use super::*;
    pub use bindings::policy::exports::gatehouse::plugin::policy_api::{DataAction, PolicyContext, PolicyDecision};
    pub use bindings::policy::gatehouse::plugin::types::{Message, Role};

    impl Plugin {
        /// `evaluate`: allow or deny, and the constraints for the rest of the pipeline.
        pub fn evaluate(&self, ctx: &PolicyContext) -> Result<PolicyDecision, PluginError> {
            let Pre::Policy(pre) = &self.pre else {
                return Err(self.wrong_kind(Kind::Policy));
            };
            self.fresh_call(
                async |s| pre.instantiate_async(s).await,
                async |s, i| i.gatehouse_plugin_policy_api().call_evaluate(s, ctx).await,
            )
        }
    }
}

/// Calls of the `retriever` world.
pub mod retriever_calls {
    use super::*;
    pub use bindings::retriever::exports::gatehouse::plugin::retriever_api::{Document, RetrieveRequest};

    impl Plugin {
        /// `retrieve`: up to `k` passages, best first (or the retriever's own error).
        pub fn retrieve(&self, req: &RetrieveRequest) -> Result<Result<Vec<Document>, String>, PluginError> {
            let Pre::Retriever(pre) = &self.pre else {
                return Err(self.wrong_kind(Kind::Retriever));
            };
            self.fresh_call(
                async |s| pre.instantiate_async(s).await,
                async |s, i| i.gatehouse_plugin_retriever_api().call_retrieve(s, req).await,
            )
        }

        /// A long-lived instance of this retriever with `mounts` (host folder,
        /// guest path) mounted read-only: its globals (an in-memory index) live
        /// as long as it does. Instantiating runs no guest code beyond start-up.
        pub fn warm_retriever(self: &Arc<Self>, mounts: &[(&Path, &str)]) -> Result<WarmRetriever, PluginError> {
            let Pre::Retriever(pre) = &self.pre else {
                return Err(self.wrong_kind(Kind::Retriever));
            };
            let mut store = self.store_with(mounts)?;
            let started = Instant::now();
            let r = drive(pre.instantiate_async(&mut store));
            let instance = self.finish(&store, started, r)?;
            Ok(WarmRetriever { plugin: self.clone(), store, instance, poisoned: false })
        }
    }

    /// A retriever instance kept between calls (see [`Plugin::warm_retriever`]).
    /// After a fault it is poisoned: its memory may be half-updated, so the
    /// owner must drop it rather than reuse it.
    pub struct WarmRetriever {
        plugin: Arc<Plugin>,
        store: Store<CallState>,
        instance: bindings::retriever::Retriever,
        poisoned: bool,
    }

    impl WarmRetriever {
        /// The plugin this instance runs.
        pub fn plugin(&self) -> &Arc<Plugin> {
            &self.plugin
        }

        /// Did a call fail with a trap, deadline or memory fault?
        pub fn is_poisoned(&self) -> bool {
            self.poisoned
        }

        /// `retrieve` with a CPU deadline of `deadline_ms` for this call.
        pub fn retrieve(&mut self, req: &RetrieveRequest, deadline_ms: u64) -> Result<Result<Vec<Document>, String>, PluginError> {
            if self.poisoned {
                return Err(PluginError::Failed {
                    plugin: self.plugin.name.clone(),
                    detail: "instance is poisoned by an earlier fault".into(),
                });
            }
            let ticks = deadline_ms.div_ceil(self.plugin.grants.load().tick_ms.max(1)) + 1;
            let WarmRetriever { plugin, store, instance, poisoned } = self;
            store.data_mut().begin_call();
            set_deadline(store, ticks);
            let started = Instant::now();
            let r = drive(instance.gatehouse_plugin_retriever_api().call_retrieve(&mut *store, req));
            let out = plugin.finish(store, started, r).map_err(|e| match e {
                PluginError::Deadline { plugin, .. } => PluginError::Deadline { plugin, ms: deadline_ms },
                other => other,
            });
            *poisoned = out.is_err();
            out
        }
    }
}

/// wasmtime's error as an anyhow error.
fn wt(e: wasmtime::Error) -> anyhow::Error {
    anyhow::anyhow!("{e:#}")
}

/// Linkers for the four worlds, built once per engine.
pub struct Linkers {
    provider: wasmtime::component::Linker<CallState>,
    shield: wasmtime::component::Linker<CallState>,
    policy: wasmtime::component::Linker<CallState>,
    retriever: wasmtime::component::Linker<CallState>,
}

impl Linkers {
    pub fn new(engine: &Engine) -> anyhow::Result<Self> {
        use wasmtime::component::{HasSelf, Linker};
        let base = || -> anyhow::Result<Linker<CallState>> {
            let mut l = Linker::new(engine);
            wasmtime_wasi::p2::add_to_linker_async(&mut l).map_err(wt)?;
            Ok(l)
        };
        let mut provider = base()?;
        bindings::provider::Provider::add_to_linker::<CallState, HasSelf<CallState>>(&mut provider, |s| s).map_err(wt)?;
        let mut shield = base()?;
        bindings::shield::Shield::add_to_linker::<CallState, HasSelf<CallState>>(&mut shield, |s| s).map_err(wt)?;
        let mut policy = base()?;
        bindings::policy::Policy::add_to_linker::<CallState, HasSelf<CallState>>(&mut policy, |s| s).map_err(wt)?;
        let mut retriever = base()?;
        bindings::retriever::Retriever::add_to_linker::<CallState, HasSelf<CallState>>(&mut retriever, |s| s).map_err(wt)?;
        Ok(Linkers { provider, shield, policy, retriever })
    }
}

/// The world a component implements, from its versioned exports.
pub fn detect_kind(engine: &Engine, component: &Component) -> Result<Kind, String> {
    let ty = component.component_type();
    let mut found = None;
    let mut seen = Vec::new();
    for (name, _) in ty.exports(engine) {
        seen.push(name.to_owned());
        let Some(rest) = name.strip_prefix("gatehouse:plugin/") else { continue };
        let Some((iface, version)) = rest.split_once('@') else { continue };
        let kind = match iface {
            "provider-api" => Kind::Provider,
            "shield-api" => Kind::Shield,
            "policy-api" => Kind::Policy,
            "retriever-api" => Kind::Retriever,
            _ => continue,
        };
        if !version.starts_with("0.1.") {
            return Err(format!(
                "exports {name}, an incompatible version of the Gatehouse WIT (this host supports gatehouse:plugin@0.1.x)"
            ));
        }
        found = Some(kind);
    }
    found.ok_or_else(|| {
        format!(
            "implements no Gatehouse world (exports: {}); build it against wit/gatehouse.wit",
            if seen.is_empty() { "none".into() } else { seen.join(", ") }
        )
    })
}

/// Compile-checked pieces of a component, before its `info()` is called.
pub fn load(
    engine: &Engine,
    linkers: &Linkers,
    bytes: &[u8],
    source: Source,
    grants_for: impl Fn(&str) -> Arc<Grants>,
) -> Result<Plugin, String> {
    // Checked first so the error never quotes the bytes of a file that is not WebAssembly at all.
    if !bytes.starts_with(b"\0asm") {
        return Err("not a valid WebAssembly component: it does not start with the WebAssembly header (\\0asm)".into());
    }
    let component = Component::new(engine, bytes).map_err(|e| format!("not a valid WebAssembly component: {e:#}"))?;
    let kind = detect_kind(engine, &component)?;
    let link_err = |e: wasmtime::Error| format!("cannot be linked (it imports something the host does not grant): {e:#}");
    let pre = match kind {
        Kind::Provider => Pre::Provider(
            bindings::provider::ProviderPre::new(linkers.provider.instantiate_pre(&component).map_err(link_err)?)
                .map_err(|e| format!("does not match the provider world: {e:#}"))?,
        ),
        Kind::Shield => Pre::Shield(
            bindings::shield::ShieldPre::new(linkers.shield.instantiate_pre(&component).map_err(link_err)?)
                .map_err(|e| format!("does not match the shield world: {e:#}"))?,
        ),
        Kind::Policy => Pre::Policy(
            bindings::policy::PolicyPre::new(linkers.policy.instantiate_pre(&component).map_err(link_err)?)
                .map_err(|e| format!("does not match the policy world: {e:#}"))?,
        ),
        Kind::Retriever => Pre::Retriever(
            bindings::retriever::RetrieverPre::new(linkers.retriever.instantiate_pre(&component).map_err(link_err)?)
                .map_err(|e| format!("does not match the retriever world: {e:#}"))?,
        ),
    };
    let sha256 = crate::receipts::sha256_hex(bytes);
    // info() runs under default grants; the plugin's own grants apply once its name is known.
    let probe_grants = grants_for("");
    let mut plugin = Plugin {
        name: String::from("(loading)"),
        kind,
        version: String::new(),
        description: String::new(),
        sha256,
        size: bytes.len(),
        source,
        loaded_at: Utc::now(),
        stats: Stats::default(),
        engine: engine.clone(),
        pre,
        grants: ArcSwap::new(probe_grants),
        call_metric: None,
    };
    let (name, version, description, info_kind) = plugin.info().map_err(|e| format!("info() failed: {e}"))?;
    if info_kind != kind {
        return Err(format!("info() says it is a {} plugin but it implements the {} world", info_kind.as_str(), kind.as_str()));
    }
    if name.is_empty() || name.len() > 100 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.') {
        return Err(format!("info() gave an invalid name {name:?} (use letters, digits, - _ .)"));
    }
    plugin.grants = ArcSwap::new(grants_for(&name));
    super::engine::note_code(&component, &name);
    plugin.call_metric = Some(crate::metrics::get().plugin_call_histogram(&name));
    plugin.name = name;
    plugin.version = version;
    plugin.description = description;
    Ok(plugin)
}

impl Plugin {
    /// Call `info()`: (name, version, description, kind).
    fn info(&self) -> Result<(String, String, String, Kind), PluginError> {
        macro_rules! info_of {
            ($pre:expr, $iface:ident, $world:ident) => {{
                let i = self.fresh_call(async |s| $pre.instantiate_async(s).await, async |s, i| i.$iface().call_info(s).await)?;
                use bindings::$world::gatehouse::plugin::types::PluginKind as K;
                let k = match i.kind {
                    K::Provider => Kind::Provider,
                    K::Shield => Kind::Shield,
                    K::Policy => Kind::Policy,
                    K::Retriever => Kind::Retriever,
                };
                (i.name, i.version, i.description, k)
            }};
        }
        Ok(match &self.pre {
            Pre::Provider(p) => info_of!(p, gatehouse_plugin_provider_api, provider),
            Pre::Shield(p) => info_of!(p, gatehouse_plugin_shield_api, shield),
            Pre::Policy(p) => info_of!(p, gatehouse_plugin_policy_api, policy),
            Pre::Retriever(p) => info_of!(p, gatehouse_plugin_retriever_api, retriever),
        })
    }
}
