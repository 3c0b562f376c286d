//! [`PluginRegistry`] on PostgreSQL: the `plugin_versions` table (migration
//! 2), shared by every host of a fleet. Each write is one transaction that
//! takes a transaction-scoped advisory lock on the name (two hosts
//! publishing one name number their versions one after the other) and ends
//! with `NOTIFY gatehouse_plugins`, delivered at commit to every host's
//! listener ([`listen`]), which moves its [`Changes`] counter. Groups' base
//! policies are rows of `group_base_policies` (migration 8), written the same way;
//! each host's shadow counts are rows of `shadow_counts` (same migration),
//! written without a NOTIFY.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use tokio_postgres::{NoTls, Transaction};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{PgStore, db_error, decode, encode};
use crate::registry::{Changes, HostShadowCounts, NewVersion, PluginRegistry, PluginState, PublishedPlugin, ShadowCounts, plan};
use crate::{StoreError, StoreResult};

/// NOTIFY channel of registry writes.
pub(super) const CHANNEL: &str = "gatehouse_plugins";

/// Lock the name for this transaction and read its versions, oldest first.
async fn versions_for_update(txn: &Transaction<'_>, name: &str) -> StoreResult<Vec<PublishedPlugin>> {
    txn.execute("SELECT pg_advisory_xact_lock(hashtextextended('plugin:' || $1, 0))", &[&name]).await.map_err(db_error)?;
    read_versions(txn, name).await
}

async fn read_versions<C: tokio_postgres::GenericClient>(c: &C, name: &str) -> StoreResult<Vec<PublishedPlugin>> {
    let rows = c.query("SELECT state, record FROM plugin_versions WHERE name = $1 ORDER BY version", &[&name]).await.map_err(db_error)?;
    rows.iter().map(row_record).collect()
}

/// The record with the state column's value (the column is what the database keeps unique).
fn row_record(row: &tokio_postgres::Row) -> StoreResult<PublishedPlugin> {
    let mut p: PublishedPlugin = decode(row.get(1))?;
    let state: &str = row.get(0);
    p.state = PluginState::parse(state).ok_or_else(|| StoreError::Backend(format!("corrupt plugin state {state}")))?;
    Ok(p)
}

/// Write state changes: demotions first, so the one-active and one-shadow indexes hold at every statement.
async fn apply(txn: &Transaction<'_>, changed: &[PublishedPlugin]) -> StoreResult<()> {
    let (demoted, promoted): (Vec<&PublishedPlugin>, Vec<&PublishedPlugin>) =
        changed.iter().partition(|p| p.state == PluginState::Inactive);
    for p in demoted.into_iter().chain(promoted) {
        txn.execute(
            "UPDATE plugin_versions SET state = $3, record = $4 WHERE name = $1 AND version = $2",
            &[&p.name, &(p.version as i32), &p.state.as_str(), &encode(p)?],
        )
        .await
        .map_err(db_error)?;
    }
    Ok(())
}

async fn notify(txn: &Transaction<'_>) -> StoreResult<()> {
    txn.execute("SELECT pg_notify($1, '')", &[&CHANNEL]).await.map_err(db_error)?;
    Ok(())
}

impl PgStore {
    /// One state change of a name: lock, read, plan, apply, notify.
    async fn registry_change(
        &self,
        name: &str,
        plan: impl FnOnce(&[PublishedPlugin]) -> StoreResult<(PublishedPlugin, plan::Changed)> + Send,
    ) -> StoreResult<PublishedPlugin> {
        self.in_txn(async |txn| {
            let existing = versions_for_update(txn, name).await?;
            let (target, changed) = plan(&existing)?;
            apply(txn, &changed).await?;
            notify(txn).await?;
            Ok(target)
        })
        .await
    }
}

#[async_trait]
impl PluginRegistry for PgStore {
    async fn publish(&self, v: NewVersion) -> StoreResult<PublishedPlugin> {
        self.in_txn(async |txn| {
            let existing = versions_for_update(txn, &v.name).await?;
            let (new, changed) = plan::publish(&existing, &v, chrono::Utc::now())?;
            apply(txn, &changed).await?;
            txn.execute(
                "INSERT INTO plugin_versions (name, version, state, record, component) VALUES ($1, $2, $3, $4, $5)",
                &[&new.name, &(new.version as i32), &new.state.as_str(), &encode(&new)?, &v.bytes],
            )
            .await
            .map_err(db_error)?;
            notify(txn).await?;
            Ok(new)
        })
        .await
    }

