//! The plugin registry: every component uploaded through the admin API or
//! the CLI, by name and version, with the checks it passed and its state.
//!
//! [`PluginRegistry`] is a trait of its own, beside [`crate::Store`]: the
//! redb implementation keeps its rows in a file of their own
//! ([`crate::redb::registry::RedbRegistry`], `plugins.redb` in the data dir)
//! so that a component of tens of MiB (an interpreted-language policy) is
//! never written through the group commit that every chat request waits on;
//! the PostgreSQL implementation is [`crate::postgres::PgStore`] itself, whose
//! `plugin_versions` table every host of a fleet shares.
//!
//! A version is stored only after the host checked it (world, `info()`, size,
//! a trial instantiation): the registry holds no component that failed, so a
//! host that starts later loads whatever is active without a second opinion
//! (it still runs the same checks as it loads, and keeps what served before if
//! one fails there).
//!
//! The registry also keeps each group's base policy, where the operator
//! named one ([`PluginRegistry::set_group_base`]): the policy a group's
//! policies are layered on is read with them, on every host, at every sync.
//!
//! Every change is announced ([`PluginRegistry::subscribe`]): in-process for
//! redb, by `NOTIFY gatehouse_plugins` for PostgreSQL, so every host of a
//! fleet reloads the active set when any of them publishes, activates or
//! rolls back.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::StoreResult;

/// Where a version stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginState {
    /// The version that serves the name (at most one per name).
    Active,
    /// Evaluated beside the active one, never deciding (at most one per name).
    Shadow,
    /// Kept for a rollback.
    Inactive,
}

impl PluginState {
    /// `active`, `shadow`, `inactive`.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginState::Active => "active",
            PluginState::Shadow => "shadow",
            PluginState::Inactive => "inactive",
        }
    }

    /// The state a stored word names.
    pub fn parse(s: &str) -> Option<PluginState> {
        match s {
            "active" => Some(PluginState::Active),
            "shadow" => Some(PluginState::Shadow),
            "inactive" => Some(PluginState::Inactive),
            _ => None,
        }
    }
}

/// One stored version, without its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedPlugin {
    /// The name it serves under (from its `info()`).
    pub name: String,
    /// The registry's version number: 1, 2, … per name, in upload order.
    pub version: u32,
    /// `provider`, `shield`, `policy` or `retriever`.
    pub kind: String,
    /// The component's own version string (from its `info()`).
    pub plugin_version: String,
    /// Hex SHA-256 of the component bytes.
    pub sha256: String,
    /// Component size in bytes.
    pub size: u64,
    pub state: PluginState,
    /// The checks it passed before it was stored (`world`, `info`, `size`, `instantiate`).
    pub checks: Vec<String>,
    pub uploaded_at: DateTime<Utc>,
    /// Who uploaded it (the key's user id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uploaded_by: Option<String>,
    /// The group a tenant policy belongs to; `None` for an operator's plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
}

/// A checked component to store as the next version of its name.
#[derive(Clone)]
pub struct NewVersion {
    pub name: String,
    pub kind: String,
    pub plugin_version: String,
    pub sha256: String,
    pub checks: Vec<String>,
    pub uploaded_by: Option<String>,
    pub group_id: Option<String>,
    /// `Active` (it serves at once) or `Shadow`.
    pub state: PluginState,
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for NewVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewVersion")
            .field("name", &self.name)
            .field("sha256", &self.sha256)
            .field("state", &self.state)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

impl NewVersion {
    /// The stored record of this upload as version `version`.
    pub fn record(&self, version: u32, uploaded_at: DateTime<Utc>) -> PublishedPlugin {
        PublishedPlugin {
            name: self.name.clone(),
            version,
            kind: self.kind.clone(),
            plugin_version: self.plugin_version.clone(),
            sha256: self.sha256.clone(),
            size: self.bytes.len() as u64,
            state: self.state,
            checks: self.checks.clone(),
            uploaded_at,
            uploaded_by: self.uploaded_by.clone(),
            group_id: self.group_id.clone(),
        }
    }
}

/// What one host's shadow evaluations of one shadow version came to (docs/decisions/tenant-policies.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowCounts {
    pub evaluated: u64,
    pub agreed: u64,
    pub disagreed: u64,
    pub dropped: u64,
    pub faults: u64,
}

