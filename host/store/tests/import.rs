//! `gatehouse db import` at the store level: a single host's redb store,
//! filled through its own API, copied into an empty PostgreSQL database and
//! read back through the PostgreSQL store; a broken chain, a database that
//! is not empty and a data dir still in use are refused, leaving the
//! database as it was. One throwaway cluster, one database per case.

use std::path::Path;
use std::sync::Arc;

use chrono::{Duration, Utc};
use gatehouse_store::audit::{Audit, category, kind};
use gatehouse_store::fleet::{FleetLimiter, LimitWindow, Take};
use gatehouse_store::knowledge_bases::KnowledgeBaseDef;
use gatehouse_store::model::{ApiKeyRecord, AuditEntry, Group, User};
use gatehouse_store::postgres::import::import_redb;
use gatehouse_store::postgres::{PgOptions, PgStore};
use gatehouse_store::receipts::{Receipt, Signer25519};
use gatehouse_store::records::{IdempotencyRecord, IdempotencyState, OutboxEvent, RequestOutcome, UsageDelta};
use gatehouse_store::redb::RedbStore;
use gatehouse_store::redb::registry::RedbRegistry;
use gatehouse_store::registry::{NewVersion, PluginRegistry, PluginState, ShadowCounts};
use gatehouse_store::usage_ledger::LedgerFilter;
use gatehouse_store::webhooks::{Delivery, DeliveryStatus, Endpoint, StoredSecret, WebhookStore, delivery_id};
use gatehouse_store::{KeyHash, Store};

use gatehouse_pg_harness::TempPostgres;

fn entry(description: &str) -> AuditEntry {
    Audit::new(kind::SYSTEM, category::SYSTEM_INTEGRITY, description).meta("operation", "test").build()
}

fn user(id: &str, email: &str) -> User {
    User { id: id.into(), name: id.into(), email: email.into(), created_at: Utc::now(), deactivated_at: None }
}

fn key(id: &str, user_id: &str, secret: &str) -> ApiKeyRecord {
    ApiKeyRecord {
        id: id.into(),
        user_id: user_id.into(),
        name: id.into(),
        hash: KeyHash::of(secret),
        prefix: "sk-".into(),
        admin: false,
        group_id: Some("grp_a".into()),
        allowed_models: None,
        allowed_indexes: None,
        allowed_policies: None,
        default_policy: None,
        limits: Default::default(),
        created_at: Utc::now(),
        revoked_at: None,
        suspended_at: None,
        tenant_admin: false,
    }
}

fn receipt(bundle_id: &str) -> Receipt {
    Receipt {
        bundle_id: bundle_id.into(),
        request_id: format!("req-{bundle_id}"),
        request_hash: "0".repeat(64),
        response_hash: "1".repeat(64),
        policy: "internal".into(),
        policy_hash: None,
        shield_verdict: "allow".into(),
        requested_model: "mock/m".into(),
        served_model: "mock/m".into(),
        key_id: "key_a".into(),
        created_at: Utc::now().to_rfc3339(),
        completed_at: Utc::now().to_rfc3339(),
        signing_key_id: String::new(),
    }
}

