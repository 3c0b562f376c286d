//! `retriever-local`: retrieval over a local folder of Markdown, text and
//! HTML files, mounted read-only by the host.
//!
//! # Life cycle
//! The host keeps one warm instance per knowledge base and replaces it when a
//! file in the folder changes. The index is built lazily by the first
//! `retrieve` of an instance (a call with `k = 0` is a warm-up: build, return
//! nothing) and kept in a guest global keyed by `config-json`; the folder is
//! never watched or re-read by the guest itself.
//!
//! # Pipeline
//! [`walk`] reads the folder (bad files skipped) → [`extract`] turns each file
//! into a title and heading sections ([`html`] for HTML) → [`chunk`] cuts
//! sections into passages of bounded size with overlap → [`index`] builds an
//! inverted index and ranks with two-level BM25F over stemmed terms
//! ([`text`]). An index whose config names a `dense_model` also embeds every
//! passage with static token embeddings from all-MiniLM-L6-v2 ([`dense`]: a
//! file read from a folder the operator grants, no network, no transformer at
//! run time), caches the vectors ([`cache`]) and fuses the two document
//! rankings (hybrid retrieval). An index that names no model reads no model:
//! the component does not embed one, so lexical-only users pay nothing for
//! it. Options: see [`config`].
//!
//! # Filters
//! `source_prefix = <path>`: only documents whose relative path starts with
//! it. Any other filter field is an error, so a typo does not silently widen
//! a search.
//!
//! Beside the component, the crate is a native library: [`Index::build`] and
//! [`Index::search`] for tests and tools, [`synthetic::corpus`] for
//! benchmarks, and [`eval`] for the retrieval-quality report.

#![warn(missing_docs)]

pub mod cache;
pub mod chunk;
pub mod config;
pub mod dense;
pub mod eval;
pub mod extract;
pub(crate) mod html;
pub mod index;
pub mod synthetic;
pub mod text;
pub mod walk;

use std::path::Path;
use std::sync::Mutex;

use gatehouse_sdk::retriever::exports::gatehouse::plugin::retriever_api as api;
use gatehouse_sdk::retriever::gatehouse::plugin::types::{PluginInfo, PluginKind};

pub use config::Config;
pub use index::{Hit, Index, Options};

/// The index of this instance and the `config-json` it was built from.
static LOADED: Mutex<Option<(String, Index)>> = Mutex::new(None);

/// Builds the index of a parsed config: reads the folder, loads the dense
/// model if the config names one, indexes it. `name` names the knowledge
/// base's vector cache file.
pub fn build_from_config(cfg: &Config, name: &str) -> Result<(Index, walk::Walk), String> {
    let mut walked = walk::read_dir(Path::new(&cfg.root), cfg.limits)?;
    let files = std::mem::take(&mut walked.files);
    let Some(path) = cfg.index.dense_model.as_deref().filter(|_| cfg.index.dense_weight > 0.0) else {
        return Ok((Index::build_with(files, cfg.index.clone(), None), walked));
    };
    let model = dense::load(path)?;
    // The host builds each instance's index once (a change in the folder
    // makes a new instance), so vectors kept in an instance's memory would
    // never be asked for again: only a folder keeps them for the next build.
    let mut memory = cache::MemoryCache::new(0);
    let Some(dir) = &cfg.vector_cache else {
        return Ok((Index::build_with(files, cfg.index.clone(), Some((model, &mut memory))), walked));
    };
    let mut disk = cache::DirCache::open(Path::new(dir), name, &model, &mut memory);
    let loaded = disk.loaded();
    let index = Index::build_with(files, cfg.index.clone(), Some((model, &mut disk)));
    let Some(vectors) = index.vectors() else { return Ok((index, walked)) };
    match disk.save(vectors) {
        Ok(wrote) => log(&format!("vector cache {dir}: {loaded} vectors read, file {}", if wrote { "rewritten" } else { "unchanged" })),
        // Not an error for retrieval: the vectors are in memory; the next build recomputes them.
        Err(e) => log(&format!("{e}; vectors will be recomputed at the next build")),
    }
    Ok((index, walked))
}

