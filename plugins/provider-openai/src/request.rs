//! Normalised chat request → OpenAI `POST {base}/chat/completions`.

use gatehouse_sdk::provider::exports::gatehouse::plugin::provider_api::{ChatRequest, ProviderError, Upstream};
use gatehouse_sdk::provider::gatehouse::plugin::types::{Header, HttpRequest, Role};
use serde_json::{Map, Value, json};

use crate::config::OpenAiConfig;
use crate::errors::{adapter_fault, bad_request};

/// Body fields this adapter sets from the normalised request; `extra-json`
/// cannot override them (the host, not the caller, decides about streaming
/// and usage reporting, and validated the rest already).
const RESERVED: &[&str] = &["model", "messages", "stream", "stream_options", "temperature", "max_tokens", "max_completion_tokens", "stop"];

/// The OpenAI name of a role.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// An `f32` as the JSON number a person would write (`0.7`, not
/// `0.699999988079071`); `None` for NaN and infinities.
pub fn json_f32(x: f32) -> Option<Value> {
    let shortest: f64 = x.to_string().parse().ok()?;
    serde_json::Number::from_f64(shortest).map(Value::Number)
}

/// Describe the HTTP request for one chat request.
pub fn build_request(up: &Upstream, req: &ChatRequest) -> Result<HttpRequest, ProviderError> {
    let cfg = OpenAiConfig::parse(&up.config_json)?;
    let base = up.base_url.trim_end_matches('/');
    if base.is_empty() {
        return Err(adapter_fault("provider-openai needs a base URL such as https://api.openai.com/v1".to_string()));
    }
    let body = build_body(&cfg, req)?;
    let mut headers = vec![
        header("content-type", "application/json"),
        header("accept", if req.stream { "text/event-stream" } else { "application/json" }),
    ];
    if let Some(key) = up.api_key.as_deref().filter(|k| !k.is_empty()) {
        headers.push(header("authorization", &format!("Bearer {key}")));
    }
    for (name, value) in &cfg.extra_headers {
        let lower = name.to_ascii_lowercase();
        if lower != "authorization" && lower != "content-type" {
            headers.push(header(name, value));
        }
    }
    Ok(HttpRequest { method: "POST".to_string(), url: format!("{base}/chat/completions"), headers, body: body.to_string() })
}

/// The JSON body: the normalised fields, then `extra-json` for the rest.
pub fn build_body(cfg: &OpenAiConfig, req: &ChatRequest) -> Result<Value, ProviderError> {
    let messages: Vec<Value> = req.messages.iter().map(|m| json!({ "role": role_name(m.role), "content": m.content })).collect();
    let mut body = Map::new();
    body.insert("model".into(), Value::String(req.model.clone()));
    body.insert("messages".into(), Value::Array(messages));
    if let Some(t) = json_f32(req.temperature) {
        body.insert("temperature".into(), t);
    }
    body.insert(cfg.max_tokens_field.clone(), json!(req.max_tokens));
    if !req.stop.is_empty() {
        body.insert("stop".into(), json!(req.stop));
    }
    body.insert("stream".into(), Value::Bool(req.stream));
    if req.stream && cfg.include_usage {
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    for (k, v) in parse_extra(&req.extra_json)? {
        if !RESERVED.contains(&k.as_str()) {
            body.entry(k).or_insert(v);
        }
    }
    Ok(Value::Object(body))
}

/// `extra-json` as an object; `""` and `null` are empty.
fn parse_extra(extra: &str) -> Result<Map<String, Value>, ProviderError> {
    let trimmed = extra.trim();
    if trimmed.is_empty() || trimmed == "null" {
        return Ok(Map::new());
    }
    match serde_json::from_str(trimmed) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(bad_request("extra request fields must be a JSON object".to_string())),
        Err(e) => Err(bad_request(format!("extra request fields are not valid JSON: {e}"))),
    }
}

