//! Builds the bundled plugin components and embeds them in the binary.
//!
//! Every guest crate listed in `BUNDLED` is compiled for `wasm32-wasip2`
//! with a nested cargo into `target/plugins` (its own target dir, so the
//! outer build's lock is not contended), then `OUT_DIR/bundled.rs` includes
//! each component's bytes. A server started from any directory, with an
//! empty data dir, therefore has the bundled plugins.
//!
//! To bundle a new plugin, add a line to `BUNDLED`. An entry whose directory
//! has no `Cargo.toml` yet is skipped. A crate that exists but does not
//! compile (someone is in the middle of writing it) is left out of the
//! binary with a `cargo:warning`, so it does not stop everyone else's build;
//! CI sets `GATEHOUSE_STRICT_PLUGIN_BUILD=1` to make that an error. A crate
//! that compiles to something that is not a Gatehouse component (an empty
//! `lib.rs`) is refused by the loader at start with a clear log line.
//! `GATEHOUSE_SKIP_PLUGIN_BUILD=1` embeds whatever `target/plugins` already
//! holds without running cargo.

use std::path::{Path, PathBuf};
use std::process::Command;

/// (crate name, directory) of every bundled component.
const BUNDLED: &[(&str, &str)] = &[
    ("provider-echo", "plugins/provider-echo"),
    ("provider-openai", "plugins/provider-openai"),
    ("provider-anthropic", "plugins/provider-anthropic"),
    ("prompt-shield", "plugins/prompt-shield"),
    ("pii-dlp", "plugins/pii-dlp"),
    ("retriever-local", "plugins/retriever-local"),
    ("retriever-http", "plugins/retriever-http"),
    ("policy-internal", "policies/internal"),
    ("policy-public", "policies/public"),
    ("policy-confidential", "policies/confidential"),
];

const TARGET: &str = "wasm32-wasip2";
const PROFILE: &str = "plugin";
const SKIP_VAR: &str = "GATEHOUSE_SKIP_PLUGIN_BUILD";
const STRICT_VAR: &str = "GATEHOUSE_STRICT_PLUGIN_BUILD";

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest.parent().expect("workspace root").to_path_buf();
    for dir in ["plugins", "policies", "wit", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-env-changed={SKIP_VAR}");
    println!("cargo:rerun-if-env-changed={STRICT_VAR}");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let present: Vec<&str> = BUNDLED.iter().filter(|(_, dir)| root.join(dir).join("Cargo.toml").is_file()).map(|(name, _)| *name).collect();

    let skip = std::env::var_os(SKIP_VAR).is_some();
    let strict = std::env::var_os(STRICT_VAR).is_some_and(|v| !v.is_empty() && v != "0");
    let target_dir = root.join("target").join("plugins");
    let built: Vec<&str> = if skip || present.is_empty() { present.clone() } else { build_all(&root, &target_dir, &present, strict) };

    let mut code = String::from("/// Bundled components: (crate name, component bytes).\npub static BUNDLED: &[(&str, &[u8])] = &[\n");
    for name in built {
        let file = target_dir.join(TARGET).join(PROFILE).join(format!("{}.wasm", name.replace('-', "_")));
        if file.is_file() {
            code.push_str(&format!("    ({name:?}, include_bytes!({:?})),\n", file.display().to_string()));
        } else if skip {
            println!("cargo:warning=bundled plugin {name} is not in {} ({SKIP_VAR} is set)", target_dir.display());
        } else {
            panic!("plugin {name} built but {} is missing", file.display());
        }
    }
    code.push_str("];\n");
    std::fs::write(out.join("bundled.rs"), code).expect("write bundled.rs");
}

/// Build every crate; the ones that built, in order. One cargo run for all
/// (dependencies compile once); if it fails, one run per crate to find out
/// which failed.
fn build_all<'a>(root: &Path, target_dir: &Path, crates: &[&'a str], strict: bool) -> Vec<&'a str> {
    if cargo_build(root, target_dir, crates) {
        return crates.to_vec();
    }
    check_target_installed();
    let mut ok = Vec::new();
    for name in crates {
        if cargo_build(root, target_dir, &[name]) {
            ok.push(*name);
        } else if strict {
            panic!("bundled plugin {name} does not build for {TARGET} (see the output above)");
        } else {
            println!(
                "cargo:warning=bundled plugin {name} does not build for {TARGET}; it is left out of this binary \
                 (set {STRICT_VAR}=1 to make this an error)"
            );
        }
    }
    ok
}

/// `cargo build --target wasm32-wasip2 --profile plugin -p …` in a clean environment.
fn cargo_build(root: &Path, target_dir: &Path, crates: &[&str]) -> bool {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root).args(["build", "--target", TARGET, "--profile", PROFILE, "--target-dir"]).arg(target_dir);
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
    match cmd.status() {
        Ok(status) => status.success(),
        Err(e) => panic!("could not run cargo to build the bundled plugins: {e}"),
    }
}

/// Fail with the fix when the guest target is missing.
fn check_target_installed() {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l.trim() == TARGET))
        // Without rustup we cannot tell; the cargo output above says what failed.
        .unwrap_or(true);
    if !installed {
        panic!("the {TARGET} target is missing: run `rustup target add {TARGET}`");
    }
}
