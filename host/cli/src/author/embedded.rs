//! What `gatehouse plugin new` writes, carried in the binary: the WIT, the
//! guest libraries, the templates, the pinned JavaScript toolchain manifest
//! and the Rust SDK's sources (vendored into a Rust project).

use include_dir::{Dir, include_dir};

/// The WIT package every component is built against.
pub const WIT: &str = include_str!("../../../../wit/gatehouse.wit");
/// The Python guest library.
pub const PYTHON_LIB: &str = include_str!("../../../../sdk/python/gatehouse_policy.py");
/// The JavaScript guest library.
pub const JS_LIB: &str = include_str!("../../../../sdk/js/gatehouse_policy.js");
/// The JavaScript toolchain's pins and its lock file (`npm ci`).
pub const JS_PACKAGE: &str = include_str!("../../../../sdk/tools/package.json");
pub const JS_LOCK: &str = include_str!("../../../../sdk/tools/package-lock.json");
/// The script `plugin build` runs componentize-js with.
pub const JS_BUILD: &str = include_str!("../../../../sdk/tools/build-js.mjs");
/// The templates: one folder per language, and the shared samples.
pub static TEMPLATES: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../sdk/templates");
/// The Rust SDK's sources.
pub static RUST_SDK: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../plugins/sdk/src");

/// The componentize-py version `plugin build` requires.
pub const COMPONENTIZE_PY: &str = "0.25.1";
/// The componentize-js version `plugin build` requires.
pub const COMPONENTIZE_JS: &str = "0.23.0";
