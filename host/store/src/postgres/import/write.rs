//! The destination of an import: every table written inside the import's
//! transaction, with the sequence numbers, hashes and times the source had.

use tokio_postgres::Transaction;

use super::read::Snapshot;

/// The tables that hold state; every one must be empty before an import.
const STATE_TABLES: &[&str] = &[
    "users",
    "groups",
    "group_members",
    "api_keys",
    "audit_records",
    "usage_ledger",
    "usage_totals",
    "quota_windows",
    "limit_windows",
    "idempotency",
    "outbox",
    "receipt_batches",
    "receipts",
    "receipt_keys",
    "webhook_endpoints",
    "webhook_secrets",
    "webhook_cursors",
    "webhook_deliveries",
    "knowledge_bases",
    "plugin_versions",
    "group_base_policies",
    "shadow_counts",
];

/// Refuse a database that holds anything: an import into a fleet that has
/// run would mix two histories (two audit chains, two outboxes).
pub async fn ensure_empty(txn: &Transaction<'_>) -> anyhow::Result<()> {
    let mut found = Vec::new();
    for table in STATE_TABLES {
        let n: i64 = txn.query_one(&format!("SELECT count(*) FROM {table}"), &[]).await?.get(0);
        if n > 0 {
            found.push(format!("{table}: {n}"));
        }
    }
    let heads: (i64, i64) = {
        let row = txn.query_one("SELECT (SELECT seq FROM audit_head), (SELECT seq FROM outbox_head)", &[]).await?;
        (row.get(0), row.get(1))
    };
    if heads != (0, 0) {
        found.push(format!("audit head at {}, outbox head at {}", heads.0, heads.1));
    }
    if !found.is_empty() {
        anyhow::bail!(
            "the database is not empty ({}): import into a new, empty database (a host that has started on it registers keys and writes audit records)",
            found.join(", ")
        );
    }
    Ok(())
}

