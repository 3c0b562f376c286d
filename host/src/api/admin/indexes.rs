//! Knowledge bases through the admin API: `POST/GET /api/admin/indexes`,
//! `DELETE /api/admin/indexes/{name}` and `POST /api/admin/indexes/{name}/reindex`.
//!
//! Definitions live in the store (`gatehouse_store::knowledge_bases`), so every
//! host of a fleet serves the same ones; each host reads the documents from
//! `<data_dir>/knowledge/<folder>` of its own data dir (the operator puts the
//! same files there on every host, or mounts one shared folder). Entries of the
//! config file stay in the file and win: a stored definition of the same name
//! is refused (409) and, if the file gains the name later, set aside.
//!
//! A definition takes effect by being merged into the running config, which
//! retrieval and key validation already read: [`sync`] runs at start, after
//! every change made here, and every few seconds (so a config reload, which
//! rebuilds the config from the file, and another host's changes are picked up).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{actor_audit, ok};
use crate::api::json::AdminJson;
use crate::app::AppState;
use crate::auth::Admin;
use crate::config::{Config, IndexConfig};
use crate::error::AdminError;
use crate::time::iso;
use gatehouse_plugin_host::plugin::Kind;
use gatehouse_store::audit::{Audit, category, kind};
use gatehouse_store::knowledge_bases::{KnowledgeBaseDef, KnowledgeBaseStore};

/// How often the stored definitions are merged again.
const SYNC_EVERY: std::time::Duration = std::time::Duration::from_secs(3);
/// Written and removed at once to make the folder watcher re-index.
const REINDEX_MARKER: &str = ".gatehouse-reindex";

fn store(app: &AppState) -> Result<&dyn KnowledgeBaseStore, AdminError> {
    app.store.knowledge_bases().ok_or_else(|| AdminError::validation("this store keeps no knowledge bases"))
}

/// `<data_dir>/knowledge/<folder>`.
fn folder_path(cfg: &Config, folder: &str) -> PathBuf {
    cfg.data_dir.join("knowledge").join(folder)
}

fn index_config(cfg: &Config, d: &KnowledgeBaseDef) -> Option<IndexConfig> {
    let v = json!({
        "retriever": d.retriever,
        "description": d.description,
        "path": folder_path(cfg, &d.folder),
        "top_k": d.top_k,
        "config": d.config,
    });
    match serde_json::from_value(v) {
        Ok(ix) => Some(ix),
        Err(e) => {
            tracing::error!(index = %d.name, error = %e, "a stored knowledge base does not make a valid index entry");
            None
        }
    }
}

/// Merge the stored definitions into the running config (see the module doc).
pub async fn sync(app: &AppState) -> Result<(), AdminError> {
    let defs = store(app)?.list_knowledge_bases().await?;
    let current = app.config.load_full();
    let mut m = app.knowledge_bases.lock().unwrap_or_else(|p| p.into_inner());
    if m.written.as_ref().is_none_or(|w| !Arc::ptr_eq(w, &current)) {
        // Loaded from the file at start or by a reload: nothing of ours is in it.
        m.file = current.indexes.keys().cloned().collect();
        m.mine.clear();
    }
    let wanted: BTreeMap<String, KnowledgeBaseDef> =
        defs.into_iter().filter(|d| !m.file.contains(&d.name)).map(|d| (d.name.clone(), d)).collect();
    if wanted == m.mine && m.written.is_some() {
        return Ok(());
    }
    let mut next = Config::clone(&current);
    for name in m.mine.keys() {
        next.indexes.remove(name);
    }
    let mut applied = BTreeMap::new();
    for (name, d) in wanted {
        if let Some(ix) = index_config(&next, &d) {
            next.indexes.insert(name.clone(), ix);
            applied.insert(name, d);
        }
    }
    let next = Arc::new(next);
    let before = app.config.compare_and_swap(&current, next.clone());
    if Arc::ptr_eq(&before, &current) {
        m.mine = applied;
        m.written = Some(next);
    }
    // Otherwise a reload won the race: the next round merges into its config.
    Ok(())
}

