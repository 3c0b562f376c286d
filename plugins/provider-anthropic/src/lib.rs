//! `provider-anthropic`: a sans-IO adapter for Anthropic's Messages API.
//!
//! The host sends the requests this crate describes and hands back the
//! responses and SSE events; this crate only translates. The translation is
//! plain Rust ([`request`], [`response`], [`stream`]) so it is unit-tested
//! natively; the [`Guest`](api::Guest) impl at the bottom is a thin shell.
//!
//! # Upstream
//! `base-url` is the API host, `https://api.anthropic.com` (Anthropic's SDK
//! convention); requests go to `{base-url}/v1/messages`. A base URL that
//! already ends in `/v1` is accepted too. The key goes in `x-api-key`, and
//! every request carries `anthropic-version: 2023-06-01`.
//!
//! # Translation
//! - `system` messages are joined (blank line between) into the top-level
//!   `system` field; `tool` messages are sent as `user` text, since the
//!   normalised request carries no tool-call ids.
//! - `temperature`: Gatehouse accepts 0..2, Anthropic 0..1. Values above 1
//!   are **clamped** to 1 (not scaled), so 0..1 means the same on every
//!   provider.
//! - `max_tokens` is required by Anthropic and always sent; `stop` becomes
//!   `stop_sequences`.
//! - From `extra-json` only fields Anthropic understands the same way are
//!   passed: `top_k`, `metadata`, and `user` as `metadata.user_id`. OpenAI-only
//!   fields (`response_format`, `seed`, `tools` in OpenAI's shape, ...) are
//!   dropped.
//! - `stop_reason` → OpenAI-style `finish_reason`: `end_turn` and
//!   `stop_sequence` → `stop`, `max_tokens` and
//!   `model_context_window_exceeded` → `length`, `tool_use` → `tool_calls`,
//!   `refusal` → `content_filter`, anything else passed through.
//! - Usage: `prompt_tokens` = `input_tokens` + cache creation + cache read
//!   input tokens (all are billed input); `completion_tokens` =
//!   `output_tokens`.
//!
//! # Plugin config (`config-json`, all keys optional)
//! See [`config::AnthropicConfig`].

pub mod config;
pub mod errors;
pub mod request;
pub mod response;
pub mod stream;

use gatehouse_sdk::provider as api;
use gatehouse_sdk::provider::{HttpRequest, PluginInfo};

/// The component's export: delegates to the plain functions of this crate.
pub struct AnthropicProvider;

impl api::Guest for AnthropicProvider {
    fn info() -> PluginInfo {
        api::plugin_info(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"), "Anthropic Messages API (JSON and streaming)")
    }

    fn build_request(up: api::Upstream, request: api::ChatRequest) -> Result<HttpRequest, api::ProviderError> {
        request::build_request(&up, &request)
    }

    fn parse_response(up: api::Upstream, status: u16, body: String) -> Result<api::Completion, api::ProviderError> {
        response::parse_response(&up, status, &body)
    }

    fn parse_stream_event(up: api::Upstream, state: String, event: api::StreamEvent) -> Result<api::StreamOutput, api::ProviderError> {
        stream::parse_stream_event(&up, &state, &event)
    }
}

// Only in the component: natively the crate is an rlib for unit tests, and the
// export names (`gatehouse:plugin/provider-api@0.1.0#...`) are not valid
// symbols for a native linker's version script.
#[cfg(target_arch = "wasm32")]
gatehouse_sdk::export_provider!(AnthropicProvider);

#[cfg(test)]
mod testutil;
