//! `gatehouse plugin new | build | test | check`: the tenant's side of a
//! policy, usable with nothing but this binary and the language's own tool.
//! The binary carries the WIT, the guest libraries and the templates
//! ([`embedded`]) and writes them into the new project; a project records
//! its kind and language in [`MARKER`]; `build` always writes
//! [`OUTPUT`], `test` and `check` load that file through the plugin host, as
//! the server would.

use std::path::{Path, PathBuf};

use gatehouse::cli::{PluginAction, PluginLang};

mod check;
mod compile;
mod cost;
mod embedded;
mod samples;
mod scaffold;

/// The file that makes a folder a plugin project: `{"kind": "policy", "lang": "python"}`.
pub const MARKER: &str = "gatehouse-plugin.json";
/// The built component, relative to the project.
pub const OUTPUT: &str = "build/policy.wasm";

/// Run one of the authoring commands; returns the exit code.
pub async fn run(action: PluginAction) -> anyhow::Result<i32> {
    match action {
        PluginAction::New { name, kind: _, lang, dir } => scaffold::new(&name, lang, dir.as_deref()),
        PluginAction::Build { dir } => compile::build(&Project::open(&dir)?),
        PluginAction::Test { dir, samples } => {
            let project = Project::open(&dir)?;
            let samples = samples.unwrap_or_else(|| project.dir.join("samples.jsonl"));
            samples::run(&project, &samples)
        }
        PluginAction::Check { dir, config, calls } => check::run(&Project::open(&dir)?, config.config.as_deref(), calls),
        PluginAction::Publish { .. } => anyhow::bail!("`plugin publish` is not an authoring command"),
    }
}

/// A plugin project made by `gatehouse plugin new`.
pub struct Project {
    pub dir: PathBuf,
    pub lang: PluginLang,
}

impl Project {
    /// The project in `dir`: it must hold [`MARKER`].
    pub fn open(dir: &Path) -> anyhow::Result<Project> {
        let marker = dir.join(MARKER);
        let text = std::fs::read_to_string(&marker).map_err(|e| {
            anyhow::anyhow!("{} is not a plugin project ({e} reading {MARKER}); make one with `gatehouse plugin new`", dir.display())
        })?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", marker.display()))?;
        let lang = match v["lang"].as_str() {
            Some("rust") => PluginLang::Rust,
            Some("python") => PluginLang::Python,
            Some("js") => PluginLang::Js,
            other => anyhow::bail!("{}: unknown lang {other:?} (rust, python or js)", marker.display()),
        };
        if v["kind"] != "policy" {
            anyhow::bail!("{}: unknown kind {} (only policy projects exist)", marker.display(), v["kind"]);
        }
        // Absolute, so the tools run in the project see the same paths.
        let dir = dir.canonicalize().map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
        Ok(Project { dir, lang })
    }

    /// The built component.
    pub fn output(&self) -> PathBuf {
        self.dir.join(OUTPUT)
    }

    /// The built component, or an error saying how to build it.
    pub fn built(&self) -> anyhow::Result<PathBuf> {
        let out = self.output();
        if !out.is_file() {
            anyhow::bail!("{} is missing: run `gatehouse plugin build` first", out.display());
        }
        Ok(out)
    }
}

/// Where `gatehouse plugin build` looks for the Python and JavaScript
/// toolchains: `GATEHOUSE_TOOLS`, else `$XDG_CACHE_HOME/gatehouse-tools`, else
/// `~/.cache/gatehouse-tools` (tests/setup.sh installs them there). Not under
/// `<cache>/gatehouse`: that is wasmtime's compiled-code cache, whose cleaner
/// deletes files it did not write.
pub fn tools_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("GATEHOUSE_TOOLS").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    cache.join("gatehouse-tools")
}
