//! API key secrets and their hashes.
//!
//! A key is `sk-` followed by 43 base64url characters (32 random bytes). Keys
//! are high-entropy, so a single SHA-256 is the right at-rest hash (as for
//! GitHub or Stripe tokens): a slow password hash would add milliseconds to
//! every request and protect nothing more. The hash doubles as the lookup key.

use base64::Engine as _;
use rand::RngCore;

pub use gatehouse_store::KeyHash;

/// Prefix of every API key.
pub const KEY_PREFIX: &str = "sk-";
/// Shortest secret accepted (also for a bootstrap key from the environment).
pub const MIN_KEY_LEN: usize = 32;

/// A key secret in plain text. Shown once at creation; `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKeySecret(String);

impl std::fmt::Debug for ApiKeySecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKeySecret(***)")
    }
}

impl ApiKeySecret {
    /// A fresh random key.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        let body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        ApiKeySecret(format!("{KEY_PREFIX}{body}"))
    }

    /// Accept a secret given by an operator (e.g. a bootstrap key), checking its form.
    pub fn parse(s: &str) -> Result<Self, String> {
        if !s.starts_with(KEY_PREFIX) {
            return Err(format!("an API key must start with `{KEY_PREFIX}`"));
        }
        if s.len() < MIN_KEY_LEN {
            return Err(format!("an API key must be at least {MIN_KEY_LEN} characters long"));
        }
        if !s.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("an API key may only contain printable ASCII characters".into());
        }
        Ok(ApiKeySecret(s.to_owned()))
    }

    /// The secret itself; only for showing it once to its owner.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What listings show to recognise a key: `sk-` and four characters.
    pub fn display_prefix(&self) -> String {
        self.0.chars().take(KEY_PREFIX.len() + 4).collect()
    }

    pub fn hash(&self) -> KeyHash {
        KeyHash::of(&self.0)
    }
}

/// Pull the key out of an `Authorization: Bearer sk-…` header value.
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_distinct_and_well_formed() {
        let a = ApiKeySecret::generate();
        let b = ApiKeySecret::generate();
        assert_ne!(a, b);
        assert!(a.expose().starts_with("sk-"));
        assert_eq!(a.expose().len(), 3 + 43);
        assert!(ApiKeySecret::parse(a.expose()).is_ok());
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let a = ApiKeySecret::generate();
        assert!(!format!("{a:?}").contains(&a.expose()[3..]));
    }

    #[test]
    fn parse_rejects_bad_keys() {
        assert!(ApiKeySecret::parse("pk-0123456789012345678901234567890123").is_err());
        assert!(ApiKeySecret::parse("sk-short").is_err());
        assert!(ApiKeySecret::parse("sk-0123456789012345678901234567890 123").is_err());
    }

    #[test]
    fn hash_round_trips_through_serde() {
        let h = ApiKeySecret::generate().hash();
        let json = serde_json::to_string(&h).expect("serialise");
        let back: KeyHash = serde_json::from_str(&json).expect("parse");
        assert!(h.ct_eq(&back));
    }

    #[test]
    fn bearer_parsing() {
        assert_eq!(bearer_token("Bearer sk-abc"), Some("sk-abc"));
        assert_eq!(bearer_token("bearer   sk-abc "), Some("sk-abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("sk-abc"), None);
    }
}
