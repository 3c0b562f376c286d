//! Wire shapes for the OpenAPI document (`GET /openapi.json`) of the bodies
//! the handlers parse or build as `serde_json::Value` (the chat request is
//! parsed field by field so each rule gets its own message; the envelope is
//! assembled along the pipeline). The typed views (`UserView`, `KeyView`,
//! `EndpointView`, ...) carry their own `ToSchema` derives next to their code.
//!
//! Field names and types here must match `chat/request.rs`,
//! `chat/response.rs` and `chat/format.rs`; the schemathesis test
//! (`tests/tests/openapi.rs`) checks real responses against them.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

pub use crate::error::ChainAttempt;

/// `{success: true, data}`: the answer of the admin and discovery routes.
#[derive(Debug, Serialize, ToSchema)]
pub struct Success<T> {
    /// Always `true`.
    pub success: bool,
    pub data: T,
}

/// A JSON object whose fields the operation's description lists (built as a
/// `serde_json::Value` by the handler).
#[derive(Debug, Serialize, ToSchema)]
#[schema(value_type = Object)]
pub struct JsonObject(pub Value);

/// A chat message.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatMessage {
    /// At most one `system` message, and it comes first.
    pub role: ChatRole,
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    System,
    User,
    Assistant,
}

/// A chain entry: a model string `<provider>/<model_name>` or an object with
/// its own per-attempt timeouts.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ChainItem {
    Model(String),
    Entry(ChainEntryObject),
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChainEntryObject {
    #[schema(example = "anthropic/claude-3-5-haiku")]
    pub model: String,
    /// Per-attempt timeout in ms (1 to 600000).
    #[schema(minimum = 1, maximum = 600000)]
    pub timeout_ms: Option<u64>,
    /// Streams: time to the first content delta, in ms (1 to 600000).
    #[schema(minimum = 1, maximum = 600000)]
    pub first_token_timeout_ms: Option<u64>,
}

/// Failover triggers.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Timeout,
    ServerError,
    RateLimit,
    ClientError,
}

/// Per-attempt defaults and the triggers that move the chain on.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Redundancy {
    /// Default 60000.
    #[schema(minimum = 1, maximum = 600000)]
    pub timeout_ms: Option<u64>,
    /// Default 15000.
    #[schema(minimum = 1, maximum = 600000)]
    pub first_token_timeout_ms: Option<u64>,
    /// Default `["timeout", "server_error", "rate_limit"]`.
    pub on: Option<Vec<Trigger>>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptShieldOption {
    /// `false` is honoured only by policies that allow it (`internal`).
    pub enabled: Option<bool>,
    /// `monitor`, `balanced` or `strict`.
    pub policy: Option<String>,
}

/// `stop`: a string or up to 4 strings.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

/// `POST /chat/completions`: `prompt` or `messages`; `model`
/// (with `fallback_models`) or `models`. Unknown fields are refused.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"model": "openai/gpt-4o-mini", "index": "Zero-Knowledge", "prompt": "Say hello"}))]
pub struct ChatRequest {
    /// Knowledge base; `Zero-Knowledge` means no retrieval.
    #[schema(example = "Zero-Knowledge")]
    pub index: String,
    pub prompt: Option<String>,
    #[schema(max_items = 100)]
    pub messages: Option<Vec<ChatMessage>>,
    pub system_message: Option<String>,
    #[schema(example = "openai/gpt-4o-mini")]
    pub model: Option<String>,
    /// The whole chain: at most 3 distinct models and 6 entries.
    #[schema(max_items = 6)]
    pub models: Option<Vec<ChainItem>>,
    #[schema(max_items = 5)]
    pub fallback_models: Option<Vec<String>>,
    pub redundancy: Option<Redundancy>,
    /// Default `true` (retrieval when `index` names a knowledge base).
    pub use_rag: Option<bool>,
    pub smltp_policy: Option<String>,
    pub prompt_shield: Option<PromptShieldOption>,
    /// Default 0.7; clamped to 0–2.
    pub temperature: Option<f64>,
    /// Default 1000; capped at 4000.
    #[schema(minimum = 1)]
    pub max_tokens: Option<u64>,
    /// Answer as `text/event-stream`.
    pub stream: Option<bool>,
    pub conversation_id: Option<String>,
    /// Bill this user (admin keys only).
    pub user_id: Option<String>,
    pub stop: Option<Stop>,
    pub stream_options: Option<Value>,
    // OpenAI fields passed to the provider unchanged.
    pub top_p: Option<Value>,
    pub presence_penalty: Option<Value>,
    pub frequency_penalty: Option<Value>,
    pub seed: Option<Value>,
    pub tools: Option<Value>,
    pub tool_choice: Option<Value>,
    pub response_format: Option<Value>,
    pub logit_bias: Option<Value>,
    pub user: Option<Value>,
    pub parallel_tool_calls: Option<Value>,
}

