//! The per-request usage ledger, on both backends: rows written with each
//! finished request, read with filters, in pages, as totals and as a time series.

use chrono::{Duration, Utc};
use gatehouse_store::Store;
use gatehouse_store::records::{RequestOutcome, UsageDelta, UsageTotals};
use gatehouse_store::usage_ledger::{Bucket, LedgerFilter};

fn bill(user: &str, key: &str, group: Option<&str>, model: &str, n: u64) -> RequestOutcome {
    RequestOutcome {
        usage: Some(UsageDelta {
            user_id: user.into(),
            key_id: key.into(),
            group_id: group.map(Into::into),
            model: model.into(),
            request_id: format!("req-{key}-{n}"),
            prompt_tokens: 10 * n,
            completion_tokens: n,
        }),
        ..Default::default()
    }
}

/// Six requests: usr_a through key_a (group grp_1) on two models, usr_b through key_b.
async fn seed(s: &dyn Store) {
    let plan = [
        ("usr_a", "key_a", Some("grp_1"), "echo/one", 1),
        ("usr_a", "key_a", Some("grp_1"), "echo/two", 2),
        ("usr_b", "key_b", None, "echo/one", 3),
        ("usr_a", "key_a", Some("grp_1"), "echo/one", 4),
        ("usr_b", "key_b", None, "echo/two", 5),
        ("usr_a", "key_a2", None, "echo/one", 6),
    ];
    for (u, k, g, m, n) in plan {
        s.finish_request(bill(u, k, g, m, n)).await.expect("finish");
    }
}

mod cases {
    use super::*;

    pub async fn every_billed_request_is_one_row_found_by_each_filter_newest_first(s: &dyn Store) {
        seed(s).await;
        let ledger = s.usage_ledger().expect("the backend keeps a ledger");
        let all = ledger.ledger_page(&LedgerFilter::default(), None, 100).await.expect("page");
        assert_eq!(all.rows.iter().map(|r| r.prompt_tokens / 10).collect::<Vec<_>>(), [6, 5, 4, 3, 2, 1], "newest first");
        assert_eq!(all.next, None);
        let r = &all.rows[2];
        assert_eq!((r.user_id.as_str(), r.key_id.as_str(), r.group_id.as_deref()), ("usr_a", "key_a", Some("grp_1")));
        assert_eq!((r.model.as_str(), r.request_id.as_str(), r.completion_tokens), ("echo/one", "req-key_a-4", 4));

        let ns = |f: LedgerFilter| async move {
            let page = ledger.ledger_page(&f, None, 100).await.expect("page");
            page.rows.iter().map(|r| r.completion_tokens).collect::<Vec<_>>()
        };
        assert_eq!(ns(LedgerFilter { user_id: Some("usr_a".into()), ..Default::default() }).await, [6, 4, 2, 1]);
        assert_eq!(ns(LedgerFilter { key_id: Some("key_b".into()), ..Default::default() }).await, [5, 3]);
        assert_eq!(ns(LedgerFilter { group_id: Some("grp_1".into()), ..Default::default() }).await, [4, 2, 1]);
        assert_eq!(ns(LedgerFilter { model: Some("echo/two".into()), ..Default::default() }).await, [5, 2]);
        let both = LedgerFilter { user_id: Some("usr_a".into()), model: Some("echo/one".into()), ..Default::default() };
        assert_eq!(ns(both).await, [6, 4, 1]);
        assert_eq!(ns(LedgerFilter { user_id: Some("usr_nobody".into()), ..Default::default() }).await, Vec::<u64>::new());
        let later = LedgerFilter { from: Some(Utc::now() + Duration::hours(1)), ..Default::default() };
        assert_eq!(ns(later).await, Vec::<u64>::new(), "nothing from an hour ahead");
        let earlier = LedgerFilter { to: Some(Utc::now() - Duration::hours(1)), ..Default::default() };
        assert_eq!(ns(earlier).await, Vec::<u64>::new(), "nothing before an hour ago");
        let around =
            LedgerFilter { from: Some(Utc::now() - Duration::hours(1)), to: Some(Utc::now() + Duration::hours(1)), ..Default::default() };
        assert_eq!(ns(around).await.len(), 6);
    }

