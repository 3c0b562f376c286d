//! `config-json` of the pii-dlp component.
//!
//! ```json
//! {"pii": "flag|redact|block|allow", "dlp": "flag|redact|block|allow",
//!  "custom": [{"name": "employee_id", "pattern": "EMP-[0-9]{6}", "action": "redact"}]}
//! ```
//! Defaults: `pii` = `flag`, `dlp` = `block`; a custom rule without `action`
//! follows `dlp`. Unknown keys are ignored; malformed JSON means defaults.

use std::cell::RefCell;
use std::collections::HashMap;

/// What to do with findings of one class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Want {
    /// Ignore the finding entirely.
    Allow,
    /// Report it (reason), keep the text.
    Flag,
    /// Report it and replace it with a placeholder.
    Redact,
    /// Report it and refuse the text.
    Block,
}

impl Want {
    fn parse(s: Option<&str>, default: Want) -> Want {
        match s {
            Some("allow") => Want::Allow,
            Some("flag") => Want::Flag,
            Some("redact") => Want::Redact,
            Some("block") => Want::Block,
            _ => default,
        }
    }
}

/// An operator-defined pattern.
#[derive(Debug, Clone)]
pub struct Custom {
    /// Sanitised name (`[a-z0-9_]`, at most 32 characters).
    pub name: String,
    /// The compiled pattern.
    pub regex: regex::Regex,
    /// Its own action, if set.
    pub want: Option<Want>,
}

/// Parsed configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Action for personal data.
    pub pii: Want,
    /// Action for secrets.
    pub dlp: Want,
    /// Custom patterns that compiled.
    pub custom: Vec<Custom>,
    /// Names of custom patterns that did not compile (reported, value-free).
    pub invalid: Vec<String>,
}

/// Most custom patterns honoured, and the longest pattern text.
const MAX_CUSTOM: usize = 32;
const MAX_PATTERN: usize = 1024;

thread_local! {
    /// Compiled custom patterns by source: a warm instance compiles each once.
    static CACHE: RefCell<HashMap<String, regex::Regex>> = RefCell::new(HashMap::new());
}

/// Forget compiled custom patterns (benchmarks use it to price a cold instance).
pub fn clear_cache() {
    CACHE.with(|c| c.borrow_mut().clear());
}

fn compile(pattern: &str) -> Option<regex::Regex> {
    if let Some(r) = CACHE.with(|c| c.borrow().get(pattern).cloned()) {
        return Some(r);
    }
    let r = regex::RegexBuilder::new(pattern).size_limit(1 << 20).dfa_size_limit(1 << 20).build().ok()?;
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= 4 * MAX_CUSTOM {
            c.clear();
        }
        c.insert(pattern.to_owned(), r.clone());
    });
    Some(r)
}

fn sanitise(name: &str) -> String {
    let s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).take(32).collect();
    if s.is_empty() { "pattern".into() } else { s }
}