/// Token counts.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AssistantMessage {
    /// `assistant`.
    pub role: String,
    pub content: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChatChoice {
    pub index: u32,
    pub message: AssistantMessage,
    /// `stop`, `length`, ...
    pub finish_reason: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FailoverInfo {
    pub occurred: bool,
    pub attempts: Vec<ChainAttempt>,
}

/// `metadata.smltp`: where to fetch the signed receipt.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReceiptLink {
    pub bundle_id: String,
    pub receipt_url: String,
}

/// A retrieved passage left out of the context.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentRemoved {
    /// Path of the document inside the knowledge base.
    pub source: String,
    /// `prompt_shield` (an injection), `pii` or `dlp` (the policy blocks what it holds).
    pub reason: String,
}

/// The envelope's `metadata`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatMetadata {
    pub conversation_id: String,
    pub index_used: String,
    pub smltp_policy_used: String,
    /// `request`, `api_key`, `group` or `default`.
    pub smltp_policy_source: String,
    pub smltp_policy_hash: Option<String>,
    pub prompt_shield_policy: Option<Value>,
    pub served_model: String,
    pub requested_model: String,
    pub rag_enabled: bool,
    pub documents_retrieved: u64,
    pub sources: Vec<Value>,
    /// Retrieved passages left out of the model's context, each
    /// `{"source": "<path in the knowledge base>", "reason": "prompt_shield" | "pii" | "dlp"}`.
    pub documents_removed: Vec<DocumentRemoved>,
    /// Present when a chain of more than one entry ran.
    pub failover: Option<FailoverInfo>,
    pub smltp: Option<ReceiptLink>,
}

/// The 200 answer of `POST /chat/completions`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatCompletion {
    pub success: bool,
    /// `req-…`
    pub id: String,
    /// `chat.completion`
    pub object: String,
    pub created: i64,
    /// The model that served the answer.
    pub model: String,
    pub choices: Vec<ChatChoice>,
    pub usage: ChatUsage,
    pub metadata: ChatMetadata,
}

/// `POST /api/external/v1/chat/completions`: OpenAI's Chat Completions request.
/// Gatehouse's own fields (`models`, `fallback_models`, `redundancy`,
/// `smltp_policy`, `prompt_shield`, `user_id`, `conversation_id`) may be
/// added (OpenAI SDKs: `extra_body`). No retrieval on this route.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"model": "openai/gpt-4o-mini", "messages": [{"role": "user", "content": "Say hello"}]}))]
pub struct OpenAiChatRequest {
    #[schema(example = "openai/gpt-4o-mini")]
    pub model: Option<String>,
    /// `role` is `system`, `developer`, `user` or `assistant`; `content` a
    /// string or an array of `{type: "text", text}` parts.
    pub messages: Vec<Value>,
    pub stream: Option<bool>,
    pub stream_options: Option<Value>,
    #[schema(minimum = 1)]
    pub max_tokens: Option<u64>,
    #[schema(minimum = 1)]
    pub max_completion_tokens: Option<u64>,
    pub temperature: Option<f64>,
    /// Must be 1.
    pub n: Option<u32>,
    pub models: Option<Vec<ChainItem>>,
    pub fallback_models: Option<Vec<String>>,
    pub redundancy: Option<Redundancy>,
    pub smltp_policy: Option<String>,
    pub prompt_shield: Option<PromptShieldOption>,
    pub user_id: Option<String>,
    pub conversation_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiChoice {
    pub index: u32,
    /// `{role: "assistant", content, refusal: null}`
    pub message: Value,
    pub logprobs: Option<Value>,
    pub finish_reason: String,
}

/// OpenAI's `chat.completion`, plus Gatehouse's metadata under `gatehouse`.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiChatCompletion {
    pub id: String,
    pub object: String,
    pub created: i64,
    pub model: String,
    pub choices: Vec<OpenAiChoice>,
    pub usage: OpenAiUsage,
    pub system_fingerprint: Option<String>,
    pub gatehouse: ChatMetadata,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiModel {
    pub id: String,
    /// `model`
    pub object: String,
    pub created: i64,
    pub owned_by: String,
}

/// OpenAI's model list.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiModelList {
    /// `list`
    pub object: String,
    pub data: Vec<OpenAiModel>,
}

