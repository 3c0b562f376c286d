//! A complete (non-streaming) Messages API response → [`Completion`].

use gatehouse_sdk::provider::{Completion, ProviderError, Upstream, Usage};
use serde_json::Value;

use crate::errors::{body_error, error_parts, http_error, malformed};

/// Anthropic `stop_reason` → OpenAI-style `finish_reason`.
pub fn finish_reason(stop_reason: &str) -> String {
    match stop_reason {
        "end_turn" | "stop_sequence" => "stop",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "tool_use" => "tool_calls",
        "refusal" => "content_filter",
        other => other,
    }
    .to_string()
}

/// Billed input tokens of an Anthropic `usage` object: plain input plus
/// cache writes and cache reads (`None` when no input field is present).
pub fn input_tokens(usage: &Value) -> Option<u32> {
    let fields = ["input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"];
    let counts: Vec<u64> = fields.iter().filter_map(|k| usage.get(*k).and_then(Value::as_u64)).collect();
    if counts.is_empty() { None } else { Some(saturate(counts.iter().sum())) }
}

/// `output_tokens` of an Anthropic `usage` object.
pub fn output_tokens(usage: &Value) -> Option<u32> {
    usage.get("output_tokens").and_then(Value::as_u64).map(saturate)
}

fn saturate(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Parse a response of any status: 2xx → the text blocks joined, the mapped
/// stop reason and usage; anything else → a classified [`ProviderError`].
pub fn parse_response(up: &Upstream, status: u16, body: &str) -> Result<Completion, ProviderError> {
    let key = up.api_key.as_deref();
    if !(200..300).contains(&status) {
        return Err(http_error(status, body, key));
    }
    let v: Value = serde_json::from_str(body).map_err(|e| malformed(format!("body is not JSON ({e})")))?;
    if v.get("type").and_then(Value::as_str) == Some("error") {
        let (kind, message) = error_parts(&v).unwrap_or_default();
        return Err(body_error(&kind, &message, key));
    }
    let blocks = v.get("content").and_then(Value::as_array).ok_or_else(|| malformed("no `content` array"))?;
    let content: String = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    let finish = v.get("stop_reason").and_then(Value::as_str).map_or_else(|| "stop".to_string(), finish_reason);
    let usage = v
        .get("usage")
        .filter(|u| u.is_object())
        .map(|u| Usage { prompt_tokens: input_tokens(u).unwrap_or(0), completion_tokens: output_tokens(u).unwrap_or(0) });
    Ok(Completion { content, finish_reason: finish, usage })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{class_name, upstream};

    #[test]
    fn message_response() {
        let c = parse_response(&upstream(None, ""), 200, include_str!("../fixtures/message.json")).expect("ok");
        assert_eq!(c.content, "Hello! It's nice to meet you. How can I help you today?");
        assert_eq!(c.finish_reason, "stop");
        let u = c.usage.expect("usage");
        assert_eq!((u.prompt_tokens, u.completion_tokens), (12, 17));
    }

    #[test]
    fn text_blocks_are_joined_and_others_skipped() {
        let c = parse_response(&upstream(None, ""), 200, include_str!("../fixtures/message_tool_use.json")).expect("ok");
        assert_eq!(c.content, "I'll check the weather. One moment.");
        assert_eq!(c.finish_reason, "tool_calls");
        let u = c.usage.expect("usage");
        assert_eq!((u.prompt_tokens, u.completion_tokens), (384 + 100 + 2000, 77), "cache tokens count as input");
    }

    #[test]
    fn stop_reasons() {
        for (from, to) in [
            ("end_turn", "stop"),
            ("stop_sequence", "stop"),
            ("max_tokens", "length"),
            ("tool_use", "tool_calls"),
            ("refusal", "content_filter"),
            ("pause_turn", "pause_turn"),
        ] {
            assert_eq!(finish_reason(from), to);
        }
    }

    #[test]
    fn malformed_2xx_is_a_server_error() {
        for body in ["", "{", "[]", "{\"id\":\"msg_1\"}"] {
            let e = parse_response(&upstream(None, ""), 200, body).expect_err(body);
            assert_eq!(class_name(e.class), "server-error", "{body}");
        }
    }

    #[test]
    fn error_statuses() {
        let up = upstream(Some("sk-ant-api03-SECRETSECRET"), "");
        let e = parse_response(&up, 529, include_str!("../fixtures/error_overloaded.json")).expect_err("529");
        assert_eq!(class_name(e.class), "server-error");
        let e = parse_response(&up, 429, r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#).expect_err("429");
        assert_eq!(class_name(e.class), "rate-limit");
        assert!(e.message.contains("rate_limit_error"));
        let e =
            parse_response(&up, 400, r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}"#)
                .expect_err("400");
        assert_eq!(class_name(e.class), "client-error");
        let e = parse_response(&up, 408, "").expect_err("408");
        assert_eq!(class_name(e.class), "timeout");
        let e = parse_response(&up, 200, include_str!("../fixtures/error_overloaded.json")).expect_err("error in 200");
        assert_eq!(class_name(e.class), "server-error");
    }
}
