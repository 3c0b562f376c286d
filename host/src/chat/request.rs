//! Parsing and validation of a chat completion request. Every rule answers with its documented status and error
//! text and a message that says how to fix the request.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use serde_json::{Map, Value};

use super::screen::{self, Hidden};
use super::types::{ChainEntry, Message, ModelId, Role, Trigger};
use crate::error::{ChatError, text};

/// Most messages per request.
pub const MAX_MESSAGES: usize = 100;
/// Most bytes of UTF-8 content (messages, `prompt`, `system_message`, and
/// the strings inside the pass-through fields).
pub const MAX_CONTENT_BYTES: usize = 262_144;
/// Most distinct models in a chain, and most entries.
pub const MAX_DISTINCT_MODELS: usize = 3;
pub const MAX_CHAIN_ENTRIES: usize = 6;
pub const MAX_TOKENS_CAP: u32 = 4000;
pub const DEFAULT_MAX_TOKENS: u32 = 1000;
pub const DEFAULT_TEMPERATURE: f32 = 0.7;
/// Longest per-attempt timeout a request may ask for.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Knowledge base name that means "no retrieval".
pub const ZERO_KNOWLEDGE: &str = "Zero-Knowledge";

/// OpenAI request fields passed through to the provider unchanged.
pub const PASSTHROUGH: &[&str] = &[
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "tools",
    "tool_choice",
    "response_format",
    "logit_bias",
    "user",
    "parallel_tool_calls",
];

const KNOWN: &[&str] = &[
    "prompt",
    "messages",
    "system_message",
    "model",
    "models",
    "fallback_models",
    "redundancy",
    "index",
    "use_rag",
    "smltp_policy",
    "prompt_shield",
    "temperature",
    "max_tokens",
    "stream",
    "conversation_id",
    "user_id",
    "stop",
    "stream_options",
];

/// `prompt_shield` of the request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptShieldOption {
    pub enabled: Option<bool>,
    pub policy: Option<String>,
}

/// A validated chat request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatParams {
    pub messages: Vec<Message>,
    pub chain: Vec<ChainEntry>,
    pub on: HashSet<Trigger>,
    pub index: String,
    pub use_rag: bool,
    pub policy: Option<String>,
    pub prompt_shield: Option<PromptShieldOption>,
    pub temperature: f32,
    pub max_tokens: u32,
    pub stream: bool,
    pub conversation_id: Option<String>,
    pub user_id: Option<String>,
    pub stop: Vec<String>,
    /// Pass-through fields (`tools`, `response_format`, ...), invisible characters taken out.
    pub extra: Map<String, Value>,
    /// What invisible tag characters in the messages and fields spelled: screened, never forwarded.
    pub hidden: Vec<Hidden>,
}

impl ChatParams {
    /// True when the caller gave more than one chain entry.
    pub fn multi_model(&self) -> bool {
        self.chain.len() > 1
    }
}

/// Per-attempt default timeouts (from the config).
#[derive(Debug, Clone, Copy)]
pub struct TimeoutDefaults {
    pub timeout_ms: u64,
    pub first_token_timeout_ms: u64,
}

fn invalid(msg: impl Into<String>) -> ChatError {
    ChatError::invalid_request(msg)
}

fn type_error(field: &str, expected: &str) -> ChatError {
    invalid(format!("`{field}` must be {expected}"))
}

fn opt_str<'a>(obj: &'a Map<String, Value>, field: &str) -> Result<Option<&'a str>, ChatError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(type_error(field, "a string")),
    }
}

fn opt_bool(obj: &Map<String, Value>, field: &str) -> Result<Option<bool>, ChatError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(type_error(field, "true or false")),
    }
}

fn opt_timeout(obj: &Map<String, Value>, field: &str, path: &str) -> Result<Option<u64>, ChatError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => Ok(Some(ms)),
            _ => Err(invalid(format!("`{path}` must be a whole number of milliseconds from 1 to {MAX_TIMEOUT_MS}"))),
        },
    }
}

/// Parse the raw body. `Err` carries the flat-format error to send.
pub fn parse(body: &[u8], defaults: TimeoutDefaults) -> Result<ChatParams, ChatError> {
    from_object(body_object(body)?, defaults)
}

