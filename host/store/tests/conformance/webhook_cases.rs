//! Conformance cases of `WebhookStore`: cursors, deliveries, retries,
//! auto-disable, pruning (run by `conformance.rs` on every backend).

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
        .record(vec![attempt(&ds[1], true, Some("timeout"), None), attempt(&ds[2], true, Some("timeout"), None)], vec![("wh_a".into(), 4)])
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

pub async fn a_failed_delivery_is_requeued_once_with_its_id_and_body_and_attempts_afresh(s: &dyn Both) {
    s.create_endpoint(endpoint("wh_r", &["*"]), StoredSecret::new("whsec_test".into()), entry()).await.expect("create");
    let now = Utc::now();
    let ds: Vec<Delivery> = (0..3).map(|_| Delivery::new("wh_r", &event("dlp:incident"), now, now).expect("delivery")).collect();
    let before = s.audit_query(&super::everything()).await.expect("audit").1;
    // ds[0] fails (its attempts used up), ds[1] succeeds, ds[2] waits for a retry.
    assert_eq!(one(s, attempt(&ds[0], true, Some("HTTP 500"), None)).await, AttemptEffect::Failed { disabled: false });
    assert_eq!(one(s, attempt(&ds[1], true, None, None)).await, AttemptEffect::Acknowledged);
    let later = now + chrono::Duration::seconds(60);
    assert_eq!(one(s, attempt(&ds[2], true, Some("HTTP 500"), Some(later))).await, AttemptEffect::Retry);

    for (id, why) in [(&ds[1].id, "succeeded"), (&ds[2].id, "pending")] {
        match s.requeue_delivery("wh_r", id, now, entry()).await {
            Err(StoreError::Conflict(m)) => assert!(m.contains(why), "{m}"),
            other => panic!("a {why} delivery is not requeued: {other:?}"),
        }
    }
    assert!(matches!(s.requeue_delivery("wh_r", "no-such-delivery", now, entry()).await, Err(StoreError::NotFound(_))));
    assert!(matches!(s.requeue_delivery("wh_none", &ds[0].id, now, entry()).await, Err(StoreError::NotFound(_))));

    let back = s.requeue_delivery("wh_r", &ds[0].id, now, entry()).await.expect("requeue");
    assert_eq!((back.id.as_str(), back.attempts, back.retries), (ds[0].id.as_str(), 0, 1));
    assert!(back.body.is_empty(), "the answer carries no body");
    assert!(matches!(s.requeue_delivery("wh_r", &ds[0].id, now, entry()).await, Err(StoreError::Conflict(_))), "now pending");
    // The dispatcher finds it due with the body it had, and a retry is one more record in the log.
    let due = s.due_deliveries("wh_r", now, 10).await.expect("due");
    assert_eq!(due.due.len(), 1);
    assert_eq!((due.due[0].id.as_str(), due.due[0].body.as_str(), due.due[0].attempts), (ds[0].id.as_str(), ds[0].body.as_str(), 0));
    assert_eq!(s.endpoints_with_pending().await.expect("pending"), ["wh_r"]);
    assert_eq!(s.audit_query(&super::everything()).await.expect("audit").1, before + 1, "only the requeue was audited");
    assert_eq!(one(s, attempt(&due.due[0], false, None, None)).await, AttemptEffect::Acknowledged);
    let recent = s.recent_deliveries("wh_r", 10).await.expect("recent");
    let d = recent.iter().find(|d| d.id == ds[0].id).expect("listed once");
    assert_eq!((d.attempts, d.retries, d.status), (1, 1, gatehouse_store::webhooks::DeliveryStatus::Succeeded));
    assert_eq!(recent.iter().filter(|d| d.id == ds[0].id).count(), 1);
    assert!(matches!(s.requeue_delivery("wh_r", &ds[0].id, now, entry()).await, Err(StoreError::Conflict(_))), "delivered now");

    // History stays bounded (`keep` = 3) across requeues: ds[0] left it and came back once.
    let more: Vec<Delivery> = (0..3).map(|_| Delivery::new("wh_r", &event("dlp:incident"), now, now).expect("delivery")).collect();
    for d in &more {
        one(s, attempt(d, true, None, None)).await;
    }
    assert_eq!(one(s, attempt(&ds[2], false, Some("HTTP 500"), None)).await, AttemptEffect::Failed { disabled: false });
    let extra = Delivery::new("wh_r", &event("dlp:incident"), now, now).expect("delivery");
    assert_eq!(one(s, attempt(&extra, true, Some("HTTP 500"), None)).await, AttemptEffect::Failed { disabled: true });
    let recent = s.recent_deliveries("wh_r", 10).await.expect("recent");
    assert_eq!(recent.len(), 3, "{recent:?}");
    // A disabled endpoint takes no retry until it is enabled again.
    match s.requeue_delivery("wh_r", &ds[2].id, now, entry()).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("disabled"), "{m}"),
        other => panic!("{other:?}"),
    }
    s.update_endpoint("wh_r", EndpointPatch { enabled: Some(true), ..Default::default() }, entry()).await.expect("on");
    s.requeue_delivery("wh_r", &ds[2].id, now, entry()).await.expect("requeue after enabling");
}
