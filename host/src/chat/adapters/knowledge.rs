//! Knowledge bases served by retriever plugins.
//!
//! Retrievers are the one plugin kind with warm state (an in-memory index), so
//! unlike the other kinds they are not instantiated per call: each knowledge
//! base has a small pool of long-lived instances, built lazily and kept
//! between calls. Its folder is mounted read-only at `/kb` and watched (a
//! retriever granted a writable cache folder is told to keep its vectors in
//! it, as `vector_cache`); a
//! change builds a fresh instance in the background (a new index) and swaps it
//! in when it is ready, so queries never wait for a re-index and the next
//! query after the swap sees the change. A reloaded plugin or a changed
//! `[indexes.<name>]` entry starts a new pool. An instance that faults (trap,
//! deadline, memory) is dropped, never reused.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use notify::{RecursiveMode, Watcher};

use crate::chat::retrieval::{KnowledgeBases, Passage, RetrievalError};
use crate::config::{Config, DEFAULT_INDEX, IndexConfig};
use gatehouse_plugin_host::PluginRuntime;
use gatehouse_plugin_host::plugin::retriever_calls::{RetrieveRequest, WarmRetriever};
use gatehouse_plugin_host::plugin::{Grants, Kind, Plugin};

/// Where the knowledge base's folder appears inside the retriever.
pub const GUEST_ROOT: &str = "/kb";
/// Most warm instances of one knowledge base (each holds its own index).
const MAX_INSTANCES: usize = 4;
/// Quiet time after a change in a folder before it is re-indexed.
const REINDEX_DEBOUNCE: Duration = Duration::from_millis(150);

/// The example knowledge base, written into the data dir on first start.
static EXAMPLE_KB: include_dir::Dir<'static> = include_dir::include_dir!("$CARGO_MANIFEST_DIR/../examples/knowledge/gatehouse");

/// The knowledge bases of a running server.
pub struct Knowledge {
    runtime: Arc<PluginRuntime>,
    config: Arc<ArcSwap<Config>>,
    pools: Mutex<HashMap<String, Arc<IndexPool>>>,
}

impl Knowledge {
    pub fn new(runtime: Arc<PluginRuntime>, config: Arc<ArcSwap<Config>>) -> Arc<Self> {
        Arc::new(Knowledge { runtime, config, pools: Mutex::new(HashMap::new()) })
    }

    /// Create the default folders of the configured knowledge bases that have
    /// none yet; the default knowledge base gets the bundled example documents.
    pub fn seed_folders(&self) -> anyhow::Result<()> {
        let cfg = self.config.load();
        for (name, ix) in &cfg.indexes {
            if ix.path.is_some() {
                continue;
            }
            let Some(folder) = ix.folder(name, &cfg.data_dir) else { continue };
            if folder.exists() {
                continue;
            }
            std::fs::create_dir_all(&folder).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", folder.display()))?;
            if name == DEFAULT_INDEX {
                EXAMPLE_KB.extract(&folder).map_err(|e| anyhow::anyhow!("cannot write the example knowledge base: {e}"))?;
                tracing::info!(folder = %folder.display(), "wrote the example knowledge base");
            }
        }
        Ok(())
    }

    /// Build every configured knowledge base's first instance now, so the
    /// first query does not wait for indexing. Blocking; failures are logged.
    pub fn prewarm(&self) {
        let names: Vec<String> = self.config.load().indexes.keys().cloned().collect();
        for name in names {
            match self.pool(&name) {
                Ok(pool) => {
                    if let Err(e) = pool.prewarm() {
                        tracing::warn!(index = %name, error = %e, "knowledge base could not be indexed at start");
                    }
                }
                Err(e) => tracing::warn!(index = %name, error = %e, "knowledge base is not available"),
            }
        }
    }