    pub async fn pages_follow_the_cursor_without_gaps_or_repeats(s: &dyn Store) {
        seed(s).await;
        let ledger = s.usage_ledger().expect("ledger");
        let filter = LedgerFilter { user_id: Some("usr_a".into()), ..Default::default() };
        let (mut seen, mut cursor, mut pages) = (Vec::new(), None::<String>, 0);
        loop {
            let page = ledger.ledger_page(&filter, cursor.as_deref(), 3).await.expect("page");
            assert!(page.rows.len() <= 3);
            seen.extend(page.rows.iter().map(|r| r.completion_tokens));
            pages += 1;
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!((seen, pages), (vec![6, 4, 2, 1], 2));
        assert!(ledger.ledger_page(&filter, Some("not a cursor"), 3).await.is_err(), "a cursor this backend never made");
    }

    pub async fn totals_and_the_time_series_sum_the_matching_rows(s: &dyn Store) {
        seed(s).await;
        let ledger = s.usage_ledger().expect("ledger");
        let t = ledger.ledger_totals(&LedgerFilter::default()).await.expect("totals");
        assert_eq!(t.all, UsageTotals { requests: 6, prompt_tokens: 210, completion_tokens: 21 });
        assert_eq!(
            t.users,
            [
                ("usr_a".to_owned(), UsageTotals { requests: 4, prompt_tokens: 130, completion_tokens: 13 }),
                ("usr_b".to_owned(), UsageTotals { requests: 2, prompt_tokens: 80, completion_tokens: 8 }),
            ]
        );
        assert_eq!(t.keys.iter().map(|(k, t)| (k.as_str(), t.requests)).collect::<Vec<_>>(), [("key_a", 3), ("key_a2", 1), ("key_b", 2)]);
        assert_eq!(t.models.iter().map(|(m, t)| (m.as_str(), t.requests)).collect::<Vec<_>>(), [("echo/one", 4), ("echo/two", 2)]);
        let only_b = ledger.ledger_totals(&LedgerFilter { key_id: Some("key_b".into()), ..Default::default() }).await.expect("b");
        assert_eq!(only_b.all.requests, 2);
        assert_eq!(only_b.users.len(), 1);

        let rows = ledger.ledger_page(&LedgerFilter::default(), None, 100).await.expect("rows").rows;
        for bucket in [Bucket::Hour, Bucket::Day] {
            let series = ledger.ledger_series(&LedgerFilter::default(), bucket).await.expect("series");
            // Each row falls in the bucket holding its time (a run across an hour boundary has two).
            let mut expected: Vec<(chrono::DateTime<Utc>, u64)> = Vec::new();
            for r in rows.iter().rev() {
                let start = bucket.start(r.at);
                match expected.last_mut() {
                    Some((s, n)) if *s == start => *n += 1,
                    _ => expected.push((start, 1)),
                }
            }
            assert_eq!(series.iter().map(|(s, t)| (*s, t.requests)).collect::<Vec<_>>(), expected, "{bucket:?}");
            assert_eq!(series.iter().map(|(_, t)| t.prompt_tokens).sum::<u64>(), 210);
        }
        let none = ledger
            .ledger_series(&LedgerFilter { model: Some("echo/none".into()), ..Default::default() }, Bucket::Day)
            .await
            .expect("empty");
        assert!(none.is_empty());
    }
}

macro_rules! for_each_case {
    ($m:ident) => {
        $m!(
            every_billed_request_is_one_row_found_by_each_filter_newest_first,
            pages_follow_the_cursor_without_gaps_or_repeats,
            totals_and_the_time_series_sum_the_matching_rows
        );
    };
}

mod redb {
    macro_rules! redb_tests {
        ($($case:ident),*) => {$(
            #[tokio::test]
            async fn $case() {
                let dir = tempfile::tempdir().expect("temp dir");
                let store = gatehouse_store::redb::RedbStore::open(dir.path(), true).expect("open");
                super::cases::$case(&store).await;
            }
        )*};
    }
    for_each_case!(redb_tests);

    #[tokio::test]
    async fn a_store_without_a_ledger_table_reads_as_empty() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = gatehouse_store::redb::RedbStore::open(dir.path(), true).expect("open");
        let ledger = gatehouse_store::Store::usage_ledger(&store).expect("ledger");
        let page = ledger.ledger_page(&Default::default(), None, 10).await.expect("page");
        assert!(page.rows.is_empty() && page.next.is_none());
    }
}

mod postgres {
    use gatehouse_pg_harness::TempPostgres;
    use gatehouse_store::postgres::{PgOptions, PgStore};

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
                    super::cases::$case(&store).await;
                )*
            }
        };
    }
    for_each_case!(pg_tests);
}
