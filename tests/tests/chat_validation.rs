//! Every validation rule of a chat request (docs/decisions/chat-requests.md) and its limits, through the real server:
//! status, the documented short error text, and a message that says what to fix.

use gatehouse_tests::Server;
use serde_json::{Value, json};

async fn post(s: &Server, key: &str, body: Value) -> (u16, Value) {
    let r = s.client.post(s.url("/chat/completions")).bearer_auth(key).json(&body).send().await.expect("send");
    let status = r.status().as_u16();
    (status, r.json().await.expect("json body"))
}

fn base() -> Value {
    json!({"index": "Zero-Knowledge", "model": "echo/default", "prompt": "hello"})
}

fn with(mut v: Value, k: &str, x: Value) -> Value {
    v[k] = x;
    v
}

fn without(mut v: Value, k: &str) -> Value {
    v.as_object_mut().expect("object").remove(k);
    v
}

#[tokio::test]
async fn each_validation_rule_has_its_status_and_text() {
    let s = Server::start();
    let k = s.admin_key.clone();
    let msgs = |m: Value| with(without(base(), "prompt"), "messages", m);
    let many: Vec<Value> = (0..101).map(|_| json!({"role": "user", "content": "x"})).collect();
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        ("no index", without(base(), "index"), 400, "Index required"),
        ("system not first", msgs(json!([{"role":"user","content":"a"},{"role":"system","content":"b"}])), 400, "Invalid messages"),
        (
            "two systems",
            msgs(json!([{"role":"system","content":"a"},{"role":"system","content":"b"},{"role":"user","content":"c"}])),
            400,
            "Invalid messages",
        ),
        ("prompt and messages", with(base(), "messages", json!([{"role":"user","content":"a"}])), 400, "Invalid request"),
        (
            "fallbacks with models",
            with(with(without(base(), "model"), "models", json!(["echo/a"])), "fallback_models", json!(["echo/b"])),
            400,
            "Invalid request",
        ),
        ("no model", without(base(), "model"), 400, "Invalid request"),
        (
            "four distinct models",
            with(without(base(), "model"), "models", json!(["echo/a", "echo/b", "echo/c", "echo/d"])),
            400,
            "Invalid request",
        ),
        ("101 messages", msgs(Value::Array(many)), 400, "Invalid messages"),
        ("over 256 KB", with(base(), "prompt", json!("x".repeat(262_145))), 400, "Invalid messages"),
        (
            "system_message with system entry",
            with(msgs(json!([{"role":"system","content":"a"},{"role":"user","content":"b"}])), "system_message", json!("c")),
            400,
            "Invalid messages",
        ),
        ("unknown role", msgs(json!([{"role":"wizard","content":"a"}])), 400, "Invalid messages"),
        ("wrong type", with(base(), "temperature", json!("warm")), 400, "Invalid request"),
        ("max_tokens 0", with(base(), "max_tokens", json!(0)), 400, "Invalid request"),
        ("unknown provider", with(base(), "model", json!("nosuch/model")), 400, "Unknown model"),
        ("model without provider", with(base(), "model", json!("gpt-4o")), 400, "Invalid request"),
        ("unknown index", with(base(), "index", json!("no-such-kb")), 400, "Unknown index"),
        ("unknown policy", with(base(), "smltp_policy", json!("no-such-policy")), 400, "Unknown policy"),
        ("unknown trigger", with(base(), "redundancy", json!({"on": ["meteor"]})), 400, "Invalid request"),
    ];
    for (name, body, status, text) in cases {
        let (st, v) = post(&s, &k, body).await;
        assert_eq!(st, status, "{name}: {v}");
        assert_eq!(v["success"], false, "{name}");
        assert_eq!(v["error"], text, "{name}: {v}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{name}: message");
        assert!(v["request_id"].as_str().is_some_and(|r| r.starts_with("req-")), "{name}: request_id");
    }
}

#[tokio::test]
async fn bodies_that_are_not_json_are_clear_errors() {
    let s = Server::start();
    for raw in [&b"{nope"[..], b"[1,2,3]", b"", &[0xff, 0xfe, 0x00]] {
        let r = s
            .client
            .post(s.url("/chat/completions"))
            .bearer_auth(&s.admin_key)
            .header("content-type", "application/json")
            .body(raw.to_vec())
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 400, "{raw:?}");
        let v: Value = r.json().await.expect("json");
        assert_eq!(v["error"], "Invalid request");
    }
}

#[tokio::test]
async fn a_body_over_the_cap_is_413() {
    let s = Server::start();
    let r = s
        .client
        .post(s.url("/chat/completions"))
        .bearer_auth(&s.admin_key)
        .header("content-type", "application/json")
        .body(vec![b' '; 3 * 1024 * 1024])
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 413);
    let v: Value = r.json().await.expect("flat-format body");
    assert_eq!(v["error"], "Payload too large");
}

#[tokio::test]
async fn permission_errors_are_403_access_denied_before_any_call() {
    let s = Server::builder().toml("[indexes.docs]\nretriever = \"retriever-local\"\n").start();
    let (_, key, _) =
        s.create_key(json!({"allowedModels": ["echo/allowed*"], "allowedIndexes": [], "allowedPolicies": ["internal"]})).await;
    let cases = vec![
        ("model", with(base(), "model", json!("echo/forbidden"))),
        ("model later in the chain", with(without(base(), "model"), "models", json!(["echo/allowed-1", "echo/forbidden"]))),
        ("index", with(with(base(), "model", json!("echo/allowed")), "index", json!("docs"))),
        ("policy", with(with(base(), "model", json!("echo/allowed")), "smltp_policy", json!("public"))),
        ("user_id without admin", with(with(base(), "model", json!("echo/allowed")), "user_id", json!("usr_x"))),
    ];
    for (name, body) in cases {
        let (st, v) = post(&s, &key, body).await;
        assert_eq!(st, 403, "{name}: {v}");
        assert_eq!(v["error"], "Access denied", "{name}");
    }
    // An admin billing an unknown user: 400.
    let (st, v) = post(&s, &s.admin_key, with(base(), "user_id", json!("usr_nobody"))).await;
    assert_eq!(st, 400, "{v}");
}
