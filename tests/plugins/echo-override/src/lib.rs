//! A provider that calls itself `provider-echo`, so dropping it into the
//! watched folder overrides the bundled echo adapter by name, and removing it
//! falls back to the bundled one. Its answer is `override: <last user
//! message>`, so a test can tell the two apart.

use gatehouse_sdk::provider::exports::gatehouse::plugin::provider_api::{
    ChatRequest, Completion, Guest, ProviderError, StreamEvent, StreamOutput, Upstream,
};
use gatehouse_sdk::provider::gatehouse::plugin::types::{HttpRequest, PluginInfo, PluginKind, Role};

struct Override;

impl Guest for Override {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "provider-echo".into(),
            version: "9.9.9-override".into(),
            kind: PluginKind::Provider,
            description: "test override of the bundled echo provider".into(),
        }
    }

    fn build_request(up: Upstream, request: ChatRequest) -> Result<HttpRequest, ProviderError> {
        let last = request.messages.iter().rev().find(|m| m.role == Role::User).map(|m| m.content.clone()).unwrap_or_default();
        Ok(HttpRequest { method: "POST".into(), url: format!("{}/chat", up.base_url), headers: vec![], body: format!("override: {last}") })
    }

    fn parse_response(_up: Upstream, _status: u16, body: String) -> Result<Completion, ProviderError> {
        Ok(Completion { content: body, finish_reason: "stop".into(), usage: None })
    }

    fn parse_stream_event(_up: Upstream, state: String, event: StreamEvent) -> Result<StreamOutput, ProviderError> {
        Ok(StreamOutput { content: event.data, finish_reason: Some("stop".into()), usage: None, done: true, state })
    }
}

gatehouse_sdk::export_provider!(Override);
