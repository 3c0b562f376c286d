//! Secret scanners (DLP), hand-written: cloud, SaaS and LLM-provider keys recognised by
//! their fixed prefixes and lengths, JWTs, PEM private-key blocks, AWS secret
//! keys next to an AWS word, credentials in URLs, and generic assignments
//! such as `password=...`, `api_key: "..."`, `"client_secret": "..."`.

use crate::blocks::{Blocks, COLON, DASH, DIGIT, EQ, J, KEY_MARK, SLASH_PLUS};
use crate::finding::{Class, Finding};
use crate::pii::context_before;

fn tok(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// All secret findings in `text`.
pub fn scan(text: &str, out: &mut Vec<Finding>) {
    scan_in(text, &Blocks::new(text.as_bytes()), out);
}

/// [`scan`] with the text's block summary already made. The scans that
/// look for a fixed string run only if the text has its rarest byte.
pub fn scan_in(text: &str, blocks: &Blocks, out: &mut Vec<Finding>) {
    prefixed_tokens(text, blocks, out);
    if blocks.all() & J != 0 {
        jwts(text, out);
    }
    if blocks.all() & DASH != 0 {
        pem_blocks(text, out);
    }
    aws_secrets(text, blocks, out);
    if blocks.all() & COLON != 0 {
        url_credentials(text, out);
    }
    assignments(text, blocks, out);
}

const SLACK_HOOK: &str = "https://hooks.slack.com/services/";
const PEM_BEGIN: &str = "-----BEGIN ";

/// Where `pat` occurs in `text`, in order, found from the (rarer) byte
/// `pat[key]` with `memchr` rather than a substring searcher that walks
/// the whole text. For a pattern that cannot overlap itself (the patterns
/// used here; a unit test checks) these are exactly the non-overlapping
/// matches `match_indices` gave.
fn occurrences<'a>(text: &'a str, pat: &'static str, key: usize) -> impl Iterator<Item = usize> + 'a {
    let b = text.as_bytes();
    let k = char::from(pat.as_bytes()[key]);
    text.match_indices(k).filter_map(move |(p, _)| {
        let at = p.checked_sub(key)?;
        b[at..].starts_with(pat.as_bytes()).then_some(at)
    })
}

/// Kind of a token by prefix and shape.
fn token_kind(t: &[u8]) -> Option<&'static str> {
    let rest_ok = |from: usize, min: usize, f: fn(&u8) -> bool| t.len() >= from + min && t[from..].iter().all(f);
    const AWS: [&[u8]; 11] = [b"AKIA", b"ASIA", b"ABIA", b"ACCA", b"AGPA", b"AIDA", b"AIPA", b"ANPA", b"ANVA", b"AROA", b"APKA"];
    if t.len() == 20 && AWS.iter().any(|p| t.starts_with(p)) && t.iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) {
        return Some("aws_access_key");
    }
    for p in [&b"ghp_"[..], b"gho_", b"ghu_", b"ghs_", b"ghr_"] {
        if t.starts_with(p) && rest_ok(4, 36, u8::is_ascii_alphanumeric) {
            return Some("github_token");
        }
    }
    if t.starts_with(b"github_pat_") && rest_ok(11, 50, |c| c.is_ascii_alphanumeric() || *c == b'_') {
        return Some("github_token");
    }
    for p in [&b"xoxb-"[..], b"xoxp-", b"xoxa-", b"xoxr-", b"xoxs-", b"xoxe-", b"xapp-"] {
        if t.starts_with(p) && rest_ok(5, 10, |c| c.is_ascii_alphanumeric() || *c == b'-') {
            return Some("slack_token");
        }
    }
    for p in [&b"sk_live_"[..], b"sk_test_", b"rk_live_", b"rk_test_"] {
        if t.starts_with(p) && rest_ok(8, 16, u8::is_ascii_alphanumeric) {
            return Some("stripe_key");
        }
    }
    if t.len() == 39 && t.starts_with(b"AIza") && t.iter().all(|c| tok(*c)) {
        return Some("google_api_key");
    }
    llm_key_kind(t)
}

/// Mixed case and a digit: what a random key body has and a word or a
/// kebab-case name (`sk-learn`, `sk-my-test-key`) has not.
fn random_looking(body: &[u8]) -> bool {
    body.iter().any(u8::is_ascii_digit) && body.iter().any(u8::is_ascii_uppercase) && body.iter().any(u8::is_ascii_lowercase)
}

