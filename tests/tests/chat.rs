//! The chat path through the real server and real provider plugins, against
//! the mock upstream: envelope, failover triggers, 429 vs 502, streaming
//! frames, idempotency, billing, limits, receipts, the OpenAI variant.

use std::time::Duration;

use gatehouse_tests::mock_upstream::MockUpstream;
use gatehouse_tests::sse::{self, Frame};
use gatehouse_tests::windows;
use gatehouse_tests::{Server, ServerBuilder};
use reqwest::Method;
use serde_json::{Value, json};

fn providers(mock: &MockUpstream) -> String {
    format!(
        "[providers.openai]\nplugin = \"provider-openai\"\nbase_url = \"{}\"\napi_key_env = \"MOCK_OPENAI_KEY\"\nmodels = [\"openai/ok-a\"]\n\
         [providers.anthropic]\nplugin = \"provider-anthropic\"\nbase_url = \"{}\"\napi_key_env = \"MOCK_ANTHROPIC_KEY\"\n\
         [providers.echo]\nplugin = \"provider-echo\"\nbase_url = \"echo://local\"\nconfidential = true\nmodels = [\"echo/default\"]\n",
        mock.openai_base_url(),
        mock.base_url()
    )
}

/// A server whose default policy is the `open` test policy (no detectors), so
/// these tests exercise the chain alone; the security pipeline has its own tests.
fn builder(mock: &MockUpstream) -> ServerBuilder {
    Server::builder()
        .plugin(gatehouse_tests::plugins::OPEN_POLICY, "open.wasm")
        .toml("[policies]\ndefault = \"open\"\n")
        .toml(&providers(mock))
        .env("MOCK_OPENAI_KEY", "sk-upstream-openai-secret")
        .env("MOCK_ANTHROPIC_KEY", "sk-ant-upstream-secret")
}

async fn chat(s: &Server, body: Value) -> (u16, reqwest::header::HeaderMap, Value) {
    let r = s.client.post(s.url("/chat/completions")).bearer_auth(&s.admin_key).json(&body).send().await.expect("send");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.json().await.expect("json"))
}

async fn stream(s: &Server, body: Value) -> (u16, String) {
    let r = s.client.post(s.url("/chat/completions")).bearer_auth(&s.admin_key).json(&body).send().await.expect("send");
    let status = r.status().as_u16();
    (status, r.text().await.expect("body"))
}

async fn events(s: &Server, kind: &str) -> Vec<Value> {
    let v: Value =
        s.admin(Method::GET, &format!("/api/admin/events?type={kind}")).send().await.expect("events").json().await.expect("json");
    v["data"].as_array().cloned().unwrap_or_default().into_iter().map(|e| e["event"].clone()).collect()
}

/// Opens a stream and reads it up to its first `chunk` frame: the rest of the
/// body, and what was read.
async fn stream_to_first_chunk(
    s: &Server,
    key: &str,
    prompt: &str,
    model: &str,
) -> (impl futures::Stream<Item = reqwest::Result<axum::body::Bytes>> + Unpin, String) {
    use futures::StreamExt;
    let r = s
        .client
        .post(s.url("/chat/completions"))
        .bearer_auth(key)
        .json(&json!({"index": "Zero-Knowledge", "stream": true, "prompt": prompt, "model": model}))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 200);
    let mut body = r.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("\"type\":\"chunk\"") {
        let chunk = body.next().await.expect("a frame").expect("bytes");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    (body, seen)
}

fn req(models: Value) -> Value {
    json!({"index": "Zero-Knowledge", "models": models, "messages": [{"role": "user", "content": "hello there"}]})
}

#[tokio::test]
async fn the_envelope_has_every_field_of_the_spec() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    let (st, h, v) =
        chat(&s, json!({"index": "Zero-Knowledge", "model": "openai/ok-a", "prompt": "hello there", "conversation_id": "conv-1"})).await;
    assert_eq!(st, 200, "{v}");
    assert!(h.contains_key("x-ratelimit-limit") && h.contains_key("x-ratelimit-remaining") && h.contains_key("x-ratelimit-reset"));
    assert_eq!(v["success"], true);
    assert!(v["id"].as_str().expect("id").starts_with("req-"));
    assert_eq!(v["object"], "chat.completion");
    assert!(v["created"].as_i64().expect("created") > 1_700_000_000);
    assert_eq!(v["model"], "openai/ok-a");
    assert_eq!(v["choices"][0]["index"], 0);
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["choices"][0]["message"]["content"], "mock answer to: hello there");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    for k in ["prompt_tokens", "completion_tokens", "total_tokens", "input_tokens", "output_tokens"] {
        assert!(v["usage"][k].is_u64(), "usage.{k}");
    }
    let m = &v["metadata"];
    assert_eq!(m["conversation_id"], "conv-1");
    assert_eq!(m["index_used"], "Zero-Knowledge");
    assert_eq!(m["smltp_policy_used"], "open");
    assert_eq!(m["smltp_policy_source"], "default");
    assert!(m["smltp_policy_hash"].as_str().is_some_and(|h| h.len() == 64));
    assert!(m["prompt_shield_policy"].is_object());
    assert_eq!(m["served_model"], "openai/ok-a");
    assert_eq!(m["requested_model"], "openai/ok-a");
    assert!(m.get("failover").is_none(), "single-model chain: no failover object");
    assert!(m["smltp"]["bundle_id"].is_string() && m["smltp"]["receipt_url"].is_string());
    assert_eq!(m["rag_enabled"], false);
    assert_eq!(m["documents_retrieved"], 0);
    assert_eq!(m["sources"], json!([]));
    // The provider key went upstream; the gateway key did not.
    let r = mock.last_request().expect("upstream request");
    assert_eq!(r.header("authorization"), Some("Bearer sk-upstream-openai-secret"));
    assert!(!r.body.contains(&s.admin_key));
    // A generated conversation id when none is sent.
    let (_, _, v) = chat(&s, json!({"index": "Zero-Knowledge", "model": "anthropic/ok-b", "prompt": "hi"})).await;
    assert!(v["metadata"]["conversation_id"].as_str().is_some_and(|c| !c.is_empty()));
    assert_eq!(v["choices"][0]["message"]["content"], "mock answer to: hi");
    assert_eq!(mock.last_request().expect("req").header("x-api-key"), Some("sk-ant-upstream-secret"));
}

