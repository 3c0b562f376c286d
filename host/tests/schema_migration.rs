//! Opening a data dir written by an older schema migrates it: every committed
//! fixture `tests/fixtures/schema-v<N>.redb` opens, reaches the current
//! version, keeps its data, and the audit chain still verifies.

use gatehouse_store::KeyHash;
use gatehouse_store::redb::{RedbStore, schema};
use gatehouse_store::{AuditQuery, Store};

#[tokio::test]
async fn a_v1_data_dir_migrates_to_the_current_schema() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::copy(fixtures.join("schema-v1.redb"), dir.path().join("gatehouse.redb")).expect("copy fixture");
    let secret = std::fs::read_to_string(fixtures.join("schema-v1.key")).expect("key");

    let store = RedbStore::open(dir.path(), true).expect("open and migrate");
    assert_eq!(schema::version(&store.database().expect("db")).expect("version"), schema::CURRENT);
    const { assert!(schema::CURRENT >= 2) };

    // The data is there.
    let key = store.find_key_by_hash(&KeyHash::of(secret.trim())).await.expect("lookup").expect("key survives");
    assert_eq!(key.name, "fixture key");
    assert!(store.list_users().await.expect("users").iter().any(|u| u.email == "fixture@example.com"));
    let groups = store.list_groups().await.expect("groups");
    assert!(groups.iter().any(|(g, _)| g.name == "Fixture Group"));

    // v2's index was built from the old log: a type-filtered query finds the old records.
    let q = AuditQuery {
        start: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
        end: chrono::Utc::now() + chrono::Duration::days(1),
        kind: Some("group_management".into()),
        limit: 50,
        ..Default::default()
    };
    let (logs, total) = store.audit_query(&q).await.expect("query");
    assert_eq!(total, 1);
    assert!(logs[0].description.contains("Fixture Group"));
    assert!(store.verify_audit_chain().await.expect("verify").ok);
}
