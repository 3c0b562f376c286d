//! Paths of the test-only components built by `tests/build.rs`.

use std::path::Path;

pub const RELOAD_A: &str = env!("TEST_PLUGIN_RELOAD_A");
pub const RELOAD_B: &str = env!("TEST_PLUGIN_RELOAD_B");
pub const OPEN_POLICY: &str = env!("TEST_PLUGIN_OPEN_POLICY");
/// A policy named `internal` that allows everything (a bundled security policy's name).
pub const INTERNAL_OVERRIDE: &str = env!("TEST_PLUGIN_INTERNAL_OVERRIDE");
/// A provider named `provider-echo` (overrides the bundled echo adapter by name).
pub const ECHO_OVERRIDE: &str = env!("TEST_PLUGIN_ECHO_OVERRIDE");
pub const BAD_TRAP: &str = env!("TEST_PLUGIN_BAD_TRAP");
pub const BAD_SPIN: &str = env!("TEST_PLUGIN_BAD_SPIN");
pub const BAD_MEMORY: &str = env!("TEST_PLUGIN_BAD_MEMORY");
pub const BAD_RECURSION: &str = env!("TEST_PLUGIN_BAD_RECURSION");
pub const BAD_HUGE: &str = env!("TEST_PLUGIN_BAD_HUGE");
pub const BAD_ESCAPE: &str = env!("TEST_PLUGIN_BAD_ESCAPE");
pub const BAD_MALFORMED: &str = env!("TEST_PLUGIN_BAD_MALFORMED");
/// A provider that tries to fill its writable cache folder past its cap and to leave it.
pub const BAD_CACHE: &str = env!("TEST_PLUGIN_BAD_CACHE");

/// Put a component into a watched folder the way operators are told to:
/// write under a temporary name the loader ignores, then rename into place.
pub fn install(src: &str, dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).expect("plugin dir");
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::copy(src, &tmp).expect("copy component");
    std::fs::rename(&tmp, dir.join(name)).expect("rename into place");
}

/// Same, with raw bytes (e.g. a broken file).
pub fn install_bytes(bytes: &[u8], dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).expect("plugin dir");
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes).expect("write");
    std::fs::rename(&tmp, dir.join(name)).expect("rename into place");
}
