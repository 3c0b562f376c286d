//! Knowledge-base definitions on redb: one table, name → definition (JSON),
//! created by the first definition; until then reads find none.

use async_trait::async_trait;
use redb::{ReadableDatabase, ReadableTable, TableDefinition, TableError};

use super::{RedbStore, audit, backend, decode, encode};
use crate::knowledge_bases::{KnowledgeBaseDef, KnowledgeBaseStore};
use crate::model::AuditEntry;
use crate::{StoreError, StoreResult};

pub const KNOWLEDGE_BASES: TableDefinition<&str, &[u8]> = TableDefinition::new("knowledge_bases");

#[async_trait]
impl KnowledgeBaseStore for RedbStore {
    async fn create_knowledge_base(&self, def: KnowledgeBaseDef, entry: AuditEntry) -> StoreResult<KnowledgeBaseDef> {
        self.writer()
            .write(move |txn| {
                let mut t = txn.open_table(KNOWLEDGE_BASES).map_err(backend)?;
                if t.get(def.name.as_str()).map_err(backend)?.is_some() {
                    return Err(StoreError::Conflict(format!("knowledge base {} already exists", def.name)));
                }
                t.insert(def.name.as_str(), encode(&def)?.as_slice()).map_err(backend)?;
                drop(t);
                audit::append(txn, std::slice::from_ref(&entry))?;
                Ok(def.clone())
            })
            .await
    }

    async fn list_knowledge_bases(&self) -> StoreResult<Vec<KnowledgeBaseDef>> {
        let db = self.database()?;
        let txn = db.begin_read().map_err(backend)?;
        let t = match txn.open_table(KNOWLEDGE_BASES) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(backend(e)),
        };
        let mut out = Vec::new();
        for item in t.iter().map_err(backend)? {
            let (_, v) = item.map_err(backend)?;
            out.push(decode(v.value())?);
        }
        Ok(out)
    }

    async fn delete_knowledge_base(&self, name: &str, entry: AuditEntry) -> StoreResult<KnowledgeBaseDef> {
        let name = name.to_owned();
        self.writer()
            .write(move |txn| {
                let mut t = txn.open_table(KNOWLEDGE_BASES).map_err(backend)?;
                let def: KnowledgeBaseDef = match t.remove(name.as_str()).map_err(backend)? {
                    Some(v) => decode(v.value())?,
                    None => return Err(StoreError::NotFound(format!("knowledge base {name}"))),
                };
                drop(t);
                audit::append(txn, std::slice::from_ref(&entry))?;
                Ok(def)
            })
            .await
    }
}
