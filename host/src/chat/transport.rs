//! The one place the host talks to upstreams: a pooled HTTP client (system CA
//! roots plus an optional CA file, proxies from the environment), and the
//! in-process `echo://` transport of the offline provider. Both hand back a
//! status and a byte stream, so the streaming path is the same for all.

use std::pin::Pin;
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
        Ok(Transport { client: builder.build()?, max_response_bytes: cfg.max_response_bytes })
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
        let url = reqwest::Url::parse(&req.url)
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