/// LLM-provider keys, GitLab tokens and Gatehouse's own API keys.
/// `t` is a whole token of `[A-Za-z0-9_-]`.
fn llm_key_kind(t: &[u8]) -> Option<&'static str> {
    let body = |p: &[u8]| t.strip_prefix(p);
    if let Some(b) = body(b"sk-ant-") {
        // Anthropic: `sk-ant-api03-…`, `sk-ant-admin01-…` (about 100 characters).
        return (b.len() >= 32 && random_looking(b)).then_some("anthropic_key");
    }
    for p in [&b"sk-proj-"[..], b"sk-svcacct-", b"sk-admin-", b"sk-None-"] {
        if let Some(b) = body(p) {
            return (b.len() >= 32 && random_looking(b)).then_some("openai_key");
        }
    }
    if let Some(b) = body(b"sk-") {
        // Gatehouse: `sk-` + 43 base64url characters (32 random bytes; a
        // digit is missing from about one in 1,400 of them, mixed case is not).
        if b.len() == 43 && random_looking_letters(b) {
            return Some("gatehouse_key");
        }
        // OpenAI's older user keys: `sk-` + 48 letters and digits.
        if b.len() >= 32 && b.iter().all(u8::is_ascii_alphanumeric) && random_looking(b) {
            return Some("openai_key");
        }
        return None;
    }
    if let Some(b) = body(b"hf_") {
        // Hugging Face: `hf_` + 34 letters.
        return (b.len() >= 30 && b.iter().all(u8::is_ascii_alphanumeric) && random_looking_letters(b)).then_some("huggingface_token");
    }
    if let Some(b) = body(b"glpat-") {
        // GitLab personal access tokens: `glpat-` + 20 characters or more.
        return (b.len() >= 20 && (b.iter().any(u8::is_ascii_digit) || random_looking_letters(b))).then_some("gitlab_token");
    }
    None
}

/// Upper and lower case mixed (Hugging Face bodies are letters only).
fn random_looking_letters(body: &[u8]) -> bool {
    body.iter().any(u8::is_ascii_uppercase) && body.iter().any(u8::is_ascii_lowercase)
}

fn prefixed_tokens(text: &str, blocks: &Blocks, out: &mut Vec<Finding>) {
    let b = text.as_bytes();
    // Every prefix `token_kind` knows has an 'A', '_' or '-' in its first
    // seven bytes (AKIA…, AIza…, sk_, ghp_, xoxb-, github_pat_): a token
    // starting in a block without one there or in the next block is nothing.
    let wanted = |bl: &Blocks, k| bl.pair(k) & KEY_MARK != 0;
    let mut i = blocks.next(0, b.len(), wanted);
    while i < b.len() {
        if !b[i].is_ascii_alphabetic() || (i > 0 && tok(b[i - 1])) {
            i = blocks.next(i + 1, b.len(), wanted);
            continue;
        }
        let mut j = i;
        while j < b.len() && tok(b[j]) {
            j += 1;
        }
        if let Some(kind) = token_kind(&b[i..j]) {
            out.push(Finding::new(i, j, kind, Class::Dlp, 0.99));
        }
        i = j;
    }
    if blocks.all() & COLON == 0 {
        return;
    }
    for at in occurrences(text, SLACK_HOOK, 5) {
        let mut e = at;
        while e < b.len() && !b[e].is_ascii_whitespace() && !matches!(b[e], b'"' | b'\'' | b')' | b'>') {
            e += 1;
        }
        out.push(Finding::new(at, e, "slack_token", Class::Dlp, 0.95));
    }
}

fn jwts(text: &str, out: &mut Vec<Finding>) {
    let b = text.as_bytes();
    let seg = |mut k: usize| {
        while k < b.len() && tok(b[k]) {
            k += 1;
        }
        k
    };
    for (at, _) in text.match_indices("eyJ") {
        if at > 0 && tok(b[at - 1]) {
            continue;
        }
        let e1 = seg(at);
        if b.get(e1) != Some(&b'.') || !b[e1 + 1..].starts_with(b"eyJ") {
            continue;
        }
        let e2 = seg(e1 + 1);
        if b.get(e2) != Some(&b'.') {
            continue;
        }
        let e3 = seg(e2 + 1);
        if e1 - at >= 10 && e2 - e1 >= 10 {
            out.push(Finding::new(at, e3, "jwt", Class::Dlp, 0.95));
        }
    }
}

