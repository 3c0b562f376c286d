//! The one place the host talks to upstreams, and the in-process `echo://`
//! transport of the offline provider. All hand back a status and a byte
//! stream, so the streaming path is the same for all.
//!
//! Two pooled clients share the work, both trusting the system CA roots plus
//! an optional CA file. A destination that an `HTTPS_PROXY` / `HTTP_PROXY` /
//! `NO_PROXY` setting sends through a proxy goes through reqwest, which speaks
//! to proxies (`CONNECT` tunnels, absolute-form requests, proxy credentials).
//! Every other destination — the usual case — goes straight through hyper's
//! pooled client: reqwest's layers (redirect and retry policies, URL
//! re-parsing, proxy checks) cost about 5 % of a request's CPU in a
//! profile of the whole pipeline (docs/benchmarks.md#where-the-time-goes), for features a provider call does not use. The
//! proxy decision is the one reqwest makes (hyper-util's matcher, from the
//! same environment variables), taken once per URL.

pub mod echo;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use http_body_util::{BodyDataStream, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::types::{AttemptError, HttpRequestDesc, Trigger};
use crate::config::UpstreamConfig;

/// A response body as a stream of chunks.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, AttemptError>> + Send>>;

/// An upstream response: status and body stream.
pub struct UpstreamResponse {
    pub status: u16,
    pub body: ByteStream,
}

type Direct = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

const USER_AGENT: &str = concat!("gatehouse/", env!("CARGO_PKG_VERSION"));
const POOL_IDLE: Duration = Duration::from_secs(90);
const POOL_MAX_IDLE_PER_HOST: usize = 256;

/// Shared HTTP clients for all upstream calls.
#[derive(Clone)]
pub struct Transport {
    direct: Direct,
    proxied: reqwest::Client,
    max_response_bytes: usize,
    urls: Arc<UrlCache>,
}

/// Where a URL goes: its parsed forms and whether a proxy applies to it.
/// Cloned out of the cache per request without an allocation (the `Uri`'s
/// parts are shared bytes; the `Url`, only read on the proxied path, is behind
/// an `Arc`).
#[derive(Clone)]
struct Target {
    url: Arc<reqwest::Url>,
    uri: http::Uri,
    proxied: bool,
}

/// Upstream URLs as parsed, by their text, with their proxy decision. An
/// adapter builds the same few URLs again and again (a provider's base URL
/// and path), and parsing one — the host's IDNA mapping included — costs more
/// than a look-up and a copy. Holds at most [`UrlCache::CAP`] URLs; once full,
/// a new URL is parsed and not kept, so an adapter that puts per-request data
/// in its URLs cannot grow it.
struct UrlCache {
    proxies: Matcher,
    parsed: Mutex<HashMap<String, Target>>,
}

impl UrlCache {
    const CAP: usize = 256;

    fn new(proxies: Matcher) -> Self {
        UrlCache { proxies, parsed: Mutex::default() }
    }

    fn target(&self, text: &str) -> Result<Target, AttemptError> {
        if let Some(t) = self.parsed.lock().unwrap_or_else(|p| p.into_inner()).get(text) {
            return Ok(t.clone());
        }
        let invalid = |e: &dyn std::fmt::Display| AttemptError::new(Trigger::ServerError, format!("adapter produced an invalid URL: {e}"));
        // WHATWG parsing first (what reqwest did): it normalises the host
        // (IDNA, case) and refuses what a browser would.
        let url = reqwest::Url::parse(text).map_err(|e| invalid(&e))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(AttemptError::new(Trigger::ServerError, "adapter produced a non-HTTP URL"));
        }
        let uri: http::Uri = url.as_str().parse().map_err(|e: http::uri::InvalidUri| invalid(&e))?;
        let proxied = self.proxies.intercept(&uri).is_some();
        let target = Target { url: Arc::new(url), uri, proxied };
        let mut parsed = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
        if parsed.len() < Self::CAP {
            parsed.insert(text.to_owned(), target.clone());
        }
        Ok(target)
    }
}

