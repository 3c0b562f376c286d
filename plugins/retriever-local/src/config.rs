//! `config-json` of the retriever-local component: the host's `root` plus the
//! operator's `[indexes.<name>.config]`.
//!
//! | key                | default    | meaning                                                   |
//! |--------------------|------------|-----------------------------------------------------------|
//! | `root`             | (required) | guest path of the mounted folder, set by the host         |
//! | `chunk_words`      | 100 (300 with `dense_model`) | maximum words per passage (8 ..= 2000)  |
//! | `overlap_words`    | 30         | words repeated when a passage is cut mid-paragraph        |
//! | `max_file_bytes`   | 2097152    | larger files are skipped                                  |
//! | `max_files`        | 50000      | files read at most                                        |
//! | `max_total_bytes`  | 67108864   | reading stops after this many bytes                       |
//! | `title_weight`     | 3.0        | BM25F weight of the document title                        |
//! | `heading_weight`   | 2.0        | BM25F weight of the section headings                      |
//! | `document_weight`  | 0.5        | weight of the whole-page score added to each passage      |
//! | `proximity_weight` | 1.0        | bonus for query terms found near each other in a passage  |
//! | `max_passage_chars`| 2000       | a returned passage is cut to this many characters         |
//! | `dense_model`      | (none)     | hybrid retrieval: path of the model file inside the plugin (a folder the operator grants read-only); unset = lexical only, no model loaded |
//! | `dense_weight`     | 4.0        | hybrid: weight of the dense ranking; 0 = lexical only     |
//! | `rrf_k`            | 0          | hybrid fusion: RRF constant, 0 = linear score fusion      |
//! | `window_rerank`    | 1.5        | hybrid: weight of the re-ranking of the first 10 documents by their best 20-word window; 0 = none (about 1-2 ms less per query on long passages) |
//! | `window_words`     | 20         | hybrid: words of a re-ranking window (4 ..= 200)          |
//! | `vector_cache`     | (none)     | folder for the cached passage vectors (one file per knowledge base); read-only or missing = vectors are recomputed at each build |
//!
//! Unknown keys are ignored (the host may add its own); a known key with a
//! wrong type or out of range is an error naming the key.

use serde_json::{Map, Value};

use crate::index::Options;
use crate::walk::Limits;

/// Parsed configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Guest path of the knowledge-base folder.
    pub root: String,
    /// Index options.
    pub index: Options,
    /// Read limits.
    pub limits: Limits,
    /// Maximum characters of a returned passage.
    pub max_passage_chars: usize,
    /// Folder of the vector cache files, if any.
    pub vector_cache: Option<String>,
}

impl Config {
    /// Parses `config-json`.
    pub fn parse(json: &str) -> Result<Config, String> {
        let v: Value = serde_json::from_str(json).map_err(|e| format!("config-json is not valid JSON: {e}"))?;
        let m = v.as_object().ok_or("config-json must be a JSON object")?;
        let root = match m.get("root") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => return Err("config-json needs \"root\": the folder of the knowledge base".into()),
        };
        let dense_model = string(m, "dense_model")?;
        let d = match &dense_model {
            Some(model) => Options::hybrid(model),
            None => Options::default(),
        };
        let l = Limits::default();
        let index = Options {
            chunk_words: int(m, "chunk_words", d.chunk_words as u64, 8, 2000)? as usize,
            overlap_words: int(m, "overlap_words", d.overlap_words as u64, 0, 1000)? as usize,
            title_weight: num(m, "title_weight", d.title_weight)?,
            heading_weight: num(m, "heading_weight", d.heading_weight)?,
            document_weight: num(m, "document_weight", d.document_weight)?,
            proximity_weight: num(m, "proximity_weight", d.proximity_weight)?,
            dense_model,
            dense_weight: num(m, "dense_weight", d.dense_weight)?,
            rrf_k: num(m, "rrf_k", d.rrf_k)?,
            window_rerank: num(m, "window_rerank", d.window_rerank)?,
            window_words: int(m, "window_words", d.window_words as u64, 4, 200)? as usize,
            ..d
        };
        let limits = Limits {
            max_file_bytes: int(m, "max_file_bytes", l.max_file_bytes, 1, u64::MAX)?,
            max_files: int(m, "max_files", l.max_files as u64, 1, u32::MAX.into())? as usize,
            max_total_bytes: int(m, "max_total_bytes", l.max_total_bytes, 1, u64::MAX)?,
        };
        let max_passage_chars = int(m, "max_passage_chars", 2000, 100, 1_000_000)? as usize;
        let vector_cache = string(m, "vector_cache")?;
        Ok(Config { root, index, limits, max_passage_chars, vector_cache })
    }
}

fn int(m: &Map<String, Value>, key: &str, default: u64, min: u64, max: u64) -> Result<u64, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| format!("config key {key:?} must be an integer from {min} to {max}, got {v}")),
    }
}

fn string(m: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
        Some(v) => Err(format!("config key {key:?} must be a non-empty string (a path), got {v}")),
    }
}

fn num(m: &Map<String, Value>, key: &str, default: f32) -> Result<f32, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_f64()
            .filter(|n| (0.0..=100.0).contains(n))
            .map(|n| n as f32)
            .ok_or_else(|| format!("config key {key:?} must be a number from 0 to 100, got {v}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let c = Config::parse(r#"{"root": "/kb", "plugin": "retriever-local"}"#).expect("config");
        assert_eq!(c.root, "/kb");
        assert_eq!(c.index, Options::default());
        assert_eq!(c.limits, Limits::default());
        let c = Config::parse(r#"{"root": "/kb", "chunk_words": 80, "title_weight": 1.5, "max_files": 10}"#).expect("config");
        assert_eq!((c.index.chunk_words, c.index.title_weight, c.limits.max_files), (80, 1.5, 10));
        let c = Config::parse(r#"{"root": "/kb", "window_rerank": 0, "window_words": 30}"#).expect("config");
        assert_eq!((c.index.window_rerank, c.index.window_words), (0.0, 30));
        assert!(Config::parse(r#"{"root": "/kb", "window_words": 2}"#).expect_err("range").contains("window_words"));
    }

    #[test]
    fn errors_name_the_key() {
        assert!(Config::parse("{}").expect_err("no root").contains("root"));
        assert!(Config::parse("[1]").expect_err("not object").contains("object"));
        assert!(Config::parse("nope").expect_err("not json").contains("JSON"));
        assert!(Config::parse(r#"{"root": "/kb", "chunk_words": 3}"#).expect_err("range").contains("chunk_words"));
        assert!(Config::parse(r#"{"root": "/kb", "title_weight": "x"}"#).expect_err("type").contains("title_weight"));
        assert!(Config::parse(r#"{"root": "/kb", "dense_model": 3}"#).expect_err("type").contains("dense_model"));
        assert!(Config::parse(r#"{"root": "/kb", "vector_cache": ""}"#).expect_err("empty").contains("vector_cache"));
    }

    #[test]
    fn dense_retrieval_is_off_unless_an_index_names_a_model() {
        let c = Config::parse(r#"{"root": "/kb"}"#).expect("config");
        assert_eq!((c.index.dense_model, c.vector_cache), (None, None));
        let c = Config::parse(r#"{"root": "/kb", "dense_model": "/models/m.bin", "vector_cache": "/cache"}"#).expect("config");
        assert_eq!(c.index, Options::hybrid("/models/m.bin"));
        assert_eq!(c.vector_cache.as_deref(), Some("/cache"));
    }
}
