//! The per-request usage ledger: one row per billed request, written in the
//! commit that adds it to the running totals, read with filters, in pages and
//! as a time series. A trait of its own, implemented by both backends; the
//! host reaches it through [`crate::Store::usage_ledger`].
//!
//! The ledger starts when a store first runs a build that writes it: requests
//! billed before are in the running totals only (nothing is rebuilt from
//! receipts, which carry no token counts).

use async_trait::async_trait;
use chrono::{DateTime, Datelike, TimeZone, Timelike, Utc};
use serde::{Deserialize, Serialize};

use crate::StoreResult;
use crate::records::UsageTotals;

/// One billed request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerRow {
    /// Opaque, unique, and the paging cursor of the row.
    pub id: String,
    pub at: DateTime<Utc>,
    pub user_id: String,
    pub key_id: String,
    /// The key's group when the request was billed.
    pub group_id: Option<String>,
    /// The model that served the request (empty for rows without one).
    pub model: String,
    pub request_id: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// Which rows: every filter that is set must match; `from` inclusive, `to` exclusive.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerFilter {
    pub user_id: Option<String>,
    pub key_id: Option<String>,
    pub group_id: Option<String>,
    pub model: Option<String>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
}

impl LedgerFilter {
    /// Does a row pass the filters (the time range included)?
    pub fn matches(&self, r: &LedgerRow) -> bool {
        self.user_id.as_ref().is_none_or(|v| *v == r.user_id)
            && self.key_id.as_ref().is_none_or(|v| *v == r.key_id)
            && self.group_id.as_ref().is_none_or(|v| Some(v) == r.group_id.as_ref())
            && self.model.as_ref().is_none_or(|v| *v == r.model)
            && self.from.is_none_or(|f| r.at >= f)
            && self.to.is_none_or(|t| r.at < t)
    }
}

/// One page of rows, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerPage {
    pub rows: Vec<LedgerRow>,
    /// Pass as the cursor for the next (older) page; `None` after the last.
    pub next: Option<String>,
}

/// Width of a time-series bucket (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bucket {
    Hour,
    Day,
}

impl Bucket {
    /// The start of the bucket holding `at`.
    pub fn start(self, at: DateTime<Utc>) -> DateTime<Utc> {
        let hour = match self {
            Bucket::Hour => at.hour(),
            Bucket::Day => 0,
        };
        Utc.with_ymd_and_hms(at.year(), at.month(), at.day(), hour, 0, 0).single().unwrap_or(at)
    }

    pub fn width(self) -> chrono::Duration {
        match self {
            Bucket::Hour => chrono::Duration::hours(1),
            Bucket::Day => chrono::Duration::days(1),
        }
    }
}

/// Totals of the matching rows, by user, key and model (each sorted by name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerTotals {
    pub all: UsageTotals,
    pub users: Vec<(String, UsageTotals)>,
    pub keys: Vec<(String, UsageTotals)>,
    pub models: Vec<(String, UsageTotals)>,
}

impl LedgerTotals {
    /// Add one row (the in-memory reduction the redb backend uses).
    pub fn add(&mut self, r: &LedgerRow) {
        fn bump(rows: &mut Vec<(String, UsageTotals)>, name: &str, r: &LedgerRow) {
            let i = match rows.binary_search_by(|(n, _)| n.as_str().cmp(name)) {
                Ok(i) => i,
                Err(i) => {
                    rows.insert(i, (name.to_owned(), UsageTotals::default()));
                    i
                }
            };
            rows[i].1.add(r.prompt_tokens, r.completion_tokens);
        }
        self.all.add(r.prompt_tokens, r.completion_tokens);
        bump(&mut self.users, &r.user_id, r);
        bump(&mut self.keys, &r.key_id, r);
        bump(&mut self.models, &r.model, r);
    }
}

/// The ledger's reads (rows are written by `Store::finish_request`).
#[async_trait]
pub trait UsageLedger: Send + Sync {
    /// Up to `limit` matching rows older than `cursor` (from the start when `None`), newest first.
    async fn ledger_page(&self, filter: &LedgerFilter, cursor: Option<&str>, limit: usize) -> StoreResult<LedgerPage>;
    /// Totals per bucket of the matching rows, oldest first; empty buckets are left out.
    async fn ledger_series(&self, filter: &LedgerFilter, bucket: Bucket) -> StoreResult<Vec<(DateTime<Utc>, UsageTotals)>>;
    /// Totals of the matching rows.
    async fn ledger_totals(&self, filter: &LedgerFilter) -> StoreResult<LedgerTotals>;
}
