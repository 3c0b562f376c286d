//! Builds the test-only components in `tests/plugins` (their own workspace,
//! never bundled) and tells the tests where they are. The faulty provider is
//! built once per fault (cargo features), into separate target dirs.

use std::path::{Path, PathBuf};
use std::process::Command;

fn cargo_build(root: &Path, target_dir: &Path, args: &[&str]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root.join("plugins"))
        .args(["build", "--release", "--target", "wasm32-wasip2", "--target-dir"])
        .arg(target_dir)
        .args(args);
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_TARGET_DIR", "CARGO_BUILD_TARGET", "CARGO_MANIFEST_DIR"] {
        cmd.env_remove(var);
    }
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("CARGO_PROFILE_") {
            cmd.env_remove(k);
        }
    }
    let status = cmd.status().expect("run cargo for the test plugins");
    assert!(status.success(), "building the test plugins failed (is the wasm32-wasip2 target installed?)");
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let ws = root.parent().expect("workspace").to_path_buf();
    println!("cargo:rerun-if-changed={}", root.join("plugins").display());
    println!("cargo:rerun-if-changed={}", ws.join("plugins/sdk").display());
    println!("cargo:rerun-if-changed={}", ws.join("wit").display());
    // One target dir, so dependencies build once; each variant's output is
    // copied away before the next build overwrites it.
    let base = ws.join("target").join("plugins-test");
    let built = |name: &str| base.join("wasm32-wasip2/release").join(format!("{name}.wasm"));
    cargo_build(&root, &base, &["-p", "reload-a", "-p", "reload-b", "-p", "open-policy", "-p", "echo-override", "-p", "internal-override"]);
    println!("cargo:rustc-env=TEST_PLUGIN_OPEN_POLICY={}", built("open_policy").display());
    println!("cargo:rustc-env=TEST_PLUGIN_RELOAD_A={}", built("reload_a").display());
    println!("cargo:rustc-env=TEST_PLUGIN_RELOAD_B={}", built("reload_b").display());
    println!("cargo:rustc-env=TEST_PLUGIN_ECHO_OVERRIDE={}", built("echo_override").display());
    println!("cargo:rustc-env=TEST_PLUGIN_INTERNAL_OVERRIDE={}", built("internal_override").display());
    for fault in ["trap", "spin", "memory", "recursion", "huge", "escape", "malformed", "cache"] {
        cargo_build(&root, &base, &["-p", "bad-plugins", "--features", fault]);
        let dest = base.join(format!("bad-{fault}.wasm"));
        std::fs::copy(built("bad_plugins"), &dest).expect("copy the test plugin");
        println!("cargo:rustc-env=TEST_PLUGIN_BAD_{}={}", fault.to_uppercase(), dest.display());
    }
}