fn pem_blocks(text: &str, out: &mut Vec<Finding>) {
    for at in occurrences(text, PEM_BEGIN, 5) {
        let line_end = text[at..].find('\n').map_or(text.len(), |p| at + p);
        if !text[at..line_end].contains("PRIVATE KEY") {
            continue;
        }
        let end = text[line_end..]
            .find("-----END ")
            .and_then(|p| text[line_end + p + 9..].find("-----").map(|q| line_end + p + 9 + q + 5))
            .unwrap_or(text.len());
        out.push(Finding::new(at, end, "private_key", Class::Dlp, 0.99));
    }
}

/// Words that make a 40-byte base64 token an AWS secret key.
pub(crate) const AWS_WORDS: &[&str] = &["aws", "secret"];

fn aws_secrets(text: &str, blocks: &Blocks, out: &mut Vec<Finding>) {
    let b = text.as_bytes();
    let c64 = |c: u8| c.is_ascii_alphanumeric() || c == b'/' || c == b'+';
    // A key is 40 bytes with a digit, '/' or '+': one starting in a block
    // ends in the next, so blocks where neither pair has one are skipped.
    let wanted = |bl: &Blocks, k| bl.pair(k) & (DIGIT | SLASH_PLUS) != 0;
    let mut i = blocks.next(0, b.len(), wanted);
    while i < b.len() {
        if !c64(b[i]) || (i > 0 && c64(b[i - 1])) {
            i = blocks.next(i + 1, b.len(), wanted);
            continue;
        }
        let mut j = i;
        while j < b.len() && c64(b[j]) {
            j += 1;
        }
        let t = &b[i..j];
        if t.len() == 40
            && t.iter().any(u8::is_ascii_lowercase)
            && t.iter().any(u8::is_ascii_uppercase)
            && t.iter().any(|c| c.is_ascii_digit() || *c == b'/' || *c == b'+')
            && context_before(text, i, 80, AWS_WORDS)
        {
            out.push(Finding::new(i, j, "aws_secret_key", Class::Dlp, 0.9));
        }
        i = j;
    }
}

fn url_credentials(text: &str, out: &mut Vec<Finding>) {
    let b = text.as_bytes();
    for at in occurrences(text, "://", 0) {
        let s = at + 3;
        let mut e = s;
        while e < b.len() && !b[e].is_ascii_whitespace() && !matches!(b[e], b'/' | b'@' | b'"' | b'\'') {
            e += 1;
        }
        if b.get(e) != Some(&b'@') {
            continue;
        }
        if let Some(colon) = text[s..e].find(':') {
            let p = s + colon + 1;
            if e > p {
                out.push(Finding::new(p, e, "password", Class::Dlp, 0.9));
            }
        }
    }
}

/// Kind for an assignment key (lowercase identifier), if it names a secret.
fn key_kind(key: &str) -> Option<&'static str> {
    // Counts and settings that merely mention tokens (`max_tokens: 512`).
    if ["tokens", "tokeniz", "max_", "num_", "_count", "_limit", "_length", "_expir", "_ttl"].iter().any(|k| key.contains(k)) {
        return None;
    }
    if key.contains("aws") && key.contains("secret") {
        Some("aws_secret_key")
    } else if ["password", "passwd", "pwd", "passphrase", "passwort", "contraseña", "mot_de_passe"].iter().any(|k| key.contains(k)) {
        Some("password")
    } else if ["api_key", "apikey", "api-key", "access_key", "secret_key", "private_key", "client_key"].iter().any(|k| key.contains(k)) {
        Some("api_key")
    } else if ["secret", "token", "credential"].iter().any(|k| key.contains(k)) || key == "auth" || key.ends_with("_auth") {
        Some("secret")
    } else {
        None
    }
}

fn assignments(text: &str, blocks: &Blocks, out: &mut Vec<Finding>) {
    let b = text.as_bytes();
    // Assignments are found from their '=' or ':': other blocks are skipped.
    let wanted = |bl: &Blocks, k| bl.at(k) & (EQ | COLON) != 0;
    let mut p = blocks.next(0, b.len(), wanted);
    while p < b.len() {
        assignment_at(text, p, out);
        p = blocks.next(p + 1, b.len(), wanted);
    }
}

