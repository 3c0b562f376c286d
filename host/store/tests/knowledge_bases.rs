//! Knowledge-base definitions on both backends: stored with their audit record, listed, deleted once.

use gatehouse_store::Store;
use gatehouse_store::audit::{Audit, category, kind};
use gatehouse_store::knowledge_bases::KnowledgeBaseDef;
use gatehouse_store::{AuditQuery, StoreError};

fn def(name: &str) -> KnowledgeBaseDef {
    KnowledgeBaseDef {
        name: name.into(),
        retriever: "bm25".into(),
        description: format!("about {name}"),
        folder: name.into(),
        top_k: 4,
        config: serde_json::json!({"k1": 1.2}),
        created_at: chrono::Utc::now(),
    }
}

fn entry(what: &str) -> gatehouse_store::model::AuditEntry {
    Audit::new(kind::CONFIG_MANAGEMENT, category::SYSTEM_INTEGRITY, what).build()
}

pub async fn definitions_are_stored_listed_and_deleted_with_their_audit_records(s: &dyn Store) {
    let kb = s.knowledge_bases().expect("the backend keeps knowledge bases");
    assert!(kb.list_knowledge_bases().await.expect("empty").is_empty());
    kb.create_knowledge_base(def("handbook"), entry("create handbook")).await.expect("create");
    kb.create_knowledge_base(def("faq"), entry("create faq")).await.expect("create");
    assert!(matches!(kb.create_knowledge_base(def("faq"), entry("again")).await, Err(StoreError::Conflict(_))));
    let all = kb.list_knowledge_bases().await.expect("list");
    assert_eq!(all.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), ["faq", "handbook"]);
    assert_eq!(all[1], KnowledgeBaseDef { created_at: all[1].created_at, ..def("handbook") });
    assert_eq!(kb.delete_knowledge_base("faq", entry("delete faq")).await.expect("delete").name, "faq");
    assert!(matches!(kb.delete_knowledge_base("faq", entry("again")).await, Err(StoreError::NotFound(_))));
    assert_eq!(kb.list_knowledge_bases().await.expect("list").len(), 1);
    let q = AuditQuery {
        start: chrono::Utc::now() - chrono::Duration::days(1),
        end: chrono::Utc::now() + chrono::Duration::days(1),
        limit: 100,
        ..Default::default()
    };
    let (_, total) = s.audit_query(&q).await.expect("audit");
    assert_eq!(total, 3, "one record per change made, none for the refused ones");
}

#[tokio::test]
async fn on_redb() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = gatehouse_store::redb::RedbStore::open(dir.path(), true).expect("open");
    definitions_are_stored_listed_and_deleted_with_their_audit_records(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres() {
    let pg = gatehouse_pg_harness::TempPostgres::start();
    let url = pg.create_database("knowledge_bases");
    let store = gatehouse_store::postgres::PgStore::connect(gatehouse_store::postgres::PgOptions::new(url)).await.expect("connect");
    definitions_are_stored_listed_and_deleted_with_their_audit_records(&store).await;
}
