//! Calls of the `retriever` world.

use super::*;

pub use bindings::retriever::exports::gatehouse::plugin::retriever_api::{Document, RetrieveRequest};

impl Plugin {
    /// `retrieve`: up to `k` passages, best first (or the retriever's own error).
    pub fn retrieve(&self, req: &RetrieveRequest) -> Result<Result<Vec<Document>, String>, PluginError> {
        let Pre::Retriever(pre) = &self.pre else {
            return Err(self.wrong_kind(Kind::Retriever));
        };
        self.fresh_call(
            async |s| pre.instantiate_async(s).await,
            async |s, i| i.gatehouse_plugin_retriever_api().call_retrieve(s, req).await,
        )
    }

    /// A long-lived instance of this retriever with `mounts` (host folder,
    /// guest path) mounted read-only: its globals (an in-memory index) live
    /// as long as it does. Instantiating runs no guest code beyond start-up.
    pub fn warm_retriever(self: &Arc<Self>, mounts: &[(&Path, &str)]) -> Result<WarmRetriever, PluginError> {
        let Pre::Retriever(pre) = &self.pre else {
            return Err(self.wrong_kind(Kind::Retriever));
        };
        let mut store = self.store_with(mounts)?;
        let started = Instant::now();
        let r = drive(pre.instantiate_async(&mut store));
        let instance = self.finish(&store, started, r)?;
        Ok(WarmRetriever { plugin: self.clone(), store, instance, poisoned: false })
    }
}

/// A retriever instance kept between calls (see [`Plugin::warm_retriever`]).
/// After a fault it is poisoned: its memory may be half-updated, so the
/// owner must drop it rather than reuse it.
pub struct WarmRetriever {
    plugin: Arc<Plugin>,
    store: Store<CallState>,
    instance: bindings::retriever::Retriever,
    poisoned: bool,
}

impl WarmRetriever {
    /// The plugin this instance runs.
    pub fn plugin(&self) -> &Arc<Plugin> {
        &self.plugin
    }

    /// Did a call fail with a trap, deadline or memory fault?
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// `retrieve` with a CPU deadline of `deadline_ms` for this call.
    pub fn retrieve(&mut self, req: &RetrieveRequest, deadline_ms: u64) -> Result<Result<Vec<Document>, String>, PluginError> {
        if self.poisoned {
            return Err(PluginError::Failed {
                plugin: self.plugin.name.clone(),
                detail: "instance is poisoned by an earlier fault".into(),
            });
        }
        let ticks = deadline_ms.div_ceil(self.plugin.grants.load().tick_ms.max(1)) + 1;
        let WarmRetriever { plugin, store, instance, poisoned } = self;
        store.data_mut().begin_call();
        set_deadline(store, ticks);
        let started = Instant::now();
        let r = drive(instance.gatehouse_plugin_retriever_api().call_retrieve(&mut *store, req));
        let out = plugin.finish(store, started, r).map_err(|e| match e {
            PluginError::Deadline { plugin, .. } => PluginError::Deadline { plugin, ms: deadline_ms },
            other => other,
        });
        *poisoned = out.is_err();
        out
    }
}
