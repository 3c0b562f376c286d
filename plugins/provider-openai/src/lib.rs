//! `provider-openai`: a sans-IO adapter for the OpenAI Chat Completions API
//! and every server that speaks it (vLLM, Ollama, llama.cpp, Groq, Together,
//! ...).
//!
//! The host sends the requests this crate describes and hands back the
//! responses and SSE events; this crate only translates. The translation is
//! plain Rust ([`request`], [`response`], [`stream`]) so it is unit-tested
//! natively; the [`Guest`](api::Guest) impl at the bottom is a thin shell.
//!
//! # Upstream
//! `base-url` is the API root including the version, e.g.
//! `https://api.openai.com/v1` or `http://localhost:11434/v1`; requests go to
//! `{base-url}/chat/completions`. An API key, when configured, is sent as
//! `Authorization: Bearer <key>`.
//!
//! # Plugin config (`config-json`, all keys optional)
//! See [`config::OpenAiConfig`].

pub mod config;
pub mod errors;
pub mod request;
pub mod response;
pub mod stream;

use gatehouse_sdk::provider as api;
use gatehouse_sdk::provider::{HttpRequest, PluginInfo};

/// The component's export: delegates to the plain functions of this crate.
pub struct OpenAiProvider;

impl api::Guest for OpenAiProvider {
    fn info() -> PluginInfo {
        api::plugin_info(
            env!("CARGO_PKG_NAME"),
            env!("CARGO_PKG_VERSION"),
            "OpenAI Chat Completions and OpenAI-compatible servers (vLLM, Ollama, llama.cpp, Groq, Together)",
        )
    }

    fn build_request(up: api::Upstream, request: api::ChatRequest) -> Result<HttpRequest, api::ProviderError> {
        request::build_request(&up, &request)
    }

    fn parse_response(up: api::Upstream, status: u16, body: String) -> Result<api::Completion, api::ProviderError> {
        response::parse_response(&up, status, &body)
    }

    fn parse_stream_event(up: api::Upstream, state: String, event: api::StreamEvent) -> Result<api::StreamOutput, api::ProviderError> {
        stream::parse_stream_event(&up, state, &event)
    }
}

// Only in the component: natively the crate is an rlib for unit tests, and the
// export names (`gatehouse:plugin/provider-api@0.1.0#...`) are not valid
// symbols for a native linker's version script.
#[cfg(target_arch = "wasm32")]
gatehouse_sdk::export_provider!(OpenAiProvider);

#[cfg(test)]
mod testutil;
