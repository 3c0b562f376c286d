//! Knowledge-base definitions on PostgreSQL: the `knowledge_bases` table, each
//! write in a transaction with its audit record.

use async_trait::async_trait;

use super::{PgStore, audit, db_error, decode, encode};
use crate::knowledge_bases::{KnowledgeBaseDef, KnowledgeBaseStore};
use crate::model::AuditEntry;
use crate::{StoreError, StoreResult};

#[async_trait]
impl KnowledgeBaseStore for PgStore {
    async fn create_knowledge_base(&self, def: KnowledgeBaseDef, entry: AuditEntry) -> StoreResult<KnowledgeBaseDef> {
        self.in_txn(async |txn| {
            let n = txn
                .execute(
                    "INSERT INTO knowledge_bases (name, definition) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
                    &[&def.name, &encode(&def)?],
                )
                .await
                .map_err(db_error)?;
            if n == 0 {
                return Err(StoreError::Conflict(format!("knowledge base {} already exists", def.name)));
            }
            audit::append(txn, std::slice::from_ref(&entry)).await?;
            Ok(def.clone())
        })
        .await
    }

    async fn list_knowledge_bases(&self) -> StoreResult<Vec<KnowledgeBaseDef>> {
        let rows = self.client().await?.query("SELECT definition FROM knowledge_bases ORDER BY name", &[]).await.map_err(db_error)?;
        rows.iter().map(|r| decode(r.get(0))).collect()
    }

    async fn delete_knowledge_base(&self, name: &str, entry: AuditEntry) -> StoreResult<KnowledgeBaseDef> {
        self.in_txn(async |txn| {
            let row = txn
                .query_opt("DELETE FROM knowledge_bases WHERE name = $1 RETURNING definition", &[&name])
                .await
                .map_err(db_error)?
                .ok_or_else(|| StoreError::NotFound(format!("knowledge base {name}")))?;
            let def: KnowledgeBaseDef = decode(row.get(0))?;
            audit::append(txn, std::slice::from_ref(&entry)).await?;
            Ok(def)
        })
        .await
    }
}