#[tokio::test]
async fn echo_answers_offline() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    let (st, _, v) = chat(&s, json!({"index": "Zero-Knowledge", "model": "echo/default", "prompt": "ping"})).await;
    assert_eq!(st, 200, "{v}");
    assert!(v["choices"][0]["message"]["content"].as_str().expect("text").contains("ping"));
}

#[tokio::test]
async fn failover_on_server_error_reports_attempts_and_fires_the_event() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    let (st, _, v) = chat(&s, req(json!(["openai/fail500-a", "anthropic/ok-b"]))).await;
    assert_eq!(st, 200, "{v}");
    let m = &v["metadata"];
    assert_eq!(m["served_model"], "anthropic/ok-b");
    assert_eq!(m["requested_model"], "openai/fail500-a");
    assert_eq!(m["failover"]["occurred"], true);
    let attempts = m["failover"]["attempts"].as_array().expect("attempts");
    assert_eq!(attempts[0]["model"], "openai/fail500-a");
    assert_eq!(attempts[0]["status"], "failed");
    assert_eq!(attempts[0]["reason"], "server_error");
    assert!(attempts[0]["latency_ms"].is_u64());
    let ev = events(&s, "api:model_failover").await;
    assert_eq!(ev.len(), 1, "{ev:?}");
    let d = &ev[0]["data"];
    assert_eq!(d["failedModel"], "openai/fail500-a");
    assert_eq!(d["reason"], "server_error");
    assert_eq!(d["nextModel"], "anthropic/ok-b");
    assert!(d["latencyMs"].is_u64() && d["userId"].is_string() && d["apiKeyId"].is_string());
    assert!(ev[0]["id"].as_str().expect("id").starts_with("evt_"));
}

#[tokio::test]
async fn exhausted_chains_are_429_only_when_every_failure_was_a_rate_limit() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    let (st, _, v) = chat(&s, req(json!(["openai/fail429-a", "anthropic/fail429-b"]))).await;
    assert_eq!(st, 429, "{v}");
    assert_eq!(v["error"], "All model attempts failed");
    assert!(v["request_id"].as_str().expect("rid").starts_with("req-"));
    assert_eq!(v["attempts"].as_array().expect("attempts").len(), 2);
    assert!(v["attempts"].as_array().expect("a").iter().all(|a| a["reason"] == "rate_limit"));
    let (st, _, v) = chat(&s, req(json!(["openai/fail429-c", "openai/fail503-d"]))).await;
    assert_eq!(st, 502, "{v}");
    assert_eq!(v["attempts"][1]["reason"], "server_error");
    let (st, _, v) = chat(&s, req(json!(["openai/malformed-e"]))).await;
    assert_eq!(st, 502, "{v}");
    assert_eq!(v["attempts"][0]["reason"], "server_error");
}

#[tokio::test]
async fn a_trigger_not_in_on_ends_the_chain() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    let (st, _, v) = chat(&s, req(json!(["openai/fail400-a", "openai/ok-b"]))).await;
    assert_eq!(st, 502, "{v}");
    assert_eq!(v["attempts"].as_array().expect("a").len(), 1);
    assert_eq!(mock.count_for("ok-b"), 0, "the chain must stop at a client error by default");
    let mut body = req(json!(["openai/fail400-c", "openai/ok-d"]));
    body["redundancy"] = json!({"on": ["client_error"]});
    let (st, _, v) = chat(&s, body).await;
    assert_eq!(st, 200, "{v}");
    let mut body = req(json!(["openai/fail500-e", "openai/ok-f"]));
    body["redundancy"] = json!({"on": ["timeout"]});
    let (st, _, _) = chat(&s, body).await;
    assert_eq!(st, 502);
    assert_eq!(mock.count_for("ok-f"), 0);
}

#[tokio::test]
async fn a_slow_model_times_out_and_the_next_one_answers() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    let body = req(json!([{"model": "openai/slow-3000-a", "timeout_ms": 300}, "anthropic/ok-b"]));
    let started = std::time::Instant::now();
    let (st, _, v) = chat(&s, body).await;
    assert_eq!(st, 200, "{v}");
    assert!(started.elapsed() < std::time::Duration::from_millis(2500));
    assert_eq!(v["metadata"]["failover"]["attempts"][0]["reason"], "timeout");
    let mut body = req(json!(["openai/hang-c", "anthropic/ok-d"]));
    body["redundancy"] = json!({"timeout_ms": 300});
    let (st, _, v) = chat(&s, body).await;
    assert_eq!(st, 200, "{v}");
}

#[tokio::test]
async fn the_stream_has_the_exact_frame_sequence() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    for model in ["openai/ok-a", "anthropic/ok-b", "echo/default"] {
        let (st, body) = stream(&s, json!({"index": "Zero-Knowledge", "model": model, "prompt": "one two three", "stream": true})).await;
        assert_eq!(st, 200, "{model}: {body}");
        let f = sse::frames(&body);
        let kinds: Vec<&str> = f.iter().map(Frame::kind).collect();
        assert_eq!(kinds[0], "metadata", "{model}: {kinds:?}");
        assert_eq!(kinds[kinds.len() - 2], "usage", "{model}: {kinds:?}");
        assert_eq!(kinds[kinds.len() - 1], "[DONE]");
        assert!(kinds[1..kinds.len() - 2].iter().all(|k| *k == "chunk"), "{model}: {kinds:?}");
        let meta = &f[0].json()["data"];
        assert_eq!(meta["model"], model);
        assert_eq!(meta["metadata"]["served_model"], model);
        assert!(meta["id"].as_str().expect("id").starts_with("req-"));
        let first_chunk = &f[1].json()["data"];
        assert_eq!(first_chunk["object"], "chat.completion.chunk");
        assert!(first_chunk["choices"][0]["delta"].get("content").is_some());
        let text = sse::text(&f);
        assert!(text.contains("one two three"), "{model}: {text}");
        let usage = &f[f.len() - 2].json()["data"]["usage"];
        assert!(usage["completion_tokens"].as_u64().expect("tokens") > 0);
        assert_eq!(usage["total_tokens"], usage["prompt_tokens"].as_u64().unwrap_or(0) + usage["completion_tokens"].as_u64().unwrap_or(0));
    }
}

