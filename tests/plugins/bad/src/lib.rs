//! A provider component that misbehaves in `build-request`, one way per
//! feature: `trap` (panics), `spin` (endless loop), `memory` (grows its heap
//! page by page until refused), `recursion` (unbounded recursion), `huge`
//! (returns a 64 MiB body), `escape` (tries to read host files, list the
//! root, open a socket and read the environment: it traps with `ESCAPED` if
//! any of that works, else reports how the sandbox held), `malformed`
//! (describes a `file://` request with a header-injection attempt), `cache`
//! (tries to fill its writable cache folder past its cap, to link out of it
//! and to write beside it: it traps with `ESCAPED` if a link or a file
//! outside is made, else reports how far it got).
//! `parse-*` answer normally.

use gatehouse_sdk::provider::exports::gatehouse::plugin::provider_api::{
    ChatRequest, Completion, ErrorClass, Guest, ProviderError, StreamEvent, StreamOutput, Upstream,
};
use gatehouse_sdk::provider::gatehouse::plugin::types::{Header, HttpRequest, PluginInfo, PluginKind};

fn name() -> &'static str {
    if cfg!(feature = "trap") {
        "bad-trap"
    } else if cfg!(feature = "spin") {
        "bad-spin"
    } else if cfg!(feature = "memory") {
        "bad-memory"
    } else if cfg!(feature = "recursion") {
        "bad-recursion"
    } else if cfg!(feature = "escape") {
        "bad-escape"
    } else if cfg!(feature = "malformed") {
        "bad-malformed"
    } else if cfg!(feature = "cache") {
        "bad-cache"
    } else {
        "bad-huge"
    }
}

#[inline(never)]
#[expect(unconditional_recursion, reason = "the `recursion` fault: the host must survive a guest that overflows its stack")]
fn recurse(n: u64, acc: &mut [u8; 256]) -> u64 {
    acc[(n % 256) as usize] = n as u8;
    std::hint::black_box(recurse(n + 1, acc)) + acc[0] as u64
}

fn misbehave() -> String {
    if cfg!(feature = "trap") {
        panic!("deliberate trap");
    }
    if cfg!(feature = "spin") {
        let mut x: u64 = 0;
        loop {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }
    if cfg!(feature = "memory") {
        let mut pages: Vec<Vec<u8>> = Vec::new();
        loop {
            // One 64 KiB page at a time, touched so it is really used.
            let mut p = vec![0u8; 65536];
            p[0] = 1;
            pages.push(std::hint::black_box(p));
        }
    }
    if cfg!(feature = "recursion") {
        let mut acc = [0u8; 256];
        return recurse(0, &mut acc).to_string();
    }
    "x".repeat(64 * 1024 * 1024)
}

/// Try every way out of the sandbox; `Err` with what each attempt met.
fn escape() -> String {
    let mut held = Vec::new();
    match std::fs::read_to_string("/etc/passwd") {
        Ok(t) => panic!("ESCAPED: read /etc/passwd ({} bytes)", t.len()),
        Err(e) => held.push(format!("file: {e}")),
    }
    match std::fs::read_dir("/") {
        Ok(mut d) => {
            if let Some(entry) = d.next() {
                panic!("ESCAPED: listed / ({entry:?})");
            }
            held.push("dir: empty".into());
        }
        Err(e) => held.push(format!("dir: {e}")),
    }
    match std::net::TcpStream::connect("127.0.0.1:80") {
        Ok(_) => panic!("ESCAPED: opened a socket"),
        Err(e) => held.push(format!("socket: {e}")),
    }
    if let Ok(home) = std::env::var("HOME") {
        panic!("ESCAPED: read the environment (HOME={home})");
    }
    held.push("env: empty".into());
    format!("sandbox held: {}", held.join("; "))
}

/// Try to leave the cache folder and to fill it past its cap; what each attempt met.
fn fill_cache() -> String {
    let mut held = Vec::new();
    // A link to the root, and a hard link: either would lead out of the folder.
    match std::fs::write("/cache/seed", b"seed") {
        Ok(()) => held.push("seed: written".into()),
        Err(e) => held.push(format!("seed: {e}")),
    }
    #[expect(deprecated, reason = "the one stable way to make a symbolic link on WASI")]
    match std::fs::soft_link("/", "/cache/root") {
        Ok(()) => panic!("ESCAPED: made a symbolic link to /"),
        Err(e) => held.push(format!("symlink: {e}")),
    }
    match std::fs::hard_link("/cache/seed", "/cache/seed-link") {
        Ok(()) => panic!("ESCAPED: made a hard link"),
        Err(e) => held.push(format!("hard link: {e}")),
    }
    for outside in ["/cache/../outside.txt", "/outside.txt"] {
        if std::fs::write(outside, b"x").is_ok() {
            panic!("ESCAPED: wrote {outside}");
        }
    }
    held.push("outside: refused".into());
    // Bytes: 256 KiB files until a write fails.
    let chunk = vec![7u8; 256 * 1024];
    let mut written = 0usize;
    let mut stop = String::from("never refused");
    for i in 0..64 {
        match std::fs::write(format!("/cache/fill-{i}"), &chunk) {
            Ok(()) => written += chunk.len(),
            Err(e) => {
                stop = e.to_string();
                break;
            }
        }
    }
    held.push(format!("bytes: {written} written, then {stop}"));
    // Entries: empty files until one is refused.
    let mut files = 0;
    let mut stop = String::from("never refused");
    for i in 0..2000 {
        match std::fs::File::create(format!("/cache/e-{i}")) {
            Ok(_) => files += 1,
            Err(e) => {
                stop = e.to_string();
                break;
            }
        }
    }
    held.push(format!("files: {files} made, then {stop}"));
    format!("cache held: {}", held.join("; "))
}

struct Bad;

impl Guest for Bad {
    fn info() -> PluginInfo {
        PluginInfo {
            name: name().into(),
            version: "0.0.1".into(),
            kind: PluginKind::Provider,
            description: "deliberately faulty test plugin".into(),
        }
    }

    fn build_request(_up: Upstream, _request: ChatRequest) -> Result<HttpRequest, ProviderError> {
        if cfg!(feature = "escape") {
            return Err(ProviderError { class: ErrorClass::ServerError, message: format!("{}: {}", name(), escape()) });
        }
        if cfg!(feature = "cache") {
            return Err(ProviderError { class: ErrorClass::ServerError, message: format!("{}: {}", name(), fill_cache()) });
        }
        if cfg!(feature = "malformed") {
            return Ok(HttpRequest {
                method: "POST".into(),
                url: "file:///etc/passwd".into(),
                headers: vec![Header { name: "x-evil\r\nhost".into(), value: "a\r\nb".into() }],
                body: String::new(),
            });
        }
        let body = misbehave();
        Ok(HttpRequest { method: "POST".into(), url: "echo://local/chat".into(), headers: vec![], body })
    }

    fn parse_response(_up: Upstream, _status: u16, body: String) -> Result<Completion, ProviderError> {
        Ok(Completion { content: body, finish_reason: "stop".into(), usage: None })
    }

    fn parse_stream_event(_up: Upstream, state: String, event: StreamEvent) -> Result<StreamOutput, ProviderError> {
        Ok(StreamOutput { content: event.data, finish_reason: None, usage: None, done: true, state })
    }
}

gatehouse_sdk::export_provider!(Bad);
