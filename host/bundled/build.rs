//! Builds the bundled plugin components and embeds them in the binary.
//!
//! Every guest crate listed in `BUNDLED` is compiled with a nested cargo into
//! `target/plugins` (its own target dir, so the outer build's lock is not
//! contended), then `OUT_DIR/bundled.rs` includes each component's bytes. A
//! server started from any directory, with an empty data dir, therefore has
//! the bundled plugins.
//!
//! Guests that need no WASI (the request path's providers, shields and
//! policies) are built for `wasm32-unknown-unknown` and made components here
//! with `wit-component` from the WIT that `wit-bindgen` embeds in them: one
//! core module and one core instance each. Built for `wasm32-wasip2`, Rust's
//! `std` brings 14 WASI imports routed through two more core modules and
//! ~15 core instances, which every instantiation pays for (~2 µs of an
//! ~9 µs call here; docs/benchmarks.md#guests-without-wasi). Guests that read files
//! or clocks (the retrievers) stay on `wasm32-wasip2`, as do tenants'
//! plugins; the host serves both.
//!
//! To bundle a new plugin, add a line to `BUNDLED`. An entry whose directory
//! has no `Cargo.toml` yet is skipped. A crate that exists but does not
//! compile (someone is in the middle of writing it) is left out of the
//! binary with a `cargo:warning`, so it does not stop everyone else's build;
//! CI sets `GATEHOUSE_STRICT_PLUGIN_BUILD=1` to make that an error. A crate
//! that compiles to something that is not a Gatehouse component (an empty
//! `lib.rs`) is refused by the loader at start with a clear log line.
//! `GATEHOUSE_SKIP_PLUGIN_BUILD=1` embeds whatever `target/plugins` already
//! holds without running cargo. `GATEHOUSE_PLUGIN_NAMES=1` keeps the guests'
//! function names (the wasm `name` section), built into `target/plugins-named`
//! so that the normal build's guests are not rebuilt: with it, a profile
//! names the plugins' own functions (`tests/bench/profile.sh` sets it).

use std::path::{Path, PathBuf};
use std::process::Command;

/// What a guest is compiled for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    /// `wasm32-unknown-unknown`, made a component by this script.
    Bare,
    /// `wasm32-wasip2`: rustc's output is already a component.
    Wasi,
}

impl Target {
    fn triple(self) -> &'static str {
        match self {
            Target::Bare => "wasm32-unknown-unknown",
            Target::Wasi => "wasm32-wasip2",
        }
    }
}

/// (crate name, directory, target) of every bundled component.
const BUNDLED: &[(&str, &str, Target)] = &[
    ("provider-echo", "plugins/provider-echo", Target::Bare),
    ("provider-openai", "plugins/provider-openai", Target::Bare),
    ("provider-anthropic", "plugins/provider-anthropic", Target::Bare),
    ("prompt-shield", "plugins/prompt-shield", Target::Bare),
    ("pii-dlp", "plugins/pii-dlp", Target::Bare),
    ("retriever-local", "plugins/retriever-local", Target::Wasi),
    ("retriever-http", "plugins/retriever-http", Target::Wasi),
    ("policy-internal", "policies/internal", Target::Bare),
    ("policy-public", "policies/public", Target::Bare),
    ("policy-confidential", "policies/confidential", Target::Bare),
];

const PROFILE: &str = "plugin";
/// Shadow-stack size of the `wasm32-unknown-unknown` guests (see `cargo_build`).
const BARE_STACK_BYTES: u32 = 256 * 1024;
const SKIP_VAR: &str = "GATEHOUSE_SKIP_PLUGIN_BUILD";
const STRICT_VAR: &str = "GATEHOUSE_STRICT_PLUGIN_BUILD";
const NAMES_VAR: &str = "GATEHOUSE_PLUGIN_NAMES";

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest.parent().and_then(Path::parent).expect("workspace root").to_path_buf();
    for dir in ["plugins", "policies", "wit", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-env-changed={SKIP_VAR}");
    println!("cargo:rerun-if-env-changed={STRICT_VAR}");
    println!("cargo:rerun-if-env-changed={NAMES_VAR}");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let skip = std::env::var_os(SKIP_VAR).is_some();
    let strict = std::env::var_os(STRICT_VAR).is_some_and(|v| !v.is_empty() && v != "0");
    let names = std::env::var_os(NAMES_VAR).is_some_and(|v| !v.is_empty() && v != "0");
    let target_dir = root.join("target").join(if names { "plugins-named" } else { "plugins" });

    let mut code = String::from("/// Bundled components: (crate name, component bytes).\npub static BUNDLED: &[(&str, &[u8])] = &[\n");
    for target in [Target::Bare, Target::Wasi] {
        let present: Vec<&str> = BUNDLED
            .iter()
            .filter(|(_, dir, t)| *t == target && root.join(dir).join("Cargo.toml").is_file())
            .map(|(name, _, _)| *name)
            .collect();
        let built = if skip || present.is_empty() { present } else { build_all(&root, &target_dir, target, &present, strict, names) };
        for name in built {
            let file = target_dir.join(target.triple()).join(PROFILE).join(format!("{}.wasm", name.replace('-', "_")));
            if !file.is_file() {
                if skip {
                    println!("cargo:warning=bundled plugin {name} is not in {} ({SKIP_VAR} is set)", target_dir.display());
                    continue;
                }
                panic!("plugin {name} built but {} is missing", file.display());
            }
            let component = match target {
                Target::Wasi => file,
                Target::Bare => match componentize(&file, &out) {
                    Ok(path) => path,
                    Err(e) if strict => panic!("bundled plugin {name}: {e}"),
                    Err(e) => {
                        println!("cargo:warning=bundled plugin {name} is left out of this binary: {e}");
                        continue;
                    }
                },
            };
            code.push_str(&format!("    ({name:?}, include_bytes!({:?})),\n", component.display().to_string()));
        }
    }
    code.push_str("];\n");
    std::fs::write(out.join("bundled.rs"), code).expect("write bundled.rs");
}

