//! One conformance suite for every store backend: the same cases run against
//! redb (each case a test of its own) and PostgreSQL (all cases in one test,
//! each on a database of its own in one throwaway cluster, so the cluster is
//! started once and stopped when the test ends).
//!
//! The cases are written once, in `cases!`, against a concrete store type:
//! `RedbStore` through the `Store` trait, `PgStore` through methods of the
//! same names and types (the `Store` implementation for PostgreSQL is being
//! completed; every method it has is covered here).

mod common;

use chrono::{Duration, Utc};
use gatehouse_store::audit::{Audit, category, kind};
use gatehouse_store::model::{ApiKeyRecord, AuditEntry, AuditUser, Group, GroupStatus, Severity, User};
use gatehouse_store::{AuditQuery, KeyHash, StoreError};

fn entry(description: &str) -> AuditEntry {
    Audit::new(kind::SYSTEM, category::SYSTEM_INTEGRITY, description).build()
}

fn user(id: &str) -> User {
    User { id: id.into(), name: format!("name of {id}"), email: format!("{id}@example.com"), created_at: Utc::now() }
}

fn group(id: &str) -> Group {
    Group {
        id: id.into(),
        name: format!("group {id}"),
        description: String::new(),
        status: GroupStatus::Active,
        created_at: Utc::now(),
        default_policy: None,
    }
}

fn key(id: &str, user_id: &str, secret: &str, admin: bool) -> ApiKeyRecord {
    ApiKeyRecord {
        id: id.into(),
        user_id: user_id.into(),
        name: format!("key {id}"),
        hash: KeyHash::of(secret),
        prefix: secret.chars().take(7).collect(),
        admin,
        group_id: None,
        allowed_models: Some(vec!["echo/*".into()]),
        allowed_indexes: None,
        allowed_policies: None,
        default_policy: None,
        limits: Default::default(),
        created_at: Utc::now(),
        revoked_at: None,
    }
}

fn everything() -> AuditQuery {
    AuditQuery { start: Utc::now() - Duration::days(1), end: Utc::now() + Duration::days(1), limit: 1_000, ..Default::default() }
}

