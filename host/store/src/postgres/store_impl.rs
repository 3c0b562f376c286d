//! [`Store`] for [`PgStore`]: each method is the inherent one of the same
//! name (in `admin`, `chat`), so the conformance suite can name them on
//! either backend.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::PgStore;
use crate::model::{ApiKeyRecord, AuditEntry, AuditRecord, Group, User};
use crate::receipts::{PublishedKey, SignedReceipt};
use crate::records::{Claim, IdempotencyRecord, OutboxEvent, RequestOutcome};
use crate::{AuditQuery, ChainReport, KeyHash, Store, StoreResult, SweepPage, UsageRows};

#[async_trait]
impl Store for PgStore {
    fn healthy(&self) -> bool {
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    fn storage_failure(&self) -> Option<String> {
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn usage_ledger(&self) -> Option<&dyn crate::usage_ledger::UsageLedger> {
        Some(self)
    }

    fn knowledge_bases(&self) -> Option<&dyn crate::knowledge_bases::KnowledgeBaseStore> {
        Some(self)
    }

    async fn create_user(&self, user: User, audit: AuditEntry) -> StoreResult<User> {
        PgStore::create_user(self, user, audit).await
    }
    async fn update_user(&self, user: User, audit: AuditEntry) -> StoreResult<User> {
        PgStore::update_user(self, user, audit).await
    }
    async fn delete_user(&self, id: &str, audit: AuditEntry) -> StoreResult<(User, Vec<String>)> {
        PgStore::delete_user(self, id, audit).await
    }
    async fn get_user(&self, id: &str) -> StoreResult<Option<User>> {
        PgStore::get_user(self, id).await
    }
    async fn list_users(&self) -> StoreResult<Vec<User>> {
        PgStore::list_users(self).await
    }
    async fn create_group(&self, group: Group, audit: AuditEntry) -> StoreResult<Group> {
        PgStore::create_group(self, group, audit).await
    }
    async fn update_group(&self, group: Group, audit: AuditEntry) -> StoreResult<Group> {
        PgStore::update_group(self, group, audit).await
    }
    async fn delete_group(&self, id: &str, audit: AuditEntry) -> StoreResult<Group> {
        PgStore::delete_group(self, id, audit).await
    }
    async fn get_group(&self, id: &str) -> StoreResult<Option<Group>> {
        PgStore::get_group(self, id).await
    }
    async fn list_groups(&self) -> StoreResult<Vec<(Group, Vec<String>)>> {
        PgStore::list_groups(self).await
    }
    async fn add_member(&self, group_id: &str, user_id: &str, audit: AuditEntry) -> StoreResult<()> {
        PgStore::add_member(self, group_id, user_id, audit).await
    }
    async fn remove_member(&self, group_id: &str, user_id: &str, audit: AuditEntry) -> StoreResult<()> {
        PgStore::remove_member(self, group_id, user_id, audit).await
    }
    async fn create_key(&self, key: ApiKeyRecord, audit: AuditEntry) -> StoreResult<ApiKeyRecord> {
        PgStore::create_key(self, key, audit).await
    }
    async fn update_key(&self, key: ApiKeyRecord, audit: AuditEntry) -> StoreResult<ApiKeyRecord> {
        PgStore::update_key(self, key, audit).await
    }
    async fn revoke_key(&self, id: &str, audit: AuditEntry) -> StoreResult<ApiKeyRecord> {
        PgStore::revoke_key(self, id, audit).await
    }
    async fn delete_key(&self, id: &str, audit: AuditEntry) -> StoreResult<ApiKeyRecord> {
        PgStore::delete_key(self, id, audit).await
    }
    async fn get_key(&self, id: &str) -> StoreResult<Option<ApiKeyRecord>> {
        PgStore::get_key(self, id).await
    }
    async fn find_key_by_hash(&self, hash: &KeyHash) -> StoreResult<Option<Arc<ApiKeyRecord>>> {
        PgStore::find_key_by_hash(self, hash).await
    }
    async fn list_keys(&self) -> StoreResult<Vec<ApiKeyRecord>> {
        PgStore::list_keys(self).await
    }
    async fn has_admin_key(&self) -> StoreResult<bool> {
        PgStore::has_admin_key(self).await
    }
    async fn append_audit(&self, entries: Vec<AuditEntry>) -> StoreResult<()> {
        PgStore::append_audit(self, entries).await
    }
    async fn audit_query(&self, q: &AuditQuery) -> StoreResult<(Vec<AuditRecord>, u64)> {
        PgStore::audit_query(self, q).await
    }
    async fn verify_audit_chain(&self) -> StoreResult<ChainReport> {
        PgStore::verify_audit_chain(self).await
    }
    async fn finish_request(&self, outcome: RequestOutcome) -> StoreResult<()> {
        PgStore::finish_request(self, outcome).await
    }
    fn count_quota(&self, key_id: &str, windows: &[String]) {
        self.counts.add(key_id, windows);
    }
    fn quota_counts(&self, key_id: &str, windows: &[String]) -> StoreResult<Vec<u64>> {
        self.quota_reader.counts(key_id, windows)
    }
    async fn usage_totals(&self) -> StoreResult<(UsageRows, UsageRows)> {
        PgStore::usage_totals(self).await
    }
    async fn idempotency_get(&self, scope: &str) -> StoreResult<Option<IdempotencyRecord>> {
        PgStore::idempotency_get(self, scope).await
    }
    async fn idempotency_claim(&self, scope: &str, record: IdempotencyRecord) -> StoreResult<Claim> {
        PgStore::idempotency_claim(self, scope, record).await
    }
    async fn idempotency_renew(&self, scope: &str, lease_until: DateTime<Utc>) -> StoreResult<()> {
        PgStore::idempotency_renew(self, scope, lease_until).await
    }
    async fn idempotency_sweep(&self, after: Option<String>, limit: usize) -> StoreResult<SweepPage> {
        PgStore::idempotency_sweep(self, after, limit).await
    }
    async fn enqueue_events(&self, events: Vec<OutboxEvent>, audit: Vec<AuditEntry>) -> StoreResult<()> {
        PgStore::enqueue_events(self, events, audit).await
    }
    async fn receipt(&self, bundle_id: &str) -> StoreResult<Option<SignedReceipt>> {
        PgStore::receipt(self, bundle_id).await
    }
    async fn register_receipt_key(&self, key: &PublishedKey) -> StoreResult<()> {
        PgStore::register_receipt_key(self, key).await
    }
    async fn receipt_keys(&self) -> StoreResult<Vec<PublishedKey>> {
        PgStore::receipt_keys(self).await
    }
    async fn outbox_after(&self, after: u64, limit: usize) -> StoreResult<Vec<(u64, OutboxEvent)>> {
        PgStore::outbox_after(self, after, limit).await
    }
}
