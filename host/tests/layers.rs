//! The host's layers, checked: a module may use its own layer's helpers and
//! anything below it, never a layer above. `ARCHITECTURE.md` draws the same
//! picture; this test keeps it true.
//!
//! From the top:
//! 1. **entry** — `cli`, `server`, `bootstrap`, `reload`, `fuzzing`:
//!    start, stop and wire everything.
//! 2. **api** — the route table, every HTTP handler and middleware.
//! 3. **state** — `app`: the state the handlers share.
//! 4. **domain** — `chat` (the pipeline) and `webhooks` (delivery): neither
//!    uses the other.
//! 5. **access** — `auth`: who is calling, their limits.
//! 6. **foundation** — `error`, `time`, `request_id`, `config`, `metrics`,
//!    `logging`, `net`, `plugin_audit` (plugin events into the audit log),
//!    `plugin_registry` (published plugins loaded into the runtime).
//!
//! The plugin runtime (`gatehouse-plugin-host`) and the store
//! (`gatehouse-store`) are crates of their own below all of these, and the
//! binary (`gatehouse-cli`) and the embedded components (`gatehouse-bundled`)
//! crates beside it: Cargo refuses a dependency cycle, so they need no check
//! here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const LAYERS: &[(&str, &[&str])] = &[
    ("entry", &["lib", "cli", "server", "bootstrap", "reload", "fuzzing"]),
    ("api", &["api"]),
    ("state", &["app"]),
    ("domain", &["chat", "webhooks"]),
    ("access", &["auth"]),
    ("foundation", &["error", "time", "request_id", "shutdown", "config", "metrics", "logging", "net", "plugin_audit", "plugin_registry"]),
];

/// Modules of one layer that may not use each other.
const APART: &[(&str, &str)] = &[("chat", "webhooks"), ("webhooks", "chat")];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, modules)| modules.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read host/src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`chat/pipeline.rs` → `chat`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next().expect("a component").as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// Every `crate::<module>` a source names outside its unit tests, with its line.
fn uses(text: &str) -> Vec<(usize, String)> {
    let code = text.find("#[cfg(test)]\nmod tests").map_or(text, |i| &text[..i]);
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            // `gatehouse_store::…` and the like end in `crate::` only by accident of spelling.
            let before = &rest[..i];
            if !name.is_empty() && !before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                out.push((n + 1, name));
            }
            rest = after;
        }
    }
    out
}

#[test]
fn no_module_of_the_host_uses_a_layer_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut unknown = BTreeMap::new();
    let mut violations = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        let Some(own) = layer_of(&module) else {
            unknown.insert(module, file.display().to_string());
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read");
        for (line, used) in uses(&text) {
            if used == module {
                continue;
            }
            let Some(theirs) = layer_of(&used) else {
                unknown.insert(used, format!("{}:{line}", file.display()));
                continue;
            };
            let apart = APART.contains(&(module.as_str(), used.as_str()));
            if theirs < own || apart {
                violations.push(format!(
                    "{}:{line}: `{module}` ({}) uses `{used}` ({})",
                    file.strip_prefix(&src).expect("under src").display(),
                    LAYERS[own].0,
                    LAYERS[theirs].0
                ));
            }
        }
    }
    assert!(unknown.is_empty(), "modules this test does not place in a layer (add them to LAYERS): {unknown:?}");
    assert!(violations.is_empty(), "a lower layer uses a higher one:\n{}", violations.join("\n"));
}

#[test]
fn the_check_sees_a_use_of_a_higher_layer() {
    // The test above would pass on a parser that finds nothing.
    let found = uses("use crate::api::error::ChatError;\nfn f() { crate::chat::x(); } // crate::app\n");
    assert_eq!(found, vec![(1, "api".to_owned()), (2, "chat".to_owned())]);
    assert!(uses("use gatehouse_store::model;\n").is_empty());
    assert!(layer_of("api") < layer_of("chat") && layer_of("chat") < layer_of("error"));
}
