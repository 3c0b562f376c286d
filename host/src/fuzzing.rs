//! One entry point per fuzz target: the cargo-fuzz targets in `tests/fuzz`
//! and the corpus replay test (`tests/tests/fuzz_corpora.rs`) both call these
//! functions, so a crash that was fixed stays fixed. Each one feeds arbitrary
//! bytes to the production parser and panics when a property the rest of the
//! gateway relies on does not hold; a plain `Err` is a fine outcome.
//!
//! See `docs/reliability.md` ("Fuzzing") for how to run them.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

use crate::api::audit_logs;
use crate::api::list_params::Params;
use crate::chat::request::{self, ChatParams, TimeoutDefaults};
use crate::chat::sse::{SseDecoder, SseError, SseEvent};
use crate::chat::types::Role;
use crate::config::Config;
use crate::webhooks::ssrf::{self, Target};

/// The defaults of `chat.*` in the config.
const DEFAULTS: TimeoutDefaults = TimeoutDefaults { timeout_ms: 60_000, first_token_timeout_ms: 15_000 };

/// `POST /chat/completions` and `POST /api/external/v1/chat/completions`:
/// the raw body through both parsers. An accepted request satisfies every
/// limit of docs/decisions/chat-requests.md; a refused one has a 4xx status.
pub fn chat_request(data: &[u8]) {
    match request::parse(data, DEFAULTS) {
        Ok(p) => check_chat_params(&p),
        Err(e) => assert!(e.status.is_client_error() && !e.message.is_empty(), "{e:?}"),
    }
    match crate::chat::openai::parse(data, DEFAULTS) {
        Ok((p, _)) => {
            check_chat_params(&p);
            assert_eq!(p.index, request::ZERO_KNOWLEDGE);
            assert!(!p.use_rag);
        }
        Err(e) => assert!(e.status.is_client_error() && !e.message.is_empty(), "{e:?}"),
    }
}

fn check_chat_params(p: &ChatParams) {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    assert!((1..=request::MAX_CHAIN_ENTRIES).contains(&p.chain.len()), "chain of {}", p.chain.len());
    let distinct: BTreeSet<&str> = p.chain.iter().map(|e| e.model.as_str()).collect();
    assert!(distinct.len() <= request::MAX_DISTINCT_MODELS);
    for e in &p.chain {
        let (provider, name) = e.model.as_str().split_once('/').expect("model has a provider prefix");
        assert!(!provider.is_empty() && !name.is_empty(), "{}", e.model.as_str());
        for t in [ms(e.timeout), ms(e.first_token_timeout)] {
            assert!((1..=request::MAX_TIMEOUT_MS).contains(&t), "timeout {t} ms");
        }
    }
    assert!(!p.messages.is_empty() && p.messages.len() <= request::MAX_MESSAGES + 1);
    assert!(p.messages.iter().any(|m| m.role != Role::System), "no user or assistant message");
    assert!(p.messages.iter().skip(1).all(|m| m.role == Role::User || m.role == Role::Assistant));
    let total: usize = p.messages.iter().map(|m| m.content.len()).sum();
    assert!(total + crate::chat::screen::field_bytes(&p.extra, &p.stop) <= request::MAX_CONTENT_BYTES);
    // Nothing that goes upstream still holds an invisible character to strip.
    let clean = |s: &str| {
        let mut t = s.to_owned();
        crate::chat::screen::strip_invisible(&mut t);
        t == s
    };
    assert!(p.messages.iter().all(|m| clean(&m.content)) && p.stop.iter().all(|s| clean(s)));
    assert!(crate::chat::screen::FieldTexts::collect(&p.extra, &[]).texts.iter().all(|s| clean(s)));
    assert!((0.0..=2.0).contains(&p.temperature));
    assert!((1..=request::MAX_TOKENS_CAP).contains(&p.max_tokens));
    assert!(!p.index.trim().is_empty());
    assert!(p.stop.len() <= 4);
    assert!(p.conversation_id.as_ref().is_none_or(|c| !c.is_empty() && c.len() <= 200));
    assert!(p.extra.keys().all(|k| request::PASSTHROUGH.contains(&k.as_str())));
}

/// Limit of the small decoder that [`sse`] runs beside the default one.
const SMALL_EVENT_LIMIT: usize = 64;

