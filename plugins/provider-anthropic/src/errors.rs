//! Anthropic failures → [`ProviderError`] with the failover class.
//!
//! Anthropic's error body is `{"type":"error","error":{"type","message"}}`,
//! both for HTTP errors and for `event: error` inside a stream. Messages are
//! scrubbed before they leave ([`scrub`], shared by every adapter through
//! the SDK).

pub use gatehouse_sdk::provider::errors::{adapter_fault, bad_request, class_of_status, malformed, scrub};
use gatehouse_sdk::provider::prelude::*;
use serde_json::Value;

/// The failover class of an Anthropic error `type`, for errors that come
/// without a useful status (inside a stream, or in a 2xx body).
pub fn class_of_error_type(kind: &str) -> ErrorClass {
    match kind {
        "rate_limit_error" => ErrorClass::RateLimit,
        "timeout_error" => ErrorClass::Timeout,
        "invalid_request_error"
        | "authentication_error"
        | "permission_error"
        | "not_found_error"
        | "request_too_large"
        | "billing_error" => ErrorClass::ClientError,
        // `overloaded_error`, `api_error` and anything new: the upstream's fault.
        _ => ErrorClass::ServerError,
    }
}

/// `(type, message)` of an Anthropic error body, if it is one.
pub fn error_parts(body: &Value) -> Option<(String, String)> {
    let err = body.get("error")?;
    let text = |k: &str| err.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    match err {
        Value::Object(_) => Some((text("type"), text("message"))),
        Value::String(s) => Some((String::new(), s.clone())),
        _ => None,
    }
}

/// The error for a non-2xx response.
pub fn http_error(status: u16, body: &str, api_key: Option<&str>) -> ProviderError {
    let parts = serde_json::from_str::<Value>(body).ok().as_ref().and_then(error_parts);
    let message = match parts {
        Some((kind, msg)) if !msg.trim().is_empty() => {
            // The type is upstream text too: scrubbed like the message (found
            // by the `provider_adapters` fuzz target).
            let kind = if kind.is_empty() { String::new() } else { format!("{}: ", scrub(&kind, api_key)) };
            format!("upstream returned HTTP {status}: {kind}{}", scrub(&msg, api_key))
        }
        _ => format!("upstream returned HTTP {status}"),
    };
    ProviderError { class: class_of_status(status), message }
}

/// The error for an error object in a 2xx body or an `error` stream event.
pub fn body_error(kind: &str, message: &str, api_key: Option<&str>) -> ProviderError {
    let shown = if kind.is_empty() { "error".to_string() } else { scrub(kind, api_key) };
    ProviderError { class: class_of_error_type(kind), message: format!("upstream {shown}: {}", scrub(message, api_key)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::class_name;

    #[test]
    fn the_key_is_masked_in_the_error_type_too() {
        let key = "sk-ant-api03-secretsecret";
        let body = format!(r#"{{"type":"error","error":{{"type":"x{key}","message":"m {key}"}}}}"#);
        let e = http_error(529, &body, Some(key));
        assert!(!e.message.contains(key) && !e.message.contains("secretsecret"), "{}", e.message);
        let e = body_error(&format!("x{key}"), key, Some(key));
        assert!(!e.message.contains(key) && !e.message.contains("secretsecret"), "{}", e.message);
    }

    #[test]
    fn statuses_map_to_classes() {
        for (status, want) in [
            (429, "rate-limit"),
            (529, "server-error"),
            (500, "server-error"),
            (503, "server-error"),
            (408, "timeout"),
            (504, "timeout"),
            (400, "client-error"),
            (401, "client-error"),
            (403, "client-error"),
            (404, "client-error"),
            (413, "client-error"),
        ] {
            assert_eq!(class_name(http_error(status, "", None).class), want, "status {status}");
        }
    }

    #[test]
    fn anthropic_error_bodies() {
        let e = http_error(529, include_str!("../fixtures/error_overloaded.json"), None);
        assert_eq!(class_name(e.class), "server-error");
        assert_eq!(e.message, "upstream returned HTTP 529: overloaded_error: Overloaded");
        let e = http_error(401, include_str!("../fixtures/error_auth.json"), Some("sk-ant-api03-SECRETSECRET"));
        assert_eq!(class_name(e.class), "client-error");
        assert_eq!(e.message, "upstream returned HTTP 401: authentication_error: invalid x-api-key");
        let e = http_error(502, "<html>bad gateway</html>", None);
        assert_eq!(e.message, "upstream returned HTTP 502");
    }

    #[test]
    fn keys_are_masked() {
        let e = http_error(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"key sk-ant-api03-abcdefgh is bad"}}"#,
            None,
        );
        assert!(e.message.ends_with("key sk-ant-*** is bad"), "{}", e.message);
        assert_eq!(scrub("x MYKEY1234 y", Some("MYKEY1234")), "x *** y");
    }

    #[test]
    fn error_types_map_to_classes() {
        for (kind, want) in [
            ("overloaded_error", "server-error"),
            ("api_error", "server-error"),
            ("rate_limit_error", "rate-limit"),
            ("timeout_error", "timeout"),
            ("invalid_request_error", "client-error"),
            ("authentication_error", "client-error"),
            ("something_new", "server-error"),
        ] {
            assert_eq!(class_name(class_of_error_type(kind)), want, "{kind}");
        }
    }
}
