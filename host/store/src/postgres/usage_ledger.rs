//! The usage ledger on PostgreSQL: the `usage_ledger` table (one row per
//! billed request, from every host), read with the filters as a `WHERE`
//! clause; pages follow the row id (the cursor), newest first.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio_postgres::types::ToSql;

use super::{PgStore, db_error};
use crate::records::UsageTotals;
use crate::usage_ledger::{Bucket, LedgerFilter, LedgerPage, LedgerRow, LedgerTotals, UsageLedger};
use crate::{StoreError, StoreResult};

/// The `WHERE` clause of a filter and its parameters (numbered from 1).
fn clause(f: &LedgerFilter) -> (String, Vec<Box<dyn ToSql + Sync + Send>>) {
    let mut terms = vec!["true".to_owned()];
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    let mut add = |column: &str, op: &str, p: Box<dyn ToSql + Sync + Send>| {
        params.push(p);
        terms.push(format!("{column} {op} ${}", params.len()));
    };
    if let Some(v) = &f.user_id {
        add("user_id", "=", Box::new(v.clone()));
    }
    if let Some(v) = &f.key_id {
        add("key_id", "=", Box::new(v.clone()));
    }
    if let Some(v) = &f.group_id {
        add("group_id", "=", Box::new(v.clone()));
    }
    if let Some(v) = &f.model {
        add("model", "=", Box::new(v.clone()));
    }
    if let Some(v) = f.from {
        add("at", ">=", Box::new(v));
    }
    if let Some(v) = f.to {
        add("at", "<", Box::new(v));
    }
    (terms.join(" AND "), params)
}

fn totals(r: &tokio_postgres::Row, from: usize) -> UsageTotals {
    UsageTotals {
        requests: r.get::<_, i64>(from) as u64,
        prompt_tokens: r.get::<_, i64>(from + 1) as u64,
        completion_tokens: r.get::<_, i64>(from + 2) as u64,
    }
}

const SUMS: &str = "count(*)::bigint, COALESCE(sum(prompt_tokens), 0)::bigint, COALESCE(sum(completion_tokens), 0)::bigint";

fn refs(params: &[Box<dyn ToSql + Sync + Send>]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)).collect()
}

#[async_trait]
impl UsageLedger for PgStore {
    async fn ledger_page(&self, filter: &LedgerFilter, cursor: Option<&str>, limit: usize) -> StoreResult<LedgerPage> {
        let (mut sql_where, mut params) = clause(filter);
        if let Some(c) = cursor {
            let id: i64 = c.parse().map_err(|_| StoreError::NotFound(format!("cursor {c}")))?;
            params.push(Box::new(id));
            sql_where.push_str(&format!(" AND id < ${}", params.len()));
        }
        params.push(Box::new(limit as i64 + 1));
        let sql = format!(
            "SELECT id, at, user_id, key_id, group_id, model, request_id, prompt_tokens, completion_tokens
             FROM usage_ledger WHERE {sql_where} ORDER BY id DESC LIMIT ${}",
            params.len()
        );
        let found = self.client().await?.query(&sql, &refs(&params)).await.map_err(db_error)?;
        let mut rows: Vec<LedgerRow> = found
            .iter()
            .map(|r| LedgerRow {
                id: r.get::<_, i64>(0).to_string(),
                at: r.get(1),
                user_id: r.get(2),
                key_id: r.get(3),
                group_id: r.get(4),
                model: r.get(5),
                request_id: r.get(6),
                prompt_tokens: r.get::<_, i64>(7) as u64,
                completion_tokens: r.get::<_, i64>(8) as u64,
            })
            .collect();
        let next = if rows.len() > limit {
            rows.truncate(limit);
            rows.last().map(|r| r.id.clone())
        } else {
            None
        };
        Ok(LedgerPage { rows, next })
    }

    async fn ledger_series(&self, filter: &LedgerFilter, bucket: Bucket) -> StoreResult<Vec<(DateTime<Utc>, UsageTotals)>> {
        let (sql_where, params) = clause(filter);
        let unit = match bucket {
            Bucket::Hour => "hour",
            Bucket::Day => "day",
        };
        let sql = format!(
            "SELECT date_trunc('{unit}', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS b, {SUMS}
             FROM usage_ledger WHERE {sql_where} GROUP BY b ORDER BY b"
        );
        let found = self.client().await?.query(&sql, &refs(&params)).await.map_err(db_error)?;
        Ok(found.iter().map(|r| (r.get(0), totals(r, 1))).collect())
    }

    async fn ledger_totals(&self, filter: &LedgerFilter) -> StoreResult<LedgerTotals> {
        let (sql_where, params) = clause(filter);
        let sql = format!(
            "SELECT user_id, key_id, model, {SUMS} FROM usage_ledger WHERE {sql_where}
             GROUP BY GROUPING SETS ((user_id), (key_id), (model), ()) ORDER BY 1, 2, 3"
        );
        let found = self.client().await?.query(&sql, &refs(&params)).await.map_err(db_error)?;
        let mut out = LedgerTotals::default();
        for r in &found {
            let t = totals(r, 3);
            match (r.get::<_, Option<String>>(0), r.get::<_, Option<String>>(1), r.get::<_, Option<String>>(2)) {
                (Some(u), None, None) => out.users.push((u, t)),
                (None, Some(k), None) => out.keys.push((k, t)),
                (None, None, Some(m)) => out.models.push((m, t)),
                _ => out.all = t,
            }
        }
        Ok(out)
    }
}
