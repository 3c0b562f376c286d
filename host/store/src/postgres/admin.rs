//! Users, groups, memberships and API keys: each write one transaction with
//! its audit records; key writes notify every host (`key_cache`).

use std::sync::Arc;

use chrono::Utc;
use tokio_postgres::Transaction;

use super::{KEYS_CHANNEL, PgStore, audit, db_error, decode, encode};
use crate::model::{ApiKeyRecord, AuditEntry, AuditRecord, Group, User};
use crate::{AuditQuery, ChainReport, KeyHash, StoreError, StoreResult};

async fn exists(txn: &Transaction<'_>, sql: &str, id: &str) -> StoreResult<bool> {
    Ok(txn.query_opt(sql, &[&id]).await.map_err(db_error)?.is_some())
}

/// `Conflict` when another user has `user`'s email (without case); an empty
/// email is not compared. The unique index `users_email` holds the same rule
/// against a racing host (its violation is a `Conflict` too).
async fn email_free(txn: &Transaction<'_>, user: &User) -> StoreResult<()> {
    if user.email.is_empty() {
        return Ok(());
    }
    let row = txn
        .query_opt("SELECT id FROM users WHERE email_key = $1 AND id <> $2", &[&user.email.to_lowercase(), &user.id])
        .await
        .map_err(db_error)?;
    match row {
        Some(r) => Err(StoreError::Conflict(format!("user {} already has the email {}", r.get::<_, String>(0), user.email))),
        None => Ok(()),
    }
}

async fn notify_keys(txn: &Transaction<'_>, key_id: &str) -> StoreResult<()> {
    txn.execute("SELECT pg_notify($1, $2)", &[&KEYS_CHANNEL, &key_id]).await.map_err(db_error)?;
    Ok(())
}

impl PgStore {
    /// True when a query answers (for `/health`).
    pub async fn ping(&self) -> bool {
        match self.client().await {
            Ok(c) => c.simple_query("SELECT 1").await.is_ok(),
            Err(_) => false,
        }
    }

    pub async fn create_user(&self, user: User, audit: AuditEntry) -> StoreResult<User> {
        self.in_txn(async |txn| {
            email_free(txn, &user).await?;
            let n = txn
                .execute(
                    "INSERT INTO users (id, email_key, record) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
                    &[&user.id, &user.email.to_lowercase(), &encode(&user)?],
                )
                .await
                .map_err(db_error)?;
            if n == 0 {
                return Err(StoreError::Conflict(format!("user {} already exists", user.id)));
            }
            audit::append(txn, std::slice::from_ref(&audit)).await?;
            Ok(user)
        })
        .await
    }

    pub async fn update_user(&self, user: User, audit: AuditEntry) -> StoreResult<User> {
        let updated: StoreResult<User> = self
            .in_txn(async |txn| {
                let row = txn.query_opt("SELECT record FROM users WHERE id = $1 FOR UPDATE", &[&user.id]).await.map_err(db_error)?;
                let old: User = decode(row.ok_or_else(|| StoreError::NotFound(format!("user {}", user.id)))?.get(0))?;
                let mut new = user.clone();
                new.created_at = old.created_at;
                email_free(txn, &new).await?;
                if old.deactivated_at.is_some() != new.deactivated_at.is_some() {
                    let rows =
                        txn.query("SELECT record FROM api_keys WHERE user_id = $1 FOR UPDATE", &[&new.id]).await.map_err(db_error)?;
                    for row in rows {
                        let mut key: ApiKeyRecord = decode(row.get(0))?;
                        key.suspended_at = new.deactivated_at;
                        txn.execute("UPDATE api_keys SET record = $2 WHERE id = $1", &[&key.id, &encode(&key)?]).await.map_err(db_error)?;
                        notify_keys(txn, &key.id).await?;
                    }
                }
                txn.execute(
                    "UPDATE users SET email_key = $2, record = $3 WHERE id = $1",
                    &[&new.id, &new.email.to_lowercase(), &encode(&new)?],
                )
                .await
                .map_err(db_error)?;
                audit::append(txn, std::slice::from_ref(&audit)).await?;
                Ok(new)
            })
            .await;
        self.keys.invalidate();
        updated
    }

