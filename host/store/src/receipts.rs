//! Signed receipts: every completed chat request mints a record of what
//! happened — request and response hashes, policy and its hash, shield
//! verdict, requested and served model, key id, timestamps — signed with the
//! gateway's Ed25519 key (kept in `<data_dir>/receipt-signing.key`, created
//! on first start, readable by the owner only).
//!
//! Receipts are signed by the store's writer when they are committed, one
//! signature per group commit: the receipts of one commit are the leaves of a
//! Merkle tree (SHA-256, RFC 6962's `0x00` leaf and `0x01` node prefixes), the
//! signature covers `gatehouse-receipts-v1:<hex root>`, and each receipt is
//! served with its path to the root under `batch` (the store keeps the batch
//! once, [`SignedBatch`], and derives the path when serving). A receipt committed alone has
//! no `batch`: its signature covers its canonical JSON (keys sorted, no
//! spaces) directly, the form receipts had before batching. Either way the
//! receipt is signed before it is durable, so a stored receipt changed later
//! no longer verifies. `GET /api/receipts/public-key` publishes the key, and
//! docs/api.md#receipts shows how to verify offline.

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
    /// Base64 (standard) Ed25519 signature: over the receipt's canonical JSON,
    /// or, with `batch`, over [`BATCH_DOMAIN`] followed by the hex root.
    pub signature: String,
    /// The receipt's place in the batch the signature covers; absent for a
    /// receipt signed alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchProof>,
}

/// A receipt-signing public key as published: `signing_key_id` in a receipt names it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PublishedKey {
    pub key_id: String,
    /// Base64 of the raw 32-byte Ed25519 public key.
    pub public_key: String,
}

/// What a batch signature covers: this prefix, then the hex Merkle root.
pub const BATCH_DOMAIN: &str = "gatehouse-receipts-v1:";

/// A receipt's inclusion in a signed batch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BatchProof {
    /// Hex SHA-256 Merkle root of the batch.
    pub root: String,
    /// Sibling hashes from the leaf up to the root.
    pub path: Vec<ProofStep>,
}

/// One sibling on the way to the root.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProofStep {
    /// Which side of the running hash the sibling goes on.
    pub side: Side,
    /// Hex SHA-256 of the sibling node.
    pub hash: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Left,
    Right,
}

type Hash = [u8; 32];

fn leaf_hash(canonical: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(canonical);
    h.finalize().into()
}

fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The Merkle tree over `leaves`, level by level from the leaves up to the
/// root. A level with an odd count carries its last node up unchanged (no
/// duplicate, so no two different batches share a root by repetition).
struct Tree(Vec<Vec<Hash>>);

impl Tree {
    fn new(leaves: Vec<Hash>) -> Self {
        let mut levels = vec![leaves];
        while let Some(level) = levels.last().filter(|l| l.len() > 1) {
            let up = level.chunks(2).map(|pair| if let [l, r] = pair { node_hash(l, r) } else { pair[0] }).collect();
            levels.push(up);
        }
        Tree(levels)
    }

    fn root(&self) -> Hash {
        self.0.last().and_then(|top| top.first()).copied().unwrap_or_default()
    }

    /// The sibling hashes from leaf `i` up to the root; `None` past the last leaf.
    fn path(&self, mut i: usize) -> Option<Vec<ProofStep>> {
        if i >= self.0.first().map_or(0, Vec::len) {
            return None;
        }
        let mut path = Vec::new();
        for level in &self.0[..self.0.len() - 1] {
            let sibling = i ^ 1;
            if sibling < level.len() {
                let side = if sibling < i { Side::Left } else { Side::Right };
                path.push(ProofStep { side, hash: hex::encode(level[sibling]) });
            }
            i /= 2;
        }
        Some(path)
    }
}

