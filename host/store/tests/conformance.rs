//! One conformance suite for every store backend: the same cases run against
//! redb (each case a test of its own) and PostgreSQL (all cases in one test,
//! each on a database of its own in one throwaway cluster, so the cluster is
//! started once and stopped when the test ends).
//!
//! The cases are written once, in `cases`, against `&dyn Store`; each
//! backend opens a fresh store per case, with a receipt signer.

use chrono::{Duration, Utc};
use gatehouse_store::audit::{Audit, category, kind};
use gatehouse_store::model::{ApiKeyRecord, AuditEntry, AuditUser, Group, GroupStatus, Severity, User};
use gatehouse_store::receipts::Receipt;
use gatehouse_store::records::{Claim, IdempotencyRecord, IdempotencyState, OutboxEvent, RequestOutcome, UsageDelta, UsageTotals};
use gatehouse_store::webhooks::WebhookStore;
use gatehouse_store::{AuditQuery, KeyHash, Store, StoreError};

fn entry(description: &str) -> AuditEntry {
    Audit::new(kind::SYSTEM, category::SYSTEM_INTEGRITY, description).build()
}

fn user(id: &str) -> User {
    User { id: id.into(), name: format!("name of {id}"), email: format!("{id}@example.com"), created_at: Utc::now(), deactivated_at: None }
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
        suspended_at: None,
        tenant_admin: false,
    }
}

fn everything() -> AuditQuery {
    AuditQuery { start: Utc::now() - Duration::days(1), end: Utc::now() + Duration::days(1), limit: 1_000, ..Default::default() }
}

mod cases {
    use super::*;

    pub async fn emails_are_unique_and_deactivation_suspends_a_users_keys(s: &dyn Both) {
        s.create_user(user("usr_a"), entry("u")).await.expect("a");
        let mut twin = user("usr_twin");
        twin.email = "USR_A@example.com".into();
        assert!(matches!(s.create_user(twin, entry("u")).await, Err(StoreError::Conflict(_))), "same email, other case");
        let mut no_mail = user("usr_n1");
        no_mail.email.clear();
        s.create_user(no_mail.clone(), entry("u")).await.expect("no email");
        s.create_user(User { id: "usr_n2".into(), ..no_mail }, entry("u")).await.expect("a second one without email");
        s.create_user(user("usr_b"), entry("u")).await.expect("b");
        let mut b = s.get_user("usr_b").await.expect("get").expect("b");
        b.email = "usr_a@EXAMPLE.com".into();
        assert!(matches!(s.update_user(b.clone(), entry("u")).await, Err(StoreError::Conflict(_))), "update to a taken email");

        let k = s.create_key(key("key_a", "usr_a", "sk-a", false), entry("k")).await.expect("key");
        let mut a = s.get_user("usr_a").await.expect("get").expect("a");
        a.name = "Renamed".into();
        a.deactivated_at = Some(Utc::now());
        let changed = s.update_user(a.clone(), entry("deactivate")).await.expect("deactivate");
        assert_eq!((changed.name.as_str(), changed.created_at), ("Renamed", a.created_at));
        let found = s.find_key_by_hash(&KeyHash::of("sk-a")).await.expect("find").expect("found");
        assert!(found.suspended_at.is_some(), "the lookup sees the suspension at once");
        // A key made meanwhile waits with its user; an update keeps the suspension.
        let later = s.create_key(key("key_a2", "usr_a", "sk-a2", false), entry("k")).await.expect("key 2");
        assert!(later.suspended_at.is_some());
        let kept = s.update_key(k.clone(), entry("u")).await.expect("update");
        assert!(kept.suspended_at.is_some(), "an options update does not lift it");
        a.deactivated_at = None;
        s.update_user(a, entry("reactivate")).await.expect("reactivate");
        for secret in ["sk-a", "sk-a2"] {
            assert!(s.find_key_by_hash(&KeyHash::of(secret)).await.expect("find").expect("found").suspended_at.is_none());
        }
        assert!(matches!(s.update_user(user("usr_none"), entry("u")).await, Err(StoreError::NotFound(_))));
    }

