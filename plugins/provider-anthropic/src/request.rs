//! Normalised chat request → Anthropic `POST {base}/v1/messages`.

use gatehouse_sdk::provider::{ChatRequest, ProviderError, Upstream};
use gatehouse_sdk::provider::{Header, HttpRequest, Role};
use serde_json::{Map, Value, json};

use crate::config::AnthropicConfig;
use crate::errors::{adapter_fault, bad_request};

/// Highest temperature Anthropic accepts.
pub const MAX_TEMPERATURE: f32 = 1.0;

/// Headers this adapter owns; `extra_headers` cannot replace them.
const OWN_HEADERS: &[&str] = &["x-api-key", "anthropic-version", "content-type", "anthropic-beta"];

/// The messages endpoint for a base URL: `https://api.anthropic.com` →
/// `https://api.anthropic.com/v1/messages`; a base that already ends in
/// `/v1` only gets `/messages`.
pub fn endpoint(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/v1") { format!("{base}/messages") } else { format!("{base}/v1/messages") }
}

/// Gatehouse's 0..2 temperature as Anthropic's 0..1: clamped, written as the
/// shortest decimal (`0.7`, not `0.699999988079071`); `None` if not finite.
pub fn temperature(t: f32) -> Option<Value> {
    if !t.is_finite() {
        return None;
    }
    let clamped: f64 = t.clamp(0.0, MAX_TEMPERATURE).to_string().parse().ok()?;
    serde_json::Number::from_f64(clamped).map(Value::Number)
}

/// Describe the HTTP request for one chat request.
pub fn build_request(up: &Upstream, req: &ChatRequest) -> Result<HttpRequest, ProviderError> {
    let cfg = AnthropicConfig::parse(&up.config_json)?;
    if up.base_url.trim_end_matches('/').is_empty() {
        return Err(adapter_fault("provider-anthropic needs a base URL such as https://api.anthropic.com".to_string()));
    }
    let mut headers = vec![
        header("content-type", "application/json"),
        header("accept", if req.stream { "text/event-stream" } else { "application/json" }),
        header("anthropic-version", &cfg.anthropic_version),
    ];
    if let Some(key) = up.api_key.as_deref().filter(|k| !k.is_empty()) {
        headers.push(header("x-api-key", key));
    }
    if let Some(beta) = cfg.anthropic_beta.as_deref().filter(|b| !b.is_empty()) {
        headers.push(header("anthropic-beta", beta));
    }
    for (name, value) in &cfg.extra_headers {
        if !OWN_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            headers.push(header(name, value));
        }
    }
    Ok(HttpRequest { method: "POST".to_string(), url: endpoint(&up.base_url), headers, body: build_body(req)?.to_string() })
}

/// The JSON body of a Messages API request.
pub fn build_body(req: &ChatRequest) -> Result<Value, ProviderError> {
    let mut system = Vec::new();
    let mut messages = Vec::with_capacity(req.messages.len());
    for m in &req.messages {
        match m.role {
            Role::System => system.push(m.content.as_str()),
            Role::User | Role::Tool => messages.push(json!({ "role": "user", "content": m.content })),
            Role::Assistant => messages.push(json!({ "role": "assistant", "content": m.content })),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), Value::String(req.model.clone()));
    body.insert("max_tokens".into(), json!(req.max_tokens.max(1)));
    body.insert("messages".into(), Value::Array(messages));
    let system = system.join("\n\n");
    if !system.is_empty() {
        body.insert("system".into(), Value::String(system));
    }
    if let Some(t) = temperature(req.temperature) {
        body.insert("temperature".into(), t);
    }
    if !req.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(req.stop));
    }
    body.insert("stream".into(), Value::Bool(req.stream));
    apply_extra(&mut body, &req.extra_json)?;
    Ok(Value::Object(body))
}

/// Copy the `extra-json` fields Anthropic understands the same way.
fn apply_extra(body: &mut Map<String, Value>, extra: &str) -> Result<(), ProviderError> {
    let trimmed = extra.trim();
    if trimmed.is_empty() || trimmed == "null" {
        return Ok(());
    }
    let mut extra: Map<String, Value> = match serde_json::from_str(trimmed) {
        Ok(Value::Object(map)) => map,
        Ok(_) => {
            return Err(bad_request("extra request fields must be a JSON object".to_string()));
        }
        Err(e) => {
            return Err(bad_request(format!("extra request fields are not valid JSON: {e}")));
        }
    };
    if let Some(k) = extra.remove("top_k") {
        body.insert("top_k".into(), k);
    }
    let user = extra.remove("user").and_then(|u| u.as_str().map(str::to_string));
    match (extra.remove("metadata"), user) {
        (Some(Value::Object(meta)), _) if meta.contains_key("user_id") => {
            body.insert("metadata".into(), json!({ "user_id": meta["user_id"] }));
        }
        (_, Some(user)) => {
            body.insert("metadata".into(), json!({ "user_id": user }));
        }
        _ => {}
    }
    Ok(())
}