/// Write every table; returns (table, rows written) for the verification.
pub async fn copy(txn: &Transaction<'_>, s: &Snapshot) -> anyhow::Result<Vec<(&'static str, u64)>> {
    let mut done: Vec<(&'static str, u64)> = Vec::new();
    let mut count = |table: &'static str, n: usize| done.push((table, n as u64));

    let st = txn.prepare("INSERT INTO users (id, email_key, record) VALUES ($1, $2, $3)").await?;
    for u in &s.users {
        txn.execute(&st, &[&u.id, &u.email_key, &u.record]).await?;
    }
    count("users", s.users.len());
    let st = txn.prepare("INSERT INTO groups (id, record) VALUES ($1, $2)").await?;
    for (id, record) in &s.groups {
        txn.execute(&st, &[id, record]).await?;
    }
    count("groups", s.groups.len());
    let st = txn.prepare("INSERT INTO group_members (group_id, user_id) VALUES ($1, $2)").await?;
    for (g, u) in &s.members {
        txn.execute(&st, &[g, u]).await?;
    }
    count("group_members", s.members.len());
    let st = txn.prepare("INSERT INTO api_keys (id, user_id, hash, admin, revoked_at, record) VALUES ($1, $2, $3, $4, $5, $6)").await?;
    for k in &s.keys {
        txn.execute(&st, &[&k.id, &k.user_id, &k.hash, &k.admin, &k.revoked_at, &k.record]).await?;
    }
    count("api_keys", s.keys.len());

    let st = txn
        .prepare(
            "INSERT INTO audit_records (seq, id, ts, kind, severity, user_id, target_user_id, description, operation, content, hash, prev_hash, format)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        )
        .await?;
    for r in &s.audit {
        txn.execute(
            &st,
            &[
                &r.seq,
                &r.id,
                &r.ts,
                &r.kind,
                &r.severity,
                &r.user_id,
                &r.target_user_id,
                &r.description,
                &r.operation,
                &r.content,
                &r.hash,
                &r.prev_hash,
                &r.format,
            ],
        )
        .await?;
    }
    if let Some(last) = s.audit.last() {
        txn.execute(
            "UPDATE audit_head SET seq = $1, hash = $2, ts = $3, format = $4 WHERE singleton",
            &[&last.seq, &last.hash, &last.ts, &last.format],
        )
        .await?;
    }
    count("audit_records", s.audit.len());

    // Totals as one shard row each (reads sum the shards).
    let st = txn
        .prepare("INSERT INTO usage_totals (scope, id, shard, requests, prompt_tokens, completion_tokens) VALUES ($1, $2, 0, $3, $4, $5)")
        .await?;
    for (scope, id, t) in &s.usage_totals {
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        txn.execute(&st, &[scope, id, &n(t.requests), &n(t.prompt_tokens), &n(t.completion_tokens)]).await?;
    }
    count("usage_totals", s.usage_totals.len());
    let st = txn
        .prepare(
            "INSERT INTO usage_ledger (at, user_id, key_id, prompt_tokens, completion_tokens, group_id, model, request_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .await?;
    for r in &s.ledger {
        txn.execute(&st, &[&r.at, &r.user_id, &r.key_id, &r.prompt_tokens, &r.completion_tokens, &r.group_id, &r.model, &r.request_id])
            .await?;
    }
    count("usage_ledger", s.ledger.len());
    // Day and month counts: as the single-host limiter's persisted counts, and
    // as the fleet limiter's windows (those not ended yet), so the fleet goes
    // on counting today's and this month's quotas where the host left them.
    let st = txn.prepare("INSERT INTO quota_windows (key_id, window_id, shard, count) VALUES ($1, $2, 0, $3)").await?;
    for q in &s.quota {
        txn.execute(&st, &[&q.key_id, &q.window_id, &q.count]).await?;
    }
    count("quota_windows", s.quota.len());
    let st = txn.prepare("INSERT INTO limit_windows (key_id, window_id, ends_at, count) VALUES ($1, $2, $3, $4)").await?;
    let mut windows = 0;
    let now = chrono::Utc::now();
    for q in &s.quota {
        if let Some(ends_at) = q.ends_at.filter(|e| *e > now) {
            txn.execute(&st, &[&q.key_id, &q.window_id, &ends_at, &q.count]).await?;
            windows += 1;
        }
    }
    count("limit_windows", windows);

    let st = txn.prepare("INSERT INTO idempotency (scope, expires_at, lease_until, record) VALUES ($1, $2, NULL, $3)").await?;
    for (scope, expires_at, record) in &s.idempotency {
        txn.execute(&st, &[scope, expires_at, record]).await?;
    }
    count("idempotency", s.idempotency.len());

    let st = txn.prepare("INSERT INTO outbox (seq, event_id, created, event) VALUES ($1, $2, $3, $4)").await?;
    for (seq, id, created, event) in &s.outbox {
        txn.execute(&st, &[seq, id, created, event]).await?;
    }
    // New events are numbered after every event and every cursor the host had.
    let head = s.outbox.iter().map(|e| e.0).chain(s.cursors.iter().map(|c| c.1)).max().unwrap_or(0);
    txn.execute("UPDATE outbox_head SET seq = $1 WHERE singleton", &[&head]).await?;
    count("outbox", s.outbox.len());

    let st = txn.prepare("INSERT INTO receipt_batches (id, batch) VALUES ($1, $2)").await?;
    for (id, batch) in &s.receipt_batches {
        txn.execute(&st, &[id, batch]).await?;
    }
    if let Some(max) = s.receipt_batches.iter().map(|b| b.0).max() {
        txn.execute("SELECT setval(pg_get_serial_sequence('receipt_batches', 'id'), $1)", &[&max]).await?;
    }
    count("receipt_batches", s.receipt_batches.len());
    let st = txn.prepare("INSERT INTO receipts (bundle_id, batch_id, leaf, row) VALUES ($1, $2, $3, $4)").await?;
    for r in &s.receipts {
        let (batch, leaf) = (r.in_batch.map(|b| b.0), r.in_batch.map(|b| b.1));
        txn.execute(&st, &[&r.bundle_id, &batch, &leaf, &r.row]).await?;
    }
    count("receipts", s.receipts.len());
    if let Some(key) = &s.receipt_key {
        txn.execute("INSERT INTO receipt_keys (key_id, public_key) VALUES ($1, $2)", &[&key.key_id, &key.public_key]).await?;
    }
    count("receipt_keys", usize::from(s.receipt_key.is_some()));

    let st = txn.prepare("INSERT INTO webhook_endpoints (id, record) VALUES ($1, $2)").await?;
    for (id, record) in &s.endpoints {
        txn.execute(&st, &[id, record]).await?;
    }
    count("webhook_endpoints", s.endpoints.len());
    let st = txn.prepare("INSERT INTO webhook_secrets (endpoint_id, secret) VALUES ($1, $2)").await?;
    for (id, secret) in &s.secrets {
        txn.execute(&st, &[id, secret]).await?;
    }
    count("webhook_secrets", s.secrets.len());
    let st = txn.prepare("INSERT INTO webhook_cursors (endpoint_id, seq) VALUES ($1, $2)").await?;
    for (id, seq) in &s.cursors {
        txn.execute(&st, &[id, seq]).await?;
    }
    count("webhook_cursors", s.cursors.len());
    let st = txn
        .prepare("INSERT INTO webhook_deliveries (id, endpoint_id, status, next_at, updated_at, record) VALUES ($1, $2, $3, $4, $5, $6)")
        .await?;
    for d in &s.deliveries {
        txn.execute(&st, &[&d.id, &d.endpoint_id, &d.status, &d.next_at, &d.updated_at, &d.record]).await?;
    }
    count("webhook_deliveries", s.deliveries.len());

    let st = txn.prepare("INSERT INTO knowledge_bases (name, definition) VALUES ($1, $2)").await?;
    for (name, def) in &s.knowledge_bases {
        txn.execute(&st, &[name, def]).await?;
    }
    count("knowledge_bases", s.knowledge_bases.len());
    let st = txn.prepare("INSERT INTO plugin_versions (name, version, state, record, component) VALUES ($1, $2, $3, $4, $5)").await?;
    for p in &s.plugins {
        txn.execute(&st, &[&p.name, &p.version, &p.state, &p.record, &p.component]).await?;
    }
    count("plugin_versions", s.plugins.len());
    let st = txn.prepare("INSERT INTO group_base_policies (group_id, policy) VALUES ($1, $2)").await?;
    for (group, policy) in &s.group_bases {
        txn.execute(&st, &[group, policy]).await?;
    }
    count("group_base_policies", s.group_bases.len());
    let st = txn.prepare("INSERT INTO shadow_counts (name, version, host, counts, saved_at) VALUES ($1, $2, $3, $4, $5)").await?;
    for c in &s.shadow_counts {
        txn.execute(&st, &[&c.name, &c.version, &c.host, &c.counts, &c.saved_at]).await?;
    }
    count("shadow_counts", s.shadow_counts.len());
    Ok(done)
}
