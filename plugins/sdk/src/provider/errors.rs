//! What every provider adapter says when something fails: the failover
//! class of an HTTP status, upstream messages made safe to pass on, and the
//! errors for a broken answer, a misconfigured adapter and a request the
//! adapter cannot send.
//!
//! Upstream messages are passed on so the caller learns what went wrong, but
//! scrubbed first ([`scrub`]): the configured API key and anything that looks
//! like a key is masked, control characters are dropped and the length is
//! capped.

use super::{ErrorClass, ProviderError};

/// Longest upstream message passed on, in characters.
pub const MAX_MESSAGE_CHARS: usize = 300;

/// Prefixes of the key formats masked wherever they appear (OpenAI `sk-…`,
/// Anthropic `sk-ant-…`, Groq `gsk_…`): an upstream may quote a key of
/// another vendor (a proxy's), so every adapter masks them all.
const KEY_PREFIXES: [&str; 3] = ["sk-ant-", "sk-", "gsk_"];

/// The failover class of a non-2xx HTTP status.
///
/// 429 → rate-limit; 408 and 504 → timeout; other 4xx → client-error; other
/// 5xx (Anthropic's 529 `overloaded_error` too) → server-error. Anything else
/// that is not 2xx (1xx, an unfollowed 3xx) means the upstream misbehaved:
/// server-error.
pub fn class_of_status(status: u16) -> ErrorClass {
    match status {
        429 => ErrorClass::RateLimit,
        408 | 504 => ErrorClass::Timeout,
        400..=499 => ErrorClass::ClientError,
        _ => ErrorClass::ServerError,
    }
}

/// A 2xx answer the adapter cannot read: the upstream is broken, try elsewhere.
pub fn malformed(what: impl std::fmt::Display) -> ProviderError {
    ProviderError { class: ErrorClass::ServerError, message: format!("malformed upstream response: {what}") }
}

/// A fault of the adapter or its configuration (not of the caller).
pub fn adapter_fault(message: String) -> ProviderError {
    ProviderError { class: ErrorClass::ServerError, message }
}

/// A request the adapter cannot send because of what the caller asked for.
pub fn bad_request(message: String) -> ProviderError {
    ProviderError { class: ErrorClass::ClientError, message }
}

/// Mask secrets, drop control characters and cap the length of an upstream message.
pub fn scrub(message: &str, api_key: Option<&str>) -> String {
    let mut text = message.to_string();
    if let Some(key) = api_key.filter(|k| k.len() >= 4) {
        text = text.replace(key, "***");
    }
    let masked = mask_key_like(&text);
    let mut out: String = masked.chars().map(|c| if c.is_control() { ' ' } else { c }).take(MAX_MESSAGE_CHARS).collect();
    if masked.chars().count() > MAX_MESSAGE_CHARS {
        out.push('…');
    }
    out.trim().to_string()
}

/// Replace words that look like API keys (a [`KEY_PREFIXES`] prefix and at
/// least six more key characters) with their prefix and `***`.
fn mask_key_like(text: &str) -> String {
    let is_key_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '*';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(is_key_char) {
        out.push_str(&rest[..start]);
        let word_len = rest[start..].find(|c: char| !is_key_char(c)).unwrap_or(rest.len() - start);
        let word = &rest[start..start + word_len];
        match KEY_PREFIXES.iter().find(|p| word.starts_with(**p) && word.len() >= p.len() + 6) {
            Some(prefix) => {
                out.push_str(prefix);
                out.push_str("***");
            }
            None => out.push_str(word),
        }
        rest = &rest[start + word_len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::testing::class_name;

    #[test]
    fn statuses_map_to_classes() {
        for (status, want) in [
            (429, "rate-limit"),
            (408, "timeout"),
            (504, "timeout"),
            (500, "server-error"),
            (502, "server-error"),
            (529, "server-error"),
            (400, "client-error"),
            (404, "client-error"),
            (413, "client-error"),
            (302, "server-error"),
            (101, "server-error"),
        ] {
            assert_eq!(class_name(class_of_status(status)), want, "status {status}");
        }
    }

    #[test]
    fn scrub_caps_length_and_drops_control_chars() {
        let long = "a\nb".repeat(500);
        let s = scrub(&long, None);
        assert!(!s.contains('\n'));
        assert_eq!(s.chars().count(), MAX_MESSAGE_CHARS + 1);
        assert!(s.ends_with('…'));
        assert_eq!(scrub("  short\tone ", None), "short one");
    }

    #[test]
    fn scrub_masks_the_configured_key_whatever_its_shape() {
        assert_eq!(scrub("x MYKEY1234 y", Some("MYKEY1234")), "x *** y");
        assert_eq!(scrub("key tgp_v1_SECRETSECRET is not valid", Some("tgp_v1_SECRETSECRET")), "key *** is not valid");
        assert_eq!(scrub("abc", Some("abc")), "abc", "a key shorter than 4 characters is not searched for");
    }

    #[test]
    fn key_like_words_are_masked_to_their_prefix() {
        assert_eq!(mask_key_like("use sk-1234567890 or gsk_abcdefgh, not task-force"), "use sk-*** or gsk_***, not task-force");
        assert_eq!(mask_key_like("key sk-ant-api03-abcdefgh is bad"), "key sk-ant-*** is bad");
        assert_eq!(mask_key_like("sk-ab short"), "sk-ab short");
        assert_eq!(scrub("Incorrect API key provided: sk-proj-abcdefghijklmnop.", None), "Incorrect API key provided: sk-***.");
    }
}