impl ShadowCounts {
    /// Both counts added, field by field (a fleet's sum).
    pub fn plus(self, o: ShadowCounts) -> ShadowCounts {
        ShadowCounts {
            evaluated: self.evaluated + o.evaluated,
            agreed: self.agreed + o.agreed,
            disagreed: self.disagreed + o.disagreed,
            dropped: self.dropped + o.dropped,
            faults: self.faults + o.faults,
        }
    }
}

/// A host's last saved [`ShadowCounts`] of one shadow version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostShadowCounts {
    /// The host (its receipt-signing key id: one per data dir).
    pub host: String,
    pub counts: ShadowCounts,
    pub saved_at: DateTime<Utc>,
}

/// A change announced to every subscriber: a counter that only grows. A
/// subscriber re-reads the active set when it moves, so missed intermediate
/// values lose nothing.
pub type Changes = tokio::sync::watch::Receiver<u64>;

/// The plugin registry's operations; each write is one commit.
#[async_trait]
pub trait PluginRegistry: Send + Sync + 'static {
    /// Store the next version of `v.name` (numbered one past its highest).
    /// An `Active` upload makes the name's active version `Inactive`; a
    /// `Shadow` upload replaces its shadow the same way. `Conflict` when the
    /// name belongs to another group (or to the operator, for a group's upload).
    async fn publish(&self, v: NewVersion) -> StoreResult<PublishedPlugin>;

    /// Every version of a name, oldest first (empty for an unknown name).
    async fn versions(&self, name: &str) -> StoreResult<Vec<PublishedPlugin>>;

    /// Every name's active and shadow versions, by name.
    async fn current(&self) -> StoreResult<Vec<PublishedPlugin>>;

    /// The bytes of one version.
    async fn component(&self, name: &str, version: u32) -> StoreResult<Option<Vec<u8>>>;

    /// Make `version` the active one (the previous active becomes
    /// `Inactive`; a shadow that is activated stops being the shadow).
    /// `NotFound` for an unknown name or version.
    async fn activate(&self, name: &str, version: u32) -> StoreResult<PublishedPlugin>;

    /// Make `version` the shadow (the previous shadow becomes `Inactive`).
    /// `Conflict` when it is the active version.
    async fn shadow(&self, name: &str, version: u32) -> StoreResult<PublishedPlugin>;

    /// Activate `to`, or else the highest version below the active one.
    /// `Conflict` when there is none to go back to.
    async fn rollback(&self, name: &str, to: Option<u32>) -> StoreResult<PublishedPlugin>;

    /// Name `policy` as the base policy of `group`'s policies, or (`None`)
    /// go back to the server default. Announced like every other write. The
    /// caller checks the name (a loaded policy that is no group's).
    async fn set_group_base(&self, group: &str, policy: Option<&str>) -> StoreResult<()>;

    /// Every group's base policy where the operator named one: group id → policy name.
    async fn group_bases(&self) -> StoreResult<BTreeMap<String, String>>;

    /// Save `host`'s counts of shadow version `version` of `name`, replacing
    /// what it saved before. Not announced: no host reloads for a count.
    async fn save_shadow_counts(&self, host: &str, name: &str, version: u32, counts: ShadowCounts) -> StoreResult<()>;

    /// Every host's last saved counts of shadow version `version` of `name`, by host.
    async fn shadow_counts(&self, name: &str, version: u32) -> StoreResult<Vec<HostShadowCounts>>;

    /// Announcements of changes made by this process or (PostgreSQL) by any
    /// host; the value moves at least once after each committed change.
    fn subscribe(&self) -> Changes;
}