#[tokio::test]
async fn before_the_first_token_a_stream_fails_over() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    let body = json!({"index": "Zero-Knowledge", "stream": true, "prompt": "hi",
        "models": [{"model": "openai/slowfirst-3000-a", "first_token_timeout_ms": 300}, "anthropic/fail500-b", "openai/ok-c"]});
    let (st, text) = stream(&s, body).await;
    assert_eq!(st, 200, "{text}");
    let f = sse::frames(&text);
    let meta = &f[0].json()["data"]["metadata"];
    assert_eq!(meta["served_model"], "openai/ok-c");
    let attempts = meta["failover"]["attempts"].as_array().expect("attempts");
    assert_eq!(attempts[0]["reason"], "timeout");
    assert_eq!(attempts[1]["reason"], "server_error");
    assert_eq!(events(&s, "api:model_failover").await.len(), 2);
}

#[tokio::test]
async fn an_exhausted_stream_answers_json_before_any_byte() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    let r = s
        .client
        .post(s.url("/chat/completions"))
        .bearer_auth(&s.admin_key)
        .json(&json!({"index": "Zero-Knowledge", "stream": true, "prompt": "hi", "models": ["openai/fail429-a"]}))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 429);
    assert!(r.headers()["content-type"].to_str().expect("ct").starts_with("application/json"));
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["error"], "All model attempts failed");
}

#[tokio::test]
async fn after_the_first_token_an_interruption_is_an_error_frame_without_failover() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    for (model, code) in [("openai/drop-a", "upstream_error"), ("anthropic/streamerror-b", "upstream_error")] {
        let body = json!({"index": "Zero-Knowledge", "stream": true, "prompt": "one two three four five six",
            "models": [model, "openai/ok-never"]});
        let (st, text) = stream(&s, body).await;
        assert_eq!(st, 200);
        let f = sse::frames(&text);
        let kinds: Vec<&str> = f.iter().map(Frame::kind).collect();
        let err = kinds.iter().position(|k| *k == "error").unwrap_or_else(|| panic!("{model}: no error frame: {kinds:?}"));
        assert_eq!(kinds[err + 1], "[DONE]", "{kinds:?}");
        assert_eq!(err + 2, kinds.len(), "nothing after [DONE]");
        assert!(kinds[..err].contains(&"chunk"));
        assert!(!kinds[err..].contains(&"chunk"), "no chunk after the error frame");
        let e = &f[err].json()["data"];
        assert_eq!(e["code"], code);
        assert!(e["request_id"].as_str().expect("rid").starts_with("req-"));
        assert!(e["message"].is_string());
    }
    assert_eq!(mock.count_for("ok-never"), 0, "no failover after the first token");
    // Silence after the first token longer than timeout_ms ends the stream with a timeout frame.
    let body = json!({"index": "Zero-Knowledge", "stream": true, "prompt": "a b c d",
        "models": [{"model": "openai/stall-3000-c", "timeout_ms": 300}]});
    let (_, text) = stream(&s, body).await;
    let f = sse::frames(&text);
    let e = f.iter().find(|x| x.kind() == "error").expect("error frame");
    assert_eq!(e.json()["data"]["code"], "timeout");
}

#[tokio::test]
async fn idempotent_requests_replay_and_are_billed_once() {
    let mock = MockUpstream::start().await;
    let mut s = builder(&mock).start();
    let (_, key, key_id) = s.create_key(json!({"name": "idem"})).await;
    let send = |s: &Server, idem: &str, body: Value| {
        s.client.post(s.url("/chat/completions")).bearer_auth(&key).header("Idempotency-Key", idem).json(&body).send()
    };
    let body = json!({"index": "Zero-Knowledge", "model": "openai/ok-a", "prompt": "once"});
    let first = send(&s, "k-1", body.clone()).await.expect("send");
    assert_eq!(first.status(), 200);
    let first: Value = first.json().await.expect("json");
    let again = send(&s, "k-1", json!({"prompt": "once", "model": "openai/ok-a", "index": "Zero-Knowledge"})).await.expect("send");
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers().get("idempotent-replayed").map(|v| v.to_str().unwrap_or("")), Some("true"));
    let again: Value = again.json().await.expect("json");
    assert_eq!(first, again, "replay returns the original body");
    assert_eq!(mock.count_for("ok-a"), 1, "the upstream was called once");
    // A different body with the same key.
    let other = send(&s, "k-1", json!({"index": "Zero-Knowledge", "model": "openai/ok-a", "prompt": "twice"})).await.expect("send");
    assert_eq!(other.status(), 422);
    let v: Value = other.json().await.expect("json");
    assert_eq!(v["error"], "Idempotency key reuse");
    // Validation errors are stored too.
    let bad = json!({"model": "openai/ok-a", "prompt": "x"});
    assert_eq!(send(&s, "k-2", bad.clone()).await.expect("send").status(), 400);
    let replay = send(&s, "k-2", bad).await.expect("send");
    assert_eq!(replay.status(), 400);
    assert!(replay.headers().contains_key("idempotent-replayed"));
    // After a restart.
    s.kill9();
    s.restart();
    let after = send(&s, "k-1", body.clone()).await.expect("send");
    assert_eq!(after.status(), 200);
    let after: Value = after.json().await.expect("json");
    assert_eq!(after, first);
    assert_eq!(mock.count_for("ok-a"), 1);
    // Billed once.
    let usage: Value = s.admin(Method::GET, "/api/admin/usage").send().await.expect("usage").json().await.expect("json");
    let mine = usage["data"]["keys"].as_array().expect("keys").iter().find(|k| k["id"] == key_id.as_str()).cloned().expect("key usage");
    assert_eq!(mine["requests"], 1, "{usage}");
}

#[tokio::test]
async fn a_concurrent_duplicate_waits_for_the_first() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    let body = json!({"index": "Zero-Knowledge", "model": "openai/slow-800-a", "prompt": "slow"});
    let call = || s.client.post(s.url("/chat/completions")).bearer_auth(&s.admin_key).header("Idempotency-Key", "same").json(&body).send();
    let (a, b) = tokio::join!(call(), call());
    let (a, b) = (a.expect("a"), b.expect("b"));
    assert_eq!(a.status(), 200);
    assert_eq!(b.status(), 200);
    let (a, b): (Value, Value) = (a.json().await.expect("a"), b.json().await.expect("b"));
    assert_eq!(a, b);
    assert_eq!(mock.count_for("slow-800-a"), 1);
}

