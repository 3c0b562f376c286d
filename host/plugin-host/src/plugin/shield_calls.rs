//! Calls of the `shield` world.

use super::*;

pub use bindings::shield::exports::gatehouse::plugin::shield_api::{Action, Canary, InspectRequest, Redaction, Stage, Strictness, Verdict};

/// The canary made after an inspection, or why not (the inspection's verdicts stand either way).
pub type CanaryOutcome = Result<Option<Canary>, PluginError>;

impl Plugin {
    fn shield<R>(
        &self,
        f: impl AsyncFnOnce(&mut Store<CallState>, &bindings::shield::Shield) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        let Pre::Shield(pre) = &self.pre else {
            return Err(self.wrong_kind(Kind::Shield));
        };
        self.fresh_call(async |s| pre.instantiate_async(s).await, f)
    }

    /// `inspect`: one verdict per text, in order.
    pub fn inspect(&self, req: &InspectRequest) -> Result<Vec<Verdict>, PluginError> {
        self.shield(async |s, i| i.gatehouse_plugin_shield_api().call_inspect(s, req).await)
    }

    /// `make-canary`: a canary token and its system instruction, from a host-chosen seed.
    pub fn make_canary(&self, seed: &str) -> Result<Option<Canary>, PluginError> {
        self.shield(async |s, i| i.gatehouse_plugin_shield_api().call_make_canary(s, seed).await)
    }

    /// `inspect`, then `make-canary(seed)` on the same instance: one
    /// instantiation for the two calls a request's input makes (DESIGN: a
    /// fresh store per request). A failed `make-canary` does not undo the
    /// verdicts; it is reported on its own (the instance is dropped either way).
    /// The two calls share the one CPU deadline of the store.
    pub fn inspect_then_canary(&self, req: &InspectRequest, seed: &str) -> Result<(Vec<Verdict>, CanaryOutcome), PluginError> {
        let (verdicts, canary) = self.shield(async |s, i| {
            let api = i.gatehouse_plugin_shield_api();
            let verdicts = api.call_inspect(&mut *s, req).await?;
            let canary = api.call_make_canary(&mut *s, seed).await.map_err(|e| self.classify(s, e));
            Ok((verdicts, canary))
        })?;
        if let Err(e) = &canary {
            self.record_fault(e);
        }
        Ok((verdicts, canary))
    }
}