    pub async fn deleting_users_keys_and_groups_removes_what_hangs_off_them_and_keeps_the_audit(s: &dyn Both) {
        s.create_user(user("usr_a"), entry("u")).await.expect("a");
        s.create_user(user("usr_b"), entry("u")).await.expect("b");
        s.create_group(group("grp_1"), entry("g")).await.expect("group");
        s.add_member("grp_1", "usr_a", entry("m")).await.expect("member a");
        s.add_member("grp_1", "usr_b", entry("m")).await.expect("member b");
        let mut in_group = key("key_g", "usr_b", "sk-g", false);
        in_group.group_id = Some("grp_1".into());
        s.create_key(in_group, entry("k")).await.expect("key in group");
        s.create_key(key("key_a1", "usr_a", "sk-a1", false), entry("k")).await.expect("a1");
        s.create_key(key("key_a2", "usr_a", "sk-a2", false), entry("k")).await.expect("a2");
        let before = s.audit_query(&everything()).await.expect("query").1;

        match s.delete_group("grp_1", entry("refused")).await {
            Err(StoreError::Conflict(m)) => assert!(m.contains("key_g"), "{m}"),
            other => panic!("a group with a key is not deleted: {other:?}"),
        }
        let deleted = s.delete_key("key_g", entry("delete key")).await.expect("delete key");
        assert_eq!(deleted.id, "key_g");
        assert!(s.find_key_by_hash(&KeyHash::of("sk-g")).await.expect("find").is_none(), "its secret is refused at once");
        assert_eq!(s.get_key("key_g").await.expect("get"), None);
        assert!(matches!(s.delete_key("key_g", entry("again")).await, Err(StoreError::NotFound(_))));

        let (u, mut keys) = s.delete_user("usr_a", entry("delete user")).await.expect("delete user");
        keys.sort();
        assert_eq!((u.id.as_str(), keys), ("usr_a", vec!["key_a1".to_owned(), "key_a2".to_owned()]));
        assert!(s.find_key_by_hash(&KeyHash::of("sk-a1")).await.expect("find").is_none());
        assert_eq!(s.get_user("usr_a").await.expect("get"), None);
        let members = s.list_groups().await.expect("groups").into_iter().find(|(g, _)| g.id == "grp_1").expect("grp_1").1;
        assert_eq!(members, ["usr_b"], "the membership went with the user");

        let g = s.delete_group("grp_1", entry("delete group")).await.expect("delete group");
        assert_eq!(g.id, "grp_1");
        assert!(s.list_groups().await.expect("groups").is_empty());
        assert!(s.get_user("usr_b").await.expect("get").is_some(), "members stay users");
        assert!(matches!(s.delete_user("usr_a", entry("again")).await, Err(StoreError::NotFound(_))));
        // Every deletion is one more record; nothing was removed from the log, and it verifies.
        assert_eq!(s.audit_query(&everything()).await.expect("query").1, before + 3);
        assert!(s.verify_audit_chain().await.expect("verify").ok);
    }

    pub async fn the_audit_log_finds_records_about_a_user(s: &dyn Both) {
        let about = |target: &str, by: &str| {
            Audit::new(kind::API_KEY_MANAGEMENT, category::ACCESS_CONTROL, format!("made for {target}"))
                .user(Some(AuditUser { id: by.into(), name: String::new(), email: String::new() }))
                .meta("targetUserId", target)
                .build()
        };
        s.append_audit(vec![about("usr_t", "usr_admin"), about("usr_other", "usr_t"), about("usr_t", "usr_admin")]).await.expect("append");
        let q = AuditQuery { about_user_id: Some("usr_t".into()), ..everything() };
        let (records, total) = s.audit_query(&q).await.expect("query");
        assert_eq!(total, 2);
        assert!(records.iter().all(|r| r.metadata["targetUserId"] == "usr_t"));
        let by = AuditQuery { user_id: Some("usr_t".into()), ..everything() };
        assert_eq!(s.audit_query(&by).await.expect("query").1, 1, "by them is not about them");
    }