    pub async fn delete_user(&self, id: &str, audit: AuditEntry) -> StoreResult<(User, Vec<String>)> {
        let deleted: StoreResult<(User, Vec<String>)> = self
            .in_txn(async |txn| {
                let row = txn.query_opt("SELECT record FROM users WHERE id = $1 FOR UPDATE", &[&id]).await.map_err(db_error)?;
                let user: User = decode(row.ok_or_else(|| StoreError::NotFound(format!("user {id}")))?.get(0))?;
                let keys: Vec<String> = txn
                    .query("DELETE FROM api_keys WHERE user_id = $1 RETURNING id", &[&id])
                    .await
                    .map_err(db_error)?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                for k in &keys {
                    notify_keys(txn, k).await?;
                }
                txn.execute("DELETE FROM group_members WHERE user_id = $1", &[&id]).await.map_err(db_error)?;
                txn.execute("DELETE FROM users WHERE id = $1", &[&id]).await.map_err(db_error)?;
                audit::append(txn, std::slice::from_ref(&audit)).await?;
                let mut keys = keys;
                keys.sort();
                Ok((user, keys))
            })
            .await;
        self.keys.invalidate();
        deleted
    }

    pub async fn get_user(&self, id: &str) -> StoreResult<Option<User>> {
        let row = self.client().await?.query_opt("SELECT record FROM users WHERE id = $1", &[&id]).await.map_err(db_error)?;
        row.map(|r| decode(r.get(0))).transpose()
    }

    pub async fn list_users(&self) -> StoreResult<Vec<User>> {
        let rows = self.client().await?.query("SELECT record FROM users ORDER BY id", &[]).await.map_err(db_error)?;
        rows.iter().map(|r| decode(r.get(0))).collect()
    }

    pub async fn create_group(&self, group: Group, audit: AuditEntry) -> StoreResult<Group> {
        self.in_txn(async |txn| {
            let n = txn
                .execute("INSERT INTO groups (id, record) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING", &[&group.id, &encode(&group)?])
                .await
                .map_err(db_error)?;
            if n == 0 {
                return Err(StoreError::Conflict(format!("group {} already exists", group.id)));
            }
            audit::append(txn, std::slice::from_ref(&audit)).await?;
            Ok(group)
        })
        .await
    }

    pub async fn update_group(&self, group: Group, audit: AuditEntry) -> StoreResult<Group> {
        self.in_txn(async |txn| {
            let n = txn.execute("UPDATE groups SET record = $2 WHERE id = $1", &[&group.id, &encode(&group)?]).await.map_err(db_error)?;
            if n == 0 {
                return Err(StoreError::NotFound(format!("group {}", group.id)));
            }
            audit::append(txn, std::slice::from_ref(&audit)).await?;
            Ok(group)
        })
        .await
    }

    pub async fn get_group(&self, id: &str) -> StoreResult<Option<Group>> {
        let row = self.client().await?.query_opt("SELECT record FROM groups WHERE id = $1", &[&id]).await.map_err(db_error)?;
        row.map(|r| decode(r.get(0))).transpose()
    }

    pub async fn list_groups(&self) -> StoreResult<Vec<(Group, Vec<String>)>> {
        let rows = self
            .client()
            .await?
            .query(
                "SELECT g.record, COALESCE(array_agg(m.user_id ORDER BY m.user_id) FILTER (WHERE m.user_id IS NOT NULL), '{}')
                 FROM groups g LEFT JOIN group_members m ON m.group_id = g.id GROUP BY g.id ORDER BY g.id",
                &[],
            )
            .await
            .map_err(db_error)?;
        rows.iter().map(|r| Ok((decode(r.get(0))?, r.get(1)))).collect()
    }

    pub async fn add_member(&self, group_id: &str, user_id: &str, audit: AuditEntry) -> StoreResult<()> {
        self.in_txn(async |txn| {
            if !exists(txn, "SELECT 1 FROM groups WHERE id = $1 FOR SHARE", group_id).await? {
                return Err(StoreError::NotFound(format!("group {group_id}")));
            }
            if !exists(txn, "SELECT 1 FROM users WHERE id = $1 FOR SHARE", user_id).await? {
                return Err(StoreError::NotFound(format!("user {user_id}")));
            }
            let n = txn
                .execute("INSERT INTO group_members (group_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", &[&group_id, &user_id])
                .await
                .map_err(db_error)?;
            if n == 0 {
                return Err(StoreError::Conflict(format!("user {user_id} is already in group {group_id}")));
            }
            audit::append(txn, std::slice::from_ref(&audit)).await?;
            Ok(())
        })
        .await
    }

