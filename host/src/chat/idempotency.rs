//! `Idempotency-Key` on the chat routes (docs/decisions/idempotency.md).
//!
//! Scope: per API key and route ([`Route`]): the same key on the Gatehouse
//! route and on the OpenAI route names two requests, each answered in its
//! route's format. A completed request's final status and body are stored
//! — 200s and 4xx validation or permission errors; never 401, 409, 429 nor
//! 5xx — for `chat.idempotency_ttl_secs` (24 h by default). The same key with
//! another body (compared as canonical JSON, in which equal numbers are equal
//! however they are spelled: [`body_hash`]) is 422. A duplicate that arrives
//! while the first is in flight waits up to 10 s, then gets 409. An in-flight
//! claim carries a lease renewed every 10 s while the request runs; after a
//! crash it lapses 30 s after the last renewal and the key can be used again.
//! Records that no longer bind are deleted by a background sweep
//! ([`spawn_sweeper`]), so stored answers do not pile up past their TTL.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use sha2::{Digest, Sha256};

use crate::error::{ChatError, text};
use gatehouse_store::Store;
use gatehouse_store::records::{Claim, IdempotencyRecord, IdempotencyState};

pub const HEADER: &str = "idempotency-key";
/// Response header on a replayed answer.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";
pub const LEASE: Duration = Duration::from_secs(30);
pub const RENEW_EVERY: Duration = Duration::from_secs(10);
pub const WAIT_FOR_IN_FLIGHT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(25);
/// The sweeper reads the next page of records this often...
const SWEEP_EVERY: Duration = Duration::from_secs(2);
/// ...this many at a time (~11 M records a day), from where it stopped.
const SWEEP_PAGE: usize = 256;

/// Delete records that no longer bind (past their TTL, or in flight with a
/// lapsed lease), a page at a time, cycling through the table forever. A
/// record is only ever deleted after the writer re-checks it, so a key
/// claimed again meanwhile is kept; a failed step is retried from the start.
#[expect(clippy::disallowed_methods, reason = "the handle is returned: the server aborts the sweeper at shutdown")]
pub fn spawn_sweeper(store: Arc<dyn Store>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut after = None;
        loop {
            tick.tick().await;
            match store.idempotency_sweep(after.take(), SWEEP_PAGE).await {
                Ok(page) => {
                    if page.removed > 0 {
                        crate::metrics::get().retention_deleted("idempotency", page.removed);
                        tracing::debug!(removed = page.removed, "idempotency records that no longer bind removed");
                    }
                    after = page.next;
                }
                Err(e) => tracing::warn!(error = %e, "idempotency sweep failed; it starts over at the next tick"),
            }
        }
    })
}

/// The chat route a key was used on; part of the record's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `POST /chat/completions`.
    Gatehouse,
    /// `POST /api/external/v1/chat/completions`.
    OpenAi,
}

/// Where the record of `value` (the header) sent by key `key_id` on `route` lives.
/// The Gatehouse route keeps the form records had before routes were told
/// apart, so they still bind after an upgrade; the OpenAI route's scope puts a
/// space after the key id, which no header value (visible ASCII) can hold, so
/// the two never meet.
pub fn scope(key_id: &str, route: Route, value: &str) -> String {
    match route {
        Route::Gatehouse => format!("{key_id}/{value}"),
        Route::OpenAi => format!("{key_id} openai/{value}"),
    }
}

/// SHA-256 of the body as canonical JSON (sorted keys, no spaces, strings
/// decoded, numbers in one exact form: `1`, `1.0`, `1e0` and `10E-1` are one
/// number), or of the raw bytes when it is not JSON.
pub fn body_hash(body: &[u8]) -> String {
    let canonical = serde_json::from_slice::<serde::de::IgnoredAny>(body)
        .ok()
        .and_then(|_| tag_scalars(body))
        .and_then(|tagged| serde_json::from_slice::<serde_json::Value>(&tagged).ok())
        .and_then(|v| serde_json::to_vec(&v).ok());
    hex::encode(Sha256::digest(canonical.as_deref().unwrap_or(body)))
}

