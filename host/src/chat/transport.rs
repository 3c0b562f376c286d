//! The one place the host talks to upstreams: a pooled HTTP client (system CA
//! roots plus an optional CA file, proxies from the environment), and the
//! in-process `echo://` transport of the offline provider. Both hand back a
//! status and a byte stream, so the streaming path is the same for all.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};

use super::types::{AttemptError, HttpRequestDesc, Trigger};
use crate::config::UpstreamConfig;

/// A response body as a stream of chunks.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, AttemptError>> + Send>>;

/// An upstream response: status and body stream.
pub struct UpstreamResponse {
    pub status: u16,
    pub body: ByteStream,
}

/// Shared HTTP client for all upstream calls.
#[derive(Clone)]
pub struct Transport {
    client: reqwest::Client,
    max_response_bytes: usize,
    urls: Arc<UrlCache>,
}

/// Upstream URLs as parsed, by their text. An adapter builds the same few
/// URLs again and again (a provider's base URL and path), and parsing one —
/// the host's IDNA mapping included — costs more than a look-up and a copy
/// (about 1 % of a request's CPU in the eleventh pass's profile). Holds at
/// most [`UrlCache::CAP`] URLs; once full, a new URL is parsed and not kept,
/// so an adapter that puts per-request data in its URLs cannot grow it.
#[derive(Default)]
struct UrlCache {
    parsed: Mutex<HashMap<String, reqwest::Url>>,
}

impl UrlCache {
    const CAP: usize = 256;

    fn parse(&self, text: &str) -> Result<reqwest::Url, String> {
        if let Some(url) = self.parsed.lock().unwrap_or_else(|p| p.into_inner()).get(text) {
            return Ok(url.clone());
        }
        let url = reqwest::Url::parse(text).map_err(|e| e.to_string())?;
        let mut parsed = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
        if parsed.len() < Self::CAP {
            parsed.insert(text.to_owned(), url.clone());
        }
        Ok(url)
    }
}

impl Transport {
    pub fn new(cfg: &UpstreamConfig) -> anyhow::Result<Self> {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(cfg.connect_timeout_ms))
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(256)
            .tcp_nodelay(true)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("gatehouse/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = &cfg.ca_file {
            let pem = std::fs::read(path).map_err(|e| anyhow::anyhow!("upstream.ca_file {}: {e}", path.display()))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| anyhow::anyhow!("upstream.ca_file {}: not PEM certificates: {e}", path.display()))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        Ok(Transport { client: builder.build()?, max_response_bytes: cfg.max_response_bytes, urls: Arc::default() })
    }

    /// Send a request described by a provider adapter. Connection failures are
    /// `server_error`s. The caller applies its deadlines around this call and
    /// around reading the body.
    pub async fn send(&self, req: HttpRequestDesc) -> Result<UpstreamResponse, AttemptError> {
        if req.url.starts_with("echo://") {
            return Ok(crate::wasm::echo::respond(&req));
        }
        let method = reqwest::Method::from_bytes(req.method.as_bytes())
            .map_err(|_| AttemptError::new(Trigger::ServerError, format!("adapter produced an invalid method {}", req.method)))?;
        let url = self
            .urls
            .parse(&req.url)
            .map_err(|e| AttemptError::new(Trigger::ServerError, format!("adapter produced an invalid URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(AttemptError::new(Trigger::ServerError, "adapter produced a non-HTTP URL"));
        }
        let mut rb = self.client.request(method, url);
        for (k, v) in req.headers {
            rb = rb.header(k, v);
        }
        let resp = rb.body(req.body).send().await.map_err(|e| {
            let what = if e.is_connect() {
                "could not connect to the upstream"
            } else if e.is_timeout() {
                return AttemptError::new(Trigger::Timeout, "the upstream timed out");
            } else {
                "the upstream request failed"
            };
            AttemptError::new(Trigger::ServerError, format!("{what}: {}", error_chain(e)))
        })?;
        let status = resp.status().as_u16();
        let body = resp
            .bytes_stream()
            .map(|r| r.map_err(|e| AttemptError::new(Trigger::ServerError, format!("upstream connection broke: {}", error_chain(e)))));
        Ok(UpstreamResponse { status, body: Box::pin(body) })
    }

    /// Read a whole body, bounded in size.
    pub async fn read_all(&self, mut body: ByteStream) -> Result<String, AttemptError> {
        let mut buf: Vec<u8> = Vec::new();
        while let Some(chunk) = body.next().await {
            let chunk = chunk?;
            if buf.len() + chunk.len() > self.max_response_bytes {
                return Err(AttemptError::new(
                    Trigger::ServerError,
                    format!("upstream response larger than {} bytes", self.max_response_bytes),
                ));
            }
            buf.extend_from_slice(&chunk);
        }
        String::from_utf8(buf).map_err(|_| AttemptError::new(Trigger::ServerError, "upstream response is not UTF-8"))
    }
}

/// The error and its sources in one line, without URLs' query strings.
fn error_chain(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut out = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_parsed_once_and_served_from_the_cache_after() {
        let cache = UrlCache::default();
        let first = cache.parse("https://api.example.com:8443/v1/chat/completions?x=1").expect("valid");
        let again = cache.parse("https://api.example.com:8443/v1/chat/completions?x=1").expect("cached");
        assert_eq!(first, again);
        assert_eq!(again.host_str(), Some("api.example.com"));
        assert_eq!(again.port(), Some(8443));
        assert_eq!(cache.parsed.lock().expect("lock").len(), 1);
        assert!(cache.parse("not a url").is_err(), "a bad URL is an error and is not kept");
        assert_eq!(cache.parsed.lock().expect("lock").len(), 1);
    }

    #[test]
    fn the_cache_stops_growing_at_its_cap_and_still_parses() {
        let cache = UrlCache::default();
        for i in 0..UrlCache::CAP + 10 {
            let url = cache.parse(&format!("http://127.0.0.1:9/v1/{i}")).expect("valid");
            assert_eq!(url.path(), format!("/v1/{i}"));
        }
        assert_eq!(cache.parsed.lock().expect("lock").len(), UrlCache::CAP);
    }
}
