//! Knowledge bases defined through the admin API, kept in the store so every
//! host of a fleet (and a restarted host) sees the same definitions. A trait of
//! its own, implemented by both backends; the host reaches it through
//! [`crate::Store::knowledge_bases`]. Entries of the config file are not
//! stored here: they stay in the file and win over a stored one of the same name.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::StoreResult;
use crate::model::AuditEntry;

/// One knowledge base as the API defined it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KnowledgeBaseDef {
    pub name: String,
    /// The retriever plugin.
    pub retriever: String,
    #[serde(default)]
    pub description: String,
    /// The documents' folder, relative to `<data_dir>/knowledge/` on each host.
    pub folder: String,
    pub top_k: u32,
    /// Retriever-specific settings, handed to the plugin as JSON.
    #[serde(default)]
    pub config: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

#[async_trait]
pub trait KnowledgeBaseStore: Send + Sync {
    /// Store a new definition with its audit record. `Conflict` if the name is taken.
    async fn create_knowledge_base(&self, def: KnowledgeBaseDef, audit: AuditEntry) -> StoreResult<KnowledgeBaseDef>;
    /// Every stored definition, by name.
    async fn list_knowledge_bases(&self) -> StoreResult<Vec<KnowledgeBaseDef>>;
    /// Delete a definition with its audit record. `NotFound` if there is none.
    async fn delete_knowledge_base(&self, name: &str, audit: AuditEntry) -> StoreResult<KnowledgeBaseDef>;
}
