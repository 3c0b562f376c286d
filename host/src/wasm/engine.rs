//! The one shared wasmtime `Engine`: Cranelift, the pooling allocator, epoch
//! interruption for CPU deadlines, and the compiled-artifact cache.

use std::time::Duration;

use wasmtime::{Cache, CacheConfig, Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::config::PluginsConfig;

/// Concurrent plugin instances (per-call stores) the pool holds.
const POOL_INSTANCES: u32 = 256;
/// Provider attempts that may hold an instance across the upstream wait
/// (`plugin::ProviderSession`): half the pool, so per-call instances always
/// have the other half.
pub const PROVIDER_SESSIONS: u32 = POOL_INSTANCES / 2;
/// Dirty linear-memory bytes a freed pool slot resets with `memset` and keeps
/// resident (found with Linux's `PAGEMAP_SCAN`), instead of `madvise`: the
/// next call in that slot then takes no page faults. A call touches a few
/// hundred KiB (stack top, data, heap); more than this is decommitted.
const KEEP_RESIDENT: usize = 1024 * 1024;

pub fn build(cfg: &PluginsConfig) -> anyhow::Result<Engine> {
    let memory = (cfg.memory_limit_mb.max(1) * 1024 * 1024) as usize;
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(POOL_INSTANCES)
        .total_core_instances(POOL_INSTANCES * 8)
        .total_memories(POOL_INSTANCES * 2)
        .total_tables(POOL_INSTANCES * 8)
        .max_memories_per_component(4)
        .max_memory_size(memory)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(64 * 1024)
        .pagemap_scan(wasmtime::Enabled::Auto);
    let mut config = Config::new();
    config
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        // A 4 GiB reservation plus a guard region lets Cranelift drop the
        // bounds check of every load and store (the guest runs about twice
        // as fast); it is address space only (2 TiB for the pool), never
        // memory. `max_memory_size` above and the store's limiter are the cap.
        .memory_reservation(4 << 30)
        .memory_guard_size(32 << 20)
        .max_wasm_stack(512 * 1024)
        .wasm_component_model(true)
        .cranelift_opt_level(wasmtime::OptLevel::Speed);
    // `GATEHOUSE_WASM_PERFMAP=1` writes /tmp/perf-<pid>.map so `perf report`
    // names the plugins' compiled functions (tests/bench/profile.sh sets it).
    if std::env::var_os("GATEHOUSE_WASM_PERFMAP").is_some_and(|v| v != "0") {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    if let Some(dir) = cfg.cache_dir() {
        let usable = std::fs::create_dir_all(&dir).is_ok();
        if usable {
            let mut cc = CacheConfig::new();
            cc.with_directory(&dir);
            match Cache::new(cc) {
                Ok(cache) => {
                    config.cache(Some(cache));
                }
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "compile cache unavailable; plugins are compiled at every start")
                }
            }
        } else {
            tracing::warn!(dir = %dir.display(), "compile cache folder cannot be created; plugins are compiled at every start");
        }
    }
    Engine::new(&config).map_err(|e| anyhow::anyhow!("cannot create the WebAssembly engine: {e:#}"))
}

/// Advance the engine's epoch every `tick` so deadlines fire; runs for the life of the process.
pub fn start_ticker(engine: &Engine, tick: Duration) {
    let weak = engine.weak();
    let spawned = std::thread::Builder::new().name("gatehouse-epoch".into()).spawn(move || {
        loop {
            std::thread::sleep(tick);
            match weak.upgrade() {
                Some(e) => e.increment_epoch(),
                None => return,
            }
        }
    });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the epoch ticker: plugin deadlines will not fire");
    }
}
