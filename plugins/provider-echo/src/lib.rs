//! `provider-echo`: an offline provider adapter, so a fresh install answers
//! with no API key. Model `echo/<anything>`; the answer is
//! `Echo: <last user message>`, cut at `max_tokens` words, with usage counted
//! in whitespace-separated words.
//!
//! It goes through the same host code as real providers: `build-request`
//! describes a request to `echo://local/chat` whose JSON body carries the
//! answer and its usage; the host's echo transport plays that back as a JSON
//! body, or as server-sent events (`data: {"delta": …}` per word, then
//! `data: {"done": true, "usage": …}`), and this adapter parses them like any
//! upstream's. The work per call is a few allocations: the host, not the
//! plugin, splits the stream into events.

use gatehouse_sdk::provider::{ChatRequest, Completion, ErrorClass, Guest, ProviderError, StreamEvent, StreamOutput, Upstream, Usage};
use gatehouse_sdk::provider::{Header, HttpRequest, PluginInfo, PluginKind, Role};
use serde_json::{Value, json};

fn words(s: &str) -> u32 {
    s.split_whitespace().count() as u32
}

/// The answer to a request and its usage.
pub fn answer(req: &ChatRequest) -> (String, Usage) {
    let last = req.messages.iter().rev().find(|m| m.role == Role::User).map(|m| m.content.as_str()).unwrap_or("");
    let full = format!("Echo: {last}");
    // Cut at max_tokens words, like a real model would.
    let end = full.split_inclusive(' ').take(req.max_tokens as usize).map(str::len).sum::<usize>();
    let text = full[..end].to_owned();
    let usage = Usage { prompt_tokens: req.messages.iter().map(|m| words(&m.content)).sum(), completion_tokens: words(&text) };
    (text, usage)
}

fn err(message: &str) -> ProviderError {
    ProviderError { class: ErrorClass::ServerError, message: message.to_owned() }
}

fn usage_json(u: &Usage) -> Value {
    json!({"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens})
}

fn usage_from(v: &Value) -> Option<Usage> {
    Some(Usage { prompt_tokens: v.get("prompt_tokens")?.as_u64()? as u32, completion_tokens: v.get("completion_tokens")?.as_u64()? as u32 })
}

struct Echo;

impl Guest for Echo {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "provider-echo".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Provider,
            description: "Offline echo provider: answers from the request itself".into(),
        }
    }

    fn build_request(up: Upstream, request: ChatRequest) -> Result<HttpRequest, ProviderError> {
        let (text, usage) = answer(&request);
        let body = json!({
            "model": request.model,
            "stream": request.stream,
            "answer": text,
            "usage": usage_json(&usage),
        });
        Ok(HttpRequest {
            method: "POST".into(),
            url: format!("{}/chat", up.base_url.trim_end_matches('/')),
            headers: vec![Header { name: "content-type".into(), value: "application/json".into() }],
            body: body.to_string(),
        })
    }

    fn parse_response(_up: Upstream, status: u16, body: String) -> Result<Completion, ProviderError> {
        if !(200..300).contains(&status) {
            return Err(err(&format!("echo transport answered {status}")));
        }
        let v: Value = serde_json::from_str(&body).map_err(|_| err("echo body is not JSON"))?;
        Ok(Completion {
            content: v["answer"].as_str().unwrap_or_default().to_owned(),
            finish_reason: "stop".into(),
            usage: usage_from(&v["usage"]),
        })
    }

    fn parse_stream_event(_up: Upstream, _state: String, event: StreamEvent) -> Result<StreamOutput, ProviderError> {
        let v: Value = serde_json::from_str(&event.data).map_err(|_| err("echo event is not JSON"))?;
        let done = v["done"].as_bool().unwrap_or(false);
        Ok(StreamOutput {
            content: v["delta"].as_str().unwrap_or_default().to_owned(),
            finish_reason: done.then(|| "stop".to_owned()),
            usage: if done { usage_from(&v["usage"]) } else { None },
            done,
            state: String::new(),
        })
    }
}

gatehouse_sdk::export_provider!(Echo);

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_sdk::provider::Message;

    fn req(text: &str, max_tokens: u32) -> ChatRequest {
        ChatRequest {
            model: "default".into(),
            messages: vec![Message { role: Role::System, content: "be kind".into() }, Message { role: Role::User, content: text.into() }],
            temperature: 0.7,
            max_tokens,
            stream: false,
            stop: vec![],
            extra_json: String::new(),
        }
    }

    #[test]
    fn answers_the_last_user_message() {
        let (text, usage) = answer(&req("hello there", 100));
        assert_eq!(text, "Echo: hello there");
        assert_eq!(usage.prompt_tokens, 4);
        assert_eq!(usage.completion_tokens, 3);
    }

    #[test]
    fn max_tokens_cuts_the_answer() {
        let (text, usage) = answer(&req("one two three four", 2));
        assert_eq!(text, "Echo: one ");
        assert_eq!(usage.completion_tokens, 2);
        assert_eq!(answer(&req("multi-byte: héllo wörld", 3)).0, "Echo: multi-byte: héllo ");
    }

    #[test]
    fn a_conversation_without_a_user_message_still_answers() {
        let mut r = req("ignored", 10);
        r.messages.retain(|m| m.role != Role::User);
        assert_eq!(answer(&r).0, "Echo: ");
    }

    #[test]
    fn errors_from_the_transport_are_server_errors() {
        let up = Upstream { base_url: "echo://local".into(), api_key: None, config_json: "{}".into() };
        let e = Echo::parse_response(up.clone(), 400, "{}".into()).expect_err("400");
        assert_eq!(e.class, ErrorClass::ServerError);
        let e = Echo::parse_response(up, 200, "not json".into()).expect_err("garbage");
        assert_eq!(e.class, ErrorClass::ServerError);
    }

    #[test]
    fn round_trip_through_the_echo_protocol() {
        let up = Upstream { base_url: "echo://local".into(), api_key: None, config_json: "{}".into() };
        let http = Echo::build_request(up.clone(), req("hi", 10)).expect("request");
        assert_eq!(http.url, "echo://local/chat");
        let body: Value = serde_json::from_str(&http.body).expect("JSON body");
        assert_eq!((body["answer"].as_str(), body["stream"].as_bool()), (Some("Echo: hi"), Some(false)));
        assert_eq!(body["usage"]["completion_tokens"], 2);
        let c = Echo::parse_response(up.clone(), 200, http.body.clone()).expect("completion");
        assert_eq!(c.content, "Echo: hi");
        let ev = StreamEvent { event: String::new(), data: r#"{"delta":"Echo: "}"#.into() };
        assert_eq!(Echo::parse_stream_event(up.clone(), String::new(), ev).expect("delta").content, "Echo: ");
        let done = StreamEvent { event: String::new(), data: r#"{"done":true,"usage":{"prompt_tokens":1,"completion_tokens":2}}"#.into() };
        let out = Echo::parse_stream_event(up, String::new(), done).expect("done");
        assert!(out.done);
        assert_eq!(out.usage.expect("usage").completion_tokens, 2);
    }
}
