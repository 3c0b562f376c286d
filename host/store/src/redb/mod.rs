//! The embedded store: one redb file under the data dir, written through a
//! group-commit writer, read directly (redb reads are MVCC snapshots and never
//! wait for the writer).

pub mod audit;
mod chat;
mod group_commit;
mod key_cache;
mod knowledge_bases;
pub mod registry;
pub mod schema;
mod slot;
pub mod tables;
mod usage_ledger;
mod webhooks;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redb::{Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, WriteTransaction};
use serde::Serialize;
use serde::de::DeserializeOwned;

use group_commit::GroupCommit;
use tables::*;

use super::model::{ApiKeyRecord, AuditEntry, AuditRecord, Group, User};
use super::records::{Claim, IdempotencyRecord, OutboxEvent, RequestOutcome};
use super::{AuditQuery, ChainReport, Store, StoreError, StoreResult};
use crate::KeyHash;

/// File name of the database inside the data dir.
pub const DB_FILE: &str = "gatehouse.redb";

pub(crate) fn backend<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Backend(e.to_string())
}

pub(crate) fn encode<T: Serialize>(v: &T) -> StoreResult<Vec<u8>> {
    serde_json::to_vec(v).map_err(backend)
}

pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> StoreResult<T> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Backend(format!("corrupt record: {e}")))
}

/// redb-backed [`Store`].
pub struct RedbStore {
    /// The database; reopened by the writer after a storage I/O error.
    db: Arc<slot::Slot>,
    writer: GroupCommit,
    path: PathBuf,
    keys: key_cache::KeyCache,
}

impl RedbStore {
    /// Open (or create) `<data_dir>/gatehouse.redb`, migrating older schemas.
    /// `durable = false` relaxes fsync (benchmarks only).
    pub fn open(data_dir: &Path, durable: bool) -> anyhow::Result<Self> {
        Self::open_with(data_dir, durable, None)
    }