/// The cases, for a store type `$store` whose methods are the `Store` trait's.
macro_rules! cases {
    ($store:ty) => {
        use super::*;

        pub async fn users_are_created_once_read_back_and_listed(s: &$store) {
            let created = s.create_user(user("usr_a"), entry("create a")).await.expect("create");
            assert_eq!(created, user_with_time("usr_a", created.created_at));
            s.create_user(user("usr_b"), entry("create b")).await.expect("create b");
            let again = s.create_user(user("usr_a"), entry("again")).await;
            assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
            assert_eq!(s.get_user("usr_a").await.expect("get"), Some(created));
            assert_eq!(s.get_user("usr_none").await.expect("get"), None);
            let mut ids: Vec<String> = s.list_users().await.expect("list").into_iter().map(|u| u.id).collect();
            ids.sort();
            assert_eq!(ids, ["usr_a", "usr_b"]);
            // The refused create wrote no audit record.
            let (_, total) = s.audit_query(&everything()).await.expect("query");
            assert_eq!(total, 2);
        }

        pub async fn groups_are_created_updated_and_list_their_members(s: &$store) {
            s.create_user(user("usr_a"), entry("u")).await.expect("user a");
            s.create_user(user("usr_b"), entry("u")).await.expect("user b");
            let g = s.create_group(group("grp_1"), entry("g")).await.expect("group");
            assert!(matches!(s.create_group(group("grp_1"), entry("g")).await, Err(StoreError::Conflict(_))));
            let mut changed = g.clone();
            changed.status = GroupStatus::Inactive;
            changed.default_policy = Some("internal".into());
            assert_eq!(s.update_group(changed.clone(), entry("update")).await.expect("update"), changed);
            assert_eq!(s.get_group("grp_1").await.expect("get"), Some(changed.clone()));
            assert!(matches!(s.update_group(group("grp_none"), entry("u")).await, Err(StoreError::NotFound(_))));

            s.add_member("grp_1", "usr_b", entry("add")).await.expect("add b");
            s.add_member("grp_1", "usr_a", entry("add")).await.expect("add a");
            assert!(matches!(s.add_member("grp_1", "usr_a", entry("add")).await, Err(StoreError::Conflict(_))));
            assert!(matches!(s.add_member("grp_none", "usr_a", entry("add")).await, Err(StoreError::NotFound(_))));
            assert!(matches!(s.add_member("grp_1", "usr_none", entry("add")).await, Err(StoreError::NotFound(_))));
            s.create_group(group("grp_2"), entry("g")).await.expect("group 2");
            let groups = s.list_groups().await.expect("list");
            let find = |id: &str| groups.iter().find(|(g, _)| g.id == id).map(|(_, m)| m.clone()).expect("listed");
            let mut members = find("grp_1");
            members.sort();
            assert_eq!(members, ["usr_a", "usr_b"]);
            assert!(find("grp_2").is_empty());

            s.remove_member("grp_1", "usr_a", entry("remove")).await.expect("remove");
            assert!(matches!(s.remove_member("grp_1", "usr_a", entry("remove")).await, Err(StoreError::NotFound(_))));
            let groups = s.list_groups().await.expect("list");
            assert_eq!(groups.iter().find(|(g, _)| g.id == "grp_1").map(|(_, m)| m.clone()), Some(vec!["usr_b".to_owned()]));
        }

        pub async fn keys_are_found_by_hash_updated_without_their_secret_and_revoked_once(s: &$store) {
            s.create_user(user("usr_a"), entry("u")).await.expect("user");
            assert!(!s.has_admin_key().await.expect("admin?"));
            let missing_owner = s.create_key(key("key_x", "usr_none", "sk-x", false), entry("k")).await;
            assert!(matches!(missing_owner, Err(StoreError::NotFound(_))), "{missing_owner:?}");
            let k = s.create_key(key("key_1", "usr_a", "sk-one", true), entry("k")).await.expect("create");
            assert!(s.has_admin_key().await.expect("admin?"));
            let same_id = s.create_key(key("key_1", "usr_a", "sk-other", false), entry("k")).await;
            assert!(matches!(same_id, Err(StoreError::Conflict(_))), "{same_id:?}");
            let same_secret = s.create_key(key("key_2", "usr_a", "sk-one", false), entry("k")).await;
            assert!(matches!(same_secret, Err(StoreError::Conflict(_))), "{same_secret:?}");

            let found = s.find_key_by_hash(&KeyHash::of("sk-one")).await.expect("find").expect("found");
            assert_eq!(*found, k);
            assert!(s.find_key_by_hash(&KeyHash::of("sk-unknown")).await.expect("find").is_none());
            assert_eq!(s.get_key("key_1").await.expect("get"), Some(k.clone()));

            // An update changes options, never the secret, the owner, the creation or revocation time.
            let mut patch = key("key_1", "usr_other", "sk-changed", false);
            patch.name = "renamed".into();
            let updated = s.update_key(patch, entry("update")).await.expect("update");
            assert_eq!(
                (updated.hash, updated.user_id.as_str(), updated.created_at, updated.name.as_str()),
                (k.hash, "usr_a", k.created_at, "renamed")
            );
            assert!(!s.has_admin_key().await.expect("admin?"), "the only admin key is no longer admin");
            assert_eq!(s.find_key_by_hash(&KeyHash::of("sk-one")).await.expect("find").expect("found").name, "renamed");
            assert!(s.find_key_by_hash(&KeyHash::of("sk-changed")).await.expect("find").is_none());
            assert!(matches!(s.update_key(key("key_none", "usr_a", "sk-n", false), entry("u")).await, Err(StoreError::NotFound(_))));

            let revoked = s.revoke_key("key_1", entry("revoke")).await.expect("revoke");
            assert!(revoked.is_revoked());
            assert!(matches!(s.revoke_key("key_1", entry("revoke")).await, Err(StoreError::Conflict(_))));
            assert!(matches!(s.revoke_key("key_none", entry("revoke")).await, Err(StoreError::NotFound(_))));
            assert!(
                s.find_key_by_hash(&KeyHash::of("sk-one")).await.expect("find").expect("found").is_revoked(),
                "a revoked key is served revoked at once"
            );
            assert_eq!(s.list_keys().await.expect("list").len(), 1);
        }

        pub async fn the_audit_log_is_queried_by_filters_newest_first_in_pages(s: &$store) {
            let alice = AuditUser { id: "usr_alice".into(), name: "Alice".into(), email: "a@example.com".into() };
            s.append_audit(vec![
                Audit::new(kind::AUTHENTICATION, category::ACCESS_CONTROL, "Invalid API key").severity(Severity::Warning).build(),
                Audit::new(kind::API_KEY_MANAGEMENT, category::ACCESS_CONTROL, "Key created")
                    .user(Some(alice.clone()))
                    .meta("operation", "create_key")
                    .build(),
                Audit::new(kind::SYSTEM, category::SYSTEM_INTEGRITY, "Plugin 100%_loaded").meta("operation", "plugin_load").build(),
            ])
            .await
            .expect("append");
            s.append_audit(vec![
                Audit::new(kind::API_KEY_MANAGEMENT, category::ACCESS_CONTROL, "Key revoked")
                    .user(Some(alice))
                    .severity(Severity::Critical)
                    .build(),
            ])
            .await
            .expect("append");

            let (all, total) = s.audit_query(&everything()).await.expect("all");
            assert_eq!(total, 4);
            let descriptions: Vec<&str> = all.iter().map(|r| r.description.as_str()).collect();
            assert_eq!(descriptions, ["Key revoked", "Plugin 100%_loaded", "Key created", "Invalid API key"], "newest first");
            for pair in all.windows(2) {
                assert_eq!(pair[0].prev_hash, pair[1].hash, "each record links to the one before it");
            }
            assert_eq!(all[3].prev_hash, "0".repeat(64));

            let q = |f: &dyn Fn(&mut AuditQuery)| {
                let mut q = everything();
                f(&mut q);
                q
            };
            let ids = |rs: Vec<gatehouse_store::model::AuditRecord>| rs.into_iter().map(|r| r.description).collect::<Vec<_>>();
            let (r, n) = s.audit_query(&q(&|q| q.kind = Some(kind::API_KEY_MANAGEMENT.into()))).await.expect("kind");
            assert_eq!((ids(r), n), (vec!["Key revoked".to_owned(), "Key created".to_owned()], 2));
            let (r, n) = s.audit_query(&q(&|q| q.severity = Some(Severity::Warning))).await.expect("severity");
            assert_eq!((ids(r), n), (vec!["Invalid API key".to_owned()], 1));
            let (r, n) = s.audit_query(&q(&|q| q.user_id = Some("usr_alice".into()))).await.expect("user");
            assert_eq!(n, 2, "{:?}", ids(r));
            let (r, n) = s.audit_query(&q(&|q| q.search = Some("CREATE_KEY".into()))).await.expect("search operation");
            assert_eq!((ids(r), n), (vec!["Key created".to_owned()], 1));
            // `%` and `_` in a search are the characters themselves, not wildcards.
            let (r, n) = s.audit_query(&q(&|q| q.search = Some("100%_l".into()))).await.expect("search literal");
            assert_eq!((ids(r), n), (vec!["Plugin 100%_loaded".to_owned()], 1));
            let (_, n) = s.audit_query(&q(&|q| q.search = Some("0%_".into()))).await.expect("search literal");
            assert_eq!(n, 1);
            let (_, n) = s.audit_query(&q(&|q| q.search = Some("y_".into()))).await.expect("no wildcard");
            assert_eq!(n, 0);
            let (r, n) = s
                .audit_query(&q(&|q| {
                    q.offset = 1;
                    q.limit = 2;
                }))
                .await
                .expect("page");
            assert_eq!((ids(r), n), (vec!["Plugin 100%_loaded".to_owned(), "Key created".to_owned()], 4));
            let (r, n) = s.audit_query(&q(&|q| q.end = Utc::now() - Duration::hours(1))).await.expect("range");
            assert!(r.is_empty());
            assert_eq!(n, 0);
        }

        pub async fn the_audit_chain_verifies_over_every_write(s: &$store) {
            s.create_user(user("usr_a"), entry("user")).await.expect("user");
            s.create_group(group("grp_1"), entry("group")).await.expect("group");
            s.add_member("grp_1", "usr_a", entry("member")).await.expect("member");
            s.create_key(key("key_1", "usr_a", "sk-one", false), entry("key")).await.expect("key");
            s.revoke_key("key_1", entry("revoke")).await.expect("revoke");
            s.append_audit((0..20).map(|i| entry(&format!("bulk {i}"))).collect()).await.expect("bulk");
            let report = s.verify_audit_chain().await.expect("verify");
            assert!(report.ok, "{report:?}");
            assert_eq!((report.records, report.breaks), (25, 0));
        }
    };
}