/// Runs one retrieval against the instance's cached index, building it first
/// if this is the first call or the config changed.
pub fn retrieve(config_json: &str, index_name: &str, query: &str, k: u32, filters: &[(String, String)]) -> Result<Vec<Hit>, String> {
    let mut prefix: Option<&str> = None;
    for (field, value) in filters {
        match field.as_str() {
            "source_prefix" => prefix = Some(value.as_str()),
            other => return Err(format!("unknown filter {other:?}; retriever-local supports \"source_prefix\"")),
        }
    }
    let mut loaded = LOADED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let cfg = Config::parse(config_json)?;
    if loaded.as_ref().is_none_or(|(key, _)| key != config_json) {
        *loaded = None;
        let started = std::time::Instant::now();
        let (index, walked) = build_from_config(&cfg, index_name)?;
        let s = index.stats();
        log(&format!(
            "indexed {} documents ({} passages, {} terms, {} KB) from {} in {} ms; {} files skipped",
            s.documents,
            s.passages,
            s.terms,
            s.text_bytes / 1024,
            cfg.root,
            started.elapsed().as_millis(),
            walked.skipped
        ));
        *loaded = Some((config_json.to_owned(), index));
    }
    let Some((_, index)) = loaded.as_ref() else { return Ok(Vec::new()) };
    let mut hits = index.search_filtered(query, k as usize, |source| prefix.is_none_or(|p| source.starts_with(p)));
    for h in &mut hits {
        h.passage = passage_text(h, cfg.max_passage_chars);
    }
    Ok(hits)
}

/// The passage as returned to the host: the heading path on the first line
/// (context for the model), then the text, cut to `max_chars` characters.
pub fn passage_text(hit: &Hit, max_chars: usize) -> String {
    let mut s = if hit.heading.is_empty() { hit.passage.clone() } else { format!("{}\n\n{}", hit.heading, hit.passage) };
    if let Some((cut, _)) = s.char_indices().nth(max_chars) {
        s.truncate(cut);
        s.push('…');
    }
    s
}

#[cfg(target_arch = "wasm32")]
fn log(message: &str) {
    use gatehouse_sdk::retriever::gatehouse::plugin::host_log;
    use gatehouse_sdk::retriever::gatehouse::plugin::types::LogLevel;
    host_log::log(LogLevel::Info, message);
}

#[cfg(not(target_arch = "wasm32"))]
fn log(_message: &str) {}

/// The component's export.
pub struct RetrieverLocal;

impl api::Guest for RetrieverLocal {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "retriever-local".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Retriever,
            description: "Local folder retriever: Markdown, text and HTML, BM25F over stemmed terms with heading sections; hybrid with dense vectors where an index names a model".into(),
        }
    }

    fn retrieve(request: api::RetrieveRequest) -> Result<Vec<api::Document>, String> {
        let hits = retrieve(&request.config_json, &request.index, &request.query, request.k, &request.filters)?;
        Ok(hits.into_iter().map(|h| api::Document { source: h.source, passage: h.passage, score: h.score }).collect())
    }
}