#[tokio::test]
async fn idempotency_records_past_their_ttl_are_deleted_from_the_data_file() {
    use gatehouse_store::Store;
    let mock = MockUpstream::start().await;
    let mut s = builder(&mock).toml("[chat]\nidempotency_ttl_secs = 1\n").start();
    let (_, plain, key_id) = s.create_key(json!({})).await;
    let body = json!({"index": "Zero-Knowledge", "model": "openai/ok-a", "prompt": "kept for a second"});
    for idem in ["one", "two"] {
        let r = s.client.post(s.url("/chat/completions")).bearer_auth(&plain).header("Idempotency-Key", idem).json(&body).send().await;
        assert_eq!(r.expect("send").status(), 200);
    }
    // The TTL is 1 s and the sweep reads a page every 2 s.
    tokio::time::sleep(std::time::Duration::from_millis(4500)).await;
    let metrics = s.admin(Method::GET, "/metrics").send().await.expect("metrics").text().await.expect("text");
    assert!(metrics.contains("gatehouse_retention_deleted_total{table=\"idempotency\"} 2"), "{metrics}");
    assert!(s.terminate(), "clean shutdown");
    let store = gatehouse_store::redb::RedbStore::open(&s.data_dir, true).expect("open the data file");
    for idem in ["one", "two"] {
        assert_eq!(store.idempotency_get(&format!("{key_id}/{idem}")).await.expect("read"), None, "{idem} is still stored");
    }
}

#[tokio::test]
async fn user_id_bills_another_user_for_admins_only() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    let (user, plain, _) = s.create_key(json!({})).await;
    let body = json!({"index": "Zero-Knowledge", "model": "openai/ok-a", "prompt": "bill", "user_id": user});
    let (st, _, v) = chat(&s, body.clone()).await;
    assert_eq!(st, 200, "{v}");
    let usage: Value = s.admin(Method::GET, "/api/admin/usage").send().await.expect("usage").json().await.expect("json");
    let row = usage["data"]["users"].as_array().expect("users").iter().find(|u| u["id"] == user.as_str()).cloned().expect("billed user");
    assert_eq!(row["requests"], 1);
    assert!(row["totalTokens"].as_u64().expect("tokens") > 0);
    let r = s.client.post(s.url("/chat/completions")).bearer_auth(&plain).json(&body).send().await.expect("send");
    assert_eq!(r.status(), 403);
}

#[tokio::test]
async fn the_rate_limit_is_429_with_reset_time_and_one_event() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).toml("[limits.chat]\nper_minute = 2\nper_hour = 100\nper_day = 100\nper_month = 100\n").start();
    let body = json!({"index": "Zero-Knowledge", "model": "openai/ok-a", "prompt": "x"});
    // All four requests in one minute window.
    windows::room_in_window(windows::MINUTE, Duration::from_secs(20)).await;
    for i in 0..2 {
        let (st, h, _) = chat(&s, body.clone()).await;
        assert_eq!(st, 200);
        assert_eq!(h["x-ratelimit-remaining"].to_str().expect("h"), (1 - i).to_string());
    }
    for _ in 0..2 {
        let (st, h, v) = chat(&s, body.clone()).await;
        assert_eq!(st, 429);
        assert_eq!(v["error"], "Rate limit exceeded");
        assert!(chrono::DateTime::parse_from_rfc3339(v["reset_time"].as_str().expect("reset_time")).is_ok());
        let retry: u64 = h["retry-after"].to_str().expect("h").parse().expect("int");
        assert!((1..=60).contains(&retry));
    }
    let ev = events(&s, "api:limit_reached").await;
    assert_eq!(ev.len(), 1, "once per key, limit and window");
    assert_eq!(ev[0]["data"]["limit"], "per_minute");
}

#[tokio::test]
async fn daily_quota_counts_survive_a_restart() {
    let mock = MockUpstream::start().await;
    let mut s = builder(&mock).toml("[limits.chat]\nper_minute = 100\nper_hour = 100\nper_day = 2\nper_month = 100\n").start();
    let body = json!({"index": "Zero-Knowledge", "model": "openai/ok-a", "prompt": "x"});
    // The requests before and after the restart in one UTC day.
    windows::room_in_window(windows::DAY, Duration::from_secs(60)).await;
    for _ in 0..2 {
        assert_eq!(chat(&s, body.clone()).await.0, 200);
    }
    assert!(s.terminate());
    s.restart();
    assert_eq!(chat(&s, body).await.0, 429);
}

#[tokio::test]
async fn models_in_cooldown_are_skipped() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).toml("[upstream]\nbreaker_failures = 2\nbreaker_cooldown_ms = 60000\n").start();
    for _ in 0..2 {
        chat(&s, req(json!(["openai/fail500-a"]))).await;
    }
    let (st, _, v) = chat(&s, req(json!(["openai/fail500-a", "anthropic/ok-b"]))).await;
    assert_eq!(st, 200, "{v}");
    let a = &v["metadata"]["failover"]["attempts"][0];
    assert_eq!(a["status"], "skipped");
    assert_eq!(a["reason"], "cooldown");
    assert_eq!(mock.count_for("fail500-a"), 2, "the cooling model was not called");
}