/// `pii` and `dlp` of a config that is one flat object of plain strings
/// (`{"pii":"redact","dlp":"block"}`, what policies send on every call),
/// read without building a `serde_json::Value`; `None` for anything else
/// (escapes, other value types, a `custom` list, malformed JSON), which
/// [`Config::parse`] then reads the general way. For the strings it
/// accepts, the result is the general reading's (a unit test compares
/// them on generated and mutated configs): JSON whitespace only, no
/// control bytes in strings, no trailing comma or text, and the last of
/// duplicate keys wins as in a `serde_json` map.
fn flat(config_json: &str) -> Option<(Option<&str>, Option<&str>)> {
    let b = config_json.as_bytes();
    let mut i = 0;
    let ws = |i: &mut usize| {
        while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\n' | b'\r') {
            *i += 1;
        }
    };
    let string = |i: &mut usize| -> Option<&str> {
        if b.get(*i) != Some(&b'"') {
            return None;
        }
        let start = *i + 1;
        let len = b[start..].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
        if b[start + len] != b'"' {
            return None;
        }
        *i = start + len + 1;
        Some(&config_json[start..start + len])
    };
    let (mut pii, mut dlp) = (None, None);
    ws(&mut i);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    ws(&mut i);
    if b.get(i) == Some(&b'}') {
        i += 1;
    } else {
        loop {
            let key = string(&mut i)?;
            ws(&mut i);
            if b.get(i) != Some(&b':') {
                return None;
            }
            i += 1;
            ws(&mut i);
            let value = string(&mut i)?;
            match key {
                "pii" => pii = Some(value),
                "dlp" => dlp = Some(value),
                _ => {}
            }
            ws(&mut i);
            match b.get(i) {
                Some(b',') => {
                    i += 1;
                    ws(&mut i);
                }
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    ws(&mut i);
    (i == b.len()).then_some((pii, dlp))
}

impl Config {
    /// Parse leniently.
    pub fn parse(config_json: &str) -> Config {
        if let Some((pii, dlp)) = flat(config_json) {
            return Config {
                pii: Want::parse(pii, Want::Flag),
                dlp: Want::parse(dlp, Want::Block),
                custom: Vec::new(),
                invalid: Vec::new(),
            };
        }
        Self::parse_value(config_json)
    }

    /// The general reading, through a `serde_json::Value`.
    fn parse_value(config_json: &str) -> Config {
        let v: serde_json::Value = serde_json::from_str(config_json).unwrap_or_default();
        let mut cfg = Config {
            pii: Want::parse(v.get("pii").and_then(|x| x.as_str()), Want::Flag),
            dlp: Want::parse(v.get("dlp").and_then(|x| x.as_str()), Want::Block),
            custom: Vec::new(),
            invalid: Vec::new(),
        };
        for rule in v.get("custom").and_then(|c| c.as_array()).into_iter().flatten().take(MAX_CUSTOM) {
            let name = sanitise(rule.get("name").and_then(|n| n.as_str()).unwrap_or("pattern"));
            let pattern = rule.get("pattern").and_then(|p| p.as_str()).unwrap_or("");
            let want = rule.get("action").and_then(|a| a.as_str()).map(|a| Want::parse(Some(a), cfg.dlp));
            match (pattern.is_empty() || pattern.len() > MAX_PATTERN).then_some(()).map_or_else(|| compile(pattern), |_| None) {
                Some(regex) => cfg.custom.push(Custom { name, regex, want }),
                None => cfg.invalid.push(name),
            }
        }
        cfg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flat_reading_is_the_general_one() {
        let mut configs: Vec<String> = [
            r#"{"pii":"redact","dlp":"block"}"#,
            r#" { "pii" : "flag" , "dlp" : "allow" } "#,
            "{\n\t\"dlp\":\"redact\",\r\n\"pii\":\"block\"}",
            r#"{"pii":"redact","pii":"allow"}"#,
            r#"{"pii":"redact","dlp":"block",}"#,
            r#"{"pii":"red\u0061ct"}"#,
            r#"{"p\u0069i":"redact"}"#,
            r#"{"pii":"redact"} x"#,
            r#"{"pii":5,"dlp":"flag"}"#,
            r#"{"pii":null,"dlp":"flag"}"#,
            r#"{"custom":"x","pii":"redact"}"#,
            r#"{"custom":[{"name":"a","pattern":"b+"}],"pii":"redact"}"#,
            r#"{}"#,
            r#"{ }"#,
            "",
            "null",
            r#"["pii","redact"]"#,
            r#"{"pii":"redact""dlp":"block"}"#,
            r#"{"pii":"redact",,"dlp":"block"}"#,
            r#"{"pii" "redact"}"#,
            "{\"pii\":\"re\u{1}dact\"}",
            "{\"pii\":\"redact\"}\u{feff}",
            "\u{a0}{\"pii\":\"redact\"}",
            r#"{"pii":"rédact","dlp":"block"}"#,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        // Byte-level mutations of the valid ones (fixed-seed xorshift).
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let alphabet = b"{}[]:,\" \t\n\\0123456789abcdefilnoprstu\x01\xc3\xa9";
        for k in 0..20_000 {
            let mut b = configs[k % 4].clone().into_bytes();
            for _ in 0..1 + k % 3 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x >> 8) as usize % (b.len() + 1);
                let c = alphabet[(x >> 40) as usize % alphabet.len()];
                match x % 3 {
                    0 if at < b.len() => b[at] = c,
                    1 if at < b.len() => {
                        b.remove(at);
                    }
                    _ => b.insert(at, c),
                }
            }
            configs.push(String::from_utf8_lossy(&b).into_owned());
        }
        let mut flat_ones = 0;
        for c in &configs {
            let (a, b) = (Config::parse(c), Config::parse_value(c));
            assert_eq!((a.pii, a.dlp, a.custom.len(), &a.invalid), (b.pii, b.dlp, b.custom.len(), &b.invalid), "{c:?}");
            flat_ones += usize::from(flat(c).is_some());
        }
        assert!(flat_ones > 1000, "{flat_ones}");
    }

    #[test]
    fn parses_actions_and_patterns() {
        let c = Config::parse(
            r#"{"pii":"redact","dlp":"flag","custom":[{"name":"Employee ID","pattern":"EMP-[0-9]{6}"},{"name":"bad","pattern":"("}]}"#,
        );
        assert_eq!((c.pii, c.dlp), (Want::Redact, Want::Flag));
        assert_eq!(c.custom.len(), 1);
        assert_eq!(c.custom[0].name, "employee_id");
        assert_eq!(c.invalid, vec!["bad".to_string()]);
        let d = Config::parse("nonsense");
        assert_eq!((d.pii, d.dlp), (Want::Flag, Want::Block));
    }
}
