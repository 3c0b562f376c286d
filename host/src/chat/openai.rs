//! `/api/external/v1/*`: the OpenAI-compatible variant.
//!
//! The body is OpenAI's Chat Completions request; Gatehouse's own fields
//! (`models`, `fallback_models`, `redundancy`, `smltp_policy`,
//! `prompt_shield`, `user_id`, `conversation_id`) are accepted too, as SDKs
//! send them through `extra_body`. There is no retrieval on this route.

use serde_json::{Value, json};

use super::format::Format;
use super::request::{self, ChatParams, TimeoutDefaults, ZERO_KNOWLEDGE};
use crate::error::ChatError;

/// OpenAI request fields that are accepted and ignored (they do not change
/// what the gateway does).
const IGNORED: &[&str] = &["store", "metadata", "service_tier", "logprobs", "top_logprobs", "modalities", "prediction"];

/// Flatten OpenAI message content: a string, or an array of `{type: "text", text}` parts.
fn content_text(i: usize, v: &Value) -> Result<String, ChatError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut out = Vec::with_capacity(parts.len());
            for (j, p) in parts.iter().enumerate() {
                match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                    (Some("text"), Some(t)) => out.push(t),
                    _ => {
                        return Err(ChatError::invalid_messages(format!("`messages[{i}].content[{j}]`: only text parts are supported")));
                    }
                }
            }
            Ok(out.join("\n"))
        }
        _ => Err(ChatError::invalid_messages(format!("`messages[{i}].content` must be a string or text parts"))),
    }
}

/// Parse an OpenAI-style body into the same validated request as `POST /chat/completions`.
pub fn parse(body: &[u8], defaults: TimeoutDefaults) -> Result<(ChatParams, Format), ChatError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| ChatError::invalid_request(format!("the body is not valid JSON: {e}")))?;
    let Value::Object(mut obj) = value else {
        return Err(ChatError::invalid_request("the body must be a JSON object"));
    };
    match obj.remove("index") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == ZERO_KNOWLEDGE => {}
        Some(_) => {
            return Err(ChatError::invalid_request("this route does not support retrieval; use POST /chat/completions with `index`"));
        }
    }
    if let Some(u) = obj.remove("use_rag")
        && u == Value::Bool(true)
    {
        return Err(ChatError::invalid_request("this route does not support retrieval (`use_rag`)"));
    }
    match obj.remove("n") {
        None | Some(Value::Null) => {}
        Some(n) if n.as_u64() == Some(1) => {}
        Some(_) => return Err(ChatError::invalid_request("`n` must be 1: one choice per request")),
    }
    if let Some(m) = obj.remove("max_completion_tokens") {
        obj.entry("max_tokens").or_insert(m);
    }
    for k in IGNORED {
        obj.remove(*k);
    }
    let include_usage = match obj.remove("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(o)) => o.get("include_usage").and_then(Value::as_bool).unwrap_or(false),
        Some(_) => return Err(ChatError::invalid_request("`stream_options` must be an object")),
    };
    if let Some(Value::Array(msgs)) = obj.get_mut("messages") {
        for (i, m) in msgs.iter_mut().enumerate() {
            let Value::Object(m) = m else { continue };
            if m.get("role").and_then(Value::as_str) == Some("developer") {
                m.insert("role".into(), json!("system"));
            }
            if let Some(c) = m.get("content") {
                let text = content_text(i, c)?;
                m.insert("content".into(), Value::String(text));
            }
        }
    }
    obj.insert("index".into(), json!(ZERO_KNOWLEDGE));
    obj.insert("use_rag".into(), json!(false));
    let params = request::from_object(obj, defaults)?;
    Ok((params, Format::OpenAi { include_usage }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: TimeoutDefaults = TimeoutDefaults { timeout_ms: 1000, first_token_timeout_ms: 1000 };

    fn p(v: Value) -> Result<(ChatParams, Format), ChatError> {
        parse(v.to_string().as_bytes(), D)
    }

    #[test]
    fn openai_body_maps_onto_the_pipeline() {
        let (r, f) = p(json!({
            "model": "echo/x",
            "messages": [{"role": "developer", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "max_completion_tokens": 10,
            "stream": true,
            "stream_options": {"include_usage": true},
            "n": 1,
            "store": false,
            "models": ["echo/x", "echo/y"]
        }))
        .expect("valid");
        assert_eq!(f, Format::OpenAi { include_usage: true });
        assert_eq!(r.index, ZERO_KNOWLEDGE);
        assert!(!r.use_rag);
        assert_eq!(r.max_tokens, 10);
        assert_eq!(r.messages[0].content, "be brief");
        assert_eq!(r.messages[1].content, "hi");
        assert_eq!(r.chain.len(), 2);
    }

    #[test]
    fn no_retrieval_and_one_choice() {
        assert!(p(json!({"model":"echo/x","messages":[{"role":"user","content":"a"}],"index":"docs"})).is_err());
        assert!(p(json!({"model":"echo/x","messages":[{"role":"user","content":"a"}],"n":2})).is_err());
        assert!(p(json!({"model":"echo/x","messages":[{"role":"user","content":[{"type":"image_url"}]}]})).is_err());
    }
}
