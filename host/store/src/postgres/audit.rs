//! The audit chain in PostgreSQL: one sequence for the whole fleet.
//!
//! Every append locks the chain head (`audit_head`, one row) with
//! `SELECT … FOR UPDATE` in the transaction of the change it describes,
//! links the new records to it, and moves it; a second host appending at
//! the same time waits for the first to commit and links to its last
//! record. So the chain is one sequence across hosts, and a change and its
//! records commit together or not at all.
//!
//! Records are written in the redb store's format 2 (`crate::redb::audit`):
//! `content` holds the exact bytes hashed (the record's JSON without
//! `hash`), and `hash` = SHA-256(`prev_hash`, `\n`, `content`), so an export
//! of (`prev_hash`, `content`, `hash`) verifies offline with the same rule.
//! Timestamps never go backwards along the chain (clamped to the head's).
//!
//! A chain imported from a single host (`import`) keeps its records as they
//! were written: format-1 records (`format` = 1) are verified by their rule,
//! and a chain that ends in format 1 gets the marker record before its next
//! append, as in redb.

use chrono::{DateTime, Utc};
use tokio_postgres::{GenericClient, Transaction};

use super::{backend, db_error, decode};
use crate::model::{AuditEntry, AuditRecord};
use crate::redb::audit::chain_hash;
use crate::{AuditQuery, ChainBreak, ChainReport, StoreResult};

/// Append entries at the end of the chain, inside `txn`.
pub async fn append(txn: &Transaction<'_>, entries: &[AuditEntry]) -> StoreResult<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let head = txn.query_one("SELECT seq, hash, ts, format FROM audit_head WHERE singleton FOR UPDATE", &[]).await.map_err(db_error)?;
    let (mut seq, mut prev, mut last): (i64, String, Option<DateTime<Utc>>) = (head.get(0), head.get(1), head.get(2));
    // A chain imported from a host whose last record is in format 1 gets the
    // marker that starts format 2 first, as the redb store would write it.
    let marker = (head.get::<_, i16>(3) < 2).then(crate::redb::audit::format_marker);
    let insert = txn
        .prepare(
            "INSERT INTO audit_records (seq, id, ts, kind, severity, user_id, description, operation, content, hash, prev_hash, target_user_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .await
        .map_err(db_error)?;
    for entry in marker.iter().chain(entries) {
        let now = Utc::now();
        // Microseconds, as stored: the content's timestamp and the column agree.
        let now = DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now);
        let ts = last.map_or(now, |l| l.max(now));
        seq += 1;
        let mut record = AuditRecord::unsealed(entry, ts, std::mem::take(&mut prev));
        let content = serde_json::to_vec(&record).map_err(backend)?;
        record.hash = chain_hash(&record.prev_hash, &content);
        let operation = record.metadata.get("operation").and_then(|o| o.as_str()).unwrap_or_default();
        let user_id = record.user.as_ref().map(|u| u.id.as_str());
        let target_user_id = record.metadata.get("targetUserId").and_then(|v| v.as_str());
        txn.execute(
            &insert,
            &[
                &seq,
                &record.id,
                &ts,
                &record.kind,
                &record.severity.as_str(),
                &user_id,
                &record.description,
                &operation,
                &content,
                &record.hash,
                &record.prev_hash,
                &target_user_id,
            ],
        )
        .await
        .map_err(db_error)?;
        prev = record.hash;
        last = Some(ts);
    }
    txn.execute("UPDATE audit_head SET seq = $1, hash = $2, ts = $3, format = 2 WHERE singleton", &[&seq, &prev, &last])
        .await
        .map_err(db_error)?;
    Ok(())
}

fn is_marker(r: &AuditRecord) -> bool {
    r.metadata.get("operation").and_then(|o| o.as_str()) == Some(crate::redb::audit::FORMAT_MARKER)
}

fn record_of(content: &[u8], hash: String) -> StoreResult<AuditRecord> {
    let text = std::str::from_utf8(content).map_err(backend)?;
    let mut record: AuditRecord = decode(text)?;
    record.hash = hash;
    Ok(record)
}