/// The verification the README documents, written out independently of the
/// host's code: fold a batch path to its root, check the root, then the
/// signature over the root (or, signed alone, over the canonical JSON).
fn verify_documented(key: &ed25519_dalek::VerifyingKey, r: &Value) -> bool {
    use base64::Engine as _;
    use ed25519_dalek::Verifier;
    use sha2::{Digest, Sha256};
    let b64 = base64::engine::general_purpose::STANDARD;
    let Ok(sig) = b64.decode(r["signature"].as_str().unwrap_or_default()) else { return false };
    let Ok(sig) = ed25519_dalek::Signature::from_slice(&sig) else { return false };
    let canonical = serde_json::to_vec(&r["receipt"]).expect("canonical: serde_json sorts keys");
    let msg = match r.get("batch") {
        None => canonical,
        Some(batch) => {
            let mut h = Sha256::digest([&[0u8][..], &canonical].concat()).to_vec();
            for step in batch["path"].as_array().expect("path") {
                let sib = hex::decode(step["hash"].as_str().expect("hash")).expect("hex");
                let pair = if step["side"] == "left" { [sib, h].concat() } else { [h, sib].concat() };
                h = Sha256::digest([&[1u8][..], &pair].concat()).to_vec();
            }
            if hex::encode(&h) != batch["root"].as_str().expect("root") {
                return false;
            }
            format!("gatehouse-receipts-v1:{}", hex::encode(&h)).into_bytes()
        }
    };
    key.verify(&msg, &sig).is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_verify_with_the_public_key_and_stay_private() {
    use base64::Engine as _;
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    let (_, other, _) = s.create_key(json!({})).await;
    // Concurrent requests: their receipts are committed (and signed) in shared batches or alone.
    let answers = futures::future::join_all(
        (0..24).map(|i| chat(&s, json!({"index": "Zero-Knowledge", "model": "openai/ok-a", "prompt": format!("sign me {i}")}))),
    )
    .await;
    let pk: Value = s.admin(Method::GET, "/api/receipts/public-key").send().await.expect("pk").json().await.expect("json");
    let pk_b64 = pk["data"]["publicKey"].as_str().expect("pk").to_owned();
    // One host on redb: the fleet's list is this host's key alone.
    assert_eq!(pk["data"]["keys"], json!([{"keyId": pk["data"]["keyId"], "publicKey": pk_b64}]), "{pk}");
    let key_bytes: [u8; 32] = base64::engine::general_purpose::STANDARD.decode(&pk_b64).expect("b64").try_into().expect("32");
    let key = ed25519_dalek::VerifyingKey::from_bytes(&key_bytes).expect("key");
    let files = tempfile::tempdir().expect("tmp");
    let mut paths = Vec::new();
    let mut batched = 0;
    for (i, (st, _, v)) in answers.iter().enumerate() {
        assert_eq!(*st, 200, "{v}");
        let url = v["metadata"]["smltp"]["receipt_url"].as_str().expect("receipt url");
        let r: Value = s.admin(Method::GET, url).send().await.expect("receipt").json().await.expect("json");
        let r = r["data"].clone();
        assert_eq!(r["receipt"]["served_model"], "openai/ok-a");
        assert_eq!(r["receipt"]["policy"], "open");
        assert_eq!(r["receipt"]["bundle_id"], v["metadata"]["smltp"]["bundle_id"]);
        assert!(verify_documented(&key, &r), "receipt {i} verifies: {r}");
        batched += usize::from(r.get("batch").is_some());
        let mut tampered = r.clone();
        tampered["receipt"]["served_model"] = json!("openai/gpt-4o");
        assert!(!verify_documented(&key, &tampered), "tampering breaks it");
        let path = files.path().join(format!("r{i}.json"));
        std::fs::write(&path, r.to_string()).expect("write");
        paths.push(path);
    }
    println!("{batched} of 24 receipts were signed in a batch of their commit");
    // The README's Python verifier accepts every one of them.
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/receipts/verify_receipt.py");
    let out = tokio::process::Command::new("python3").arg(&script).arg(&pk_b64).args(&paths).output().await.expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("24 passed, 0 failed"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));

    let url = answers[0].2["metadata"]["smltp"]["receipt_url"].as_str().expect("url");
    let r = s.client.get(s.url(url)).bearer_auth(&other).send().await.expect("send");
    assert_eq!(r.status(), 404, "another key's receipt is not readable");
}

#[tokio::test]
async fn the_openai_variant_speaks_openai() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    let r = s
        .client
        .post(s.url("/api/external/v1/chat/completions"))
        .bearer_auth(&s.admin_key)
        .json(&json!({"model": "openai/ok-a", "messages": [{"role": "user", "content": "hi there"}]}))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["content"], "mock answer to: hi there");
    assert!(v["usage"]["total_tokens"].is_u64());
    let r = s
        .client
        .post(s.url("/api/external/v1/chat/completions"))
        .bearer_auth(&s.admin_key)
        .json(&json!({"model": "openai/ok-a", "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .expect("send");
    let f = sse::frames(&r.text().await.expect("body"));
    assert_eq!(f.last(), Some(&Frame::Done));
    let usage = &f[f.len() - 2];
    assert_eq!(usage.json()["choices"], json!([]));
    assert!(usage.json()["usage"]["completion_tokens"].as_u64().expect("u") > 0);
    assert!(f.iter().take(f.len() - 2).all(|x| x.json()["object"] == "chat.completion.chunk"));
    let r = s
        .client
        .post(s.url("/api/external/v1/chat/completions"))
        .bearer_auth("sk-nope-nope-nope-nope-nope-nope-nope")
        .json(&json!({}))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 401);
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["error"]["code"], "invalid_api_key");
    let models: Value =
        s.client.get(s.url("/api/external/v1/models")).bearer_auth(&s.admin_key).send().await.expect("send").json().await.expect("json");
    assert_eq!(models["object"], "list");
    assert!(models["data"].as_array().expect("data").iter().any(|m| m["id"] == "openai/ok-a"));
}

#[tokio::test]
async fn metrics_count_requests_and_failovers() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    chat(&s, req(json!(["openai/fail500-a", "openai/ok-b"]))).await;
    let text = s.admin(Method::GET, "/metrics").send().await.expect("metrics").text().await.expect("text");
    let line = |prefix: &str| text.lines().find(|l| l.starts_with(prefix)).map(str::to_owned);
    let failovers = line("gatehouse_failovers_total{reason=\"server_error\"}").expect("failover counter");
    assert!(failovers.ends_with(" 1"), "{failovers}");
    assert!(line("gatehouse_http_requests_total{route=\"/chat/completions\",status=\"200\"}").is_some(), "{text}");
    assert!(text.contains("gatehouse_upstream_latency_seconds_bucket"));
    let anon = s.client.get(s.url("/metrics")).send().await.expect("send");
    assert_eq!(anon.status(), 401);
}