/// An assignment whose '=' or ':' is at `p`.
fn assignment_at(text: &str, p: usize, out: &mut Vec<Finding>) {
    let b = text.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.');
    let c = b[p];
    if c != b'=' && c != b':' {
        return;
    }
    if c == b':' && b.get(p + 1) == Some(&b'/') {
        return; // a URL scheme
    }
    // The key: identifier before optional quote and spaces.
    let mut k = p;
    while k > 0 && b[k - 1] == b' ' {
        k -= 1;
    }
    if k > 0 && matches!(b[k - 1], b'"' | b'\'') {
        k -= 1;
    }
    let key_end = k;
    while k > 0 && ident(b[k - 1]) {
        k -= 1;
    }
    if key_end == k || key_end - k > 64 {
        return;
    }
    let Some(kind) = key_kind(&text[k..key_end].to_ascii_lowercase()) else {
        return;
    };
    // The value.
    let mut v = p + 1;
    if b.get(v) == Some(&b'=') {
        v += 1;
    }
    while v < b.len() && b[v] == b' ' {
        v += 1;
    }
    let quote = b.get(v).copied().filter(|q| matches!(q, b'"' | b'\''));
    let vs = if quote.is_some() { v + 1 } else { v };
    let mut ve = vs;
    while ve < b.len() && ve - vs <= 200 {
        let ch = b[ve];
        let stop = match quote {
            Some(q) => ch == q || ch == b'\n',
            None => ch.is_ascii_whitespace() || matches!(ch, b',' | b';' | b'&' | b'}' | b'(' | b')' | b'"' | b'\'' | b'<'),
        };
        if stop {
            break;
        }
        ve += 1;
    }
    let value = &text[vs..ve];
    if plausible_secret(value, quote.is_some(), b.get(ve)) {
        out.push(Finding::new(vs, ve, kind, Class::Dlp, 0.75));
    }
}

