//! The plugin registry's conformance cases, run on redb (each case a test of
//! its own) and on PostgreSQL (every case on a database of its own in one
//! throwaway cluster), plus what only a shared database can show: a change
//! made through one host's store announced to another's, and concurrent
//! uploads of one name numbered without a gap or a clash.

use std::time::Duration;

use gatehouse_store::StoreError;
use gatehouse_store::registry::{NewVersion, PluginRegistry, PluginState, PublishedPlugin, ShadowCounts};

fn upload(name: &str, content: &str) -> NewVersion {
    let bytes = format!("\0asm component {content}").into_bytes();
    NewVersion {
        name: name.into(),
        kind: "policy".into(),
        plugin_version: format!("1.0.{}", content.len()),
        sha256: sha256(&bytes),
        checks: vec!["world".into(), "info".into(), "size".into(), "instantiate".into()],
        uploaded_by: Some("usr_admin".into()),
        group_id: None,
        state: PluginState::Active,
        bytes,
    }
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

fn states(versions: &[PublishedPlugin]) -> Vec<(u32, PluginState)> {
    versions.iter().map(|v| (v.version, v.state)).collect()
}

/// Wait until `changes` moves past `seen` (at most 5 s).
async fn moved(changes: &mut gatehouse_store::registry::Changes) {
    tokio::time::timeout(Duration::from_secs(5), changes.changed()).await.expect("announced within 5 s").expect("sender alive");
}

mod cases {
    use super::*;
    use PluginState::{Active, Inactive, Shadow};

    pub async fn publishing_numbers_versions_and_the_newest_upload_serves(r: &dyn PluginRegistry) {
        assert!(r.current().await.expect("current").is_empty());
        assert!(r.versions("deny-words").await.expect("versions").is_empty());
        let one = r.publish(upload("deny-words", "one")).await.expect("v1");
        assert_eq!((one.version, one.state, one.size), (1, Active, b"\0asm component one".len() as u64));
        let two = r.publish(upload("deny-words", "two")).await.expect("v2");
        assert_eq!(two.version, 2);
        r.publish(upload("other", "x")).await.expect("other name");
        let versions = r.versions("deny-words").await.expect("versions");
        assert_eq!(states(&versions), [(1, Inactive), (2, Active)]);
        assert_eq!(versions[1].checks, ["world", "info", "size", "instantiate"]);
        assert_eq!(versions[1].uploaded_by.as_deref(), Some("usr_admin"));
        assert_eq!(r.component("deny-words", 1).await.expect("bytes"), Some(b"\0asm component one".to_vec()));
        assert_eq!(r.component("deny-words", 2).await.expect("bytes"), Some(b"\0asm component two".to_vec()));
        assert_eq!(r.component("deny-words", 3).await.expect("bytes"), None);
        let current: Vec<(String, u32)> = r.current().await.expect("current").into_iter().map(|p| (p.name, p.version)).collect();
        assert_eq!(current, [("deny-words".to_owned(), 2), ("other".to_owned(), 1)]);
    }

    pub async fn a_rollback_goes_to_the_previous_or_a_named_version_and_refuses_when_there_is_none(r: &dyn PluginRegistry) {
        r.publish(upload("p", "one")).await.expect("v1");
        assert!(
            matches!(r.rollback("p", None).await, Err(StoreError::Conflict(m)) if m.contains("no version before")),
            "nothing before the first"
        );
        r.publish(upload("p", "two")).await.expect("v2");
        r.publish(upload("p", "three")).await.expect("v3");
        let back = r.rollback("p", None).await.expect("rollback");
        assert_eq!((back.version, back.state), (2, Active));
        assert_eq!(states(&r.versions("p").await.expect("versions")), [(1, Inactive), (2, Active), (3, Inactive)]);
        assert_eq!(r.rollback("p", None).await.expect("again").version, 1, "a second rollback goes one further back");
        assert_eq!(r.rollback("p", Some(3)).await.expect("forward").version, 3, "a named version, even a newer one");
        assert!(matches!(r.rollback("p", Some(9)).await, Err(StoreError::NotFound(_))));
        assert!(matches!(r.rollback("nothing", None).await, Err(StoreError::NotFound(_))));
        assert!(matches!(r.activate("p", 0).await, Err(StoreError::NotFound(_))));
        assert_eq!(r.activate("p", 3).await.expect("already active").state, Active, "activating the active one changes nothing");
        assert_eq!(states(&r.versions("p").await.expect("versions")), [(1, Inactive), (2, Inactive), (3, Active)]);
    }

    pub async fn a_shadow_runs_beside_the_active_version_until_activated(r: &dyn PluginRegistry) {
        r.publish(upload("s", "one")).await.expect("v1");
        let shadow = r.publish(NewVersion { state: Shadow, ..upload("s", "two") }).await.expect("v2 shadow");
        assert_eq!((shadow.version, shadow.state), (2, Shadow));
        assert_eq!(states(&r.versions("s").await.expect("versions")), [(1, Active), (2, Shadow)], "the active one still serves");
        assert!(matches!(r.shadow("s", 1).await, Err(StoreError::Conflict(_))), "the active version cannot be the shadow");
        r.publish(NewVersion { state: Shadow, ..upload("s", "three") }).await.expect("v3 shadow");
        assert_eq!(states(&r.versions("s").await.expect("versions")), [(1, Active), (2, Inactive), (3, Shadow)], "one shadow at a time");
        assert_eq!(r.shadow("s", 2).await.expect("shadow v2").state, Shadow);
        assert_eq!(states(&r.versions("s").await.expect("versions")), [(1, Active), (2, Shadow), (3, Inactive)]);
        r.activate("s", 2).await.expect("activate the shadow");
        assert_eq!(states(&r.versions("s").await.expect("versions")), [(1, Inactive), (2, Active), (3, Inactive)]);
        let current = r.current().await.expect("current");
        assert_eq!(states(&current), [(2, Active)]);
        assert!(matches!(r.publish(NewVersion { state: Inactive, ..upload("s", "four") }).await, Err(StoreError::Conflict(_))));
    }

    pub async fn a_name_stays_with_the_group_that_registered_it(r: &dyn PluginRegistry) {
        let a = |c: &str| NewVersion { group_id: Some("grp_a".into()), ..upload("tenant-a", c) };
        r.publish(a("one")).await.expect("group a registers the name");
        r.publish(a("two")).await.expect("and publishes again");
        let b = NewVersion { group_id: Some("grp_b".into()), ..upload("tenant-a", "b") };
        assert!(matches!(r.publish(b).await, Err(StoreError::Conflict(m)) if m.contains("grp_a")), "another group: conflict");
        assert!(matches!(r.publish(upload("tenant-a", "op")).await, Err(StoreError::Conflict(_))), "nor the operator over a group's name");
        r.publish(upload("operator", "x")).await.expect("operator name");
        let g = NewVersion { group_id: Some("grp_a".into()), ..upload("operator", "y") };
        assert!(matches!(r.publish(g).await, Err(StoreError::Conflict(m)) if m.contains("operator")), "a group over the operator's name");
        assert_eq!(r.versions("tenant-a").await.expect("versions").len(), 2, "refused uploads are not kept");
    }

    pub async fn every_write_is_announced(r: &dyn PluginRegistry) {
        let mut changes = r.subscribe();
        changes.borrow_and_update();
        r.publish(upload("n", "one")).await.expect("publish");
        moved(&mut changes).await;
        r.publish(upload("n", "two")).await.expect("publish");
        moved(&mut changes).await;
        r.rollback("n", None).await.expect("rollback");
        moved(&mut changes).await;
        r.shadow("n", 2).await.expect("shadow");
        moved(&mut changes).await;
        r.activate("n", 2).await.expect("activate");
        moved(&mut changes).await;
    }

    pub async fn a_groups_base_policy_is_kept_replaced_cleared_and_announced(r: &dyn PluginRegistry) {
        assert!(r.group_bases().await.expect("bases").is_empty(), "no group names one at first");
        let mut changes = r.subscribe();
        changes.borrow_and_update();
        r.set_group_base("grp_a", Some("strict-floor")).await.expect("set");
        moved(&mut changes).await;
        r.set_group_base("grp_b", Some("internal")).await.expect("set");
        r.set_group_base("grp_a", Some("confidential")).await.expect("replace");
        moved(&mut changes).await;
        let bases = r.group_bases().await.expect("bases");
        assert_eq!(bases.get("grp_a").map(String::as_str), Some("confidential"), "{bases:?}");
        assert_eq!(bases.get("grp_b").map(String::as_str), Some("internal"), "{bases:?}");
        r.set_group_base("grp_a", None).await.expect("clear");
        moved(&mut changes).await;
        r.set_group_base("grp_never_set", None).await.expect("clearing what was never set is no error");
        let bases = r.group_bases().await.expect("bases");
        assert_eq!(bases.into_iter().collect::<Vec<_>>(), [("grp_b".to_owned(), "internal".to_owned())]);
    }

    pub async fn each_hosts_shadow_counts_are_kept_per_version_and_replaced(r: &dyn PluginRegistry) {
        let counts = |evaluated: u64, faults: u64| ShadowCounts { evaluated, agreed: evaluated, disagreed: 0, dropped: 1, faults };
        assert!(r.shadow_counts("acme", 2).await.expect("read").is_empty());
        r.save_shadow_counts("host-b", "acme", 2, counts(7, 0)).await.expect("save");
        r.save_shadow_counts("host-a", "acme", 2, counts(3, 1)).await.expect("save");
        r.save_shadow_counts("host-a", "acme", 2, counts(5, 1)).await.expect("replace");
        r.save_shadow_counts("host-a", "acme", 3, counts(9, 0)).await.expect("another version");
        r.save_shadow_counts("host-a", "acme-other", 2, counts(11, 0)).await.expect("another name");
        let mut rows = r.shadow_counts("acme", 2).await.expect("read");
        rows.sort_by(|x, y| x.host.cmp(&y.host));
        let got: Vec<(&str, ShadowCounts)> = rows.iter().map(|h| (h.host.as_str(), h.counts)).collect();
        assert_eq!(got, [("host-a", counts(5, 1)), ("host-b", counts(7, 0))]);
        assert_eq!(r.shadow_counts("acme", 3).await.expect("read").len(), 1);
    }
}

macro_rules! for_each_case {
    ($m:ident) => {
        $m!(
            publishing_numbers_versions_and_the_newest_upload_serves,
            a_rollback_goes_to_the_previous_or_a_named_version_and_refuses_when_there_is_none,
            a_shadow_runs_beside_the_active_version_until_activated,
            a_name_stays_with_the_group_that_registered_it,
            every_write_is_announced,
            a_groups_base_policy_is_kept_replaced_cleared_and_announced,
            each_hosts_shadow_counts_are_kept_per_version_and_replaced
        );
    };
}

mod redb {
    use gatehouse_store::redb::registry::RedbRegistry;

    macro_rules! redb_tests {
        ($($case:ident),*) => {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let dir = tempfile::tempdir().expect("temp dir");
                    let registry = RedbRegistry::open(dir.path()).expect("open");
                    super::cases::$case(&registry).await;
                }
            )*
        };
    }
    for_each_case!(redb_tests);

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn published_versions_survive_a_reopen() {
        let dir = tempfile::tempdir().expect("temp dir");
        {
            let r = RedbRegistry::open(dir.path()).expect("open");
            gatehouse_store::registry::PluginRegistry::publish(&r, super::upload("kept", "one")).await.expect("publish");
        }
        let r = RedbRegistry::open(dir.path()).expect("reopen");
        let current = gatehouse_store::registry::PluginRegistry::current(&r).await.expect("current");
        assert_eq!(current.len(), 1);
        assert_eq!(current[0].name, "kept");
    }
}

