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
    // names the plugins' compiled functions (tests/bench/profile.sh sets it),
    // and `note_code` says which plugin each code range belongs to.
    if perf_map() {
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

/// Whether `GATEHOUSE_WASM_PERFMAP` asks for perf's map of the plugins' code.
fn perf_map() -> bool {
    static ON: std::sync::LazyLock<bool> =
        std::sync::LazyLock::new(|| std::env::var_os("GATEHOUSE_WASM_PERFMAP").is_some_and(|v| !v.is_empty() && v != "0"));
    *ON
}

/// With `GATEHOUSE_WASM_PERFMAP`, note which plugin a loaded component's
/// compiled code belongs to in `/tmp/perf-<pid>.plugins`, beside the map
/// wasmtime writes for perf: that map names each guest function
/// (`wasm[0]::function[N]`, or its own name when the guest kept it) but not
/// its plugin, and `tests/bench/perf_buckets.py` splits the guest code's
/// samples by plugin with these ranges. Does nothing otherwise.
pub fn note_code(component: &wasmtime::component::Component, name: &str) {
    if !perf_map() {
        return;
    }
    let path = std::path::Path::new("/tmp").join(format!("perf-{}.plugins", std::process::id()));
    if let Err(e) = append_code_range(&path, component, name) {
        tracing::warn!(path = %path.display(), error = %e, "cannot note a plugin's code range for the profiler");
    }
}

/// Append `START END NAME` (hex addresses, END exclusive) of `component`'s
/// compiled code to `path`. A reload appends again; where code memory was
/// reused, the later line is the one that holds.
fn append_code_range(path: &std::path::Path, component: &wasmtime::component::Component, name: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let text = component.text();
    let start = text.as_ptr().addr();
    let line = format!("{start:#x} {:#x} {name}\n", start + text.len());
    std::fs::OpenOptions::new().create(true).append(true).open(path)?.write_all(line.as_bytes())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A component around one core function returning `n`: compiled code of its own.
    fn component_with_code(n: i32) -> Vec<u8> {
        use wasm_encoder::{CodeSection, Component, Function, FunctionSection, Instruction, Module, ModuleSection, TypeSection, ValType};
        let mut types = TypeSection::new();
        types.ty().function([], [ValType::I32]);
        let mut funcs = FunctionSection::new();
        funcs.function(0);
        let mut f = Function::new([]);
        f.instruction(&Instruction::I32Const(n));
        f.instruction(&Instruction::End);
        let mut code = CodeSection::new();
        code.function(&f);
        let mut module = Module::new();
        module.section(&types).section(&funcs).section(&code);
        let mut component = Component::new();
        component.section(&ModuleSection(&module));
        component.finish()
    }

    #[test]
    fn code_ranges_are_appended_one_line_per_component() {
        let engine = Engine::default();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("perf-1.plugins");
        let mut ranges = Vec::new();
        for (name, bytes) in [("first", component_with_code(1)), ("second", component_with_code(2))] {
            let component = wasmtime::component::Component::new(&engine, bytes).expect("compiles");
            append_code_range(&path, &component, name).expect("written");
            let text = component.text();
            ranges.push((text.as_ptr().addr(), text.as_ptr().addr() + text.len(), name.to_string()));
        }
        let written = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<&str> = written.lines().collect();
        assert_eq!(lines.len(), 2, "{written}");
        for (line, (start, end, name)) in lines.iter().zip(&ranges) {
            assert!(start < end, "a component has code");
            assert_eq!(*line, format!("{start:#x} {end:#x} {name}"));
        }
    }
}
