//! Upstream failures → [`ProviderError`] with the failover class.
//!
//! Messages are taken from the upstream's error object when it has one, so
//! the caller learns what went wrong, but they are scrubbed first
//! ([`scrub`], shared by every adapter through the SDK).

pub use gatehouse_sdk::provider::errors::{adapter_fault, bad_request, class_of_status, malformed, scrub};
use gatehouse_sdk::provider::prelude::*;
use serde_json::Value;

/// The failover class of an error object that arrives with a 2xx status or
/// inside a stream, from its `type` / `code` strings.
pub fn class_of_error_object(err: &Value) -> ErrorClass {
    let field = |k: &str| err.get(k).and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
    let (kind, code) = (field("type"), field("code"));
    let numeric = err.get("code").and_then(Value::as_u64).and_then(|c| u16::try_from(c).ok());
    if kind.contains("rate_limit") || code.contains("rate_limit") {
        ErrorClass::RateLimit
    } else if kind.contains("timeout") || code.contains("timeout") {
        ErrorClass::Timeout
    } else if let Some(status) = numeric.filter(|s| (400..600).contains(s)) {
        class_of_status(status)
    } else {
        // An error reported after the upstream accepted the request is its fault.
        ErrorClass::ServerError
    }
}

/// The error object of an OpenAI-style error body, in any of the shapes
/// compatible servers use: `{"error": {...}}` (OpenAI, Groq, llama.cpp,
/// recent vLLM), `{"error": "text"}` (Ollama) or a top-level
/// `{"object": "error", "message": ...}` (older vLLM).
pub fn error_object(body: &Value) -> Option<Value> {
    match body.get("error") {
        Some(obj @ Value::Object(_)) => Some(obj.clone()),
        Some(Value::String(s)) => Some(serde_json::json!({ "message": s })),
        _ if body.get("object").and_then(Value::as_str) == Some("error") => Some(body.clone()),
        _ => None,
    }
}

/// The error for a non-2xx response.
pub fn http_error(status: u16, body: &str, api_key: Option<&str>) -> ProviderError {
    let detail = serde_json::from_str::<Value>(body)
        .ok()
        .as_ref()
        .and_then(error_object)
        .and_then(|e| e.get("message").and_then(Value::as_str).map(str::to_owned));
    let message = match detail {
        Some(m) if !m.trim().is_empty() => {
            format!("upstream returned HTTP {status}: {}", scrub(&m, api_key))
        }
        _ => format!("upstream returned HTTP {status}"),
    };
    ProviderError { class: class_of_status(status), message }
}

/// The error for an error object found in a 2xx body or a stream event.
pub fn object_error(err: &Value, api_key: Option<&str>) -> ProviderError {
    let msg = err.get("message").and_then(Value::as_str).unwrap_or("no message");
    ProviderError { class: class_of_error_object(err), message: format!("upstream error: {}", scrub(msg, api_key)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_sdk::provider::testing::class_name;

    fn class(e: &ProviderError) -> &'static str {
        class_name(e.class)
    }

    #[test]
    fn statuses_map_to_classes() {
        for (status, want) in [
            (429, "rate-limit"),
            (408, "timeout"),
            (504, "timeout"),
            (500, "server-error"),
            (502, "server-error"),
            (503, "server-error"),
            (400, "client-error"),
            (401, "client-error"),
            (404, "client-error"),
            (302, "server-error"),
        ] {
            assert_eq!(class(&http_error(status, "", None)), want, "status {status}");
        }
    }

    #[test]
    fn openai_error_message_is_used_and_key_masked() {
        let body = include_str!("../fixtures/error_401.json");
        let e = http_error(401, body, Some("sk-proj-abcdefghijklmnop"));
        assert_eq!(class(&e), "client-error");
        assert!(e.message.starts_with("upstream returned HTTP 401: Incorrect API key provided: sk-***."), "{}", e.message);
        assert!(!e.message.contains("abcd"));
    }

    #[test]
    fn exact_configured_key_is_masked_whatever_its_shape() {
        let body = r#"{"error":{"message":"key tgp_v1_SECRETSECRET is not valid"}}"#;
        let e = http_error(403, body, Some("tgp_v1_SECRETSECRET"));
        assert_eq!(e.message, "upstream returned HTTP 403: key *** is not valid");
    }

    #[test]
    fn compatible_error_shapes() {
        let ollama = r#"{"error":"model \"llama9\" not found, try pulling it first"}"#;
        assert!(http_error(404, ollama, None).message.contains("model \"llama9\" not found"));
        let vllm = r#"{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}"#;
        assert!(http_error(400, vllm, None).message.ends_with("max_tokens is too large"));
        let html = "<html><body>502 Bad Gateway</body></html>";
        assert_eq!(http_error(502, html, None).message, "upstream returned HTTP 502");
    }

    #[test]
    fn rate_limit_body() {
        let e = http_error(429, include_str!("../fixtures/error_429.json"), None);
        assert_eq!(class(&e), "rate-limit");
        assert!(e.message.contains("Rate limit reached"));
    }

    #[test]
    fn object_classes() {
        let v = |s: &str| serde_json::from_str::<Value>(s).expect("json");
        assert_eq!(class(&object_error(&v(r#"{"message":"x","type":"server_error"}"#), None)), "server-error");
        assert_eq!(class(&object_error(&v(r#"{"message":"x","code":"rate_limit_exceeded"}"#), None)), "rate-limit");
        assert_eq!(class(&object_error(&v(r#"{"message":"x","type":"timeout"}"#), None)), "timeout");
        assert_eq!(class(&object_error(&v(r#"{"message":"x","code":429}"#), None)), "rate-limit");
        assert_eq!(class(&object_error(&v(r#"{"message":"x"}"#), None)), "server-error");
    }
}
