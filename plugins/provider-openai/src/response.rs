//! A complete (non-streaming) OpenAI response → [`Completion`].

use gatehouse_sdk::provider::exports::gatehouse::plugin::provider_api::{Completion, ProviderError, Upstream, Usage};
use serde_json::Value;

use crate::errors::{error_object, http_error, malformed, object_error};

/// Parse a response of any status: 2xx → the first choice's text, finish
/// reason and usage; anything else → a classified [`ProviderError`].
pub fn parse_response(up: &Upstream, status: u16, body: &str) -> Result<Completion, ProviderError> {
    let key = up.api_key.as_deref();
    if !(200..300).contains(&status) {
        return Err(http_error(status, body, key));
    }
    let v: Value = serde_json::from_str(body).map_err(|e| malformed(format!("body is not JSON ({e})")))?;
    if let Some(err) = error_object(&v) {
        return Err(object_error(&err, key));
    }
    let choice = first_choice(&v).ok_or_else(|| malformed("no `choices[0]`"))?;
    let message = choice.get("message").ok_or_else(|| malformed("no `choices[0].message`"))?;
    let content = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        // `null` when the model answered with tool calls or a refusal only.
        None | Some(Value::Null) => String::new(),
        Some(_) => return Err(malformed("`choices[0].message.content` is not a string")),
    };
    let finish_reason = choice.get("finish_reason").and_then(Value::as_str).unwrap_or("stop").to_string();
    Ok(Completion { content, finish_reason, usage: usage_of(&v) })
}

/// The choice with `index` 0, or the first one listed.
pub fn first_choice(v: &Value) -> Option<&Value> {
    let choices = v.get("choices")?.as_array()?;
    choices.iter().find(|c| c.get("index").and_then(Value::as_u64) == Some(0)).or_else(|| choices.first())
}

/// `usage`, or Groq's `x_groq.usage` on streams; `None` when absent or null.
pub fn usage_of(v: &Value) -> Option<Usage> {
    let u = v.get("usage").filter(|u| u.is_object()).or_else(|| v.get("x_groq").and_then(|x| x.get("usage")).filter(|u| u.is_object()))?;
    let count = |k: &str| u.get(k).and_then(Value::as_u64).map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    Some(Usage { prompt_tokens: count("prompt_tokens").unwrap_or(0), completion_tokens: count("completion_tokens").unwrap_or(0) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{class_name, upstream};

    #[test]
    fn openai_completion() {
        let c = parse_response(&upstream(None, ""), 200, include_str!("../fixtures/completion.json")).expect("ok");
        assert_eq!(c.content, "Hello! How can I help you today?");
        assert_eq!(c.finish_reason, "stop");
        let u = c.usage.expect("usage");
        assert_eq!((u.prompt_tokens, u.completion_tokens), (19, 9));
    }

    #[test]
    fn tool_call_completion_has_empty_content() {
        let c = parse_response(&upstream(None, ""), 200, include_str!("../fixtures/completion_tool_calls.json")).expect("ok");
        assert_eq!(c.content, "");
        assert_eq!(c.finish_reason, "tool_calls");
    }

    #[test]
    fn ollama_completion_with_length_finish() {
        let c = parse_response(&upstream(None, ""), 200, include_str!("../fixtures/completion_ollama.json")).expect("ok");
        assert_eq!(c.content, "The sky is blue because");
        assert_eq!(c.finish_reason, "length");
        assert_eq!(c.usage.map(|u| u.completion_tokens), Some(5));
    }

    #[test]
    fn malformed_2xx_is_a_server_error() {
        for body in ["", "{\"id\":", "[]", "{\"choices\":[]}", "{\"choices\":[{\"message\":{\"content\":5}}]}"] {
            let e = parse_response(&upstream(None, ""), 200, body).expect_err(body);
            assert_eq!(class_name(e.class), "server-error", "{body}");
            assert!(e.message.starts_with("malformed upstream response"), "{}", e.message);
        }
    }

    #[test]
    fn error_object_in_a_200_is_an_error() {
        let body = r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}"#;
        let e = parse_response(&upstream(None, ""), 200, body).expect_err("error");
        assert_eq!(class_name(e.class), "server-error");
        assert!(e.message.contains("The server had an error"));
    }

    #[test]
    fn error_statuses() {
        let up = upstream(Some("sk-proj-abcdefghijklmnop"), "");
        let e = parse_response(&up, 401, include_str!("../fixtures/error_401.json")).expect_err("401");
        assert_eq!(class_name(e.class), "client-error");
        assert!(!e.message.contains("mnop"));
        let e = parse_response(&up, 429, include_str!("../fixtures/error_429.json")).expect_err("429");
        assert_eq!(class_name(e.class), "rate-limit");
        let e = parse_response(&up, 503, "upstream connect error").expect_err("503");
        assert_eq!(class_name(e.class), "server-error");
        let e = parse_response(&up, 504, "").expect_err("504");
        assert_eq!(class_name(e.class), "timeout");
    }
}