fn user_with_time(id: &str, at: chrono::DateTime<Utc>) -> User {
    User { created_at: at, ..user(id) }
}

/// Runs `$macro!(name)` for every case.
macro_rules! for_each_case {
    ($m:ident) => {
        $m!(
            users_are_created_once_read_back_and_listed,
            groups_are_created_updated_and_list_their_members,
            keys_are_found_by_hash_updated_without_their_secret_and_revoked_once,
            the_audit_log_is_queried_by_filters_newest_first_in_pages,
            the_audit_chain_verifies_over_every_write
        );
    };
}

mod redb_cases {
    use gatehouse_store::Store as _;
    cases!(gatehouse_store::redb::RedbStore);
}

mod pg_cases {
    cases!(gatehouse_store::postgres::PgStore);
}

mod redb {
    macro_rules! redb_tests {
        ($($case:ident),*) => {$(
            #[tokio::test]
            async fn $case() {
                let dir = tempfile::tempdir().expect("temp dir");
                let store = gatehouse_store::redb::RedbStore::open(dir.path(), true).expect("open");
                super::redb_cases::$case(&store).await;
            }
        )*};
    }
    for_each_case!(redb_tests);
}

mod postgres {
    use gatehouse_store::postgres::{PgOptions, PgStore};

    use super::common::pg::TempPostgres;

    macro_rules! pg_tests {
        ($($case:ident),*) => {
            /// Every case, each on a fresh database of one cluster.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_case_on_postgres() {
                let pg = TempPostgres::start();
                $(
                    let url = pg.create_database(stringify!($case));
                    let store = PgStore::connect(PgOptions::new(url)).await.expect("connect");
                    eprintln!("case {}", stringify!($case));
                    super::pg_cases::$case(&store).await;
                )*
            }
        };
    }
    for_each_case!(pg_tests);
}