fn header(name: &str, value: &str) -> Header {
    Header { name: name.to_string(), value: value.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{class_name, upstream};
    use gatehouse_sdk::provider::Message;

    fn msg(role: Role, content: &str) -> Message {
        Message { role, content: content.to_string() }
    }

    fn chat(stream: bool) -> ChatRequest {
        ChatRequest {
            model: "claude-sonnet-4-5".to_string(),
            messages: vec![
                msg(Role::System, "Be brief."),
                msg(Role::User, "Hello"),
                msg(Role::Assistant, "Hi!"),
                msg(Role::User, "What is 2+2?"),
            ],
            temperature: 0.7,
            max_tokens: 1000,
            stream,
            stop: vec![],
            extra_json: String::new(),
        }
    }

    fn header_of<'a>(r: &'a HttpRequest, name: &str) -> Option<&'a str> {
        r.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value.as_str())
    }

    fn body_of(r: &HttpRequest) -> Value {
        serde_json::from_str(&r.body).expect("JSON body")
    }

    #[test]
    fn messages_request() {
        let r = build_request(&upstream(Some("sk-ant-test"), ""), &chat(false)).expect("ok");
        assert_eq!(r.method, "POST");
        assert_eq!(r.url, "https://api.anthropic.com/v1/messages");
        assert_eq!(header_of(&r, "x-api-key"), Some("sk-ant-test"));
        assert_eq!(header_of(&r, "anthropic-version"), Some("2023-06-01"));
        assert_eq!(header_of(&r, "content-type"), Some("application/json"));
        assert_eq!(header_of(&r, "authorization"), None);
        assert_eq!(
            body_of(&r),
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 1000,
                "system": "Be brief.",
                "messages": [
                    {"role": "user", "content": "Hello"},
                    {"role": "assistant", "content": "Hi!"},
                    {"role": "user", "content": "What is 2+2?"}
                ],
                "temperature": 0.7,
                "stream": false
            })
        );
    }

    #[test]
    fn temperature_is_clamped_to_anthropic_range() {
        let mut req = chat(true);
        req.temperature = 1.6;
        let b = build_body(&req).expect("ok");
        assert_eq!(b["temperature"], json!(1.0));
        assert_eq!(b["stream"], json!(true));
        assert_eq!(temperature(0.0), Some(json!(0.0)));
        assert_eq!(temperature(-1.0), Some(json!(0.0)));
        assert_eq!(temperature(0.3), Some(json!(0.3)));
        assert_eq!(temperature(f32::NAN), None);
    }

    #[test]
    fn stop_sequences_systems_and_tool_messages() {
        let mut req = chat(false);
        req.stop = vec!["\n\nHuman:".to_string()];
        req.messages.insert(1, msg(Role::System, "Answer in French."));
        req.messages.push(msg(Role::Tool, "{\"temp\": 21}"));
        let b = build_body(&req).expect("ok");
        assert_eq!(b["stop_sequences"], json!(["\n\nHuman:"]));
        assert_eq!(b["system"], json!("Be brief.\n\nAnswer in French."));
        assert_eq!(b["messages"][3], json!({"role": "user", "content": "{\"temp\": 21}"}));
        assert!(b.get("stop").is_none());
    }

    #[test]
    fn no_system_field_without_system_messages() {
        let mut req = chat(false);
        req.messages.retain(|m| m.role != Role::System);
        req.max_tokens = 0;
        let b = build_body(&req).expect("ok");
        assert!(b.get("system").is_none());
        assert_eq!(b["max_tokens"], json!(1), "Anthropic requires at least 1");
    }

    #[test]
    fn extra_fields_allow_list() {
        let mut req = chat(false);
        req.extra_json = r#"{"top_k":5,"user":"u-42","seed":1,"response_format":{"type":"json_object"},"model":"x"}"#.to_string();
        let b = build_body(&req).expect("ok");
        assert_eq!(b["top_k"], json!(5));
        assert_eq!(b["metadata"], json!({"user_id": "u-42"}));
        assert!(b.get("seed").is_none() && b.get("response_format").is_none());
        assert_eq!(b["model"], json!("claude-sonnet-4-5"));
        req.extra_json = "7".to_string();
        assert_eq!(class_name(build_body(&req).expect_err("not an object").class), "client-error");
    }

    #[test]
    fn base_url_conventions_and_config() {
        assert_eq!(endpoint("https://api.anthropic.com/"), "https://api.anthropic.com/v1/messages");
        assert_eq!(endpoint("http://127.0.0.1:9999/v1"), "http://127.0.0.1:9999/v1/messages");
        let cfg = r#"{"anthropic_beta":"prompt-caching-2024-07-31","extra_headers":{"X-Team":"a","x-api-key":"evil"}}"#;
        let r = build_request(&upstream(Some("k-1"), cfg), &chat(true)).expect("ok");
        assert_eq!(header_of(&r, "anthropic-beta"), Some("prompt-caching-2024-07-31"));
        assert_eq!(header_of(&r, "X-Team"), Some("a"));
        assert_eq!(header_of(&r, "x-api-key"), Some("k-1"));
        assert_eq!(header_of(&r, "accept"), Some("text/event-stream"));
    }
}