/// Wait until the store's writer thread has let go of the file (it stops
/// shortly after the last handle is dropped), as a host that has exited has.
fn wait_closed(dir: &Path) {
    for _ in 0..500 {
        if redb::Database::create(dir.join("gatehouse.redb")).is_ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the redb file stayed locked");
}

/// A single host's state, written through the redb store's API as the host writes it.
async fn fill(dir: &Path) {
    let signer = Arc::new(Signer25519::load_or_create(dir).expect("receipt key"));
    let store = RedbStore::open_with(dir, true, Some(signer)).expect("open redb");
    store.create_user(user("usr_a", "A@Example.com"), entry("user a")).await.expect("user a");
    store.create_user(user("usr_b", ""), entry("user b")).await.expect("user b");
    let group = Group {
        id: "grp_a".into(),
        name: "A".into(),
        description: String::new(),
        status: Default::default(),
        created_at: Utc::now(),
        default_policy: None,
    };
    store.create_group(group, entry("group")).await.expect("group");
    store.add_member("grp_a", "usr_a", entry("member")).await.expect("member");
    store.create_key(key("key_a", "usr_a", "sk-import-a"), entry("key a")).await.expect("key a");
    store.create_key(key("key_b", "usr_b", "sk-import-b"), entry("key b")).await.expect("key b");
    store.revoke_key("key_b", entry("revoke b")).await.expect("revoke");
    let done = IdempotencyRecord {
        body_hash: "h".into(),
        state: IdempotencyState::Completed { status: 200, content_type: "application/json".into(), body: "{\"ok\":1}".into() },
        expires_at: Utc::now() + Duration::hours(24),
    };
    let stale = IdempotencyRecord { expires_at: Utc::now() - Duration::hours(1), ..done.clone() };
    for (n, idem) in [(1, Some(("key_a/one".to_owned(), Some(done)))), (2, Some(("key_a/old".to_owned(), Some(stale)))), (3, None)] {
        let outcome = RequestOutcome {
            usage: Some(UsageDelta {
                user_id: "usr_a".into(),
                key_id: "key_a".into(),
                group_id: Some("grp_a".into()),
                model: "mock/m".into(),
                request_id: format!("req-{n}"),
                prompt_tokens: 10 * n,
                completion_tokens: n,
            }),
            events: vec![OutboxEvent::new("api:request_completed", serde_json::json!({ "n": n }))],
            audit: vec![entry(&format!("request {n}"))],
            idempotency: idem,
            receipt: Some(receipt(&format!("bnd_{n}"))),
        };
        store.finish_request(outcome).await.expect("finish");
    }
    let day = format!("chat:d:{}", Utc::now().format("%Y-%m-%d"));
    let month = format!("chat:m:{}", Utc::now().format("%Y-%m"));
    store.count_quota("key_a", &[day.clone(), month.clone()]);
    store.count_quota("key_a", &[day, month]);
    store.count_quota("key_a", &["chat:d:2020-01-01".to_owned()]);

    store.prepare_webhooks().await.expect("webhooks");
    let now = Utc::now();
    let endpoint = Endpoint {
        id: "wh_a".into(),
        url: "https://example.com/hook".into(),
        description: "hook".into(),
        events: vec!["*".into()],
        enabled: true,
        failure_count: 0,
        disabled_reason: None,
        disabled_at: None,
        created_at: now,
        updated_at: now,
    };
    store.create_endpoint(endpoint, StoredSecret::new("whsec_import".into()), entry("endpoint")).await.expect("endpoint");
    let delivery = Delivery {
        id: delivery_id("wh_a", "evt_test_1"),
        endpoint_id: "wh_a".into(),
        event_id: "evt_test_1".into(),
        event_type: "webhook:test".into(),
        body: "{\"test\":true}".into(),
        status: DeliveryStatus::Pending,
        attempts: 0,
        retries: 0,
        next_attempt_at: Some(now),
        last_status_code: None,
        last_latency_ms: None,
        last_error: None,
        created_at: now,
        updated_at: now,
    };
    store.queue_delivery(delivery, entry("test delivery")).await.expect("delivery");
    let kb = KnowledgeBaseDef {
        name: "docs".into(),
        retriever: "keyword".into(),
        description: String::new(),
        folder: "docs".into(),
        top_k: 3,
        config: serde_json::json!({}),
        created_at: now,
    };
    store.knowledge_bases().expect("kb").create_knowledge_base(kb, entry("kb")).await.expect("kb");
    store.flush().await.expect("flush");
    drop(store);
    wait_closed(dir);

    let registry = RedbRegistry::open(dir).expect("registry");
    for (n, state) in [(1, PluginState::Active), (2, PluginState::Shadow)] {
        let bytes = format!("\0asm component {n}").into_bytes();
        registry
            .publish(NewVersion {
                name: "deny-words".into(),
                kind: "policy".into(),
                plugin_version: format!("1.0.{n}"),
                sha256: format!("{n:064}"),
                checks: vec!["world".into()],
                uploaded_by: Some("usr_a".into()),
                group_id: None,
                state,
                bytes,
            })
            .await
            .expect("publish");
    }
    registry.set_group_base("grp_a", Some("internal")).await.expect("a group's base policy");
    let counts = ShadowCounts { evaluated: 5, agreed: 3, disagreed: 2, dropped: 1, faults: 0 };
    registry.save_shadow_counts("host_a", "deny-words", 2, counts).await.expect("a host's shadow counts");
}

/// Every row the import copied, read back through the PostgreSQL store, equals what redb serves.
async fn a_single_hosts_store_moves_into_postgres_whole_and_verified(pg: &TempPostgres) {
    let dir = tempfile::tempdir().expect("tmp");
    fill(dir.path()).await;
    let url = pg.create_database("import_whole");

    // While a host holds the data dir, nothing happens.
    let running = RedbStore::open(dir.path(), true).expect("reopen");
    let in_use = import_redb(dir.path(), &PgOptions::new(url.clone())).await.expect_err("a data dir in use is refused");
    assert!(format!("{in_use:#}").contains("in use"), "{in_use:#}");
    drop(running);
    wait_closed(dir.path());

    let report = import_redb(dir.path(), &PgOptions::new(url.clone())).await.expect("import");
    let rows = |t: &str| report.tables.iter().find(|(n, _)| *n == t).map(|(_, c)| *c);
    assert_eq!(report.idempotency_dropped, 1, "the expired record stays behind");
    assert_eq!((rows("users"), rows("api_keys"), rows("usage_ledger"), rows("outbox")), (Some(2), Some(2), Some(3), Some(3)));
    assert_eq!((rows("quota_windows"), rows("limit_windows")), (Some(3), Some(2)), "an ended window is not a fleet window");

    wait_closed(dir.path());
    let source = RedbStore::open(dir.path(), true).expect("reopen source");
    let source_registry = RedbRegistry::open(dir.path()).expect("source registry");
    let signer = Signer25519::load_or_create(dir.path()).expect("key");
    let fleet = PgStore::connect(PgOptions::new(url.clone())).await.expect("a fleet host");

    let chain = fleet.verify_audit_chain().await.expect("verify");
    let before = source.verify_audit_chain().await.expect("verify source");
    assert!(chain.ok && chain.records == before.records && chain.records == report.audit_records, "{chain:?} {before:?}");
    let (pg_page, pg_total) = fleet.audit_query(&all_audit()).await.expect("audit");
    let (redb_page, redb_total) = source.audit_query(&all_audit()).await.expect("audit");
    assert_eq!((pg_total, &pg_page), (redb_total, &redb_page), "the same records, hashes and times");
    assert_eq!(pg_page.first().map(|r| r.hash.clone()), Some(report.audit_head.clone()));

    assert_eq!(fleet.list_users().await.expect("users"), source.list_users().await.expect("users"));
    assert_eq!(fleet.list_groups().await.expect("groups"), source.list_groups().await.expect("groups"));
    assert_eq!(fleet.list_keys().await.expect("keys"), source.list_keys().await.expect("keys"));
    let found = fleet.find_key_by_hash(&KeyHash::of("sk-import-a")).await.expect("lookup").expect("the key works on the fleet");
    assert_eq!(found.id, "key_a");
    assert!(fleet.get_key("key_b").await.expect("key b").expect("present").revoked_at.is_some(), "revoked stays revoked");
    assert_eq!(fleet.usage_totals().await.expect("totals"), source.usage_totals().await.expect("totals"));
    let (pg_ledger, redb_ledger) = (fleet.usage_ledger().expect("ledger"), source.usage_ledger().expect("ledger"));
    let strip = |rows: Vec<gatehouse_store::usage_ledger::LedgerRow>| {
        rows.into_iter().map(|r| (r.at, r.request_id, r.prompt_tokens)).collect::<Vec<_>>()
    };
    assert_eq!(
        strip(pg_ledger.ledger_page(&LedgerFilter::default(), None, 100).await.expect("page").rows),
        strip(redb_ledger.ledger_page(&LedgerFilter::default(), None, 100).await.expect("page").rows),
    );
    assert_eq!(fleet.idempotency_get("key_a/one").await.expect("idem"), source.idempotency_get("key_a/one").await.expect("idem"));
    assert_eq!(fleet.idempotency_get("key_a/old").await.expect("idem"), None);
    assert_eq!(fleet.outbox_after(0, 100).await.expect("outbox"), source.outbox_after(0, 100).await.expect("outbox"));
    for n in 1..=3 {
        let id = format!("bnd_{n}");
        let signed = fleet.receipt(&id).await.expect("receipt").expect("present");
        assert_eq!(Some(&signed), source.receipt(&id).await.expect("receipt").as_ref());
    }
    assert!(fleet.receipt_keys().await.expect("keys").contains(&signer.published()), "the host's receipts verify with the fleet's keys");
    let day =
        LimitWindow { id: format!("chat:d:{}", Utc::now().format("%Y-%m-%d")), ends_at: Utc::now() + Duration::hours(24), limit: 100 };
    let taken = fleet.take_limits("key_a", std::slice::from_ref(&day), Take::Peek).await.expect("peek");
    assert_eq!(taken.counts, [2], "the fleet counts today's quota from where the host left it");

    assert_eq!(fleet.list_endpoints().await.expect("endpoints"), source.list_endpoints().await.expect("endpoints"));
    assert_eq!(fleet.endpoint_secret("wh_a").await.expect("secret").map(|s| s.expose().to_owned()).as_deref(), Some("whsec_import"));
    assert_eq!(fleet.endpoint_cursor("wh_a").await.expect("cursor"), source.endpoint_cursor("wh_a").await.expect("cursor"));
    let later = Utc::now() + Duration::hours(1);
    assert_eq!(
        fleet.due_deliveries("wh_a", later, 10).await.expect("due").due,
        source.due_deliveries("wh_a", later, 10).await.expect("due").due
    );
    let kbs = fleet.knowledge_bases().expect("kb").list_knowledge_bases().await.expect("kb");
    assert_eq!(kbs, source.knowledge_bases().expect("kb").list_knowledge_bases().await.expect("kb"));
    assert_eq!(fleet.versions("deny-words").await.expect("versions"), source_registry.versions("deny-words").await.expect("versions"));
    assert_eq!(fleet.component("deny-words", 2).await.expect("bytes"), Some(b"\0asm component 2".to_vec()));
    assert_eq!(fleet.group_bases().await.expect("bases"), source_registry.group_bases().await.expect("bases"));
    let (moved, kept) = (
        fleet.shadow_counts("deny-words", 2).await.expect("counts"),
        source_registry.shadow_counts("deny-words", 2).await.expect("counts"),
    );
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!((&moved[0].host, moved[0].counts), (&kept[0].host, kept[0].counts));
    assert!((moved[0].saved_at - kept[0].saved_at).num_microseconds().is_some_and(|d| d.abs() <= 1), "saved_at kept to the microsecond");

    // The fleet goes on from there: a new record links to the imported head, events number after the host's.
    fleet.append_audit(vec![entry("after the import")]).await.expect("append");
    let after = fleet.verify_audit_chain().await.expect("verify");
    assert!(after.ok && after.records == chain.records + 1, "{after:?}");
    fleet.enqueue_events(vec![OutboxEvent::new("api:test", serde_json::json!({}))], vec![]).await.expect("event");
    assert_eq!(fleet.outbox_after(3, 10).await.expect("outbox").first().map(|e| e.0), Some(4));

    // A second import into the same database is refused and changes nothing.
    drop((source, source_registry));
    wait_closed(dir.path());
    let again = import_redb(dir.path(), &PgOptions::new(url)).await.expect_err("not empty");
    let message = format!("{again:#}");
    assert!(message.contains("not empty") && message.contains("users: 2"), "{message}");
    assert_eq!(fleet.verify_audit_chain().await.expect("verify").records, after.records);
}

fn all_audit() -> gatehouse_store::AuditQuery {
    gatehouse_store::AuditQuery {
        start: Utc::now() - Duration::days(1),
        end: Utc::now() + Duration::days(1),
        limit: 1000,
        ..Default::default()
    }
}

/// A record edited in the redb file fails the import, and PostgreSQL stays empty.
async fn a_tampered_audit_record_fails_the_import_and_leaves_postgres_empty(pg: &TempPostgres) {
    let dir = tempfile::tempdir().expect("tmp");
    fill(dir.path()).await;
    {
        use redb::{ReadableTable, WriteTransaction};
        let store = RedbStore::open(dir.path(), true).expect("open");
        let db = store.database().expect("db");
        let txn: WriteTransaction = db.begin_write().expect("write");
        {
            let mut t = txn.open_table(gatehouse_store::redb::tables::AUDIT).expect("audit");
            let (k, v) = {
                let (k, v) = t.iter().expect("iter").nth(3).expect("a fourth record").expect("row");
                (k.value(), v.value().to_vec())
            };
            let edited = String::from_utf8(v).expect("utf8").replacen("\"description\":\"", "\"description\":\"edited ", 1);
            t.insert(k, edited.as_bytes()).expect("plant");
        }
        txn.commit().expect("commit");
    }
    wait_closed(dir.path());
    let url = pg.create_database("import_tampered");
    let failed = import_redb(dir.path(), &PgOptions::new(url.clone())).await.expect_err("a broken chain is not imported");
    let message = format!("{failed:#}");
    assert!(message.contains("does not verify") && message.contains("nothing was imported"), "{message}");
    let fleet = PgStore::connect(PgOptions::new(url)).await.expect("connect");
    assert!(fleet.list_users().await.expect("users").is_empty() && fleet.list_keys().await.expect("keys").is_empty());
    assert_eq!(fleet.verify_audit_chain().await.expect("verify").records, 0);
}

/// A chain written before format 2 (a data dir of the build before, commit
/// 78c2c42) is imported as written and verified by its own rule; the fleet's
/// next append starts format 2 with the marker record, as redb does.
async fn a_chain_in_the_old_format_is_imported_as_written(pg: &TempPostgres) {
    let dir = tempfile::tempdir().expect("tmp");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/audit-chain-78c2c42.redb");
    std::fs::copy(fixture, dir.path().join("gatehouse.redb")).expect("copy fixture");
    let url = pg.create_database("import_format_1");
    let report = import_redb(dir.path(), &PgOptions::new(url.clone())).await.expect("import");
    assert!(report.audit_records > 0);
    let fleet = PgStore::connect(PgOptions::new(url)).await.expect("connect");
    let chain = fleet.verify_audit_chain().await.expect("verify");
    assert!(chain.ok && chain.records == report.audit_records, "{chain:?}");
    fleet.append_audit(vec![entry("first on the fleet")]).await.expect("append");
    let after = fleet.verify_audit_chain().await.expect("verify");
    assert!(after.ok && after.records == report.audit_records + 2, "the marker and the record: {after:?}");
    let (newest, _) = fleet.audit_query(&all_audit()).await.expect("read");
    let marker = &newest[1];
    assert_eq!(marker.metadata.get("operation").and_then(|o| o.as_str()), Some("audit_chain_format"));
    // An edit of an imported format-1 record is caught in PostgreSQL.
    let client = fleet.pool().get().await.expect("client");
    client.execute("UPDATE audit_records SET content = replace(content::text, 'a', 'b')::bytea WHERE seq = 2", &[]).await.expect("plant");
    assert!(!fleet.verify_audit_chain().await.expect("verify").ok, "an edited format-1 record is a break");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_host_moves_into_an_empty_postgres() {
    let pg = TempPostgres::start();
    a_single_hosts_store_moves_into_postgres_whole_and_verified(&pg).await;
    a_tampered_audit_record_fails_the_import_and_leaves_postgres_empty(&pg).await;
    a_chain_in_the_old_format_is_imported_as_written(&pg).await;
}
