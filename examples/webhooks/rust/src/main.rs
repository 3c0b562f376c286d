//! A Gatehouse webhook receiver in Rust: a blocking HTTP/1.1 server on the
//! standard library, plus `hmac`/`sha2`/`hex` for the signature.
//!
//! Run:  WEBHOOK_SECRET=whsec_... PORT=9000 cargo run --release
//!
//! It checks `X-Gatehouse-Signature: t=<unix>,v1=<hex>` over the raw request
//! bytes, refuses a `t` more than 300 s from now (replay protection) and
//! handles each `X-Gatehouse-Delivery` id once (deliveries are at-least-once).

use std::collections::{HashSet, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;

const TOLERANCE_SECONDS: i64 = 300;
const MAX_BODY: usize = 1 << 20;

/// Does `header` sign `body` with `secret`, within `tolerance` seconds of `now`?
/// The key is the whole secret string (`whsec_` included); the signed bytes
/// are `<t>.<raw body>`.
pub fn verify(secret: &str, header: &str, body: &[u8], now: i64, tolerance: i64) -> bool {
    let (mut t, mut v1) = (None, None);
    for part in header.split(',') {
        let Some((k, v)) = part.trim().split_once('=') else { return false };
        let slot = match k {
            "t" => &mut t,
            "v1" => &mut v1,
            _ => continue,
        };
        if slot.replace(v).is_some() {
            return false; // exactly one t and one v1
        }
    }
    let (Some(Ok(t)), Some(v1)) = (t.map(str::parse::<i64>), v1) else { return false };
    if (now - t).abs() > tolerance {
        return false;
    }
    let Ok(sig) = hex::decode(v1) else { return false };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else { return false };
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.verify_slice(&sig).is_ok() // constant-time comparison
}

/// The last `capacity` delivery ids (a database table in production).
struct SeenDeliveries {
    set: HashSet<String>,
    order: VecDeque<String>,
    capacity: usize,
}

impl SeenDeliveries {
    fn first_time(&mut self, id: &str) -> bool {
        if !self.set.insert(id.to_owned()) {
            return false;
        }
        self.order.push_back(id.to_owned());
        if self.order.len() > self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
        true
    }
}

/// Read one request: its headers (lower-cased names) and its raw body.
fn read_request(stream: &TcpStream) -> std::io::Result<(Vec<(String, String)>, Vec<u8>)> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?; // request line
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let len: usize = header(&headers, "content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; len.min(MAX_BODY)];
    reader.read_exact(&mut body)?;
    Ok((headers, body))
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn answer(mut stream: &TcpStream, status: &str, text: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
}

fn main() {
    let secret = std::env::var("WEBHOOK_SECRET").unwrap_or_default();
    if !secret.starts_with("whsec_") {
        eprintln!("set WEBHOOK_SECRET to the endpoint's whsec_... secret");
        std::process::exit(1);
    }
    let port = std::env::var("PORT").unwrap_or_else(|_| "9000".into());
    let listener = TcpListener::bind(format!("127.0.0.1:{port}")).expect("bind");
    println!("listening on http://127.0.0.1:{port}/");
    let mut seen = SeenDeliveries { set: HashSet::new(), order: VecDeque::new(), capacity: 10_000 };
    for stream in listener.incoming().flatten() {
        let Ok((headers, body)) = read_request(&stream) else { continue };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
        let signature = header(&headers, "x-gatehouse-signature").unwrap_or_default();
        if !verify(&secret, signature, &body, now, TOLERANCE_SECONDS) {
            answer(&stream, "401 Unauthorized", "bad signature");
            continue;
        }
        let delivery = header(&headers, "x-gatehouse-delivery").unwrap_or_default();
        if !seen.first_time(delivery) {
            answer(&stream, "200 OK", "duplicate, already handled");
            continue;
        }
        let event = header(&headers, "x-gatehouse-event").unwrap_or_default();
        println!("{event} (delivery {delivery}): {}", String::from_utf8_lossy(&body));
        answer(&stream, "200 OK", "ok");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The same vector as the host's signer test:
    // printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac 'whsec_test'
    const HEADER: &str = "t=1700000000,v1=38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789";

    #[test]
    fn known_answer_tamper_and_tolerance() {
        let body = br#"{"a":1}"#;
        assert!(verify("whsec_test", HEADER, body, 1_700_000_000, 300));
        assert!(verify("whsec_test", HEADER, body, 1_700_000_300, 300));
        assert!(!verify("whsec_test", HEADER, body, 1_700_000_301, 300));
        assert!(!verify("whsec_test", HEADER, br#"{"a":2}"#, 1_700_000_000, 300));
        assert!(!verify("whsec_other", HEADER, body, 1_700_000_000, 300));
        assert!(!verify("whsec_test", &format!("{HEADER},v1=00"), body, 1_700_000_000, 300));
    }

    #[test]
    fn duplicates_are_seen() {
        let mut s = SeenDeliveries { set: HashSet::new(), order: VecDeque::new(), capacity: 2 };
        assert!(s.first_time("a"));
        assert!(!s.first_time("a"));
        assert!(s.first_time("b"));
        assert!(s.first_time("c"));
        assert!(s.first_time("a")); // forgotten beyond the capacity
    }
}