    pub async fn delete_group(&self, id: &str, audit: AuditEntry) -> StoreResult<Group> {
        self.in_txn(async |txn| {
            let row = txn.query_opt("SELECT record FROM groups WHERE id = $1 FOR UPDATE", &[&id]).await.map_err(db_error)?;
            let group: Group = decode(row.ok_or_else(|| StoreError::NotFound(format!("group {id}")))?.get(0))?;
            let mut holding = Vec::new();
            for row in txn.query("SELECT record FROM api_keys", &[]).await.map_err(db_error)? {
                let k: ApiKeyRecord = decode(row.get(0))?;
                if k.group_id.as_deref() == Some(id) {
                    holding.push(k.id);
                }
            }
            if !holding.is_empty() {
                holding.sort();
                return Err(StoreError::Conflict(format!(
                    "group {id} still has {} API key(s): {}; move them to another group or delete them first",
                    holding.len(),
                    holding.join(", ")
                )));
            }
            txn.execute("DELETE FROM group_members WHERE group_id = $1", &[&id]).await.map_err(db_error)?;
            txn.execute("DELETE FROM groups WHERE id = $1", &[&id]).await.map_err(db_error)?;
            audit::append(txn, std::slice::from_ref(&audit)).await?;
            Ok(group)
        })
        .await
    }

    pub async fn remove_member(&self, group_id: &str, user_id: &str, audit: AuditEntry) -> StoreResult<()> {
        self.in_txn(async |txn| {
            let n = txn
                .execute("DELETE FROM group_members WHERE group_id = $1 AND user_id = $2", &[&group_id, &user_id])
                .await
                .map_err(db_error)?;
            if n == 0 {
                return Err(StoreError::NotFound(format!("membership of user {user_id} in group {group_id}")));
            }
            audit::append(txn, std::slice::from_ref(&audit)).await?;
            Ok(())
        })
        .await
    }

    pub async fn create_key(&self, key: ApiKeyRecord, audit: AuditEntry) -> StoreResult<ApiKeyRecord> {
        self.in_txn(async |txn| {
            if exists(txn, "SELECT 1 FROM api_keys WHERE id = $1", &key.id).await? {
                return Err(StoreError::Conflict(format!("key {} already exists", key.id)));
            }
            let owner = txn.query_opt("SELECT record FROM users WHERE id = $1 FOR SHARE", &[&key.user_id]).await.map_err(db_error)?;
            let owner: User = decode(owner.ok_or_else(|| StoreError::NotFound(format!("user {}", key.user_id)))?.get(0))?;
            // A key made for a deactivated user waits with its user.
            let mut key = key.clone();
            key.suspended_at = owner.deactivated_at;
            let n = txn
                .execute(
                    "INSERT INTO api_keys (id, user_id, hash, admin, revoked_at, record) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                    &[&key.id, &key.user_id, &&key.hash.0[..], &key.admin, &key.revoked_at, &encode(&key)?],
                )
                .await
                .map_err(db_error)?;
            if n == 0 {
                // The id was free a moment ago, so the hash (or a racing id) is taken.
                return Err(StoreError::Conflict("that key secret is already registered".into()));
            }
            audit::append(txn, std::slice::from_ref(&audit)).await?;
            notify_keys(txn, &key.id).await?;
            Ok(key)
        })
        .await
    }

    pub async fn update_key(&self, key: ApiKeyRecord, audit: AuditEntry) -> StoreResult<ApiKeyRecord> {
        let updated: StoreResult<ApiKeyRecord> = self
            .in_txn(async |txn| {
                let row = txn.query_opt("SELECT record FROM api_keys WHERE id = $1 FOR UPDATE", &[&key.id]).await.map_err(db_error)?;
                let old: ApiKeyRecord = decode(row.ok_or_else(|| StoreError::NotFound(format!("key {}", key.id)))?.get(0))?;
                let mut new = key.clone();
                // The secret and the owner never change.
                new.hash = old.hash;
                new.prefix = old.prefix.clone();
                new.user_id = old.user_id.clone();
                new.created_at = old.created_at;
                new.revoked_at = old.revoked_at;
                new.suspended_at = old.suspended_at;
                txn.execute("UPDATE api_keys SET admin = $2, record = $3 WHERE id = $1", &[&new.id, &new.admin, &encode(&new)?])
                    .await
                    .map_err(db_error)?;
                audit::append(txn, std::slice::from_ref(&audit)).await?;
                notify_keys(txn, &new.id).await?;
                Ok(new)
            })
            .await;
        // This host need not wait for its own notification.
        self.keys.invalidate();
        updated
    }