/// The PEM certificates of `upstream.ca_file` (none without one). Read once,
/// for both clients, so they trust exactly the same roots.
fn extra_roots(cfg: &UpstreamConfig) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let Some(path) = &cfg.ca_file else {
        return Ok(Vec::new());
    };
    let pem = std::fs::read(path).map_err(|e| anyhow::anyhow!("upstream.ca_file {}: {e}", path.display()))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("upstream.ca_file {}: not PEM certificates: {e}", path.display()))?;
    if certs.is_empty() {
        anyhow::bail!("upstream.ca_file {}: no PEM certificate in it", path.display());
    }
    Ok(certs)
}

/// The system's CA roots plus `extra`.
fn root_store(extra: &[CertificateDer<'static>]) -> anyhow::Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for e in &native.errors {
        tracing::warn!(error = %e, "a system CA certificate could not be loaded");
    }
    let (added, ignored) = roots.add_parsable_certificates(native.certs);
    if ignored > 0 {
        tracing::debug!(added, ignored, "system CA certificates rustls cannot use were skipped");
    }
    for cert in extra {
        roots.add(cert.clone()).map_err(|e| anyhow::anyhow!("upstream.ca_file: {e}"))?;
    }
    Ok(roots)
}

impl Transport {
    pub fn new(cfg: &UpstreamConfig) -> anyhow::Result<Self> {
        Self::with_proxies(cfg, Matcher::from_env())
    }

    /// [`Transport::new`] with the proxy settings given rather than read from
    /// the environment (reqwest's client still reads the environment).
    fn with_proxies(cfg: &UpstreamConfig, proxies: Matcher) -> anyhow::Result<Self> {
        let connect_timeout = Duration::from_millis(cfg.connect_timeout_ms);
        let mut builder = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .pool_idle_timeout(POOL_IDLE)
            .pool_max_idle_per_host(POOL_MAX_IDLE_PER_HOST)
            .tcp_nodelay(true)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(USER_AGENT);
        let extra = extra_roots(cfg)?;
        for cert in &extra {
            builder =
                builder.add_root_certificate(reqwest::Certificate::from_der(cert).map_err(|e| anyhow::anyhow!("upstream.ca_file: {e}"))?);
        }
        let proxied = builder.build()?;

        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| anyhow::anyhow!("TLS set-up: {e}"))?
            .with_root_certificates(root_store(&extra)?)
            .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        let https =
            hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_or_http().enable_all_versions().wrap_connector(http);
        let direct = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_max_idle_per_host(POOL_MAX_IDLE_PER_HOST)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(https);
        Ok(Transport { direct, proxied, max_response_bytes: cfg.max_response_bytes, urls: Arc::new(UrlCache::new(proxies)) })
    }

    /// Send a request described by a provider adapter. Connection failures are
    /// `server_error`s. The caller applies its deadlines around this call and
    /// around reading the body.
    pub async fn send(&self, req: HttpRequestDesc) -> Result<UpstreamResponse, AttemptError> {
        if req.url.starts_with("echo://") {
            return Ok(echo::respond(&req));
        }
        let method = http::Method::from_bytes(req.method.as_bytes())
            .map_err(|_| AttemptError::new(Trigger::ServerError, format!("adapter produced an invalid method {}", req.method)))?;
        let target = self.urls.target(&req.url)?;
        if target.proxied {
            self.send_proxied(method, (*target.url).clone(), req).await
        } else {
            self.send_direct(method, target.uri, req).await
        }
    }

    async fn send_direct(&self, method: http::Method, uri: http::Uri, req: HttpRequestDesc) -> Result<UpstreamResponse, AttemptError> {
        let mut headers = http::HeaderMap::with_capacity(req.headers.len() + 1);
        for (k, v) in req.headers {
            let name = http::HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| AttemptError::new(Trigger::ServerError, format!("adapter produced an invalid header name {k:?}")))?;
            let value = http::HeaderValue::try_from(v)
                .map_err(|_| AttemptError::new(Trigger::ServerError, format!("adapter produced an invalid value for header {name}")))?;
            headers.append(name, value);
        }
        if !headers.contains_key(http::header::USER_AGENT) {
            headers.insert(http::header::USER_AGENT, http::HeaderValue::from_static(USER_AGENT));
        }
        let mut request = http::Request::new(Full::new(Bytes::from(req.body)));
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        *request.headers_mut() = headers;
        let resp = self.direct.request(request).await.map_err(|e| {
            let what = if e.is_connect() { "could not connect to the upstream" } else { "the upstream request failed" };
            AttemptError::new(Trigger::ServerError, format!("{what}: {}", error_chain(&e)))
        })?;
        let status = resp.status().as_u16();
        let body = BodyDataStream::new(resp.into_body())
            .map(|r| r.map_err(|e| AttemptError::new(Trigger::ServerError, format!("upstream connection broke: {}", error_chain(&e)))));
        Ok(UpstreamResponse { status, body: Box::pin(body) })
    }

    async fn send_proxied(&self, method: http::Method, url: reqwest::Url, req: HttpRequestDesc) -> Result<UpstreamResponse, AttemptError> {
        let mut rb = self.proxied.request(method, url);
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
            AttemptError::new(Trigger::ServerError, format!("{what}: {}", error_chain(&e.without_url())))
        })?;
        let status = resp.status().as_u16();
        let body = resp.bytes_stream().map(|r| {
            r.map_err(|e| AttemptError::new(Trigger::ServerError, format!("upstream connection broke: {}", error_chain(&e.without_url()))))
        });
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