/// Merge now and every few seconds until `stop`; started and joined by the
/// server (`server::background`). PostgreSQL has no notification for these
/// writes yet, so another host's change is seen at the next round: within
/// [`SYNC_EVERY`].
pub async fn run(app: AppState, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(SYNC_EVERY);
    loop {
        let round = async {
            tick.tick().await;
            sync(&app).await
        };
        let merged = tokio::select! {
            r = round => r,
            () = crate::shutdown::stopped(&mut stop) => return,
        };
        if let Err(e) = merged {
            tracing::warn!(error = %e.message, "merging the stored knowledge bases failed; retrying");
        }
    }
}

/// Files under `folder` (recursively, dot-files left out), up to a bound.
fn count_documents(folder: &Path) -> Option<u64> {
    const MOST: u64 = 100_000;
    let mut n = 0;
    let mut stack = vec![folder.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).ok()?.flatten() {
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                Ok(t) if t.is_file() => n += 1,
                _ => {}
            }
            if n >= MOST {
                return Some(n);
            }
        }
    }
    Some(n)
}

fn view(name: &str, source: &str, ix: Option<&IndexConfig>, def: Option<&KnowledgeBaseDef>, cfg: &Config, active: bool) -> Value {
    let folder = match (ix, def) {
        (Some(ix), _) => ix.folder(name, &cfg.data_dir),
        (None, Some(d)) => Some(folder_path(cfg, &d.folder)),
        _ => None,
    };
    json!({
        "name": name,
        "source": source,
        "active": active,
        "retriever": ix.map(|i| i.retriever.clone()).or_else(|| def.map(|d| d.retriever.clone())),
        "description": ix.map(|i| i.description.clone()).or_else(|| def.map(|d| d.description.clone())),
        "folder": folder.as_ref().map(|f| f.display().to_string()),
        "documents": folder.as_deref().and_then(count_documents),
        "topK": ix.map(|i| i.top_k).or_else(|| def.map(|d| d.top_k)),
        "createdAt": def.map(|d| iso(d.created_at)),
    })
}

/// `GET /api/admin/indexes`.
#[utoipa::path(
    get, path = "/api/admin/indexes", tag = "admin",
    responses((status = 200, description = "`[{name, source: config|api, active, retriever, description, folder, documents, topK, createdAt}]`: the config file's knowledge bases and the stored ones; a stored one whose name the file also defines is listed inactive",
               body = crate::api::schema::Success<Vec<crate::api::schema::JsonObject>>))
)]
pub async fn list(State(app): State<AppState>, Admin(_): Admin) -> Result<Json<Value>, AdminError> {
    sync(&app).await?;
    let cfg = app.config();
    let defs = store(&app)?.list_knowledge_bases().await?;
    let (file, mine) = {
        let m = app.knowledge_bases.lock().unwrap_or_else(|p| p.into_inner());
        (m.file.clone(), m.mine.keys().cloned().collect::<BTreeSet<_>>())
    };
    let mut out = Vec::new();
    for name in &file {
        out.push(view(name, "config", cfg.indexes.get(name), None, &cfg, cfg.indexes.contains_key(name)));
    }
    for d in &defs {
        let active = mine.contains(&d.name) && cfg.indexes.contains_key(&d.name);
        out.push(view(&d.name, "api", if active { cfg.indexes.get(&d.name) } else { None }, Some(d), &cfg, active));
    }
    Ok(ok(out))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateIndex {
    /// 1 to 64 of `A-Z a-z 0-9 - _ .`; not a name of the config file.
    name: String,
    /// A loaded retriever plugin.
    retriever: String,
    #[serde(default)]
    description: String,
    /// The documents' folder under `<data_dir>/knowledge/` (relative, no `..`); default: the name. It must exist.
    #[serde(default)]
    folder: Option<String>,
    /// Passages put into the model's context, 1 to 20; default 4.
    #[serde(default)]
    top_k: Option<u32>,
    /// Retriever-specific settings (a JSON object).
    #[serde(default)]
    config: Option<Value>,
}

fn check_name(name: &str) -> Result<(), AdminError> {
    let ok =
        (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) && !name.starts_with('.');
    if !ok {
        return Err(AdminError::validation("`name` must be 1 to 64 of A-Z, a-z, 0-9, `-`, `_` and `.`, not starting with `.`"));
    }
    if name == crate::chat::request::ZERO_KNOWLEDGE {
        return Err(AdminError::validation(format!("`{name}` is the built-in name for no retrieval")));
    }
    Ok(())
}

fn check_folder(folder: &str) -> Result<(), AdminError> {
    let p = Path::new(folder);
    if folder.is_empty() || folder.len() > 255 || !p.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(AdminError::validation("`folder` must be a relative path under `<data_dir>/knowledge/`, without `..`"));
    }
    Ok(())
}

