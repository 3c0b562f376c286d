//! The plugin registry through the real server: a component published
//! through the admin API serves at once and from a restarted host; a bad
//! upload is refused and replaces nothing; a rollback restores the previous
//! version; a watched-folder file wins on its host only, and says so.

use std::time::{Duration, Instant};

use gatehouse_tests::Server;
use gatehouse_tests::plugins::{self, install};
use reqwest::Method;
use serde_json::{Value, json};

fn config() -> String {
    "[policies]\ndefault = \"open\"\n[providers.reload]\nplugin = \"provider-reload\"\nbase_url = \"echo://local\"\n".to_owned()
}

/// What `reload/m` answers (the content of the provider's reply), or the error.
async fn answer(s: &Server) -> Result<String, String> {
    let body = json!({"index": "Zero-Knowledge", "models": ["reload/m"], "prompt": "hello", "prompt_shield": {"enabled": false}});
    let (st, v) = s.chat_as(&s.admin_key, &body).await;
    if st != 200 {
        return Err(format!("{st}: {v}"));
    }
    Ok(v["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_owned())
}

async fn publish(s: &Server, bytes: Vec<u8>) -> (u16, Value) {
    let r =
        s.admin(Method::POST, "/api/admin/plugins").header("content-type", "application/wasm").body(bytes).send().await.expect("publish");
    let st = r.status().as_u16();
    (st, r.json().await.expect("json"))
}

async fn send(s: &Server, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut r = s.admin(method, path);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.expect("send");
    let st = r.status().as_u16();
    (st, r.json().await.expect("json"))
}

/// `gatehouse plugin publish FILE --url …` with the admin key in `GATEHOUSE_API_KEY`: exit code, stdout and stderr.
fn cli_publish(s: &Server, file: &str) -> (i32, String) {
    let out = std::process::Command::new(gatehouse_tests::server::binary())
        .args(["plugin", "publish", file, "--url", &s.url("")])
        .env("GATEHOUSE_API_KEY", &s.admin_key)
        .output()
        .expect("run the CLI");
    (out.status.code().unwrap_or(-1), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn component(path: &str) -> Vec<u8> {
    std::fs::read(path).expect("test component")
}

async fn listing(s: &Server) -> Value {
    send(s, Method::GET, "/api/admin/plugins", None).await.1["data"].clone()
}

fn entry<'a>(listing: &'a Value, name: &str) -> &'a Value {
    listing["plugins"].as_array().and_then(|a| a.iter().find(|p| p["name"] == name)).unwrap_or(&Value::Null)
}

/// Poll until `reload/m` answers `want` (10 s at most).
async fn wait_for(s: &Server, want: &str) {
    let started = Instant::now();
    loop {
        let got = answer(s).await;
        if got.as_deref() == Ok(want) {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{want} never served; last: {got:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_published_plugin_serves_at_once_a_bad_upload_replaces_nothing_and_a_rollback_restores_the_previous() {
    let data = tempfile::tempdir().expect("tmp");
    install(plugins::OPEN_POLICY, &data.path().join("plugins"), "open.wasm");
    let s = Server::builder().data_dir(data.path()).toml(&config()).start();
    assert!(answer(&s).await.is_err(), "nothing serves reload/m before it is published");

    let (st, v) = publish(&s, component(plugins::RELOAD_A)).await;
    assert_eq!(st, 201, "{v}");
    let p = &v["data"]["plugin"];
    assert_eq!((p["name"].as_str(), p["version"].as_u64(), p["state"].as_str()), (Some("provider-reload"), Some(1), Some("active")), "{v}");
    assert_eq!(p["checks"], json!(["size", "world", "info", "instantiate"]));
    assert_eq!(v["data"]["thisHost"]["serving"], true, "{v}");
    assert_eq!(answer(&s).await.as_deref(), Ok("answer from version a"), "it serves as the answer comes back");
    assert_eq!(entry(&listing(&s).await, "provider-reload")["source"], json!({"type": "published", "version": 1}));

    // Not a component, then a component that is no plugin: refused with why, never stored.
    for (bad, why) in [(b"\0asm but not really".to_vec(), "not a valid WebAssembly component"), (vec![], "empty")] {
        let (st, v) = publish(&s, bad).await;
        assert_eq!(st, 400, "{v}");
        assert!(v["error"]["message"].as_str().unwrap_or_default().contains(why), "{v}");
    }
    let (st, v) = publish(&s, component(plugins::INTERNAL_OVERRIDE)).await;
    assert_eq!(st, 400, "a built-in security policy's name is refused as the watched folder refuses it: {v}");
    assert!(v["error"]["message"].as_str().unwrap_or_default().contains("allow_policy_overrides"), "{v}");
    let (_, versions) = send(&s, Method::GET, "/api/admin/plugins/provider-reload/versions", None).await;
    assert_eq!(versions["data"].as_array().map(Vec::len), Some(1), "refused uploads are not kept: {versions}");
    assert_eq!(answer(&s).await.as_deref(), Ok("answer from version a"), "version 1 serves on");

    let (st, v) = publish(&s, component(plugins::RELOAD_B)).await;
    assert_eq!((st, v["data"]["plugin"]["version"].as_u64()), (201, Some(2)), "{v}");
    assert_eq!(answer(&s).await.as_deref(), Ok("answer from version b"));

    let (st, v) = send(&s, Method::POST, "/api/admin/plugins/provider-reload/rollback", None).await;
    assert_eq!((st, v["data"]["plugin"]["version"].as_u64()), (200, Some(1)), "{v}");
    assert_eq!(answer(&s).await.as_deref(), Ok("answer from version a"), "the rollback serves as it answers");
    let (st, v) = send(&s, Method::POST, "/api/admin/plugins/provider-reload/rollback", None).await;
    assert_eq!(st, 409, "nothing before version 1: {v}");
    let (st, _) = send(&s, Method::POST, "/api/admin/plugins/provider-reload/activate", Some(json!({"version": 2}))).await;
    assert_eq!(st, 200);
    assert_eq!(answer(&s).await.as_deref(), Ok("answer from version b"));
    let (st, _) = send(&s, Method::POST, "/api/admin/plugins/provider-reload/rollback", Some(json!({"version": 1}))).await;
    assert_eq!(st, 200);
    assert_eq!(answer(&s).await.as_deref(), Ok("answer from version a"));
    let (_, versions) = send(&s, Method::GET, "/api/admin/plugins/provider-reload/versions", None).await;
    let states: Vec<(u64, &str)> = versions["data"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| (v["version"].as_u64().unwrap_or(0), v["state"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(states, [(1, "active"), (2, "inactive")]);
    let (st, _) = send(&s, Method::GET, "/api/admin/plugins/nothing/versions", None).await;
    assert_eq!(st, 404);

    // Audited: each step (two uploads stored, two refused after a check; the empty body never
    // reached one), and each load as a file drop's.
    for (q, exactly) in [("search=plugin_publish", 4), ("search=plugin_rollback", 2), ("search=plugin_activate", 1)] {
        assert_eq!(s.audit_total(&format!("type=plugin_management&{q}")).await, exactly, "{q}");
    }
    assert_eq!(s.audit_total("type=plugin_management&search=plugin_publish&severity=warning").await, 2, "the refusals");
    for (q, at_least) in [("search=plugin_loaded", 1), ("search=plugin_reloaded", 4)] {
        let n = s.audit_total(&format!("type=plugin_management&{q}")).await;
        assert!(n >= at_least, "{q}: {n} records, expected at least {at_least}");
    }
}

#[tokio::test]
async fn a_host_started_later_loads_the_published_set_and_a_folder_file_wins_on_its_host_only() {
    let data = tempfile::tempdir().expect("tmp");
    let dir = data.path().join("plugins");
    install(plugins::OPEN_POLICY, &dir, "open.wasm");
    let mut s = Server::builder().data_dir(data.path()).toml(&config()).start();
    // Published with the CLI, the key from the environment.
    let (code, out) = cli_publish(&s, plugins::RELOAD_A);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("published provider-reload version 1") && out.contains("serving on"), "{out}");
    let garbage = data.path().join("garbage.wasm");
    std::fs::write(&garbage, b"\0asm not a component").expect("write");
    let (code, out) = cli_publish(&s, garbage.to_str().expect("utf-8 path"));
    assert_eq!(code, 1, "a refused upload fails the command: {out}");
    assert!(out.contains("not published (400") && out.contains("not a valid WebAssembly component"), "{out}");
    s.restart();
    assert_eq!(
        answer(&s).await.as_deref(),
        Ok("answer from version a"),
        "the restarted host serves the published version from its first request"
    );

    install(plugins::RELOAD_B, &dir, "provider-reload.wasm");
    wait_for(&s, "answer from version b").await;
    let l = listing(&s).await;
    let p = entry(&l, "provider-reload");
    assert_eq!(p["source"]["type"], "file", "{p}");
    assert_eq!(p["source"]["hostOnly"], true, "{p}");
    assert_eq!(p["hidesPublished"], 1, "the listing says which published version the file hides: {p}");
    assert!(l["published"].as_array().is_some_and(|a| a.iter().any(|v| v["name"] == "provider-reload" && v["version"] == 1)), "{l}");

    std::fs::remove_file(dir.join("provider-reload.wasm")).expect("remove");
    wait_for(&s, "answer from version a").await;
    assert_eq!(entry(&listing(&s).await, "provider-reload")["source"], json!({"type": "published", "version": 1}));
}

/// `bytes` with a custom section of `pad` bytes appended: the same component,
/// larger (a custom section may follow any section of a component).
fn padded(mut bytes: Vec<u8>, pad: usize) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            out.push(if n == 0 { b } else { b | 0x80 });
            if n == 0 {
                break;
            }
        }
    }
    let name = b"padding";
    let mut payload = Vec::new();
    leb(name.len(), &mut payload);
    payload.extend_from_slice(name);
    payload.resize(payload.len() + pad, 0);
    bytes.push(0);
    leb(payload.len(), &mut bytes);
    bytes.extend_from_slice(&payload);
    bytes
}

#[tokio::test]
async fn a_component_over_the_request_body_cap_publishes_up_to_the_folders_component_limit() {
    let toml = format!("{}[plugins]\nmax_component_mb = 4\n", config());
    let s = Server::builder().toml(&toml).start();
    // 3 MiB: over `server.max_body_bytes` (2 MiB), under `plugins.max_component_mb`.
    let (st, v) = publish(&s, padded(component(plugins::RELOAD_A), 3 << 20)).await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["data"]["plugin"]["name"], "provider-reload");
    // Declared sizes over each cap are refused before a byte of body is read:
    // 5 MiB for the upload (over the component limit), 3 MiB for any other route.
    for (path, bytes) in [("/api/admin/plugins", 5usize << 20), ("/api/admin/groups", 3 << 20)] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/octet-stream\r\nContent-Length: {bytes}\r\n\r\n",
            s.admin_key
        );
        let r = gatehouse_tests::raw_http::send(&s.base_url, head.as_bytes(), Duration::from_secs(10)).await;
        assert_eq!(r.status, Some(413), "{path}: {r:?}");
    }
}