#[tokio::test]
async fn a_client_that_disconnects_mid_stream_is_billed_for_what_was_generated() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    let (_, key, key_id) = s.create_key(json!({"name": "leaver"})).await;
    let (body, _) = stream_to_first_chunk(&s, &key, "one two three four five", "openai/stall-4000-a").await;
    drop(body);
    let started = std::time::Instant::now();
    loop {
        let usage: Value = s.admin(Method::GET, "/api/admin/usage").send().await.expect("usage").json().await.expect("json");
        let row = usage["data"]["keys"].as_array().and_then(|k| k.iter().find(|k| k["id"] == key_id.as_str()).cloned());
        if let Some(row) = row {
            assert_eq!(row["requests"], 1);
            assert!(row["completionTokens"].as_u64().expect("tokens") >= 1, "{row}");
            break;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(3), "the cut stream was not billed promptly");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn discovery_lists_what_the_key_may_use() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).toml("[indexes.docs]\nretriever = \"retriever-local\"\ndescription = \"product docs\"\n[indexes.hr]\nretriever = \"retriever-local\"\n").start();
    let (_, key, _) =
        s.create_key(json!({"allowedModels": ["echo/*"], "allowedIndexes": ["docs"], "allowedPolicies": ["internal", "open"]})).await;
    let get = |path: &str| s.client.get(s.url(path)).bearer_auth(&key).send();
    let models: Value = get("/api/models").await.expect("models").json().await.expect("json");
    let ids: Vec<&str> = models["data"].as_array().expect("data").iter().filter_map(|m| m["id"].as_str()).collect();
    assert_eq!(ids, ["echo/default"], "{models}");
    let indexes: Value = get("/api/indexes").await.expect("indexes").json().await.expect("json");
    let names: Vec<&str> = indexes["data"].as_array().expect("data").iter().filter_map(|m| m["name"].as_str()).collect();
    assert_eq!(names, ["Zero-Knowledge", "docs"]);
    let policies: Value = get("/api/policies").await.expect("policies").json().await.expect("json");
    let names: Vec<&str> = policies["data"].as_array().expect("data").iter().filter_map(|m| m["name"].as_str()).collect();
    assert!(names.contains(&"internal") && names.contains(&"open") && !names.contains(&"public"), "{names:?}");
    assert_eq!(s.client.get(s.url("/api/models")).send().await.expect("anon").status(), 401);
}

/// More streams open at once than the plugin runtime has instance slots (256):
/// a stream must not hold a plugin instance while it waits on the upstream, or
/// the pool runs out and other requests' plugin calls fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_open_streams_than_instance_slots_leave_other_requests_unharmed() {
    use futures::StreamExt;
    const STREAMS: usize = 300;
    let mock = MockUpstream::start().await;
    // The default security pipeline (policy, Prompt Shield, PII/DLP, canary): many plugin calls per request.
    let s = Server::builder()
        .toml("[limits.chat]\nper_minute = 100000\nper_hour = 100000\nper_day = 100000\nper_month = 100000\n")
        .toml(&providers(&mock))
        .env("MOCK_OPENAI_KEY", "sk-upstream-openai-secret")
        .env("MOCK_ANTHROPIC_KEY", "sk-ant-upstream-secret")
        .start();
    let prompts: Vec<String> = (0..STREAMS).map(|i| format!("stream {i} please")).collect();
    let opened = futures::future::join_all(prompts.iter().map(|p| stream_to_first_chunk(&s, &s.admin_key, p, "openai/stall-3000-p"))).await;
    // Every stream has its first token and is now waiting on the upstream's pause.
    for i in 0..10 {
        let (status, _, body) = chat(&s, json!({"index": "Zero-Knowledge", "model": "openai/ok-a", "prompt": format!("json {i}")})).await;
        assert_eq!(status, 200, "a JSON request beside {STREAMS} open streams: {body}");
    }
    let finished = futures::future::join_all(opened.into_iter().map(|(mut body, mut seen)| async move {
        while let Some(chunk) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk.expect("bytes")));
        }
        seen
    }))
    .await;
    for (i, text) in finished.iter().enumerate() {
        assert!(text.contains("[DONE]") && !text.contains("\"type\":\"error\""), "stream {i} ended cleanly: {text}");
    }
}

async fn metric_line(s: &Server, series: &str) -> Option<String> {
    let text = s.admin(Method::GET, "/metrics").send().await.expect("metrics").text().await.expect("text");
    text.lines().find(|l| l.starts_with(series)).map(str::to_owned)
}

/// Waits until the mock has received `n` requests for `model`.
async fn until_upstream_has(mock: &MockUpstream, model: &str, n: usize) {
    let started = std::time::Instant::now();
    while mock.count_for(model) < n {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "the upstream never received `{model}`");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn beyond_max_in_flight_a_chat_request_is_refused_with_503_and_nothing_is_counted() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).env("GATEHOUSE_CHAT__MAX_IN_FLIGHT", "1").start();
    let (_, key, key_id) = s.create_key(json!({"name": "shed"})).await;
    let post = |path: &str, body: Value| s.client.post(s.url(path)).bearer_auth(&key).json(&body).send();

    // One slow request holds the only slot.
    let slow = post("/chat/completions", json!({"index": "Zero-Knowledge", "model": "openai/slow-3000-a", "prompt": "hold"}));
    let held = tokio::spawn(slow);
    until_upstream_has(&mock, "slow-3000-a", 1).await;

    let ok = json!({"index": "Zero-Knowledge", "model": "openai/ok-a", "prompt": "hello there"});
    let with_key = || s.client.post(s.url("/chat/completions")).bearer_auth(&key).header("Idempotency-Key", "retry-me").json(&ok).send();
    let r = with_key().await.expect("send");
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers().get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
    assert!(!r.headers().contains_key("x-ratelimit-remaining"), "a refused request is not counted by the limiter");
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["success"], false);
    assert_eq!(v["error"], "Server busy");
    assert!(v["message"].as_str().expect("message").contains("limit of 1 chat requests"), "{v}");
    assert!(v["request_id"].as_str().expect("request_id").starts_with("req-"), "{v}");

    // The OpenAI-compatible route shares the slots and answers in OpenAI's shape.
    let r = post("/api/external/v1/chat/completions", json!({"model": "openai/ok-a", "messages": [{"role": "user", "content": "hi"}]}))
        .await
        .expect("send");
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers().get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["error"]["type"], "server_error", "{v}");
    assert_eq!(v["error"]["code"], "server_busy", "{v}");

    // Refused before its body is read: a body that never comes is not waited for.
    let head = gatehouse_tests::raw_http::head(
        "POST",
        "/chat/completions",
        &[format!("Authorization: Bearer {key}"), "Content-Type: application/json".into(), "Content-Length: 5000".into()],
    );
    let r = gatehouse_tests::raw_http::send(&s.base_url, &head, std::time::Duration::from_secs(10)).await;
    assert_eq!(r.status, Some(503), "{:?}", String::from_utf8_lossy(&r.body));
    assert!(r.elapsed < std::time::Duration::from_secs(5), "the refusal waited for the body: {:?}", r.elapsed);

    // An unauthenticated client learns nothing of the load.
    let r = s.client.post(s.url("/chat/completions")).bearer_auth("sk-not-a-key").json(&ok).send().await.expect("send");
    assert_eq!(r.status(), 401);

    let in_flight = metric_line(&s, "gatehouse_chat_in_flight").await.expect("in-flight gauge");
    assert!(in_flight.ends_with(" 1"), "the held request: {in_flight}");

    let r = held.await.expect("task").expect("send");
    assert_eq!(r.status(), 200);
    assert_eq!(mock.count_for("ok-a"), 0, "a refused request never reaches the upstream");

    // The refused request's idempotency key was not claimed: the retry does the work.
    let r = with_key().await.expect("send");
    assert_eq!(r.status(), 200);
    assert_eq!(mock.count_for("ok-a"), 1);

    // Two requests were served and counted; the refusals wrote nothing.
    let usage: Value = s.admin(Method::GET, "/api/admin/usage").send().await.expect("usage").json().await.expect("json");
    let row = usage["data"]["keys"].as_array().and_then(|k| k.iter().find(|k| k["id"] == key_id.as_str()).cloned()).expect("usage row");
    assert_eq!(row["requests"], 2, "{row}");
    let shed = metric_line(&s, "gatehouse_chat_shed_total").await.expect("shed counter");
    assert!(shed.ends_with(" 3"), "{shed}");
    let in_flight = metric_line(&s, "gatehouse_chat_in_flight").await.expect("in-flight gauge");
    assert!(in_flight.ends_with(" 0"), "{in_flight}");
    assert!(metric_line(&s, "gatehouse_http_requests_total{route=\"/chat/completions\",status=\"503\"}").await.is_some());
}

