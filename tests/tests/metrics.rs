//! `GET /metrics` read by the Prometheus client's strict OpenMetrics parser
//! (`tests/python/parse_metrics.py`), and the counters moved by real traffic:
//! requests by route and status, latency histogram counts, failovers by
//! reason, plugin calls by plugin, upstream latency by model, rate-limit hits.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use gatehouse_tests::Server;
use gatehouse_tests::mock_upstream::MockUpstream;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

/// One scrape: sample `name{k="v",...}` → value, plus each family's type.
struct Scrape {
    families: BTreeMap<String, String>,
    samples: BTreeMap<String, f64>,
}

impl Scrape {
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples.get(&key(name, labels)).copied().unwrap_or(0.0)
    }
}

fn key(name: &str, labels: &[(&str, &str)]) -> String {
    let mut l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    l.sort();
    format!("{name}{{{}}}", l.join(","))
}

async fn scrape(s: &Server) -> Scrape {
    scrape_with(s, &s.admin_key).await
}

/// One scrape with `key` (an admin key or the scrape key).
async fn scrape_with(s: &Server, bearer: &str) -> Scrape {
    let r = s.client.get(s.url("/metrics")).bearer_auth(bearer).send().await.expect("send");
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().expect("ascii").starts_with("application/openmetrics-text"));
    let text = r.text().await.expect("text");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/parse_metrics.py");
    let mut child = tokio::process::Command::new("python3")
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs (and `pip install -r tests/python/requirements.txt`)");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(text.as_bytes()).await.expect("write");
    drop(stdin);
    let out = child.wait_with_output().await.expect("parser output");
    assert!(out.status.success(), "the OpenMetrics parser refused /metrics: {}\n{text}", String::from_utf8_lossy(&out.stderr));
    let parsed: Value = serde_json::from_slice(&out.stdout).expect("json");
    let families =
        parsed["families"].as_object().expect("families").iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned())).collect();
    let mut samples = BTreeMap::new();
    for s in parsed["samples"].as_array().expect("samples") {
        let labels: Vec<(&str, &str)> =
            s["labels"].as_object().expect("labels").iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap_or(""))).collect();
        samples.insert(key(s["name"].as_str().expect("name"), &labels), s["value"].as_f64().expect("value"));
    }
    Scrape { families, samples }
}

async fn chat(s: &Server, key: &str, models: Value) -> u16 {
    let body = json!({"index": "Zero-Knowledge", "models": models, "prompt": "hello there"});
    s.client.post(s.url("/chat/completions")).bearer_auth(key).json(&body).send().await.expect("send").status().as_u16()
}