/// The upstream SSE decoder: the same bytes give the same events and the
/// same outcome whether they arrive at once or cut into chunks (the first
/// byte seeds the cut points), with the default limit and a small one.
pub fn sse(data: &[u8]) {
    let Some((&seed, body)) = data.split_first() else { return };
    for limit in [crate::chat::sse::DEFAULT_MAX_EVENT_BYTES, SMALL_EVENT_LIMIT] {
        let whole = decode(body, limit, &[body.len()]);
        let mut cuts = Vec::new();
        let mut at = 0usize;
        let mut step = usize::from(seed % 7) + 1;
        while at < body.len() {
            let len = step.min(body.len() - at);
            cuts.push(len);
            at += len;
            // Vary the chunk size with the data: 1 to 16 bytes.
            step = usize::from(body[at - 1] ^ seed) % 16 + 1;
        }
        let chunked = decode(body, limit, &cuts);
        assert_eq!(whole, chunked, "chunking changed the result (cuts {cuts:?})");
        if let Ok(events) = &whole {
            for ev in events {
                assert!(!ev.event.contains(['\r', '\n']) && !ev.data.contains('\r'), "{ev:?}");
                assert!(ev.id.as_ref().is_none_or(|id| !id.is_empty() && !id.contains(['\0', '\r', '\n'])), "{ev:?}");
                assert!(ev.data.len() + ev.event.len() <= limit);
            }
        }
    }
}

/// Decode `body` fed in chunks of the given lengths, then finish.
fn decode(body: &[u8], limit: usize, cuts: &[usize]) -> Result<Vec<SseEvent>, SseError> {
    let mut dec = SseDecoder::with_max_event_bytes(limit);
    let mut events = Vec::new();
    let mut rest = body;
    for &n in cuts {
        let (chunk, tail) = rest.split_at(n.min(rest.len()));
        events.extend(dec.push(chunk)?);
        rest = tail;
    }
    events.extend(dec.finish()?);
    Ok(events)
}

/// The webhook URL guard. A URL accepted without
/// `allow_private` never points at a forbidden address, by the URL
/// parser's own reading of the host; its stored (normalised) form passes
/// the guard again with the same target; allowing private targets never
/// refuses what was accepted without.
pub fn webhook_url(data: &[u8]) {
    let raw = String::from_utf8_lossy(data);
    let strict = ssrf::parse(&raw, false);
    let lax = ssrf::parse(&raw, true);
    if let Ok(p) = &strict {
        let url = &p.url;
        assert!(matches!(url.scheme(), "http" | "https"), "{url}");
        assert!(url.username().is_empty() && url.password().is_none(), "{url}");
        // The URL parser turned every numeric spelling into a canonical
        // literal: `a.b.c.d` or `[v6]`; anything else is a name.
        let host = url.host_str().unwrap_or_else(|| panic!("accepted a URL without a host: {url}"));
        let literal: Option<IpAddr> = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host).parse().ok();
        if literal.is_none() {
            let name = host.trim_end_matches('.').to_ascii_lowercase();
            assert!(name != "localhost" && !name.ends_with(".localhost"), "{url}");
        }
        if let Some(ip) = literal {
            assert_eq!(ssrf::forbidden(ip), None, "accepted {url}, a literal {ip}");
            assert_eq!(p.target, Target::Ip(ip), "{url}");
        }
        if let Target::Ip(ip) = p.target {
            assert_eq!(ssrf::forbidden(ip), None, "accepted {url}");
        }
        let again = ssrf::parse(url.as_str(), false).unwrap_or_else(|e| panic!("stored form {url} is refused: {e}"));
        assert_eq!(again.target, p.target, "{url}");
        assert_eq!(again.url, p.url, "normalising twice changed {url}");
        assert!(lax.is_ok(), "allow_private refused {url}");
    }
    if let Err(e) = &lax {
        assert!(!matches!(e, ssrf::UrlRefused::Forbidden { .. } | ssrf::UrlRefused::Unresolvable { .. }), "{raw:?}: {e}");
    }
}

