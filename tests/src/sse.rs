//! Reading an SSE response body in tests: `data:` payloads in order.

use serde_json::Value;

/// One `data:` payload: JSON, or the literal `[DONE]`.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Json(Value),
    Done,
}

impl Frame {
    /// The `type` of a Gatehouse frame.
    pub fn kind(&self) -> &str {
        match self {
            Frame::Json(v) => v["type"].as_str().unwrap_or(""),
            Frame::Done => "[DONE]",
        }
    }

    pub fn json(&self) -> &Value {
        match self {
            Frame::Json(v) => v,
            Frame::Done => &Value::Null,
        }
    }
}

/// Split a whole SSE body into its `data:` payloads.
pub fn frames(body: &str) -> Vec<Frame> {
    body.split("\n\n")
        .filter_map(|block| {
            let data: Vec<&str> = block.lines().filter_map(|l| l.strip_prefix("data:").map(str::trim_start)).collect();
            if data.is_empty() {
                return None;
            }
            let data = data.join("\n");
            Some(if data == "[DONE]" { Frame::Done } else { Frame::Json(serde_json::from_str(&data).unwrap_or(Value::String(data))) })
        })
        .collect()
}

/// The text of a Gatehouse stream's chunks, in order.
pub fn text(frames: &[Frame]) -> String {
    frames.iter().filter(|f| f.kind() == "chunk").filter_map(|f| f.json()["data"]["choices"][0]["delta"]["content"].as_str()).collect()
}
