//! Normalised chat request → OpenAI `POST {base}/chat/completions`.

use gatehouse_sdk::provider::{ChatRequest, ProviderError, Upstream};
use gatehouse_sdk::provider::{Header, HttpRequest, Message, Role};
use serde::Serialize;
use serde_json::{Map, Value};

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

/// The request body as OpenAI reads it, serialised straight from the
/// normalised request (no `serde_json::Value` tree: this runs on every
/// request, and building and dropping a tree cost more than the rest of the
/// call). `extra` holds the caller's `extra-json` fields minus [`RESERVED`].
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Messages<'a>,
    /// Skipped when NaN or infinite. serde_json writes an `f32` in its
    /// shortest form (`0.7`, not `0.699999988079071`).
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// `[{"role": …, "content": …}, …]` from the WIT messages, without copying them.
struct Messages<'a>(&'a [Message]);

impl Serialize for Messages<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct One<'a> {
            role: &'static str,
            content: &'a str,
        }
        s.collect_seq(self.0.iter().map(|m| One { role: role_name(m.role), content: &m.content }))
    }
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
    Ok(HttpRequest { method: "POST".to_string(), url: format!("{base}/chat/completions"), headers, body })
}

/// The JSON body: the normalised fields, then `extra-json` for the rest.
pub fn build_body(cfg: &OpenAiConfig, req: &ChatRequest) -> Result<String, ProviderError> {
    let mut extra = parse_extra(&req.extra_json)?;
    extra.retain(|k, _| !RESERVED.contains(&k.as_str()));
    let completion_field = cfg.max_tokens_field == "max_completion_tokens";
    let body = Body {
        model: &req.model,
        messages: Messages(&req.messages),
        temperature: req.temperature.is_finite().then_some(req.temperature),
        max_tokens: (!completion_field).then_some(req.max_tokens),
        max_completion_tokens: completion_field.then_some(req.max_tokens),
        stop: &req.stop,
        stream: req.stream,
        stream_options: (req.stream && cfg.include_usage).then_some(StreamOptions { include_usage: true }),
        extra,
    };
    serde_json::to_string(&body).map_err(|e| adapter_fault(format!("cannot serialise the request body: {e}")))
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
    use serde_json::json;

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
        assert!(matches!(e.class, gatehouse_sdk::provider::ErrorClass::ClientError));
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
        let mut req = chat(false);
        for (t, written) in [(0.7, "\"temperature\":0.7,"), (2.0, "\"temperature\":2.0,"), (0.1, "\"temperature\":0.1,")] {
            req.temperature = t;
            let body = build_request(&upstream(None, ""), &req).expect("ok").body;
            assert!(body.contains(written), "{body}");
        }
        for t in [f32::NAN, f32::INFINITY] {
            req.temperature = t;
            assert!(body_of(&build_request(&upstream(None, ""), &req).expect("ok")).get("temperature").is_none());
        }
    }

    #[test]
    fn the_body_is_one_flat_object_with_each_key_once() {
        let mut req = chat(true);
        req.stop = vec!["x".to_string()];
        req.extra_json = r#"{"seed":7,"temperature":1.5,"user":"u-1"}"#.to_string();
        let body = build_request(&upstream(None, ""), &req).expect("ok").body;
        let b: serde_json::Map<String, Value> = serde_json::from_str(&body).expect("object");
        let mut keys: Vec<&str> = b.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["max_tokens", "messages", "model", "seed", "stop", "stream", "stream_options", "temperature", "user"]);
        assert_eq!(body.matches("\"temperature\"").count(), 1, "{body}");
        assert_eq!(b["temperature"], json!(0.7));
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
