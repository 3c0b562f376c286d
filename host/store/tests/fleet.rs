//! Several hosts on one PostgreSQL: two `PgStore`s on one database are two
//! hosts. What a single host promises must hold across them: keys seen and
//! revoked everywhere, one audit chain, one owner of an idempotency key,
//! exact quota counts and usage, outbox numbers in commit order. Also the migrations
//! (several hosts starting at once, a newer schema refused), `/health`'s
//! view while the database is down, and recovery when it returns.
//!
//! One throwaway cluster for the whole file, one database per case; the
//! last case stops and restarts the cluster.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use gatehouse_store::audit::{Audit, category, kind};
use gatehouse_store::fleet::{FleetLimiter, LimitWindow, Take, Taken};
use gatehouse_store::model::{ApiKeyRecord, AuditEntry, User};
use gatehouse_store::postgres::{KEY_CACHE_TTL, PgOptions, PgStore, migrate, migrate_database};
use gatehouse_store::records::{Claim, IdempotencyRecord, IdempotencyState, OutboxEvent, RequestOutcome, UsageDelta, UsageTotals};
use gatehouse_store::{KeyHash, Store, StoreError};

use gatehouse_pg_harness::TempPostgres;

fn entry(description: &str) -> AuditEntry {
    Audit::new(kind::SYSTEM, category::SYSTEM_INTEGRITY, description).build()
}

