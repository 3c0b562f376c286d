//! `GET /audit-logs` at scale: 1,000,000 audit records over 100 days, then
//! one day's range with a filter, as the route runs it (store query + JSON
//! rendering of the page). Prints median and p99.
//!
//! Run: `cargo bench -p gatehouse --bench audit_query`

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use gatehouse_store::audit::{Audit, category, kind};
use gatehouse_store::model::Severity;
use gatehouse_store::redb::{RedbStore, audit};
use gatehouse_store::{AuditQuery, Store};

const RECORDS: u64 = 1_000_000;
const DAYS: u64 = 100;

fn report(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let q = |p: f64| v[((v.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e3;
    println!("{name:<48} median {:>7.2} ms   p99 {:>7.2} ms", q(0.5), q(0.99));
}

fn main() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = RedbStore::open(dir.path(), false).expect("store");
    let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).single().expect("t");
    let step_us = (DAYS * 86_400 * 1_000_000 / RECORDS) as i64;
    let kinds = kind::ALL;
    let t0 = Instant::now();
    let batch = 20_000u64;
    for b in 0..RECORDS / batch {
        let txn = store.database().expect("db").begin_write().expect("txn");
        for i in 0..batch {
            let n = b * batch + i;
            let entry =
                Audit::new(kinds[(n % kinds.len() as u64) as usize], category::ACCESS_CONTROL, format!("event {n} of the benchmark"))
                    .severity(if n.is_multiple_of(50) { Severity::Warning } else { Severity::Info })
                    .meta("operation", format!("op_{}", n % 37))
                    .build();
            let at = start + chrono::Duration::microseconds(n as i64 * step_us);
            audit::append_at(&txn, &[entry], Some(at)).expect("append");
        }
        txn.commit().expect("commit");
    }
    println!("inserted {RECORDS} records over {DAYS} days in {:.1} s", t0.elapsed().as_secs_f64());

    let mut by_type = Vec::new();
    let mut by_severity = Vec::new();
    let mut unfiltered = Vec::new();
    for i in 0..200u64 {
        let day = start + chrono::Duration::days((i % (DAYS - 1)) as i64 + 1);
        let base = AuditQuery { start: day, end: day + chrono::Duration::days(1), offset: 0, limit: 50, ..Default::default() };
        for (q, sink) in [
            (AuditQuery { kind: Some(kind::GROUP_MANAGEMENT.into()), ..base.clone() }, &mut by_type),
            (AuditQuery { severity: Some(Severity::Warning), ..base.clone() }, &mut by_severity),
            (base.clone(), &mut unfiltered),
        ] {
            let t = Instant::now();
            let (logs, total) = futures::executor::block_on(store.audit_query(&q)).expect("query");
            let body = serde_json::to_vec(&logs).expect("json");
            std::hint::black_box((body, total));
            sink.push(t.elapsed());
        }
    }
    report("one day, type filter (~900 of 10,000)", by_type);
    report("one day, severity filter (decodes the day)", by_severity);
    report("one day, no filter (count + one page)", unfiltered);
}
