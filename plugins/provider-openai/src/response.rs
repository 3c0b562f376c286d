//! A complete (non-streaming) OpenAI response → [`Completion`].

use gatehouse_sdk::json::Obj;
use gatehouse_sdk::provider::{Completion, ProviderError, Upstream, Usage};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::errors::{error_object, http_error, malformed, object_error};

/// Parse a response of any status: 2xx → the first choice's text, finish
/// reason and usage; anything else → a classified [`ProviderError`].
pub fn parse_response(up: &Upstream, status: u16, body: &str) -> Result<Completion, ProviderError> {
    let key = up.api_key.as_deref();
    if !(200..300).contains(&status) {
        return Err(http_error(status, body, key));
    }
    match Typed::read(body).and_then(Typed::completion) {
        Some(c) => Ok(c),
        None => read_value(body, key),
    }
}

/// [`parse_response`] of a 2xx body through a `serde_json::Value`: every shape, every error.
fn read_value(body: &str, key: Option<&str>) -> Result<Completion, ProviderError> {
    let v: Value = serde_json::from_str(body).map_err(|e| malformed(format!("body is not JSON ({e})")))?;
    if let Some(err) = error_object(&v) {
        return Err(object_error(&err, key));
    }
    let choice = first_choice(&v).ok_or_else(|| malformed("no `choices[0]`"))?;
    let message = choice.get("message").ok_or_else(|| malformed("no `choices[0].message`"))?;
    let content = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        // `null` when the model answered with tool calls or a refusal only.
        None | Some(Value::Null) => String::new(),
        Some(_) => return Err(malformed("`choices[0].message.content` is not a string")),
    };
    let finish_reason = choice.get("finish_reason").and_then(Value::as_str).unwrap_or("stop").to_string();
    Ok(Completion { content, finish_reason, usage: usage_of(&v) })
}

/// The shape nearly every answer and stream chunk has, read without building
/// a `serde_json::Value` tree: unknown fields are skipped, not stored. It
/// reads what the `Value`-based code below reads and gives the same result;
/// for anything else (an error object, a field of another type, no
/// `choices`) it gives up and that code decides, so odd answers keep their
/// exact handling. Tests compare the two on every fixture.
#[derive(Deserialize)]
pub struct Typed {
    choices: Option<Vec<Obj<TypedChoice>>>,
    usage: Option<Obj<TypedUsage>>,
    x_groq: Option<Obj<TypedGroq>>,
    error: Option<IgnoredAny>,
    object: Option<String>,
}

#[derive(Deserialize)]
struct TypedChoice {
    index: Option<u64>,
    message: Option<Obj<TypedMessage>>,
    delta: Option<Obj<TypedMessage>>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct TypedMessage {
    content: Option<String>,
}

#[derive(Deserialize)]
struct TypedUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct TypedGroq {
    usage: Option<Obj<TypedUsage>>,
}

/// What one stream chunk carries: text, finish reason, usage.
pub type ChunkParts = (String, Option<String>, Option<Usage>);

impl Typed {
    /// `None` when the text does not have the expected shape, or carries an error.
    pub fn read(json: &str) -> Option<Typed> {
        let Obj(t) = serde_json::from_str::<Obj<Typed>>(json).ok()?;
        (t.error.is_none() && t.object.as_deref() != Some("error") && t.choices.is_some()).then_some(t)
    }

    /// The choice with `index` 0, or the first one listed.
    fn take_first_choice(&mut self) -> Option<TypedChoice> {
        let choices = self.choices.as_mut()?;
        let at = choices.iter().position(|c| c.0.index == Some(0)).or((!choices.is_empty()).then_some(0))?;
        Some(choices.swap_remove(at).0)
    }

    fn usage(&mut self) -> Option<Usage> {
        let Obj(u) = self.usage.take().or_else(|| self.x_groq.take().and_then(|x| x.0.usage))?;
        let count = |n: Option<u64>| n.map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX));
        Some(Usage { prompt_tokens: count(u.prompt_tokens), completion_tokens: count(u.completion_tokens) })
    }

    /// A complete answer; `None` when it has no choice or the choice no message.
    pub fn completion(mut self) -> Option<Completion> {
        let choice = self.take_first_choice()?;
        let content = choice.message?.0.content.unwrap_or_default();
        Some(Completion { content, finish_reason: choice.finish_reason.unwrap_or_else(|| "stop".to_string()), usage: self.usage() })
    }

    /// A stream chunk (`choices` may be empty: the usage-only chunk).
    pub fn chunk(mut self) -> ChunkParts {
        let (content, finish) = match self.take_first_choice() {
            Some(c) => (c.delta.and_then(|d| d.0.content).unwrap_or_default(), c.finish_reason),
            None => (String::new(), None),
        };
        (content, finish, self.usage())
    }
}

/// The choice with `index` 0, or the first one listed.
pub fn first_choice(v: &Value) -> Option<&Value> {
    let choices = v.get("choices")?.as_array()?;
    choices.iter().find(|c| c.get("index").and_then(Value::as_u64) == Some(0)).or_else(|| choices.first())
}