    pub async fn users_are_created_once_read_back_and_listed(s: &dyn Both) {
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

    pub async fn groups_are_created_updated_and_list_their_members(s: &dyn Both) {
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

    pub async fn keys_are_found_by_hash_updated_without_their_secret_and_revoked_once(s: &dyn Both) {
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

    pub async fn the_audit_log_is_queried_by_filters_newest_first_in_pages(s: &dyn Both) {
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

    pub async fn the_audit_chain_verifies_over_every_write(s: &dyn Both) {
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

    pub async fn a_finished_request_bills_queues_audits_and_stores_its_outcome_in_one_write(s: &dyn Both) {
        let done = IdempotencyRecord {
            body_hash: "h".into(),
            state: IdempotencyState::Completed { status: 200, content_type: "application/json".into(), body: "{\"ok\":true}".into() },
            expires_at: Utc::now() + Duration::hours(24),
        };
        for (i, tokens) in [(10u64, 5u64), (1, 2)].into_iter().enumerate() {
            s.finish_request(RequestOutcome {
                usage: Some(UsageDelta {
                    user_id: "usr_a".into(),
                    key_id: format!("key_{i}"),
                    group_id: None,
                    model: "echo/test".into(),
                    request_id: format!("req-{i}"),
                    prompt_tokens: tokens.0,
                    completion_tokens: tokens.1,
                }),
                events: vec![OutboxEvent::new("api:request", serde_json::json!({"n": i}))],
                audit: vec![entry(&format!("request {i}"))],
                idempotency: Some((format!("key_{i}/idem"), Some(done.clone()))),
                receipt: Some(receipt(&format!("rcpt_{i}"))),
            })
            .await
            .expect("finish");
        }
        let (mut users, mut keys) = s.usage_totals().await.expect("usage");
        users.sort_by(|a, b| a.0.cmp(&b.0));
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(users, vec![("usr_a".to_owned(), UsageTotals { requests: 2, prompt_tokens: 11, completion_tokens: 7 })]);
        assert_eq!(keys.iter().map(|(k, t)| (k.as_str(), t.requests)).collect::<Vec<_>>(), [("key_0", 1), ("key_1", 1)]);
        let events = s.outbox_after(0, 10).await.expect("outbox");
        assert_eq!(events.iter().map(|(seq, e)| (*seq, e.data["n"].as_u64())).collect::<Vec<_>>(), [(1, Some(0)), (2, Some(1))]);
        assert_eq!(s.idempotency_get("key_1/idem").await.expect("idem"), Some(done));
        let (_, total) = s.audit_query(&everything()).await.expect("audit");
        assert_eq!(total, 2);
        // Releasing an in-flight claim deletes it.
        s.finish_request(RequestOutcome { idempotency: Some(("key_1/idem".into(), None)), ..Default::default() }).await.expect("release");
        assert_eq!(s.idempotency_get("key_1/idem").await.expect("idem"), None);
    }

    pub async fn receipts_are_signed_in_their_commit_and_verify(s: &dyn Both, public_key: &ed25519_dalek::VerifyingKey) {
        s.finish_request(RequestOutcome { receipt: Some(receipt("rcpt_one")), ..Default::default() }).await.expect("finish");
        let served = s.receipt("rcpt_one").await.expect("read").expect("stored");
        assert_eq!(served.receipt, receipt("rcpt_one"));
        assert!(gatehouse_store::receipts::verify(public_key, &served), "verifies with the public key");
        let mut edited = served.clone();
        edited.receipt.served_model = "other/model".into();
        assert!(!gatehouse_store::receipts::verify(public_key, &edited));
        assert!(s.receipt("rcpt_none").await.expect("read").is_none());
    }

    pub async fn quota_counts_are_committed_no_later_than_the_requests_outcome(s: &dyn Both) {
        let windows = vec!["d:2026-11-27".to_owned(), "m:2026-11".to_owned()];
        assert_eq!(s.quota_counts("key_1", &windows).expect("counts"), [0, 0]);
        for _ in 0..3 {
            s.count_quota("key_1", &windows);
        }
        s.count_quota("key_1", &windows[1..]);
        s.count_quota("key_2", &windows[..1]);
        s.finish_request(RequestOutcome::default()).await.expect("outcome");
        assert_eq!(s.quota_counts("key_1", &windows).expect("counts"), [3, 4]);
        assert_eq!(s.quota_counts("key_2", &windows).expect("counts"), [1, 0]);
        assert_eq!(s.quota_counts("key_1", &["d:2026-11-26".to_owned()]).expect("counts"), [0]);
    }

    pub async fn idempotency_claims_wait_for_live_records_and_take_over_lapsed_ones(s: &dyn Both) {
        let in_flight = |lease: i64| IdempotencyRecord {
            body_hash: "h".into(),
            state: IdempotencyState::InFlight { lease_until: Utc::now() + Duration::seconds(lease) },
            expires_at: Utc::now() + Duration::hours(24),
        };
        let first = in_flight(30);
        assert_eq!(s.idempotency_claim("k/a", first.clone()).await.expect("claim"), Claim::Claimed);
        assert_eq!(s.idempotency_claim("k/a", in_flight(30)).await.expect("claim"), Claim::Existing(first));
        // A lapsed lease (its host stopped renewing) is taken over.
        assert_eq!(s.idempotency_claim("k/b", in_flight(-1)).await.expect("claim"), Claim::Claimed);
        assert_eq!(s.idempotency_claim("k/b", in_flight(30)).await.expect("claim"), Claim::Claimed);
        // Renewing keeps a claim live; renewing a completed record changes nothing.
        assert_eq!(s.idempotency_claim("k/c", in_flight(-1)).await.expect("claim"), Claim::Claimed);
        let until = Utc::now() + Duration::seconds(60);
        s.idempotency_renew("k/c", until).await.expect("renew");
        match s.idempotency_get("k/c").await.expect("get").map(|r| r.state) {
            Some(IdempotencyState::InFlight { lease_until }) => assert_eq!(lease_until.timestamp_micros(), until.timestamp_micros()),
            other => panic!("{other:?}"),
        }
        assert!(matches!(s.idempotency_claim("k/c", in_flight(30)).await.expect("claim"), Claim::Existing(_)));
        s.idempotency_renew("k/none", until).await.expect("renewing nothing is fine");
        assert_eq!(s.idempotency_get("k/none").await.expect("get"), None);
    }

    pub async fn a_sweep_removes_only_records_that_no_longer_bind(s: &dyn Both) {
        let rec = |expires: i64, lease: Option<i64>| IdempotencyRecord {
            body_hash: "h".into(),
            state: match lease {
                Some(l) => IdempotencyState::InFlight { lease_until: Utc::now() + Duration::seconds(l) },
                None => IdempotencyState::Completed { status: 200, content_type: "application/json".into(), body: "{}".into() },
            },
            expires_at: Utc::now() + Duration::seconds(expires),
        };
        let rows = [
            ("k1/a-expired", rec(-10, None)),
            ("k1/b-live", rec(3600, None)),
            ("k1/c-lapsed", rec(3600, Some(-1))),
            ("k1/d-leased", rec(3600, Some(30))),
            ("k1/e-expired-in-flight", rec(-1, Some(30))),
        ];
        for (scope, r) in rows.clone() {
            s.finish_request(RequestOutcome { idempotency: Some((scope.into(), Some(r))), ..Default::default() }).await.expect("put");
        }
        let (mut after, mut removed, mut steps) = (None, 0, 0);
        loop {
            let page = s.idempotency_sweep(after, 2).await.expect("sweep");
            removed += page.removed;
            steps += 1;
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        assert_eq!((removed, steps), (3, 3), "pages of two: the third step finds the end");
        for (scope, _) in &rows {
            let kept = s.idempotency_get(scope).await.expect("get").is_some();
            assert_eq!(kept, ["k1/b-live", "k1/d-leased"].contains(scope), "{scope}");
        }
    }

    pub async fn events_are_queued_in_order_with_their_audit_records(s: &dyn Both) {
        s.enqueue_events(
            vec![OutboxEvent::new("a", serde_json::json!({})), OutboxEvent::new("b", serde_json::json!({}))],
            vec![entry("queued")],
        )
        .await
        .expect("enqueue");
        s.enqueue_events(vec![OutboxEvent::new("c", serde_json::json!({}))], Vec::new()).await.expect("enqueue");
        let all = s.outbox_after(0, 10).await.expect("outbox");
        assert_eq!(all.iter().map(|(n, e)| (*n, e.kind.as_str())).collect::<Vec<_>>(), [(1, "a"), (2, "b"), (3, "c")]);
        let page = s.outbox_after(1, 1).await.expect("outbox");
        assert_eq!(page.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [2]);
        assert_eq!(s.audit_query(&everything()).await.expect("audit").1, 1);
    }
}

/// A store with both traits, as the host holds it.
pub trait Both: Store + WebhookStore {}
impl<T: Store + WebhookStore> Both for T {}

#[path = "conformance/webhook_cases.rs"]
mod webhook_cases;

fn receipt(bundle_id: &str) -> Receipt {
    Receipt {
        bundle_id: bundle_id.into(),
        request_id: "req-1".into(),
        request_hash: "a".repeat(64),
        response_hash: "b".repeat(64),
        policy: "internal".into(),
        policy_hash: None,
        shield_verdict: "allow".into(),
        requested_model: "echo/test".into(),
        served_model: "echo/test".into(),
        key_id: "key_1".into(),
        created_at: "2026-11-27T00:00:00Z".into(),
        completed_at: "2026-11-27T00:00:01Z".into(),
        signing_key_id: "0123456789abcdef".into(),
    }
}

fn user_with_time(id: &str, at: chrono::DateTime<Utc>) -> User {
    User { created_at: at, ..user(id) }
}

/// Runs `$macro!(name)` for every case.
macro_rules! for_each_case {
    ($m:ident) => {
        $m!(
            cases::users_are_created_once_read_back_and_listed,
            cases::emails_are_unique_and_deactivation_suspends_a_users_keys,
            cases::deleting_users_keys_and_groups_removes_what_hangs_off_them_and_keeps_the_audit,
            cases::the_audit_log_finds_records_about_a_user,
            cases::groups_are_created_updated_and_list_their_members,
            cases::keys_are_found_by_hash_updated_without_their_secret_and_revoked_once,
            cases::the_audit_log_is_queried_by_filters_newest_first_in_pages,
            cases::the_audit_chain_verifies_over_every_write,
            cases::a_finished_request_bills_queues_audits_and_stores_its_outcome_in_one_write,
            cases::quota_counts_are_committed_no_later_than_the_requests_outcome,
            cases::idempotency_claims_wait_for_live_records_and_take_over_lapsed_ones,
            cases::a_sweep_removes_only_records_that_no_longer_bind,
            cases::events_are_queued_in_order_with_their_audit_records,
            webhook_cases::cursors_start_at_the_end_of_the_outbox_and_only_move_forward,
            webhook_cases::the_outbox_keeps_what_an_enabled_endpoint_has_not_passed_young_events_and_the_newest,
            webhook_cases::the_queue_depth_counts_what_enabled_endpoints_have_not_passed_and_pending_retries,
            webhook_cases::fresh_attempts_retries_failures_auto_disable_and_pruning,
            webhook_cases::a_fresh_attempt_after_a_crash_continues_the_stored_row,
            webhook_cases::cancel_delete_and_rotation,
            webhook_cases::a_failed_delivery_is_requeued_once_with_its_id_and_body_and_attempts_afresh
        );
    };
}

mod redb {
    use gatehouse_store::webhooks::WebhookStore as _;
    macro_rules! redb_tests {
        ($($module:ident::$case:ident),*) => {$(
            #[tokio::test]
            async fn $case() {
                let dir = tempfile::tempdir().expect("temp dir");
                let signer = std::sync::Arc::new(gatehouse_store::receipts::Signer25519::load_or_create(dir.path()).expect("signing key"));
                let store = gatehouse_store::redb::RedbStore::open_with(dir.path(), true, Some(signer)).expect("open");
                store.prepare_webhooks().await.expect("webhook tables");
                super::$module::$case(&store).await;
            }
        )*};
    }
    for_each_case!(redb_tests);

    #[tokio::test]
    async fn receipts_are_signed_in_their_commit_and_verify() {
        let dir = tempfile::tempdir().expect("temp dir");
        let signer = std::sync::Arc::new(gatehouse_store::receipts::Signer25519::load_or_create(dir.path()).expect("signing key"));
        let store = gatehouse_store::redb::RedbStore::open_with(dir.path(), true, Some(signer.clone())).expect("open");
        super::cases::receipts_are_signed_in_their_commit_and_verify(&store, &signer.public_key()).await;
    }
}

mod postgres {
    use gatehouse_store::postgres::{PgOptions, PgStore};
    use gatehouse_store::webhooks::WebhookStore as _;

    use gatehouse_pg_harness::TempPostgres;

    macro_rules! pg_tests {
        ($($module:ident::$case:ident),*) => {
            /// Every case, each on a fresh database of one cluster.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_case_on_postgres() {
                let pg = TempPostgres::start();
                let keys = tempfile::tempdir().expect("temp dir");
                let signer = std::sync::Arc::new(gatehouse_store::receipts::Signer25519::load_or_create(keys.path()).expect("signing key"));
                $(
                    let url = pg.create_database(stringify!($case));
                    let store = PgStore::connect_with(PgOptions::new(url), Some(signer.clone())).await.expect("connect");
                    eprintln!("case {}", stringify!($case));
                    store.prepare_webhooks().await.expect("webhook tables");
                    super::$module::$case(&store).await;
                )*
                let url = pg.create_database("receipts");
                let store = PgStore::connect_with(PgOptions::new(url), Some(signer.clone())).await.expect("connect");
                super::cases::receipts_are_signed_in_their_commit_and_verify(&store, &signer.public_key()).await;
            }
        };
    }
    for_each_case!(pg_tests);
}
