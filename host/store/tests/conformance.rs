//! One conformance suite for every store backend: the same cases run against
//! redb (each case a test of its own) and PostgreSQL (all cases in one test,
//! each on a database of its own in one throwaway cluster, so the cluster is
//! started once and stopped when the test ends).
//!
//! The cases are written once, in `cases`, against `&dyn Store`; each
//! backend opens a fresh store per case, with a receipt signer.

mod common;

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

mod cases {
    use super::*;

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

mod webhook_cases {
    //! `WebhookStore`: cursors, deliveries, retries, auto-disable, pruning.
    use chrono::{DateTime, Utc};
    use gatehouse_store::StoreError;
    use gatehouse_store::records::OutboxEvent;
    use gatehouse_store::webhooks::{Attempt, AttemptEffect, Delivery, Endpoint, EndpointPatch, StoredSecret, TEST_EVENT};

    use super::Both;

    fn entry() -> gatehouse_store::model::AuditEntry {
        super::entry("webhook change")
    }

    fn endpoint(id: &str, events: &[&str]) -> Endpoint {
        let now = Utc::now();
        Endpoint {
            id: id.into(),
            url: "https://example.com/hook".into(),
            description: String::new(),
            events: events.iter().map(|s| s.to_string()).collect(),
            enabled: true,
            failure_count: 0,
            disabled_reason: None,
            disabled_at: None,
            created_at: now,
            updated_at: now,
        }
    }

    fn event(kind: &str) -> OutboxEvent {
        OutboxEvent::new(kind, serde_json::json!({}))
    }

    fn attempt(d: &Delivery, fresh: bool, error: Option<&str>, retry_at: Option<DateTime<Utc>>) -> Attempt {
        Attempt {
            delivery: d.clone(),
            fresh,
            at: Utc::now(),
            status_code: Some(if error.is_some() { 500 } else { 200 }),
            latency_ms: 3,
            error: error.map(str::to_owned),
            retry_at,
            disable_after: 2,
            keep: 3,
            disable_audit: entry(),
        }
    }

    async fn one(s: &dyn Both, a: Attempt) -> AttemptEffect {
        s.record(vec![a], Vec::new()).await.expect("record").remove(0)
    }

    pub async fn cursors_start_at_the_end_of_the_outbox_and_only_move_forward(s: &dyn Both) {
        s.enqueue_events(vec![event("dlp:incident"), event("pii:incident")], Vec::new()).await.expect("events");
        s.create_endpoint(endpoint("wh_a", &["*"]), StoredSecret::new("whsec_test".into()), entry()).await.expect("create");
        assert_eq!(s.endpoint_cursor("wh_a").await.expect("cursor"), 2, "no backlog for a new endpoint");
        s.record(Vec::new(), vec![("wh_a".into(), 5)]).await.expect("forward");
        s.record(Vec::new(), vec![("wh_a".into(), 3), ("wh_gone".into(), 9)]).await.expect("back");
        assert_eq!(s.endpoint_cursor("wh_a").await.expect("cursor"), 5);
        assert_eq!(s.endpoint_cursor("wh_gone").await.expect("cursor"), 0);
        // Re-enabling skips what was fired while disabled.
        s.update_endpoint("wh_a", EndpointPatch { enabled: Some(false), ..Default::default() }, entry()).await.expect("off");
        s.enqueue_events((0..5).map(|_| event("dlp:incident")).collect(), Vec::new()).await.expect("events");
        s.update_endpoint("wh_a", EndpointPatch { enabled: Some(true), ..Default::default() }, entry()).await.expect("on");
        assert_eq!(s.endpoint_cursor("wh_a").await.expect("cursor"), 7);
    }

    fn aged(days: i64) -> OutboxEvent {
        let mut e = event("pii:incident");
        e.created -= days * 24 * 3600;
        e
    }

    async fn seqs(s: &dyn Both) -> Vec<u64> {
        s.outbox_after(0, 100).await.expect("outbox").into_iter().map(|(seq, _)| seq).collect()
    }

