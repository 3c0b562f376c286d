//! A data dir written by the build before format 2 of the audit chain
//! (commit 78c2c42: 40 requests blocked by Prompt Shield under `public`, whose
//! re-serialised scores made that build report untouched records as edited)
//! verifies with no break, keeps every old hash, gets one marker record on
//! the next append, and still shows a planted edit.

use gatehouse_store::Store;
use gatehouse_store::redb::{RedbStore, audit, schema, tables};
use redb::{ReadableDatabase, ReadableTable};

fn open_fixture() -> (tempfile::TempDir, RedbStore) {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::copy(fixtures.join("audit-chain-78c2c42.redb"), dir.path().join("gatehouse.redb")).expect("copy fixture");
    let store = RedbStore::open(dir.path(), true).expect("open and migrate");
    (dir, store)
}

fn stored_values(store: &RedbStore) -> Vec<((u64, u64), Vec<u8>)> {
    let txn = store.database().expect("db").begin_read().expect("read");
    let t = txn.open_table(tables::AUDIT).expect("table");
    t.iter().expect("iter").map(|r| r.expect("row")).map(|(k, v)| (k.value(), v.value().to_vec())).collect()
}

#[tokio::test]
async fn a_chain_written_before_format_2_verifies_and_keeps_its_bytes() {
    let (_dir, store) = open_fixture();
    assert_eq!(schema::version(&store.database().expect("db")).expect("version"), schema::CURRENT);
    let before = stored_values(&store);
    assert!(before.len() >= 40, "{} records", before.len());
    assert!(before.iter().all(|(_, v)| v.first() == Some(&b'{')), "the fixture holds format-1 records only");
    let r = store.verify_audit_chain().await.expect("verify");
    assert!(r.ok, "{r:?}");
    assert_eq!(r.breaks, 0);

    store
        .append_audit(vec![gatehouse_store::audit::Audit::new("system", "system_integrity", "after the upgrade").build()])
        .await
        .expect("append");
    let after = stored_values(&store);
    assert_eq!(&after[..before.len()], &before[..], "nothing already in the chain is rewritten");
    assert_eq!(after.len(), before.len() + 2, "the marker, then the new record");
    let marker = audit::decode_record(&after[before.len()].1).expect("marker");
    assert_eq!(marker.metadata["operation"], audit::FORMAT_MARKER);
    let r = store.verify_audit_chain().await.expect("verify");
    assert!(r.ok, "{r:?}");
}

#[tokio::test]
async fn a_planted_edit_in_a_chain_written_before_format_2_is_found() {
    let (_dir, store) = open_fixture();
    let values = stored_values(&store);
    // Turn the 20th record's outcome around in its stored bytes, as someone with the file would.
    let (key, value) = &values[19];
    let text = String::from_utf8(value.clone()).expect("utf-8");
    let edited = text.replacen("\"outcome\":\"blocked\"", "\"outcome\":\"success\"", 1);
    assert_ne!(edited, text, "the 20th record is a blocked request: {text}");
    let txn = store.database().expect("db").begin_write().expect("txn");
    txn.open_table(tables::AUDIT).expect("table").insert(*key, edited.as_bytes()).expect("insert");
    txn.commit().expect("commit");

    let r = store.verify_audit_chain().await.expect("verify");
    assert_eq!(r.breaks, 1, "{r:?}");
    assert_eq!(r.broken[0].position, 20);
    assert!(r.broken[0].detail.contains("edited"), "{r:?}");
}
