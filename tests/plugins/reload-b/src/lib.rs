//! Reload-test provider, version b: named `provider-reload`, answers through the echo transport with a fixed text.

use gatehouse_sdk::provider::exports::gatehouse::plugin::provider_api::{
    ChatRequest, Completion, Guest, ProviderError, StreamEvent, StreamOutput, Upstream,
};
use gatehouse_sdk::provider::gatehouse::plugin::types::{HttpRequest, PluginInfo, PluginKind};

const ANSWER: &str = "answer from version b";

struct Reload;

impl Guest for Reload {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "provider-reload".into(),
            version: "1.0.0-b".into(),
            kind: PluginKind::Provider,
            description: "hot-reload test provider".into(),
        }
    }

    fn build_request(up: Upstream, request: ChatRequest) -> Result<HttpRequest, ProviderError> {
        let body = format!(
            "{{\"stream\":{},\"answer\":\"{ANSWER}\",\"chunks\":[\"{ANSWER}\"],\"usage\":{{\"prompt_tokens\":1,\"completion_tokens\":4}}}}",
            request.stream
        );
        Ok(HttpRequest { method: "POST".into(), url: format!("{}/chat", up.base_url), headers: vec![], body })
    }

    fn parse_response(_up: Upstream, _status: u16, _body: String) -> Result<Completion, ProviderError> {
        Ok(Completion { content: ANSWER.into(), finish_reason: "stop".into(), usage: None })
    }

    fn parse_stream_event(_up: Upstream, state: String, event: StreamEvent) -> Result<StreamOutput, ProviderError> {
        let done = event.data.contains("\"done\"");
        Ok(StreamOutput {
            content: if done { String::new() } else { ANSWER.into() },
            finish_reason: done.then(|| "stop".into()),
            usage: None,
            done,
            state,
        })
    }
}

gatehouse_sdk::export_provider!(Reload);
