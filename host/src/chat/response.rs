//! The response envelope, its metadata, and the SSE frames (2.3).

use serde::Serialize;
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
    /// Retrieved passages left out of the context: `{source, reason}`.
    pub documents_removed: Vec<Value>,
}

impl Meta {
    /// The `metadata` object, borrowed: serialised straight into a body
    /// without building a `serde_json::Value` tree per answer.
    pub fn view(&self) -> MetaView<'_> {
        MetaView {
            conversation_id: &self.conversation_id,
            index_used: &self.index_used,
            smltp_policy_used: &self.policy_used,
            smltp_policy_source: self.policy_source,
            smltp_policy_hash: self.policy_hash.as_deref(),
            prompt_shield_policy: self.prompt_shield_policy.as_ref(),
            served_model: &self.served_model,
            requested_model: &self.requested_model,
            rag_enabled: self.rag_enabled,
            documents_retrieved: self.documents_retrieved,
            sources: &self.sources,
            documents_removed: &self.documents_removed,
            failover: self
                .failover
                .as_deref()
                .map(|attempts| FailoverView { occurred: attempts.iter().any(|a| a.status != "success"), attempts }),
            smltp: self.smltp.as_ref(),
        }
    }
}

/// `metadata` as it is serialised.
#[derive(Serialize)]
pub struct MetaView<'a> {
    conversation_id: &'a str,
    index_used: &'a str,
    smltp_policy_used: &'a str,
    smltp_policy_source: &'static str,
    smltp_policy_hash: Option<&'a str>,
    prompt_shield_policy: Option<&'a Value>,
    served_model: &'a str,
    requested_model: &'a str,
    rag_enabled: bool,
    documents_retrieved: u64,
    sources: &'a [Value],
    documents_removed: &'a [Value],
    #[serde(skip_serializing_if = "Option::is_none")]
    failover: Option<FailoverView<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    smltp: Option<&'a Value>,
}

#[derive(Serialize)]
struct FailoverView<'a> {
    occurred: bool,
    attempts: &'a [Attempt],
}

#[derive(Serialize)]
struct CompletionBody<'a> {
    success: bool,
    id: &'a str,
    object: &'static str,
    created: i64,
    model: &'a str,
    choices: [Choice<'a>; 1],
    usage: UsageView,
    metadata: MetaView<'a>,
}

#[derive(Serialize)]
struct Choice<'a> {
    index: u32,
    message: Message<'a>,
    finish_reason: &'a str,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

/// `usage` in the envelope: OpenAI's names and Anthropic's.
#[derive(Serialize)]
struct UsageView {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    input_tokens: u64,
    output_tokens: u64,
}

impl From<Usage> for UsageView {
    fn from(u: Usage) -> Self {
        UsageView {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.total(),
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
        }
    }
}

/// The non-streaming 200 body, serialised.
pub fn completion_body(id: &str, created: i64, content: &str, finish_reason: &str, usage: Usage, meta: &Meta) -> String {
    // The envelope around the answer is about 1 KiB: one allocation, not a
    // doubling series of them.
    let body = CompletionBody {
        success: true,
        id,
        object: "chat.completion",
        created,
        model: &meta.served_model,
        choices: [Choice { index: 0, message: Message { role: "assistant", content }, finish_reason }],
        usage: usage.into(),
        metadata: meta.view(),
    };
    let mut out = Vec::with_capacity(content.len() + ENVELOPE_BYTES);
    serde_json::to_writer(&mut out, &body).unwrap_or_else(|e| unreachable!("a response body always serialises: {e}"));
    // serde_json writes UTF-8 only.
    String::from_utf8(out).unwrap_or_else(|e| unreachable!("serde_json wrote UTF-8: {e}"))
}

/// Room reserved for the envelope of [`completion_body`] besides the answer.
const ENVELOPE_BYTES: usize = 1536;

/// One SSE frame: `data: {"type": kind, "data": data}\n\n`.
pub fn frame(kind: &str, data: impl Serialize) -> String {
    #[derive(Serialize)]
    struct Frame<'a, D> {
        #[serde(rename = "type")]
        kind: &'a str,
        data: D,
    }
    let mut out = Vec::with_capacity(192);
    out.extend_from_slice(b"data: ");
    serde_json::to_writer(&mut out, &Frame { kind, data }).unwrap_or_else(|e| unreachable!("an SSE frame always serialises: {e}"));
    out.extend_from_slice(b"\n\n");
    String::from_utf8(out).unwrap_or_else(|e| unreachable!("serde_json writes UTF-8: {e}"))
}

pub const DONE: &str = "data: [DONE]\n\n";

pub fn metadata_frame(id: &str, created: i64, meta: &Meta) -> String {
    #[derive(Serialize)]
    struct Opening<'a> {
        success: bool,
        id: &'a str,
        object: &'static str,
        created: i64,
        model: &'a str,
        metadata: MetaView<'a>,
    }
    frame("metadata", Opening { success: true, id, object: "chat.completion", created, model: &meta.served_model, metadata: meta.view() })
}

