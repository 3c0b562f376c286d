//! Calls of the `provider` world.

use super::*;

pub use bindings::provider::exports::gatehouse::plugin::provider_api::{
    ChatRequest, Completion, ErrorClass, ProviderError, StreamEvent, StreamOutput, Upstream, Usage,
};
pub use bindings::provider::gatehouse::plugin::types::{Header, HttpRequest, Message, Role};

impl Plugin {
    pub(super) fn provider<R>(
        &self,
        f: impl AsyncFnOnce(&mut Store<CallState>, &bindings::provider::Provider) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        let Pre::Provider(pre) = &self.pre else {
            return Err(self.wrong_kind(Kind::Provider));
        };
        self.fresh_call(async |s| pre.instantiate_async(s).await, f)
    }

    /// `build-request`: the HTTP request to send upstream (or the adapter's own error).
    pub fn build_request(&self, up: &Upstream, req: &ChatRequest) -> Result<Result<HttpRequest, ProviderError>, PluginError> {
        self.provider(async |s, i| i.gatehouse_plugin_provider_api().call_build_request(s, up, req).await)
    }

    /// `parse-response`: a complete upstream response of any status → completion or classified error.
    pub fn parse_response(&self, up: &Upstream, status: u16, body: &str) -> Result<Result<Completion, ProviderError>, PluginError> {
        self.provider(async |s, i| i.gatehouse_plugin_provider_api().call_parse_response(s, up, status, body).await)
    }

    /// `parse-stream-event`: one SSE event with the state the previous event returned ("" first).
    pub fn parse_stream_event(
        &self,
        up: &Upstream,
        state: &str,
        ev: &StreamEvent,
    ) -> Result<Result<StreamOutput, ProviderError>, PluginError> {
        self.provider(async |s, i| i.gatehouse_plugin_provider_api().call_parse_stream_event(s, up, state, ev).await)
    }
}
