//! Failure modes chosen by the model name, and the deterministic answer.

use std::time::Duration;

use serde_json::Value;

/// What the mock does with a request, from the model name's first
/// `-`-separated word (see the module docs of `mock_upstream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Answer normally (`ok-*` and any model without a mode word).
    Ok,
    /// Answer with this HTTP status and the format's error body (`fail500-*`).
    Fail(u16),
    /// Wait, then answer normally (`slow-<ms>-*`).
    Slow(Duration),
    /// Never answer (`hang-*`).
    Hang,
    /// Send part of the answer, then cut the connection (`drop-*`).
    Drop,
    /// Stream: role / `message_start` at once, first text after a delay (`slowfirst-<ms>-*`).
    SlowFirst(Duration),
    /// Stream: pause after the first text delta (`stall-<ms>-*`).
    Stall(Duration),
    /// 200 with a broken JSON body or stream event (`malformed-*`).
    Malformed,
    /// Stream: one text delta, then the format's in-band error event (`streamerror-*`).
    StreamError,
}

impl Mode {
    /// Parse the mode from a model name; `Err` for a mode word with a bad
    /// number (`slow-abc`), so that a typo in a test is a loud 400.
    pub fn parse(model: &str) -> Result<Mode, String> {
        let mut words = model.split('-');
        let head = words.next().unwrap_or("");
        let millis = |what: &str, w: Option<&str>| -> Result<Duration, String> {
            w.and_then(|w| w.parse::<u64>().ok())
                .map(Duration::from_millis)
                .ok_or_else(|| format!("model `{model}`: `{what}` needs milliseconds, e.g. `{what}-250-x`"))
        };
        Ok(match head {
            "ok" => Mode::Ok,
            "slow" => Mode::Slow(millis("slow", words.next())?),
            "slowfirst" => Mode::SlowFirst(millis("slowfirst", words.next())?),
            "stall" => Mode::Stall(millis("stall", words.next())?),
            "hang" => Mode::Hang,
            "drop" => Mode::Drop,
            "malformed" => Mode::Malformed,
            "streamerror" => Mode::StreamError,
            _ => match head.strip_prefix("fail").map(str::parse::<u16>) {
                Some(Ok(status)) if (400..600).contains(&status) => Mode::Fail(status),
                Some(Ok(_)) => {
                    return Err(format!("model `{model}`: failNNN needs a status from 400 to 599"));
                }
                _ => Mode::Ok,
            },
        })
    }
}

/// The text of a message `content`: a string, or the `text` of its parts
/// (OpenAI content parts, Anthropic content blocks).
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// `mock answer to: <last user message>`. A user message containing
/// `LEAK-SYSTEM` makes the model "leak": it answers with the system message
/// (OpenAI format, where the system prompt is a message) — for canary tests.
pub fn answer_for(messages: &[Value]) -> String {
    let content_of = |role: &str, last: bool| {
        let mut it: Box<dyn Iterator<Item = &Value>> = if last { Box::new(messages.iter().rev()) } else { Box::new(messages.iter()) };
        it.find(|m| m.get("role").and_then(Value::as_str) == Some(role))
            .and_then(|m| m.get("content"))
            .map(content_text)
            .unwrap_or_default()
    };
    let last_user = content_of("user", true);
    if last_user.contains("LEAK-SYSTEM") {
        return format!("mock answer to: {}", content_of("system", false));
    }
    format!("mock answer to: {last_user}")
}

/// The answer cut into stream pieces: each word with the whitespace after it.
/// Joined, they give the answer back exactly.
pub fn pieces(answer: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_space = false;
    for c in answer.chars() {
        if !c.is_whitespace() && in_space {
            out.push(std::mem::take(&mut current));
        }
        in_space = c.is_whitespace();
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The answer as it is sent: its pieces, cut to `max_tokens` pieces (then
/// the finish reason is "length"). Returns (pieces, truncated).
pub fn limited_pieces(answer: &str, max_tokens: Option<u64>) -> (Vec<String>, bool) {
    let mut all = pieces(answer);
    let limit = max_tokens.and_then(|m| usize::try_from(m).ok()).unwrap_or(usize::MAX);
    let truncated = all.len() > limit;
    all.truncate(limit);
    (all, truncated)
}

/// Mock prompt tokens: whitespace-separated words of every text field sent.
pub fn prompt_tokens(messages: &[Value], system: Option<&Value>) -> u64 {
    let words = |v: &Value| content_text(v).split_whitespace().count() as u64;
    let msgs: u64 = messages.iter().filter_map(|m| m.get("content")).map(words).sum();
    msgs + system.map(words).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn modes() {
        let ms = Duration::from_millis;
        assert_eq!(Mode::parse("ok-a"), Ok(Mode::Ok));
        assert_eq!(Mode::parse("gpt-4o"), Ok(Mode::Ok));
        assert_eq!(Mode::parse("failover-x"), Ok(Mode::Ok));
        assert_eq!(Mode::parse("fail500-a"), Ok(Mode::Fail(500)));
        assert_eq!(Mode::parse("fail429"), Ok(Mode::Fail(429)));
        assert_eq!(Mode::parse("slow-250-a"), Ok(Mode::Slow(ms(250))));
        assert_eq!(Mode::parse("slowfirst-10-a"), Ok(Mode::SlowFirst(ms(10))));
        assert_eq!(Mode::parse("stall-5-a"), Ok(Mode::Stall(ms(5))));
        assert_eq!(Mode::parse("hang-a"), Ok(Mode::Hang));
        assert_eq!(Mode::parse("drop-a"), Ok(Mode::Drop));
        assert_eq!(Mode::parse("malformed-a"), Ok(Mode::Malformed));
        assert_eq!(Mode::parse("streamerror-a"), Ok(Mode::StreamError));
        assert!(Mode::parse("slow-x").is_err());
        assert!(Mode::parse("fail200-x").is_err());
    }

    #[test]
    fn answer_and_pieces() {
        let msgs = vec![
            json!({"role":"user","content":"first"}),
            json!({"role":"assistant","content":"a"}),
            json!({"role":"user","content":[{"type":"text","text":"hello  world"}]}),
        ];
        let a = answer_for(&msgs);
        assert_eq!(a, "mock answer to: hello  world");
        let p = pieces(&a);
        assert_eq!(p, ["mock ", "answer ", "to: ", "hello  ", "world"]);
        assert_eq!(p.concat(), a);
        assert_eq!(limited_pieces(&a, Some(2)), (vec!["mock ".to_string(), "answer ".to_string()], true));
        assert_eq!(prompt_tokens(&msgs, Some(&json!("be brief"))), 1 + 1 + 2 + 2);
    }
}