/// `POST /api/admin/indexes`.
#[utoipa::path(
    post, path = "/api/admin/indexes", tag = "admin", request_body = CreateIndex,
    responses(
        (status = 201, description = "Created and in use on this host (others merge it within seconds)", body = crate::api::schema::Success<crate::api::schema::JsonObject>),
        (status = 400, description = "Bad body, unknown retriever, missing folder (`VALIDATION_ERROR`)", body = crate::error::NestedError),
        (status = 409, description = "The name is taken by the config file or a stored knowledge base (`CONFLICT`)", body = crate::error::NestedError),
    )
)]
pub async fn create(
    State(app): State<AppState>,
    Admin(ctx): Admin,
    AdminJson(body): AdminJson<CreateIndex>,
) -> Result<(StatusCode, Json<Value>), AdminError> {
    check_name(&body.name)?;
    sync(&app).await?;
    if app.knowledge_bases.lock().unwrap_or_else(|p| p.into_inner()).file.contains(&body.name) {
        return Err(AdminError::conflict(format!("the config file defines `{}`; the config wins: change it there", body.name)));
    }
    let retriever = body.retriever.trim();
    if app.plugins.snapshot().of_kind(retriever, Kind::Retriever).is_none() {
        let known: Vec<String> = app.plugins.list().into_iter().filter(|p| p.kind == Kind::Retriever).map(|p| p.name).collect();
        return Err(AdminError::validation(format!(
            "`retriever`: no retriever plugin `{retriever}` is loaded; loaded: {}",
            if known.is_empty() { "none".to_owned() } else { known.join(", ") }
        )));
    }
    let folder = body.folder.as_deref().map(str::trim).unwrap_or(&body.name).to_owned();
    check_folder(&folder)?;
    let cfg = app.config();
    let path = folder_path(&cfg, &folder);
    if !path.is_dir() {
        return Err(AdminError::validation(format!(
            "`folder`: {} is not a folder on this host; put the documents there (on every host of a fleet) first",
            path.display()
        )));
    }
    let top_k = body.top_k.unwrap_or(4);
    if !(1..=20).contains(&top_k) {
        return Err(AdminError::validation("`topK` must be from 1 to 20"));
    }
    let config = body.config.unwrap_or_else(|| json!({}));
    if !config.is_object() {
        return Err(AdminError::validation("`config` must be a JSON object"));
    }
    let def = KnowledgeBaseDef {
        name: body.name.clone(),
        retriever: retriever.to_owned(),
        description: super::text_field("description", &body.description, 500, false)?,
        folder,
        top_k,
        config,
        created_at: chrono::Utc::now(),
    };
    if index_config(&cfg, &def).is_none() {
        return Err(AdminError::validation("the definition does not make a valid knowledge base"));
    }
    let audit = actor_audit(
        &app,
        &ctx,
        Audit::new(kind::CONFIG_MANAGEMENT, category::SYSTEM_INTEGRITY, format!("Knowledge base {} created", def.name))
            .meta("operation", "create_index")
            .meta("index", def.name.clone())
            .meta("retriever", def.retriever.clone()),
        "POST /api/admin/indexes",
    )
    .await
    .build();
    let def = store(&app)?.create_knowledge_base(def, audit).await?;
    sync(&app).await?;
    let cfg = app.config();
    let active = cfg.indexes.contains_key(&def.name);
    Ok((StatusCode::CREATED, ok(view(&def.name, "api", cfg.indexes.get(&def.name), Some(&def), &cfg, active))))
}

