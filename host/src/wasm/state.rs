//! What one plugin call's `Store` holds: an empty WASI context (no env, no
//! args, no network, no stdio; only the read-only folders the operator
//! granted), the memory limiter, and the plugin's name for its log lines.

use std::sync::Arc;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings;

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
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub limiter: Limiter,
    /// Outbound HTTP grant (retrievers).
    pub outbound: Arc<super::outbound::Grant>,
    log_lines: u32,
}

impl CallState {
    pub fn new(plugin: Arc<str>, wasi: WasiCtx, max_memory: usize, outbound: Arc<super::outbound::Grant>) -> Self {
        CallState { plugin, wasi, table: ResourceTable::new(), limiter: Limiter { max_memory, refused: false }, outbound, log_lines: 0 }
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
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
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
