//! The response envelope (spec 2.2), its metadata, and the SSE frames (2.3).

use serde_json::{Value, json};

use super::chain::Attempt;
use super::types::Usage;

/// Facts the metadata object reports; filled along the pipeline.
#[derive(Debug, Clone, Default)]
pub struct Meta {
    pub conversation_id: String,
    pub index_used: String,
    pub policy_used: String,
    pub policy_source: &'static str,
    pub policy_hash: Option<String>,
    pub prompt_shield_policy: Option<Value>,
    pub served_model: String,
    pub requested_model: String,
    /// `Some` when a multi-model chain ran.
    pub failover: Option<Vec<Attempt>>,
    pub smltp: Option<Value>,
    pub rag_enabled: bool,
    pub documents_retrieved: u64,
    pub sources: Vec<Value>,
}

impl Meta {
    pub fn to_json(&self) -> Value {
        let mut m = json!({
            "conversation_id": self.conversation_id,
            "index_used": self.index_used,
            "smltp_policy_used": self.policy_used,
            "smltp_policy_source": self.policy_source,
            "smltp_policy_hash": self.policy_hash,
            "prompt_shield_policy": self.prompt_shield_policy,
            "served_model": self.served_model,
            "requested_model": self.requested_model,
            "rag_enabled": self.rag_enabled,
            "documents_retrieved": self.documents_retrieved,
            "sources": self.sources,
        });
        if let Some(attempts) = &self.failover {
            let occurred = attempts.iter().any(|a| a.status != "success");
            m["failover"] = json!({
                "occurred": occurred,
                "attempts": attempts.iter().map(Attempt::to_json).collect::<Vec<_>>(),
            });
        }
        if let Some(s) = &self.smltp {
            m["smltp"] = s.clone();
        }
        m
    }
}

/// The non-streaming 200 body.
pub fn completion_body(id: &str, created: i64, content: &str, finish_reason: &str, usage: Usage, meta: &Meta) -> Value {
    json!({
        "success": true,
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": meta.served_model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": finish_reason,
        }],
        "usage": usage.to_json(),
        "metadata": meta.to_json(),
    })
}

/// One SSE frame: `data: <json>\n\n`.
pub fn frame(kind: &str, data: Value) -> String {
    let mut s = String::with_capacity(64);
    s.push_str("data: ");
    s.push_str(&json!({"type": kind, "data": data}).to_string());
    s.push_str("\n\n");
    s
}

pub const DONE: &str = "data: [DONE]\n\n";

pub fn metadata_frame(id: &str, created: i64, meta: &Meta) -> String {
    frame(
        "metadata",
        json!({
            "success": true,
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": meta.served_model,
            "metadata": meta.to_json(),
        }),
    )
}

pub fn chunk_frame(id: &str, model: &str, content: &str, finish_reason: Option<&str>) -> String {
    frame(
        "chunk",
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [{
                "index": 0,
                "delta": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }],
        }),
    )
}

pub fn usage_frame(usage: Usage) -> String {
    frame(
        "usage",
        json!({"usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total(),
        }}),
    )
}

pub fn error_frame(code: &str, message: &str, request_id: &str) -> String {
    frame("error", json!({"code": code, "message": message, "request_id": request_id}))
}
