//! Signing secrets and the delivery signature.
//!
//! `X-Gatehouse-Signature: t=<unix seconds>,v1=<hex>` where `<hex>` is the
//! lowercase hex HMAC-SHA256 of the bytes `<t>.<raw body>`, keyed by the full
//! secret string `whsec_…` as UTF-8 bytes (docs/decisions/webhooks.md). Exactly one `v1`.
//! The receivers in `examples/webhooks/` check the same thing in ten lines.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Prefix of every signing secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// Window the reference receivers accept around `t`.
pub const TOLERANCE_SECS: i64 = 300;

/// An endpoint's signing secret. Shown once (create, rotate); `Debug` never
/// prints it and there is no `Display` or `Serialize`, so it cannot end up in
/// a log line or a listing by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(String);

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl WebhookSecret {
    /// `whsec_` and 32 random bytes in base64url (43 characters).
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        WebhookSecret(format!("{SECRET_PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// A secret read back from storage.
    pub fn from_stored(s: String) -> Self {
        WebhookSecret(s)
    }

    /// The secret itself: to show it once to the admin, to store it, to sign.
    pub fn expose(&self) -> &str {
        &self.0
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC accepts keys of any length; this cannot fail.
        <Hmac<Sha256> as Mac>::new_from_slice(self.0.as_bytes()).unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"))
    }

    /// Lowercase hex HMAC-SHA256 of `<t>.<body>`.
    pub fn v1(&self, t: i64, body: &[u8]) -> String {
        let mut mac = self.mac();
        mac.update(t.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        hex::encode(mac.finalize().into_bytes())
    }

    /// The `X-Gatehouse-Signature` value for `body` signed at `t`.
    pub fn header(&self, t: i64, body: &[u8]) -> String {
        format!("t={t},v1={}", self.v1(t, body))
    }
}

/// Why a signature was refused (the reference receivers' check).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("malformed signature header")]
    Malformed,
    #[error("timestamp outside the tolerance window")]
    Stale,
    #[error("signature does not match")]
    Mismatch,
}

/// Check a signature header against the raw body, as a receiver does: exactly
/// one `t` and one `v1`, `|now - t| <= tolerance`, constant-time comparison.
pub fn verify(secret: &WebhookSecret, header: &str, body: &[u8], now: i64, tolerance: i64) -> Result<(), VerifyError> {
    let (mut t, mut v1) = (None, None);
    for part in header.split(',') {
        let (k, v) = part.trim().split_once('=').ok_or(VerifyError::Malformed)?;
        let slot = match k {
            "t" => &mut t,
            "v1" => &mut v1,
            _ => continue,
        };
        if slot.replace(v).is_some() {
            return Err(VerifyError::Malformed);
        }
    }
    let t: i64 = t.and_then(|t| t.parse().ok()).ok_or(VerifyError::Malformed)?;
    let v1 = v1.ok_or(VerifyError::Malformed)?;
    if (now - t).abs() > tolerance {
        return Err(VerifyError::Stale);
    }
    let expected = secret.v1(t, body);
    if expected.as_bytes().ct_eq(v1.as_bytes()).into() { Ok(()) } else { Err(VerifyError::Mismatch) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_have_the_documented_form_and_hide_in_debug() {
        let s = WebhookSecret::generate();
        assert!(s.expose().starts_with("whsec_"));
        assert_eq!(s.expose().len(), 6 + 43);
        assert_ne!(s, WebhookSecret::generate());
        assert_eq!(format!("{s:?}"), "***");
        assert_eq!(format!("{:?}", Some(&s)), "Some(***)");
    }

    #[test]
    fn known_answer() {
        // printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac 'whsec_test'
        let s = WebhookSecret::from_stored("whsec_test".into());
        assert_eq!(
            s.header(1_700_000_000, br#"{"a":1}"#),
            "t=1700000000,v1=38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789"
        );
    }

    #[test]
    fn verify_accepts_good_and_refuses_tampered_stale_and_malformed() {
        let s = WebhookSecret::generate();
        let body = br#"{"id":"evt_1","type":"webhook:test","created":1,"data":{}}"#;
        let h = s.header(1000, body);
        assert_eq!(verify(&s, &h, body, 1000, 300), Ok(()));
        assert_eq!(verify(&s, &h, body, 1300, 300), Ok(()));
        assert_eq!(verify(&s, &h, body, 1301, 300), Err(VerifyError::Stale));
        let mut other = body.to_vec();
        other[5] = b'X';
        assert_eq!(verify(&s, &h, &other, 1000, 300), Err(VerifyError::Mismatch));
        let wrong = WebhookSecret::generate();
        assert_eq!(verify(&wrong, &h, body, 1000, 300), Err(VerifyError::Mismatch));
        assert_eq!(verify(&s, "garbage", body, 1000, 300), Err(VerifyError::Malformed));
        assert_eq!(verify(&s, &format!("{h},v1=00"), body, 1000, 300), Err(VerifyError::Malformed));
    }
}