    pub async fn revoke_key(&self, id: &str, audit: AuditEntry) -> StoreResult<ApiKeyRecord> {
        let revoked: StoreResult<ApiKeyRecord> = self
            .in_txn(async |txn| {
                let row = txn.query_opt("SELECT record FROM api_keys WHERE id = $1 FOR UPDATE", &[&id]).await.map_err(db_error)?;
                let mut key: ApiKeyRecord = decode(row.ok_or_else(|| StoreError::NotFound(format!("key {id}")))?.get(0))?;
                if key.revoked_at.is_some() {
                    return Err(StoreError::Conflict(format!("key {id} is already revoked")));
                }
                key.revoked_at = Some(Utc::now());
                txn.execute("UPDATE api_keys SET revoked_at = $2, record = $3 WHERE id = $1", &[&id, &key.revoked_at, &encode(&key)?])
                    .await
                    .map_err(db_error)?;
                audit::append(txn, std::slice::from_ref(&audit)).await?;
                notify_keys(txn, id).await?;
                Ok(key)
            })
            .await;
        self.keys.invalidate();
        revoked
    }

    pub async fn delete_key(&self, id: &str, audit: AuditEntry) -> StoreResult<ApiKeyRecord> {
        let deleted: StoreResult<ApiKeyRecord> = self
            .in_txn(async |txn| {
                let row = txn.query_opt("DELETE FROM api_keys WHERE id = $1 RETURNING record", &[&id]).await.map_err(db_error)?;
                let key: ApiKeyRecord = decode(row.ok_or_else(|| StoreError::NotFound(format!("key {id}")))?.get(0))?;
                audit::append(txn, std::slice::from_ref(&audit)).await?;
                notify_keys(txn, id).await?;
                Ok(key)
            })
            .await;
        self.keys.invalidate();
        deleted
    }

    pub async fn get_key(&self, id: &str) -> StoreResult<Option<ApiKeyRecord>> {
        let row = self.client().await?.query_opt("SELECT record FROM api_keys WHERE id = $1", &[&id]).await.map_err(db_error)?;
        row.map(|r| decode(r.get(0))).transpose()
    }

    /// The key whose secret hashes to `hash`; repeat lookups are answered
    /// from memory within the bound `key_cache` states.
    pub async fn find_key_by_hash(&self, hash: &KeyHash) -> StoreResult<Option<Arc<ApiKeyRecord>>> {
        if let Some(hit) = self.keys.get(hash) {
            return Ok(Some(hit));
        }
        let generation = self.keys.generation();
        let row = self.client().await?.query_opt("SELECT record FROM api_keys WHERE hash = $1", &[&&hash.0[..]]).await.map_err(db_error)?;
        let Some(row) = row else { return Ok(None) };
        let record: ApiKeyRecord = decode(row.get(0))?;
        if !record.hash.ct_eq(hash) {
            return Ok(None);
        }
        let record = Arc::new(record);
        self.keys.put(*hash, generation, record.clone());
        Ok(Some(record))
    }

    pub async fn list_keys(&self) -> StoreResult<Vec<ApiKeyRecord>> {
        let rows = self.client().await?.query("SELECT record FROM api_keys ORDER BY id", &[]).await.map_err(db_error)?;
        rows.iter().map(|r| decode(r.get(0))).collect()
    }

    pub async fn has_admin_key(&self) -> StoreResult<bool> {
        let row = self
            .client()
            .await?
            .query_one("SELECT EXISTS (SELECT 1 FROM api_keys WHERE admin AND revoked_at IS NULL)", &[])
            .await
            .map_err(db_error)?;
        Ok(row.get(0))
    }

    pub async fn append_audit(&self, entries: Vec<AuditEntry>) -> StoreResult<()> {
        self.in_txn(async |txn| {
            audit::append(txn, &entries).await?;
            Ok(())
        })
        .await
    }

    pub async fn audit_query(&self, q: &AuditQuery) -> StoreResult<(Vec<AuditRecord>, u64)> {
        audit::query(&**self.client().await?, q).await
    }

    pub async fn verify_audit_chain(&self) -> StoreResult<ChainReport> {
        // One snapshot for the whole walk: appends meanwhile are not half-seen.
        let mut client = self.client().await?;
        let txn = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(db_error)?;
        let report = audit::verify(&*txn).await?;
        txn.commit().await.map_err(db_error)?;
        Ok(report)
    }
}
