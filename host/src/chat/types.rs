//! Host-side types of the chat path, independent of any plugin binding.

use std::time::Duration;

/// Roles the chat routes accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

/// `<provider>/<model_name>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelId {
    full: String,
    slash: usize,
}

impl ModelId {
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        match s.find('/') {
            Some(i) if i > 0 && i + 1 < s.len() && s.len() <= 200 => Ok(ModelId { full: s.to_owned(), slash: i }),
            _ => Err(format!("model `{s}` is not of the form `<provider>/<model_name>` (for example `echo/default`)")),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.full
    }

    pub fn provider(&self) -> &str {
        &self.full[..self.slash]
    }

    pub fn name(&self) -> &str {
        &self.full[self.slash + 1..]
    }
}

impl std::fmt::Display for ModelId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.full)
    }
}

/// Why an attempt failed; the names are the `redundancy.on` trigger names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trigger {
    Timeout,
    ServerError,
    RateLimit,
    ClientError,
}

impl Trigger {
    pub const ALL: [Trigger; 4] = [Trigger::Timeout, Trigger::ServerError, Trigger::RateLimit, Trigger::ClientError];

    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Timeout => "timeout",
            Trigger::ServerError => "server_error",
            Trigger::RateLimit => "rate_limit",
            Trigger::ClientError => "client_error",
        }
    }

    pub fn parse(s: &str) -> Option<Trigger> {
        Trigger::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// One entry of the failover chain.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainEntry {
    pub model: ModelId,
    /// Whole answer (non-streaming) or longest silence after the first token (streaming).
    pub timeout: Duration,
    /// First non-empty content delta (streaming only).
    pub first_token_timeout: Duration,
}

/// Token usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// Rough token count when the upstream reports none: one token per four
/// bytes of UTF-8, at least one per non-empty text (the usual rule of thumb
/// for English with BPE tokenizers).
pub fn estimate_tokens(text: &str) -> u64 {
    if text.is_empty() { 0 } else { (text.len() as u64).div_ceil(4) }
}

/// What a provider answered (non-streaming).
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub content: String,
    pub finish_reason: String,
    pub usage: Option<Usage>,
}

/// What one upstream stream event meant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamPiece {
    pub content: String,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    pub done: bool,
    pub state: String,
}

/// A failed attempt, classified for the failover chain.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptError {
    pub trigger: Trigger,
    /// Safe to show to the caller (no secrets, no upstream bodies beyond their message).
    pub message: String,
}

impl AttemptError {
    pub fn new(trigger: Trigger, message: impl Into<String>) -> Self {
        AttemptError { trigger, message: message.into() }
    }
}

/// The normalised request handed to a provider adapter.
#[derive(Debug, Clone, PartialEq)]
pub struct NormalizedRequest {
    pub messages: Vec<Message>,
    pub temperature: f32,
    pub max_tokens: u32,
    pub stream: bool,
    pub stop: Vec<String>,
    /// Pass-through OpenAI fields as one JSON object, or empty.
    pub extra_json: String,
}

/// Where and as whom to call a provider.
#[derive(Clone)]
pub struct UpstreamTarget {
    pub provider: String,
    pub plugin: String,
    pub base_url: String,
    pub api_key: Option<String>,
    pub config_json: String,
}

impl std::fmt::Debug for UpstreamTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTarget")
            .field("provider", &self.provider)
            .field("plugin", &self.plugin)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .finish()
    }
}

/// An HTTP request described by a provider adapter.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpRequestDesc {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids() {
        let m = ModelId::parse("openai/gpt-4o").expect("valid");
        assert_eq!(m.provider(), "openai");
        assert_eq!(m.name(), "gpt-4o");
        let m = ModelId::parse("ollama/library/llama3").expect("slashes in the name");
        assert_eq!(m.provider(), "ollama");
        assert_eq!(m.name(), "library/llama3");
        for bad in ["gpt-4o", "/x", "x/", ""] {
            assert!(ModelId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn triggers_round_trip() {
        for t in Trigger::ALL {
            assert_eq!(Trigger::parse(t.as_str()), Some(t));
        }
        assert_eq!(Trigger::parse("boom"), None);
    }

    #[test]
    fn token_estimate() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("a"), 1);
        assert_eq!(estimate_tokens("abcdefgh"), 2);
    }
}
