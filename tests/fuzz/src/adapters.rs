//! Fuzz entry point for the provider adapters' native APIs
//! (`plugins/provider-openai`, `plugins/provider-anthropic`): the response
//! parser and the stream-event parser, fed the way the host feeds them.
//!
//! Shared by the `provider_adapters` fuzz target and the corpus replay test
//! (`tests/tests/fuzz_corpora.rs`, through `#[path]`), so both run exactly
//! this code.
//!
//! Input layout: byte 0 picks the adapter (bit 0: OpenAI / Anthropic) and
//! the mode (bit 1: complete response / stream). A response takes its HTTP
//! status from bytes 1–2 (big-endian, modulo 1000) and its body from the
//! rest; a stream is the rest, cut into events by the host's SSE decoder.

use gatehouse::chat::sse::SseDecoder;
use gatehouse_sdk::provider::exports::gatehouse::plugin::provider_api::{ProviderError, StreamEvent, StreamOutput, Upstream};

/// The configured upstream key: no error message may ever carry it.
const API_KEY: &str = "sk-fuzz-0123456789abcdefKEY";

/// Most stream events handed to an adapter per input (the host would have
/// more; the parsers keep no state beyond `state`).
const MAX_EVENTS: usize = 512;

/// Run one input through an adapter; panics when a property is broken.
pub fn provider_adapters(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let anthropic = mode & 1 == 1;
    let up = Upstream {
        base_url: if anthropic { "https://api.anthropic.com" } else { "https://api.openai.com/v1" }.to_string(),
        api_key: Some(API_KEY.to_string()),
        config_json: String::new(),
    };
    if mode & 2 == 0 {
        response(anthropic, &up, rest);
    } else {
        stream(anthropic, &up, rest);
    }
}

fn response(anthropic: bool, up: &Upstream, rest: &[u8]) {
    let [hi, lo, body @ ..] = rest else { return };
    let status = u16::from_be_bytes([*hi, *lo]) % 1000;
    // The host hands over the body as a string (a non-UTF-8 body fails before).
    let body = String::from_utf8_lossy(body);
    let result = if anthropic {
        provider_anthropic::response::parse_response(up, status, &body)
    } else {
        provider_openai::response::parse_response(up, status, &body)
    };
    match result {
        Ok(_) => assert!((200..300).contains(&status), "a {status} answer was taken as a completion"),
        Err(e) => check_error(&e),
    }
}

fn stream(anthropic: bool, up: &Upstream, rest: &[u8]) {
    let mut decoder = SseDecoder::new();
    let Ok(mut events) = decoder.push(rest) else { return };
    let Ok(tail) = decoder.finish() else { return };
    events.extend(tail);
    let mut state = String::new();
    for ev in events.into_iter().take(MAX_EVENTS) {
        let event = StreamEvent { event: ev.event, data: ev.data };
        let result: Result<StreamOutput, ProviderError> = if anthropic {
            provider_anthropic::stream::parse_stream_event(up, &state, &event)
        } else {
            provider_openai::stream::parse_stream_event(up, state.clone(), &event)
        };
        match result {
            Ok(out) => {
                if anthropic {
                    let decoded = provider_anthropic::stream::StreamState::decode(&out.state);
                    assert!(decoded.is_ok(), "the adapter cannot read back its own state {:?}", out.state);
                } else {
                    assert_eq!(out.state, state, "the OpenAI adapter keeps no state");
                }
                if out.done {
                    return;
                }
                state = out.state;
            }
            Err(e) => {
                check_error(&e);
                return;
            }
        }
    }
}

fn check_error(e: &ProviderError) {
    assert!(!e.message.contains(API_KEY), "the API key leaked into {:?}", e.message);
    assert!(!e.message.is_empty());
}