/// Rewrite a JSON text so that parsing it cannot lose what makes two bodies
/// equal: each number becomes the string `"n<exact canonical form>"` and each
/// string gets an `s` after its opening quote (so no string can pass for a
/// number). Exact, unlike a round trip through `f64`: integers past 2^53 stay
/// distinct. `None` if a number is malformed (the caller hashes the raw bytes).
fn tag_scalars(body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len() + body.len() / 8);
    let mut i = 0;
    while i < body.len() {
        let b = body[i];
        match b {
            b'"' => {
                out.extend_from_slice(b"\"s");
                i += 1;
                while i < body.len() {
                    let c = body[i];
                    out.push(c);
                    i += 1;
                    match c {
                        b'\\' if i < body.len() => {
                            out.push(body[i]);
                            i += 1;
                        }
                        b'"' => break,
                        _ => {}
                    }
                }
            }
            b'-' | b'0'..=b'9' => {
                let end = body[i..]
                    .iter()
                    .position(|c| !matches!(c, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                    .map_or(body.len(), |n| i + n);
                out.extend_from_slice(b"\"n");
                out.extend_from_slice(canonical_number(&body[i..end])?.as_bytes());
                out.push(b'"');
                i = end;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(out)
}

/// `-?digits[.digits][e[+-]digits]` as `[-]<digits without leading or trailing zeros>e<exponent>`, `0` for zero.
fn canonical_number(tok: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(tok).ok()?;
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exp) = match rest.find(['e', 'E']) {
        Some(k) => (&rest[..k], rest[k + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|c| c.is_ascii_digit()) || exp.unsigned_abs() > 1 << 40 {
        return None;
    }
    let digits: String = int.chars().chain(frac.chars()).collect();
    let trimmed = digits.trim_start_matches('0');
    let significant = trimmed.trim_end_matches('0');
    if significant.is_empty() {
        return Some("0".into());
    }
    let exponent = exp - frac.len() as i64 + (trimmed.len() - significant.len()) as i64;
    Some(format!("{}{significant}e{exponent}", if negative { "-" } else { "" }))
}

/// A claimed key; the lease is renewed until it is dropped.
pub struct HeldClaim {
    pub scope: String,
    pub body_hash: String,
    ttl: chrono::Duration,
    renewer: tokio::task::JoinHandle<()>,
}

impl Drop for HeldClaim {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

impl HeldClaim {
    /// What to write when the request finishes: the record to keep, or `None`
    /// to release the claim (statuses that must not be stored).
    pub fn outcome(&self, status: StatusCode, content_type: &str, body: String) -> (String, Option<IdempotencyRecord>) {
        let storable = status.is_success() || (status.is_client_error() && !matches!(status.as_u16(), 401 | 409 | 429));
        let record = storable.then(|| IdempotencyRecord {
            body_hash: self.body_hash.clone(),
            state: IdempotencyState::Completed { status: status.as_u16(), content_type: content_type.to_owned(), body },
            expires_at: Utc::now() + self.ttl,
        });
        (self.scope.clone(), record)
    }
}

/// How to go on with a request.
pub enum Begin {
    /// No key: serve normally.
    None,
    /// Serve, then record through the claim.
    Claimed(HeldClaim),
    /// Answer with the stored response.
    Replay(Response),
}

fn replay(status: u16, content_type: &str, body: String) -> Response {
    let mut resp = (StatusCode::from_u16(status).unwrap_or(StatusCode::OK), body).into_response();
    if let Ok(ct) = HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    resp.headers_mut().insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    resp
}

fn reuse() -> ChatError {
    ChatError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        text::IDEMPOTENCY_REUSE,
        "this Idempotency-Key was used with a different request body; use a new key for a new request",
    )
}

/// Look the key up, replay, wait, or claim it.
pub async fn begin(
    store: &Arc<dyn Store>,
    key_id: &str,
    route: Route,
    headers: &HeaderMap,
    body: &[u8],
    ttl_secs: u64,
) -> Result<Begin, ChatError> {
    let Some(raw) = headers.get(HEADER) else {
        return Ok(Begin::None);
    };
    let value = raw
        .to_str()
        .ok()
        .filter(|v| !v.is_empty() && v.len() <= 255 && v.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(|| ChatError::invalid_request("`Idempotency-Key` must be 1 to 255 visible ASCII characters"))?;
    let scope = scope(key_id, route, value);
    let hash = body_hash(body);
    let waited_since = tokio::time::Instant::now();
    loop {
        let now = Utc::now();
        if let Some(existing) = store.idempotency_get(&scope).await?
            && existing.is_live(now)
        {
            if existing.body_hash != hash {
                return Err(reuse());
            }
            match existing.state {
                IdempotencyState::Completed { status, content_type, body } => {
                    return Ok(Begin::Replay(replay(status, &content_type, body)));
                }
                IdempotencyState::InFlight { .. } => {
                    if waited_since.elapsed() >= WAIT_FOR_IN_FLIGHT {
                        return Err(ChatError::new(
                            StatusCode::CONFLICT,
                            text::IN_PROGRESS,
                            "a request with this Idempotency-Key is still in progress; retry later",
                        ));
                    }
                    tokio::time::sleep(POLL).await;
                    continue;
                }
            }
        }
        let record = IdempotencyRecord {
            body_hash: hash.clone(),
            state: IdempotencyState::InFlight { lease_until: now + chrono::Duration::from_std(LEASE).unwrap_or_default() },
            expires_at: now + chrono::Duration::seconds(ttl_secs as i64),
        };
        match store.idempotency_claim(&scope, record).await? {
            Claim::Claimed => {
                let renewer = {
                    let store = store.clone();
                    let scope = scope.clone();
                    #[expect(
                        clippy::disallowed_methods,
                        reason = "the lease renewer: its handle lives in the HeldClaim, which aborts it when dropped"
                    )]
                    tokio::spawn(async move {
                        loop {
                            tokio::time::sleep(RENEW_EVERY).await;
                            let until = Utc::now() + chrono::Duration::from_std(LEASE).unwrap_or_default();
                            if let Err(e) = store.idempotency_renew(&scope, until).await {
                                tracing::warn!(error = %e, "renewing an idempotency lease failed");
                            }
                        }
                    })
                };
                return Ok(Begin::Claimed(HeldClaim { scope, body_hash: hash, ttl: chrono::Duration::seconds(ttl_secs as i64), renewer }));
            }
            Claim::Existing(_) => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_hash_ignores_key_order_and_spacing() {
        assert_eq!(body_hash(br#"{"a":1,"b":[1,2]}"#), body_hash(br#"{ "b": [1, 2], "a": 1 }"#));
        assert_ne!(body_hash(br#"{"a":1}"#), body_hash(br#"{"a":2}"#));
        assert_eq!(body_hash(b"not json"), body_hash(b"not json"));
    }

    #[test]
    fn equal_numbers_are_the_same_body_however_they_are_spelled() {
        let h = |n: &str| body_hash(format!(r#"{{"temperature":{n},"x":[{n}]}}"#).as_bytes());
        for same in ["1.0", "1e0", "1E+0", "10e-1", "0.1e1", "1.000", "0.0001e4"] {
            assert_eq!(h("1"), h(same), "1 vs {same}");
        }
        assert_eq!(h("0"), h("-0"));
        assert_eq!(h("0"), h("0.0e5"));
        assert_eq!(h("-2.50"), h("-25e-1"));
        assert_eq!(h("100"), h("1e2"));
        for other in ["1.01", "-1", "10", "0.1", "2"] {
            assert_ne!(h("1"), h(other), "1 vs {other}");
        }
        // Exact, not through a float: integers past 2^53 stay distinct.
        assert_ne!(h("12345678901234567890123"), h("12345678901234567890124"));
        assert_eq!(h("12345678901234567890123"), h("1234567890123456789012.3e1"));
        // A number and a string are different bodies; strings are compared decoded.
        assert_ne!(body_hash(br#"{"a":1}"#), body_hash(br#"{"a":"1"}"#));
        assert_eq!(body_hash(br#"{"a":"A"}"#), body_hash(br#"{"a":"\u0041"}"#));
        assert_eq!(body_hash(br#"{"a":"1.0 e5"}"#), body_hash(br#"{"a":"1.0 e5"}"#));
        assert_ne!(body_hash(br#"{"a":"1.0"}"#), body_hash(br#"{"a":"1"}"#), "text inside strings is not a number");
    }
}