pub fn chunk_frame(id: &str, model: &str, content: &str, finish_reason: Option<&str>) -> String {
    #[derive(Serialize)]
    struct Chunk<'a> {
        id: &'a str,
        object: &'static str,
        model: &'a str,
        choices: [Delta<'a>; 1],
    }
    #[derive(Serialize)]
    struct Delta<'a> {
        index: u32,
        delta: Message<'a>,
        finish_reason: Option<&'a str>,
    }
    frame(
        "chunk",
        Chunk {
            id,
            object: "chat.completion.chunk",
            model,
            choices: [Delta { index: 0, delta: Message { role: "assistant", content }, finish_reason }],
        },
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

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(failover: Option<Vec<Attempt>>) -> Meta {
        Meta {
            conversation_id: "conv-1".into(),
            index_used: "docs".into(),
            policy_used: "internal".into(),
            policy_source: "key",
            policy_hash: Some("ab12".into()),
            prompt_shield_policy: Some(json!({"mode": "block"})),
            served_model: "openai/gpt-4o".into(),
            requested_model: "openai/gpt-4o".into(),
            failover,
            smltp: Some(json!({"bundle_id": "b-1", "receipt_url": "/api/receipts/b-1"})),
            rag_enabled: true,
            documents_retrieved: 2,
            sources: vec![json!({"id": "d1"})],
            documents_removed: vec![json!({"source": "d2", "reason": "prompt_shield"})],
        }
    }

    #[test]
    fn completion_body_has_every_field_of_the_envelope() {
        let attempts = vec![
            Attempt { model: "openai/a".into(), status: "failed", reason: Some("timeout"), latency_ms: 30, message: Some("slow".into()) },
            Attempt { model: "openai/gpt-4o".into(), status: "success", reason: None, latency_ms: 12, message: None },
        ];
        let usage = Usage { prompt_tokens: 7, completion_tokens: 3 };
        let body: Value = serde_json::from_str(&completion_body("req-1", 42, "hi \"there\"", "stop", usage, &meta(Some(attempts))))
            .expect("the body is JSON");
        assert_eq!(
            body,
            json!({
                "success": true, "id": "req-1", "object": "chat.completion", "created": 42, "model": "openai/gpt-4o",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi \"there\""}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10, "input_tokens": 7, "output_tokens": 3},
                "metadata": {
                    "conversation_id": "conv-1", "index_used": "docs", "smltp_policy_used": "internal",
                    "smltp_policy_source": "key", "smltp_policy_hash": "ab12", "prompt_shield_policy": {"mode": "block"},
                    "served_model": "openai/gpt-4o", "requested_model": "openai/gpt-4o", "rag_enabled": true,
                    "documents_retrieved": 2, "sources": [{"id": "d1"}],
                    "documents_removed": [{"source": "d2", "reason": "prompt_shield"}],
                    "failover": {"occurred": true, "attempts": [
                        {"model": "openai/a", "status": "failed", "reason": "timeout", "latency_ms": 30, "message": "slow"},
                        {"model": "openai/gpt-4o", "status": "success", "latency_ms": 12},
                    ]},
                    "smltp": {"bundle_id": "b-1", "receipt_url": "/api/receipts/b-1"},
                },
            })
        );
    }

    #[test]
    fn a_full_envelope_fits_the_room_reserved_for_it() {
        // Real-sized values: 64-hex policy hash, UUID-based ids, a three-model chain.
        let attempts = (0..3)
            .map(|i| Attempt {
                model: format!("anthropic/claude-model-{i}"),
                status: "failed",
                reason: Some("rate_limit"),
                latency_ms: 1200,
                message: Some("upstream said 429".into()),
            })
            .collect();
        let mut m = meta(Some(attempts));
        m.conversation_id = format!("conv-{}", "c".repeat(32));
        m.policy_hash = Some("f".repeat(64));
        m.prompt_shield_policy =
            Some(json!({"enabled": true, "mode": "balanced", "source": "policy", "verdict": "allow", "score": 0.0123}));
        m.smltp =
            Some(json!({"bundle_id": format!("rcpt_{}", "0".repeat(32)), "receipt_url": format!("/api/receipts/rcpt_{}", "0".repeat(32))}));
        let content = "an answer ".repeat(50);
        let body = completion_body(&format!("req-{}", "a".repeat(32)), 1_700_000_000, &content, "stop", Usage::default(), &m);
        assert!(body.len() - content.len() < ENVELOPE_BYTES, "envelope of {} bytes", body.len() - content.len());
        assert_eq!(body.capacity(), content.len() + ENVELOPE_BYTES, "serialised without growing");
    }

    #[test]
    fn metadata_without_a_chain_or_receipt_leaves_those_keys_out() {
        let mut m = meta(None);
        m.smltp = None;
        m.policy_hash = None;
        let v = serde_json::to_value(m.view()).expect("serialises");
        assert!(v.get("failover").is_none() && v.get("smltp").is_none(), "{v}");
        assert_eq!(v["smltp_policy_hash"], Value::Null);
    }

    #[test]
    fn frames_are_one_data_line_of_type_and_data() {
        let f = chunk_frame("req-1", "openai/gpt-4o", "a\nb", None);
        let json = f.strip_prefix("data: ").and_then(|s| s.strip_suffix("\n\n")).expect("one frame");
        assert!(!json.contains('\n'), "a newline in content is escaped: {f:?}");
        let v: Value = serde_json::from_str(json).expect("JSON");
        assert_eq!(
            v,
            json!({"type": "chunk", "data": {"id": "req-1", "object": "chat.completion.chunk", "model": "openai/gpt-4o",
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": "a\nb"}, "finish_reason": null}]}})
        );
        let opening: Value =
            serde_json::from_str(metadata_frame("req-1", 42, &meta(None)).trim_start_matches("data: ").trim_end()).expect("JSON");
        assert_eq!(opening["type"], "metadata");
        assert_eq!(opening["data"]["metadata"]["index_used"], "docs");
        assert_eq!(opening["data"]["created"], 42);
    }
}
