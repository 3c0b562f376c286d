//! The in-process transport of the offline echo provider (`echo://` URLs).
//!
//! `provider-echo` puts its whole answer in the request body
//! (`{"stream", "answer", "usage"}`); this plays it back the way an upstream
//! would, without network: the body itself as a JSON response for a plain
//! request, or server-sent events for a stream — one `data: {"delta": …}`
//! per word of the answer, then `data: {"done": true, "usage": …}` — each
//! event its own chunk of the body, so the echo provider goes through the
//! same SSE decoding and streaming code as real providers. A body may also
//! give the deltas itself (`"chunks": [...]`), as the test providers do.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::chat::transport::UpstreamResponse;
use crate::chat::types::HttpRequestDesc;

/// What the echo upstream answers to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EchoReply {
    /// A complete response body (non-streaming request, or an error).
    Whole { status: u16, body: String },
    /// A 200 event stream: each item is one framed SSE event (`data: …\n\n`).
    Events(Vec<String>),
}

/// The echo upstream as a pure function of the request description.
pub fn reply(req: &HttpRequestDesc) -> EchoReply {
    let Ok(v) = serde_json::from_str::<Value>(&req.body) else {
        return EchoReply::Whole { status: 400, body: json!({"error": "echo transport: the request body is not JSON"}).to_string() };
    };
    if !v["stream"].as_bool().unwrap_or(false) {
        return EchoReply::Whole { status: 200, body: req.body.clone() };
    }
    let frame = |data: Value| format!("data: {data}\n\n");
    let mut events: Vec<String> = match v["chunks"].as_array() {
        Some(chunks) => chunks.iter().map(|c| frame(json!({ "delta": c }))).collect(),
        None => v["answer"].as_str().unwrap_or_default().split_inclusive(' ').map(|w| frame(json!({ "delta": w }))).collect(),
    };
    events.push(frame(json!({"done": true, "usage": v["usage"]})));
    EchoReply::Events(events)
}

/// [`reply`] as an upstream response for the chat transport.
pub fn respond(req: &HttpRequestDesc) -> UpstreamResponse {
    match reply(req) {
        EchoReply::Whole { status, body } => {
            UpstreamResponse { status, body: Box::pin(futures::stream::once(async move { Ok(Bytes::from(body)) })) }
        }
        EchoReply::Events(events) => {
            UpstreamResponse { status: 200, body: Box::pin(futures::stream::iter(events.into_iter().map(|e| Ok(Bytes::from(e))))) }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::chat::sse::SseDecoder;

    fn desc(body: Value) -> HttpRequestDesc {
        HttpRequestDesc { method: "POST".into(), url: "echo://local/chat".into(), headers: vec![], body: body.to_string() }
    }

    #[test]
    fn a_plain_request_gets_its_body_back() {
        let body = json!({"stream": false, "answer": "Echo: hi", "usage": {"prompt_tokens": 1, "completion_tokens": 2}});
        assert_eq!(reply(&desc(body.clone())), EchoReply::Whole { status: 200, body: body.to_string() });
    }

    #[test]
    fn a_stream_is_one_event_per_word_then_done() {
        let body = json!({"stream": true, "answer": "Echo: hello there", "usage": {"prompt_tokens": 2, "completion_tokens": 3}});
        let EchoReply::Events(events) = reply(&desc(body)) else {
            panic!("a stream");
        };
        assert_eq!(events.len(), 4);
        let mut decoder = SseDecoder::new();
        let decoded: Vec<Value> = events
            .iter()
            .flat_map(|e| decoder.push(e.as_bytes()).expect("valid SSE"))
            .map(|e| serde_json::from_str(&e.data).expect("JSON data"))
            .collect();
        let text: String = decoded.iter().filter_map(|d| d["delta"].as_str()).collect();
        assert_eq!(text, "Echo: hello there");
        assert_eq!(decoded[3]["done"], true);
        assert_eq!(decoded[3]["usage"]["completion_tokens"], 3);
    }

    #[test]
    fn given_chunks_are_played_as_they_are() {
        let body = json!({"stream": true, "chunks": ["ab", "cd"], "usage": null});
        let EchoReply::Events(events) = reply(&desc(body)) else {
            panic!("a stream");
        };
        assert_eq!(
            events,
            vec!["data: {\"delta\":\"ab\"}\n\n", "data: {\"delta\":\"cd\"}\n\n", "data: {\"done\":true,\"usage\":null}\n\n"]
        );
    }

    #[test]
    fn a_body_that_is_not_json_is_a_400() {
        let mut req = desc(Value::Null);
        req.body = "not json".into();
        assert!(matches!(reply(&req), EchoReply::Whole { status: 400, .. }));
    }

    #[test]
    fn respond_streams_each_event_as_its_own_chunk() {
        let body = json!({"stream": true, "answer": "a b c", "usage": null});
        let resp = respond(&desc(body));
        assert_eq!(resp.status, 200);
        let chunks: Vec<Bytes> = futures::executor::block_on(resp.body.map(|c| c.expect("chunk")).collect());
        assert_eq!(chunks.len(), 4);
    }
}