    pub async fn the_outbox_keeps_what_an_enabled_endpoint_has_not_passed_young_events_and_the_newest(s: &dyn Both) {
        let cutoff = Utc::now().timestamp() - 30 * 24 * 3600;
        // wh_b starts at the head (0), before any event.
        s.create_endpoint(endpoint("wh_b", &["*"]), StoredSecret::new("whsec_test".into()), entry()).await.expect("b");
        s.enqueue_events((0..5).map(|_| aged(100)).collect(), Vec::new()).await.expect("old");
        s.enqueue_events(vec![aged(1)], Vec::new()).await.expect("young");
        s.create_endpoint(endpoint("wh_a", &["*"]), StoredSecret::new("whsec_test".into()), entry()).await.expect("a");
        assert_eq!(s.prune_outbox(cutoff, 100).await.expect("prune"), 0, "wh_b has passed none");
        s.record(Vec::new(), vec![("wh_b".into(), 3)]).await.expect("cursor");
        assert_eq!(s.prune_outbox(cutoff, 2).await.expect("prune"), 2, "at most the limit");
        assert_eq!(s.prune_outbox(cutoff, 100).await.expect("prune"), 1);
        assert_eq!(seqs(s).await, [4, 5, 6]);
        // A disabled endpoint holds nothing back (enabling it again skips to the head).
        s.update_endpoint("wh_b", EndpointPatch { enabled: Some(false), ..Default::default() }, entry()).await.expect("off");
        assert_eq!(s.prune_outbox(cutoff, 100).await.expect("prune"), 2);
        assert_eq!(seqs(s).await, [6], "the young event stays");
        // All old, no endpoint behind: the newest stays, and numbering goes on after it.
        s.delete_endpoint("wh_a", entry()).await.expect("delete a");
        s.enqueue_events(vec![aged(100)], Vec::new()).await.expect("old");
        assert_eq!(s.prune_outbox(Utc::now().timestamp() + 1, 100).await.expect("prune"), 1);
        assert_eq!(seqs(s).await, [7]);
        s.enqueue_events(vec![event("dlp:incident")], Vec::new()).await.expect("new");
        assert_eq!(seqs(s).await, [7, 8]);
    }

    pub async fn the_queue_depth_counts_what_enabled_endpoints_have_not_passed_and_pending_retries(s: &dyn Both) {
        s.create_endpoint(endpoint("wh_a", &["*"]), StoredSecret::new("whsec_test".into()), entry()).await.expect("a");
        s.create_endpoint(endpoint("wh_b", &["dlp:incident"]), StoredSecret::new("whsec_test".into()), entry()).await.expect("b");
        assert_eq!(s.queue_depth().await.expect("depth"), 0);
        s.enqueue_events((0..3).map(|_| event("dlp:incident")).collect(), Vec::new()).await.expect("events");
        assert_eq!(s.queue_depth().await.expect("depth"), 6, "three events, two endpoints behind them");
        s.record(Vec::new(), vec![("wh_a".into(), 3), ("wh_b".into(), 1)]).await.expect("cursors");
        assert_eq!(s.queue_depth().await.expect("depth"), 2);
        // A disabled endpoint's backlog is not waiting (re-enabling skips it).
        s.update_endpoint("wh_b", EndpointPatch { enabled: Some(false), ..Default::default() }, entry()).await.expect("off");
        assert_eq!(s.queue_depth().await.expect("depth"), 0);
        // A scheduled retry is.
        let now = Utc::now();
        let d = Delivery::new("wh_a", &event("dlp:incident"), now, now).expect("delivery");
        let later = now + chrono::Duration::seconds(60);
        assert_eq!(one(s, attempt(&d, true, Some("HTTP 500"), Some(later))).await, AttemptEffect::Retry);
        assert_eq!(s.queue_depth().await.expect("depth"), 1);
    }

