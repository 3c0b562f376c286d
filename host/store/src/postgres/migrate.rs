//! Versioned migrations: SQL files embedded in the binary, applied in order
//! inside one transaction under an advisory lock, each recorded in
//! `schema_migrations`.
//!
//! Several hosts may start at once against one database: the advisory lock
//! makes the others wait for the first, and then find nothing left to do. A
//! database migrated by a newer binary (a version this one does not know) is
//! refused: this binary cannot know what the newer schema means.

use tokio_postgres::GenericClient;

/// Taken for the whole migration; the value spells "gatehous" in ASCII.
const LOCK_ID: i64 = 0x6761_7465_686f_7573;

/// (version, name, SQL), in ascending order of version.
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "initial", include_str!("migrations/0001_initial.sql")),
    (2, "fleet_limits", include_str!("migrations/0002_fleet_limits.sql")),
    (3, "usage_ledger_detail", include_str!("migrations/0003_usage_ledger_detail.sql")),
    (4, "knowledge_bases", include_str!("migrations/0004_knowledge_bases.sql")),
    (5, "plugin_registry", include_str!("migrations/0005_plugin_registry.sql")),
    (6, "receipt_keys", include_str!("migrations/0006_receipt_keys.sql")),
    (7, "import_and_limits", include_str!("migrations/0007_import_and_limits.sql")),
    (8, "group_base_policies", include_str!("migrations/0008_group_base_policies.sql")),
];

/// The newest schema version this binary knows.
pub fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// What [`migrate`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// The schema version before.
    pub from: i32,
    /// The schema version now.
    pub to: i32,
}

/// Why migration failed.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error(
        "the database's schema is version {found}, newer than this binary knows ({known}): it was migrated by a newer Gatehouse; run that version (or newer) against it"
    )]
    TooNew { found: i32, known: i32 },
    #[error("migration failed: {}", super::chain(.0))]
    Database(#[from] tokio_postgres::Error),
    #[error("migration failed: {0}")]
    Pool(String),
}

/// Bring the database to [`latest`]; a no-op when it is there. Called at
/// connect and by the CLI's `db migrate`.
pub async fn migrate(pool: &deadpool_postgres::Pool) -> Result<Migrated, MigrateError> {
    let mut client = pool.get().await.map_err(|e| MigrateError::Pool(super::chain(&e)))?;
    migrate_client(&mut client).await
}

/// [`migrate`] on a client of one's own.
pub async fn migrate_client(client: &mut tokio_postgres::Client) -> Result<Migrated, MigrateError> {
    let txn = client.transaction().await?;
    // Released at commit or rollback: no lock outlives a failed migration.
    txn.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_ID]).await?;
    txn.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version    integer PRIMARY KEY,
             name       text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .await?;
    let from = current(&txn).await?;
    if from > latest() {
        return Err(MigrateError::TooNew { found: from, known: latest() });
    }
    for (version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 > from) {
        txn.batch_execute(sql).await?;
        txn.execute("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", &[version, name]).await?;
    }
    txn.commit().await?;
    Ok(Migrated { from, to: latest().max(from) })
}

/// The schema version recorded in the database (0 for none).
pub async fn current<C: GenericClient>(client: &C) -> Result<i32, tokio_postgres::Error> {
    let row = client.query_one("SELECT COALESCE(max(version), 0) FROM schema_migrations", &[]).await?;
    Ok(row.get(0))
}