#[tokio::test]
async fn a_stream_holds_its_slot_until_it_ends() {
    use futures::StreamExt;
    let mock = MockUpstream::start().await;
    let s = builder(&mock).env("GATEHOUSE_CHAT__MAX_IN_FLIGHT", "1").start();
    let (mut body, mut seen) = stream_to_first_chunk(&s, &s.admin_key, "one two three", "openai/stall-1000-a").await;
    // The response's headers are long sent; the stream still holds the slot.
    let (st, h, v) = chat(&s, req(json!(["openai/ok-a"]))).await;
    assert_eq!(st, 503, "{v}");
    assert!(h.contains_key("retry-after"));
    while let Some(chunk) = body.next().await {
        seen.push_str(&String::from_utf8_lossy(&chunk.expect("bytes")));
    }
    assert!(seen.trim_end().ends_with("data: [DONE]"), "{seen}");
    // The pump frees the slot just after `[DONE]` (it commits before sending it).
    let started = std::time::Instant::now();
    loop {
        let (st, _, v) = chat(&s, req(json!(["openai/ok-a"]))).await;
        if st == 200 {
            break;
        }
        assert_eq!(st, 503, "{v}");
        assert!(started.elapsed() < std::time::Duration::from_secs(3), "the ended stream kept its slot");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

// ------------------------------------------------ breakers, cooldown and failover

async fn chat_as(s: &Server, key: &str, body: Value) -> (u16, Value) {
    let r = s.client.post(s.url("/chat/completions")).bearer_auth(key).json(&body).send().await.expect("send");
    let status = r.status().as_u16();
    let text = r.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[tokio::test]
async fn a_deadline_the_caller_shortened_does_not_put_a_shared_model_into_cooldown() {
    let mock = MockUpstream::start().await;
    // The default breaker: 5 failures in a row.
    let s = builder(&mock).start();
    let (_, attacker, _) = s.create_key(json!({"name": "attacker"})).await;
    let (_, victim, _) = s.create_key(json!({"name": "victim"})).await;
    let short = |field: &str| json!({"model": "openai/slow-100-shared", field: 1});
    for stream in [false, true] {
        let field = if stream { "first_token_timeout_ms" } else { "timeout_ms" };
        let entries: Vec<Value> = (0..6).map(|_| short(field)).collect();
        let body = json!({"index": "Zero-Knowledge", "stream": stream, "models": entries, "prompt": "poison"});
        for _ in 0..2 {
            let (st, v) = chat_as(&s, &attacker, body.clone()).await;
            assert_eq!(st, 502, "{v}");
            let attempts = v["attempts"].as_array().expect("attempts");
            assert!(attempts.iter().all(|a| a["reason"] == "timeout"), "every entry was tried and timed out: {v}");
        }
    }
    // Another tenant, with the operator's deadlines, is served.
    for stream in [false, true] {
        let body = json!({"index": "Zero-Knowledge", "stream": stream, "model": "openai/slow-100-shared", "prompt": "victim"});
        let (st, v) = chat_as(&s, &victim, body).await;
        assert_eq!(st, 200, "the attacker's deadlines put the model into cooldown: {v}");
    }
}

#[tokio::test]
async fn timeouts_at_the_operators_deadline_still_count() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).toml("[chat]\ntimeout_ms = 300\n[upstream]\nbreaker_failures = 2\nbreaker_cooldown_ms = 60000\n").start();
    // A deadline above the operator's counts like the operator's own.
    let (st, _, v) = chat(&s, req(json!([{"model": "openai/slow-3000-t", "timeout_ms": 400}]))).await;
    assert_eq!(st, 502, "{v}");
    let (st, _, v) = chat(&s, req(json!(["openai/slow-3000-t"]))).await;
    assert_eq!(st, 502, "{v}");
    assert_eq!(v["attempts"][0]["reason"], "timeout", "{v}");
    let (st, _, v) = chat(&s, req(json!(["openai/slow-3000-t"]))).await;
    assert_eq!(st, 502, "{v}");
    assert_eq!(v["attempts"][0]["reason"], "cooldown", "two timeouts at the operator's deadline open the breaker: {v}");
    assert_eq!(mock.count_for("slow-3000-t"), 2);
}

#[tokio::test]
async fn one_request_counts_once_against_a_breaker_however_often_it_repeats_the_model() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).toml("[upstream]\nbreaker_failures = 2\nbreaker_cooldown_ms = 60000\n").start();
    let six: Vec<&str> = vec!["openai/fail500-r"; 6];
    let (st, _, v) = chat(&s, req(json!(six))).await;
    assert_eq!(st, 502, "{v}");
    let attempts = v["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 6);
    assert!(attempts.iter().all(|a| a["status"] == "failed" && a["reason"] == "server_error"), "each entry is a retry: {v}");
    assert_eq!(mock.count_for("fail500-r"), 6);
    // The next request is still let through: the first counted once.
    let (_, _, v) = chat(&s, req(json!(["openai/fail500-r"]))).await;
    assert_eq!(v["attempts"][0]["reason"], "server_error", "{v}");
    assert_eq!(mock.count_for("fail500-r"), 7);
    // That was the second failure: now the model cools down.
    let (_, _, v) = chat(&s, req(json!(["openai/fail500-r"]))).await;
    assert_eq!(v["attempts"][0]["reason"], "cooldown", "{v}");
    assert_eq!(mock.count_for("fail500-r"), 7);
}