/// `DELETE /api/admin/indexes/{name}`.
#[utoipa::path(
    delete, path = "/api/admin/indexes/{name}", tag = "admin", params(("name" = String, Path, description = "Knowledge base name")),
    responses(
        (status = 200, description = "Deleted (its documents stay in their folder)", body = crate::api::schema::Success<crate::api::schema::JsonObject>),
        (status = 404, description = "No stored knowledge base of that name (`NOT_FOUND`)", body = crate::error::NestedError),
        (status = 409, description = "Defined in the config file (`CONFLICT`)", body = crate::error::NestedError),
    )
)]
pub async fn delete(State(app): State<AppState>, Admin(ctx): Admin, UrlPath(name): UrlPath<String>) -> Result<Json<Value>, AdminError> {
    sync(&app).await?;
    let stored = store(&app)?.list_knowledge_bases().await?.iter().any(|d| d.name == name);
    if !stored && app.knowledge_bases.lock().unwrap_or_else(|p| p.into_inner()).file.contains(&name) {
        return Err(AdminError::conflict(format!("`{name}` is defined in the config file: remove it there")));
    }
    let audit = actor_audit(
        &app,
        &ctx,
        Audit::new(kind::CONFIG_MANAGEMENT, category::SYSTEM_INTEGRITY, format!("Knowledge base {name} deleted"))
            .meta("operation", "delete_index")
            .meta("index", name.clone()),
        "DELETE /api/admin/indexes/{name}",
    )
    .await
    .build();
    let def = store(&app)?.delete_knowledge_base(&name, audit).await?;
    sync(&app).await?;
    Ok(ok(json!({"name": def.name, "deleted": true})))
}

/// `POST /api/admin/indexes/{name}/reindex`.
#[utoipa::path(
    post, path = "/api/admin/indexes/{name}/reindex", tag = "admin", params(("name" = String, Path, description = "Knowledge base name")),
    responses(
        (status = 202, description = "Re-indexing: the folder watcher builds a new index and swaps it in; the old one serves meanwhile", body = crate::api::schema::Success<crate::api::schema::JsonObject>),
        (status = 404, description = "No such knowledge base (`NOT_FOUND`)", body = crate::error::NestedError),
        (status = 409, description = "It reads no folder, or its folder cannot be written (`CONFLICT`)", body = crate::error::NestedError),
    )
)]
pub async fn reindex(
    State(app): State<AppState>,
    Admin(_): Admin,
    UrlPath(name): UrlPath<String>,
) -> Result<(StatusCode, Json<Value>), AdminError> {
    sync(&app).await?;
    let cfg = app.config();
    let ix = cfg.indexes.get(&name).ok_or_else(|| AdminError::not_found(format!("knowledge base `{name}` not found")))?;
    let folder = ix.folder(&name, &cfg.data_dir).ok_or_else(|| AdminError::conflict(format!("`{name}` reads no folder")))?;
    // A change in the folder is what the watcher re-indexes on: make one.
    let marker = folder.join(REINDEX_MARKER);
    std::fs::write(&marker, b"")
        .and_then(|()| std::fs::remove_file(&marker))
        .map_err(|e| AdminError::conflict(format!("cannot touch the folder of `{name}` ({}): {e}", folder.display())))?;
    Ok((StatusCode::ACCEPTED, ok(json!({"name": name, "status": "reindexing", "documents": count_documents(&folder)}))))
}