/// `GET /health`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok` or `degraded`.
    pub status: String,
    pub version: String,
    pub uptime_seconds: u64,
    /// `{loaded}`
    pub plugins: Value,
    /// `{ok}`, and `error` (why the last commit failed) while commits fail
    pub storage: Value,
}

/// A model this key may use (`GET /api/models`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    pub id: String,
    pub provider: String,
    pub plugin: String,
    pub confidential: bool,
    /// The provider's adapter plugin is loaded.
    pub available: bool,
}

/// A knowledge base (`GET /api/indexes`).
#[derive(Debug, Serialize, ToSchema)]
pub struct IndexInfo {
    pub name: String,
    pub description: String,
    pub retriever: Option<String>,
}

/// A policy this key may select (`GET /api/policies`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyInfo {
    pub name: String,
    pub version: Option<String>,
    pub description: Option<String>,
    /// `policies.default` of the config.
    pub default: bool,
    /// The key's `defaultPolicy`.
    pub key_default: bool,
    /// The group a tenant policy is registered to; `null` for the operator's.
    pub group_id: Option<String>,
    /// May this key select it? Always true but for another group's policy
    /// listed to an admin key.
    pub selectable: bool,
}

/// `POST /api/policy/check`.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyCheck {
    pub success: bool,
    pub allowed: bool,
    /// Why the request would be refused.
    pub reason: Option<String>,
    pub policy: String,
    pub policy_source: String,
    /// `{stage, plugin, action, score, reasons}`; `action` is `allow`, `flag`, `block` or `redact`.
    pub verdicts: Vec<Value>,
}

/// `{page, limit, total, pages}` of the admin lists.
#[derive(Debug, Serialize, ToSchema)]
pub struct Pagination {
    pub page: u64,
    pub limit: u64,
    pub total: u64,
    pub pages: u64,
}

/// `{id, name, email}` of a user named in an audit record or a group.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserRef {
    pub id: String,
    pub name: String,
    pub email: String,
}

/// One audit record, hash-chained.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditLogEntry {
    pub id: String,
    /// ISO 8601.
    pub timestamp: String,
    /// `api_key_management`, `security_event`, `rate_limit`, ... (docs/api.md#audit-log-and-groups).
    #[serde(rename = "type")]
    pub kind: String,
    /// `info`, `warning`, `error` or `critical`.
    pub severity: String,
    pub description: String,
    pub user: Option<UserRef>,
    pub metadata: Value,
    pub compliance_category: String,
    pub outcome: String,
    pub prev_hash: String,
    pub hash: String,
}

/// `{startDate, endDate}`, ISO 8601.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DateRange {
    pub start_date: String,
    pub end_date: String,
}

/// `data` of `GET /audit-logs`: newest first.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditLogPage {
    pub logs: Vec<AuditLogEntry>,
    pub pagination: Pagination,
    pub date_range: DateRange,
}

/// A group of `GET /groups`, with its members.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupListEntry {
    pub id: String,
    pub name: String,
    pub description: String,
    /// `Active` or `Inactive`.
    pub status: String,
    pub user_count: u64,
    pub users: Vec<UserRef>,
    pub created_at: String,
}
