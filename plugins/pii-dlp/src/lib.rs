//! `pii-dlp`: finds personal data (PII) and secrets (DLP) in text and says
//! what to do with them, as the policy asks through `config-json` (see
//! [`config`]): `allow` (ignore), `flag` (report), `redact` (replace with a
//! placeholder) or `block`.
//!
//! # Detectors
//! - PII ([`pii`]): emails; phone numbers (E.164 `+…`, North American, national
//!   formats with a leading 0, any 7-15 digits after a phone word); payment
//!   cards (issuer prefix + Luhn); IBANs (country length + mod 97); IPv4 and
//!   IPv6; US SSN; Canadian SIN (Luhn, next to a SIN word); Spanish DNI/NIE
//!   (control letter); UK National Insurance numbers.
//! - DLP ([`dlp`]): AWS access key ids and secret keys, GitHub tokens
//!   (`ghp_`… and `github_pat_`), Slack tokens and webhooks, Stripe secret keys,
//!   Google API keys, LLM-provider keys (OpenAI `sk-proj-`/`sk-svcacct-`/`sk-…`,
//!   Anthropic `sk-ant-`, Hugging Face `hf_`), GitLab `glpat-` tokens,
//!   Gatehouse's own API keys (`sk-` + 43 base64url), JWTs, PEM private-key blocks, credentials in URLs, and
//!   assignments such as `password=…`, `api_key: "…"`, `"client_secret": "…"`.
//! - Custom patterns from the config (`regex` crate), kind `custom:<name>`.
//!
//! All built-in detectors are hand-written single passes: nothing is compiled
//! or built at instantiation, so a fresh instance per call costs nothing
//! extra. Custom patterns are compiled per instance (cached per pattern in a
//! warm instance); an operator with many or heavy custom patterns should give
//! this plugin a warm instance pool.
//!
//! # Verdicts
//! One per text. `action` is the strongest wanted action among the findings
//! (`monitor` strictness caps it at `flag`); `score` the highest detector
//! confidence; `reasons` are value-free (`pii:email`, `dlp:aws_access_key`,
//! `dlp:custom:employee_id`, `config:invalid_custom_pattern:<name>`);
//! `redactions` cover the findings whose action is `redact`, with byte spans
//! and placeholders `[EMAIL_1]`, `[AWS_ACCESS_KEY_2]`, `[EMPLOYEE_ID_1]`: the
//! length depends only on kind and index, numbering runs per kind across all
//! texts of one call, and the same value gets the same placeholder, so the
//! host can restore them in the answer (even across stream chunks).

#![warn(missing_docs)]

pub mod blocks;
pub mod checks;
pub mod config;
pub mod dlp;
pub mod finding;
pub mod pii;

use std::borrow::Cow;
use std::collections::BTreeMap;

use config::{Config, Want};
use finding::{Class, Finding};
use gatehouse_sdk::shield as api;
use gatehouse_sdk::shield::{PluginInfo, PluginKind};

/// A span to replace (plain mirror of the WIT record).
#[derive(Debug, Clone, PartialEq)]
pub struct Redaction {
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset after the last byte.
    pub end: usize,
    /// Kind of finding (never the value).
    pub kind: String,
    /// Placeholder to put in its place.
    pub replacement: String,
}

/// The verdict for one text (plain mirror of the WIT record).
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Strongest wanted action; `Allow` if nothing to report.
    pub action: Want,
    /// Highest confidence among reported findings, 0 if none.
    pub score: f32,
    /// Value-free reasons, deduplicated, in order of first appearance.
    pub reasons: Vec<String>,
    /// Spans to replace (findings whose action is `redact`).
    pub redactions: Vec<Redaction>,
}

