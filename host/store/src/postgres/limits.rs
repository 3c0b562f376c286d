//! [`FleetLimiter`] on PostgreSQL: one call of `gatehouse_limit_take` (the
//! `fleet_limits` migration) per request, which inserts the key's window rows
//! if missing, locks them in a fixed order, decides and counts, in one
//! statement and one commit. Rows are per key, so one key's requests take
//! turns fleet-wide for the length of that statement; other keys do not wait.
//! The function's commit does not wait for the WAL flush (migration 7), so
//! a turn no longer lasts an fsync; the request's own outcome commit, or any
//! later synchronous one, makes the count durable (docs/decisions/fleet-limits.md).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{PgStore, db_error};
use crate::StoreResult;
use crate::fleet::{FleetLimiter, LimitWindow, Take, Taken};

#[async_trait]
impl FleetLimiter for PgStore {
    async fn take_limits(&self, key_id: &str, windows: &[LimitWindow], mode: Take) -> StoreResult<Taken> {
        let ids: Vec<&str> = windows.iter().map(|w| w.id.as_str()).collect();
        let ends: Vec<DateTime<Utc>> = windows.iter().map(|w| w.ends_at).collect();
        // The column is bigint: a limit past i64::MAX is no limit anyway.
        let limits: Vec<i64> = windows.iter().map(|w| i64::try_from(w.limit).unwrap_or(i64::MAX)).collect();
        let client = self.client().await?;
        let statement = client
            .prepare_cached("SELECT counts, allowed, exceeded, first FROM gatehouse_limit_take($1, $2, $3, $4, $5)")
            .await
            .map_err(db_error)?;
        let row = client.query_one(&statement, &[&key_id, &ids, &ends, &limits, &mode.as_str()]).await.map_err(db_error)?;
        let counts: Vec<i64> = row.get(0);
        let exceeded: Option<i32> = row.get(2);
        Ok(Taken {
            counts: counts.into_iter().map(|n| n.max(0) as u64).collect(),
            allowed: row.get(1),
            // The function's index is 1-based (SQL arrays).
            exceeded: exceeded.and_then(|i| usize::try_from(i).ok()).and_then(|i| i.checked_sub(1)),
            first: row.get(3),
        })
    }
}
