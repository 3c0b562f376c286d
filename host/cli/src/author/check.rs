//! `gatehouse plugin check`: the built component as a server with this
//! config would see it — its world, what `info()` says, the name it will
//! serve under, its size against the cap, the limits each call runs under,
//! and one trial call.

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use super::{Project, samples};

pub fn run(project: &Project, config: Option<&Path>, calls: Option<usize>) -> anyhow::Result<i32> {
    let wasm = project.built()?;
    let cfg = gatehouse::config::Config::load(config)?.plugins;
    let size = std::fs::metadata(&wasm)?.len();
    let cap = cfg.max_component_bytes();
    println!("component   {} ({size} bytes; the server's cap is {} MiB)", wasm.display(), cfg.max_component_mb);
    if size > cap {
        println!("not loadable: over plugins.max_component_mb");
        return Ok(1);
    }
    let loaded = Instant::now();
    let plugin = match gatehouse_plugin_host::PluginRuntime::load_file(&cfg, &wasm) {
        Ok(p) => p,
        Err(e) => {
            println!("not loadable: {e:#}");
            return Ok(1);
        }
    };
    let load_ms = loaded.elapsed().as_secs_f64() * 1000.0;
    println!("world       gatehouse:plugin/{}@0.1.x (this host supports 0.1.x)", plugin.kind.as_str());
    println!("info        name {}, version {}, \"{}\"", plugin.name, plugin.version, plugin.description);
    println!(
        "serves as   policy `{}`: requests select it with \"smltp_policy\": \"{}\"; publishing it replaces any policy of that name",
        plugin.name, plugin.name
    );
    println!("sha256      {}", plugin.sha256);
    let grants = plugin.grants();
    println!(
        "limits      {} ms of CPU per call (plugins.call_timeout_ms), {} MiB of memory per instance (plugins.memory_limit_mb), a fresh instance per call",
        grants.deadline_ms,
        grants.memory_bytes / (1024 * 1024)
    );
    println!("loaded in   {load_ms:.0} ms (compiled; a server caches the compiled code)");
    let trial = json!({"request": {"prompt": "Hello", "model": "echo/default"}});
    let ctx = samples::context(&plugin.name, &trial).map_err(anyhow::Error::msg)?;
    let mut times = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        match plugin.evaluate(&ctx) {
            Ok(d) => {
                times.push(started.elapsed().as_secs_f64() * 1000.0);
                if times.len() == 5 {
                    println!("trial call  \"Hello\" to echo/default: {}", samples::as_json(&d));
                }
            }
            Err(e) => {
                println!("trial call  failed: {e}");
                return Ok(1);
            }
        }
    }
    println!("call time   first {:.2} ms, then {:.2} ms (each on a fresh instance)", times[0], times[1..].iter().sum::<f64>() / 4.0);
    if let Some(calls) = calls {
        super::cost::measure(&plugin, &ctx, calls.max(10))?;
    }
    println!("ok: loadable; publish it with `gatehouse plugin publish {}`", wasm.display());
    Ok(0)
}
