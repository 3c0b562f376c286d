//! The workspaces that cannot inherit the root `[workspace.lints]` (the test
//! plugins, the fuzz harness, the Rust policy template) carry a copy of it; this
//! keeps the copies equal to the original, so a lint added at the root is not
//! silently missing where guests and parsers are written.

use std::path::Path;

/// The lint lines of `manifest` under tables starting with `prefix`
/// (`[workspace.lints.` or `[lints.`), as `table: key = value`, in order,
/// comments and blank lines left out.
fn lint_lines(manifest: &str, prefix: &str) -> Vec<String> {
    let mut table: Option<String> = None;
    let mut lines = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            table = line.strip_prefix(prefix).and_then(|t| t.strip_suffix(']')).map(str::to_owned);
        } else if let Some(t) = &table
            && !line.is_empty()
            && !line.starts_with('#')
        {
            lines.push(format!("{t}: {line}"));
        }
    }
    lines
}

fn read(relative: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

#[test]
fn separate_workspaces_copy_the_workspace_lints() {
    let root = lint_lines(&read("Cargo.toml"), "[workspace.lints.");
    assert!(root.contains(&"rust: unsafe_code = \"deny\"".to_owned()), "{root:?}");
    assert_eq!(lint_lines(&read("tests/plugins/Cargo.toml"), "[workspace.lints."), root, "tests/plugins/Cargo.toml");
    assert_eq!(lint_lines(&read("tests/fuzz/Cargo.toml"), "[lints."), root, "tests/fuzz/Cargo.toml");
    // A tenant policy needs no unsafe code at all: the template forbids it.
    let template: Vec<String> = root.iter().map(|l| l.replace("unsafe_code = \"deny\"", "unsafe_code = \"forbid\"")).collect();
    assert_eq!(lint_lines(&read("sdk/templates/rust/Cargo.toml"), "[lints."), template, "sdk/templates/rust/Cargo.toml");
}