    /// [`RedbStore::open`] with the signer of chat receipts: the writer signs
    /// each commit's receipts together (see `group_commit`).
    pub fn open_with(data_dir: &Path, durable: bool, sealer: Option<Arc<dyn crate::receipts::ReceiptSealer>>) -> anyhow::Result<Self> {
        std::fs::create_dir_all(data_dir).map_err(|e| anyhow::anyhow!("cannot create data dir {}: {e}", data_dir.display()))?;
        let path = data_dir.join(DB_FILE);
        let db = slot::open_file(&path)?;
        schema::prepare(&db)?;
        let db = Arc::new(slot::Slot::new(db, &path));
        let durability = if durable { Durability::Immediate } else { Durability::None };
        let writer = GroupCommit::start(db.clone(), durability, sealer)?;
        Ok(RedbStore { db, writer, path, keys: key_cache::KeyCache::default() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The underlying database (an error while it is being reopened after a
    /// storage I/O error). Public for format-level fixture tests and
    /// benchmarks, which read and plant rows with [`tables`], [`schema`] and
    /// [`audit`]; the host itself speaks through [`Store`].
    pub fn database(&self) -> StoreResult<Arc<Database>> {
        self.db.get()
    }

    /// The group-commit writer, for the modules of this crate that keep tables of their own.
    pub(crate) fn writer(&self) -> &GroupCommit {
        &self.writer
    }

    /// Wait until every queued write is durable.
    pub async fn flush(&self) -> StoreResult<()> {
        self.writer.flush().await
    }

    fn read_json<T: DeserializeOwned>(&self, def: redb::TableDefinition<&str, &[u8]>, id: &str) -> StoreResult<Option<T>> {
        let txn = self.db.get()?.begin_read().map_err(backend)?;
        let table = txn.open_table(def).map_err(backend)?;
        match table.get(id).map_err(backend)? {
            Some(v) => Ok(Some(decode(v.value())?)),
            None => Ok(None),
        }
    }

    fn read_all<T: DeserializeOwned>(&self, def: redb::TableDefinition<&str, &[u8]>) -> StoreResult<Vec<T>> {
        let txn = self.db.get()?.begin_read().map_err(backend)?;
        let table = txn.open_table(def).map_err(backend)?;
        let mut out = Vec::with_capacity(table.len().map_err(backend)? as usize);
        for item in table.iter().map_err(backend)? {
            let (_, v) = item.map_err(backend)?;
            out.push(decode(v.value())?);
        }
        Ok(out)
    }
}

/// `Conflict` when another user has `user`'s email (without case); an empty
/// email is not compared. A scan: users are few and change rarely, and an
/// index would be one more table to keep in step.
fn email_free(txn: &WriteTransaction, user: &User) -> StoreResult<()> {
    if user.email.is_empty() {
        return Ok(());
    }
    let t = txn.open_table(USERS).map_err(backend)?;
    for item in t.iter().map_err(backend)? {
        let (_, v) = item.map_err(backend)?;
        let other: User = decode(v.value())?;
        if other.id != user.id && other.email.eq_ignore_ascii_case(&user.email) {
            return Err(StoreError::Conflict(format!("user {} already has the email {}", other.id, user.email)));
        }
    }
    Ok(())
}

/// Every key of a user (a scan of the key table, as for the email).
fn keys_of(txn: &WriteTransaction, user_id: &str) -> StoreResult<Vec<ApiKeyRecord>> {
    let t = txn.open_table(KEYS).map_err(backend)?;
    let mut out = Vec::new();
    for item in t.iter().map_err(backend)? {
        let (_, v) = item.map_err(backend)?;
        let k: ApiKeyRecord = decode(v.value())?;
        if k.user_id == user_id {
            out.push(k);
        }
    }
    Ok(out)
}

fn exists(txn: &WriteTransaction, def: redb::TableDefinition<&str, &[u8]>, id: &str) -> StoreResult<bool> {
    let t = txn.open_table(def).map_err(backend)?;
    Ok(t.get(id).map_err(backend)?.is_some())
}

fn put<T: Serialize>(txn: &WriteTransaction, def: redb::TableDefinition<&str, &[u8]>, id: &str, value: &T) -> StoreResult<()> {
    let mut t = txn.open_table(def).map_err(backend)?;
    t.insert(id, encode(value)?.as_slice()).map_err(backend)?;
    Ok(())
}

fn get<T: DeserializeOwned>(txn: &WriteTransaction, def: redb::TableDefinition<&str, &[u8]>, id: &str) -> StoreResult<Option<T>> {
    let t = txn.open_table(def).map_err(backend)?;
    let v = t.get(id).map_err(backend)?;
    v.map(|v| decode(v.value())).transpose()
}

#[async_trait]
impl Store for RedbStore {
    fn storage_failure(&self) -> Option<String> {
        self.db.failure()
    }

    fn usage_ledger(&self) -> Option<&dyn crate::usage_ledger::UsageLedger> {
        Some(self)
    }

    fn knowledge_bases(&self) -> Option<&dyn crate::knowledge_bases::KnowledgeBaseStore> {
        Some(self)
    }

    fn healthy(&self) -> bool {
        self.db.failure().is_none() && self.db.get().is_ok_and(|db| db.begin_read().is_ok_and(|t| t.open_table(META).is_ok()))
    }

    async fn create_user(&self, user: User, audit: AuditEntry) -> StoreResult<User> {
        self.writer
            .write(move |txn| {
                if exists(txn, USERS, &user.id)? {
                    return Err(StoreError::Conflict(format!("user {} already exists", user.id)));
                }
                email_free(txn, &user)?;
                put(txn, USERS, &user.id, &user)?;
                audit::append(txn, std::slice::from_ref(&audit))?;
                Ok(user.clone())
            })
            .await
    }

    async fn update_user(&self, user: User, audit: AuditEntry) -> StoreResult<User> {
        let updated = self
            .writer
            .write(move |txn| {
                let old: User = get(txn, USERS, &user.id)?.ok_or_else(|| StoreError::NotFound(format!("user {}", user.id)))?;
                let mut new = user.clone();
                new.created_at = old.created_at;
                if !new.email.eq_ignore_ascii_case(&old.email) {
                    email_free(txn, &new)?;
                }
                if old.deactivated_at.is_some() != new.deactivated_at.is_some() {
                    let suspended = new.deactivated_at;
                    for mut key in keys_of(txn, &new.id)? {
                        key.suspended_at = suspended;
                        put(txn, KEYS, &key.id.clone(), &key)?;
                    }
                }
                put(txn, USERS, &new.id, &new)?;
                audit::append(txn, std::slice::from_ref(&audit))?;
                Ok(new)
            })
            .await;
        self.keys.invalidate();
        updated
    }

    async fn delete_user(&self, id: &str, audit: AuditEntry) -> StoreResult<(User, Vec<String>)> {
        let id = id.to_owned();
        let deleted = self
            .writer
            .write(move |txn| {
                let user: User = get(txn, USERS, &id)?.ok_or_else(|| StoreError::NotFound(format!("user {id}")))?;
                let keys = keys_of(txn, &id)?;
                let mut hashes = txn.open_table(KEY_HASHES).map_err(backend)?;
                for k in &keys {
                    hashes.remove(&k.hash.0).map_err(backend)?;
                }
                drop(hashes);
                let mut key_table = txn.open_table(KEYS).map_err(backend)?;
                for k in &keys {
                    key_table.remove(k.id.as_str()).map_err(backend)?;
                }
                drop(key_table);
                let mut members = txn.open_table(MEMBERS).map_err(backend)?;
                let mut memberships = Vec::new();
                for m in members.iter().map_err(backend)? {
                    let (k, _) = m.map_err(backend)?;
                    let (g, u) = k.value();
                    if u == id {
                        memberships.push(g.to_owned());
                    }
                }
                for g in &memberships {
                    members.remove((g.as_str(), id.as_str())).map_err(backend)?;
                }
                drop(members);
                txn.open_table(USERS).map_err(backend)?.remove(id.as_str()).map_err(backend)?;
                audit::append(txn, std::slice::from_ref(&audit))?;
                Ok((user, keys.into_iter().map(|k| k.id).collect()))
            })
            .await;
        self.keys.invalidate();
        deleted
    }

    async fn get_user(&self, id: &str) -> StoreResult<Option<User>> {
        self.read_json(USERS, id)
    }

    async fn list_users(&self) -> StoreResult<Vec<User>> {
        self.read_all(USERS)
    }

    async fn create_group(&self, group: Group, audit: AuditEntry) -> StoreResult<Group> {
        self.writer
            .write(move |txn| {
                if exists(txn, GROUPS, &group.id)? {
                    return Err(StoreError::Conflict(format!("group {} already exists", group.id)));
                }
                put(txn, GROUPS, &group.id, &group)?;
                audit::append(txn, std::slice::from_ref(&audit))?;
                Ok(group.clone())
            })
            .await
    }

    async fn update_group(&self, group: Group, audit: AuditEntry) -> StoreResult<Group> {
        self.writer
            .write(move |txn| {
                if !exists(txn, GROUPS, &group.id)? {
                    return Err(StoreError::NotFound(format!("group {}", group.id)));
                }
                put(txn, GROUPS, &group.id, &group)?;
                audit::append(txn, std::slice::from_ref(&audit))?;
                Ok(group.clone())
            })
            .await
    }

    async fn get_group(&self, id: &str) -> StoreResult<Option<Group>> {
        self.read_json(GROUPS, id)
    }

    async fn list_groups(&self) -> StoreResult<Vec<(Group, Vec<String>)>> {
        let txn = self.db.get()?.begin_read().map_err(backend)?;
        let groups = txn.open_table(GROUPS).map_err(backend)?;
        let members = txn.open_table(MEMBERS).map_err(backend)?;
        let mut out = Vec::new();
        for item in groups.iter().map_err(backend)? {
            let (_, v) = item.map_err(backend)?;
            let g: Group = decode(v.value())?;
            let mut ids = Vec::new();
            for m in members.range((g.id.as_str(), "")..).map_err(backend)? {
                let (k, _) = m.map_err(backend)?;
                let (gid, uid) = k.value();
                if gid != g.id {
                    break;
                }
                ids.push(uid.to_owned());
            }
            out.push((g, ids));
        }
        Ok(out)
    }

    async fn add_member(&self, group_id: &str, user_id: &str, audit: AuditEntry) -> StoreResult<()> {
        let (g, u) = (group_id.to_owned(), user_id.to_owned());
        self.writer
            .write(move |txn| {
                if !exists(txn, GROUPS, &g)? {
                    return Err(StoreError::NotFound(format!("group {g}")));
                }
                if !exists(txn, USERS, &u)? {
                    return Err(StoreError::NotFound(format!("user {u}")));
                }
                let mut t = txn.open_table(MEMBERS).map_err(backend)?;
                if t.get((g.as_str(), u.as_str())).map_err(backend)?.is_some() {
                    return Err(StoreError::Conflict(format!("user {u} is already in group {g}")));
                }
                t.insert((g.as_str(), u.as_str()), ()).map_err(backend)?;
                drop(t);
                audit::append(txn, std::slice::from_ref(&audit))
            })
            .await
    }

    async fn delete_group(&self, id: &str, audit: AuditEntry) -> StoreResult<Group> {
        let id = id.to_owned();
        self.writer
            .write(move |txn| {
                let group: Group = get(txn, GROUPS, &id)?.ok_or_else(|| StoreError::NotFound(format!("group {id}")))?;
                let keys = txn.open_table(KEYS).map_err(backend)?;
                let mut holding = Vec::new();
                for item in keys.iter().map_err(backend)? {
                    let (_, v) = item.map_err(backend)?;
                    let k: ApiKeyRecord = decode(v.value())?;
                    if k.group_id.as_deref() == Some(id.as_str()) {
                        holding.push(k.id);
                    }
                }
                drop(keys);
                if !holding.is_empty() {
                    holding.sort();
                    return Err(StoreError::Conflict(format!(
                        "group {id} still has {} API key(s): {}; move them to another group or delete them first",
                        holding.len(),
                        holding.join(", ")
                    )));
                }
                let mut members = txn.open_table(MEMBERS).map_err(backend)?;
                let mut users = Vec::new();
                for m in members.range((id.as_str(), "")..).map_err(backend)? {
                    let (k, _) = m.map_err(backend)?;
                    let (gid, uid) = k.value();
                    if gid != id {
                        break;
                    }
                    users.push(uid.to_owned());
                }
                for u in &users {
                    members.remove((id.as_str(), u.as_str())).map_err(backend)?;
                }
                drop(members);
                txn.open_table(GROUPS).map_err(backend)?.remove(id.as_str()).map_err(backend)?;
                audit::append(txn, std::slice::from_ref(&audit))?;
                Ok(group)
            })
            .await
    }

    async fn remove_member(&self, group_id: &str, user_id: &str, audit: AuditEntry) -> StoreResult<()> {
        let (g, u) = (group_id.to_owned(), user_id.to_owned());
        self.writer
            .write(move |txn| {
                let mut t = txn.open_table(MEMBERS).map_err(backend)?;
                if t.get((g.as_str(), u.as_str())).map_err(backend)?.is_none() {
                    return Err(StoreError::NotFound(format!("membership of user {u} in group {g}")));
                }
                t.remove((g.as_str(), u.as_str())).map_err(backend)?;
                drop(t);
                audit::append(txn, std::slice::from_ref(&audit))
            })
            .await
    }

    async fn create_key(&self, key: ApiKeyRecord, audit: AuditEntry) -> StoreResult<ApiKeyRecord> {
        let created = self
            .writer
            .write(move |txn| {
                if exists(txn, KEYS, &key.id)? {
                    return Err(StoreError::Conflict(format!("key {} already exists", key.id)));
                }
                let owner: User = get(txn, USERS, &key.user_id)?.ok_or_else(|| StoreError::NotFound(format!("user {}", key.user_id)))?;
                let mut key = key.clone();
                // A key made for a deactivated user waits with its user.
                key.suspended_at = owner.deactivated_at;
                let mut hashes = txn.open_table(KEY_HASHES).map_err(backend)?;
                if hashes.get(&key.hash.0).map_err(backend)?.is_some() {
                    return Err(StoreError::Conflict("that key secret is already registered".into()));
                }
                hashes.insert(&key.hash.0, key.id.as_str()).map_err(backend)?;
                drop(hashes);
                put(txn, KEYS, &key.id, &key)?;
                audit::append(txn, std::slice::from_ref(&audit))?;
                Ok(key.clone())
            })
            .await;
        self.keys.invalidate();
        created
    }

    async fn update_key(&self, key: ApiKeyRecord, audit: AuditEntry) -> StoreResult<ApiKeyRecord> {
        let updated = self
            .writer
            .write(move |txn| {
                let old: ApiKeyRecord = get(txn, KEYS, &key.id)?.ok_or_else(|| StoreError::NotFound(format!("key {}", key.id)))?;
                let mut new = key.clone();
                // The secret and the owner never change.
                new.hash = old.hash;
                new.prefix = old.prefix.clone();
                new.user_id = old.user_id.clone();
                new.created_at = old.created_at;
                new.revoked_at = old.revoked_at;
                new.suspended_at = old.suspended_at;
                put(txn, KEYS, &new.id, &new)?;
                audit::append(txn, std::slice::from_ref(&audit))?;
                Ok(new)
            })
            .await;
        self.keys.invalidate();
        updated
    }

    async fn revoke_key(&self, id: &str, audit: AuditEntry) -> StoreResult<ApiKeyRecord> {
        let id = id.to_owned();
        let revoked = self
            .writer
            .write(move |txn| {
                let mut key: ApiKeyRecord = get(txn, KEYS, &id)?.ok_or_else(|| StoreError::NotFound(format!("key {id}")))?;
                if key.revoked_at.is_some() {
                    return Err(StoreError::Conflict(format!("key {id} is already revoked")));
                }
                key.revoked_at = Some(Utc::now());
                put(txn, KEYS, &id, &key)?;
                audit::append(txn, std::slice::from_ref(&audit))?;
                Ok(key)
            })
            .await;
        self.keys.invalidate();
        revoked
    }

    async fn delete_key(&self, id: &str, audit: AuditEntry) -> StoreResult<ApiKeyRecord> {
        let id = id.to_owned();
        let deleted = self
            .writer
            .write(move |txn| {
                let key: ApiKeyRecord = get(txn, KEYS, &id)?.ok_or_else(|| StoreError::NotFound(format!("key {id}")))?;
                txn.open_table(KEY_HASHES).map_err(backend)?.remove(&key.hash.0).map_err(backend)?;
                txn.open_table(KEYS).map_err(backend)?.remove(id.as_str()).map_err(backend)?;
                audit::append(txn, std::slice::from_ref(&audit))?;
                Ok(key)
            })
            .await;
        self.keys.invalidate();
        deleted
    }

    async fn get_key(&self, id: &str) -> StoreResult<Option<ApiKeyRecord>> {
        self.read_json(KEYS, id)
    }

    async fn find_key_by_hash(&self, hash: &KeyHash) -> StoreResult<Option<Arc<ApiKeyRecord>>> {
        if let Some(hit) = self.keys.get(hash) {
            return Ok(Some(hit));
        }
        let generation = self.keys.generation();
        let txn = self.db.get()?.begin_read().map_err(backend)?;
        let hashes = txn.open_table(KEY_HASHES).map_err(backend)?;
        let Some(id) = hashes.get(&hash.0).map_err(backend)? else {
            return Ok(None);
        };
        let keys = txn.open_table(KEYS).map_err(backend)?;
        let Some(v) = keys.get(id.value()).map_err(backend)? else {
            return Ok(None);
        };
        let record: ApiKeyRecord = decode(v.value())?;
        if !record.hash.ct_eq(hash) {
            return Ok(None);
        }
        let record = Arc::new(record);
        self.keys.put(*hash, generation, record.clone());
        Ok(Some(record))
    }

    async fn list_keys(&self) -> StoreResult<Vec<ApiKeyRecord>> {
        self.read_all(KEYS)
    }

    async fn has_admin_key(&self) -> StoreResult<bool> {
        Ok(self.list_keys().await?.iter().any(|k| k.admin && !k.is_revoked()))
    }

    async fn append_audit(&self, entries: Vec<AuditEntry>) -> StoreResult<()> {
        self.writer.write(move |txn| audit::append(txn, &entries)).await
    }

    async fn audit_query(&self, q: &AuditQuery) -> StoreResult<(Vec<AuditRecord>, u64)> {
        audit::query(&*self.db.get()?, q)
    }

    async fn verify_audit_chain(&self) -> StoreResult<ChainReport> {
        audit::verify(&*self.db.get()?)
    }

    async fn finish_request(&self, outcome: RequestOutcome) -> StoreResult<()> {
        self.writer.finish(outcome).await
    }

    fn count_quota(&self, key_id: &str, windows: &[String]) {
        let rows: Vec<String> = windows.iter().map(|w| chat::quota_row(key_id, w)).collect();
        self.writer.add_counts(rows.iter().map(String::as_str));
    }

    fn quota_counts(&self, key_id: &str, windows: &[String]) -> StoreResult<Vec<u64>> {
        chat::quota_counts(&*self.db.get()?, key_id, windows)
    }

    async fn usage_totals(&self) -> StoreResult<(crate::UsageRows, crate::UsageRows)> {
        chat::usage_totals(&*self.db.get()?)
    }

    async fn idempotency_get(&self, scope: &str) -> StoreResult<Option<IdempotencyRecord>> {
        chat::idempotency_get(&*self.db.get()?, scope)
    }

    async fn idempotency_claim(&self, scope: &str, record: IdempotencyRecord) -> StoreResult<Claim> {
        let scope = scope.to_owned();
        self.writer.write(move |txn| chat::idempotency_claim(txn, &scope, &record)).await
    }

    async fn idempotency_renew(&self, scope: &str, lease_until: DateTime<Utc>) -> StoreResult<()> {
        let scope = scope.to_owned();
        self.writer.write(move |txn| chat::idempotency_renew(txn, &scope, lease_until)).await
    }

    async fn idempotency_sweep(&self, after: Option<String>, limit: usize) -> StoreResult<crate::SweepPage> {
        // Candidates are found in a read transaction, so the writer, which
        // every request waits on, only re-checks and deletes the few found.
        let (candidates, next) = chat::idempotency_not_live(&*self.db.get()?, after.as_deref(), limit, chrono::Utc::now())?;
        let removed = if candidates.is_empty() {
            0
        } else {
            self.writer.write(move |txn| chat::idempotency_remove_not_live(txn, &candidates, chrono::Utc::now())).await?
        };
        Ok(crate::SweepPage { removed, next })
    }

    async fn enqueue_events(&self, events: Vec<OutboxEvent>, audit: Vec<AuditEntry>) -> StoreResult<()> {
        self.writer.write(move |txn| chat::enqueue(txn, &events, &audit)).await
    }

    async fn receipt(&self, bundle_id: &str) -> StoreResult<Option<crate::receipts::SignedReceipt>> {
        chat::receipt(&*self.db.get()?, bundle_id)
    }

    async fn outbox_after(&self, after: u64, limit: usize) -> StoreResult<Vec<(u64, OutboxEvent)>> {
        chat::outbox_after(&*self.db.get()?, after, limit)
    }
}
