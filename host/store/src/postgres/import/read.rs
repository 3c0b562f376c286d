//! The source of an import: everything a single host keeps in its data dir,
//! read from one redb snapshot into the rows PostgreSQL will hold.
//!
//! Records are carried as the text redb stored (JSON), so nothing the host
//! wrote is re-serialised; a record is decoded only for the columns the
//! PostgreSQL schema keeps beside it. Tables a module of the redb store owns
//! privately (webhooks, knowledge bases, the usage ledger, the registry) are
//! opened here by their names and types: redb refuses a definition whose
//! types differ, so a change of their layout fails the import loudly
//! instead of misreading it.

use std::path::Path;

use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use redb::{Database, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition, TableError};
use serde::Deserialize;

use crate::model::{ApiKeyRecord, User};
use crate::receipts::{BatchProof, PublishedKey, Receipt};
use crate::records::{IdempotencyRecord, IdempotencyState, OutboxEvent, UsageTotals};
use crate::redb::audit::{micros_to_time, split};
use crate::redb::tables::*;
use crate::redb::{RedbStore, registry::REGISTRY_FILE};
use crate::webhooks::Delivery;

const WEBHOOK_ENDPOINTS: TableDefinition<&str, &[u8]> = TableDefinition::new("webhook_endpoints");
const WEBHOOK_SECRETS: TableDefinition<&str, &str> = TableDefinition::new("webhook_secrets");
const WEBHOOK_CURSORS: TableDefinition<&str, u64> = TableDefinition::new("webhook_cursors");
const WEBHOOK_DELIVERIES: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("webhook_delivery_rows");
const KNOWLEDGE_BASES: TableDefinition<&str, &[u8]> = TableDefinition::new("knowledge_bases");
const USAGE_LEDGER: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("usage_ledger");
const PLUGIN_VERSIONS: TableDefinition<(&str, u32), &[u8]> = TableDefinition::new("plugin_versions");
const PLUGIN_COMPONENTS: TableDefinition<(&str, u32), &[u8]> = TableDefinition::new("plugin_components");
const GROUP_BASES: TableDefinition<&str, &str> = TableDefinition::new("group_base_policies");
const SHADOW_COUNTS: TableDefinition<(&str, u32, &str), &[u8]> = TableDefinition::new("shadow_counts");

pub struct UserRow {
    pub id: String,
    pub email_key: String,
    pub record: String,
}

pub struct KeyRow {
    pub id: String,
    pub user_id: String,
    pub hash: Vec<u8>,
    pub admin: bool,
    pub revoked_at: Option<DateTime<Utc>>,
    pub record: String,
}

pub struct AuditRow {
    pub seq: i64,
    pub id: String,
    pub ts: DateTime<Utc>,
    pub kind: String,
    pub severity: &'static str,
    pub user_id: Option<String>,
    pub target_user_id: Option<String>,
    pub description: String,
    pub operation: String,
    /// Format 2: the content bytes the hash covers; format 1: the whole stored value.
    pub content: Vec<u8>,
    pub hash: String,
    pub prev_hash: String,
    pub format: i16,
}

pub struct LedgerRow {
    pub at: DateTime<Utc>,
    pub user_id: String,
    pub key_id: String,
    pub group_id: Option<String>,
    pub model: String,
    pub request_id: String,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
}

/// A day or month quota count of a key (`chat:d:2026-11-25`, `admin:m:2026-11`).
pub struct QuotaRow {
    pub key_id: String,
    pub window_id: String,
    pub count: i64,
    /// When the window ends; `None` for a name this build does not know.
    pub ends_at: Option<DateTime<Utc>>,
}

pub struct ReceiptRow {
    pub bundle_id: String,
    /// (batch id, leaf) for a receipt of a batch stored once.
    pub in_batch: Option<(i64, i32)>,
    /// `{receipt, signature?, batch?}`, as the PostgreSQL store reads it.
    pub row: String,
}

pub struct DeliveryRow {
    pub id: String,
    pub endpoint_id: String,
    pub status: &'static str,
    pub next_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    pub record: String,
}

pub struct PluginRow {
    pub name: String,
    pub version: i32,
    pub state: String,
    pub record: String,
    pub component: Vec<u8>,
}