/// All findings in `text`, overlaps resolved, sorted by start.
pub fn find(text: &str, cfg: &Config) -> Vec<Finding> {
    let mut all = Vec::new();
    let blocks = blocks::Blocks::new(text.as_bytes());
    pii::scan_in(text, &blocks, &mut all);
    dlp::scan_in(text, &blocks, &mut all);
    for (i, c) in cfg.custom.iter().enumerate() {
        for m in c.regex.find_iter(text).take(256) {
            all.push(Finding {
                start: m.start(),
                end: m.end(),
                kind: format!("custom:{}", c.name).into(),
                class: Class::Custom(i),
                confidence: 1.0,
            });
        }
    }
    finding::resolve(all)
}

/// Placeholder label of a kind: `email` -> `EMAIL`, `custom:employee_id` -> `EMPLOYEE_ID`.
fn label(kind: &str) -> String {
    kind.strip_prefix("custom:").unwrap_or(kind).to_ascii_uppercase()
}

/// Inspect `texts`. `monitor` caps every action at `flag`.
pub fn inspect(config_json: &str, monitor: bool, texts: &[String]) -> Vec<Decision> {
    let cfg = Config::parse(config_json);
    // BTreeMap, not HashMap: a HashMap's RandomState asks the host for random
    // bytes (a WASI call) in every fresh instance; these maps are tiny. Keys
    // borrow the kind and the text (no copies per finding).
    let mut counters: BTreeMap<Cow<'static, str>, u32> = BTreeMap::new();
    let mut placeholders: BTreeMap<(Cow<'static, str>, &str), String> = BTreeMap::new();
    texts
        .iter()
        .map(|text| {
            let mut d = Decision { action: Want::Allow, score: 0.0, reasons: Vec::new(), redactions: Vec::new() };
            for name in &cfg.invalid {
                d.reasons.push(format!("config:invalid_custom_pattern:{name}"));
            }
            for f in find(text, &cfg) {
                let (want, prefix) = match f.class {
                    Class::Pii => (cfg.pii, "pii"),
                    Class::Dlp => (cfg.dlp, "dlp"),
                    Class::Custom(i) => (cfg.custom.get(i).and_then(|c| c.want).unwrap_or(cfg.dlp), "dlp"),
                };
                let want = if monitor { want.min(Want::Flag) } else { want };
                if want == Want::Allow {
                    continue;
                }
                d.action = d.action.max(want);
                d.score = d.score.max(f.confidence);
                // `reason == "{prefix}:{kind}"`, without formatting it first.
                let same = |r: &String| r.strip_prefix(prefix).and_then(|r| r.strip_prefix(':')) == Some(&*f.kind);
                if !d.reasons.iter().any(same) {
                    d.reasons.push(format!("{prefix}:{}", f.kind));
                }
                if want == Want::Redact {
                    let key = (f.kind.clone(), &text[f.start..f.end]);
                    let replacement = placeholders
                        .entry(key)
                        .or_insert_with(|| {
                            let n = counters.entry(f.kind.clone()).or_insert(0);
                            *n += 1;
                            format!("[{}_{}]", label(&f.kind), n)
                        })
                        .clone();
                    d.redactions.push(Redaction { start: f.start, end: f.end, kind: f.kind.to_string(), replacement });
                }
            }
            d
        })
        .collect()
}

/// The component's export.
pub struct PiiDlp;

impl api::Guest for PiiDlp {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "pii-dlp".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Shield,
            description: "PII (emails, phones, cards, IBANs, IPs, national ids) and secrets (cloud keys, tokens, private keys), with redaction placeholders".into(),
        }
    }

    fn inspect(request: api::InspectRequest) -> Vec<api::Verdict> {
        let monitor = matches!(request.strictness, api::Strictness::Monitor);
        inspect(&request.config_json, monitor, &request.texts)
            .into_iter()
            .map(|d| api::Verdict {
                action: match d.action {
                    Want::Allow => api::Action::Allow,
                    Want::Flag => api::Action::Flag,
                    Want::Redact => api::Action::Redact,
                    Want::Block => api::Action::Block,
                },
                score: d.score,
                reasons: d.reasons,
                redactions: d
                    .redactions
                    .into_iter()
                    .map(|r| api::Redaction {
                        start: u32::try_from(r.start).unwrap_or(u32::MAX),
                        end: u32::try_from(r.end).unwrap_or(u32::MAX),
                        kind: r.kind,
                        replacement: r.replacement,
                    })
                    .collect(),
            })
            .collect()
    }

    fn make_canary(_seed: String) -> Option<api::Canary> {
        None
    }
}