/// `usage`, or Groq's `x_groq.usage` on streams; `None` when absent or null.
pub fn usage_of(v: &Value) -> Option<Usage> {
    let u = v.get("usage").filter(|u| u.is_object()).or_else(|| v.get("x_groq").and_then(|x| x.get("usage")).filter(|u| u.is_object()))?;
    let count = |k: &str| u.get(k).and_then(Value::as_u64).map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    Some(Usage { prompt_tokens: count("prompt_tokens").unwrap_or(0), completion_tokens: count("completion_tokens").unwrap_or(0) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{class_name, upstream};

    #[test]
    fn openai_completion() {
        let c = parse_response(&upstream(None, ""), 200, include_str!("../fixtures/completion.json")).expect("ok");
        assert_eq!(c.content, "Hello! How can I help you today?");
        assert_eq!(c.finish_reason, "stop");
        let u = c.usage.expect("usage");
        assert_eq!((u.prompt_tokens, u.completion_tokens), (19, 9));
    }

    #[test]
    fn tool_call_completion_has_empty_content() {
        let c = parse_response(&upstream(None, ""), 200, include_str!("../fixtures/completion_tool_calls.json")).expect("ok");
        assert_eq!(c.content, "");
        assert_eq!(c.finish_reason, "tool_calls");
    }

    #[test]
    fn ollama_completion_with_length_finish() {
        let c = parse_response(&upstream(None, ""), 200, include_str!("../fixtures/completion_ollama.json")).expect("ok");
        assert_eq!(c.content, "The sky is blue because");
        assert_eq!(c.finish_reason, "length");
        assert_eq!(c.usage.map(|u| u.completion_tokens), Some(5));
    }

    /// The typed reading gives what the `Value` reading gives, wherever it answers at all.
    #[test]
    fn typed_and_value_readings_agree() {
        let bodies = [
            include_str!("../fixtures/completion.json"),
            include_str!("../fixtures/completion_ollama.json"),
            include_str!("../fixtures/completion_tool_calls.json"),
            r#"{"choices":[{"index":1,"message":{"content":"second"}},{"index":0,"message":{"content":"first"},"finish_reason":"length"}]}"#,
            r#"{"choices":[{"message":{"content":"no index"}}],"usage":null,"x_groq":{"usage":{"prompt_tokens":3,"completion_tokens":4}}}"#,
            r#"{"choices":[{"message":{"content":"e\u00e9\n\"q\""},"finish_reason":null}],"usage":{"prompt_tokens":99999999999}}"#,
            r#"{"choices":[{"message":{}}],"usage":{}}"#,
            r#"{"choices":[{"message":{"content":null}}],"error":null}"#,
            r#"{"choices":[{"message":{"content":"x"},"finish_reason":7}]}"#,
            r#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":"1"}}"#,
            r#"{"choices":[{"message":{"content":"x"}}],"usage":5}"#,
            r#"{"choices":[{"message":{"content":"x"}}],"error":{"message":"boom","type":"server_error"}}"#,
            r#"{"choices":[{"message":{"content":"x"}}],"error":"plain"}"#,
            r#"{"choices":[{"message":{"content":"x"}}],"object":"error","message":"old vllm"}"#,
            r#"{"choices":[{"message":{"content":5}}]}"#,
            r#"{"choices":[{"index":"0","message":{"content":"x"}}]}"#,
            r#"{"choices":[]}"#,
            r#"{"choices":null}"#,
            r#"{"choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"choices":[{"message":["x"]}]}"#,
            r#"{"choices":[[0,{"content":"x"}]]}"#,
            r#"{"choices":[{"message":{"content":"x"}}],"usage":[1,2]}"#,
            r#"{"choices":[{"message":{"content":"x"}}],"usage":null,"x_groq":[[1,2]]}"#,
            r#"[[{"message":{"content":"x"}}]]"#,
            r#"{}"#,
            "[]",
            "",
        ];
        let mut typed = 0;
        for body in bodies {
            let slow = read_value(body, None);
            match Typed::read(body).and_then(Typed::completion) {
                Some(fast) => {
                    typed += 1;
                    let slow = slow.unwrap_or_else(|e| panic!("{body}: typed Ok, value Err {}", e.message));
                    assert_eq!(fast.content, slow.content, "{body}");
                    assert_eq!(fast.finish_reason, slow.finish_reason, "{body}");
                    let pair = |u: Option<Usage>| u.map(|u| (u.prompt_tokens, u.completion_tokens));
                    assert_eq!(pair(fast.usage), pair(slow.usage), "{body}");
                }
                None => {
                    // Whatever the Value reading says stands; parse_response gives exactly that.
                    let via = parse_response(&upstream(None, ""), 200, body);
                    assert_eq!(via.is_ok(), slow.is_ok(), "{body}");
                }
            }
        }
        assert_eq!(typed, 8, "the usual shapes take the typed reading");
    }

    #[test]
    fn malformed_2xx_is_a_server_error() {
        for body in ["", "{\"id\":", "[]", "{\"choices\":[]}", "{\"choices\":[{\"message\":{\"content\":5}}]}"] {
            let e = parse_response(&upstream(None, ""), 200, body).expect_err(body);
            assert_eq!(class_name(e.class), "server-error", "{body}");
            assert!(e.message.starts_with("malformed upstream response"), "{}", e.message);
        }
    }

    #[test]
    fn error_object_in_a_200_is_an_error() {
        let body = r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}"#;
        let e = parse_response(&upstream(None, ""), 200, body).expect_err("error");
        assert_eq!(class_name(e.class), "server-error");
        assert!(e.message.contains("The server had an error"));
    }

    #[test]
    fn error_statuses() {
        let up = upstream(Some("sk-proj-abcdefghijklmnop"), "");
        let e = parse_response(&up, 401, include_str!("../fixtures/error_401.json")).expect_err("401");
        assert_eq!(class_name(e.class), "client-error");
        assert!(!e.message.contains("mnop"));
        let e = parse_response(&up, 429, include_str!("../fixtures/error_429.json")).expect_err("429");
        assert_eq!(class_name(e.class), "rate-limit");
        let e = parse_response(&up, 503, "upstream connect error").expect_err("503");
        assert_eq!(class_name(e.class), "server-error");
        let e = parse_response(&up, 504, "").expect_err("504");
        assert_eq!(class_name(e.class), "timeout");
    }
}
