//! One SSE event of a Messages API stream → [`StreamOutput`].
//!
//! The event flow is `message_start` (input usage), then per content block
//! `content_block_start`, `content_block_delta`s and `content_block_stop`,
//! then `message_delta` (stop reason, cumulative output usage) and
//! `message_stop`. `ping`s may come anywhere; `error` ends the stream.
//!
//! Input tokens arrive with `message_start` and output tokens with
//! `message_delta`, so the running counts travel in the opaque `state`
//! string (a small JSON object) from one call to the next. Usage is reported
//! with `message_delta` and again with `message_stop`, never earlier: the
//! provisional output count of `message_start` must not be billed if the
//! stream breaks.

use gatehouse_sdk::json::Obj;
use gatehouse_sdk::provider::{ProviderError, StreamEvent, StreamOutput, Upstream, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::errors::{adapter_fault, body_error, error_parts, malformed};
use crate::response::{finish_reason, input_tokens, output_tokens};

/// What one stream carries from event to event.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamState {
    /// Billed input tokens from `message_start` (or a later `message_delta`).
    #[serde(default, rename = "in")]
    pub input_tokens: u32,
    /// Cumulative output tokens.
    #[serde(default, rename = "out")]
    pub output_tokens: u32,
}

impl StreamState {
    /// Decode the state handed back by the host; `""` is the initial state.
    pub fn decode(state: &str) -> Result<Self, ProviderError> {
        if state.is_empty() {
            return Ok(Self::default());
        }
        serde_json::from_str(state).map_err(|e| adapter_fault(format!("provider-anthropic: bad stream state ({e})")))
    }

    /// Encode for the next call.
    pub fn encode(&self) -> String {
        format!("{{\"in\":{},\"out\":{}}}", self.input_tokens, self.output_tokens)
    }

    fn usage(&self) -> Usage {
        Usage { prompt_tokens: self.input_tokens, completion_tokens: self.output_tokens }
    }
}

/// Translate one event.
pub fn parse_stream_event(up: &Upstream, state: &str, event: &StreamEvent) -> Result<StreamOutput, ProviderError> {
    let st = StreamState::decode(state)?;
    let mut out = StreamOutput { content: String::new(), finish_reason: None, usage: None, done: false, state: String::new() };
    let data = event.data.trim();
    if data.is_empty() {
        out.state = st.encode();
        return Ok(out);
    }
    if let Some(text) = text_delta(data) {
        out.content = text;
        out.state = st.encode();
        return Ok(out);
    }
    read_value(up, st, out, &event.event, data)
}

/// A `content_block_delta` event: nearly every event of a stream, one per
/// few tokens.
#[derive(Deserialize)]
struct TypedDelta {
    #[serde(rename = "type")]
    kind: Option<String>,
    delta: Option<Obj<TypedDeltaBody>>,
}

#[derive(Deserialize)]
struct TypedDeltaBody {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
}

/// The text of a `content_block_delta` event, read without building a
/// `serde_json::Value` tree (other fields are skipped, not stored). `None`
/// for any other event or shape: [`read_value`] then decides, so every odd
/// event keeps its exact handling (a test compares the two readings).
fn text_delta(data: &str) -> Option<String> {
    let Obj(t) = serde_json::from_str::<Obj<TypedDelta>>(data).ok()?;
    if t.kind.as_deref() != Some("content_block_delta") {
        return None;
    }
    match t.delta {
        Some(Obj(TypedDeltaBody { kind: Some(k), text })) if k == "text_delta" => Some(text.unwrap_or_default()),
        Some(Obj(TypedDeltaBody { kind: Some(_), .. })) => Some(String::new()),
        _ => None,
    }
}