mod postgres {
    use super::*;
    use gatehouse_pg_harness::TempPostgres;
    use gatehouse_store::postgres::{PgOptions, PgStore};

    macro_rules! pg_tests {
        ($($case:ident),*) => {
            /// Every case, each on a fresh database of one cluster, then what needs two hosts.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_case_on_postgres() {
                let pg = TempPostgres::start();
                $(
                    let url = pg.create_database(stringify!($case));
                    let store = PgStore::connect(PgOptions::new(url)).await.expect("connect");
                    eprintln!("case {}", stringify!($case));
                    super::cases::$case(&store).await;
                )*
                let url = pg.create_database("two_hosts");
                let a = PgStore::connect(PgOptions::new(url.clone())).await.expect("host a");
                let b = PgStore::connect(PgOptions::new(url)).await.expect("host b");
                a_change_on_one_host_is_announced_on_the_other(&a, &b).await;
                concurrent_uploads_of_one_name_get_distinct_numbers(&a, &b).await;
            }
        };
    }
    for_each_case!(pg_tests);

    async fn a_change_on_one_host_is_announced_on_the_other(a: &PgStore, b: &PgStore) {
        let mut on_b = b.subscribe();
        // The listener announces its connection; wait for it, so the notification below cannot be missed.
        tokio::time::timeout(Duration::from_secs(5), on_b.wait_for(|n| *n > 0)).await.expect("b listens").expect("alive");
        on_b.borrow_and_update();
        a.publish(upload("fleet", "one")).await.expect("publish on a");
        moved(&mut on_b).await;
        assert_eq!(b.current().await.expect("current on b")[0].name, "fleet");
        a.publish(upload("fleet", "two")).await.expect("publish on a");
        moved(&mut on_b).await;
        a.rollback("fleet", None).await.expect("rollback on a");
        moved(&mut on_b).await;
        let on_b_now = b.versions("fleet").await.expect("versions on b");
        assert_eq!(states(&on_b_now), [(1, PluginState::Active), (2, PluginState::Inactive)]);
    }

    async fn concurrent_uploads_of_one_name_get_distinct_numbers(a: &PgStore, b: &PgStore) {
        let uploads = (0..10).map(|i| {
            let host: &PgStore = if i % 2 == 0 { a } else { b };
            host.publish(upload("busy", &format!("v{i}")))
        });
        for r in futures_join(uploads).await {
            r.expect("every upload is stored");
        }
        let versions = b.versions("busy").await.expect("versions");
        assert_eq!(versions.iter().map(|v| v.version).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
        assert_eq!(versions.iter().filter(|v| v.state == PluginState::Active).count(), 1, "one active version");
    }

    /// Poll every future until all are done (they interleave on the connection pools).
    async fn futures_join<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
        let mut pinned: Vec<_> = futures.map(Box::pin).collect();
        let mut out: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
        std::future::poll_fn(|cx| {
            let mut pending = false;
            for (f, slot) in pinned.iter_mut().zip(out.iter_mut()) {
                if slot.is_none() {
                    match f.as_mut().poll(cx) {
                        std::task::Poll::Ready(v) => *slot = Some(v),
                        std::task::Poll::Pending => pending = true,
                    }
                }
            }
            if pending { std::task::Poll::Pending } else { std::task::Poll::Ready(()) }
        })
        .await;
        out.into_iter().flatten().collect()
    }
}
