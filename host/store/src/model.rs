//! Records kept by the store. Serialised as JSON inside the storage engine, so
//! adding an optional field (`#[serde(default)]`) needs no migration; a change
//! that does bumps the schema version (see `store::redb::schema`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::KeyHash;

/// A person or service account that owns keys and is billed for usage.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct User {
    pub id: String,
    pub name: String,
    pub email: String,
    pub created_at: DateTime<Utc>,
    /// When the user was deactivated: their keys are refused until they are
    /// active again (each key carries `suspended_at` from the same commit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deactivated_at: Option<DateTime<Utc>>,
}

/// `Active` or `Inactive`, spelled as the API documents them.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, utoipa::ToSchema)]
pub enum GroupStatus {
    #[default]
    Active,
    Inactive,
}

/// A group of users; a tenant.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Group {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub status: GroupStatus,
    pub created_at: DateTime<Utc>,
    /// Default security policy for keys of this group (policy source `group`).
    #[serde(default)]
    pub default_policy: Option<String>,
}

/// Per-key overrides of the global rate limits and quotas; unset fields keep the global value.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LimitOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_minute: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_hour: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_day: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_month: Option<u64>,
}

/// An API key. Only the SHA-256 of the secret is kept.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ApiKeyRecord {
    pub id: String,
    /// The owner, billed by default.
    pub user_id: String,
    pub name: String,
    pub hash: KeyHash,
    /// The first characters of the secret (`sk-AbCd`), to recognise a key in listings.
    pub prefix: String,
    #[serde(default)]
    pub admin: bool,
    /// A tenant's administrator (role `tenant_admin`, with a `group_id`): the
    /// tenant-policy routes of its own group and that group's usage, no
    /// other admin route. Never together with `admin`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tenant_admin: bool,
    /// The tenant the key acts for; its default policy applies (source `group`).
    #[serde(default)]
    pub group_id: Option<String>,
    /// Model patterns the key may use (`openai/*`, `echo/test`); `None` = all.
    #[serde(default)]
    pub allowed_models: Option<Vec<String>>,
    /// Knowledge bases the key may use; `None` = all.
    #[serde(default)]
    pub allowed_indexes: Option<Vec<String>>,
    /// Policies the key may select; `None` = all.
    #[serde(default)]
    pub allowed_policies: Option<Vec<String>>,
    /// Default security policy (policy source `api_key`).
    #[serde(default)]
    pub default_policy: Option<String>,
    #[serde(default)]
    pub limits: LimitOverrides,
    pub created_at: DateTime<Utc>,
    #[serde(default)]
    pub revoked_at: Option<DateTime<Utc>>,
    /// Set while the key's user is deactivated (written with the user's
    /// change, so authentication needs no second read): refused with 401.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended_at: Option<DateTime<Utc>>,
}

impl ApiKeyRecord {
    pub fn is_revoked(&self) -> bool {
        self.revoked_at.is_some()
    }
}

/// Severity of an audit record.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
            Severity::Critical => "critical",
        }
    }
}

/// Who did an audited action.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AuditUser {
    pub id: String,
    pub name: String,
    pub email: String,
}

impl From<&User> for AuditUser {
    fn from(u: &User) -> Self {
        AuditUser { id: u.id.clone(), name: u.name.clone(), email: u.email.clone() }
    }
}

/// An audit record as the caller describes it; the store adds id, time and chain hashes.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub kind: String,
    pub severity: Severity,
    pub description: String,
    pub user: Option<AuditUser>,
    pub metadata: serde_json::Value,
    pub compliance_category: String,
    pub outcome: String,
}

/// A stored audit record with its place in the hash chain.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    pub id: String,
    pub timestamp: DateTime<Utc>,
    #[serde(rename = "type")]
    pub kind: String,
    pub severity: Severity,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<AuditUser>,
    pub metadata: serde_json::Value,
    pub compliance_category: String,
    pub outcome: String,
    /// Hex SHA-256 of the previous record (`"0"*64` for the first).
    pub prev_hash: String,
    /// Hex SHA-256 over `prev_hash` and this record's content. Stored apart
    /// from the content (see `store::redb::audit`), so the content's JSON
    /// leaves it out when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hash: String,
}

impl AuditRecord {
    /// The record an entry becomes at `timestamp` after `prev_hash`, with a
    /// new time-ordered id and its own hash still to compute (both backends
    /// append this way).
    pub fn unsealed(entry: &AuditEntry, timestamp: DateTime<Utc>, prev_hash: String) -> AuditRecord {
        AuditRecord {
            id: format!("log_{}", uuid::Uuid::now_v7().simple()),
            timestamp,
            kind: entry.kind.clone(),
            severity: entry.severity,
            description: entry.description.clone(),
            user: entry.user.clone(),
            metadata: entry.metadata.clone(),
            compliance_category: entry.compliance_category.clone(),
            outcome: entry.outcome.clone(),
            prev_hash,
            hash: String::new(),
        }
    }
}
