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

impl Config {
    /// Parse leniently.
    pub fn parse(config_json: &str) -> Config {
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
