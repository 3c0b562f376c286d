//! Signed receipts: every completed chat request mints a record of what
//! happened — request and response hashes, policy and its hash, shield
//! verdict, requested and served model, key id, timestamps — signed with the
//! gateway's Ed25519 key (kept in `<data_dir>/receipt-signing.key`, created
//! on first start, readable by the owner only).
//!
//! The signature covers the receipt's canonical JSON (keys sorted, no
//! spaces) exactly as `GET /api/receipts/{bundle_id}` returns it under
//! `receipt`; `GET /api/receipts/public-key` publishes the key. The README
//! shows how to verify a receipt offline.

use std::path::Path;

use base64::Engine as _;
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub const KEY_FILE: &str = "receipt-signing.key";

/// What a receipt attests.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Receipt {
    pub bundle_id: String,
    pub request_id: String,
    /// Hex SHA-256 of the request body as received.
    pub request_hash: String,
    /// Hex SHA-256 of the answer text.
    pub response_hash: String,
    pub policy: String,
    pub policy_hash: Option<String>,
    pub shield_verdict: String,
    pub requested_model: String,
    pub served_model: String,
    pub key_id: String,
    pub created_at: String,
    pub completed_at: String,
    /// Id of the signing key (first 16 hex of SHA-256 of the public key).
    pub signing_key_id: String,
}

/// A receipt and its signature, as stored and served.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SignedReceipt {
    pub receipt: Receipt,
    /// Base64 (standard) Ed25519 signature over the receipt's canonical JSON.
    pub signature: String,
}

/// The canonical bytes a signature covers: the receipt's JSON with its keys
/// sorted and no spaces (what `json.dumps(r, sort_keys=True,
/// separators=(",", ":"), ensure_ascii=False)` prints).
pub fn canonical(receipt: &Receipt) -> Vec<u8> {
    /// The receipt's fields in sorted order, serialised directly (no `Value` tree per request).
    #[derive(Serialize)]
    struct Sorted<'a> {
        bundle_id: &'a str,
        completed_at: &'a str,
        created_at: &'a str,
        key_id: &'a str,
        policy: &'a str,
        policy_hash: Option<&'a str>,
        request_hash: &'a str,
        request_id: &'a str,
        requested_model: &'a str,
        response_hash: &'a str,
        served_model: &'a str,
        shield_verdict: &'a str,
        signing_key_id: &'a str,
    }
    let Receipt {
        bundle_id,
        request_id,
        request_hash,
        response_hash,
        policy,
        policy_hash,
        shield_verdict,
        requested_model,
        served_model,
        key_id,
        created_at,
        completed_at,
        signing_key_id,
    } = receipt;
    serde_json::to_vec(&Sorted {
        bundle_id,
        completed_at,
        created_at,
        key_id,
        policy,
        policy_hash: policy_hash.as_deref(),
        request_hash,
        request_id,
        requested_model,
        response_hash,
        served_model,
        shield_verdict,
        signing_key_id,
    })
    .unwrap_or_default()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The gateway's signing key.
pub struct Signer25519 {
    key: SigningKey,
    key_id: String,
}

impl std::fmt::Debug for Signer25519 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer25519").field("key_id", &self.key_id).finish_non_exhaustive()
    }
}

impl Signer25519 {
    /// Load `<data_dir>/receipt-signing.key`, or create it (mode 0600).
    pub fn load_or_create(data_dir: &Path) -> anyhow::Result<Self> {
        let path = data_dir.join(KEY_FILE);
        let seed: [u8; 32] = if path.exists() {
            let text = std::fs::read_to_string(&path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            hex::decode(text.trim())
                .ok()
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| anyhow::anyhow!("{} is not a 32-byte hex key", path.display()))?
        } else {
            let mut seed = [0u8; 32];
            rand::rng().fill_bytes(&mut seed);
            let tmp = path.with_extension("tmp");
            write_private(&tmp, hex::encode(seed).as_bytes())?;
            std::fs::rename(&tmp, &path)?;
            seed
        };
        let key = SigningKey::from_bytes(&seed);
        let key_id = sha256_hex(key.verifying_key().as_bytes())[..16].to_owned();
        Ok(Signer25519 { key, key_id })
    }

    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    pub fn public_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    /// Base64 of the raw 32-byte public key.
    pub fn public_key_b64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.public_key().as_bytes())
    }

    pub fn sign(&self, receipt: Receipt) -> SignedReceipt {
        let sig = self.key.sign(&canonical(&receipt));
        SignedReceipt { receipt, signature: base64::engine::general_purpose::STANDARD.encode(sig.to_bytes()) }
    }
}

/// Check a signed receipt against a public key.
pub fn verify(public_key: &VerifyingKey, signed: &SignedReceipt) -> bool {
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(&signed.signature) else {
        return false;
    };
    let Ok(sig) = ed25519_dalek::Signature::from_slice(&bytes) else {
        return false;
    };
    public_key.verify_strict(&canonical(&signed.receipt), &sig).is_ok()
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok(())
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt() -> Receipt {
        Receipt {
            bundle_id: "rcpt_1".into(),
            request_id: "req-1".into(),
            request_hash: sha256_hex(b"{}"),
            response_hash: sha256_hex(b"hi"),
            policy: "internal".into(),
            policy_hash: None,
            shield_verdict: "allow".into(),
            requested_model: "echo/a".into(),
            served_model: "echo/a".into(),
            key_id: "key_1".into(),
            created_at: "2026-11-23T00:00:00.000Z".into(),
            completed_at: "2026-11-23T00:00:01.000Z".into(),
            signing_key_id: String::new(),
        }
    }

    #[test]
    fn canonical_bytes_are_the_receipt_with_sorted_keys() {
        let mut r = receipt();
        r.policy_hash = Some("ab\"c".into());
        r.served_model = "é/ü".into();
        // serde_json's map sorts keys: the reference form, as verifiers compute it.
        let reference = serde_json::to_vec(&serde_json::to_value(&r).expect("value")).expect("bytes");
        assert_eq!(String::from_utf8(canonical(&r)).expect("utf8"), String::from_utf8(reference).expect("utf8"));
        r.policy_hash = None;
        let reference = serde_json::to_vec(&serde_json::to_value(&r).expect("value")).expect("bytes");
        assert_eq!(canonical(&r), reference);
    }

    #[test]
    fn sign_verify_and_tamper() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = Signer25519::load_or_create(dir.path()).expect("key");
        let signed = s.sign(receipt());
        assert!(verify(&s.public_key(), &signed));
        let mut tampered = signed.clone();
        tampered.receipt.served_model = "openai/gpt-4o".into();
        assert!(!verify(&s.public_key(), &tampered));
        // The key persists.
        let again = Signer25519::load_or_create(dir.path()).expect("key");
        assert_eq!(again.key_id(), s.key_id());
        assert!(verify(&again.public_key(), &signed));
    }
}