    /// The pool for `index` under the current config and plugin registry.
    fn pool(&self, index: &str) -> Result<Arc<IndexPool>, RetrievalError> {
        let cfg = self.config.load();
        let ix = cfg.indexes.get(index).ok_or_else(|| RetrievalError::Unknown(index.to_owned()))?;
        let plugin = self
            .runtime
            .snapshot()
            .of_kind(&ix.retriever, Kind::Retriever)
            .ok_or_else(|| RetrievalError::NotLoaded(ix.retriever.clone()))?;
        let folder = ix.folder(index, &cfg.data_dir);
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pool) = pools.get(index)
            && pool.serves(ix, &plugin, &folder)
        {
            return Ok(pool.clone());
        }
        let pool = IndexPool::new(index, ix, plugin, folder);
        pools.insert(index.to_owned(), pool.clone());
        Ok(pool)
    }
}

impl KnowledgeBases for Knowledge {
    fn retrieve(&self, index: &str, query: &str, k: u32) -> Result<Vec<Passage>, RetrievalError> {
        self.pool(index)?.query(query, k)
    }
}

/// Warm instances of one knowledge base.
struct IndexPool {
    index: String,
    /// The `[indexes.<name>]` entry it was built from.
    settings: IndexConfig,
    plugin: Arc<Plugin>,
    folder: Option<PathBuf>,
    /// `config-json` of every call: the index's config plus `root`.
    config_json: String,
    /// The plugin's grants when the pool was made: after a config reload
    /// changes them, a new pool (new instances) serves.
    grants: Arc<Grants>,
    state: Mutex<PoolState>,
    freed: Condvar,
    /// Kept alive with the pool; dropping it ends the re-index thread.
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
}

struct PoolState {
    /// Bumped by every re-index; instances of older generations are dropped when returned.
    generation: u64,
    idle: Vec<WarmRetriever>,
    /// Instances of the current generation, idle or in use.
    live: usize,
}

impl IndexPool {
    fn new(index: &str, ix: &IndexConfig, plugin: Arc<Plugin>, folder: Option<PathBuf>) -> Arc<Self> {
        let mut config = ix.config.clone();
        if folder.is_some() {
            config["root"] = serde_json::json!(GUEST_ROOT);
        }
        let grants = plugin.grants();
        // A retriever granted its own writable folder keeps its passage
        // vectors there (one file per knowledge base), unless the index names
        // a folder itself: a restart then recomputes none.
        if grants.cache.is_some() && config.get("vector_cache").is_none() {
            config["vector_cache"] = serde_json::json!(gatehouse_plugin_host::cache_folder::GUEST_PATH);
        }
        let pool = Arc::new(IndexPool {
            index: index.to_owned(),
            settings: ix.clone(),
            grants,
            plugin,
            folder,
            config_json: config.to_string(),
            state: Mutex::new(PoolState { generation: 0, idle: Vec::new(), live: 0 }),
            freed: Condvar::new(),
            watcher: Mutex::new(None),
        });
        if let Some(folder) = &pool.folder {
            match watch(folder, Arc::downgrade(&pool)) {
                Ok(w) => *pool.watcher.lock().unwrap_or_else(|p| p.into_inner()) = Some(w),
                Err(e) => {
                    tracing::warn!(index = %index, folder = %folder.display(), error = %e, "cannot watch the knowledge base folder; changes need a restart")
                }
            }
        }
        pool
    }

    /// Does this pool still match the config entry, the loaded plugin and the folder?
    fn serves(&self, ix: &IndexConfig, plugin: &Plugin, folder: &Option<PathBuf>) -> bool {
        let s = &self.settings;
        self.plugin.sha256 == plugin.sha256
            && Arc::ptr_eq(&self.grants, &plugin.grants())
            && self.folder == *folder
            && s.config == ix.config
            && (s.timeout_ms, s.build_timeout_ms, s.top_k) == (ix.timeout_ms, ix.build_timeout_ms, ix.top_k)
    }

    fn request(&self, query: &str, k: u32) -> RetrieveRequest {
        RetrieveRequest {
            index: self.index.clone(),
            query: query.to_owned(),
            k,
            filters: Vec::new(),
            config_json: self.config_json.clone(),
        }
    }

