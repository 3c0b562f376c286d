//! `gatehouse plugin build`: the language's own tool, at the version the
//! binary pins, into `build/policy.wasm`. The previous build is removed
//! first and the new one is written under a temporary name and renamed into
//! place only when the tool succeeded, so a failed build never leaves an
//! older component where `test`, `check` and `publish` look.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use gatehouse::cli::PluginLang;

use super::{Project, embedded, tools_dir};

pub fn build(project: &Project) -> anyhow::Result<i32> {
    let out = project.output();
    let dir = out.parent().unwrap_or(&project.dir).to_path_buf();
    std::fs::create_dir_all(&dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    match std::fs::remove_file(&out) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => anyhow::bail!("cannot remove the previous build {}: {e}", out.display()),
    }
    let partial = dir.join(".policy.wasm.partial");
    let _ = std::fs::remove_file(&partial);
    let started = Instant::now();
    let built = match project.lang {
        PluginLang::Rust => rust(project, &partial),
        PluginLang::Python => python(project, &partial),
        PluginLang::Js => js(project, &partial),
    };
    if let Err(e) = built {
        let _ = std::fs::remove_file(&partial);
        eprintln!("build failed: {e:#}");
        return Ok(1);
    }
    std::fs::rename(&partial, &out).map_err(|e| anyhow::anyhow!("cannot move the build into {}: {e}", out.display()))?;
    let size = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
    println!("built {} ({size} bytes) in {:.1} s", out.display(), started.elapsed().as_secs_f64());
    println!("next: gatehouse plugin test, then gatehouse plugin check");
    Ok(0)
}

/// Run `cmd`, its output going to ours; an error names the tool and its exit status.
fn run(mut cmd: Command, tool: &str) -> anyhow::Result<()> {
    let status = cmd.status().map_err(|e| anyhow::anyhow!("cannot run {tool}: {e}"))?;
    if !status.success() {
        anyhow::bail!("{tool} failed ({status}); the previous build was removed");
    }
    Ok(())
}

fn rust(project: &Project, partial: &Path) -> anyhow::Result<()> {
    let manifest = std::fs::read_to_string(project.dir.join("Cargo.toml"))?;
    let package = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("name = \"").and_then(|r| r.strip_suffix('"')))
        .ok_or_else(|| anyhow::anyhow!("Cargo.toml names no package"))?;
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| project.dir.join("target"), PathBuf::from);
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // --locked: the project's Cargo.lock, as written by `plugin new`, is what builds.
    cmd.current_dir(&project.dir).args(["build", "--release", "--locked", "--target", "wasm32-wasip2"]);
    run(cmd, "cargo build (install the target once: rustup target add wasm32-wasip2)")?;
    let wasm = target.join("wasm32-wasip2/release").join(format!("{}.wasm", package.replace('-', "_")));
    std::fs::copy(&wasm, partial).map_err(|e| anyhow::anyhow!("cargo built no {}: {e}", wasm.display()))?;
    Ok(())
}

fn python(project: &Project, partial: &Path) -> anyhow::Result<()> {
    let tool = tools_dir().join("py/bin/componentize-py");
    let tool = if tool.is_file() { tool } else { PathBuf::from("componentize-py") };
    let version = Command::new(&tool).arg("--version").output().map_err(|e| {
        anyhow::anyhow!("cannot run {}: {e}; install it: pip install componentize-py=={}", tool.display(), embedded::COMPONENTIZE_PY)
    })?;
    let version = String::from_utf8_lossy(&version.stdout);
    if version.split_whitespace().last() != Some(embedded::COMPONENTIZE_PY) {
        anyhow::bail!(
            "{} is {}, this gatehouse builds with componentize-py {}: pip install componentize-py=={}",
            tool.display(),
            version.trim(),
            embedded::COMPONENTIZE_PY,
            embedded::COMPONENTIZE_PY
        );
    }
    let mut cmd = Command::new(&tool);
    cmd.current_dir(&project.dir).args(["-d", "wit", "-w", "policy", "componentize", "app", "-p", ".", "-o"]).arg(partial);
    run(cmd, "componentize-py")
}

/// componentize-js, from the project's own `node_modules` (after `npm ci`
/// there) or the shared tools folder.
fn js(project: &Project, partial: &Path) -> anyhow::Result<()> {
    let candidates = [project.dir.join("node_modules"), tools_dir().join("js/node_modules")];
    let modules = candidates.iter().find(|m| m.join("@bytecodealliance/componentize-js/package.json").is_file()).ok_or_else(|| {
        anyhow::anyhow!(
            "componentize-js {} is not installed: run `npm ci` in {} (package.json pins it)",
            embedded::COMPONENTIZE_JS,
            project.dir.display()
        )
    })?;
    let package = modules.join("@bytecodealliance/componentize-js");
    let manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(package.join("package.json"))?)?;
    if manifest["version"] != embedded::COMPONENTIZE_JS {
        anyhow::bail!(
            "{} holds componentize-js {}, this gatehouse builds with {}: run `npm ci` in {}",
            modules.display(),
            manifest["version"],
            embedded::COMPONENTIZE_JS,
            project.dir.display()
        );
    }
    let script = partial.with_extension("mjs");
    std::fs::write(&script, embedded::JS_BUILD)?;
    let mut cmd = Command::new("node");
    cmd.current_dir(&project.dir)
        .arg(&script)
        .arg(package.join("src/componentize.js"))
        .arg(project.dir.join("policy.js"))
        .arg(project.dir.join("wit"))
        .arg(partial);
    let r = run(cmd, "componentize-js (node)");
    let _ = std::fs::remove_file(&script);
    r
}