/// Rejects placeholders, references and code rather than literal secrets.
fn plausible_secret(value: &str, quoted: bool, next: Option<&u8>) -> bool {
    let lower = value.to_ascii_lowercase();
    if value.len() < 4 || value.len() > 200 || next == Some(&b'(') {
        return false;
    }
    if value.starts_with(['$', '<', '{', '%', '[', '/', '~'])
        || value.starts_with("./")
        || lower.contains("****")
        || lower.contains("xxxx")
        || lower.contains("...")
    {
        return false;
    }
    if matches!(lower.as_str(), "null" | "none" | "true" | "false" | "undefined" | "required" | "optional" | "string" | "redacted") {
        return false;
    }
    if value.starts_with('[') && value.ends_with(']') {
        return false; // one of our own placeholders
    }
    // Unquoted dotted or snake-case identifiers are references (`os.environ`, `user_password`).
    let identifier = value.bytes().all(|c| c.is_ascii_lowercase() || c == b'_' || c == b'.');
    !(identifier && !quoted && (value.contains('.') || value.contains('_')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(String, String)> {
        let mut v = Vec::new();
        scan(text, &mut v);
        crate::finding::resolve(v).into_iter().map(|f| (f.kind.to_string(), text[f.start..f.end].to_string())).collect()
    }

    fn one(text: &str, kind: &str, value: &str) {
        assert_eq!(kinds(text), vec![(kind.to_string(), value.to_string())], "{text}");
    }

    #[test]
    fn searched_patterns_never_overlap_themselves() {
        for pat in [SLACK_HOOK, PEM_BEGIN, "://"] {
            let b = pat.as_bytes();
            assert!((1..b.len()).all(|k| b[..k] != b[b.len() - k..]), "{pat}");
        }
        for t in [
            "a://b://c:///:// ://",
            "-----BEGIN -----BEGIN ------BEGIN BEGIN",
            "https://hooks.slack.com/services/https://hooks.slack.com/services/x",
        ] {
            for (pat, key) in [(SLACK_HOOK, 5), (PEM_BEGIN, 5), ("://", 0)] {
                let want: Vec<usize> = t.match_indices(pat).map(|(p, _)| p).collect();
                assert_eq!(occurrences(t, pat, key).collect::<Vec<_>>(), want, "{pat} in {t}");
            }
        }
    }

    #[test]
    fn prefixed_keys() {
        one("key AKIAIOSFODNN7EXAMPLE ok", "aws_access_key", "AKIAIOSFODNN7EXAMPLE");
        one("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github_token", "ghp_abcdefghijklmnopqrstuvwxyz0123456789");
        let pat = format!("github_pat_{}", "A1b2".repeat(20));
        one(&format!("use {pat}"), "github_token", &pat);
        one("slack xoxb-123456789012-abcdefABCDEF", "slack_token", "xoxb-123456789012-abcdefABCDEF");
        one("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe_key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc");
        one("g AIzaSyA1234567890abcdefghijklmnopqrstuv", "google_api_key", "AIzaSyA1234567890abcdefghijklmnopqrstuv");
        one(
            "hook https://hooks.slack.com/services/T000/B000/XXXXabcd",
            "slack_token",
            "https://hooks.slack.com/services/T000/B000/XXXXabcd",
        );
    }

    #[test]
    fn llm_provider_and_gatehouse_keys() {
        let proj = format!("sk-proj-{}", "Ab3dEf6hIj9kLmN0pQr2StU5vWx8Yz1aBc4DeF7gHi0JkL3mNo6PqR9sTu2VwX5yZ");
        one(&format!("OPENAI={proj}"), "openai_key", &proj);
        let svc = format!("sk-svcacct-{}", "Ab3dEf6hIj9kLmN0pQr2StU5vWx8Yz1aBc4DeF7gHi0JkL3m");
        one(&format!("use {svc} now"), "openai_key", &svc);
        one(
            "key 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.",
            "openai_key",
            "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",
        );
        let ant = format!("sk-ant-api03-{}-AA", "Ab3dEf6hIj9kLmN0pQr2StU5vWx8Yz1aBc4DeF7gHi0JkL3mNo6PqR9sTu2VwX5yZ_AbCdEfGhIjKlMnOpQr");
        one(&format!("claude {ant}"), "anthropic_key", &ant);
        one("token hf_AbCdEfGhIjKlMnOpQrStUvWxYzabcdefgh ok", "huggingface_token", "hf_AbCdEfGhIjKlMnOpQrStUvWxYzabcdefgh");
        one("glpat-Ab3dEf6hIj9kLmN0pQr2 is mine", "gitlab_token", "glpat-Ab3dEf6hIj9kLmN0pQr2");
        let gh = "sk-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_AbCdE";
        assert_eq!(gh.len(), 46);
        one(&format!("Authorization: Bearer {gh}"), "gatehouse_key", gh);
    }

    #[test]
    fn near_misses_of_provider_keys_are_not_secrets() {
        for t in [
            "pip install sk-learn and scikit-learn",
            "the sk-proj-alpha-beta-gamma-delta-epsilon-zeta-eta branch",
            "task-Ab3dEf6hIj9kLmN0pQr2StU5vWx8Yz1aBc4DeF7gHi0JkL3mN",
            "sk-ant-api03-short",
            "sk-Ab3dEf6hIj9k",
            "sk-abcdefghijklmnopqrstuvwxyzabcdefghijklmnopq",
            "call hf_hub_download(repo_id) from huggingface_hub",
            "hf_abcdefghijklmnopqrstuvwxyzabcdefgh",
            "glpat-short",
            "the glpat-token-format-is-described-here page",
            "sk-proj-",
        ] {
            assert!(kinds(t).is_empty(), "{t}: {:?}", kinds(t));
        }
    }

    #[test]
    fn structured_secrets() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        one(&format!("Bearer {jwt}"), "jwt", jwt);
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----";
        one(&format!("key:\n{pem}\nthanks"), "private_key", pem);
        one(
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_key",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        );
        one("AWS secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
        one("postgres://admin:hunter2@db.internal/app", "password", "hunter2");
    }

    #[test]
    fn assignments_but_not_code() {
        one("DB_PASSWORD=s3cr3t!", "password", "s3cr3t!");
        one(r#"{"client_secret": "abc123xyz"}"#, "secret", "abc123xyz");
        one("api_key: 'k-123456'", "api_key", "k-123456");
        for t in [
            "password = get_password()",
            "password: ${DB_PASS}",
            "password=<your password>",
            "password = settings.db_password",
            "token: null",
            "the password: is required",
            "api_key=[API_KEY_1]",
            "max_tokens: 1000",
            "token_limit=4096",
            "pwd: /home/ann",
        ] {
            assert!(kinds(t).is_empty(), "{t}: {:?}", kinds(t));
        }
    }
}