/// Fold a leaf's path up to the root it proves.
fn fold(leaf: Hash, path: &[ProofStep]) -> Option<Hash> {
    path.iter().try_fold(leaf, |acc, step| {
        let sibling: Hash = hex::decode(&step.hash).ok()?.try_into().ok()?;
        Some(match step.side {
            Side::Left => node_hash(&sibling, &acc),
            Side::Right => node_hash(&acc, &sibling),
        })
    })
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
    /// Load `<data_dir>/receipt-signing.key`, or create it (mode 0600) and
    /// the data dir if need be.
    pub fn load_or_create(data_dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(data_dir).map_err(|e| anyhow::anyhow!("cannot create data dir {}: {e}", data_dir.display()))?;
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
        b64(self.public_key().as_bytes())
    }

    /// The key as published and registered in a fleet's store.
    pub fn published(&self) -> PublishedKey {
        PublishedKey { key_id: self.key_id.clone(), public_key: self.public_key_b64() }
    }

    /// Sign one receipt on its own: the signature covers its canonical JSON.
    pub fn sign(&self, receipt: Receipt) -> SignedReceipt {
        let sig = self.key.sign(&canonical(&receipt));
        SignedReceipt { receipt, signature: b64(&sig.to_bytes()), batch: None }
    }

    /// Sign the receipts of one commit: one signature over their Merkle
    /// root, or, for one receipt alone, over its canonical JSON
    /// ([`Signer25519::sign`]). `None` for no receipts.
    pub fn seal_batch(&self, mut receipts: Vec<Receipt>) -> Option<Sealed> {
        if receipts.len() <= 1 {
            return receipts.pop().map(|r| Sealed::Alone(Box::new(self.sign(r))));
        }
        let leaves: Vec<Hash> = receipts.iter().map(|r| leaf_hash(&canonical(r))).collect();
        let hex_leaves = leaves.iter().map(hex::encode).collect();
        let root = hex::encode(Tree::new(leaves).root());
        let signature = b64(&self.key.sign(format!("{BATCH_DOMAIN}{root}").as_bytes()).to_bytes());
        Some(Sealed::Batch { batch: SignedBatch { root, signature, leaves: hex_leaves }, receipts })
    }

    /// [`Signer25519::seal_batch`], each receipt with its path: the form a receipt is served in.
    pub fn sign_batch(&self, receipts: Vec<Receipt>) -> Vec<SignedReceipt> {
        match self.seal_batch(receipts) {
            None => Vec::new(),
            Some(Sealed::Alone(signed)) => vec![*signed],
            Some(Sealed::Batch { batch, receipts }) => batch.with_paths(receipts),
        }
    }
}

/// One commit's receipts, signed.
#[derive(Debug, Clone, PartialEq)]
pub enum Sealed {
    /// A receipt committed alone, signed over its canonical JSON.
    Alone(Box<SignedReceipt>),
    /// Several, under one signature over their Merkle root. The batch is
    /// stored once and each receipt with its place in it; a receipt's path
    /// is derived from the leaves when it is served, so a receipt row does
    /// not carry the root, the signature and log2(n) sibling hashes (about
    /// 40 % of a served receipt's bytes, and most of what a commit wrote).
    Batch { batch: SignedBatch, receipts: Vec<Receipt> },
}

/// What one signature covers: the Merkle root of a commit's receipts, and the
/// leaves it was computed from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SignedBatch {
    /// Hex SHA-256 Merkle root; the signature covers [`BATCH_DOMAIN`] followed by it.
    pub root: String,
    /// Base64 (standard) Ed25519 signature.
    pub signature: String,
    /// Hex leaf hashes (`SHA-256(0x00 || canonical JSON)`), in the receipts' order.
    pub leaves: Vec<String>,
}

impl SignedBatch {
    /// Each of `receipts` (the batch's, in order) with its path to the root.
    pub fn with_paths(&self, receipts: Vec<Receipt>) -> Vec<SignedReceipt> {
        let Some(tree) = self.tree() else { return Vec::new() };
        receipts.into_iter().enumerate().map_while(|(i, receipt)| Some(self.served(receipt, tree.path(i)?))).collect()
    }