/// Parse a body for `/api/policy/check`, which calls no model: `index`
/// defaults to `Zero-Knowledge` and the chain may be empty. Whatever is
/// given is validated as for a chat request.
pub fn parse_check(body: &[u8], defaults: TimeoutDefaults) -> Result<ChatParams, ChatError> {
    let mut obj = body_object(body)?;
    if obj.get("index").is_none_or(Value::is_null) {
        obj.insert("index".to_owned(), Value::String(ZERO_KNOWLEDGE.to_owned()));
    }
    let no_model = ["model", "models", "fallback_models"].iter().all(|k| obj.get(*k).is_none_or(Value::is_null));
    validate(obj, defaults, !no_model)
}

fn body_object(body: &[u8]) -> Result<Map<String, Value>, ChatError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        if std::str::from_utf8(body).is_err() {
            invalid("the body is not valid UTF-8; send JSON encoded as UTF-8")
        } else {
            invalid(format!("the body is not valid JSON: {e}"))
        }
    })?;
    let Value::Object(obj) = value else {
        return Err(invalid("the body must be a JSON object"));
    };
    Ok(obj)
}

/// Validate a parsed JSON object.
pub fn from_object(obj: Map<String, Value>, defaults: TimeoutDefaults) -> Result<ChatParams, ChatError> {
    validate(obj, defaults, true)
}

/// [`from_object`]; without `needs_model` an absent model leaves the chain empty.
fn validate(mut obj: Map<String, Value>, defaults: TimeoutDefaults, needs_model: bool) -> Result<ChatParams, ChatError> {
    // Rule 1: index.
    let index = match obj.get("index") {
        None | Some(Value::Null) => {
            return Err(ChatError::new(
                axum::http::StatusCode::BAD_REQUEST,
                text::INDEX_REQUIRED,
                "`index` is required: name a knowledge base, or send \"Zero-Knowledge\" for no retrieval",
            ));
        }
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        Some(Value::String(_)) => {
            return Err(ChatError::new(
                axum::http::StatusCode::BAD_REQUEST,
                text::INDEX_REQUIRED,
                "`index` is empty: name a knowledge base, or send \"Zero-Knowledge\" for no retrieval",
            ));
        }
        Some(_) => return Err(type_error("index", "a string")),
    };

    if let Some(unknown) = obj.keys().find(|k| !KNOWN.contains(&k.as_str()) && !PASSTHROUGH.contains(&k.as_str())) {
        return Err(invalid(format!("unknown field `{unknown}`")));
    }

    let mut messages = parse_messages(&obj)?;
    let (chain, on) = parse_chain(&obj, defaults, needs_model)?;

    let temperature = match obj.get("temperature") {
        None | Some(Value::Null) => DEFAULT_TEMPERATURE,
        Some(v) => match v.as_f64() {
            Some(t) if t.is_finite() => t.clamp(0.0, 2.0) as f32,
            _ => return Err(type_error("temperature", "a number from 0 to 2")),
        },
    };
    let max_tokens = match obj.get("max_tokens") {
        None | Some(Value::Null) => DEFAULT_MAX_TOKENS,
        Some(v) => match (v.as_i64(), v.as_u64()) {
            (_, Some(n)) if n >= 1 => n.min(MAX_TOKENS_CAP as u64) as u32,
            (Some(_), _) => return Err(invalid("`max_tokens` must be at least 1")),
            _ => return Err(type_error("max_tokens", "a whole number from 1 to 4000")),
        },
    };
    let stream = opt_bool(&obj, "stream")?.unwrap_or(false);
    let use_rag = opt_bool(&obj, "use_rag")?.unwrap_or(true);
    let policy = opt_str(&obj, "smltp_policy")?.map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned);
    let conversation_id = match opt_str(&obj, "conversation_id")? {
        Some(s) if s.len() > 200 => return Err(invalid("`conversation_id` is longer than 200 characters")),
        Some(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        _ => None,
    };
    let user_id = opt_str(&obj, "user_id")?.map(str::to_owned);
    let prompt_shield = match obj.get("prompt_shield") {
        None | Some(Value::Null) => None,
        Some(Value::Object(ps)) => {
            if let Some(k) = ps.keys().find(|k| *k != "enabled" && *k != "policy") {
                return Err(invalid(format!("unknown field `prompt_shield.{k}`")));
            }
            Some(PromptShieldOption {
                enabled: opt_bool(ps, "enabled").map_err(|_| type_error("prompt_shield.enabled", "true or false"))?,
                policy: opt_str(ps, "policy").map_err(|_| type_error("prompt_shield.policy", "a string"))?.map(str::to_owned),
            })
        }
        Some(_) => return Err(type_error("prompt_shield", "an object `{enabled?, policy?}`")),
    };
    let mut stop = match obj.get("stop") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) if a.len() <= 4 && a.iter().all(Value::is_string) => {
            a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()
        }
        Some(_) => return Err(type_error("stop", "a string or an array of at most 4 strings")),
    };
    let mut extra = Map::new();
    for k in PASSTHROUGH {
        if let Some(v) = obj.remove(*k) {
            extra.insert((*k).to_owned(), v);
        }
    }
    // Every string that goes upstream counts toward the content cap.
    if !extra.is_empty() || !stop.is_empty() {
        let content: usize = messages.iter().map(|m| m.content.len()).sum();
        let total = content + screen::field_bytes(&extra, &stop);
        if total > MAX_CONTENT_BYTES {
            return Err(invalid(format!(
                "message content, `stop` and the strings in pass-through fields (`tools`, `response_format`, `user`, …) are \
                 {total} bytes together; at most {MAX_CONTENT_BYTES} bytes (256 KB) are allowed"
            )));
        }
    }
    // Invisible characters never go upstream; what tag characters spelled is kept for screening.
    let mut hidden = Vec::new();
    screen::clean_messages(&mut messages, &mut hidden);
    screen::clean_fields(&mut extra, &mut stop, &mut hidden).map_err(|field| {
        invalid(format!(
            "a field name inside `{field}` contains invisible characters (zero-width, bidi control or tag characters); remove them"
        ))
    })?;
    Ok(ChatParams {
        messages,
        chain,
        on,
        index,
        use_rag,
        policy,
        prompt_shield,
        temperature,
        max_tokens,
        stream,
        conversation_id,
        user_id,
        stop,
        extra,
        hidden,
    })
}

