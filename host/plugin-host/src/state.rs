//! What one plugin call's `Store` holds: an empty WASI context (no env, no
//! args, no network, no stdio; only the folders the operator granted:
//! read-only ones, and the plugin's own cache folder), the memory limiter,
//! the cache folder's count, and the plugin's name for its log lines.
//!
//! The guest's stderr goes to a bounded in-memory pipe of the call
//! ([`GuestStderr`]): a panic's message reaches the call's error.
//!
//! A call whose plugin was granted no folders gets its WASI context only when
//! the guest first reaches WASI (most calls never do): building one seeds two
//! random generators and allocates its clocks, which is a measurable part of
//! a small call's fixed cost (docs/benchmarks.md#lazy-wasi-context).

use std::sync::Arc;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::bindings;
use super::cache_folder::{CacheFolder, Full};
use super::stderr::GuestStderr;

/// Caps linear memory and records whether it refused a growth.
pub struct Limiter {
    pub max_memory: usize,
    pub refused: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            self.refused = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// Store data of one call.
pub struct CallState {
    pub plugin: Arc<str>,
    /// The call's WASI context; `None` until the guest first uses WASI when
    /// it would be the empty one (no granted folders).
    wasi: Option<WasiCtx>,
    /// The context's stderr, once there is a context.
    stderr: Option<GuestStderr>,
    pub table: ResourceTable,
    pub limiter: Limiter,
    /// Outbound HTTP grant (retrievers).
    pub outbound: Arc<super::outbound::Grant>,
    /// The plugin's writable cache folder, and whether this store has measured it yet.
    cache: Option<(Arc<CacheFolder>, bool)>,
    log_lines: u32,
}

impl CallState {
    /// `wasi`: the context with the plugin's granted folders and the stderr
    /// it writes to, or `None` for the empty context, built on first use.
    pub fn new(plugin: Arc<str>, wasi: Option<(WasiCtx, GuestStderr)>, max_memory: usize, outbound: Arc<super::outbound::Grant>) -> Self {
        let (wasi, stderr) = wasi.map_or((None, None), |(w, s)| (Some(w), Some(s)));
        CallState {
            plugin,
            wasi,
            stderr,
            table: ResourceTable::new(),
            limiter: Limiter { max_memory, refused: false },
            outbound,
            cache: None,
            log_lines: 0,
        }
    }

    /// The store mounts `folder` writable: its writes are charged to it.
    pub fn with_cache(mut self, folder: Option<Arc<CacheFolder>>) -> Self {
        self.cache = folder.map(|f| (f, false));
        self
    }

    /// Whether the store has a writable cache folder.
    pub fn has_cache(&self) -> bool {
        self.cache.is_some()
    }

    /// The cache folder, measured if this store had not yet (see `crate::cache_folder`).
    pub fn cache_folder(&mut self) -> Option<Arc<CacheFolder>> {
        let (folder, measured) = self.cache.as_mut()?;
        if !*measured {
            folder.remeasure();
            *measured = true;
        }
        Some(folder.clone())
    }

    /// Charge a write to the cache folder (a store without one has no writable folder: nothing to count).
    pub fn charge_cache(&mut self, bytes: u64, entries: u64) -> Result<(), Full> {
        match self.cache_folder() {
            Some(f) => f.charge(bytes, entries),
            None => Ok(()),
        }
    }

    /// Give back a charge whose write failed.
    pub fn release_cache(&mut self, bytes: u64, entries: u64) {
        if let Some((f, _)) = &self.cache {
            f.release(bytes, entries);
        }
    }

    /// What the guest wrote to stderr, as one line (see [`GuestStderr::panic_message`]).
    pub fn panic_message(&self) -> Option<String> {
        self.stderr.as_ref()?.panic_message()
    }

    /// A warm instance's next call starts: fresh per-call budgets.
    pub fn begin_call(&mut self) {
        self.log_lines = 0;
    }

    /// Guest logging through the host's tracing, bounded per call.
    fn log(&mut self, level: u8, message: String) {
        self.log_lines += 1;
        if self.log_lines > 100 {
            return;
        }
        let message: String = message.chars().take(2000).collect();
        let plugin = &*self.plugin;
        match level {
            0 => tracing::trace!(plugin, "{message}"),
            1 => tracing::debug!(plugin, "{message}"),
            2 => tracing::info!(plugin, "{message}"),
            3 => tracing::warn!(plugin, "{message}"),
            _ => tracing::error!(plugin, "{message}"),
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let stderr = &mut self.stderr;
        let ctx = self.wasi.get_or_insert_with(|| {
            let pipe = GuestStderr::default();
            let ctx = WasiCtxBuilder::new().stderr(pipe.clone()).build();
            *stderr = Some(pipe);
            ctx
        });
        WasiCtxView { ctx, table: &mut self.table }
    }
}

macro_rules! host_log {
    ($world:ident) => {
        impl bindings::$world::gatehouse::plugin::host_log::Host for CallState {
            fn log(&mut self, level: bindings::$world::gatehouse::plugin::types::LogLevel, message: String) {
                use bindings::$world::gatehouse::plugin::types::LogLevel as L;
                let l = match level {
                    L::Trace => 0,
                    L::Debug => 1,
                    L::Info => 2,
                    L::Warn => 3,
                    L::Error => 4,
                };
                CallState::log(self, l, message)
            }
        }
        impl bindings::$world::gatehouse::plugin::types::Host for CallState {}
    };
}

host_log!(provider);
host_log!(shield);
host_log!(policy);
host_log!(retriever);

impl bindings::retriever::gatehouse::plugin::outbound_http::Host for CallState {
    fn send(
        &mut self,
        request: bindings::retriever::gatehouse::plugin::types::HttpRequest,
    ) -> Result<bindings::retriever::gatehouse::plugin::types::HttpResponse, String> {
        use bindings::retriever::gatehouse::plugin::types::{Header, HttpResponse};
        let headers: Vec<(String, String)> = request.headers.into_iter().map(|h| (h.name, h.value)).collect();
        // A blocking HTTP call: off the async worker (a no-op when the call already is).
        let (status, headers, body) =
            super::plugin::off_async(|| self.outbound.send(&request.method, &request.url, &headers, request.body))?;
        Ok(HttpResponse { status, headers: headers.into_iter().map(|(name, value)| Header { name, value }).collect(), body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(wasi: Option<(WasiCtx, GuestStderr)>) -> CallState {
        CallState::new("test".into(), wasi, 1 << 20, Arc::new(super::super::outbound::Grant::new(&[], Vec::new())))
    }

    #[test]
    fn an_ungranted_call_gets_its_wasi_context_at_first_use_and_keeps_it() {
        let mut s = state(None);
        assert!(s.wasi.is_none(), "nothing is built before the guest reaches WASI");
        let first: *const WasiCtx = s.ctx().ctx;
        assert!(s.wasi.is_some());
        let again: *const WasiCtx = s.ctx().ctx;
        assert_eq!(first, again, "later WASI calls of the same call share the one context");
    }

    #[test]
    fn a_context_built_with_grants_is_the_one_used() {
        let mut s = state(Some((WasiCtxBuilder::new().build(), GuestStderr::default())));
        let given: *const WasiCtx = s.wasi.as_ref().expect("given");
        let used: *const WasiCtx = s.ctx().ctx;
        assert_eq!(given, used);
    }
}