/// [`parse_stream_event`] of a JSON event through a `serde_json::Value`: every event type, every shape.
fn read_value(up: &Upstream, mut st: StreamState, mut out: StreamOutput, event: &str, data: &str) -> Result<StreamOutput, ProviderError> {
    let v: Value = serde_json::from_str(data).map_err(|e| malformed(format!("stream event is not JSON ({e})")))?;
    // The JSON `type` is authoritative; the SSE event name is the fallback.
    let kind = v.get("type").and_then(Value::as_str).unwrap_or(event);
    match kind {
        "message_start" => {
            if let Some(u) = v.get("message").and_then(|m| m.get("usage")) {
                st.input_tokens = input_tokens(u).unwrap_or(st.input_tokens);
                st.output_tokens = output_tokens(u).unwrap_or(st.output_tokens);
            }
        }
        "content_block_start" => {
            let block = v.get("content_block");
            if block.and_then(|b| b.get("type")).and_then(Value::as_str) == Some("text") {
                out.content = block.and_then(|b| b.get("text")).and_then(Value::as_str).unwrap_or("").to_string();
            }
        }
        "content_block_delta" => {
            let delta = v.get("delta");
            if delta.and_then(|d| d.get("type")).and_then(Value::as_str) == Some("text_delta") {
                out.content = delta.and_then(|d| d.get("text")).and_then(Value::as_str).unwrap_or("").to_string();
            }
        }
        "message_delta" => {
            if let Some(reason) = v.get("delta").and_then(|d| d.get("stop_reason")).and_then(Value::as_str) {
                out.finish_reason = Some(finish_reason(reason));
            }
            if let Some(u) = v.get("usage") {
                st.input_tokens = input_tokens(u).unwrap_or(st.input_tokens);
                st.output_tokens = output_tokens(u).unwrap_or(st.output_tokens);
            }
            out.usage = Some(st.usage());
        }
        "message_stop" => {
            out.usage = Some(st.usage());
            out.done = true;
        }
        "error" => {
            let (kind, message) = error_parts(&v).unwrap_or_default();
            return Err(body_error(&kind, &message, up.api_key.as_deref()));
        }
        // `content_block_stop`, `ping`, and event types added later by Anthropic.
        _ => {}
    }
    out.state = st.encode();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{class_name, sse_events, upstream};

    struct Run {
        text: String,
        finish: Option<String>,
        usage: Option<(u32, u32)>,
        done: bool,
        error: Option<ProviderError>,
        usage_events: usize,
    }

    fn run(transcript: &str) -> Run {
        let up = upstream(None, "");
        let mut r = Run { text: String::new(), finish: None, usage: None, done: false, error: None, usage_events: 0 };
        let mut state = String::new();
        for ev in sse_events(transcript) {
            assert!(!r.done, "event after done");
            match parse_stream_event(&up, &state, &ev) {
                Ok(o) => {
                    r.text.push_str(&o.content);
                    r.finish = o.finish_reason.or(r.finish);
                    if let Some(u) = o.usage {
                        r.usage = Some((u.prompt_tokens, u.completion_tokens));
                        r.usage_events += 1;
                    }
                    r.done = o.done;
                    state = o.state;
                }
                Err(e) => {
                    r.error = Some(e);
                    break;
                }
            }
        }
        r
    }

    /// The typed reading of `content_block_delta` gives what the `Value` reading gives.
    #[test]
    fn typed_and_value_readings_agree() {
        let mut data: Vec<String> = [
            include_str!("../fixtures/stream.txt"),
            include_str!("../fixtures/stream_tool_use.txt"),
            include_str!("../fixtures/stream_overloaded.txt"),
        ]
        .iter()
        .flat_map(|t| sse_events(t))
        .map(|e| e.data)
        .collect();
        data.extend(
            [
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\n\u00e9"}}"#,
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}"#,
                r#"{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"hm"}}"#,
                r#"{"type":"content_block_delta","delta":{"type":"text_delta"}}"#,
                r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":5}}"#,
                r#"{"type":"content_block_delta","delta":{"text":"no type"}}"#,
                r#"{"type":"content_block_delta"}"#,
                r#"{"type":"content_block_delta","delta":null}"#,
                r#"{"type":"content_block_delta","delta":["text_delta","positional"]}"#,
                r#"["content_block_delta",["text_delta","x"]]"#,
            ]
            .map(String::from),
        );
        let up = upstream(None, "");
        let blank = || StreamOutput { content: String::new(), finish_reason: None, usage: None, done: false, state: String::new() };
        let mut typed = 0;
        for d in &data {
            let Some(text) = text_delta(d) else { continue };
            typed += 1;
            let slow = read_value(&up, StreamState::default(), blank(), "", d).unwrap_or_else(|e| panic!("{d}: {}", e.message));
            assert_eq!(text, slow.content, "{d}");
            assert!(slow.finish_reason.is_none() && slow.usage.is_none() && !slow.done, "{d}");
        }
        assert!(typed >= 8, "{typed}");
    }

    #[test]
    fn full_stream() {
        let r = run(include_str!("../fixtures/stream.txt"));
        assert!(r.error.is_none());
        assert_eq!(r.text, "Hello! How can I help you today?");
        assert_eq!(r.finish.as_deref(), Some("stop"));
        assert_eq!(r.usage, Some((25, 15)));
        assert_eq!(r.usage_events, 2, "message_delta and message_stop");
        assert!(r.done);
    }

    #[test]
    fn tool_use_and_thinking_deltas_are_not_text() {
        let r = run(include_str!("../fixtures/stream_tool_use.txt"));
        assert!(r.error.is_none());
        assert_eq!(r.text, "Okay, let's check the weather.");
        assert_eq!(r.finish.as_deref(), Some("tool_calls"));
        assert_eq!(r.usage, Some((472 + 10, 89)));
        assert!(r.done);
    }

    #[test]
    fn overloaded_mid_stream_is_a_server_error() {
        let r = run(include_str!("../fixtures/stream_overloaded.txt"));
        assert_eq!(r.text, "Hel");
        assert!(!r.done);
        assert_eq!(r.usage, None, "no usage before message_delta");
        let e = r.error.expect("error");
        assert_eq!(class_name(e.class), "server-error");
        assert_eq!(e.message, "upstream overloaded_error: Overloaded");
    }

    #[test]
    fn rate_limit_error_event() {
        let ev = StreamEvent {
            event: "error".into(),
            data: r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#.into(),
        };
        let e = parse_stream_event(&upstream(None, ""), "", &ev).expect_err("error");
        assert_eq!(class_name(e.class), "rate-limit");
    }

    #[test]
    fn state_round_trip_and_bad_input() {
        let s = StreamState { input_tokens: 3, output_tokens: 9 };
        assert_eq!(StreamState::decode(&s.encode()).expect("decode"), s);
        let ping = StreamEvent { event: "ping".into(), data: r#"{"type": "ping"}"#.into() };
        let o = parse_stream_event(&upstream(None, ""), &s.encode(), &ping).expect("ping");
        assert_eq!(o.state, s.encode());
        assert!(o.content.is_empty() && o.usage.is_none() && !o.done);
        assert!(parse_stream_event(&upstream(None, ""), "garbage", &ping).is_err());
        let broken = StreamEvent { event: "content_block_delta".into(), data: "{\"type\":\"content_block_del".into() };
        let e = parse_stream_event(&upstream(None, ""), "", &broken).expect_err("broken");
        assert_eq!(class_name(e.class), "server-error");
    }

    #[test]
    fn unknown_events_are_ignored() {
        let ev = StreamEvent { event: "future_event".into(), data: r#"{"type":"future_event","x":1}"#.into() };
        let o = parse_stream_event(&upstream(None, ""), "", &ev).expect("ignored");
        assert!(o.content.is_empty() && !o.done);
    }
}
