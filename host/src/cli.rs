//! The `gatehouse` command line: the server and the operators' offline tools.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::auth::keys::ApiKeySecret;
use crate::config::Config;
use gatehouse_store::model::AuditUser;
use gatehouse_store::redb::RedbStore;

/// Gatehouse: an AI inference gateway with WebAssembly plugins.
#[derive(Debug, Parser)]
#[command(name = "gatehouse", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Where the config comes from (shared by every subcommand).
#[derive(Debug, Args, Clone)]
pub struct ConfigArg {
    /// Config file (TOML). Without it: built-in defaults and GATEHOUSE_* variables.
    #[arg(short, long, env = "GATEHOUSE_CONFIG", global = true)]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway server.
    Serve(#[command(flatten)] ConfigArg),
    /// Check a config file and print the effective settings.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Manage API keys while the server is stopped (the data dir is locked while it runs).
    Keys {
        #[command(subcommand)]
        action: KeysAction,
    },
    /// Work with the audit log while the server is stopped.
    Audit {
        #[command(subcommand)]
        action: AuditAction,
    },
    /// Inspect plugins: the bundled set, the watched folder, a component file.
    Plugins {
        #[command(subcommand)]
        action: PluginsAction,
    },
    /// Write a plugin of your own (a tenant policy in Rust, Python or JavaScript): scaffold, build,
    /// test and check it, then publish it to a running server's plugin registry.
    Plugin {
        #[command(subcommand)]
        action: PluginAction,
    },
    /// Manage the PostgreSQL database of a fleet (`[store] backend = "postgres"`).
    Db {
        #[command(subcommand)]
        action: DbAction,
    },
}

/// The admin key of `plugin publish` comes from this variable, never from an argument (arguments are visible to every user of the machine).
pub const API_KEY_ENV: &str = "GATEHOUSE_API_KEY";

/// The languages `gatehouse plugin new` writes a policy in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PluginLang {
    /// Rust, built with cargo for wasm32-wasip2.
    Rust,
    /// Python, built with componentize-py.
    Python,
    /// JavaScript, built with componentize-js.
    Js,
}

/// The plugin kinds a tenant writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PluginKindArg {
    /// A security policy (world `policy`).
    Policy,
}