    pub async fn fresh_attempts_retries_failures_auto_disable_and_pruning(s: &dyn Both) {
        s.create_endpoint(endpoint("wh_a", &["*"]), StoredSecret::new("whsec_test".into()), entry()).await.expect("create");
        let now = Utc::now();
        let ds: Vec<Delivery> = (0..4).map(|_| Delivery::new("wh_a", &event("dlp:incident"), now, now).expect("delivery")).collect();
        // A fresh failure with a retry left becomes a pending row with its body.
        let later = now + chrono::Duration::seconds(60);
        assert_eq!(one(s, attempt(&ds[0], true, Some("HTTP 500"), Some(later))).await, AttemptEffect::Retry);
        let due = s.due_deliveries("wh_a", later, 10).await.expect("due");
        assert_eq!(due.due.len(), 1);
        assert_eq!(due.due[0].attempts, 1);
        assert_eq!(due.due[0].body, ds[0].body);
        assert!(s.due_deliveries("wh_a", now, 10).await.expect("due").next_due.is_some());
        assert_eq!(s.endpoints_with_pending().await.expect("pending"), ["wh_a"]);
        // Its retry succeeds.
        assert_eq!(one(s, attempt(&due.due[0], false, None, None)).await, AttemptEffect::Acknowledged);
        assert!(s.endpoints_with_pending().await.expect("pending").is_empty());
        // Two failures in a row disable (disable_after = 2); one batch, one commit.
        let effects = s
            .record(
                vec![attempt(&ds[1], true, Some("timeout"), None), attempt(&ds[2], true, Some("timeout"), None)],
                vec![("wh_a".into(), 4)],
            )
            .await
            .expect("f1, f2");
        assert_eq!(effects, [AttemptEffect::Failed { disabled: false }, AttemptEffect::Failed { disabled: true }]);
        let ep = s.get_endpoint("wh_a").await.expect("get").expect("exists");
        assert!(!ep.enabled);
        assert_eq!(ep.failure_count, 2);
        assert!(ep.disabled_reason.expect("reason").contains("timeout"));
        s.queue_delivery(ds[3].clone(), entry()).await.expect_err("a disabled endpoint takes no test deliveries");
        // Re-enabling resets the counter.
        let ep = s.update_endpoint("wh_a", EndpointPatch { enabled: Some(true), ..Default::default() }, entry()).await.expect("enable");
        assert!(ep.enabled);
        assert_eq!(ep.failure_count, 0);
        assert_eq!(ep.disabled_reason, None);
        // History without bodies, pruned to `keep` = 3: the oldest (ds[0]) went.
        assert_eq!(one(s, attempt(&ds[3], true, None, None)).await, AttemptEffect::Acknowledged);
        let recent = s.recent_deliveries("wh_a", 10).await.expect("recent");
        let ids: Vec<&str> = recent.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids.len(), 3);
        assert_eq!(ids[0], ds[3].id);
        assert!(!ids.contains(&ds[0].id.as_str()) && ids.contains(&ds[1].id.as_str()) && ids.contains(&ds[2].id.as_str()));
        assert!(recent.iter().all(|d| d.body.is_empty()));
    }

    pub async fn a_fresh_attempt_after_a_crash_continues_the_stored_row(s: &dyn Both) {
        s.create_endpoint(endpoint("wh_a", &["*"]), StoredSecret::new("whsec_test".into()), entry()).await.expect("create");
        let now = Utc::now();
        let d = Delivery::new("wh_a", &event("dlp:incident"), now, now).expect("delivery");
        assert_eq!(one(s, attempt(&d, true, Some("HTTP 500"), Some(now))).await, AttemptEffect::Retry);
        // The cursor was not saved: the event is read again and attempted as fresh.
        assert_eq!(one(s, attempt(&d, true, None, None)).await, AttemptEffect::Acknowledged);
        let recent = s.recent_deliveries("wh_a", 10).await.expect("recent");
        assert_eq!(recent.len(), 1);
        assert_eq!(recent[0].attempts, 2);
        assert!(s.endpoints_with_pending().await.expect("pending").is_empty());
        // Finished: a further attempt changes nothing.
        assert_eq!(one(s, attempt(&d, true, None, None)).await, AttemptEffect::Gone);
    }

    pub async fn cancel_delete_and_rotation(s: &dyn Both) {
        let first = StoredSecret::new("whsec_test".into());
        s.create_endpoint(endpoint("wh_x", &["*"]), first, entry()).await.expect("create");
        let second = StoredSecret::new("whsec_test".into());
        s.rotate_secret("wh_x", second.clone(), entry()).await.expect("rotate");
        assert_eq!(s.endpoint_secret("wh_x").await.expect("secret"), Some(second));
        let now = Utc::now();
        let ds: Vec<Delivery> = (0..2).map(|_| Delivery::new("wh_x", &event(TEST_EVENT), now, now).expect("d")).collect();
        for d in &ds {
            s.queue_delivery(d.clone(), entry()).await.expect("queue");
        }
        s.cancel_deliveries("wh_x", vec![ds[0].id.clone()], "endpoint disabled".into(), 10).await.expect("cancel");
        assert_eq!(one(s, attempt(&ds[0], false, None, None)).await, AttemptEffect::Gone);
        assert_eq!(s.due_deliveries("wh_x", now, 10).await.expect("due").due.len(), 1);
        s.delete_endpoint("wh_x", entry()).await.expect("delete");
        assert!(s.get_endpoint("wh_x").await.expect("get").is_none());
        assert!(s.endpoint_secret("wh_x").await.expect("secret").is_none());
        assert!(s.endpoints_with_pending().await.expect("pending").is_empty());
        assert!(s.recent_deliveries("wh_x", 10).await.expect("recent").is_empty());
        assert_eq!(one(s, attempt(&ds[1], false, None, None)).await, AttemptEffect::Gone);
        assert!(matches!(s.delete_endpoint("wh_x", entry()).await, Err(StoreError::NotFound(_))));
    }
}

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
            webhook_cases::cancel_delete_and_rotation
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

    use super::common::pg::TempPostgres;

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