/// `Config::load` of a TOML file: never panics; an accepted config passes
/// the checks that the server's start relies on.
pub fn config(data: &[u8]) {
    let path = scratch_file();
    std::fs::write(&path, data).expect("write the scratch config file");
    let loaded = Config::load(Some(&path));
    let _ = std::fs::remove_file(&path);
    match loaded {
        Ok(c) => {
            assert!(c.server.max_body_bytes >= 300 * 1024);
            assert!(!c.webhooks.retry_delays().is_empty());
            for l in [c.limits.chat, c.limits.admin_read] {
                assert!(l.per_minute > 0 && l.per_hour > 0 && l.per_day > 0 && l.per_month > 0);
            }
            for (name, p) in &c.providers {
                assert!(!name.is_empty() && !name.contains('/') && p.config.is_object());
            }
            for (name, ix) in &c.indexes {
                assert!(name != request::ZERO_KNOWLEDGE && ix.config.is_object());
            }
            check_clock_arithmetic(&c);
        }
        Err(e) => assert!(!e.message.is_empty()),
    }
}

/// The running server adds these settings to clocks the way this does
/// (breaker cooldowns to `Instant`s, TTLs and webhook delays to
/// `DateTime<Utc>` through `chrono::Duration`), where an overflow panics:
/// an accepted config must never get there.
fn check_clock_arithmetic(c: &Config) {
    let now = std::time::Instant::now();
    let cooldown = Duration::from_millis(c.upstream.breaker_cooldown_ms);
    assert!(now.checked_add(cooldown).is_some(), "upstream.breaker_cooldown_ms overflows an Instant");
    // Far enough ahead to cover any server's lifetime.
    let later = Utc.with_ymd_and_hms(2100, 1, 1, 0, 0, 0).single().expect("a valid instant");
    let add_secs = |what: &str, secs: u64| {
        let d = chrono::Duration::try_seconds(secs as i64).unwrap_or_else(|| panic!("{what}: {secs} s is out of chrono's range"));
        assert!(later.checked_add_signed(d).is_some(), "{what}: {secs} s overflows a date");
    };
    add_secs("chat.idempotency_ttl_secs", c.chat.idempotency_ttl_secs);
    for d in c.webhooks.retry_delays() {
        assert!(later.checked_add_signed(d).is_some(), "webhooks.retry_delays_*: {d} overflows a date");
    }
    let poll = chrono::Duration::try_milliseconds(c.webhooks.poll_interval_ms.max(1) as i64);
    assert!(poll.is_some_and(|p| later.checked_add_signed(p).is_some()), "webhooks.poll_interval_ms overflows a date");
}

/// A file of this process and thread (libFuzzer may run several processes).
fn scratch_file() -> PathBuf {
    let thread = format!("{:?}", std::thread::current().id()).replace(|c: char| !c.is_ascii_alphanumeric(), "");
    std::env::temp_dir().join(format!("gatehouse-fuzz-config-{}-{thread}.toml", std::process::id()))
}

/// `GET /audit-logs`: the query string through axum's `Query` extractor and
/// the parameter checks. Accepted parameters give a sane store query.
pub fn audit_query(data: &[u8]) {
    let Ok(query) = std::str::from_utf8(data) else { return };
    // What hyper would not accept as a request target never reaches the handler.
    let Ok(uri) = format!("/audit-logs?{query}").parse::<axum::http::Uri>() else { return };
    let Ok(axum::extract::Query(params)) = axum::extract::Query::<Params>::try_from_uri(&uri) else { return };
    let now: DateTime<Utc> = Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).single().expect("a valid instant");
    match audit_logs::audit_params(&params, now) {
        Ok(a) => {
            assert!((1..=1_000_000).contains(&a.page) && (1..=100).contains(&a.limit));
            assert!(a.start <= a.end && a.query.start == a.start && a.query.end > a.end);
            assert_eq!(a.query.offset, (a.page - 1) * a.limit);
            assert_eq!(a.query.limit, a.limit);
            assert!(a.query.search.as_ref().is_none_or(|s| !s.is_empty() && s.len() <= 200));
            // The handler reports the range back in ISO 8601.
            let _ = (crate::time::iso(a.start), crate::time::iso(a.end));
        }
        Err(e) => assert!(e.status.is_client_error() && e.code.starts_with("INVALID_"), "{e:?}"),
    }
}