    /// A fresh instance with its index built (a `k = 0` warm-up call).
    fn build(&self) -> Result<WarmRetriever, RetrievalError> {
        let started = Instant::now();
        let mounts: Vec<(&Path, &str)> = self.folder.iter().map(|f| (f.as_path(), GUEST_ROOT)).collect();
        let mut w = self.plugin.warm_retriever(&mounts).map_err(|e| RetrievalError::Failed(e.to_string()))?;
        match w.retrieve(&self.request("", 0), self.settings.build_timeout_ms) {
            Ok(Ok(_)) => {
                tracing::info!(index = %self.index, plugin = %self.plugin.name, ms = started.elapsed().as_millis() as u64, "knowledge base indexed");
                Ok(w)
            }
            Ok(Err(msg)) => Err(RetrievalError::Failed(format!("retriever {}: {msg}", self.plugin.name))),
            Err(e) => Err(RetrievalError::Failed(format!("indexing failed: {e}"))),
        }
    }

    /// Make sure one instance is built.
    fn prewarm(&self) -> Result<(), RetrievalError> {
        let (w, generation) = self.checkout()?;
        self.checkin(w, generation);
        Ok(())
    }

    /// An idle instance, or a new one if the pool has room; else wait for one.
    fn checkout(&self) -> Result<(WarmRetriever, u64), RetrievalError> {
        let deadline = Instant::now() + Duration::from_millis(self.settings.timeout_ms.max(self.settings.build_timeout_ms));
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(w) = st.idle.pop() {
                return Ok((w, st.generation));
            }
            if st.live < MAX_INSTANCES {
                st.live += 1;
                let generation = st.generation;
                drop(st);
                return match self.build() {
                    Ok(w) => Ok((w, generation)),
                    Err(e) => {
                        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
                        if st.generation == generation {
                            st.live -= 1;
                        }
                        self.freed.notify_one();
                        Err(e)
                    }
                };
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(RetrievalError::Failed("every instance of the retriever is busy".into()));
            }
            st = self.freed.wait_timeout(st, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    fn checkin(&self, w: WarmRetriever, generation: u64) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if generation != st.generation {
            return; // re-indexed meanwhile: this instance's index is stale
        }
        if w.is_poisoned() {
            st.live -= 1;
        } else {
            st.idle.push(w);
        }
        self.freed.notify_one();
    }

    fn query(&self, query: &str, k: u32) -> Result<Vec<Passage>, RetrievalError> {
        let (mut w, generation) = self.checkout()?;
        let out = w.retrieve(&self.request(query, k), self.settings.timeout_ms);
        self.checkin(w, generation);
        match out {
            Ok(Ok(docs)) => Ok(docs
                .into_iter()
                .take(k as usize)
                .filter(|d| d.score.is_finite())
                .map(|d| Passage { source: d.source, text: d.passage, score: d.score })
                .collect()),
            Ok(Err(msg)) => Err(RetrievalError::Failed(format!("retriever {}: {msg}", self.plugin.name))),
            Err(e) => Err(RetrievalError::Failed(e.to_string())),
        }
    }

    /// The folder changed: build a new index and swap it in when ready. The
    /// old instances keep answering meanwhile; a failed build keeps them.
    fn reindex(&self) {
        match self.build() {
            Ok(w) => {
                let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
                st.generation += 1;
                st.idle = vec![w];
                st.live = 1;
                self.freed.notify_all();
            }
            Err(e) => tracing::error!(index = %self.index, error = %e, "re-indexing failed; the previous index keeps serving"),
        }
    }
}

/// Watch `folder` recursively; re-index the pool (while it exists) after changes settle.
fn watch(folder: &Path, pool: Weak<IndexPool>) -> notify::Result<notify::RecommendedWatcher> {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res
            && !ev.kind.is_access()
        {
            let _ = tx.send(());
        }
    })?;
    watcher.watch(folder, RecursiveMode::Recursive)?;
    let spawned = std::thread::Builder::new().name("gatehouse-reindex".into()).spawn(move || {
        // Ends when the watcher (and with it the sender) is dropped with the pool.
        while rx.recv().is_ok() {
            std::thread::sleep(REINDEX_DEBOUNCE);
            while rx.try_recv().is_ok() {}
            let Some(pool) = pool.upgrade() else { return };
            pool.reindex();
        }
    });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the re-index thread");
    }
    Ok(watcher)
}
