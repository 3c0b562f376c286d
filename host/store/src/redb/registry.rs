//! The redb [`PluginRegistry`]: `plugins.redb` in the data dir, a file of its
//! own (see `crate::registry` for why), with two tables:
//! * `plugin_versions`: (name, version) → [`PublishedPlugin`] (JSON)
//! * `plugin_components`: (name, version) → component bytes
//! * `group_base_policies`: group id → the name of its base policy
//! * `shadow_counts`: (name, version, host) → that host's last saved
//!   [`HostShadowCounts`] (JSON); written without an announcement
//!
//! Each write is one redb transaction committed with fsync; changes are
//! announced in-process (one host owns a redb file).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};

use super::{backend, decode, encode};
use crate::StoreResult;
use crate::registry::{Changes, HostShadowCounts, NewVersion, PluginRegistry, PublishedPlugin, ShadowCounts, plan};

/// File name of the registry inside the data dir.
pub const REGISTRY_FILE: &str = "plugins.redb";

const VERSIONS: TableDefinition<(&str, u32), &[u8]> = TableDefinition::new("plugin_versions");
const COMPONENTS: TableDefinition<(&str, u32), &[u8]> = TableDefinition::new("plugin_components");
const GROUP_BASES: TableDefinition<&str, &str> = TableDefinition::new("group_base_policies");
const SHADOW_COUNTS: TableDefinition<(&str, u32, &str), &[u8]> = TableDefinition::new("shadow_counts");

/// redb-backed plugin registry.
pub struct RedbRegistry {
    db: Arc<Database>,
    changes: tokio::sync::watch::Sender<u64>,
}

impl RedbRegistry {
    /// Open (or create) `<data_dir>/plugins.redb`.
    pub fn open(data_dir: &Path) -> anyhow::Result<RedbRegistry> {
        std::fs::create_dir_all(data_dir).map_err(|e| anyhow::anyhow!("cannot create data dir {}: {e}", data_dir.display()))?;
        let path = data_dir.join(REGISTRY_FILE);
        let db = Database::create(&path).map_err(|e| anyhow::anyhow!("cannot open the plugin registry {}: {e}", path.display()))?;
        let txn = db.begin_write()?;
        // Opening a table in a write transaction creates it.
        txn.open_table(VERSIONS)?;
        txn.open_table(COMPONENTS)?;
        txn.open_table(GROUP_BASES)?;
        txn.open_table(SHADOW_COUNTS)?;
        txn.commit()?;
        Ok(RedbRegistry { db: Arc::new(db), changes: tokio::sync::watch::channel(0).0 })
    }

    async fn blocking<T: Send + 'static>(&self, f: impl FnOnce(&Database) -> StoreResult<T> + Send + 'static) -> StoreResult<T> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db)).await.map_err(backend)?
    }

    /// Run `f` in a write transaction, commit, and announce the change.
    async fn write<T: Send + 'static>(&self, f: impl FnOnce(&WriteTransaction) -> StoreResult<T> + Send + 'static) -> StoreResult<T> {
        let out = self.write_quietly(f).await?;
        self.changes.send_modify(|n| *n += 1);
        Ok(out)
    }

    /// Run `f` in a write transaction and commit, without an announcement.
    async fn write_quietly<T: Send + 'static>(
        &self,
        f: impl FnOnce(&WriteTransaction) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(backend)?;
            let out = f(&txn)?;
            txn.commit().map_err(backend)?;
            Ok(out)
        })
        .await
    }
}

