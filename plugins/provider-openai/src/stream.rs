//! One SSE event of an OpenAI stream → [`StreamOutput`].
//!
//! OpenAI sends `data: {chat.completion.chunk}` events without `event:`
//! names and ends with `data: [DONE]`. With `stream_options.include_usage`
//! the chunk before `[DONE]` has empty `choices` and the usage of the whole
//! request. An error after the stream started arrives as `data: {"error":
//! {...}}`. This adapter keeps no state between events.

use gatehouse_sdk::provider::{ProviderError, StreamEvent, StreamOutput, Upstream};
use serde_json::Value;

use crate::errors::{error_object, malformed, object_error};
use crate::response::{Typed, first_choice, usage_of};

/// Translate one event; `state` is handed back unchanged.
pub fn parse_stream_event(up: &Upstream, state: String, event: &StreamEvent) -> Result<StreamOutput, ProviderError> {
    let mut out = StreamOutput { content: String::new(), finish_reason: None, usage: None, done: false, state };
    let data = event.data.trim();
    if data == "[DONE]" {
        out.done = true;
        return Ok(out);
    }
    if data.is_empty() {
        return Ok(out);
    }
    if event.event != "error"
        && let Some(t) = Typed::read(data)
    {
        (out.content, out.finish_reason, out.usage) = t.chunk();
        return Ok(out);
    }
    read_value(up, out, &event.event, data)
}

/// [`parse_stream_event`] of a JSON event through a `serde_json::Value`: every shape, every error.
fn read_value(up: &Upstream, mut out: StreamOutput, event: &str, data: &str) -> Result<StreamOutput, ProviderError> {
    let v: Value = serde_json::from_str(data).map_err(|e| malformed(format!("stream event is not JSON ({e})")))?;
    if let Some(err) = error_object(&v) {
        return Err(object_error(&err, up.api_key.as_deref()));
    }
    if event == "error" {
        return Err(object_error(&v, up.api_key.as_deref()));
    }
    if let Some(choice) = first_choice(&v) {
        if let Some(text) = choice.get("delta").and_then(|d| d.get("content")).and_then(Value::as_str) {
            out.content = text.to_string();
        }
        out.finish_reason = choice.get("finish_reason").and_then(Value::as_str).map(str::to_string);
    } else if v.get("choices").is_none() {
        return Err(malformed("stream chunk has no `choices`"));
    }
    out.usage = usage_of(&v);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{class_name, sse_events, upstream};

    /// What a whole transcript added up to.
    struct Run {
        text: String,
        finish: Option<String>,
        usage: Option<(u32, u32)>,
        done: bool,
        error: Option<ProviderError>,
    }

    fn run(transcript: &str) -> Run {
        let up = upstream(None, "");
        let mut r = Run { text: String::new(), finish: None, usage: None, done: false, error: None };
        let mut state = String::new();
        for ev in sse_events(transcript) {
            assert!(!r.done, "event after done");
            match parse_stream_event(&up, state.clone(), &ev) {
                Ok(o) => {
                    r.text.push_str(&o.content);
                    r.finish = o.finish_reason.or(r.finish);
                    r.usage = o.usage.map(|u| (u.prompt_tokens, u.completion_tokens)).or(r.usage);
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

    /// The typed reading gives what the `Value` reading gives, wherever it answers at all.
    #[test]
    fn typed_and_value_readings_agree() {
        let mut data: Vec<String> = [include_str!("../fixtures/stream_openai.txt"), include_str!("../fixtures/stream_groq.txt")]
            .iter()
            .flat_map(|t| sse_events(t))
            .map(|e| e.data)
            .filter(|d| d != "[DONE]")
            .collect();
        data.extend(
            [
                r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":6,"total_tokens":11}}"#,
                r#"{"choices":[{"delta":{"content":"a\nb"}}],"x_groq":{"usage":{"prompt_tokens":1}}}"#,
                r#"{"choices":[{"delta":{"content":7}}]}"#,
                r#"{"choices":null}"#,
                r#"{"id":"x"}"#,
                r#"{"choices":[{"delta":["x"]}]}"#,
                r#"{"choices":[{"delta":{"content":"x"}}],"usage":[3,4]}"#,
                r#"{"error":{"message":"overloaded","type":"server_error"}}"#,
            ]
            .map(String::from),
        );
        use gatehouse_sdk::provider::Usage;
        let up = upstream(None, "");
        let blank = || StreamOutput { content: String::new(), finish_reason: None, usage: None, done: false, state: String::new() };
        let mut typed = 0;
        for d in &data {
            let slow = read_value(&up, blank(), "", d);
            let Some(t) = Typed::read(d) else { continue };
            typed += 1;
            let slow = slow.unwrap_or_else(|e| panic!("{d}: typed Ok, value Err {}", e.message));
            let (content, finish, usage) = t.chunk();
            assert_eq!(content, slow.content, "{d}");
            assert_eq!(finish, slow.finish_reason, "{d}");
            let pair = |u: Option<Usage>| u.map(|u| (u.prompt_tokens, u.completion_tokens));
            assert_eq!(pair(usage), pair(slow.usage), "{d}");
        }
        assert!(typed >= data.len() - 6, "{typed} of {}", data.len());
    }

    #[test]
    fn openai_stream_with_usage() {
        let r = run(include_str!("../fixtures/stream_openai.txt"));
        assert!(r.error.is_none());
        assert_eq!(r.text, "Hello! How can I help?");
        assert_eq!(r.finish.as_deref(), Some("stop"));
        assert_eq!(r.usage, Some((19, 7)));
        assert!(r.done);
    }

    #[test]
    fn role_only_first_chunk_has_no_content() {
        let ev = &sse_events(include_str!("../fixtures/stream_openai.txt"))[0];
        let o = parse_stream_event(&upstream(None, ""), String::new(), ev).expect("ok");
        assert_eq!(o.content, "");
        assert!(o.finish_reason.is_none() && o.usage.is_none() && !o.done);
    }

    #[test]
    fn groq_usage_in_x_groq() {
        let r = run(include_str!("../fixtures/stream_groq.txt"));
        assert!(r.error.is_none());
        assert_eq!(r.text, "Hi!");
        assert_eq!(r.finish.as_deref(), Some("stop"));
        assert_eq!(r.usage, Some((12, 3)));
        assert!(r.done);
    }

    #[test]
    fn error_inside_stream() {
        let r = run(include_str!("../fixtures/stream_error.txt"));
        assert_eq!(r.text, "Partial");
        assert!(!r.done);
        let e = r.error.expect("error");
        assert_eq!(class_name(e.class), "server-error");
        assert!(e.message.contains("The server had an error"), "{}", e.message);
    }

    #[test]
    fn broken_chunk_is_malformed() {
        let ev = StreamEvent { event: String::new(), data: "{\"choices\":[{\"delta\":".to_string() };
        let e = parse_stream_event(&upstream(None, ""), String::new(), &ev).expect_err("broken");
        assert_eq!(class_name(e.class), "server-error");
        let ev = StreamEvent { event: String::new(), data: "{\"id\":\"x\"}".to_string() };
        assert!(parse_stream_event(&upstream(None, ""), String::new(), &ev).is_err());
    }

    #[test]
    fn empty_data_is_ignored_and_state_is_kept() {
        let ev = StreamEvent { event: String::new(), data: String::new() };
        let o = parse_stream_event(&upstream(None, ""), "s".to_string(), &ev).expect("ok");
        assert_eq!(o.state, "s");
        assert!(!o.done && o.content.is_empty());
    }
}