gatehouse_sdk::export_retriever!(RetrieverLocal);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retrieve_builds_once_per_config_and_filters() {
        let dir = std::env::temp_dir().join(format!("retriever-local-lib-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ops")).expect("mkdir");
        std::fs::write(dir.join("ops/failover.md"), "# Failover\n\nThe chain tries the next model on timeouts.").expect("write");
        std::fs::write(dir.join("limits.txt"), "Limits\n======\n\nSixty requests per minute per key; the chain is not counted.")
            .expect("write");
        std::fs::write(dir.join("junk.md"), b"\xff\xfe binary").expect("write");
        let cfg = serde_json::json!({"root": dir.to_string_lossy()}).to_string();
        assert!(retrieve(&cfg, "kb", "", 0, &[]).expect("warm-up").is_empty());
        let hits = retrieve(&cfg, "kb", "what happens on a timeout in the chain", 5, &[]).expect("retrieve");
        assert_eq!(hits[0].source, "ops/failover.md");
        assert_eq!(hits[0].passage, "Failover\n\nThe chain tries the next model on timeouts.");
        assert_eq!(hits.len(), 2);
        // The cached index serves even after the folder changes (the host replaces the instance).
        std::fs::remove_file(dir.join("limits.txt")).expect("rm");
        assert_eq!(retrieve(&cfg, "kb", "sixty requests", 5, &[]).expect("cached")[0].source, "limits.txt");
        let filtered = retrieve(&cfg, "kb", "chain", 5, &[("source_prefix".into(), "ops/".into())]).expect("filtered");
        assert_eq!(filtered.iter().map(|h| h.source.as_str()).collect::<Vec<_>>(), ["ops/failover.md"]);
        assert!(retrieve(&cfg, "kb", "chain", 5, &[("lang".into(), "en".into())]).expect_err("filter").contains("lang"));
        // A different config rebuilds.
        let cfg2 = serde_json::json!({"root": dir.to_string_lossy(), "chunk_words": 50}).to_string();
        assert!(retrieve(&cfg2, "kb", "sixty requests", 5, &[]).expect("rebuilt").is_empty());
        std::fs::remove_dir_all(&dir).expect("cleanup");
        let missing = serde_json::json!({"root": dir.to_string_lossy(), "chunk_words": 51}).to_string();
        assert!(retrieve(&missing, "kb", "x", 5, &[]).expect_err("missing folder").contains("cannot read"));
    }

    #[test]
    fn the_shipped_example_knowledge_base_answers_questions_about_gatehouse() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/knowledge/gatehouse");
        let cfg = Config::parse(&serde_json::json!({"root": root.to_string_lossy()}).to_string()).expect("config");
        let (index, walked) = build_from_config(&cfg, "default").expect("build");
        assert!(index.stats().documents >= 12 && walked.skipped == 0, "{:?}", index.stats());
        for (question, page) in [
            ("what happens when a model times out?", "failover.md"),
            ("how do I verify a webhook signature", "webhooks.md"),
            ("can a request switch off prompt injection detection", "prompt-shield.html"),
            ("how many requests per minute may a key send", "limits-and-billing.md"),
            ("how do I make my own tenant policy", "tenant-policy.txt"),
        ] {
            let hits = index.search(question, 3);
            assert_eq!(hits.first().map(|h| h.source.as_str()), Some(page), "{question}: {hits:#?}");
        }
    }

    #[test]
    fn an_index_that_names_a_model_is_hybrid_and_keeps_its_vectors_in_the_cache_folder() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/knowledge/gatehouse");
        let cache = std::env::temp_dir().join(format!("retriever-local-vec-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&cache);
        std::fs::create_dir_all(&cache).expect("mkdir");
        let json = serde_json::json!({
            "root": root.to_string_lossy(),
            "dense_model": dense::SHIPPED_MODEL,
            "vector_cache": cache.to_string_lossy(),
        });
        let cfg = Config::parse(&json.to_string()).expect("config");
        let (index, _) = build_from_config(&cfg, "docs/default").expect("build");
        let file = cache.join("docs_default.vec");
        let written = std::fs::read(&file).expect("the cache file is written");
        let n = index.vectors().map(dense::Vectors::len).expect("a hybrid index");
        assert!(n > 0 && written.len() == 28 + n * (20 + dense::load(dense::SHIPPED_MODEL).expect("model").dims()));
        // A new instance (the same config) reads the file and leaves it as it is.
        let modified = std::fs::metadata(&file).and_then(|m| m.modified()).expect("mtime");
        let (again, _) = build_from_config(&cfg, "docs/default").expect("rebuild");
        assert_eq!(std::fs::metadata(&file).and_then(|m| m.modified()).expect("mtime"), modified);
        let q = "how many requests per minute may a key send";
        assert_eq!(index.search(q, 3), again.search(q, 3));
        std::fs::remove_dir_all(&cache).expect("cleanup");
        // A cache folder that does not exist (or is read-only) only costs the write.
        let cfg = Config::parse(&serde_json::json!({"root": root.to_string_lossy(), "dense_model": dense::SHIPPED_MODEL, "vector_cache": cache.to_string_lossy()}).to_string()).expect("config");
        assert!(build_from_config(&cfg, "default").expect("build without a cache").0.vectors().is_some());
        // A model that is not there is an error naming it.
        let cfg = Config::parse(&serde_json::json!({"root": root.to_string_lossy(), "dense_model": "/models/none.bin"}).to_string())
            .expect("config");
        let err = build_from_config(&cfg, "default").err().expect("a missing model is an error");
        assert!(err.contains("/models/none.bin"), "{err}");
    }

    #[test]
    fn passages_are_cut_on_a_char_boundary() {
        let hit = Hit { source: "a".into(), title: "t".into(), heading: "H".into(), passage: "é".repeat(10), score: 1.0 };
        assert_eq!(passage_text(&hit, 5), "H\n\néé…");
    }
}
