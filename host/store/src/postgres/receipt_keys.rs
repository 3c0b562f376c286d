//! The fleet's receipt-signing public keys (`receipt_keys`): each host
//! registers its own at start; the public-key route lists them all.

use super::{PgStore, db_error};
use crate::receipts::PublishedKey;
use crate::{StoreError, StoreResult};

impl PgStore {
    /// Register a host's key; registering it again is a no-op. An id already
    /// taken by another key is a `Conflict`: a verifier picks the key by id.
    pub async fn register_receipt_key(&self, key: &PublishedKey) -> StoreResult<()> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO receipt_keys (key_id, public_key) VALUES ($1, $2) ON CONFLICT (key_id) DO NOTHING",
                &[&key.key_id, &key.public_key],
            )
            .await
            .map_err(db_error)?;
        let row = client.query_one("SELECT public_key FROM receipt_keys WHERE key_id = $1", &[&key.key_id]).await.map_err(db_error)?;
        let stored: String = row.get(0);
        if stored != key.public_key {
            return Err(StoreError::Conflict(format!("receipt key id {} is registered for another public key", key.key_id)));
        }
        Ok(())
    }

    /// Every registered key, oldest first.
    pub async fn receipt_keys(&self) -> StoreResult<Vec<PublishedKey>> {
        let client = self.client().await?;
        let rows = client.query("SELECT key_id, public_key FROM receipt_keys ORDER BY first_seen, key_id", &[]).await.map_err(db_error)?;
        Ok(rows.into_iter().map(|r| PublishedKey { key_id: r.get(0), public_key: r.get(1) }).collect())
    }
}
