//! The usage ledger on redb: a table keyed by (µs timestamp, sequence), so a
//! time range is one range read; the other filters are applied to the rows of
//! that range (an admin read, off the chat path). The table is created by the
//! first billed request; until then reads find nothing.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redb::{ReadableDatabase, ReadableTable, Table, TableDefinition, TableError, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::{RedbStore, backend, decode, encode};
use crate::StoreResult;
use crate::records::{UsageDelta, UsageTotals};
use crate::usage_ledger::{Bucket, LedgerFilter, LedgerPage, LedgerRow, LedgerTotals, UsageLedger};

/// (µs since the epoch, sequence within that µs) → [`Stored`].
pub const USAGE_LEDGER: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("usage_ledger");

/// One item of a range read of [`USAGE_LEDGER`].
type Item<'a> = Result<(redb::AccessGuard<'a, (u64, u64)>, redb::AccessGuard<'a, &'static [u8]>), redb::StorageError>;

/// A row as stored: the key holds its time and id.
#[derive(Deserialize)]
struct Stored {
    u: String,
    k: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    g: Option<String>,
    m: String,
    r: String,
    p: u64,
    c: u64,
}

/// [`Stored`] borrowed from the request's delta: the same bytes, written
/// without copying its strings on the chat path.
#[derive(Serialize)]
struct StoredRef<'a> {
    u: &'a str,
    k: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    g: Option<&'a str>,
    m: &'a str,
    r: &'a str,
    p: u64,
    c: u64,
}

/// The ledger's table, open for a group commit's rows: the last key is read
/// once, and the rows of the batch follow it.
pub struct Appender<'t> {
    table: Table<'t, (u64, u64), &'static [u8]>,
    last: Option<(u64, u64)>,
}

impl<'t> Appender<'t> {
    pub fn open(txn: &'t WriteTransaction) -> StoreResult<Self> {
        let table = txn.open_table(USAGE_LEDGER).map_err(backend)?;
        let last = table.last().map_err(backend)?.map(|(k, _)| k.value());
        Ok(Appender { table, last })
    }

    /// Append one row, in the request's commit. Keys never go back in time,
    /// so the ledger stays in commit order even if the clock steps back.
    pub fn push(&mut self, u: &UsageDelta) -> StoreResult<()> {
        let now = Utc::now().timestamp_micros().max(0) as u64;
        let key = match self.last {
            Some((micros, seq)) if micros >= now => (micros, seq + 1),
            _ => (now, 0),
        };
        let row = StoredRef {
            u: &u.user_id,
            k: &u.key_id,
            g: u.group_id.as_deref(),
            m: &u.model,
            r: &u.request_id,
            p: u.prompt_tokens,
            c: u.completion_tokens,
        };
        self.table.insert(key, encode(&row)?.as_slice()).map_err(backend)?;
        self.last = Some(key);
        Ok(())
    }
}

fn cursor_of((micros, seq): (u64, u64)) -> String {
    format!("{micros}.{seq}")
}

fn parse_cursor(c: &str) -> Option<(u64, u64)> {
    let (a, b) = c.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

fn micros(at: DateTime<Utc>) -> u64 {
    at.timestamp_micros().max(0) as u64
}

fn row_of((m, seq): (u64, u64), s: Stored) -> LedgerRow {
    LedgerRow {
        id: cursor_of((m, seq)),
        at: DateTime::from_timestamp_micros(m as i64).unwrap_or_default(),
        user_id: s.u,
        key_id: s.k,
        group_id: s.g,
        model: s.m,
        request_id: s.r,
        prompt_tokens: s.p,
        completion_tokens: s.c,
    }
}

impl RedbStore {
    /// Visit the matching rows, newest first when `newest_first`, starting
    /// before `cursor`; stop when `visit` says so.
    fn scan(
        &self,
        filter: &LedgerFilter,
        cursor: Option<(u64, u64)>,
        newest_first: bool,
        mut visit: impl FnMut(LedgerRow) -> bool,
    ) -> StoreResult<()> {
        let db = self.database()?;
        let txn = db.begin_read().map_err(backend)?;
        let t = match txn.open_table(USAGE_LEDGER) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => return Ok(()),
            Err(e) => return Err(backend(e)),
        };
        let lo = filter.from.map_or(0, micros);
        let mut hi = filter.to.map_or((u64::MAX, u64::MAX), |to| (micros(to), 0));
        if let Some(c) = cursor
            && c < hi
        {
            hi = c;
        }
        if (lo, 0) >= hi {
            return Ok(());
        }
        let range = t.range((lo, 0)..hi).map_err(backend)?;
        let mut step = |item: Item| {
            let (k, v) = item.map_err(backend)?;
            let row = row_of(k.value(), decode(v.value())?);
            Ok::<_, crate::StoreError>(filter.matches(&row) && !visit(row))
        };
        if newest_first {
            for item in range.rev() {
                if step(item)? {
                    break;
                }
            }
        } else {
            for item in range {
                if step(item)? {
                    break;
                }
            }
        }
        Ok(())
    }
}

#[async_trait]
impl UsageLedger for RedbStore {
    async fn ledger_page(&self, filter: &LedgerFilter, cursor: Option<&str>, limit: usize) -> StoreResult<LedgerPage> {
        let cursor = match cursor {
            Some(c) => Some(parse_cursor(c).ok_or_else(|| crate::StoreError::NotFound(format!("cursor {c}")))?),
            None => None,
        };
        let mut rows = Vec::new();
        let mut more = false;
        self.scan(filter, cursor, true, |row| {
            if rows.len() == limit {
                more = true;
                return false;
            }
            rows.push(row);
            true
        })?;
        let next = if more { rows.last().map(|r| r.id.clone()) } else { None };
        Ok(LedgerPage { rows, next })
    }

    async fn ledger_series(&self, filter: &LedgerFilter, bucket: Bucket) -> StoreResult<Vec<(DateTime<Utc>, UsageTotals)>> {
        let mut out: Vec<(DateTime<Utc>, UsageTotals)> = Vec::new();
        self.scan(filter, None, false, |row| {
            let start = bucket.start(row.at);
            match out.last_mut() {
                Some((s, t)) if *s == start => t.add(row.prompt_tokens, row.completion_tokens),
                _ => {
                    let mut t = UsageTotals::default();
                    t.add(row.prompt_tokens, row.completion_tokens);
                    out.push((start, t));
                }
            }
            true
        })?;
        Ok(out)
    }

    async fn ledger_totals(&self, filter: &LedgerFilter) -> StoreResult<LedgerTotals> {
        let mut totals = LedgerTotals::default();
        self.scan(filter, None, false, |row| {
            totals.add(&row);
            true
        })?;
        Ok(totals)
    }
}