/// The version a rollback without a target goes back to: the highest below the active one.
pub fn previous_version(versions: &[PublishedPlugin]) -> Option<u32> {
    let active = versions.iter().find(|v| v.state == PluginState::Active)?.version;
    versions.iter().map(|v| v.version).filter(|v| *v < active).max()
}

/// The state changes of each write, worked out once on a name's versions
/// and applied by each backend in its transaction, so both agree.
pub(crate) mod plan {
    use super::*;
    use crate::StoreError;

    /// The versions whose state changes, with their new state.
    pub type Changed = Vec<PublishedPlugin>;

    /// `Conflict` when the name is held by another owner: the owner of a name
    /// is the group of its first version (`None`: the operator).
    fn owner_ok(existing: &[PublishedPlugin], group_id: &Option<String>, name: &str) -> StoreResult<()> {
        match existing.first() {
            Some(first) if first.group_id != *group_id => Err(StoreError::Conflict(match &first.group_id {
                Some(g) => format!("the plugin name {name} is registered to group {g}"),
                None => format!("the plugin name {name} belongs to the operator"),
            })),
            _ => Ok(()),
        }
    }

    /// Demote whichever version holds `state` (other than `keep`) to `Inactive`.
    fn demote(existing: &[PublishedPlugin], state: PluginState, keep: Option<u32>) -> Changed {
        existing
            .iter()
            .filter(|v| v.state == state && Some(v.version) != keep)
            .map(|v| PublishedPlugin { state: PluginState::Inactive, ..v.clone() })
            .collect()
    }

    pub fn publish(existing: &[PublishedPlugin], v: &NewVersion, now: DateTime<Utc>) -> StoreResult<(PublishedPlugin, Changed)> {
        owner_ok(existing, &v.group_id, &v.name)?;
        if v.state == PluginState::Inactive {
            return Err(StoreError::Conflict("a new version is published active or shadow".into()));
        }
        let next = existing.iter().map(|p| p.version).max().unwrap_or(0) + 1;
        Ok((v.record(next, now), demote(existing, v.state, None)))
    }

    fn find(existing: &[PublishedPlugin], name: &str, version: u32) -> StoreResult<PublishedPlugin> {
        existing
            .iter()
            .find(|v| v.version == version)
            .cloned()
            .ok_or_else(|| StoreError::NotFound(format!("plugin {name} version {version}")))
    }

    pub fn activate(existing: &[PublishedPlugin], name: &str, version: u32) -> StoreResult<(PublishedPlugin, Changed)> {
        let target = find(existing, name, version)?;
        let mut changed = demote(existing, PluginState::Active, Some(version));
        if target.state != PluginState::Active {
            changed.push(PublishedPlugin { state: PluginState::Active, ..target.clone() });
        }
        Ok((PublishedPlugin { state: PluginState::Active, ..target }, changed))
    }

    pub fn shadow(existing: &[PublishedPlugin], name: &str, version: u32) -> StoreResult<(PublishedPlugin, Changed)> {
        let target = find(existing, name, version)?;
        if target.state == PluginState::Active {
            return Err(StoreError::Conflict(format!("plugin {name} version {version} is the active version; shadow another one")));
        }
        let mut changed = demote(existing, PluginState::Shadow, Some(version));
        if target.state != PluginState::Shadow {
            changed.push(PublishedPlugin { state: PluginState::Shadow, ..target.clone() });
        }
        Ok((PublishedPlugin { state: PluginState::Shadow, ..target }, changed))
    }

    /// The version a rollback activates.
    pub fn rollback_target(existing: &[PublishedPlugin], name: &str, to: Option<u32>) -> StoreResult<u32> {
        if existing.is_empty() {
            return Err(StoreError::NotFound(format!("plugin {name}")));
        }
        match to {
            Some(v) => Ok(v),
            None => previous_version(existing)
                .ok_or_else(|| StoreError::Conflict(format!("plugin {name} has no version before the active one to roll back to"))),
        }
    }
}
