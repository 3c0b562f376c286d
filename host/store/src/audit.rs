//! The audit catalogue and helpers to describe an audited action.
//!
//! Records are written by the store in the same commit as the change they
//! describe (see `redb::audit` for the hash chain).

use serde_json::{Value, json};

use crate::model::{AuditEntry, AuditUser, Severity};

/// Values of `type`.
pub mod kind {
    pub const API_KEY_MANAGEMENT: &str = "api_key_management";
    pub const USER_MANAGEMENT: &str = "user_management";
    pub const GROUP_MANAGEMENT: &str = "group_management";
    pub const POLICY_MANAGEMENT: &str = "smltp_policy_management";
    pub const PLUGIN_MANAGEMENT: &str = "plugin_management";
    pub const WEBHOOK_MANAGEMENT: &str = "webhook_management";
    pub const CONFIG_MANAGEMENT: &str = "config_management";
    pub const SECURITY_EVENT: &str = "security_event";
    pub const RATE_LIMIT: &str = "rate_limit";
    pub const AUTHENTICATION: &str = "authentication";
    pub const SYSTEM: &str = "system";

    /// Every value, for validation of the `type` filter and the docs.
    pub const ALL: &[&str] = &[
        API_KEY_MANAGEMENT,
        USER_MANAGEMENT,
        GROUP_MANAGEMENT,
        POLICY_MANAGEMENT,
        PLUGIN_MANAGEMENT,
        WEBHOOK_MANAGEMENT,
        CONFIG_MANAGEMENT,
        SECURITY_EVENT,
        RATE_LIMIT,
        AUTHENTICATION,
        SYSTEM,
    ];
}

/// Values of `complianceCategory`.
pub mod category {
    pub const ACCESS_CONTROL: &str = "access_control";
    pub const DATA_PROTECTION: &str = "data_protection";
    pub const SECURITY_MONITORING: &str = "security_monitoring";
    pub const SYSTEM_INTEGRITY: &str = "system_integrity";
    pub const USAGE_CONTROL: &str = "usage_control";
}

/// Values of `outcome`.
pub mod outcome {
    pub const SUCCESS: &str = "success";
    pub const FAILURE: &str = "failure";
    pub const BLOCKED: &str = "blocked";
    pub const DETECTED: &str = "detected";
}

/// Builder for one audit entry.
pub struct Audit {
    entry: AuditEntry,
}

impl Audit {
    pub fn new(kind: &str, category: &str, description: impl Into<String>) -> Self {
        Audit {
            entry: AuditEntry {
                kind: kind.to_owned(),
                severity: Severity::Info,
                description: description.into(),
                user: None,
                metadata: json!({}),
                compliance_category: category.to_owned(),
                outcome: outcome::SUCCESS.to_owned(),
            },
        }
    }

    pub fn severity(mut self, s: Severity) -> Self {
        self.entry.severity = s;
        self
    }

    pub fn outcome(mut self, o: &str) -> Self {
        self.entry.outcome = o.to_owned();
        self
    }

    pub fn user(mut self, u: Option<AuditUser>) -> Self {
        self.entry.user = u;
        self
    }

    /// Add a metadata field. `operation` is what `/audit-logs?search=` matches besides the description.
    pub fn meta(mut self, key: &str, value: impl Into<Value>) -> Self {
        if let Value::Object(m) = &mut self.entry.metadata {
            m.insert(key.to_owned(), value.into());
        }
        self
    }

    pub fn build(self) -> AuditEntry {
        self.entry
    }
}