/// One page of matching records in `[q.start, q.end)`, newest first, and the number of matches.
pub async fn query<C: GenericClient>(client: &C, q: &AuditQuery) -> StoreResult<(Vec<AuditRecord>, u64)> {
    // `search` is a case-insensitive substring of the description or the operation, as in redb.
    let search = q.search.as_ref().map(|s| format!("%{}%", s.to_lowercase().replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")));
    let severity = q.severity.map(|s| s.as_str());
    let filter = "ts >= $1 AND ts < $2
        AND ($3::text IS NULL OR kind = $3)
        AND ($4::text IS NULL OR severity = $4)
        AND ($5::text IS NULL OR user_id = $5)
        AND ($6::text IS NULL OR lower(description) LIKE $6 OR lower(operation) LIKE $6)
        AND ($7::text IS NULL OR target_user_id = $7)";
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] =
        [&q.start, &q.end, &q.kind, &severity, &q.user_id, &search, &q.about_user_id];
    let total: i64 =
        client.query_one(&format!("SELECT count(*) FROM audit_records WHERE {filter}"), &params).await.map_err(db_error)?.get(0);
    let (offset, limit) = (i64::try_from(q.offset).unwrap_or(i64::MAX), i64::try_from(q.limit).unwrap_or(i64::MAX));
    let mut page_params = params.to_vec();
    page_params.push(&offset);
    page_params.push(&limit);
    let rows = client
        .query(&format!("SELECT content, hash FROM audit_records WHERE {filter} ORDER BY seq DESC OFFSET $8 LIMIT $9"), &page_params)
        .await
        .map_err(db_error)?;
    let records = rows.iter().map(|r| record_of(r.get(0), r.get(1))).collect::<StoreResult<Vec<_>>>()?;
    Ok((records, total as u64))
}

/// Walk the whole chain in sequence order and report every break.
pub async fn verify<C: GenericClient>(client: &C) -> StoreResult<ChainReport> {
    const PAGE: i64 = 1_000;
    let mut report = ChainReport { records: 0, ok: true, first_break: None, detail: None, breaks: 0, broken: Vec::new() };
    let broken = |report: &mut ChainReport, id: String, detail: String| {
        if report.first_break.is_none() {
            report.first_break = Some(id.clone());
            report.detail = Some(detail.clone());
        }
        report.ok = false;
        report.breaks += 1;
        if report.broken.len() < ChainReport::LISTED {
            report.broken.push(ChainBreak { position: report.records, id, detail });
        }
    };
    let mut prev = crate::redb::audit::GENESIS.to_owned();
    let mut expected_seq = 1i64;
    // The format of the record before (0: none yet); see `crate::redb::audit`.
    let mut format_before = 0i16;
    loop {
        let rows = client
            .query(
                "SELECT seq, id, content, hash, prev_hash, format FROM audit_records WHERE seq >= $1 ORDER BY seq LIMIT $2",
                &[&expected_seq, &PAGE],
            )
            .await
            .map_err(db_error)?;
        for row in &rows {
            let (seq, id, content, hash, prev_hash, format): (i64, String, &[u8], String, String, i16) =
                (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4), row.get(5));
            report.records += 1;
            // Format 1 (imported): the bytes hashed are the stored ones with the `hash` value emptied.
            let hashed =
                if format == 1 { crate::redb::audit::split(content).map(|s| s.content.into_owned()) } else { Ok(content.to_vec()) };
            if seq != expected_seq {
                broken(&mut report, id.clone(), format!("records {expected_seq} to {} are missing", seq - 1));
            } else if prev_hash != prev {
                broken(&mut report, id.clone(), "prev_hash does not match the hash of the record before it".into());
            } else if let Err(e) = &hashed {
                broken(&mut report, id.clone(), format!("unreadable or edited: {e}"));
            } else if hashed.as_ref().is_ok_and(|h| chain_hash(&prev_hash, h) != hash) {
                broken(&mut report, id.clone(), "hash does not match the record's content (edited)".into());
            } else if format < format_before {
                broken(&mut report, id.clone(), "a record in format 1 after format 2 began (rewritten in the old format)".into());
            } else {
                // The content's own back-link must be the column's: an edit of one alone is a break.
                match record_of(content, hash.clone()) {
                    Ok(r) if r.prev_hash != prev_hash || r.id != id => {
                        broken(&mut report, id.clone(), "the record's columns do not match its content".into())
                    }
                    Ok(r) if format == 2 && format_before == 1 && !is_marker(&r) => {
                        broken(&mut report, id.clone(), "format 2 begins without its marker record".into())
                    }
                    Ok(_) => {}
                    Err(e) => broken(&mut report, id.clone(), format!("unreadable: {e}")),
                }
            }
            format_before = format_before.max(format);
            prev = hash;
            expected_seq = seq + 1;
        }
        if (rows.len() as i64) < PAGE {
            break;
        }
    }
    let head = client.query_one("SELECT seq, hash FROM audit_head WHERE singleton", &[]).await.map_err(db_error)?;
    let (head_seq, head_hash): (i64, String) = (head.get(0), head.get(1));
    if head_hash != prev || head_seq != expected_seq - 1 {
        broken(&mut report, "end of log".into(), "the last record is not the chain head: records were removed from the end".into());
    }
    Ok(report)
}
