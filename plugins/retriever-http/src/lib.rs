//! `retriever-http`: a knowledge base served by a remote search backend,
//! reached only through the host's `outbound-http`, which lets the plugin
//! reach the hosts the operator granted it (`[plugins.settings.retriever-http]
//! allowed_outbound_hosts`) and nothing else.
//!
//! Two wire formats, chosen by `mode` in the index's config:
//!
//! - `gatehouse` (default), a small JSON contract any service can implement:
//!   `POST <url>` with `{"index", "query", "k", "filters": {field: value}}`,
//!   answered by `200 {"documents": [{"source", "text", "score"}]}`, best first.
//! - `elasticsearch` (also OpenSearch): `POST <url>/<es_index>/_search` with a
//!   `multi_match` query over `fields`; each hit's `_source[source_field]`
//!   (else `_id`) is the source, `_source[text_field]` the passage, `_score`
//!   the score.
//! - Hybrid (Elasticsearch 8.14 or later): with `knn_field` and `knn_model_id`
//!   the same `_search` also runs a kNN search over the dense-vector field
//!   `knn_field`, the query embedded by the cluster's own deployed model
//!   (`query_vector_builder.text_embedding`), so the plugin needs no model.
//!   `fusion = "rrf"` (default) combines the two with the `rrf` retriever
//!   (reciprocal rank fusion, `rank_window_size` = `knn_candidates`);
//!   `fusion = "sum"` sends the classic `query` + `knn` pair, whose scores the
//!   cluster adds. Filters apply to both sides.
//!
//! Credentials: an API key is never in this config. The operator names an
//! environment variable per header (`[plugins.settings.retriever-http]
//! outbound_header_env = { authorization = "ES_AUTH" }`) and the host adds
//! the header to every request this plugin sends; the plugin never sees it.
//!
//! The request building and response parsing are plain functions (sans-IO),
//! unit-tested natively; only [`Remote::retrieve`] does I/O.

use gatehouse_sdk::retriever::exports::gatehouse::plugin::retriever_api::{Document, Guest, RetrieveRequest};
use gatehouse_sdk::retriever::gatehouse::plugin::types::{Header, HttpRequest, PluginInfo, PluginKind};
use serde::Deserialize;
use serde_json::{Value, json};

/// Most characters of one passage handed back to the host.
const MAX_PASSAGE_CHARS: usize = 8_000;

/// The index's `config` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Base URL of the backend (the contract's endpoint, or the cluster's root).
    pub url: String,
    #[serde(default)]
    pub mode: Mode,
    /// Elasticsearch index (or alias, or pattern) to search.
    #[serde(default)]
    pub es_index: Option<String>,
    /// Fields the `multi_match` query searches, with optional boosts (`title^2`).
    #[serde(default = "default_fields")]
    pub fields: Vec<String>,
    /// `_source` field holding the passage text.
    #[serde(default = "default_text_field")]
    pub text_field: String,
    /// `_source` field holding the document's path; `_id` when absent.
    #[serde(default = "default_source_field")]
    pub source_field: String,
    /// Hybrid: the `dense_vector` field of the kNN side (with `knn_model_id`).
    #[serde(default)]
    pub knn_field: Option<String>,
    /// Hybrid: the id of the text-embedding model deployed in the cluster.
    #[serde(default)]
    pub knn_model_id: Option<String>,
    /// Hybrid: candidates per shard on the kNN side, and RRF's window.
    #[serde(default = "default_knn_candidates")]
    pub knn_candidates: u32,
    /// Hybrid: how the two rankings are combined.
    #[serde(default)]
    pub fusion: Fusion,
    /// Guest path of a mounted folder (set by the host when the index has one); unused here.
    #[serde(default)]
    pub root: Option<String>,
}

/// How a hybrid query combines the lexical and the kNN ranking.
#[derive(Debug, Default, Deserialize, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum Fusion {
    /// Reciprocal rank fusion (the `rrf` retriever).
    #[default]
    Rrf,
    /// The cluster adds the two scores (`query` + `knn`).
    Sum,
}

fn default_knn_candidates() -> u32 {
    50
}

#[derive(Debug, Default, Deserialize, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Gatehouse,
    Elasticsearch,
    Opensearch,
}

fn default_fields() -> Vec<String> {
    vec!["title^2".into(), "content".into()]
}

fn default_text_field() -> String {
    "content".into()
}

fn default_source_field() -> String {
    "path".into()
}