fn parse_role(s: &str) -> Option<Role> {
    match s {
        "system" => Some(Role::System),
        "user" => Some(Role::User),
        "assistant" => Some(Role::Assistant),
        _ => None,
    }
}

fn parse_messages(obj: &Map<String, Value>) -> Result<Vec<Message>, ChatError> {
    let prompt = opt_str(obj, "prompt")?;
    let system_message = opt_str(obj, "system_message")?;
    let raw = match obj.get("messages") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(a),
        Some(_) => return Err(ChatError::invalid_messages("`messages` must be an array of {role, content}")),
    };
    let mut messages = Vec::new();
    match (prompt, raw) {
        (Some(_), Some(_)) => {
            return Err(invalid("send either `prompt` or `messages`, not both"));
        }
        (None, None) => {
            return Err(invalid("send `messages` (an array of {role, content}) or `prompt`"));
        }
        (Some(p), None) => {
            if p.trim().is_empty() {
                return Err(invalid("`prompt` is empty"));
            }
            messages.push(Message { role: Role::User, content: p.to_owned() });
        }
        (None, Some(items)) => {
            if items.is_empty() {
                return Err(ChatError::invalid_messages("`messages` is empty: send at least one message"));
            }
            if items.len() > MAX_MESSAGES {
                return Err(ChatError::invalid_messages(format!(
                    "`messages` has {} entries; at most {MAX_MESSAGES} are allowed",
                    items.len()
                )));
            }
            for (i, item) in items.iter().enumerate() {
                let Value::Object(m) = item else {
                    return Err(ChatError::invalid_messages(format!("`messages[{i}]` must be an object {{role, content}}")));
                };
                if let Some(k) = m.keys().find(|k| !matches!(k.as_str(), "role" | "content" | "name")) {
                    return Err(ChatError::invalid_messages(format!("`messages[{i}]` has an unknown field `{k}`")));
                }
                let role = match m.get("role") {
                    Some(Value::String(r)) => parse_role(r).ok_or_else(|| {
                        ChatError::invalid_messages(format!("`messages[{i}].role` is `{r}`; use `system`, `user` or `assistant`"))
                    })?,
                    _ => {
                        return Err(ChatError::invalid_messages(format!("`messages[{i}].role` must be `system`, `user` or `assistant`")));
                    }
                };
                let content = match m.get("content") {
                    Some(Value::String(c)) => c.clone(),
                    _ => {
                        return Err(ChatError::invalid_messages(format!("`messages[{i}].content` must be a string")));
                    }
                };
                if role == Role::System && i != 0 {
                    return Err(ChatError::invalid_messages(format!(
                        "`messages[{i}]` is a system message: at most one system message is allowed, and only as the first entry"
                    )));
                }
                messages.push(Message { role, content });
            }
        }
    }
    if let Some(sys) = system_message {
        if messages.first().is_some_and(|m| m.role == Role::System) {
            return Err(ChatError::invalid_messages(
                "`system_message` cannot be combined with a `system` entry in `messages`; send one of them",
            ));
        }
        messages.insert(0, Message { role: Role::System, content: sys.to_owned() });
    }
    if !messages.iter().any(|m| m.role != Role::System) {
        return Err(ChatError::invalid_messages("send at least one `user` or `assistant` message"));
    }
    let total: usize = messages.iter().map(|m| m.content.len()).sum();
    if total > MAX_CONTENT_BYTES {
        return Err(ChatError::invalid_messages(format!(
            "message content is {total} bytes; at most {MAX_CONTENT_BYTES} bytes (256 KB) in total are allowed"
        )));
    }
    Ok(messages)
}