pub struct ShadowCountRow {
    pub name: String,
    pub version: i32,
    pub host: String,
    /// The counts as JSON text, as the PostgreSQL registry keeps them.
    pub counts: String,
    pub saved_at: DateTime<Utc>,
}

/// Everything the import writes, read from one snapshot of the data dir.
#[derive(Default)]
pub struct Snapshot {
    pub users: Vec<UserRow>,
    pub groups: Vec<(String, String)>,
    pub members: Vec<(String, String)>,
    pub keys: Vec<KeyRow>,
    pub audit: Vec<AuditRow>,
    /// (`user` or `key`, id, totals).
    pub usage_totals: Vec<(String, String, UsageTotals)>,
    /// Oldest first.
    pub ledger: Vec<LedgerRow>,
    pub quota: Vec<QuotaRow>,
    /// (scope, expires_at, record): completed answers still to be replayed.
    pub idempotency: Vec<(String, DateTime<Utc>, String)>,
    /// Records left behind: expired, or in flight when the host stopped (their leases lapsed).
    pub idempotency_dropped: u64,
    /// (seq, event id, created, event).
    pub outbox: Vec<(i64, String, i64, String)>,
    pub receipt_batches: Vec<(i64, String)>,
    pub receipts: Vec<ReceiptRow>,
    pub endpoints: Vec<(String, String)>,
    pub secrets: Vec<(String, String)>,
    pub cursors: Vec<(String, i64)>,
    pub deliveries: Vec<DeliveryRow>,
    /// (name, definition).
    pub knowledge_bases: Vec<(String, String)>,
    pub plugins: Vec<PluginRow>,
    /// (group id, its base policy's name).
    pub group_bases: Vec<(String, String)>,
    /// Each host's last saved counts of a shadow version.
    pub shadow_counts: Vec<ShadowCountRow>,
    /// The host's receipt-signing public key, if it ever signed one.
    pub receipt_key: Option<PublishedKey>,
}

fn fail<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> anyhow::Error + '_ {
    move |e| anyhow::anyhow!("reading {what}: {e}")
}

fn text(bytes: &[u8], what: &str) -> anyhow::Result<String> {
    String::from_utf8(bytes.to_vec()).map_err(|e| anyhow::anyhow!("{what}: not UTF-8 ({e})"))
}

fn json<T: for<'de> Deserialize<'de>>(bytes: &[u8], what: &str) -> anyhow::Result<T> {
    serde_json::from_slice(bytes).map_err(|e| anyhow::anyhow!("{what}: unreadable ({e})"))
}