gatehouse_sdk::export_shield!(PiiDlp);

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(text: &str, d: &Decision) -> String {
        let mut out = text.to_owned();
        for r in d.redactions.iter().rev() {
            out.replace_range(r.start..r.end, &r.replacement);
        }
        out
    }

    #[test]
    fn placeholders_are_stable_across_texts_and_value_free() {
        let texts =
            vec!["Mail ann@example.com and bob@example.org".to_owned(), "again ann@example.com, card 4111 1111 1111 1111".to_owned()];
        let v = inspect(r#"{"pii":"redact","dlp":"block"}"#, false, &texts);
        assert_eq!(v[0].action, Want::Redact);
        assert_eq!(apply(&texts[0], &v[0]), "Mail [EMAIL_1] and [EMAIL_2]");
        assert_eq!(apply(&texts[1], &v[1]), "again [EMAIL_1], card [CARD_NUMBER_1]");
        assert_eq!(v[1].reasons, vec!["pii:email".to_string(), "pii:card_number".to_string()]);
        for d in &v {
            assert!(d.reasons.iter().all(|r| !r.contains('@') && !r.contains("4111")));
        }
    }

    #[test]
    fn actions_follow_the_config() {
        let text = vec!["deploy with key AKIAIOSFODNN7EXAMPLE and mail ann@example.com".to_owned()];
        let v = inspect(r#"{"pii":"flag","dlp":"block"}"#, false, &text);
        assert_eq!(v[0].action, Want::Block);
        assert_eq!(v[0].reasons, vec!["dlp:aws_access_key".to_string(), "pii:email".to_string()]);
        assert!(v[0].redactions.is_empty());
        let v = inspect(r#"{"pii":"redact","dlp":"allow"}"#, false, &text);
        assert_eq!(v[0].action, Want::Redact);
        assert_eq!(apply(&text[0], &v[0]), "deploy with key AKIAIOSFODNN7EXAMPLE and mail [EMAIL_1]");
        let v = inspect(r#"{"pii":"allow","dlp":"allow"}"#, false, &text);
        assert_eq!(v[0], Decision { action: Want::Allow, score: 0.0, reasons: vec![], redactions: vec![] });
        let v = inspect(r#"{"pii":"redact","dlp":"block"}"#, true, &text);
        assert_eq!(v[0].action, Want::Flag, "monitor never blocks or rewrites");
    }

    #[test]
    fn custom_patterns() {
        let cfg = r#"{"pii":"flag","dlp":"block","custom":[{"name":"employee id","pattern":"EMP-[0-9]{6}","action":"redact"},{"name":"x","pattern":"(("}]}"#;
        let text = vec!["ticket for EMP-123456 and EMP-654321".to_owned()];
        let v = inspect(cfg, false, &text);
        assert_eq!(v[0].action, Want::Redact);
        assert_eq!(apply(&text[0], &v[0]), "ticket for [EMPLOYEE_ID_1] and [EMPLOYEE_ID_2]");
        assert!(v[0].reasons.contains(&"dlp:custom:employee_id".to_string()));
        assert!(v[0].reasons.contains(&"config:invalid_custom_pattern:x".to_string()));
    }

    #[test]
    fn clean_text_is_allowed() {
        let v = inspect("{}", false, &["What is the capital of France? It has 2.1 million people.".to_owned()]);
        assert_eq!(v[0].action, Want::Allow);
    }
}