fn parse_chain(
    obj: &Map<String, Value>,
    defaults: TimeoutDefaults,
    needs_model: bool,
) -> Result<(Vec<ChainEntry>, HashSet<Trigger>), ChatError> {
    let mut chain_timeout = defaults.timeout_ms;
    let mut chain_ftt = defaults.first_token_timeout_ms;
    let mut on: HashSet<Trigger> = [Trigger::Timeout, Trigger::ServerError, Trigger::RateLimit].into();
    match obj.get("redundancy") {
        None | Some(Value::Null) => {}
        Some(Value::Object(r)) => {
            if let Some(k) = r.keys().find(|k| !matches!(k.as_str(), "timeout_ms" | "first_token_timeout_ms" | "on")) {
                return Err(invalid(format!("unknown field `redundancy.{k}`")));
            }
            if let Some(t) = opt_timeout(r, "timeout_ms", "redundancy.timeout_ms")? {
                chain_timeout = t;
            }
            if let Some(t) = opt_timeout(r, "first_token_timeout_ms", "redundancy.first_token_timeout_ms")? {
                chain_ftt = t;
            }
            match r.get("on") {
                None | Some(Value::Null) => {}
                Some(Value::Array(items)) => {
                    on.clear();
                    for item in items {
                        let name = item.as_str().unwrap_or_default();
                        let t = Trigger::parse(name).ok_or_else(|| {
                            invalid(format!(
                                "`redundancy.on` has unknown trigger {item}; known triggers: timeout, server_error, rate_limit, client_error"
                            ))
                        })?;
                        on.insert(t);
                    }
                }
                Some(_) => return Err(type_error("redundancy.on", "an array of trigger names")),
            }
        }
        Some(_) => return Err(type_error("redundancy", "an object `{timeout_ms, first_token_timeout_ms, on}`")),
    }

    let entry = |model: &str, path: &str, t: Option<u64>, ftt: Option<u64>| -> Result<ChainEntry, ChatError> {
        let model = ModelId::parse(model).map_err(|m| invalid(format!("`{path}`: {m}")))?;
        Ok(ChainEntry {
            model,
            timeout: Duration::from_millis(t.unwrap_or(chain_timeout)),
            first_token_timeout: Duration::from_millis(ftt.unwrap_or(chain_ftt)),
        })
    };

    let models = match obj.get("models") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(a),
        Some(_) => return Err(type_error("models", "an array of model strings or {model, timeout_ms, first_token_timeout_ms}")),
    };
    let fallbacks = match obj.get("fallback_models") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(a),
        Some(_) => return Err(type_error("fallback_models", "an array of model strings")),
    };
    let model = opt_str(obj, "model")?;
    let mut chain = Vec::new();
    match models {
        Some(items) => {
            if fallbacks.is_some() {
                return Err(invalid("`fallback_models` cannot be combined with `models`; put the fallbacks in `models`"));
            }
            if items.is_empty() {
                return Err(invalid("`models` is empty: name at least one model"));
            }
            for (i, item) in items.iter().enumerate() {
                let path = format!("models[{i}]");
                match item {
                    Value::String(s) => chain.push(entry(s, &path, None, None)?),
                    Value::Object(o) => {
                        if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "model" | "timeout_ms" | "first_token_timeout_ms")) {
                            return Err(invalid(format!("unknown field `{path}.{k}`")));
                        }
                        let m = opt_str(o, "model")?.ok_or_else(|| invalid(format!("`{path}.model` is required")))?;
                        let t = opt_timeout(o, "timeout_ms", &format!("{path}.timeout_ms"))?;
                        let f = opt_timeout(o, "first_token_timeout_ms", &format!("{path}.first_token_timeout_ms"))?;
                        chain.push(entry(m, &path, t, f)?);
                    }
                    _ => return Err(type_error(&path, "a model string or an object {model, timeout_ms, first_token_timeout_ms}")),
                }
            }
        }
        None if model.is_none() && !needs_model => {}
        None => {
            let Some(m) = model else {
                return Err(invalid("name a model: `model` (\"<provider>/<model_name>\") or a `models` chain"));
            };
            chain.push(entry(m, "model", None, None)?);
            for (i, f) in fallbacks.into_iter().flatten().enumerate() {
                let s = f.as_str().ok_or_else(|| type_error(&format!("fallback_models[{i}]"), "a model string"))?;
                chain.push(entry(s, &format!("fallback_models[{i}]"), None, None)?);
            }
        }
    }
    let distinct: BTreeSet<&str> = chain.iter().map(|e| e.model.as_str()).collect();
    if distinct.len() > MAX_DISTINCT_MODELS {
        return Err(invalid(format!("the chain names {} distinct models; at most {MAX_DISTINCT_MODELS} are allowed", distinct.len())));
    }
    if chain.len() > MAX_CHAIN_ENTRIES {
        return Err(invalid(format!(
            "the chain has {} entries; at most {MAX_CHAIN_ENTRIES} are allowed (repeats count as retries)",
            chain.len()
        )));
    }
    Ok((chain, on))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const D: TimeoutDefaults = TimeoutDefaults { timeout_ms: 60_000, first_token_timeout_ms: 15_000 };

    fn p(v: Value) -> Result<ChatParams, ChatError> {
        parse(v.to_string().as_bytes(), D)
    }

    fn err(v: Value) -> (u16, &'static str, String) {
        let e = p(v).expect_err("should be invalid");
        (e.status.as_u16(), e.error, e.message)
    }

    #[test]
    fn minimal_request_gets_defaults() {
        let r = p(json!({"index": "Zero-Knowledge", "model": "echo/x", "prompt": "hi"})).expect("valid");
        assert_eq!(r.temperature, 0.7);
        assert_eq!(r.max_tokens, 1000);
        assert!(!r.stream);
        assert!(r.use_rag);
        assert_eq!(r.chain.len(), 1);
        assert_eq!(r.chain[0].timeout, Duration::from_secs(60));
        assert_eq!(r.chain[0].first_token_timeout, Duration::from_secs(15));
        assert!(r.on.contains(&Trigger::Timeout) && !r.on.contains(&Trigger::ClientError));
    }

    #[test]
    fn index_is_required() {
        let (s, e, _) = err(json!({"model": "echo/x", "prompt": "hi"}));
        assert_eq!((s, e), (400, "Index required"));
        let (s, e, _) = err(json!({"model": "echo/x", "prompt": "hi", "index": ""}));
        assert_eq!((s, e), (400, "Index required"));
    }

    #[test]
    fn system_message_rules() {
        let base = |msgs: Value| json!({"index": "Zero-Knowledge", "model": "echo/x", "messages": msgs});
        let (_, e, _) = err(base(json!([{"role":"user","content":"a"},{"role":"system","content":"s"}])));
        assert_eq!(e, "Invalid messages");
        let (_, e, _) = err(base(json!([{"role":"system","content":"a"},{"role":"system","content":"s"},{"role":"user","content":"u"}])));
        assert_eq!(e, "Invalid messages");
        let (_, e, _) = err(base(json!([{"role":"robot","content":"a"}])));
        assert_eq!(e, "Invalid messages");
        let mut v = base(json!([{"role":"system","content":"a"},{"role":"user","content":"u"}]));
        v["system_message"] = json!("s");
        let (_, e, _) = err(v);
        assert_eq!(e, "Invalid messages");
        let ok = p(base(json!([{"role":"system","content":"a"},{"role":"user","content":"u"}]))).expect("valid");
        assert_eq!(ok.messages[0].role, Role::System);
    }

    #[test]
    fn system_message_field_goes_first() {
        let r = p(json!({"index":"Zero-Knowledge","model":"echo/x","prompt":"hi","system_message":"be brief"})).expect("valid");
        assert_eq!(r.messages[0], Message { role: Role::System, content: "be brief".into() });
        assert_eq!(r.messages[1].role, Role::User);
    }

    #[test]
    fn prompt_and_messages_together_are_invalid() {
        let (s, e, _) = err(json!({"index":"Zero-Knowledge","model":"echo/x","prompt":"a","messages":[{"role":"user","content":"b"}]}));
        assert_eq!((s, e), (400, "Invalid request"));
    }

    #[test]
    fn chain_rules() {
        let (s, _, m) = err(json!({"index":"Zero-Knowledge","prompt":"a"}));
        assert_eq!(s, 400);
        assert!(m.contains("model"));
        let (s, _, m) = err(json!({"index":"Zero-Knowledge","prompt":"a","models":["a/1"],"fallback_models":["a/2"]}));
        assert_eq!(s, 400);
        assert!(m.contains("fallback_models"));
        let (s, _, m) = err(json!({"index":"Zero-Knowledge","prompt":"a","models":["a/1","a/2","a/3","a/4"]}));
        assert_eq!(s, 400);
        assert!(m.contains("distinct"));
        // Repeats are retries and do not count as distinct.
        let r = p(json!({"index":"Zero-Knowledge","prompt":"a","models":["a/1","a/1","a/2"]})).expect("valid");
        assert_eq!(r.chain.len(), 3);
        let r = p(json!({"index":"Zero-Knowledge","prompt":"a","model":"a/1","fallback_models":["b/2","c/3"]})).expect("valid");
        assert_eq!(r.chain.iter().map(|e| e.model.as_str()).collect::<Vec<_>>(), ["a/1", "b/2", "c/3"]);
        let (_, _, m) = err(json!({"index":"Zero-Knowledge","prompt":"a","model":"gpt-4o"}));
        assert!(m.contains("<provider>/<model_name>"));
    }

    #[test]
    fn per_entry_and_chain_timeouts() {
        let r = p(json!({"index":"Zero-Knowledge","prompt":"a",
            "models":[{"model":"a/1","timeout_ms":100},"b/2"],
            "redundancy":{"first_token_timeout_ms":50,"timeout_ms":200,"on":["timeout","client_error"]}}))
        .expect("valid");
        assert_eq!(r.chain[0].timeout, Duration::from_millis(100));
        assert_eq!(r.chain[0].first_token_timeout, Duration::from_millis(50));
        assert_eq!(r.chain[1].timeout, Duration::from_millis(200));
        assert_eq!(r.on, [Trigger::Timeout, Trigger::ClientError].into());
        let (s, _, m) = err(json!({"index":"Zero-Knowledge","prompt":"a","model":"a/1","redundancy":{"on":["meteor"]}}));
        assert_eq!(s, 400);
        assert!(m.contains("meteor"));
    }

    #[test]
    fn numeric_params() {
        let r = p(json!({"index":"Zero-Knowledge","prompt":"a","model":"a/1","temperature":5,"max_tokens":99999})).expect("valid");
        assert_eq!(r.temperature, 2.0);
        assert_eq!(r.max_tokens, 4000);
        let r = p(json!({"index":"Zero-Knowledge","prompt":"a","model":"a/1","temperature":-1})).expect("valid");
        assert_eq!(r.temperature, 0.0);
        let (s, _, _) = err(json!({"index":"Zero-Knowledge","prompt":"a","model":"a/1","max_tokens":0}));
        assert_eq!(s, 400);
        let (s, _, _) = err(json!({"index":"Zero-Knowledge","prompt":"a","model":"a/1","max_tokens":"lots"}));
        assert_eq!(s, 400);
        let (s, _, _) = err(json!({"index":"Zero-Knowledge","prompt":"a","model":"a/1","temperature":"hot"}));
        assert_eq!(s, 400);
    }

    #[test]
    fn limits_on_messages() {
        let many: Vec<Value> = (0..101).map(|_| json!({"role":"user","content":"x"})).collect();
        let (_, e, _) = err(json!({"index":"Zero-Knowledge","model":"a/1","messages":many}));
        assert_eq!(e, "Invalid messages");
        let big = "x".repeat(MAX_CONTENT_BYTES + 1);
        let (_, e, m) = err(json!({"index":"Zero-Knowledge","model":"a/1","prompt":big}));
        assert_eq!(e, "Invalid messages");
        assert!(m.contains("256 KB"));
        let exact = "x".repeat(MAX_CONTENT_BYTES);
        assert!(p(json!({"index":"Zero-Knowledge","model":"a/1","prompt":exact})).is_ok());
    }

    #[test]
    fn bad_json_and_types() {
        assert_eq!(parse(b"{nope", D).expect_err("bad").error, "Invalid request");
        assert_eq!(parse(b"[1,2]", D).expect_err("array").error, "Invalid request");
        assert!(parse(&[0xff, 0xfe], D).expect_err("utf8").message.contains("UTF-8"));
        let (_, _, m) = err(json!({"index":"Zero-Knowledge","model":"a/1","prompt":"x","stream":"yes"}));
        assert!(m.contains("stream"));
        let (_, _, m) = err(json!({"index":"Zero-Knowledge","model":"a/1","prompt":"x","colour":"red"}));
        assert!(m.contains("colour"));
    }

    #[test]
    fn pass_through_strings_count_toward_the_content_cap() {
        let desc = |n: usize| json!([{"type": "function", "function": {"name": "f", "description": "x".repeat(n)}}]);
        // Keys and values inside the field count: type, function, function, name, f, description.
        let overhead = "typefunctionfunctionnamefdescription".len();
        let ok = p(json!({"index":"Zero-Knowledge","model":"a/1","prompt":"hi","tools": desc(MAX_CONTENT_BYTES - 2 - overhead)}));
        assert!(ok.is_ok(), "{:?}", ok.err().map(|e| e.message));
        let (s, e, m) = err(json!({"index":"Zero-Knowledge","model":"a/1","prompt":"hi","tools": desc(MAX_CONTENT_BYTES - 1 - overhead)}));
        assert_eq!((s, e), (400, "Invalid request"));
        assert!(m.contains("pass-through") && m.contains("262144"), "{m}");
    }

    #[test]
    fn invisible_characters_are_taken_out_and_tag_text_kept_for_screening() {
        let tagged: String = "hi".chars().map(|c| char::from_u32(0xE0000 + c as u32).expect("tag")).collect();
        let r = p(json!({"index":"Zero-Knowledge","model":"a/1","prompt":format!("a\u{200B}b{tagged}"),"user":format!("u{tagged}")}))
            .expect("valid");
        assert_eq!(r.messages[0].content, "ab");
        assert_eq!(r.extra["user"], "u");
        assert_eq!(r.hidden.iter().map(|h| (h.origin.as_str(), h.text.as_str())).collect::<Vec<_>>(), [("user", "hi"), ("field", "hi")]);
        let (s, _, m) = err(json!({"index":"Zero-Knowledge","model":"a/1","prompt":"x","response_format":{"a\u{202E}b": 1}}));
        assert_eq!(s, 400);
        assert!(m.contains("response_format") && m.contains("invisible"), "{m}");
    }

    #[test]
    fn a_policy_check_needs_no_model_or_index_but_checks_what_it_gets() {
        let check = |v: Value| parse_check(v.to_string().as_bytes(), D);
        let r = check(json!({"prompt": "hi"})).expect("valid");
        assert_eq!((r.index.as_str(), r.chain.len()), (ZERO_KNOWLEDGE, 0));
        assert_eq!(check(json!({"prompt": "hi", "model": "echo/x", "index": "docs"})).expect("valid").chain.len(), 1);
        assert!(check(json!({"prompt": "hi", "model": "no-slash"})).is_err(), "a model given is validated");
        assert!(check(json!({"prompt": "hi", "fallback_models": ["echo/x"]})).is_err(), "fallbacks need a model");
        assert!(check(json!({"prompt": "hi", "redundancy": {"on": ["never"]}})).is_err(), "the rest is validated as for chat");
        assert!(p(json!({"prompt": "hi", "index": "Zero-Knowledge"})).is_err(), "chat still needs a model");
    }

    #[test]
    fn passthrough_fields_are_kept() {
        let r = p(json!({"index":"Zero-Knowledge","model":"a/1","prompt":"x","tools":[{"type":"function"}],"stop":"END"})).expect("valid");
        assert!(r.extra.contains_key("tools"));
        assert_eq!(r.stop, vec!["END".to_owned()]);
    }
}