fn header(name: &str, value: &str) -> Header {
    Header { name: name.to_string(), value: value.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::upstream;
    use gatehouse_sdk::provider::gatehouse::plugin::types::Message;

    fn chat(stream: bool) -> ChatRequest {
        ChatRequest {
            model: "gpt-4o-mini".to_string(),
            messages: vec![
                Message { role: Role::System, content: "Be brief.".to_string() },
                Message { role: Role::User, content: "Hi there".to_string() },
            ],
            temperature: 0.7,
            max_tokens: 256,
            stream,
            stop: vec![],
            extra_json: String::new(),
        }
    }

    fn header_of<'a>(r: &'a HttpRequest, name: &str) -> Option<&'a str> {
        r.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value.as_str())
    }

    fn body_of(r: &HttpRequest) -> Value {
        serde_json::from_str(&r.body).expect("body is JSON")
    }

    #[test]
    fn non_streaming_request() {
        let r = build_request(&upstream(Some("sk-test"), ""), &chat(false)).expect("ok");
        assert_eq!(r.method, "POST");
        assert_eq!(r.url, "https://api.openai.com/v1/chat/completions");
        assert_eq!(header_of(&r, "authorization"), Some("Bearer sk-test"));
        assert_eq!(header_of(&r, "content-type"), Some("application/json"));
        assert_eq!(
            body_of(&r),
            json!({
                "model": "gpt-4o-mini",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hi there"}
                ],
                "temperature": 0.7,
                "max_tokens": 256,
                "stream": false
            })
        );
    }

    #[test]
    fn streaming_asks_for_usage_unless_configured_off() {
        let r = build_request(&upstream(None, "{}"), &chat(true)).expect("ok");
        let b = body_of(&r);
        assert_eq!(b["stream"], json!(true));
        assert_eq!(b["stream_options"], json!({"include_usage": true}));
        assert_eq!(header_of(&r, "accept"), Some("text/event-stream"));
        assert_eq!(header_of(&r, "authorization"), None, "no key, no header");

        let r = build_request(&upstream(None, r#"{"include_usage": false}"#), &chat(true)).expect("ok");
        assert!(body_of(&r).get("stream_options").is_none());
    }

    #[test]
    fn stop_extra_fields_and_reserved_keys() {
        let mut req = chat(false);
        req.stop = vec!["\n\n".to_string(), "END".to_string()];
        req.extra_json = r#"{"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],
            "response_format":{"type":"json_object"},"seed":7,"model":"evil","stream":true,
            "stream_options":{"include_usage":true},"max_tokens":99999}"#
            .to_string();
        let b = body_of(&build_request(&upstream(None, ""), &req).expect("ok"));
        assert_eq!(b["stop"], json!(["\n\n", "END"]));
        assert_eq!(b["seed"], json!(7));
        assert_eq!(b["response_format"], json!({"type": "json_object"}));
        assert_eq!(b["tools"][0]["function"]["name"], json!("f"));
        assert_eq!(b["model"], json!("gpt-4o-mini"));
        assert_eq!(b["stream"], json!(false));
        assert_eq!(b["max_tokens"], json!(256));
        assert!(b.get("stream_options").is_none(), "stream_options is only valid on streams");
    }

    #[test]
    fn bad_extra_json_is_a_client_error() {
        let mut req = chat(false);
        req.extra_json = "[1,2]".to_string();
        let e = build_request(&upstream(None, ""), &req).expect_err("array");
        assert!(matches!(e.class, gatehouse_sdk::provider::exports::gatehouse::plugin::provider_api::ErrorClass::ClientError));
        req.extra_json = "{".to_string();
        assert!(build_request(&upstream(None, ""), &req).is_err());
    }

    #[test]
    fn config_options() {
        let cfg = r#"{"max_tokens_field":"max_completion_tokens","extra_headers":{"OpenAI-Organization":"org-1","Authorization":"nope"}}"#;
        let mut up = upstream(Some("sk-x"), cfg);
        up.base_url = "http://localhost:11434/v1/".to_string();
        let r = build_request(&up, &chat(false)).expect("ok");
        assert_eq!(r.url, "http://localhost:11434/v1/chat/completions");
        let b = body_of(&r);
        assert_eq!(b["max_completion_tokens"], json!(256));
        assert!(b.get("max_tokens").is_none());
        assert_eq!(header_of(&r, "OpenAI-Organization"), Some("org-1"));
        assert_eq!(r.headers.iter().filter(|h| h.name.eq_ignore_ascii_case("authorization")).count(), 1);
        assert_eq!(header_of(&r, "authorization"), Some("Bearer sk-x"));
    }

    #[test]
    fn temperature_is_written_as_written() {
        assert_eq!(json_f32(0.7), Some(json!(0.7)));
        assert_eq!(json_f32(2.0), Some(json!(2.0)));
        assert_eq!(json_f32(f32::NAN), None);
        let mut req = chat(false);
        req.temperature = f32::NAN;
        assert!(body_of(&build_request(&upstream(None, ""), &req).expect("ok")).get("temperature").is_none());
    }

    #[test]
    fn roles_including_tool() {
        let mut req = chat(false);
        req.messages.push(Message { role: Role::Assistant, content: "a".into() });
        req.messages.push(Message { role: Role::Tool, content: "t".into() });
        let b = body_of(&build_request(&upstream(None, ""), &req).expect("ok"));
        let roles: Vec<&str> = b["messages"].as_array().expect("array").iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    }
}