/// The error and its sources in one line. Neither client's errors carry the
/// URL here (reqwest's are stripped of it by the caller): a query string may
/// hold a credential.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use axum::routing::any;

    use super::*;

    fn no_proxies() -> Matcher {
        Matcher::builder().build()
    }

    #[test]
    fn a_url_is_parsed_once_and_served_from_the_cache_after() {
        let cache = UrlCache::new(no_proxies());
        let first = cache.target("https://api.example.com:8443/v1/chat/completions?x=1").expect("valid");
        let again = cache.target("https://api.example.com:8443/v1/chat/completions?x=1").expect("cached");
        assert_eq!(first.url, again.url);
        assert_eq!(first.uri, again.uri);
        assert_eq!(again.uri.host(), Some("api.example.com"));
        assert_eq!(again.uri.port_u16(), Some(8443));
        assert_eq!(again.uri.path_and_query().map(|p| p.as_str()), Some("/v1/chat/completions?x=1"));
        assert!(!again.proxied);
        assert_eq!(cache.parsed.lock().expect("lock").len(), 1);
        assert!(cache.target("not a url").is_err(), "a bad URL is an error and is not kept");
        assert!(cache.target("ftp://files.example.com/x").is_err(), "only http and https");
        assert_eq!(cache.parsed.lock().expect("lock").len(), 1);
    }

    #[test]
    fn hosts_are_normalised_as_a_browser_would() {
        let cache = UrlCache::new(no_proxies());
        let t = cache.target("HTTP://API.Example.COM/v1").expect("valid");
        assert_eq!(t.uri.to_string(), "http://api.example.com/v1");
    }

    #[test]
    fn the_cache_stops_growing_at_its_cap_and_still_parses() {
        let cache = UrlCache::new(no_proxies());
        for i in 0..UrlCache::CAP + 10 {
            let t = cache.target(&format!("http://127.0.0.1:9/v1/{i}")).expect("valid");
            assert_eq!(t.uri.path(), format!("/v1/{i}"));
        }
        assert_eq!(cache.parsed.lock().expect("lock").len(), UrlCache::CAP);
    }

    #[test]
    fn a_destination_a_proxy_applies_to_goes_the_proxied_way() {
        let cache = UrlCache::new(Matcher::builder().http("http://127.0.0.1:3128").no("localhost,.internal").build());
        assert!(cache.target("http://api.example.com/v1").expect("valid").proxied);
        assert!(!cache.target("https://api.example.com/v1").expect("valid").proxied, "no HTTPS proxy is set");
        assert!(!cache.target("http://localhost:8080/v1").expect("valid").proxied, "NO_PROXY");
        assert!(!cache.target("http://llm.internal/v1").expect("valid").proxied, "NO_PROXY suffix");
        let all = UrlCache::new(Matcher::builder().all("http://127.0.0.1:3128").build());
        assert!(all.target("https://api.example.com/v1").expect("valid").proxied);
    }

    fn desc(method: &str, url: String, headers: &[(&str, &str)], body: &str) -> HttpRequestDesc {
        HttpRequestDesc {
            method: method.into(),
            url,
            headers: headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            body: body.into(),
        }
    }

    /// A loopback upstream that answers with what it was sent.
    async fn echo_upstream() -> std::net::SocketAddr {
        let app = axum::Router::new().fallback(any(|req: axum::extract::Request| async move {
            let (parts, body) = req.into_parts();
            let body = axum::body::to_bytes(body, 1 << 20).await.expect("body");
            let header = |n: &str| parts.headers.get_all(n).iter().map(|v| v.to_str().unwrap_or("?").to_owned()).collect::<Vec<_>>();
            let seen = serde_json::json!({
                "method": parts.method.as_str(),
                "target": parts.uri.to_string(),
                "host": header("host"),
                "user_agent": header("user-agent"),
                "x_custom": header("x-custom"),
                "length": header("content-length"),
                "body": String::from_utf8_lossy(&body),
            });
            (axum::http::StatusCode::CREATED, seen.to_string())
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        #[expect(clippy::disallowed_methods, reason = "a test's upstream server, dropped with the test's runtime")]
        tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
        addr
    }

    #[tokio::test]
    async fn a_direct_call_sends_method_path_headers_and_body_and_streams_the_answer() {
        let addr = echo_upstream().await;
        let t = Transport::with_proxies(&UpstreamConfig::default(), no_proxies()).expect("transport");
        for _ in 0..2 {
            // The second call reuses the pooled connection.
            let resp = t
                .send(desc(
                    "POST",
                    format!("http://{addr}/v1/chat?x=1"),
                    &[("x-custom", "a"), ("content-type", "application/json")],
                    "{\"q\":1}",
                ))
                .await
                .expect("sent");
            assert_eq!(resp.status, 201);
            let seen: serde_json::Value = serde_json::from_str(&t.read_all(resp.body).await.expect("body")).expect("json");
            assert_eq!(seen["method"], "POST");
            assert_eq!(seen["target"], "/v1/chat?x=1");
            assert_eq!(seen["host"], serde_json::json!([addr.to_string()]));
            assert_eq!(seen["user_agent"], serde_json::json!([USER_AGENT]));
            assert_eq!(seen["x_custom"], serde_json::json!(["a"]));
            assert_eq!(seen["length"], serde_json::json!(["7"]));
            assert_eq!(seen["body"], "{\"q\":1}");
        }
        // An adapter's own user agent replaces ours, not joins it.
        let resp = t.send(desc("GET", format!("http://{addr}/"), &[("User-Agent", "sdk/1")], "")).await.expect("sent");
        let seen: serde_json::Value = serde_json::from_str(&t.read_all(resp.body).await.expect("body")).expect("json");
        assert_eq!(seen["user_agent"], serde_json::json!(["sdk/1"]));
        assert_eq!(seen["method"], "GET");
    }

    #[tokio::test]
    async fn what_cannot_be_sent_is_a_server_error_that_says_why() {
        let t = Transport::with_proxies(&UpstreamConfig::default(), no_proxies()).expect("transport");
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr")
        };
        let cases = [
            (desc("POST", format!("http://{closed}/v1"), &[], ""), "could not connect to the upstream"),
            (desc("POST", "http://[::1".into(), &[], ""), "adapter produced an invalid URL"),
            (desc("POST", "file:///etc/passwd".into(), &[], ""), "adapter produced a non-HTTP URL"),
            (desc("PO ST", "http://127.0.0.1:9/".into(), &[], ""), "adapter produced an invalid method"),
            (desc("POST", "http://127.0.0.1:9/".into(), &[("bad header", "x")], ""), "invalid header name"),
            (desc("POST", "http://127.0.0.1:9/".into(), &[("x-ok", "line\nbreak")], ""), "invalid value for header x-ok"),
        ];
        for (req, want) in cases {
            let url = req.url.clone();
            let err = t.send(req).await.err().unwrap_or_else(|| panic!("{url}: sent"));
            assert_eq!(err.trigger, Trigger::ServerError, "{url}");
            assert!(err.message.contains(want), "{url}: {}", err.message);
        }
    }

    #[test]
    fn a_ca_file_that_holds_no_certificate_is_refused_at_start() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate\n").expect("write");
        let cfg = UpstreamConfig { ca_file: Some(path), ..Default::default() };
        let err = Transport::with_proxies(&cfg, no_proxies()).err().expect("refused").to_string();
        assert!(err.contains("upstream.ca_file"), "{err}");
    }
}
