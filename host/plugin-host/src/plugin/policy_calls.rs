//! Calls of the `policy` world.

use super::*;

pub use bindings::policy::exports::gatehouse::plugin::policy_api::{DataAction, PolicyContext, PolicyDecision};
pub use bindings::policy::gatehouse::plugin::types::{Message, Role};

impl Plugin {
    /// `evaluate`: allow or deny, and the constraints for the rest of the pipeline.
    pub fn evaluate(&self, ctx: &PolicyContext) -> Result<PolicyDecision, PluginError> {
        let Pre::Policy(pre) = &self.pre else {
            return Err(self.wrong_kind(Kind::Policy));
        };
        self.fresh_call(async |s| pre.instantiate_async(s).await, async |s, i| i.gatehouse_plugin_policy_api().call_evaluate(s, ctx).await)
    }
}