/// Parse and check the index's config.
pub fn config(json: &str) -> Result<Config, String> {
    let cfg: Config = serde_json::from_str(json).map_err(|e| format!("invalid retriever-http config: {e}"))?;
    if !(cfg.url.starts_with("http://") || cfg.url.starts_with("https://")) {
        return Err("`url` must be an http:// or https:// URL".into());
    }
    if cfg.mode != Mode::Gatehouse && cfg.es_index.as_deref().is_none_or(str::is_empty) {
        return Err("`es_index` is required in elasticsearch mode".into());
    }
    match (cfg.knn_field.as_deref(), cfg.knn_model_id.as_deref()) {
        (None, None) => {}
        (Some(f), Some(m)) if !f.is_empty() && !m.is_empty() => {
            if cfg.mode != Mode::Elasticsearch {
                return Err("a hybrid query (`knn_field`) needs mode = \"elasticsearch\"".into());
            }
            if !(1..=10_000).contains(&cfg.knn_candidates) {
                return Err("`knn_candidates` must be from 1 to 10000".into());
            }
        }
        _ => return Err("a hybrid query needs both `knn_field` and `knn_model_id`".into()),
    }
    Ok(cfg)
}

/// The HTTP request of one retrieval.
pub fn build_request(cfg: &Config, req: &RetrieveRequest) -> HttpRequest {
    let base = cfg.url.trim_end_matches('/');
    let (url, body) = match cfg.mode {
        Mode::Gatehouse => {
            let filters: serde_json::Map<String, Value> = req.filters.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
            (base.to_owned(), json!({"index": req.index, "query": req.query, "k": req.k, "filters": filters}))
        }
        Mode::Elasticsearch | Mode::Opensearch => {
            let es_index = cfg.es_index.as_deref().unwrap_or_default();
            let mut query = json!({"multi_match": {"query": req.query, "fields": cfg.fields}});
            let terms: Vec<Value> = req.filters.iter().map(|(k, v)| json!({"term": {k: v}})).collect();
            if !terms.is_empty() {
                query = json!({"bool": {"must": query, "filter": terms}});
            }
            let source = json!([cfg.text_field, cfg.source_field]);
            let body = match (&cfg.knn_field, &cfg.knn_model_id) {
                (Some(field), Some(model)) => {
                    let mut knn = json!({
                        "field": field,
                        "k": req.k.max(1),
                        "num_candidates": cfg.knn_candidates.max(req.k),
                        "query_vector_builder": {"text_embedding": {"model_id": model, "model_text": req.query}},
                    });
                    if !terms.is_empty() {
                        knn["filter"] = json!(terms);
                    }
                    match cfg.fusion {
                        Fusion::Sum => json!({"size": req.k, "query": query, "knn": knn, "_source": source}),
                        Fusion::Rrf => json!({
                            "size": req.k,
                            "retriever": {"rrf": {
                                "retrievers": [{"standard": {"query": query}}, {"knn": knn}],
                                "rank_window_size": cfg.knn_candidates.max(req.k),
                            }},
                            "_source": source,
                        }),
                    }
                }
                _ => json!({"size": req.k, "query": query, "_source": source}),
            };
            (format!("{base}/{es_index}/_search"), body)
        }
    };
    HttpRequest {
        method: "POST".into(),
        url,
        headers: vec![
            Header { name: "content-type".into(), value: "application/json".into() },
            Header { name: "accept".into(), value: "application/json".into() },
        ],
        body: body.to_string(),
    }
}

fn cut(s: &str) -> String {
    s.chars().take(MAX_PASSAGE_CHARS).collect()
}

/// The documents of a backend's answer, best first, at most `k`.
pub fn parse_response(cfg: &Config, status: u16, body: &str, k: u32) -> Result<Vec<Document>, String> {
    if !(200..300).contains(&status) {
        let snippet: String = body.chars().take(200).collect();
        return Err(format!("the search backend answered {status}: {snippet}"));
    }
    let v: Value = serde_json::from_str(body).map_err(|e| format!("the search backend's answer is not JSON: {e}"))?;
    let mut docs: Vec<Document> = match cfg.mode {
        Mode::Gatehouse => {
            let list = v.get("documents").and_then(Value::as_array).ok_or("the answer has no `documents` array")?;
            list.iter()
                .map(|d| {
                    let source = d.get("source").and_then(Value::as_str).ok_or("a document has no `source` string")?;
                    let text =
                        d.get("text").or_else(|| d.get("passage")).and_then(Value::as_str).ok_or("a document has no `text` string")?;
                    let score = d.get("score").and_then(Value::as_f64).unwrap_or(0.0);
                    Ok(Document { source: source.to_owned(), passage: cut(text), score: score as f32 })
                })
                .collect::<Result<_, &str>>()?
        }
        Mode::Elasticsearch | Mode::Opensearch => {
            let hits = v.pointer("/hits/hits").and_then(Value::as_array).ok_or("the answer has no `hits.hits` array")?;
            hits.iter()
                .enumerate()
                .filter_map(|(i, h)| {
                    let src = h.get("_source")?;
                    let text = src.get(&cfg.text_field).and_then(Value::as_str)?;
                    let source = src.get(&cfg.source_field).and_then(Value::as_str).or_else(|| h.get("_id").and_then(Value::as_str))?;
                    // Rank fusion may answer `_score: null` (older clusters put the
                    // rank in `_rank`): keep the cluster's order then.
                    let score = h.get("_score").and_then(Value::as_f64).unwrap_or(1.0 / (i as f64 + 1.0));
                    Some(Document { source: source.to_owned(), passage: cut(text), score: score as f32 })
                })
                .collect()
        }
    };
    docs.retain(|d| d.score.is_finite() && !d.passage.trim().is_empty());
    docs.sort_by(|a, b| b.score.total_cmp(&a.score));
    docs.truncate(k as usize);
    Ok(docs)
}

