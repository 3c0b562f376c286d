//! The black-box test files (a real `gatehouse serve` per test), compiled into one test binary.
//!
//! One binary per file meant 23 compilations of the same reqwest, tokio and
//! serde code and 23 links; one binary compiles and links that once. Each file
//! stays a module under its own name, so `cargo test -p gatehouse-tests --test
//! suite -- chat::` runs one file. Five files stay binaries of their own (see
//! `tests/Cargo.toml`): `tenant_abuse` measures latency and must not share the
//! machine with other tests, `crash_safety` SIGKILLs servers under load, `fleet` runs three hosts on a
//! throwaway PostgreSQL that it stops and restarts, and
//! `plugin_runtime` and `fuzz_corpora` link the host in-process (so this
//! binary need not be rebuilt when only `host/src` changes; `plugin_runtime`
//! also times deadlines that other tests' load would stretch), and `console`
//! drives a browser (its machine needs chromium and chromedriver).
//!
//! A new file in this folder must be added here (or to `tests/Cargo.toml`):
//! `every_test_file_is_compiled` fails otherwise.

#[path = "admin_api.rs"]
mod admin_api;
#[path = "admin_reads.rs"]
mod admin_reads;
#[path = "auth_matrix.rs"]
mod auth_matrix;
#[path = "bad_input.rs"]
mod bad_input;
#[path = "chat.rs"]
mod chat;
#[path = "chat_validation.rs"]
mod chat_validation;
#[path = "config_reload.rs"]
mod config_reload;
#[path = "durability.rs"]
mod durability;
#[path = "foundation.rs"]
mod foundation;
#[path = "metrics.rs"]
mod metrics;
#[path = "mock_upstream.rs"]
mod mock_upstream;
#[path = "openai_sdk.rs"]
mod openai_sdk;
#[path = "openapi.rs"]
mod openapi;
#[path = "plugin_cache.rs"]
mod plugin_cache;
#[path = "plugins.rs"]
mod plugins;
#[path = "policy_selection.rs"]
mod policy_selection;
#[path = "rag.rs"]
mod rag;
#[path = "registry.rs"]
mod registry;
#[path = "security.rs"]
mod security;
#[path = "tenant_policy.rs"]
mod tenant_policy;
#[path = "upstream_tls.rs"]
mod upstream_tls;
#[path = "webhooks.rs"]
mod webhooks;

/// Test files that are binaries of their own (`[[test]]` in `tests/Cargo.toml`).
const OWN_BINARIES: &[&str] = &["console", "crash_safety", "fleet", "fuzz_corpora", "plugin_runtime", "policy_languages", "tenant_abuse"];

#[test]
fn every_test_file_is_compiled() {
    // `autotests = false`: a file that is neither a module here nor its own
    // binary would silently never run.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let this = include_str!("suite.rs");
    let manifest = include_str!("../Cargo.toml");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("read tests/tests") {
        let name = entry.expect("dir entry").file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".rs") else { continue };
        if stem == "suite" {
            continue;
        }
        let declared = this.contains(&format!("#[path = \"{name}\"]\nmod {stem};"));
        let own = OWN_BINARIES.contains(&stem) && manifest.contains(&format!("path = \"tests/{name}\""));
        if !declared && !own {
            missing.push(name);
        }
    }
    assert!(missing.is_empty(), "test files compiled into no test binary: {missing:?} (add them to tests/tests/suite.rs)");
}