    /// The receipt at `leaf` with its path to the root; `None` if the batch
    /// has no such leaf or a malformed one (the served receipt would not verify).
    pub fn receipt_at(&self, leaf: usize, receipt: Receipt) -> Option<SignedReceipt> {
        let path = self.tree()?.path(leaf)?;
        Some(self.served(receipt, path))
    }

    fn tree(&self) -> Option<Tree> {
        let leaves = self.leaves.iter().map(|h| hex::decode(h).ok()?.try_into().ok()).collect::<Option<Vec<Hash>>>()?;
        Some(Tree::new(leaves))
    }

    fn served(&self, receipt: Receipt, path: Vec<ProofStep>) -> SignedReceipt {
        SignedReceipt { receipt, signature: self.signature.clone(), batch: Some(BatchProof { root: self.root.clone(), path }) }
    }
}

/// Signs the receipts of one commit, inside the store's writer.
pub trait ReceiptSealer: Send + Sync {
    /// `None` for no receipts.
    fn seal(&self, receipts: Vec<Receipt>) -> Option<Sealed>;
}

impl ReceiptSealer for Signer25519 {
    fn seal(&self, receipts: Vec<Receipt>) -> Option<Sealed> {
        self.seal_batch(receipts)
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Check a signed receipt against a public key.
pub fn verify(public_key: &VerifyingKey, signed: &SignedReceipt) -> bool {
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(&signed.signature) else {
        return false;
    };
    let Ok(sig) = ed25519_dalek::Signature::from_slice(&bytes) else {
        return false;
    };
    let bytes = canonical(&signed.receipt);
    match &signed.batch {
        None => public_key.verify_strict(&bytes, &sig).is_ok(),
        Some(batch) => {
            let Some(root) = fold(leaf_hash(&bytes), &batch.path) else {
                return false;
            };
            // The stated root is what was signed; it must be where the path leads.
            hex::encode(root) == batch.root && public_key.verify_strict(format!("{BATCH_DOMAIN}{}", batch.root).as_bytes(), &sig).is_ok()
        }
    }
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

/// A receipt for tests (here and in the store's).
#[cfg(test)]
pub(crate) fn sample(bundle_id: &str) -> Receipt {
    Receipt {
        bundle_id: bundle_id.into(),
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

/// `n` sample receipts, `rcpt_0` to `rcpt_{n-1}`, for tests (here and in the store's).
#[cfg(test)]
pub(crate) fn numbered(n: usize) -> Vec<Receipt> {
    (0..n).map(|i| sample(&format!("rcpt_{i}"))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt() -> Receipt {
        sample("rcpt_1")
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

    #[test]
    fn every_receipt_of_a_batch_verifies_with_its_path_and_one_signature() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = Signer25519::load_or_create(dir.path()).expect("key");
        for n in [1, 2, 3, 4, 5, 7, 8, 13, 64, 100] {
            let signed = s.sign_batch(numbered(n));
            assert_eq!(signed.len(), n);
            for (i, r) in signed.iter().enumerate() {
                assert_eq!(r.receipt.bundle_id, format!("rcpt_{i}"), "order kept");
                assert!(verify(&s.public_key(), r), "n={n} i={i}");
                // Paths are at most ceil(log2 n) long.
                let depth = r.batch.as_ref().map_or(0, |b| b.path.len());
                assert!(depth <= (n as f64).log2().ceil() as usize, "n={n} depth={depth}");
            }
            assert_eq!(signed[0].batch.is_none(), n == 1, "one receipt alone is signed directly");
            if n > 1 {
                let sigs: std::collections::HashSet<_> = signed.iter().map(|r| &r.signature).collect();
                assert_eq!(sigs.len(), 1, "one signature per batch");
            }
        }
    }

    #[test]
    fn a_sealed_batch_serves_each_receipt_with_the_path_signing_computed() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = Signer25519::load_or_create(dir.path()).expect("key");
        assert_eq!(s.seal_batch(Vec::new()), None);
        assert!(matches!(s.seal_batch(numbered(1)), Some(Sealed::Alone(_))));
        for n in [2, 3, 13] {
            let Some(Sealed::Batch { batch, receipts }) = s.seal_batch(numbered(n)) else { panic!("a batch of {n}") };
            assert_eq!(batch.leaves.len(), n);
            let served = batch.with_paths(receipts.clone());
            for (i, r) in receipts.into_iter().enumerate() {
                let one = batch.receipt_at(i, r).expect("leaf");
                assert_eq!(one, served[i]);
                assert!(verify(&s.public_key(), &one), "n={n} i={i}");
            }
            assert!(batch.receipt_at(n, crate::receipts::sample("x")).is_none(), "past the last leaf");
            // A receipt served at another leaf's place does not verify.
            let wrong = batch.receipt_at(0, served[1].receipt.clone()).expect("leaf");
            assert!(!verify(&s.public_key(), &wrong));
            let mut broken = batch.clone();
            broken.leaves[0] = "zz".into();
            assert!(broken.receipt_at(1, served[1].receipt.clone()).is_none(), "malformed leaf");
        }
    }

    #[test]
    fn a_changed_receipt_path_or_root_does_not_verify() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = Signer25519::load_or_create(dir.path()).expect("key");
        let signed = s.sign_batch(numbered(5));
        let pk = s.public_key();
        let mut r = signed[2].clone();
        r.receipt.served_model = "openai/gpt-4o".into();
        assert!(!verify(&pk, &r), "changed receipt");
        // Another receipt's proof with this receipt.
        let mut r = signed[2].clone();
        r.batch = signed[3].batch.clone();
        assert!(!verify(&pk, &r), "another leaf's path");
        let mut r = signed[2].clone();
        if let Some(b) = r.batch.as_mut() {
            b.path[0].side = match b.path[0].side {
                Side::Left => Side::Right,
                Side::Right => Side::Left,
            };
        }
        assert!(!verify(&pk, &r), "sibling on the wrong side");
        let mut r = signed[2].clone();
        if let Some(b) = r.batch.as_mut() {
            b.root = hex::encode([7u8; 32]);
        }
        assert!(!verify(&pk, &r), "a root the path does not lead to");
        let mut r = signed[2].clone();
        r.batch = None;
        assert!(!verify(&pk, &r), "a batch signature is not a signature over the receipt");
        let mut r = signed[2].clone();
        if let Some(b) = r.batch.as_mut() {
            b.path[0].hash = "zz".into();
        }
        assert!(!verify(&pk, &r), "malformed sibling");
        // Another key's signature.
        let other = tempfile::tempdir().expect("tmp");
        let o = Signer25519::load_or_create(other.path()).expect("key");
        assert!(!verify(&o.public_key(), &signed[2]));
    }

    #[test]
    fn the_json_form_is_the_documented_one() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = Signer25519::load_or_create(dir.path()).expect("key");
        let alone = serde_json::to_value(s.sign(receipt())).expect("json");
        assert!(alone.get("batch").is_none(), "no batch field when signed alone: {alone}");
        let two = serde_json::to_value(&s.sign_batch(numbered(2))[1]).expect("json");
        let step = &two["batch"]["path"][0];
        assert_eq!(step["side"], "left", "{two}");
        assert_eq!(step["hash"].as_str().map(str::len), Some(64));
        assert_eq!(two["batch"]["root"].as_str().map(str::len), Some(64));
        // A record stored before batching (no `batch`) still reads and verifies.
        let old = serde_json::json!({"receipt": alone["receipt"], "signature": alone["signature"]});
        let back: SignedReceipt = serde_json::from_value(old).expect("old form");
        assert!(verify(&s.public_key(), &back));
    }
}