struct Remote;

impl Guest for Remote {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "retriever-http".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Retriever,
            description: "Remote search backend over granted outbound HTTP (Gatehouse JSON contract, Elasticsearch, OpenSearch)".into(),
        }
    }

    fn retrieve(request: RetrieveRequest) -> Result<Vec<Document>, String> {
        let cfg = config(&request.config_json)?;
        if request.k == 0 {
            // Warm-up: nothing to index locally, and no reason to touch the network.
            return Ok(Vec::new());
        }
        let http = build_request(&cfg, &request);
        let resp = gatehouse_sdk::retriever::gatehouse::plugin::outbound_http::send(&http)?;
        parse_response(&cfg, resp.status, &resp.body, request.k)
    }
}

gatehouse_sdk::export_retriever!(Remote);

#[cfg(test)]
mod tests {
    use super::*;

    fn req(k: u32) -> RetrieveRequest {
        RetrieveRequest {
            index: "docs".into(),
            query: "how do refunds work".into(),
            k,
            filters: vec![("lang".into(), "en".into())],
            config_json: String::new(),
        }
    }

    #[test]
    fn config_is_checked() {
        assert!(config(r#"{"url": "http://search:9200"}"#).is_ok());
        assert!(config(r#"{"url": "ftp://x"}"#).expect_err("refused").contains("http"));
        assert!(config(r#"{"url": "http://x", "mode": "elasticsearch"}"#).expect_err("refused").contains("es_index"));
        assert!(config(r#"{"url": "http://x", "nope": 1}"#).expect_err("refused").contains("nope"));
        assert!(config(r#"{"url": "http://x", "root": "/kb"}"#).is_ok(), "the host may add root");
    }

    #[test]
    fn gatehouse_contract_round_trip() {
        let cfg = config(r#"{"url": "http://kb.internal:8080/retrieve/"}"#).expect("cfg");
        let r = build_request(&cfg, &req(3));
        assert_eq!((r.method.as_str(), r.url.as_str()), ("POST", "http://kb.internal:8080/retrieve"));
        let body: Value = serde_json::from_str(&r.body).expect("json");
        assert_eq!(body, json!({"index": "docs", "query": "how do refunds work", "k": 3, "filters": {"lang": "en"}}));
        let answer = r#"{"documents": [
            {"source": "b.md", "text": "second", "score": 1.5},
            {"source": "a.md", "text": "first", "score": 2.5},
            {"source": "c.md", "passage": "third", "score": 0.5},
            {"source": "d.md", "text": "   ", "score": 9}]}"#;
        let docs = parse_response(&cfg, 200, answer, 2).expect("docs");
        let got: Vec<(&str, &str)> = docs.iter().map(|d| (d.source.as_str(), d.passage.as_str())).collect();
        assert_eq!(got, [("a.md", "first"), ("b.md", "second")]);
    }

    #[test]
    fn elasticsearch_query_and_hits() {
        let cfg = config(r#"{"url": "https://es:9200", "mode": "elasticsearch", "es_index": "kb-*", "text_field": "body"}"#).expect("cfg");
        let r = build_request(&cfg, &req(2));
        assert_eq!(r.url, "https://es:9200/kb-*/_search");
        let body: Value = serde_json::from_str(&r.body).expect("json");
        assert_eq!(body["size"], 2);
        assert_eq!(body["query"]["bool"]["must"]["multi_match"]["query"], "how do refunds work");
        assert_eq!(body["query"]["bool"]["filter"][0], json!({"term": {"lang": "en"}}));
        let answer = r#"{"hits": {"hits": [
            {"_id": "1", "_score": 3.0, "_source": {"body": "refunds take 5 days", "path": "billing/refunds.md"}},
            {"_id": "2", "_score": 1.0, "_source": {"body": "no path here"}},
            {"_id": "3", "_score": 2.0, "_source": {"title": "no body"}}]}}"#;
        let docs = parse_response(&cfg, 200, answer, 5).expect("docs");
        let got: Vec<(&str, f32)> = docs.iter().map(|d| (d.source.as_str(), d.score)).collect();
        assert_eq!(got, [("billing/refunds.md", 3.0), ("2", 1.0)]);
    }

    #[test]
    fn elasticsearch_hybrid_query_fuses_bm25_and_knn_with_the_clusters_model() {
        let cfg = config(
            r#"{"url": "https://es:9200", "mode": "elasticsearch", "es_index": "kb", "knn_field": "vec", "knn_model_id": "e5-small", "knn_candidates": 80}"#,
        )
        .expect("cfg");
        let body: Value = serde_json::from_str(&build_request(&cfg, &req(4)).body).expect("json");
        let rrf = &body["retriever"]["rrf"];
        assert_eq!(rrf["rank_window_size"], 80);
        assert_eq!(rrf["retrievers"][0]["standard"]["query"]["bool"]["must"]["multi_match"]["query"], "how do refunds work");
        let knn = &rrf["retrievers"][1]["knn"];
        assert_eq!((knn["field"].as_str(), knn["k"].as_u64(), knn["num_candidates"].as_u64()), (Some("vec"), Some(4), Some(80)));
        assert_eq!(knn["query_vector_builder"]["text_embedding"], json!({"model_id": "e5-small", "model_text": "how do refunds work"}));
        assert_eq!(knn["filter"][0], json!({"term": {"lang": "en"}}), "filters apply to the kNN side too");
        assert!(body.get("query").is_none() && body["size"] == 4);
        // Linear: the cluster adds the scores of `query` and `knn`.
        let cfg = config(
            r#"{"url": "https://es:9200", "mode": "elasticsearch", "es_index": "kb", "knn_field": "vec", "knn_model_id": "e5-small", "fusion": "sum"}"#,
        )
        .expect("cfg");
        let body: Value = serde_json::from_str(&build_request(&cfg, &req(4)).body).expect("json");
        assert_eq!((body["knn"]["field"].as_str(), body["knn"]["num_candidates"].as_u64()), (Some("vec"), Some(50)));
        assert!(body["query"]["bool"].is_object() && body.get("retriever").is_none());
        // An RRF answer without scores keeps the cluster's order.
        let answer = r#"{"hits": {"hits": [
            {"_id": "a", "_score": null, "_rank": 1, "_source": {"content": "first", "path": "a.md"}},
            {"_id": "b", "_score": null, "_rank": 2, "_source": {"content": "second", "path": "b.md"}}]}}"#;
        let docs = parse_response(&cfg, 200, answer, 4).expect("docs");
        assert_eq!(docs.iter().map(|d| d.source.as_str()).collect::<Vec<_>>(), ["a.md", "b.md"]);
    }

    #[test]
    fn hybrid_config_is_checked() {
        let base = r#""url": "http://es:9200", "es_index": "kb""#;
        let err = |extra: &str| config(&format!("{{{base}, {extra}}}")).expect_err(extra);
        assert!(err(r#""mode": "elasticsearch", "knn_field": "vec""#).contains("knn_model_id"));
        assert!(err(r#""mode": "opensearch", "knn_field": "vec", "knn_model_id": "m""#).contains("elasticsearch"));
        assert!(err(r#""mode": "elasticsearch", "knn_field": "vec", "knn_model_id": "m", "knn_candidates": 0"#).contains("knn_candidates"));
        assert!(
            err(r#""mode": "elasticsearch", "knn_field": "vec", "knn_model_id": "m", "fusion": "max""#).contains("unknown variant `max`")
        );
    }

    #[test]
    fn backend_errors_are_reported_not_hidden() {
        let cfg = config(r#"{"url": "http://x"}"#).expect("cfg");
        assert!(parse_response(&cfg, 503, "overloaded", 3).expect_err("an error").contains("503"));
        assert!(parse_response(&cfg, 200, "<html>", 3).expect_err("an error").contains("not JSON"));
        assert!(parse_response(&cfg, 200, r#"{"results": []}"#, 3).expect_err("an error").contains("documents"));
        assert!(parse_response(&cfg, 200, r#"{"documents": [{"text": "x"}]}"#, 3).expect_err("an error").contains("source"));
    }
}