    async fn versions(&self, name: &str) -> StoreResult<Vec<PublishedPlugin>> {
        let client = self.client().await?;
        read_versions(&**client, name).await
    }

    async fn current(&self) -> StoreResult<Vec<PublishedPlugin>> {
        let client = self.client().await?;
        let rows = client
            .query("SELECT state, record FROM plugin_versions WHERE state <> 'inactive' ORDER BY name, version", &[])
            .await
            .map_err(db_error)?;
        rows.iter().map(row_record).collect()
    }

    async fn component(&self, name: &str, version: u32) -> StoreResult<Option<Vec<u8>>> {
        let client = self.client().await?;
        let row = client
            .query_opt("SELECT component FROM plugin_versions WHERE name = $1 AND version = $2", &[&name, &(version as i32)])
            .await
            .map_err(db_error)?;
        Ok(row.map(|r| r.get(0)))
    }

    async fn activate(&self, name: &str, version: u32) -> StoreResult<PublishedPlugin> {
        self.registry_change(name, |e| plan::activate(e, name, version)).await
    }

    async fn shadow(&self, name: &str, version: u32) -> StoreResult<PublishedPlugin> {
        self.registry_change(name, |e| plan::shadow(e, name, version)).await
    }

    async fn rollback(&self, name: &str, to: Option<u32>) -> StoreResult<PublishedPlugin> {
        self.registry_change(name, |e| {
            let target = plan::rollback_target(e, name, to)?;
            plan::activate(e, name, target)
        })
        .await
    }

    async fn set_group_base(&self, group: &str, policy: Option<&str>) -> StoreResult<()> {
        self.in_txn(async |txn| {
            match policy {
                Some(p) => txn
                    .execute(
                        "INSERT INTO group_base_policies (group_id, policy) VALUES ($1, $2) \
                         ON CONFLICT (group_id) DO UPDATE SET policy = EXCLUDED.policy, set_at = now()",
                        &[&group, &p],
                    )
                    .await
                    .map_err(db_error)?,
                None => txn.execute("DELETE FROM group_base_policies WHERE group_id = $1", &[&group]).await.map_err(db_error)?,
            };
            notify(txn).await
        })
        .await
    }

    async fn group_bases(&self) -> StoreResult<BTreeMap<String, String>> {
        let client = self.client().await?;
        let rows = client.query("SELECT group_id, policy FROM group_base_policies", &[]).await.map_err(db_error)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    async fn save_shadow_counts(&self, host: &str, name: &str, version: u32, counts: ShadowCounts) -> StoreResult<()> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO shadow_counts (name, version, host, counts) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (name, version, host) DO UPDATE SET counts = EXCLUDED.counts, saved_at = now()",
                &[&name, &(version as i32), &host, &encode(&counts)?],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn shadow_counts(&self, name: &str, version: u32) -> StoreResult<Vec<HostShadowCounts>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT host, counts, saved_at FROM shadow_counts WHERE name = $1 AND version = $2 ORDER BY host",
                &[&name, &(version as i32)],
            )
            .await
            .map_err(db_error)?;
        rows.iter().map(|r| Ok(HostShadowCounts { host: r.get(0), counts: decode(r.get(1))?, saved_at: r.get(2) })).collect()
    }

    fn subscribe(&self) -> Changes {
        self.registry_changes.subscribe()
    }
}

/// Listen for registry writes of any host and move `changes`; reconnect a
/// second after a lost connection, and move `changes` on every (re)connect,
/// since notifications sent meanwhile were lost.
pub(super) async fn listen(config: tokio_postgres::Config, tls: Option<MakeRustlsConnect>, changes: tokio::sync::watch::Sender<u64>) {
    let bump = || changes.send_modify(|n| *n += 1);
    loop {
        let result = match &tls {
            Some(tls) => super::listen::listen_once(&config, tls.clone(), CHANNEL, bump, bump).await,
            None => super::listen::listen_once(&config, NoTls, CHANNEL, bump, bump).await,
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, "the plugin-registry listener lost PostgreSQL; it reloads the published plugins when it is back");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