fn key(id: &str, secret: &str) -> ApiKeyRecord {
    ApiKeyRecord {
        id: id.into(),
        user_id: "usr_a".into(),
        name: id.into(),
        hash: KeyHash::of(secret),
        prefix: "sk-".into(),
        admin: false,
        group_id: None,
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

async fn two_hosts(pg: &TempPostgres, db: &str) -> (Arc<PgStore>, Arc<PgStore>) {
    let url = pg.create_database(db);
    let a = PgStore::connect(PgOptions::new(url.clone())).await.expect("host A");
    let b = PgStore::connect(PgOptions::new(url)).await.expect("host B");
    (Arc::new(a), Arc::new(b))
}

async fn wait_listening(s: &PgStore) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !s.listening() {
        assert!(Instant::now() < deadline, "the key-change listener did not connect");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn hosts_starting_at_once_migrate_once_and_a_newer_schema_is_refused(pg: &TempPostgres) {
    // The CLI's migration of a fresh database, then of one already there.
    let fresh = pg.create_database("migrate_command");
    let latest = gatehouse_store::postgres::migrate::latest();
    let first = migrate_database(&PgOptions::new(fresh.clone())).await.expect("migrate");
    assert_eq!((first.from, first.to), (0, latest));
    let again = migrate_database(&PgOptions::new(fresh)).await.expect("migrate again");
    assert_eq!((again.from, again.to), (latest, latest));

    let url = pg.create_database("migrations");
    let starts = (0..4).map(|_| PgStore::connect(PgOptions::new(url.clone())));
    let stores: Vec<PgStore> = concurrently(starts).await.into_iter().map(|r| r.expect("every host starts")).collect();
    let client = stores[0].pool().get().await.expect("client");
    let rows = client.query("SELECT version, name FROM schema_migrations ORDER BY version", &[]).await.expect("read");
    let every: Vec<(i32, String)> =
        gatehouse_store::postgres::migrate::MIGRATIONS.iter().map(|(v, name, _)| (*v, (*name).to_owned())).collect();
    assert_eq!(rows.iter().map(|r| (r.get::<_, i32>(0), r.get::<_, String>(1))).collect::<Vec<_>>(), every, "each migration once");
    let again = migrate(stores[0].pool()).await.expect("migrate again");
    assert_eq!((again.from, again.to), (latest, latest), "nothing left to do");

    client.execute("INSERT INTO schema_migrations (version, name) VALUES (99, 'from the future')", &[]).await.expect("plant");
    let refused = PgStore::connect(PgOptions::new(url)).await.err().expect("a newer schema is refused");
    let message = format!("{refused:#}");
    assert!(message.contains("version 99") && message.contains("newer"), "{message}");
}

/// Run futures at once on the runtime's threads (as requests on several hosts) and wait for all.
async fn concurrently<F: std::future::Future + Send + 'static>(fs: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    #[expect(clippy::disallowed_methods, reason = "every handle is joined below")]
    let handles: Vec<_> = fs.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}

async fn a_key_created_on_one_host_works_on_the_other_and_a_revoke_reaches_it_within_the_bound(pg: &TempPostgres) {
    let (a, b) = two_hosts(pg, "keys").await;
    wait_listening(&b).await;
    let user = User { id: "usr_a".into(), name: "A".into(), email: "a@example.com".into(), created_at: Utc::now(), deactivated_at: None };
    a.create_user(user, entry("user")).await.expect("user");
    a.create_key(key("key_1", "sk-fleet"), entry("key")).await.expect("key");
    let hash = KeyHash::of("sk-fleet");
    // B finds it at once, and caches it (the second lookup is served from memory).
    assert!(!b.find_key_by_hash(&hash).await.expect("find").expect("found on B").is_revoked());
    assert!(!b.find_key_by_hash(&hash).await.expect("find").expect("cached").is_revoked());

    let seen = b.key_invalidations();
    let revoked_at = Instant::now();
    a.revoke_key("key_1", entry("revoke")).await.expect("revoke on A");
    // B refuses it within the bound...
    loop {
        if b.find_key_by_hash(&hash).await.expect("find").expect("found").is_revoked() {
            break;
        }
        assert!(revoked_at.elapsed() < KEY_CACHE_TTL + Duration::from_millis(500), "B still accepts the key after the bound");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // ...and it learnt of the change by notification, not only by the entry's age.
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.key_invalidations() == seen {
        assert!(Instant::now() < deadline, "B received no notification of A's revoke");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn appends_from_two_hosts_at_once_make_one_chain(pg: &TempPostgres) {
    let (a, b) = two_hosts(pg, "audit").await;
    concurrently((0..20).map(|i| {
        let host = if i % 2 == 0 { a.clone() } else { b.clone() };
        async move {
            for j in 0..5 {
                host.append_audit(vec![entry(&format!("task {i} record {j}"))]).await.expect("append");
            }
        }
    }))
    .await;
    for host in [&a, &b] {
        let report = host.verify_audit_chain().await.expect("verify");
        assert!(report.ok, "{report:?}");
        assert_eq!(report.records, 100);
    }
    let client = a.pool().get().await.expect("client");
    let (n, max): (i64, i64) = {
        let r = client.query_one("SELECT count(*), max(seq) FROM audit_records", &[]).await.expect("count");
        (r.get(0), r.get(1))
    };
    assert_eq!((n, max), (100, 100), "one gapless sequence");
}

async fn an_edited_or_truncated_chain_is_reported(pg: &TempPostgres) {
    let (a, _b) = two_hosts(pg, "tamper").await;
    a.append_audit((0..5).map(|i| entry(&format!("record {i}"))).collect()).await.expect("append");
    let client = a.pool().get().await.expect("client");
    // Edit the third record's content, keeping its hash.
    client
        .execute("UPDATE audit_records SET content = convert_to(replace(convert_from(content, 'UTF8'), 'record 2', 'record X'), 'UTF8') WHERE seq = 3", &[])
        .await
        .expect("edit");
    let report = a.verify_audit_chain().await.expect("verify");
    assert!(!report.ok);
    assert_eq!(report.broken.iter().map(|b| (b.position, b.detail.contains("edited"))).collect::<Vec<_>>(), [(3, true)]);
    // Remove the last record: the head no longer matches.
    client.execute("DELETE FROM audit_records WHERE seq = 5", &[]).await.expect("truncate");
    let report = a.verify_audit_chain().await.expect("verify");
    assert_eq!(report.breaks, 2, "{report:?}");
    assert_eq!(report.broken.last().map(|b| b.id.as_str()), Some("end of log"));
}

async fn one_host_wins_an_idempotency_key_claimed_on_both_at_once(pg: &TempPostgres) {
    let (a, b) = two_hosts(pg, "idempotency").await;
    let record = IdempotencyRecord {
        body_hash: "h".into(),
        state: IdempotencyState::InFlight { lease_until: Utc::now() + chrono::Duration::seconds(30) },
        expires_at: Utc::now() + chrono::Duration::hours(24),
    };
    for round in 0..10 {
        let scope = format!("key_1/{round}");
        let claims = (0..8).map(|i| {
            let (host, scope, record) = (if i % 2 == 0 { a.clone() } else { b.clone() }, scope.clone(), record.clone());
            async move { host.idempotency_claim(&scope, record).await.expect("claim") }
        });
        let won = concurrently(claims).await.into_iter().filter(|c| *c == Claim::Claimed).count();
        assert_eq!(won, 1, "round {round}: exactly one claim wins");
    }
}

async fn quota_counts_from_both_hosts_add_up_exactly(pg: &TempPostgres) {
    let (a, b) = two_hosts(pg, "quota").await;
    let windows = vec!["d:2026-11-27".to_owned()];
    concurrently((0..50).map(|i| {
        let (host, windows) = (if i % 2 == 0 { a.clone() } else { b.clone() }, windows.clone());
        async move {
            host.count_quota("key_1", &windows);
            host.finish_request(RequestOutcome::default()).await.expect("outcome");
        }
    }))
    .await;
    // Each host's counts are written by the outcome after them; both hosts read the sum.
    let (ca, cb) = (a.clone(), b.clone());
    let w = windows.clone();
    let counts = tokio::task::spawn_blocking(move || (ca.quota_counts("key_1", &w).expect("A"), cb.quota_counts("key_1", &w).expect("B")))
        .await
        .expect("read");
    assert_eq!(counts, (vec![50], vec![50]));

    // A count no outcome followed is written by `flush` (at shutdown) and seen by the other host.
    a.count_quota("key_2", &windows);
    a.flush().await.expect("flush");
    let (cb, w) = (b.clone(), windows.clone());
    let seen = tokio::task::spawn_blocking(move || cb.quota_counts("key_2", &w).expect("B")).await.expect("read");
    assert_eq!(seen, [1]);
}

fn windows(limits: [u64; 4]) -> Vec<LimitWindow> {
    let ends = Utc::now() + chrono::Duration::minutes(1);
    ["chat:n:x", "chat:h:x", "chat:d:x", "chat:m:x"]
        .iter()
        .zip(limits)
        .enumerate()
        .map(|(i, (id, limit))| LimitWindow { id: (*id).into(), ends_at: ends + chrono::Duration::minutes(i as i64), limit })
        .collect()
}

async fn a_limit_spread_over_hosts_admits_exactly_its_limit_and_reports_once(pg: &TempPostgres) {
    let (a, b) = two_hosts(pg, "fleet_limits").await;
    let w = windows([1000, 1000, 25, 1000]);
    let outcomes = concurrently((0..80).map(|i| {
        let (host, w) = (if i % 2 == 0 { a.clone() } else { b.clone() }, w.clone());
        async move { host.take_limits("key_1", &w, Take::Count).await.expect("take") }
    }))
    .await;
    assert_eq!(outcomes.iter().filter(|t| t.allowed).count(), 25, "exactly the day's limit is admitted, from both hosts");
    let refused: Vec<&Taken> = outcomes.iter().filter(|t| !t.allowed).collect();
    assert!(refused.iter().all(|t| t.exceeded == Some(2)), "the day window refuses");
    assert_eq!(refused.iter().filter(|t| t.first).count(), 1, "the first refusal is reported once, fleet-wide");
    // Refusals counted nothing; a peek counts nothing either.
    let peek = b.take_limits("key_1", &w, Take::Peek).await.expect("peek");
    assert_eq!((peek.allowed, peek.first, peek.counts.clone()), (false, false, vec![25, 25, 25, 25]));
    // A peek at a key never counted reads zeros and makes no row (it writes nothing).
    let unseen = a.take_limits("key_3", &w, Take::Peek).await.expect("peek");
    assert_eq!((unseen.allowed, unseen.counts), (true, vec![0, 0, 0, 0]));
    let rows: i64 = a
        .pool()
        .get()
        .await
        .expect("client")
        .query_one("SELECT count(*) FROM limit_windows WHERE key_id = 'key_3'", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(rows, 0);
    // An abandoned body costs rate, not quota: minute and hour only, over the limit or not.
    let rates = a.take_limits("key_1", &w[..2], Take::Rates).await.expect("rates");
    assert_eq!(rates.counts, [26, 26]);
    // Another key counts on its own; the window with the tightest remainder is the minute.
    let other = a.take_limits("key_2", &windows([3, 1000, 1000, 1000]), Take::Count).await.expect("take");
    assert_eq!((other.allowed, other.counts), (true, vec![1, 1, 1, 1]));
    // Of two windows at their limits, the one that resets last is reported.
    let both = windows([26, 1000, 25, 1000]);
    assert_eq!(a.take_limits("key_1", &both, Take::Count).await.expect("take").exceeded, Some(2));
    // A host that restarts finds the counts where it left them.
    drop((a, b));
    let again = PgStore::connect(PgOptions::new(pg.url("fleet_limits"))).await.expect("restart");
    assert_eq!(again.take_limits("key_1", &w, Take::Peek).await.expect("peek").counts, [26, 26, 25, 25]);
}

async fn one_key_billed_from_both_hosts_at_once_adds_up_one_ledger_row_per_request(pg: &TempPostgres) {
    let (a, b) = two_hosts(pg, "usage").await;
    concurrently((0..40).map(|i| {
        let host = if i % 2 == 0 { a.clone() } else { b.clone() };
        async move {
            let usage = UsageDelta {
                user_id: "usr_a".into(),
                key_id: "key_1".into(),
                group_id: None,
                model: "echo/test".into(),
                request_id: format!("req-{i}"),
                prompt_tokens: 3,
                completion_tokens: i,
            };
            host.finish_request(RequestOutcome { usage: Some(usage), ..Default::default() }).await.expect("bill")
        }
    }))
    .await;
    let expected = UsageTotals { requests: 40, prompt_tokens: 120, completion_tokens: (0..40).sum() };
    for host in [&a, &b] {
        let (users, keys) = host.usage_totals().await.expect("totals");
        assert_eq!((users, keys), (vec![("usr_a".to_owned(), expected)], vec![("key_1".to_owned(), expected)]));
    }
    let client = a.pool().get().await.expect("client");
    let rows: i64 = client.query_one("SELECT count(*) FROM usage_ledger WHERE key_id = 'key_1'", &[]).await.expect("ledger").get(0);
    assert_eq!(rows, 40);
}

async fn outbox_numbers_follow_commit_order_across_hosts(pg: &TempPostgres) {
    let (a, b) = two_hosts(pg, "outbox").await;
    concurrently((0..40).map(|i| {
        let host = if i % 2 == 0 { a.clone() } else { b.clone() };
        async move {
            let events = vec![OutboxEvent::new("e", serde_json::json!({"i": i})), OutboxEvent::new("e", serde_json::json!({}))];
            host.enqueue_events(events, Vec::new()).await.expect("enqueue")
        }
    }))
    .await;
    let seqs: Vec<u64> = a.outbox_after(0, 1_000).await.expect("outbox").into_iter().map(|(n, _)| n).collect();
    assert_eq!(seqs, (1..=80).collect::<Vec<u64>>(), "gapless: a number is taken only by a commit, in its order");
}

async fn an_event_numbered_first_is_committed_first(pg: &TempPostgres) {
    let (a, b) = two_hosts(pg, "outbox_order").await;
    // Host A's transaction takes number 1 and has not committed yet.
    let mut raw = a.pool().get().await.expect("client");
    let txn = raw.transaction().await.expect("begin");
    let first: i64 = txn.query_one("UPDATE outbox_head SET seq = seq + 1 WHERE singleton RETURNING seq", &[]).await.expect("number").get(0);
    assert_eq!(first, 1);
    let event = OutboxEvent::new("e", serde_json::json!({}));
    let text = serde_json::to_string(&event).expect("json");
    txn.execute("INSERT INTO outbox (seq, event_id, created, event) VALUES (1, $1, $2, $3)", &[&event.id, &event.created, &text])
        .await
        .expect("insert");
    // Host B's event waits for it: had it committed number 2 first, a
    // dispatcher reading then would move its cursor past 1 and never deliver it.
    let b2 = b.clone();
    #[expect(clippy::disallowed_methods, reason = "joined below")]
    let pending = tokio::spawn(async move { b2.enqueue_events(vec![OutboxEvent::new("e", serde_json::json!({}))], Vec::new()).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!pending.is_finished(), "B's event did not wait for the number before it");
    assert!(b.outbox_after(0, 10).await.expect("outbox").is_empty(), "nothing visible before A commits");
    txn.commit().await.expect("commit");
    pending.await.expect("task").expect("enqueue");
    let seqs: Vec<u64> = b.outbox_after(0, 10).await.expect("outbox").into_iter().map(|(n, _)| n).collect();
    assert_eq!(seqs, [1, 2]);
}

/// Wait (bounded) until `host.healthy()` is `want`, calling nothing else on it.
async fn every_hosts_receipt_key_is_listed_by_every_host(pg: &TempPostgres) {
    use gatehouse_store::receipts::PublishedKey;
    let (a, b) = two_hosts(pg, "receipt_keys").await;
    let key_a = PublishedKey { key_id: "aaaaaaaaaaaaaaaa".into(), public_key: "QUFBQQ==".into() };
    let key_b = PublishedKey { key_id: "bbbbbbbbbbbbbbbb".into(), public_key: "QkJCQg==".into() };
    a.register_receipt_key(&key_a).await.expect("register A");
    b.register_receipt_key(&key_b).await.expect("register B");
    // A restarted host registers its key again: nothing changes.
    a.register_receipt_key(&key_a).await.expect("register A again");
    assert_eq!(b.receipt_keys().await.expect("list"), [key_a.clone(), key_b.clone()]);
    assert_eq!(a.receipt_keys().await.expect("list"), [key_a.clone(), key_b]);
    // Verifiers pick a key by its id: one id never names two keys.
    let impostor = PublishedKey { key_id: key_a.key_id.clone(), public_key: "WFhYWA==".into() };
    let refused = b.register_receipt_key(&impostor).await;
    assert!(matches!(refused, Err(StoreError::Conflict(_))), "{refused:?}");
    assert_eq!(a.receipt_keys().await.expect("list")[0], key_a);
}

async fn wait_health(host: &PgStore, want: bool) {
    let deadline = Instant::now() + gatehouse_store::postgres::PROBE_EVERY * 2 + Duration::from_secs(8);
    while host.healthy() != want {
        assert!(Instant::now() < deadline, "health did not turn {want} by itself: {:?}", host.storage_failure());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_host_is_unhealthy_while_the_database_is_down_and_recovers_unaided(pg: &mut TempPostgres) {
    let (a, b) = two_hosts(pg, "health").await;
    wait_listening(&b).await;
    let user =
        User { id: "usr_kept".into(), name: "K".into(), email: "k@example.com".into(), created_at: Utc::now(), deactivated_at: None };
    a.create_user(user, entry("acknowledged before the outage")).await.expect("user");
    assert!(a.healthy());
    pg.stop();
    // Pooled connections find the server gone; a new one is refused. Either
    // way the caller learns the database is unavailable (the host answers 503),
    // not that the store failed (500).
    let mut failed = false;
    for _ in 0..3 {
        match a.get_user("usr_kept").await {
            Ok(_) => {}
            Err(StoreError::Unavailable(_)) => failed = true,
            Err(e) => panic!("a read while the database is down: {e:?}, not Unavailable"),
        }
    }
    assert!(failed, "reads fail while the database is down");
    let lost =
        User { id: "usr_lost".into(), name: "L".into(), email: "l@example.com".into(), created_at: Utc::now(), deactivated_at: None };
    let write = a.create_user(lost, entry("refused during the outage")).await;
    assert!(matches!(write, Err(StoreError::Unavailable(_))), "a write while the database is down: {write:?}");
    let _ = a.get_user("usr_kept").await;
    assert!(!a.healthy(), "health says so");
    assert!(a.storage_failure().is_some_and(|f| f.contains("PostgreSQL")), "{:?}", a.storage_failure());
    // B makes no call at all: its probe notices on its own.
    wait_health(&b, false).await;

    pg.restart();
    wait_health(&b, true).await;
    // Nobody restarts the hosts: the next call connects again, and health follows.
    assert!(a.get_user("usr_kept").await.expect("read after the restart").is_some(), "acknowledged before, present after");
    assert!(a.healthy() && a.storage_failure().is_none());
    // The key-change listener is back too, so B's key cache is on again.
    wait_listening(&b).await;
    let report = b.verify_audit_chain().await.expect("verify");
    assert!(report.ok && report.records == 1, "{report:?}");
}

/// The limiter's commits do not wait for the WAL flush (fleet-limits.md);
/// its counts are made durable by the next synchronous commit, as WAL is
/// flushed in order: a PostgreSQL crash right after that commit (an
/// immediate shutdown, SIGQUIT: no flush, recovery at start) keeps them.
async fn limit_counts_survive_a_postgres_crash_once_a_later_commit_returned(pg: &mut TempPostgres) {
    let url = pg.create_database("limit_crash");
    let host = PgStore::connect(PgOptions::new(url.clone())).await.expect("host");
    let w = windows([1000, 1000, 1000, 1000]);
    for _ in 0..7 {
        assert!(host.take_limits("key_c", &w, Take::Count).await.expect("take").allowed);
    }
    // The request's outcome: an ordinary, synchronous commit.
    let after = User { id: "usr_after".into(), name: "A".into(), email: String::new(), created_at: Utc::now(), deactivated_at: None };
    host.create_user(after, entry("after the counts")).await.expect("commit");
    let pid = pg.server_pid().expect("running");
    let status = std::process::Command::new("kill").args(["-QUIT", &pid.to_string()]).status().expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while pg.server_pid().is_some() || std::net::TcpStream::connect(("127.0.0.1", pg.port())).is_ok() {
        assert!(Instant::now() < deadline, "PostgreSQL did not stop");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(host);
    pg.restart();
    let again = PgStore::connect(PgOptions::new(url)).await.expect("after recovery");
    assert_eq!(again.take_limits("key_c", &w, Take::Peek).await.expect("peek").counts, [7, 7, 7, 7], "no count lost");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_hosts_on_one_postgres_keep_every_promise() {
    let mut pg = TempPostgres::start();
    hosts_starting_at_once_migrate_once_and_a_newer_schema_is_refused(&pg).await;
    a_key_created_on_one_host_works_on_the_other_and_a_revoke_reaches_it_within_the_bound(&pg).await;
    appends_from_two_hosts_at_once_make_one_chain(&pg).await;
    an_edited_or_truncated_chain_is_reported(&pg).await;
    one_host_wins_an_idempotency_key_claimed_on_both_at_once(&pg).await;
    quota_counts_from_both_hosts_add_up_exactly(&pg).await;
    a_limit_spread_over_hosts_admits_exactly_its_limit_and_reports_once(&pg).await;
    one_key_billed_from_both_hosts_at_once_adds_up_one_ledger_row_per_request(&pg).await;
    outbox_numbers_follow_commit_order_across_hosts(&pg).await;
    an_event_numbered_first_is_committed_first(&pg).await;
    every_hosts_receipt_key_is_listed_by_every_host(&pg).await;
    limit_counts_survive_a_postgres_crash_once_a_later_commit_returned(&mut pg).await;
    // Last: it stops and restarts the cluster.
    a_host_is_unhealthy_while_the_database_is_down_and_recovers_unaided(&mut pg).await;
}
