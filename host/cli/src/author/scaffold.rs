//! `gatehouse plugin new`: a complete policy project, written from what the
//! binary carries. The name goes into the source once (the `NAME` constant),
//! where the README says it is the registry name.

use std::path::{Path, PathBuf};

use gatehouse::cli::PluginLang;
use include_dir::Dir;

use super::embedded;

/// The longest name accepted (the registry takes 100; a crate name this long is already unwieldy).
const MAX_NAME: usize = 64;

/// Whether `name` may name a policy in every language: a lowercase letter,
/// then lowercase letters, digits and single `-` (a Rust package name, a
/// registry name, a string in Python and JavaScript alike).
fn valid_name(name: &str) -> bool {
    name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && !name.contains("--")
}

pub fn new(name: &str, lang: PluginLang, dir: Option<&Path>) -> anyhow::Result<i32> {
    if !valid_name(name) {
        anyhow::bail!(
            "invalid name {name:?}: use a lowercase letter, then lowercase letters, digits and single dashes (at most {MAX_NAME} characters)"
        );
    }
    let dir: PathBuf = dir.map_or_else(|| PathBuf::from(name), Path::to_path_buf);
    if dir.exists() && std::fs::read_dir(&dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        anyhow::bail!("{} exists and is not empty: choose another --dir", dir.display());
    }
    for (path, text) in files(name, lang)? {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, text).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    let lang_name = lang_name(lang);
    println!("created {lang_name} policy `{name}` in {}", dir.display());
    println!("  it serves as policy `{name}`: requests select it with \"smltp_policy\": \"{name}\"");
    println!("  next: cd {} && gatehouse plugin build && gatehouse plugin test", dir.display());
    Ok(0)
}

pub fn lang_name(lang: PluginLang) -> &'static str {
    match lang {
        PluginLang::Rust => "rust",
        PluginLang::Python => "python",
        PluginLang::Js => "js",
    }
}

/// Every file of the new project, by path relative to it.
fn files(name: &str, lang: PluginLang) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let lang_name = lang_name(lang);
    let fill = |text: &str| text.replace("{{name}}", name);
    let mut out: Vec<(PathBuf, String)> = vec![
        (super::MARKER.into(), format!("{{\"kind\": \"policy\", \"lang\": \"{lang_name}\"}}\n")),
        ("wit/gatehouse.wit".into(), embedded::WIT.to_owned()),
        ("samples.jsonl".into(), template_text(&embedded::TEMPLATES, "samples.jsonl")?),
        (".gitignore".into(), "/build/\n/target/\n/node_modules/\n__pycache__/\n".into()),
    ];
    let template = embedded::TEMPLATES.get_dir(lang_name).ok_or_else(|| anyhow::anyhow!("no {lang_name} template in this binary"))?;
    for (path, text) in dir_files(template)? {
        let path = path.strip_prefix(lang_name).map(Path::to_path_buf).unwrap_or(path);
        // The vendored SDK's manifest: written below, under vendor/.
        if path == Path::new("sdk-Cargo.toml") {
            continue;
        }
        out.push((path, fill(&text)));
    }
    match lang {
        PluginLang::Rust => {
            out.push(("vendor/gatehouse-sdk/Cargo.toml".into(), template_text(&embedded::TEMPLATES, "rust/sdk-Cargo.toml")?));
            for (path, text) in dir_files(&embedded::RUST_SDK)? {
                out.push((Path::new("vendor/gatehouse-sdk/src").join(path), text));
            }
        }
        PluginLang::Python => out.push(("gatehouse_policy.py".into(), embedded::PYTHON_LIB.to_owned())),
        PluginLang::Js => {
            out.push(("gatehouse_policy.js".into(), embedded::JS_LIB.to_owned()));
            out.push(("package.json".into(), embedded::JS_PACKAGE.to_owned()));
            out.push(("package-lock.json".into(), embedded::JS_LOCK.to_owned()));
        }
    }
    Ok(out)
}

fn template_text(dir: &Dir<'_>, path: &str) -> anyhow::Result<String> {
    dir.get_file(path)
        .and_then(|f| f.contents_utf8())
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no {path} among this binary's templates"))
}

/// Every file under `dir`, with its path (as include_dir gives it: relative to the embedded root).
fn dir_files(dir: &Dir<'_>) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let mut out = Vec::new();
    for entry in dir.entries() {
        match entry {
            include_dir::DirEntry::Dir(d) => out.extend(dir_files(d)?),
            include_dir::DirEntry::File(f) => {
                let text = f.contents_utf8().ok_or_else(|| anyhow::anyhow!("{} is not UTF-8", f.path().display()))?;
                out.push((f.path().to_path_buf(), text.to_owned()));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_suit_every_language() {
        for ok in ["acme", "acme-policy-2", "a"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "Acme", "2acme", "acme_policy", "acme-", "a--b", "acme.policy", "ac me", &"a".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn every_language_gets_the_wit_the_samples_and_its_library_with_the_name_written_once() {
        for lang in [PluginLang::Rust, PluginLang::Python, PluginLang::Js] {
            let files = files("acme-policy", lang).expect("files");
            let get = |p: &str| files.iter().find(|(f, _)| f == Path::new(p)).map(|(_, t)| t.as_str());
            assert_eq!(get("wit/gatehouse.wit"), Some(embedded::WIT));
            assert!(get("samples.jsonl").is_some_and(|s| s.lines().count() == 50), "{lang:?}");
            assert!(get("README.md").is_some_and(|r| r.lines().count() <= 25), "{lang:?}: a short README");
            let (source, library) = match lang {
                PluginLang::Rust => ("src/lib.rs", "vendor/gatehouse-sdk/src/policy/decision.rs"),
                PluginLang::Python => ("app.py", "gatehouse_policy.py"),
                PluginLang::Js => ("policy.js", "gatehouse_policy.js"),
            };
            let source = get(source).expect("policy source");
            assert!(!source.contains("{{name}}"));
            let declared =
                source.lines().filter(|l| l.contains("NAME") && l.contains("\"acme-policy\"") || l.contains("'acme-policy'")).count();
            assert_eq!(declared, 1, "{lang:?}: the name is written once, in NAME");
            assert!(get(library).is_some(), "{lang:?}: {library}");
            assert!(files.iter().all(|(_, t)| !t.contains("{{name}}")), "{lang:?}: every placeholder filled");
        }
    }
}