#[derive(Debug, Subcommand)]
pub enum PluginAction {
    /// Create a plugin project (outside any checkout): the policy source, the WIT, the guest
    /// library, 50 sample requests with their expected decisions and a README.
    New {
        /// The name requests select the policy by (`"smltp_policy": NAME`): a lowercase letter, then
        /// lowercase letters, digits and dashes. It is written once, in the source's `NAME`.
        name: String,
        /// The plugin kind.
        #[arg(long, value_enum, default_value = "policy")]
        kind: PluginKindArg,
        /// The language.
        #[arg(long, value_enum)]
        lang: PluginLang,
        /// Where to create it (default: ./NAME); it must not exist or be empty.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Build the project's component into build/policy.wasm with the language's own tool (cargo,
    /// componentize-py or componentize-js, versions pinned); a failed build leaves no component.
    Build {
        /// The project folder.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// Run the built component (in wasmtime, as the server does) on sample requests and compare
    /// each decision with the expected one; exit 1 on any difference or failed call.
    Test {
        /// The project folder.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// The samples (JSON Lines; default: the project's samples.jsonl).
        #[arg(long)]
        samples: Option<PathBuf>,
    },
    /// Check the built component as a server with this config would load it: world, `info()`, the
    /// name it serves under, size and limits, and a trial call.
    Check {
        /// The project folder.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        #[command(flatten)]
        config: ConfigArg,
        /// Also measure what a call costs: this many calls one at a time, then as many paced at
        /// 1,000 per second over four threads (p50/p99 of each, and memory).
        #[arg(long)]
        calls: Option<usize>,
    },
    /// Upload a component to a server's plugin registry (`POST /api/admin/plugins`): checked there,
    /// stored as the next version of its name, and loaded by every host of the store. The admin key
    /// is read from GATEHOUSE_API_KEY.
    Publish {
        /// The component file (`.wasm`).
        file: PathBuf,
        /// The server, e.g. `http://127.0.0.1:8080`.
        #[arg(long, env = "GATEHOUSE_URL")]
        url: String,
        /// Store it as the shadow version instead of making it active.
        #[arg(long)]
        shadow: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum DbAction {
    /// Apply the schema migrations this binary carries to the database
    /// `store.url_env` names (hosts also apply them at start); prints the
    /// version before and after.
    Migrate(#[command(flatten)] ConfigArg),
    /// Verify the fleet's audit hash chain in the database (while hosts run);
    /// exit 1 and name the first broken record if it is broken.
    Verify(#[command(flatten)] ConfigArg),
    /// Copy a single host's state from its redb data dir (the host stopped)
    /// into the empty database `store.url_env` names, in one transaction,
    /// verified (rows per table, the audit chain) before it commits.
    Import {
        #[command(flatten)]
        config: ConfigArg,
        /// The stopped host's data dir (holding gatehouse.redb).
        #[arg(long = "from")]
        from: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum PluginsAction {
    /// List the plugins a server with this config would load (kind, name, version, world, size, hash).
    List(#[command(flatten)] ConfigArg),
    /// Check that a .wasm file is a loadable Gatehouse plugin, and describe it.
    Check {
        #[command(flatten)]
        config: ConfigArg,
        /// The component file.
        file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Load and validate the config; exit 1 with the bad key named if it is invalid.
    Check(#[command(flatten)] ConfigArg),
}

#[derive(Debug, Subcommand)]
pub enum KeysAction {
    /// Create an admin key (and its admin user). Prints the key once.
    CreateAdmin {
        #[command(flatten)]
        config: ConfigArg,
        /// A name for the key.
        #[arg(long, default_value = "cli")]
        name: String,
    },
    /// List keys (never their secrets).
    List(#[command(flatten)] ConfigArg),
    /// Revoke a key by id.
    Revoke {
        #[command(flatten)]
        config: ConfigArg,
        /// Key id (`key_…`).
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum AuditAction {
    /// Verify the audit hash chain; exit 1 and name the first broken record if it is broken.
    Verify(#[command(flatten)] ConfigArg),
}

fn cli_actor() -> AuditUser {
    AuditUser { id: "cli".into(), name: "gatehouse CLI".into(), email: String::new() }
}

fn load(c: &ConfigArg) -> anyhow::Result<Config> {
    Ok(Config::load(c.config.as_deref())?)
}

/// The configured store (`[store] backend`), for a one-shot command. On
/// PostgreSQL it connects once: a command reports an unreachable database
/// instead of waiting for it as `serve` does. No receipt signer: these
/// commands write no receipts.
async fn open_store(cfg: &Config) -> anyhow::Result<crate::app::Backend> {
    use crate::app::Backend;
    use crate::config::StoreBackend;
    Ok(match cfg.store.backend {
        StoreBackend::Redb => Backend::Redb(std::sync::Arc::new(RedbStore::open(&cfg.data_dir, true)?)),
        StoreBackend::Postgres => {
            let options = Backend::pg_options(cfg)?;
            Backend::Postgres(std::sync::Arc::new(gatehouse_store::postgres::PgStore::connect(options).await?))
        }
    })
}

/// Run an offline (non-server) command; returns the process exit code.
/// `bundled` are the components built into the binary (`plugins list` shows them).
pub async fn run_offline(cmd: Command, bundled: gatehouse_plugin_host::Bundled) -> anyhow::Result<i32> {
    match cmd {
        Command::Serve(_) => unreachable_serve(),
        Command::Config { action: ConfigAction::Check(c) } => {
            let cfg = load(&c)?;
            println!("config OK");
            println!("  listen:    {}", cfg.listen);
            println!("  data_dir:  {}", cfg.data_dir.display());
            println!("  providers: {}", cfg.providers.keys().cloned().collect::<Vec<_>>().join(", "));
            println!("  indexes:   {}", cfg.indexes.keys().cloned().collect::<Vec<_>>().join(", "));
            println!("  policy:    {}", cfg.policies.default);
            Ok(0)
        }
        Command::Keys { action } => match action {
            KeysAction::CreateAdmin { config, name } => {
                let cfg = load(&config)?;
                let backend = open_store(&cfg).await?;
                let secret = ApiKeySecret::generate();
                let id = crate::bootstrap::create_admin_key(backend.store().as_ref(), &secret, &name, cli_actor()).await?;
                backend.flush().await?;
                println!("created admin key {id}; it is shown only this once:\n{}", secret.expose());
                Ok(0)
            }
            KeysAction::List(c) => {
                let cfg = load(&c)?;
                let backend = open_store(&cfg).await?;
                for k in backend.store().list_keys().await? {
                    println!(
                        "{}\t{}…\tuser={}\tadmin={}\t{}",
                        k.id,
                        k.prefix,
                        k.user_id,
                        k.admin,
                        if k.is_revoked() { "revoked" } else { "active" }
                    );
                }
                Ok(0)
            }
            KeysAction::Revoke { config, id } => {
                let cfg = load(&config)?;
                let backend = open_store(&cfg).await?;
                let audit = gatehouse_store::audit::Audit::new(
                    gatehouse_store::audit::kind::API_KEY_MANAGEMENT,
                    gatehouse_store::audit::category::ACCESS_CONTROL,
                    format!("API key {id} revoked"),
                )
                .user(Some(cli_actor()))
                .meta("operation", "revoke_api_key")
                .meta("targetKeyId", id.clone())
                .build();
                backend.store().revoke_key(&id, audit).await?;
                backend.flush().await?;
                println!("revoked {id}");
                Ok(0)
            }
        },
        Command::Plugins { action } => match action {
            PluginsAction::List(c) => {
                let cfg = load(&c)?;
                let rt = gatehouse_plugin_host::PluginRuntime::start(
                    &cfg.plugins,
                    &cfg.data_dir,
                    bundled,
                    std::sync::Arc::new(gatehouse_plugin_host::LogSink),
                )?;
                println!("{:<22} {:<10} {:<12} {:>9}  {:<16}  source", "name", "kind", "version", "bytes", "sha256");
                for p in rt.list() {
                    let source = match &p.source {
                        gatehouse_plugin_host::Source::Bundled => "bundled".to_owned(),
                        gatehouse_plugin_host::Source::File(f) => f.display().to_string(),
                        gatehouse_plugin_host::Source::Published { version } => format!("published version {version}"),
                    };
                    println!("{:<22} {:<10} {:<12} {:>9}  {:<16}  {source}", p.name, p.kind.as_str(), p.version, p.size, &p.sha256[..16]);
                }
                Ok(0)
            }
            PluginsAction::Check { config, file } => {
                let cfg = load(&config)?;
                match gatehouse_plugin_host::PluginRuntime::inspect_file(&cfg.plugins, &file) {
                    Ok(p) => {
                        println!("{}", serde_json::to_string_pretty(&p)?);
                        Ok(0)
                    }
                    Err(e) => {
                        eprintln!("not loadable: {e:#}");
                        Ok(1)
                    }
                }
            }
        },
        Command::Plugin { action: PluginAction::Publish { file, url, shadow } } => publish(&file, &url, shadow).await,
        // The authoring commands carry the templates and toolchain pins: the binary runs them.
        Command::Plugin { action } => anyhow::bail!("`plugin {action:?}` is run by the gatehouse binary, not the library"),
        Command::Db { action: DbAction::Migrate(c) } => {
            let cfg = load(&c)?;
            if cfg.store.backend != crate::config::StoreBackend::Postgres {
                anyhow::bail!(
                    "`db migrate` works on PostgreSQL: set [store] backend = \"postgres\" in the config (redb needs no migration)"
                );
            }
            let options = crate::app::Backend::pg_options(&cfg)?;
            let done = gatehouse_store::postgres::migrate_database(&options).await?;
            if done.from == done.to {
                println!("database schema at version {}: nothing to do", done.to);
            } else {
                println!("database schema migrated from version {} to {}", done.from, done.to);
            }
            Ok(0)
        }
        Command::Db { action: DbAction::Verify(c) } => {
            let cfg = load(&c)?;
            let options = pg_options(&cfg, "db verify")?;
            let store = gatehouse_store::postgres::PgStore::connect(options).await?;
            let report = store.verify_audit_chain().await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(if report.ok { 0 } else { 1 })
        }
        Command::Db { action: DbAction::Import { config, from } } => {
            let cfg = load(&config)?;
            let options = pg_options(&cfg, "db import")?;
            let report = gatehouse_store::postgres::import::import_redb(&from, &options).await?;
            for (table, rows) in &report.tables {
                println!("{table:<20} {rows}");
            }
            println!(
                "imported and verified: {} audit records, the chain ends at {} in both stores ({} idempotency records expired or in flight left behind)",
                report.audit_records, report.audit_head, report.idempotency_dropped
            );
            Ok(0)
        }
        Command::Audit { action: AuditAction::Verify(c) } => {
            let cfg = load(&c)?;
            let report = open_store(&cfg).await?.store().verify_audit_chain().await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(if report.ok { 0 } else { 1 })
        }
    }
}

/// `gatehouse plugin publish`: upload, then print what the server stored and whether it serves there.
async fn publish(file: &std::path::Path, url: &str, shadow: bool) -> anyhow::Result<i32> {
    let key = std::env::var(API_KEY_ENV)
        .map_err(|_| anyhow::anyhow!("set {API_KEY_ENV} to an admin API key (it is never taken as an argument)"))?;
    let bytes = std::fs::read(file).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
    let endpoint = format!("{}/api/admin/plugins{}", url.trim_end_matches('/'), if shadow { "?state=shadow" } else { "" });
    let response = reqwest::Client::builder()
        .build()?
        .post(&endpoint)
        .bearer_auth(key)
        .header(reqwest::header::CONTENT_TYPE, "application/wasm")
        .body(bytes)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach {endpoint}: {e}"))?;
    let status = response.status();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    if !status.is_success() {
        let message = body["error"]["message"].as_str().unwrap_or("no message");
        eprintln!("not published ({status}): {message}");
        return Ok(1);
    }
    let p = &body["data"]["plugin"];
    println!(
        "published {} version {} ({}, {} bytes, sha256 {}) as {}",
        p["name"].as_str().unwrap_or("?"),
        p["version"],
        p["kind"].as_str().unwrap_or("?"),
        p["size"],
        p["sha256"].as_str().unwrap_or("?"),
        p["state"].as_str().unwrap_or("?"),
    );
    let here = &body["data"]["thisHost"];
    if here["serving"] == true {
        println!("serving on {url} under the name {}", p["name"].as_str().unwrap_or("?"));
    } else if let Some(e) = here["registryError"].as_str() {
        println!("stored, but {url} did not load it: {e}");
    }
    Ok(0)
}

/// The PostgreSQL settings of a `db` command; a config on redb is an error that says what to set.
fn pg_options(cfg: &Config, command: &str) -> anyhow::Result<gatehouse_store::postgres::PgOptions> {
    if cfg.store.backend != crate::config::StoreBackend::Postgres {
        anyhow::bail!("`{command}` works on PostgreSQL: set [store] backend = \"postgres\" in the config (on redb, see `gatehouse audit`)");
    }
    crate::app::Backend::pg_options(cfg)
}

fn unreachable_serve() -> anyhow::Result<i32> {
    anyhow::bail!("`serve` is not an offline command")
}
