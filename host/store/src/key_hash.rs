//! The at-rest hash of an API key secret: the store looks keys up by it.
//! Keys are high-entropy, so a single SHA-256 is the right hash (a slow
//! password hash would add milliseconds to every request and protect nothing
//! more).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// SHA-256 of a key secret. Serialised as lowercase hex.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyHash(pub [u8; 32]);

impl KeyHash {
    pub fn of(secret: &str) -> Self {
        KeyHash(Sha256::digest(secret.as_bytes()).into())
    }

    /// Constant-time equality, for comparing against a stored hash.
    pub fn ct_eq(&self, other: &KeyHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl std::fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyHash({}…)", &hex::encode(self.0)[..8])
    }
}

impl Serialize for KeyHash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(self.0))
    }
}

impl<'de> Deserialize<'de> for KeyHash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let bytes = hex::decode(&s).map_err(serde::de::Error::custom)?;
        let arr: [u8; 32] = bytes.try_into().map_err(|_| serde::de::Error::custom("key hash must be 32 bytes"))?;
        Ok(KeyHash(arr))
    }
}
