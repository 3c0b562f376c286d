//! Bad input over HTTP, black box: oversized and unreadable bodies, slow
//! clients (slowloris), header floods and path tricks each get a clear error
//! in the route's format (or, below HTTP, a closed connection), and the
//! server's resident memory stays bounded through a burst of them.

use std::time::{Duration, Instant};

use gatehouse_tests::Server;
use gatehouse_tests::procfs;
use gatehouse_tests::raw_http::{self, RawResponse, head, with_body};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

const WITHIN: Duration = Duration::from_secs(20);

/// The three error formats: chat (flat), OpenAI-compatible, everything else (nested).
const ROUTES: [&str; 3] = ["/chat/completions", "/api/external/v1/chat/completions", "/api/admin/users"];

/// Assert the error is in the format of `path` and return its short text or code.
fn error_of(path: &str, r: &RawResponse) -> String {
    let v = r.json();
    assert!(r.header("x-request-id").is_some_and(|id| id.starts_with("req-")), "{path}: no request id: {r:?}");
    if path == "/chat/completions" {
        assert_eq!(v["success"], false, "{path}: {v}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{path}: {v}");
        assert!(v["request_id"].as_str().is_some_and(|id| id.starts_with("req-")), "{path}: {v}");
        v["error"].as_str().expect("flat error text").to_owned()
    } else if path.starts_with("/api/external/v1/") {
        assert!(v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{path}: {v}");
        v["error"]["code"].as_str().expect("openai error code").to_owned()
    } else {
        assert_eq!(v["success"], false, "{path}: {v}");
        assert!(v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{path}: {v}");
        v["error"]["code"].as_str().expect("nested error code").to_owned()
    }
}

fn expected_413(path: &str) -> &'static str {
    match path {
        "/chat/completions" => "Payload too large",
        "/api/external/v1/chat/completions" => "payload_too_large",
        _ => "PAYLOAD_TOO_LARGE",
    }
}

/// Every bad request of the burst, with the statuses it may get.
fn bad_requests(key: &str) -> Vec<(String, Vec<u8>, &'static [u16])> {
    let auth = format!("Authorization: Bearer {key}");
    let mut out: Vec<(String, Vec<u8>, &'static [u16])> = Vec::new();
    for path in ROUTES {
        // A declared body over the 2 MiB cap: refused before it is sent.
        out.push((
            format!("declared 3 MiB on {path}"),
            head("POST", path, &[auth.clone(), "Content-Type: application/json".into(), "Content-Length: 3145728".into()]),
            &[413],
        ));
        for (what, body) in [
            ("malformed JSON", b"{\"prompt\": \"hi\", ".to_vec()),
            ("invalid UTF-8", b"{\"prompt\": \"\xff\xfe\xfd\", \"name\": \"\xc0\xaf\"}".to_vec()),
            ("bare invalid bytes", vec![0xff, 0xfe, 0x00, 0x80]),
            ("empty body", Vec::new()),
            ("a JSON array", b"[1, 2, 3]".to_vec()),
            ("nesting 100,000 deep", [vec![b'['; 100_000], vec![b']'; 100_000]].concat()),
            ("a 1 MiB string of garbage", [b"{\"x\":\"".to_vec(), vec![b'\\'; 1 << 20]].concat()),
        ] {
            out.push((format!("{what} on {path}"), with_body("POST", path, key, &body), &[400, 422]));
        }
    }
    // Header floods: below HTTP, answered 431 or closed.
    let many: Vec<String> = (0..300).map(|i| format!("X-Flood-{i}: {i}")).collect();
    out.push(("300 headers".into(), head("GET", "/api/admin/users", &many), &[431, 0]));
    out.push(("one 200 KB header".into(), head("GET", "/api/admin/users", &[format!("X-Big: {}", "a".repeat(200_000))]), &[431, 0]));
    // Path tricks: routes match literally, nothing is normalised into another route.
    for (path, statuses) in [
        ("/api/admin/../admin/users", &[404][..]),
        ("/api/admin/%2e%2e/admin/users", &[404]),
        ("/api/admin/%2E%2E%2Fadmin/users", &[404]),
        ("//api/admin/users", &[404]),
        ("/api/admin//users", &[404]),
        ("/api/admin/users/..%2f..%2fetc%2fpasswd", &[404]),
        ("/api/receipts/%ff%fe", &[400]),
        ("/api/admin/users/%c0%af", &[400]),
        ("/api/admin/keys/%e2%82", &[400]),
    ] {
        out.push((format!("GET {path}"), head("GET", path, std::slice::from_ref(&auth)), statuses));
    }
    let long = format!("/api/admin/users/{}", "a".repeat(30_000));
    out.push(("a 30 KB path".into(), head("GET", &long, std::slice::from_ref(&auth)), &[404]));
    let too_long = format!("/api/admin/users/{}", "a".repeat(100_000));
    out.push(("a 100 KB path".into(), head("GET", &too_long, std::slice::from_ref(&auth)), &[414, 431, 400, 0]));
    let mut raw = b"GET /api/admin/\xff\xfe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n".to_vec();
    raw.extend_from_slice(auth.as_bytes());
    raw.extend_from_slice(b"\r\n\r\n");
    out.push(("raw non-UTF-8 bytes in the path".into(), raw, &[400, 404, 0]));
    // Without a key, a path that starts like the public one is not public.
    for path in ["/health/../api/admin/users", "/health%2f..%2fapi/admin/users", "/health/"] {
        out.push((format!("anonymous GET {path}"), head("GET", path, &[]), &[401]));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_errors_and_memory_stays_bounded() {
    let s = Server::start();
    let pid = s.pid().expect("pid");
    for (what, req, statuses) in bad_requests(&s.admin_key) {
        let r = raw_http::send(&s.base_url, &req, WITHIN).await;
        let status = r.status.unwrap_or(0);
        assert!(statuses.contains(&status), "{what}: got {status}, expected one of {statuses:?}; {r:?}");
        if (400..500).contains(&status) && status != 431 && status != 414 && r.header("x-request-id").is_some() {
            let path = ROUTES.iter().filter(|p| what.ends_with(*p)).max_by_key(|p| p.len()).copied().unwrap_or("/api/admin/users");
            let code = error_of(path, &r);
            if status == 413 {
                assert_eq!(code, expected_413(path), "{what}");
            }
        } else if status != 0 {
            // Refusals hyper makes itself (bad request line, 414, 431) carry no body to check.
            assert!(!(200..300).contains(&status), "{what}: served {r:?}");
        }
    }

    // The declared oversized body was refused without being sent: the answer
    // came back on a connection that never wrote a byte of body.
    let r = raw_http::send(
        &s.base_url,
        &head("POST", "/api/admin/users", &[format!("Authorization: Bearer {}", s.admin_key), "Content-Length: 104857600".into()]),
        WITHIN,
    )
    .await;
    assert_eq!(r.status, Some(413), "{r:?}");

    // A chunked body over the cap is cut off as it arrives.
    let mut stream = tokio::net::TcpStream::connect(raw_http::addr_of(&s.base_url)).await.expect("connect");
    let started = Instant::now();
    let req = head(
        "POST",
        "/chat/completions",
        &[format!("Authorization: Bearer {}", s.admin_key), "Content-Type: application/json".into(), "Transfer-Encoding: chunked".into()],
    );
    stream.write_all(&req).await.expect("head");
    let chunk = [format!("{:x}\r\n", 64 * 1024).into_bytes(), vec![b' '; 64 * 1024], b"\r\n".to_vec()].concat();
    for _ in 0..40 {
        if stream.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let r = raw_http::read_answer(&mut stream, started, WITHIN).await;
    assert_eq!(r.status, Some(413), "chunked 2.5 MiB: {r:?}");
    assert_eq!(error_of("/chat/completions", &r), "Payload too large");

    // Memory: warm up, then a burst of 20 rounds of every bad request
    // (820 requests, about 80 MB sent); resident memory may not grow by more
    // than 64 MiB (keeping the bodies would cost 80 MB).
    let burst = bad_requests(&s.admin_key);
    let before = procfs::rss_kib(pid).expect("rss");
    let mut sent = 0usize;
    for _ in 0..20 {
        let mut tasks = Vec::new();
        for (_, req, _) in burst.clone() {
            sent += req.len();
            let base = s.base_url.clone();
            tasks.push(tokio::spawn(async move { raw_http::send(&base, &req, WITHIN).await.status }));
        }
        for t in tasks {
            t.await.expect("task");
        }
    }
    let after = procfs::rss_kib(pid).expect("rss");
    println!(
        "bad-input burst: {} requests, {} MB sent; server RSS {} KiB before, {} KiB after ({:+} KiB)",
        burst.len() * 20,
        sent / 1_000_000,
        before,
        after,
        after as i64 - before as i64
    );
    assert!(after < before + 64 * 1024, "RSS grew from {before} KiB to {after} KiB");
    let health = s.client.get(s.url("/health")).send().await.expect("health");
    assert_eq!(health.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off() {
    let s = Server::builder().toml("[server]\nheader_read_timeout_ms = 1000\nbody_read_timeout_ms = 1000").start();
    let addr = raw_http::addr_of(&s.base_url);

    // Headers trickled one byte every 100 ms: the connection is closed
    // after about a second, long before the head is complete.
    let mut c = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let started = Instant::now();
    let head_bytes = head("GET", "/health", &[format!("X-Slow: {}", "s".repeat(200))]);
    let mut closed_after = None;
    for b in &head_bytes {
        if c.write_all(std::slice::from_ref(b)).await.is_err() {
            closed_after = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = raw_http::read_answer(&mut c, started, WITHIN).await;
    let cut = closed_after.unwrap_or(r.elapsed);
    assert!(r.status != Some(200), "a trickled head was served: {r:?}");
    assert!(cut < Duration::from_secs(10), "the slow head was not cut off ({cut:?}; it takes {} s to send)", head_bytes.len() / 10);

    // A body trickled one byte every 200 ms: 408 in the route's format.
    for path in ROUTES {
        let mut c = tokio::net::TcpStream::connect(&addr).await.expect("connect");
        let started = Instant::now();
        let req = head(
            "POST",
            path,
            &[format!("Authorization: Bearer {}", s.admin_key), "Content-Type: application/json".into(), "Content-Length: 200".into()],
        );
        c.write_all(&req).await.expect("head");
        let (mut rd, mut wr) = c.into_split();
        // The answer arrives while the client is still trickling.
        let trickle = tokio::spawn(async move {
            for _ in 0..200 {
                if wr.write_all(b" ").await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        let r = raw_http::read_answer(&mut rd, started, WITHIN).await;
        trickle.abort();
        assert_eq!(r.status, Some(408), "{path}: {r:?}");
        let expected = match path {
            "/chat/completions" => "Request timeout",
            "/api/external/v1/chat/completions" => "request_timeout",
            _ => "REQUEST_TIMEOUT",
        };
        assert_eq!(error_of(path, &r), expected);
        assert!(r.elapsed < Duration::from_secs(8), "{path}: 408 took {:?}", r.elapsed);
    }

    // An idle connection that never sends anything is closed too.
    let mut idle = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let r = raw_http::read_answer(&mut idle, Instant::now(), WITHIN).await;
    assert!(r.elapsed < Duration::from_secs(10), "idle connection kept open {:?}", r.elapsed);

    // Well-behaved clients are unaffected.
    let ok = s.admin(reqwest::Method::GET, "/api/admin/users").send().await.expect("send");
    assert_eq!(ok.status(), 200);
    let v: Value = ok.json().await.expect("json");
    assert_eq!(v["success"], true);
}

/// A keep-alive connection that carries nothing for `keep_alive_timeout_ms`
/// is closed; a request whose answer takes longer than that is still answered
/// in full on its connection (then the connection closes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alive_connections_are_closed_but_slow_answers_are_not_cut() {
    use gatehouse_tests::mock_upstream::MockUpstream;
    use tokio::io::AsyncReadExt;

    let mock = MockUpstream::start().await;
    let s = Server::builder()
        .toml("[server]\nkeep_alive_timeout_ms = 1000\n")
        .toml(&format!(
            "[providers.openai]\nplugin = \"provider-openai\"\nbase_url = \"{}\"\napi_key_env = \"MOCK_OPENAI_KEY\"\n\
             models = [\"openai/slow-2500-a\"]\n",
            mock.openai_base_url()
        ))
        .env("MOCK_OPENAI_KEY", "sk-upstream-openai-secret")
        .start();
    let addr = raw_http::addr_of(&s.base_url);

    // Two requests on one keep-alive connection, then silence: closed after about a second.
    let mut c = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    for _ in 0..2 {
        let started = Instant::now();
        c.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n").await.expect("request");
        let r = raw_http::read_answer(&mut c, started, WITHIN).await;
        assert_eq!(r.status, Some(200), "{r:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let quiet = Instant::now();
    let mut byte = [0u8; 1];
    let closed = tokio::time::timeout(Duration::from_secs(15), c.read(&mut byte)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "the idle connection was not closed: {closed:?}");
    let after = quiet.elapsed();
    assert!(after >= Duration::from_millis(500) && after < Duration::from_secs(10), "closed after {after:?} of silence");

    // An answer that takes 2.5 s (longer than the timeout) arrives whole.
    let body = br#"{"model":"openai/slow-2500-a","index":"Zero-Knowledge","messages":[{"role":"user","content":"hello"}]}"#;
    let mut req = format!(
        "POST /chat/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        s.admin_key,
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    let mut c = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let started = Instant::now();
    c.write_all(&req).await.expect("request");
    let r = raw_http::read_answer(&mut c, started, WITHIN).await;
    assert_eq!(r.status, Some(200), "{r:?}");
    assert!(r.elapsed >= Duration::from_millis(2500), "the mock answers after 2.5 s: {:?}", r.elapsed);
    let v = r.json();
    assert_eq!(v["success"], true, "{v}");
    assert!(v["choices"][0]["message"]["content"].as_str().is_some_and(|t| !t.is_empty()), "{v}");
}

/// HTTP/2 frames by hand (prior knowledge): the preface, then frames of
/// `type` on stream 0.
mod h2_frames {
    pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    pub const SETTINGS: u8 = 0x4;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;

    pub fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let n = payload.len();
        let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags, 0, 0, 0, 0];
        f.extend_from_slice(payload);
        f
    }

    /// The frames in `buf` as (type, flags, payload); a partial last frame is left out.
    pub fn parse(mut buf: &[u8]) -> Vec<(u8, u8, Vec<u8>)> {
        let mut out = Vec::new();
        while buf.len() >= 9 {
            let n = (usize::from(buf[0]) << 16) | (usize::from(buf[1]) << 8) | usize::from(buf[2]);
            if buf.len() < 9 + n {
                break;
            }
            out.push((buf[3], buf[4], buf[9..9 + n].to_vec()));
            buf = &buf[9 + n..];
        }
        out
    }
}

/// Open an HTTP/2 (prior knowledge) connection that sends PINGs every 200 ms
/// for up to 8 s and nothing else: when the server closed it (if it did) and
/// the frames it sent.
async fn only_pings(s: &Server) -> (Option<Duration>, Vec<(u8, u8, Vec<u8>)>) {
    use h2_frames::*;
    use tokio::io::AsyncReadExt;

    let mut c = tokio::net::TcpStream::connect(raw_http::addr_of(&s.base_url)).await.expect("connect");
    c.write_all(PREFACE).await.expect("preface");
    c.write_all(&frame(SETTINGS, 0, &[])).await.expect("settings");
    let (mut rd, mut wr) = c.into_split();
    let pinger = tokio::spawn(async move {
        for i in 0u64..40 {
            if wr.write_all(&frame(PING, 0, &i.to_be_bytes())).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Keep the write side open: closing it would end the connection from here.
        std::future::pending::<()>().await;
    });
    let started = Instant::now();
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    let closed = loop {
        match tokio::time::timeout(Duration::from_secs(10), rd.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break Some(started.elapsed()),
            Ok(Ok(n)) => seen.extend_from_slice(&chunk[..n]),
            Err(_) => break None,
        }
    };
    pinger.abort();
    (closed, parse(&seen))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_connection_that_only_pings_is_closed_when_idle() {
    use h2_frames::*;

    let s = Server::builder().toml("[server]\nkeep_alive_timeout_ms = 1000\n").start();
    let (closed, frames) = only_pings(&s).await;
    assert!(frames.iter().any(|(t, flags, _)| *t == PING && flags & 1 == 1), "the server answered the pings: {frames:?}");
    let closed = closed.expect("a connection that only pings was kept open");
    assert!(closed < Duration::from_secs(6), "closed only after {closed:?}");
    assert!(frames.iter().any(|(t, _, _)| *t == GOAWAY), "closed with GOAWAY: {frames:?}");
    // Requests over HTTP/2 are served as before.
    let h2 = reqwest::Client::builder().http2_prior_knowledge().build().expect("h2 client");
    let r = h2.get(s.url("/health")).send().await.expect("h2 request");
    assert_eq!(r.status(), 200);
    assert_eq!(r.version(), reqwest::Version::HTTP_2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_streams_per_connection_are_bounded_by_the_config() {
    use h2_frames::*;

    let s = Server::builder().toml("[server]\nkeep_alive_timeout_ms = 500\nhttp2_max_concurrent_streams = 7\n").start();
    let (_, frames) = only_pings(&s).await;
    // SETTINGS_MAX_CONCURRENT_STREAMS (0x3) is the configured bound.
    let (_, _, settings) = frames.iter().find(|(t, flags, _)| *t == SETTINGS && flags & 1 == 0).expect("the server's SETTINGS");
    let max_streams = settings.chunks(6).find(|p| p[..2] == [0, 3]).map(|p| u32::from_be_bytes([p[2], p[3], p[4], p[5]]));
    assert_eq!(max_streams, Some(7), "{settings:?}");
}

/// A raw connection that sends nothing; `true` when the server closed it within `within`.
async fn closed_within(c: &mut tokio::net::TcpStream, within: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut b = [0u8; 1];
    matches!(tokio::time::timeout(within, c.read(&mut b)).await, Ok(Ok(0)) | Ok(Err(_)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_per_address_are_capped_when_configured() {
    let s = Server::builder().toml("[server]\nmax_connections_per_ip = 3\n").start();
    let addr = raw_http::addr_of(&s.base_url);
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(tokio::net::TcpStream::connect(&addr).await.expect("connect"));
    }
    let mut fourth = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    assert!(closed_within(&mut fourth, Duration::from_secs(3)).await, "a fourth connection from one address was kept");
    for c in &mut open {
        assert!(!closed_within(c, Duration::from_millis(100)).await, "a connection within the cap was closed");
    }
    // A closed connection frees its place.
    drop(open.pop());
    let started = Instant::now();
    loop {
        let r = raw_http::send(&s.base_url, &head("GET", "/health", &[]), Duration::from_secs(5)).await;
        if r.status == Some(200) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "the freed place was never given back: {r:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Forwarded addresses count only from a trusted proxy: here none is, so the header changes nothing.
    // The server may not have seen the last request's connection close yet (that place is freed a
    // moment later), so this is polled like the freed place above.
    let started = Instant::now();
    loop {
        let r =
            raw_http::send(&s.base_url, &head("GET", "/health", &["X-Forwarded-For: 198.51.100.1".into()]), Duration::from_secs(5)).await;
        if r.status == Some(200) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "a request with a forwarded address was refused: {r:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_the_forwarded_address_is_the_one_capped() {
    let s = Server::builder().toml("[server]\nmax_connections_per_ip = 2\ntrusted_proxies = [\"127.0.0.0/8\"]\n").start();
    let addr = raw_http::addr_of(&s.base_url);
    // The balancer's own connections are not capped.
    let mut balancer = Vec::new();
    for _ in 0..4 {
        balancer.push(tokio::net::TcpStream::connect(&addr).await.expect("connect"));
    }
    for c in &mut balancer {
        assert!(!closed_within(c, Duration::from_millis(100)).await, "the trusted balancer's connection was closed");
    }
    // One client behind it holds two requests (bodies that never come)…
    let silent = |client: &str| {
        head(
            "POST",
            "/chat/completions",
            &[
                format!("Authorization: Bearer {}", s.admin_key),
                "Content-Type: application/json".into(),
                "Content-Length: 100".into(),
                format!("X-Forwarded-For: {client}, 127.0.0.1"),
            ],
        )
    };
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = tokio::net::TcpStream::connect(&addr).await.expect("connect");
        c.write_all(&silent("203.0.113.7")).await.expect("head");
        held.push(c);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // …so its third is refused, in the route's format…
    let r = raw_http::send(&s.base_url, &silent("203.0.113.7"), Duration::from_secs(5)).await;
    assert_eq!(r.status, Some(503), "{r:?}");
    assert_eq!(error_of("/chat/completions", &r), "Server busy");
    assert!(r.json()["message"].as_str().expect("message").contains("server.max_connections_per_ip"), "{}", r.json());
    let fwd = ["Forwarded: for=203.0.113.7".to_owned()];
    let r = raw_http::send(&s.base_url, &head("GET", "/health", &fwd), Duration::from_secs(5)).await;
    assert_eq!(r.status, Some(503), "the `Forwarded` header names the client too: {r:?}");
    // …while another client behind the same balancer is served.
    let r = raw_http::send(&s.base_url, &head("GET", "/health", &["X-Forwarded-For: 203.0.113.8".into()]), Duration::from_secs(5)).await;
    assert_eq!(r.status, Some(200), "{r:?}");
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_of_bodies_being_received_are_capped_host_wide() {
    let s = Server::builder().toml("[server]\nmax_body_bytes = 307200\nmax_buffered_body_bytes = 400000\n").start();
    let addr = raw_http::addr_of(&s.base_url);
    let body_head = |len: usize| {
        head(
            "POST",
            "/api/admin/users",
            &[format!("Authorization: Bearer {}", s.admin_key), "Content-Type: application/json".into(), format!("Content-Length: {len}")],
        )
    };
    // 300,000 bytes of a body arrive, its last byte never does.
    let mut first = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    first.write_all(&body_head(300_001)).await.expect("head");
    first.write_all(&vec![b' '; 300_000]).await.expect("body");
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Another 200,000 would take the host past 400,000: 503 in the route's format.
    let mut second = body_head(200_000);
    second.extend_from_slice(&vec![b' '; 200_000]);
    let r = raw_http::send(&s.base_url, &second, WITHIN).await;
    assert_eq!(r.status, Some(503), "{r:?}");
    assert_eq!(error_of("/api/admin/users", &r), "SERVER_BUSY");
    assert!(r.json()["error"]["message"].as_str().expect("message").contains("server.max_buffered_body_bytes"), "{}", r.json());
    assert_eq!(r.header("retry-after"), Some("1"));
    // Once the first is gone, its bytes are given back.
    drop(first);
    let started = Instant::now();
    loop {
        let r = raw_http::send(&s.base_url, &second, WITHIN).await;
        if r.status != Some(503) {
            assert_eq!(r.status, Some(400), "the body arrived and was read as (bad) JSON: {r:?}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "the first body's bytes were never given back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