#[tokio::test]
async fn metrics_parse_as_openmetrics_and_count_what_happened() {
    let mock = MockUpstream::start().await;
    let s = Server::builder()
        .plugin(gatehouse_tests::plugins::OPEN_POLICY, "open.wasm")
        .toml("[policies]\ndefault = \"open\"\n")
        .toml(&format!(
            "[providers.openai]\nplugin = \"provider-openai\"\nbase_url = \"{}\"\napi_key_env = \"MOCK_OPENAI_KEY\"\n\
             models = [\"openai/ok-b\", \"openai/ok-c\"]\n",
            mock.openai_base_url()
        ))
        .env("MOCK_OPENAI_KEY", "sk-upstream-openai-secret")
        .start();
    let (_, limited, _) = s.create_key(json!({"limits": {"perMinute": 2}})).await;
    let before = scrape(&s).await;
    // The limited key's three requests in one minute window.
    gatehouse_tests::windows::room_in_window(gatehouse_tests::windows::MINUTE, Duration::from_secs(20)).await;

    assert_eq!(chat(&s, &s.admin_key, json!(["openai/fail500-a", "openai/ok-b"])).await, 200);
    assert_eq!(chat(&s, &s.admin_key, json!(["openai/fail429-a", "openai/ok-b"])).await, 200);
    assert_eq!(chat(&s, &limited, json!(["openai/ok-c"])).await, 200);
    assert_eq!(chat(&s, &limited, json!(["openai/ok-c"])).await, 200);
    assert_eq!(chat(&s, &limited, json!(["openai/ok-c"])).await, 429);

    let after = scrape(&s).await;
    let delta = |name: &str, labels: &[(&str, &str)]| after.get(name, labels) - before.get(name, labels);
    let chat_route = ("route", "/chat/completions");

    for (family, kind) in [
        ("gatehouse_http_requests", "counter"),
        ("gatehouse_http_request_duration_seconds", "histogram"),
        ("gatehouse_failovers", "counter"),
        ("gatehouse_plugin_call_duration_seconds", "histogram"),
        ("gatehouse_rate_limit_hits", "counter"),
        ("gatehouse_upstream_latency_seconds", "histogram"),
        ("gatehouse_webhook_queue_depth", "gauge"),
        ("gatehouse_plugin_provider_sessions", "gauge"),
        ("gatehouse_store_commit_duration_seconds", "histogram"),
    ] {
        assert_eq!(after.families.get(family).map(String::as_str), Some(kind), "family {family}");
    }
    // Call times are by plugin name; the `info()` probe of a load is not a series of its own.
    assert!(!after.samples.keys().any(|k| k.contains("(loading)")), "no series for a plugin being loaded");
    // Every attempt's provider instance went back with its request (failed attempts too).
    assert!(after.samples.contains_key(&key("gatehouse_plugin_provider_sessions", &[])), "the gauge is exported");
    assert_eq!(after.get("gatehouse_plugin_provider_sessions", &[]), 0.0, "no provider session outlives its request");
    // While an attempt waits on its upstream, it holds one.
    let slow = tokio::spawn({
        let (client, url, key) = (s.client.clone(), s.url("/chat/completions"), s.admin_key.clone());
        async move {
            let body = json!({"index": "Zero-Knowledge", "model": "openai/slow-1500-a", "prompt": "hold on"});
            client.post(url).bearer_auth(key).json(&body).send().await.expect("send").status().as_u16()
        }
    });
    let mut held = 0.0;
    for _ in 0..100 {
        held = scrape(&s).await.get("gatehouse_plugin_provider_sessions", &[]);
        if held >= 1.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(held, 1.0, "the waiting attempt holds its instance");
    assert_eq!(slow.await.expect("join"), 200);
    assert_eq!(scrape(&s).await.get("gatehouse_plugin_provider_sessions", &[]), 0.0, "and gives it back");
    // Requests by route and status; the first scrape itself is counted too.
    assert_eq!(delta("gatehouse_http_requests_total", &[chat_route, ("status", "200")]), 4.0);
    assert_eq!(delta("gatehouse_http_requests_total", &[chat_route, ("status", "429")]), 1.0);
    assert_eq!(delta("gatehouse_http_requests_total", &[("route", "/metrics"), ("status", "200")]), 1.0);
    // The latency histogram saw every chat request, each in the +Inf bucket.
    assert_eq!(delta("gatehouse_http_request_duration_seconds_count", &[chat_route]), 5.0);
    assert_eq!(delta("gatehouse_http_request_duration_seconds_bucket", &[chat_route, ("le", "+Inf")]), 5.0);
    assert!(delta("gatehouse_http_request_duration_seconds_sum", &[chat_route]) > 0.0);
    // Each answered request's outcome was committed (several may share a commit).
    assert!(delta("gatehouse_store_commit_duration_seconds_count", &[]) >= 1.0, "commits are timed");
    assert!(delta("gatehouse_store_commit_duration_seconds_sum", &[]) > 0.0);
    // Failovers by reason.
    assert_eq!(delta("gatehouse_failovers_total", &[("reason", "server_error")]), 1.0);
    assert_eq!(delta("gatehouse_failovers_total", &[("reason", "rate_limit")]), 1.0);
    assert_eq!(delta("gatehouse_failovers_total", &[("reason", "timeout")]), 0.0);
    // Upstream latency of successful attempts, by model.
    assert_eq!(delta("gatehouse_upstream_latency_seconds_count", &[("model", "openai/ok-b")]), 2.0);
    assert_eq!(delta("gatehouse_upstream_latency_seconds_count", &[("model", "openai/ok-c")]), 2.0);
    // Plugin calls by plugin: the adapter for each of the 6 attempts, the policy for each of the 4 served chats.
    let adapter = delta("gatehouse_plugin_call_duration_seconds_count", &[("plugin", "provider-openai")]);
    assert!(adapter >= 6.0, "provider-openai calls: {adapter}");
    let policy = delta("gatehouse_plugin_call_duration_seconds_count", &[("plugin", "open")]);
    assert!(policy >= 4.0, "policy calls: {policy}");
    assert_eq!(delta("gatehouse_plugin_faults_total", &[("plugin", "provider-openai")]), 0.0);
    // One rejected request, on the per-minute window of the chat bucket set.
    assert_eq!(delta("gatehouse_rate_limit_hits_total", &[("bucket", "chat"), ("window", "per_minute")]), 1.0);
}

fn server_with_models(mock: &MockUpstream, extra: &str) -> Server {
    Server::builder()
        .plugin(gatehouse_tests::plugins::OPEN_POLICY, "open.wasm")
        .toml("[policies]\ndefault = \"open\"\n")
        .toml(extra)
        .toml(&format!(
            "[providers.openai]\nplugin = \"provider-openai\"\nbase_url = \"{}\"\napi_key_env = \"MOCK_OPENAI_KEY\"\n\
             models = [\"openai/ok-listed\"]\n",
            mock.openai_base_url()
        ))
        .env("MOCK_OPENAI_KEY", "sk-upstream-openai-secret")
        .env("TEST_METRICS_SCRAPE_KEY", SCRAPE_KEY)
        .start()
}

const SCRAPE_KEY: &str = "scrape-0123456789abcdefghijklmnopqrstuvwxyz";

#[tokio::test]
async fn model_labels_name_configured_models_only() {
    let mock = MockUpstream::start().await;
    let s = server_with_models(&mock, "");
    let (_, tenant, _) = s.create_key(json!({"name": "label flooder"})).await;
    assert_eq!(chat(&s, &tenant, json!(["openai/ok-listed"])).await, 200);
    for i in 0..5 {
        assert_eq!(chat(&s, &tenant, json!([format!("openai/ok-flood-{i}")])).await, 200);
    }
    for i in 0..2 {
        let body = json!({"index": "Zero-Knowledge", "stream": true, "model": format!("openai/ok-flood-stream-{i}"), "prompt": "hi"});
        let r = s.client.post(s.url("/chat/completions")).bearer_auth(&tenant).json(&body).send().await.expect("send");
        assert_eq!(r.status(), 200);
        r.text().await.expect("stream");
    }
    let after = scrape(&s).await;
    assert_eq!(after.get("gatehouse_upstream_latency_seconds_count", &[("model", "openai/ok-listed")]), 1.0);
    assert_eq!(after.get("gatehouse_upstream_latency_seconds_count", &[("model", "other")]), 5.0);
    assert_eq!(after.get("gatehouse_time_to_first_token_seconds_count", &[("model", "other")]), 2.0);
    let flooded: Vec<&String> = after.samples.keys().filter(|k| k.contains("flood")).collect();
    assert!(flooded.is_empty(), "a name no config lists became a label: {flooded:?}");
}

#[tokio::test]
async fn metrics_are_served_to_admin_keys_and_the_scrape_key_only() {
    let mock = MockUpstream::start().await;
    let s = server_with_models(&mock, "[metrics]\nscrape_key_env = \"TEST_METRICS_SCRAPE_KEY\"\n");
    let (_, tenant, _) = s.create_key(json!({"name": "tenant"})).await;
    let get = |path: &str, key: Option<&str>| {
        let r = s.client.get(s.url(path));
        let r = match key {
            Some(k) => r.bearer_auth(k),
            None => r,
        };
        r.send()
    };
    let r = get("/metrics", Some(&tenant)).await.expect("send");
    assert_eq!(r.status(), 403, "a tenant's key reads /metrics");
    let v: Value = r.json().await.expect("json");
    assert!(v["error"]["message"].as_str().expect("message").contains("scrape key"), "{v}");
    // The scrape key and an admin key read it (and the exposition parses).
    let scraped = scrape_with(&s, SCRAPE_KEY).await;
    assert!(scraped.families.contains_key("gatehouse_http_requests"));
    scrape(&s).await;
    // The scrape key opens nothing else; a near miss is a wrong key.
    assert_eq!(get("/api/models", Some(SCRAPE_KEY)).await.expect("send").status(), 401);
    assert_eq!(get("/metrics", Some(&format!("{SCRAPE_KEY}x"))).await.expect("send").status(), 401);
    assert_eq!(get("/metrics", None).await.expect("send").status(), 401);
}