#[tokio::test]
async fn a_model_skipped_for_cooldown_fires_a_failover_event_for_its_hop() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).toml("[upstream]\nbreaker_failures = 1\nbreaker_cooldown_ms = 60000\n").start();
    let (st, _, _) = chat(&s, req(json!(["openai/fail500-a"]))).await;
    assert_eq!(st, 502);
    for stream in [false, true] {
        let mut body = req(json!(["openai/fail500-a", "anthropic/ok-b"]));
        body["stream"] = json!(stream);
        let (st, text) = self::stream(&s, body).await;
        assert_eq!(st, 200, "{text}");
    }
    let ev = events(&s, "api:model_failover").await;
    assert_eq!(ev.len(), 2, "one hop per request, JSON and stream: {ev:?}");
    for e in &ev {
        assert_eq!(e["data"]["failedModel"], "openai/fail500-a", "{e}");
        assert_eq!(e["data"]["nextModel"], "anthropic/ok-b", "{e}");
        assert_eq!(e["data"]["reason"], "cooldown", "{e}");
    }
    assert_eq!(mock.count_for("fail500-a"), 1, "the cooling model was not called");
}

#[tokio::test]
async fn a_cooldown_ends_the_chain_when_its_class_is_not_in_on() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).toml("[upstream]\nbreaker_failures = 1\nbreaker_cooldown_ms = 60000\n").start();
    // One model cools down after a server error, another after a rate limit.
    assert_eq!(chat(&s, req(json!(["openai/fail500-a"]))).await.0, 502);
    assert_eq!(chat(&s, req(json!(["openai/fail429-c"]))).await.0, 429);
    for stream in [false, true] {
        let body = |first: &str, on: Value| {
            json!({"index": "Zero-Knowledge", "stream": stream, "models": [first, "anthropic/ok-b"],
                   "redundancy": {"on": on}, "messages": [{"role": "user", "content": "hello there"}]})
        };
        // server_error is not in `on`: the chain ends at the cooling model.
        let (st, _, v) = chat(&s, body("openai/fail500-a", json!(["timeout", "rate_limit"]))).await;
        assert_eq!(st, 502, "{v}");
        assert_eq!(v["error"], "All model attempts failed");
        let attempts = v["attempts"].as_array().expect("attempts");
        assert_eq!(attempts.len(), 1, "{v}");
        assert_eq!(attempts[0]["status"], "skipped");
        assert_eq!(attempts[0]["reason"], "cooldown");
        // A rate-limit cooldown is a rate-limit failure: 429 when it is all there was.
        let (st, _, v) = chat(&s, body("openai/fail429-c", json!(["server_error"]))).await;
        assert_eq!(st, 429, "{v}");
        assert_eq!(v["attempts"].as_array().map(Vec::len), Some(1), "{v}");
        // Listed in `on`: the chain moves on.
        let (st, text) = self::stream(&s, body("openai/fail500-a", json!(["server_error"]))).await;
        assert_eq!(st, 200, "{text}");
    }
    assert_eq!(mock.count_for("ok-b"), 2, "only the requests whose `on` listed the class reached the next model");
    assert_eq!(mock.count_for("fail500-a") + mock.count_for("fail429-c"), 2, "cooling models were not called");
}

// ------------------------------------------------ idempotency: route and numbers

#[tokio::test]
async fn an_idempotency_key_is_scoped_to_its_route() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    let body = json!({"index": "Zero-Knowledge", "model": "openai/ok-a", "messages": [{"role": "user", "content": "which route"}]});
    let send = |path: &str| s.client.post(s.url(path)).bearer_auth(&s.admin_key).header("Idempotency-Key", "route-1").json(&body).send();
    let first = send("/chat/completions").await.expect("send");
    assert_eq!(first.status(), 200);
    let first: Value = first.json().await.expect("json");
    assert_eq!(first["success"], true);
    // The same key and body on the OpenAI route is another request, answered in OpenAI's shape.
    let openai = send("/api/external/v1/chat/completions").await.expect("send");
    assert_eq!(openai.status(), 200);
    assert!(!openai.headers().contains_key("idempotent-replayed"), "a Gatehouse answer was replayed to an OpenAI client");
    let openai: Value = openai.json().await.expect("json");
    assert!(openai.get("success").is_none() && openai["object"] == "chat.completion", "{openai}");
    // Each route replays its own answer.
    for (path, expected) in [("/chat/completions", &first), ("/api/external/v1/chat/completions", &openai)] {
        let again = send(path).await.expect("send");
        assert_eq!(again.headers().get("idempotent-replayed").and_then(|v| v.to_str().ok()), Some("true"), "{path}");
        assert_eq!(&again.json::<Value>().await.expect("json"), expected, "{path}");
    }
    assert_eq!(mock.count_for("ok-a"), 2);
}

#[tokio::test]
async fn numbers_spelled_differently_are_the_same_idempotent_body() {
    let mock = MockUpstream::start().await;
    let s = builder(&mock).start();
    let send = |temperature: &str| {
        let raw = format!(r#"{{"index":"Zero-Knowledge","model":"openai/ok-n","prompt":"numbers","temperature":{temperature}}}"#);
        s.client
            .post(s.url("/chat/completions"))
            .bearer_auth(&s.admin_key)
            .header("Idempotency-Key", "numbers-1")
            .header("content-type", "application/json")
            .body(raw)
            .send()
    };
    assert_eq!(send("1").await.expect("send").status(), 200);
    for same in ["1.0", "1e0", "10E-1", "0.1e1", "1.000"] {
        let r = send(same).await.expect("send");
        assert_eq!(r.status(), 200, "temperature {same}");
        assert_eq!(r.headers().get("idempotent-replayed").and_then(|v| v.to_str().ok()), Some("true"), "temperature {same}");
    }
    let other = send("1.01").await.expect("send");
    assert_eq!(other.status(), 422, "a different number is a different body");
    assert_eq!(mock.count_for("ok-n"), 1);
}
