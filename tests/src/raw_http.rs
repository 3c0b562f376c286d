//! Raw HTTP/1.1 over a TCP socket, for what a well-behaved client library
//! will not send: unnormalised paths, invalid percent-encodings, header
//! floods, trickled headers and bodies.

use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What came back on a raw connection.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// `None` when the server closed without a status line.
    pub status: Option<u16>,
    /// Lower-case header names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Time from the first byte written to the end of the answer (or close).
    pub elapsed: Duration,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The body as JSON; `Null` when it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// `base_url` is `http://host:port`.
pub fn addr_of(base_url: &str) -> String {
    base_url.trim_start_matches("http://").trim_end_matches('/').to_owned()
}

/// Send `request` (written as is; add `Connection: close`) and read until the
/// server closes or `within` passes. Write errors are ignored: a server may
/// answer and close before it has read everything.
pub async fn send(base_url: &str, request: &[u8], within: Duration) -> RawResponse {
    let mut s = TcpStream::connect(addr_of(base_url)).await.expect("connect");
    let started = Instant::now();
    let _ = s.write_all(request).await;
    read_answer(&mut s, started, within).await
}

/// Read until close (or `within`), then parse what arrived.
pub async fn read_answer<R: AsyncRead + Unpin>(s: &mut R, started: Instant, within: Duration) -> RawResponse {
    let mut buf = Vec::new();
    let deadline = tokio::time::Instant::from_std(started + within);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => {
                buf.extend_from_slice(&chunk[..n]);
                if complete(&buf) {
                    break;
                }
            }
        }
    }
    parse(&buf, started.elapsed())
}

/// A whole answer with a `Content-Length` has arrived.
fn complete(buf: &[u8]) -> bool {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { return false };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let len = head.lines().find_map(|l| l.strip_prefix("content-length:").and_then(|v| v.trim().parse::<usize>().ok()));
    len.is_some_and(|n| buf.len() >= end + 4 + n)
}

fn parse(buf: &[u8], elapsed: Duration) -> RawResponse {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return RawResponse { status: None, headers: Vec::new(), body: Vec::new(), elapsed };
    };
    let head = String::from_utf8_lossy(&buf[..end]);
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|c| c.parse().ok());
    let headers =
        lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned())).collect::<Vec<_>>();
    let mut body = buf[end + 4..].to_vec();
    if headers.iter().any(|(n, v)| n == "transfer-encoding" && v.contains("chunked")) {
        body = dechunk(&body);
    }
    RawResponse { status, headers, body, elapsed }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let Ok(n) = usize::from_str_radix(String::from_utf8_lossy(&b[..eol]).trim(), 16) else { break };
        if n == 0 || b.len() < eol + 2 + n {
            break;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + n]);
        b = &b[(eol + 4 + n).min(b.len())..];
    }
    out
}

/// A request head with `Host` and `Connection: close`, plus `extra` header lines.
pub fn head(method: &str, target: &str, extra: &[String]) -> Vec<u8> {
    let mut s = format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for h in extra {
        s.push_str(h);
        s.push_str("\r\n");
    }
    s.push_str("\r\n");
    s.into_bytes()
}

/// A whole request with a body.
pub fn with_body(method: &str, target: &str, key: &str, body: &[u8]) -> Vec<u8> {
    let mut req = head(
        method,
        target,
        &[format!("Authorization: Bearer {key}"), "Content-Type: application/json".into(), format!("Content-Length: {}", body.len())],
    );
    req.extend_from_slice(body);
    req
}