/// A table of the snapshot; `None` if it was never created (nothing of that kind was written).
fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &ReadTransaction,
    def: TableDefinition<K, V>,
) -> anyhow::Result<Option<redb::ReadOnlyTable<K, V>>> {
    match txn.open_table(def) {
        Ok(t) => Ok(Some(t)),
        Err(TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(anyhow::anyhow!("opening a table: {e}")),
    }
}

/// `(key id, window)` of a quota row, and when that window ends.
fn quota_row(name: &str, count: u64) -> Option<QuotaRow> {
    let (key_id, window_id) = name.rsplit_once('/')?;
    let mut parts = window_id.splitn(3, ':');
    let (_set, kind, start) = (parts.next()?, parts.next()?, parts.next()?);
    let ends_at = match kind {
        "d" => NaiveDate::parse_from_str(start, "%Y-%m-%d").ok().and_then(|d| d.succ_opt()),
        "m" => NaiveDate::parse_from_str(&format!("{start}-01"), "%Y-%m-%d").ok().and_then(|d| {
            if d.month() == 12 { NaiveDate::from_ymd_opt(d.year() + 1, 1, 1) } else { NaiveDate::from_ymd_opt(d.year(), d.month() + 1, 1) }
        }),
        _ => None,
    }
    .and_then(|d| d.and_hms_opt(0, 0, 0))
    .map(|t| Utc.from_utc_datetime(&t));
    Some(QuotaRow { key_id: key_id.to_owned(), window_id: window_id.to_owned(), count: i64::try_from(count).unwrap_or(i64::MAX), ends_at })
}

impl Snapshot {
    /// Read the store (open, so its lock is held) and the rest of the data dir.
    pub fn take(store: &RedbStore, data_dir: &Path, now: DateTime<Utc>) -> anyhow::Result<Snapshot> {
        let db = store.database()?;
        let txn = db.begin_read()?;
        let mut s = Snapshot::default();
        s.read_admin(&txn)?;
        s.read_audit(&txn)?;
        s.read_usage(&txn)?;
        s.read_chat(&txn, now)?;
        s.read_webhooks(&txn)?;
        if let Some(t) = table(&txn, KNOWLEDGE_BASES)? {
            for item in t.iter().map_err(fail("knowledge bases"))? {
                let (k, v) = item.map_err(fail("knowledge bases"))?;
                s.knowledge_bases.push((k.value().to_owned(), text(v.value(), "a knowledge base")?));
            }
        }
        s.read_registry(data_dir)?;
        if data_dir.join(crate::receipts::KEY_FILE).exists() {
            s.receipt_key = Some(crate::receipts::Signer25519::load_or_create(data_dir)?.published());
        }
        Ok(s)
    }

    fn read_admin(&mut self, txn: &ReadTransaction) -> anyhow::Result<()> {
        if let Some(t) = table(txn, USERS)? {
            for item in t.iter().map_err(fail("users"))? {
                let (_, v) = item.map_err(fail("users"))?;
                let user: User = json(v.value(), "a user")?;
                self.users.push(UserRow { email_key: user.email.to_lowercase(), id: user.id, record: text(v.value(), "a user")? });
            }
        }
        if let Some(t) = table(txn, GROUPS)? {
            for item in t.iter().map_err(fail("groups"))? {
                let (k, v) = item.map_err(fail("groups"))?;
                self.groups.push((k.value().to_owned(), text(v.value(), "a group")?));
            }
        }
        if let Some(t) = table(txn, MEMBERS)? {
            for item in t.iter().map_err(fail("group members"))? {
                let (k, _) = item.map_err(fail("group members"))?;
                let (g, u) = k.value();
                self.members.push((g.to_owned(), u.to_owned()));
            }
        }
        if let Some(t) = table(txn, KEYS)? {
            for item in t.iter().map_err(fail("API keys"))? {
                let (_, v) = item.map_err(fail("API keys"))?;
                let key: ApiKeyRecord = json(v.value(), "an API key")?;
                self.keys.push(KeyRow {
                    hash: key.hash.0.to_vec(),
                    admin: key.admin,
                    revoked_at: key.revoked_at,
                    record: text(v.value(), "an API key")?,
                    id: key.id,
                    user_id: key.user_id,
                });
            }
        }
        Ok(())
    }

    /// The chain in its order, each record with the bytes its hash covers as stored.
    fn read_audit(&mut self, txn: &ReadTransaction) -> anyhow::Result<()> {
        let Some(t) = table(txn, AUDIT)? else { return Ok(()) };
        for (position, item) in (1i64..).zip(t.iter().map_err(fail("the audit log"))?) {
            let (_, v) = item.map_err(fail("the audit log"))?;
            let stored = split(v.value()).map_err(|e| anyhow::anyhow!("audit record #{position}: {e}"))?;
            let r = &stored.record;
            let content = if stored.format == 1 { v.value().to_vec() } else { stored.content.to_vec() };
            self.audit.push(AuditRow {
                seq: position,
                id: r.id.clone(),
                ts: r.timestamp,
                kind: r.kind.clone(),
                severity: r.severity.as_str(),
                user_id: r.user.as_ref().map(|u| u.id.clone()),
                target_user_id: r.metadata.get("targetUserId").and_then(|v| v.as_str()).map(str::to_owned),
                description: r.description.clone(),
                operation: r.metadata.get("operation").and_then(|o| o.as_str()).unwrap_or_default().to_owned(),
                content,
                hash: stored.hash.clone(),
                prev_hash: r.prev_hash.clone(),
                format: i16::from(stored.format),
            });
        }
        Ok(())
    }

    fn read_usage(&mut self, txn: &ReadTransaction) -> anyhow::Result<()> {
        if let Some(t) = table(txn, USAGE)? {
            for item in t.iter().map_err(fail("usage totals"))? {
                let (k, v) = item.map_err(fail("usage totals"))?;
                let Some((scope, id)) = k.value().split_once('/') else { continue };
                self.usage_totals.push((scope.to_owned(), id.to_owned(), json(v.value(), "a usage total")?));
            }
        }
        if let Some(t) = table(txn, USAGE_LEDGER)? {
            /// A ledger row as the redb store writes it.
            #[derive(Deserialize)]
            struct Stored {
                u: String,
                k: String,
                #[serde(default)]
                g: Option<String>,
                m: String,
                r: String,
                p: u64,
                c: u64,
            }
            for item in t.iter().map_err(fail("the usage ledger"))? {
                let (k, v) = item.map_err(fail("the usage ledger"))?;
                let row: Stored = json(v.value(), "a usage ledger row")?;
                self.ledger.push(LedgerRow {
                    at: micros_to_time(k.value().0),
                    user_id: row.u,
                    key_id: row.k,
                    group_id: row.g,
                    model: row.m,
                    request_id: row.r,
                    prompt_tokens: i64::try_from(row.p).unwrap_or(i64::MAX),
                    completion_tokens: i64::try_from(row.c).unwrap_or(i64::MAX),
                });
            }
        }
        if let Some(t) = table(txn, QUOTA)? {
            for item in t.iter().map_err(fail("quota counts"))? {
                let (k, v) = item.map_err(fail("quota counts"))?;
                let row = quota_row(k.value(), v.value())
                    .ok_or_else(|| anyhow::anyhow!("a quota count named {:?}: no key and window", k.value()))?;
                self.quota.push(row);
            }
        }
        Ok(())
    }

    fn read_chat(&mut self, txn: &ReadTransaction, now: DateTime<Utc>) -> anyhow::Result<()> {
        if let Some(t) = table(txn, IDEMPOTENCY)? {
            for item in t.iter().map_err(fail("idempotency records"))? {
                let (k, v) = item.map_err(fail("idempotency records"))?;
                let r: IdempotencyRecord = json(v.value(), "an idempotency record")?;
                if matches!(r.state, IdempotencyState::Completed { .. }) && r.expires_at > now {
                    self.idempotency.push((k.value().to_owned(), r.expires_at, text(v.value(), "an idempotency record")?));
                } else {
                    self.idempotency_dropped += 1;
                }
            }
        }
        if let Some(t) = table(txn, OUTBOX)? {
            for item in t.iter().map_err(fail("the outbox"))? {
                let (k, v) = item.map_err(fail("the outbox"))?;
                let ev: OutboxEvent = json(v.value(), "an outbox event")?;
                let seq = i64::try_from(k.value()).map_err(|_| anyhow::anyhow!("outbox number {} too large", k.value()))?;
                self.outbox.push((seq, ev.id, ev.created, text(v.value(), "an outbox event")?));
            }
        }
        if let Some(t) = table(txn, RECEIPT_BATCHES)? {
            for item in t.iter().map_err(fail("receipt batches"))? {
                let (k, v) = item.map_err(fail("receipt batches"))?;
                let id = i64::try_from(k.value()).map_err(|_| anyhow::anyhow!("receipt batch {} too large", k.value()))?;
                self.receipt_batches.push((id, text(v.value(), "a receipt batch")?));
            }
        }
        if let Some(t) = table(txn, RECEIPTS)? {
            /// A receipt row as the redb store writes it.
            #[derive(Deserialize)]
            struct Stored {
                receipt: Receipt,
                #[serde(default)]
                signature: Option<String>,
                #[serde(default)]
                batch: Option<BatchProof>,
                #[serde(default)]
                in_batch: Option<InBatch>,
            }
            #[derive(Deserialize)]
            struct InBatch {
                id: u64,
                leaf: u32,
            }
            for item in t.iter().map_err(fail("receipts"))? {
                let (k, v) = item.map_err(fail("receipts"))?;
                let stored: Stored = json(v.value(), "a receipt")?;
                let in_batch = match stored.in_batch {
                    Some(b) => Some((
                        i64::try_from(b.id).map_err(|_| anyhow::anyhow!("receipt batch {} too large", b.id))?,
                        i32::try_from(b.leaf).map_err(|_| anyhow::anyhow!("receipt leaf {} too large", b.leaf))?,
                    )),
                    None => None,
                };
                let row = crate::postgres::chat::ReceiptRow { receipt: stored.receipt, signature: stored.signature, batch: stored.batch };
                self.receipts.push(ReceiptRow {
                    bundle_id: k.value().to_owned(),
                    in_batch,
                    row: serde_json::to_string(&row).map_err(|e| anyhow::anyhow!("a receipt: {e}"))?,
                });
            }
        }
        Ok(())
    }

    fn read_webhooks(&mut self, txn: &ReadTransaction) -> anyhow::Result<()> {
        if let Some(t) = table(txn, WEBHOOK_ENDPOINTS)? {
            for item in t.iter().map_err(fail("webhook endpoints"))? {
                let (k, v) = item.map_err(fail("webhook endpoints"))?;
                self.endpoints.push((k.value().to_owned(), text(v.value(), "a webhook endpoint")?));
            }
        }
        if let Some(t) = table(txn, WEBHOOK_SECRETS)? {
            for item in t.iter().map_err(fail("webhook secrets"))? {
                let (k, v) = item.map_err(fail("webhook secrets"))?;
                self.secrets.push((k.value().to_owned(), v.value().to_owned()));
            }
        }
        if let Some(t) = table(txn, WEBHOOK_CURSORS)? {
            for item in t.iter().map_err(fail("webhook cursors"))? {
                let (k, v) = item.map_err(fail("webhook cursors"))?;
                self.cursors.push((k.value().to_owned(), i64::try_from(v.value()).unwrap_or(i64::MAX)));
            }
        }
        if let Some(t) = table(txn, WEBHOOK_DELIVERIES)? {
            for item in t.iter().map_err(fail("webhook deliveries"))? {
                let (_, v) = item.map_err(fail("webhook deliveries"))?;
                let d: Delivery = json(v.value(), "a webhook delivery")?;
                self.deliveries.push(DeliveryRow {
                    status: crate::postgres::webhooks::status_str(d.status),
                    next_at: d.next_attempt_at,
                    updated_at: d.updated_at,
                    record: text(v.value(), "a webhook delivery")?,
                    id: d.id,
                    endpoint_id: d.endpoint_id,
                });
            }
        }
        Ok(())
    }

    /// The plugin registry, a redb file of its own in the data dir (none if nothing was ever published).
    fn read_registry(&mut self, data_dir: &Path) -> anyhow::Result<()> {
        let path = data_dir.join(REGISTRY_FILE);
        if !path.exists() {
            return Ok(());
        }
        let db = Database::create(&path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => {
                anyhow::anyhow!("{} is in use by another gatehouse process (stop the server first)", path.display())
            }
            other => anyhow::anyhow!("cannot open {}: {other}", path.display()),
        })?;
        let txn = db.begin_read()?;
        if let Some(bases) = table(&txn, GROUP_BASES)? {
            for item in bases.iter().map_err(fail("group base policies"))? {
                let (group, policy) = item.map_err(fail("group base policies"))?;
                self.group_bases.push((group.value().to_owned(), policy.value().to_owned()));
            }
        }
        if let Some(counts) = table(&txn, SHADOW_COUNTS)? {
            for item in counts.iter().map_err(fail("shadow counts"))? {
                let (k, v) = item.map_err(fail("shadow counts"))?;
                let (name, version, host) = k.value();
                let row: crate::registry::HostShadowCounts = json(v.value(), "shadow counts")?;
                self.shadow_counts.push(ShadowCountRow {
                    name: name.to_owned(),
                    version: i32::try_from(version).map_err(|_| anyhow::anyhow!("shadow of {name}: version {version} too large"))?,
                    host: host.to_owned(),
                    counts: serde_json::to_string(&row.counts)?,
                    saved_at: row.saved_at,
                });
            }
        }
        let (Some(versions), Some(components)) = (table(&txn, PLUGIN_VERSIONS)?, table(&txn, PLUGIN_COMPONENTS)?) else {
            return Ok(());
        };
        for item in versions.iter().map_err(fail("plugin versions"))? {
            let (k, v) = item.map_err(fail("plugin versions"))?;
            let (name, version) = k.value();
            let published: crate::registry::PublishedPlugin = json(v.value(), "a plugin version")?;
            let component = components
                .get((name, version))
                .map_err(fail("plugin components"))?
                .ok_or_else(|| anyhow::anyhow!("plugin {name} version {version} has no component"))?;
            self.plugins.push(PluginRow {
                name: name.to_owned(),
                version: i32::try_from(version).map_err(|_| anyhow::anyhow!("plugin {name}: version {version} too large"))?,
                state: published.state.as_str().to_owned(),
                record: text(v.value(), "a plugin version")?,
                component: component.value().to_vec(),
            });
        }
        Ok(())
    }
}