fn versions_of<T: ReadableTable<(&'static str, u32), &'static [u8]>>(t: &T, name: &str) -> StoreResult<Vec<PublishedPlugin>> {
    let mut out = Vec::new();
    for item in t.range((name, 0)..=(name, u32::MAX)).map_err(backend)? {
        let (_, v) = item.map_err(backend)?;
        out.push(decode(v.value())?);
    }
    Ok(out)
}

/// Write the changed versions' records.
fn apply(txn: &WriteTransaction, changed: &[PublishedPlugin]) -> StoreResult<()> {
    let mut t = txn.open_table(VERSIONS).map_err(backend)?;
    for p in changed {
        t.insert((p.name.as_str(), p.version), encode(p)?.as_slice()).map_err(backend)?;
    }
    Ok(())
}

/// A state change of one name: read its versions, plan, apply.
fn change(
    txn: &WriteTransaction,
    name: &str,
    plan: impl FnOnce(&[PublishedPlugin]) -> StoreResult<(PublishedPlugin, plan::Changed)>,
) -> StoreResult<PublishedPlugin> {
    let existing = versions_of(&txn.open_table(VERSIONS).map_err(backend)?, name)?;
    let (target, changed) = plan(&existing)?;
    apply(txn, &changed)?;
    Ok(target)
}

#[async_trait]
impl PluginRegistry for RedbRegistry {
    async fn publish(&self, v: NewVersion) -> StoreResult<PublishedPlugin> {
        self.write(move |txn| {
            let existing = versions_of(&txn.open_table(VERSIONS).map_err(backend)?, &v.name)?;
            let (new, changed) = plan::publish(&existing, &v, chrono::Utc::now())?;
            apply(txn, &changed)?;
            apply(txn, std::slice::from_ref(&new))?;
            txn.open_table(COMPONENTS).map_err(backend)?.insert((new.name.as_str(), new.version), v.bytes.as_slice()).map_err(backend)?;
            Ok(new)
        })
        .await
    }

    async fn versions(&self, name: &str) -> StoreResult<Vec<PublishedPlugin>> {
        let name = name.to_owned();
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            versions_of(&txn.open_table(VERSIONS).map_err(backend)?, &name)
        })
        .await
    }

    async fn current(&self) -> StoreResult<Vec<PublishedPlugin>> {
        self.blocking(|db| {
            let txn = db.begin_read().map_err(backend)?;
            let t = txn.open_table(VERSIONS).map_err(backend)?;
            let mut out = Vec::new();
            for item in t.iter().map_err(backend)? {
                let (_, v) = item.map_err(backend)?;
                let p: PublishedPlugin = decode(v.value())?;
                if p.state != crate::registry::PluginState::Inactive {
                    out.push(p);
                }
            }
            Ok(out)
        })
        .await
    }

    async fn component(&self, name: &str, version: u32) -> StoreResult<Option<Vec<u8>>> {
        let name = name.to_owned();
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let t = txn.open_table(COMPONENTS).map_err(backend)?;
            Ok(t.get((name.as_str(), version)).map_err(backend)?.map(|v| v.value().to_vec()))
        })
        .await
    }

    async fn activate(&self, name: &str, version: u32) -> StoreResult<PublishedPlugin> {
        let name = name.to_owned();
        self.write(move |txn| change(txn, &name, |e| plan::activate(e, &name, version))).await
    }

    async fn shadow(&self, name: &str, version: u32) -> StoreResult<PublishedPlugin> {
        let name = name.to_owned();
        self.write(move |txn| change(txn, &name, |e| plan::shadow(e, &name, version))).await
    }

    async fn rollback(&self, name: &str, to: Option<u32>) -> StoreResult<PublishedPlugin> {
        let name = name.to_owned();
        self.write(move |txn| {
            change(txn, &name, |e| {
                let target = plan::rollback_target(e, &name, to)?;
                plan::activate(e, &name, target)
            })
        })
        .await
    }

    async fn set_group_base(&self, group: &str, policy: Option<&str>) -> StoreResult<()> {
        let (group, policy) = (group.to_owned(), policy.map(str::to_owned));
        self.write(move |txn| {
            let mut t = txn.open_table(GROUP_BASES).map_err(backend)?;
            match &policy {
                Some(p) => t.insert(group.as_str(), p.as_str()).map_err(backend)?,
                None => t.remove(group.as_str()).map_err(backend)?,
            };
            Ok(())
        })
        .await
    }

    async fn group_bases(&self) -> StoreResult<BTreeMap<String, String>> {
        self.blocking(|db| {
            let txn = db.begin_read().map_err(backend)?;
            let t = txn.open_table(GROUP_BASES).map_err(backend)?;
            let mut out = BTreeMap::new();
            for item in t.iter().map_err(backend)? {
                let (k, v) = item.map_err(backend)?;
                out.insert(k.value().to_owned(), v.value().to_owned());
            }
            Ok(out)
        })
        .await
    }

    async fn save_shadow_counts(&self, host: &str, name: &str, version: u32, counts: ShadowCounts) -> StoreResult<()> {
        let row = HostShadowCounts { host: host.to_owned(), counts, saved_at: chrono::Utc::now() };
        let name = name.to_owned();
        self.write_quietly(move |txn| {
            let mut t = txn.open_table(SHADOW_COUNTS).map_err(backend)?;
            t.insert((name.as_str(), version, row.host.as_str()), encode(&row)?.as_slice()).map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn shadow_counts(&self, name: &str, version: u32) -> StoreResult<Vec<HostShadowCounts>> {
        let name = name.to_owned();
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let t = txn.open_table(SHADOW_COUNTS).map_err(backend)?;
            let mut out = Vec::new();
            for item in t.range((name.as_str(), version, "")..).map_err(backend)? {
                let (k, v) = item.map_err(backend)?;
                let (n, ver, _) = k.value();
                if n != name || ver != version {
                    break;
                }
                out.push(decode(v.value())?);
            }
            Ok(out)
        })
        .await
    }

    fn subscribe(&self) -> Changes {
        self.changes.subscribe()
    }
}

impl std::fmt::Debug for RedbRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedbRegistry")
    }
}