/// Make the core module of a guest built for `wasm32-unknown-unknown` into a
/// component, from the component type that `wit-bindgen` embedded in it;
/// written to `OUT_DIR`. A guest that imports anything but its world's
/// interfaces (WASI, say) cannot be encoded without an adapter and is refused.
fn componentize(module: &Path, out: &Path) -> Result<PathBuf, String> {
    let bytes = std::fs::read(module).map_err(|e| format!("cannot read {}: {e}", module.display()))?;
    let component = wit_component::ComponentEncoder::default()
        .module(&bytes)
        .and_then(|encoder| encoder.validate(true).encode())
        .map_err(|e| format!("{} is not a component without WASI: {e:#}", module.display()))?;
    let dir = out.join("components");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(module.file_name().expect("a file name"));
    std::fs::write(&path, component).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// Build every crate; the ones that built, in order. One cargo run for all
/// (dependencies compile once); if it fails, one run per crate to find out
/// which failed.
fn build_all<'a>(root: &Path, target_dir: &Path, target: Target, crates: &[&'a str], strict: bool, names: bool) -> Vec<&'a str> {
    if cargo_build(root, target_dir, target, crates, names) {
        return crates.to_vec();
    }
    check_target_installed(target);
    let mut ok = Vec::new();
    for name in crates {
        if cargo_build(root, target_dir, target, &[name], names) {
            ok.push(*name);
        } else if strict {
            panic!("bundled plugin {name} does not build for {} (see the output above)", target.triple());
        } else {
            println!(
                "cargo:warning=bundled plugin {name} does not build for {}; it is left out of this binary \
                 (set {STRICT_VAR}=1 to make this an error)",
                target.triple()
            );
        }
    }
    ok
}

/// `cargo build --target <triple> --profile plugin -p …` in a clean environment;
/// with `names`, the guests keep their function names (`strip = "none"`).
fn cargo_build(root: &Path, target_dir: &Path, target: Target, crates: &[&str], names: bool) -> bool {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root).args(["build", "--target", target.triple(), "--profile", PROFILE, "--target-dir"]).arg(target_dir);
    for name in crates {
        cmd.args(["-p", name]);
    }
    if std::env::var("CARGO_NET_OFFLINE").is_ok_and(|v| v == "true") {
        cmd.arg("--offline");
    }
    // The outer build's settings are not the guests' settings.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_MANIFEST_DIR",
        "CARGO_PRIMARY_PACKAGE",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_CFG_TARGET_FEATURE",
    ] {
        cmd.env_remove(var);
    }
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CARGO_PROFILE_") || (k.starts_with("CARGO_TARGET_") && k.ends_with("_RUSTFLAGS")) {
            cmd.env_remove(k.as_ref());
        }
    }
    if names {
        cmd.env("CARGO_PROFILE_PLUGIN_STRIP", "none");
    }
    if target == Target::Bare {
        // A 256 KiB shadow stack instead of the linker's 1 MiB: the stack is
        // placed first in linear memory, so an overflow traps (an access
        // below address 0) rather than corrupting data, and a smaller initial
        // memory is cheaper to reset after every call (wasmtime scans the
        // whole accessible range for dirty pages). Most frames live in wasm
        // locals, bounded by the host's `max_wasm_stack`, not here.
        cmd.env("CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS", format!("-C link-arg=-zstack-size={}", BARE_STACK_BYTES));
    }
    match cmd.status() {
        Ok(status) => status.success(),
        Err(e) => panic!("could not run cargo to build the bundled plugins: {e}"),
    }
}

/// Fail with the fix when the guest target is missing.
fn check_target_installed(target: Target) {
    let triple = target.triple();
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l.trim() == triple))
        // Without rustup we cannot tell; the cargo output above says what failed.
        .unwrap_or(true);
    if !installed {
        panic!("the {triple} target is missing: run `rustup target add {triple}`");
    }
}
