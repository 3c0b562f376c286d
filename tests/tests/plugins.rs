//! The plugin runtime through the real server: faulty components are
//! contained, a broken file never replaces a working plugin, and a provider
//! replaced 10 times under load serves every request from a complete version.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gatehouse_tests::Server;
use gatehouse_tests::plugins::{self, install, install_bytes};
use reqwest::Method;
use serde_json::{Value, json};

/// Config for a server whose watched folder is `<data>/plugins`, using the open test policy.
fn providers(names: &[(&str, &str)]) -> String {
    let mut t = String::from("[policies]\ndefault = \"open\"\n");
    for (prefix, plugin) in names {
        t.push_str(&format!("[providers.{prefix}]\nplugin = \"{plugin}\"\nbase_url = \"echo://local\"\n"));
    }
    t.push_str("[providers.echo]\nplugin = \"provider-echo\"\nbase_url = \"echo://local\"\n");
    t
}

fn body(models: Value) -> Value {
    json!({"index": "Zero-Knowledge", "models": models, "prompt": "hello", "prompt_shield": {"enabled": false}})
}

async fn post(s: &Server, body: &Value) -> (u16, Value) {
    let r = s.client.post(s.url("/chat/completions")).bearer_auth(&s.admin_key).json(body).send().await.expect("send");
    let st = r.status().as_u16();
    (st, r.json().await.expect("json"))
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

#[tokio::test]
async fn faulty_plugins_fail_alone_within_their_deadline() {
    let data = tempfile::tempdir().expect("tmp");
    let dir = data.path().join("plugins");
    install(plugins::OPEN_POLICY, &dir, "open.wasm");
    for (file, src) in [
        ("trap.wasm", plugins::BAD_TRAP),
        ("spin.wasm", plugins::BAD_SPIN),
        ("memory.wasm", plugins::BAD_MEMORY),
        ("recursion.wasm", plugins::BAD_RECURSION),
        ("huge.wasm", plugins::BAD_HUGE),
        ("escape.wasm", plugins::BAD_ESCAPE),
        ("malformed.wasm", plugins::BAD_MALFORMED),
    ] {
        install(src, &dir, file);
    }
    install_bytes(b"\0asm but not really a component", &dir, "garbage.wasm");
    let s = Server::builder()
        .data_dir(data.path())
        .toml(&providers(&[
            ("trap", "bad-trap"),
            ("spin", "bad-spin"),
            ("memory", "bad-memory"),
            ("recursion", "bad-recursion"),
            ("huge", "bad-huge"),
            ("escape", "bad-escape"),
            ("malformed", "bad-malformed"),
        ]))
        .toml("[plugins]\ncall_timeout_ms = 300\nmemory_limit_mb = 32\n")
        .start();
    let plugins: Value = s.admin(Method::GET, "/api/admin/plugins").send().await.expect("list").json().await.expect("json");
    let names: Vec<&str> = plugins["data"]["plugins"].as_array().expect("plugins").iter().filter_map(|p| p["name"].as_str()).collect();
    assert!(names.contains(&"bad-spin") && names.contains(&"open") && names.contains(&"provider-echo"), "{names:?}");
    assert!(s.log().contains("garbage.wasm"), "the broken file is reported");

    let pid = s.pid().expect("pid");
    let before = rss_kib(pid);
    for (prefix, plugin, expect) in [
        ("trap", "bad-trap", "trapped"),
        ("spin", "bad-spin", "CPU deadline"),
        ("memory", "bad-memory", "memory limit"),
        ("recursion", "bad-recursion", "trapped"),
        ("huge", "bad-huge", "memory limit"),
        // Files, the root folder, sockets and the environment are all out of reach.
        ("escape", "bad-escape", "sandbox held"),
    ] {
        let started = Instant::now();
        let (st, v) = post(&s, &body(json!([format!("{prefix}/m"), "echo/default"]))).await;
        let took = started.elapsed();
        assert_eq!(st, 200, "{prefix}: the chain falls over to echo: {v}");
        assert_eq!(v["metadata"]["served_model"], "echo/default");
        let a = &v["metadata"]["failover"]["attempts"][0];
        assert_eq!(a["reason"], "server_error", "{prefix}: {a}");
        let msg = a["message"].as_str().expect("message");
        eprintln!("{prefix}: {msg}");
        assert!(msg.contains(plugin), "{prefix}: the error names the plugin: {msg}");
        assert!(msg.contains(expect), "{prefix}: {msg}");
        assert!(took < Duration::from_secs(5), "{prefix} took {took:?}");
    }
    // The socket was refused by the sandbox's policy, not merely by a closed port.
    let (_, v) = post(&s, &body(json!(["escape/m", "echo/default"]))).await;
    let msg = v["metadata"]["failover"]["attempts"][0]["message"].as_str().unwrap_or_default().to_owned();
    assert!(msg.contains("socket: Permission denied") && msg.contains("env: empty"), "{msg}");
    // A plugin that describes a file:// request with header injection gets nowhere.
    let (st, v) = post(&s, &body(json!(["malformed/m", "echo/default"]))).await;
    assert_eq!(st, 200, "malformed: {v}");
    let a = &v["metadata"]["failover"]["attempts"][0];
    assert_eq!(a["reason"], "server_error", "malformed: {a}");
    assert!(a["message"].as_str().expect("message").contains("non-HTTP URL"), "malformed: {a}");
    // Memory stays bounded over repeated memory bombs.
    for _ in 0..20 {
        post(&s, &body(json!(["memory/m", "echo/default"]))).await;
    }
    let after = rss_kib(pid);
    assert!(after < before + 200 * 1024, "RSS grew from {before} KiB to {after} KiB");
    // The host is fine.
    let (st, _) = post(&s, &body(json!(["echo/default"]))).await;
    assert_eq!(st, 200);
    let h: Value = s.client.get(s.url("/health")).send().await.expect("health").json().await.expect("json");
    assert_eq!(h["status"], "ok");
    // Faults are counted per plugin.
    let plugins: Value = s.admin(Method::GET, "/api/admin/plugins").send().await.expect("list").json().await.expect("json");
    let spin = plugins["data"]["plugins"].as_array().expect("p").iter().find(|p| p["name"] == "bad-spin").cloned().expect("spin");
    assert!(spin["faults"].as_u64().expect("faults") >= 1);
}

async fn answer(s: &Server) -> Result<String, String> {
    let r = s
        .client
        .post(s.url("/chat/completions"))
        .bearer_auth(&s.admin_key)
        .json(&body(json!(["reload/m"])))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let st = r.status();
    let v: Value = r.json().await.map_err(|e| e.to_string())?;
    if st != 200 {
        return Err(format!("{st}: {v}"));
    }
    Ok(v["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_owned())
}

async fn wait_for(s: &Server, want: &str) -> Duration {
    let started = Instant::now();
    loop {
        if answer(s).await.is_ok_and(|a| a == want) {
            return started.elapsed();
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{want} never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_provider_replaced_ten_times_under_load_never_fails() {
    let data = tempfile::tempdir().expect("tmp");
    let dir = data.path().join("plugins");
    install(plugins::OPEN_POLICY, &dir, "open.wasm");
    install(plugins::RELOAD_A, &dir, "provider-reload.wasm");
    let s = Arc::new(Server::builder().data_dir(data.path()).toml(&providers(&[("reload", "provider-reload")])).start());
    assert_eq!(answer(&s).await.expect("first answer"), "answer from version a");

    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut load = Vec::new();
    for _ in 0..3 {
        let (s, stop, ok, failures) = (s.clone(), stop.clone(), ok.clone(), failures.clone());
        load.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match answer(&s).await {
                    Ok(a) if a == "answer from version a" || a == "answer from version b" => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(other) => failures.lock().expect("lock").push(format!("unexpected answer {other:?}")),
                    Err(e) => failures.lock().expect("lock").push(e),
                }
            }
        }));
    }
    let mut worst = Duration::ZERO;
    for i in 0..10 {
        let (src, want) =
            if i % 2 == 0 { (plugins::RELOAD_B, "answer from version b") } else { (plugins::RELOAD_A, "answer from version a") };
        install(src, &dir, "provider-reload.wasm");
        let took = wait_for(&s, want).await;
        worst = worst.max(took);
    }
    stop.store(true, Ordering::Relaxed);
    for h in load {
        h.await.expect("load task");
    }
    let failures = failures.lock().expect("lock").clone();
    assert!(failures.is_empty(), "{} failed requests: {:?}", failures.len(), &failures[..failures.len().min(5)]);
    assert!(ok.load(Ordering::Relaxed) > 50, "load ran: {}", ok.load(Ordering::Relaxed));
    assert!(worst < Duration::from_secs(2), "a new version took {worst:?} to serve");
    println!("10 hot replacements under load: {} requests, 0 failed, slowest swap {worst:?}", ok.load(Ordering::Relaxed));
}

#[tokio::test]
async fn a_broken_file_over_a_working_plugin_leaves_it_serving() {
    let data = tempfile::tempdir().expect("tmp");
    let dir = data.path().join("plugins");
    install(plugins::OPEN_POLICY, &dir, "open.wasm");
    install(plugins::RELOAD_A, &dir, "provider-reload.wasm");
    let s = Server::builder().data_dir(data.path()).toml(&providers(&[("reload", "provider-reload")])).start();
    assert_eq!(answer(&s).await.expect("answer"), "answer from version a");
    install_bytes(&[0u8, 97, 115, 109, 1, 0, 0, 0, 0xff, 0xff], &dir, "provider-reload.wasm");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(answer(&s).await.expect("still serving"), "answer from version a");
    // The failure is audited.
    let v: Value = s
        .admin(Method::GET, "/audit-logs?type=plugin_management&search=plugin_failed")
        .send()
        .await
        .expect("audit")
        .json()
        .await
        .expect("json");
    assert!(v["data"]["pagination"]["total"].as_u64().expect("total") >= 1, "{v}");
    // A good version replaces it; removing the file drops the plugin.
    install(plugins::RELOAD_B, &dir, "provider-reload.wasm");
    wait_for(&s, "answer from version b").await;
    std::fs::remove_file(dir.join("provider-reload.wasm")).expect("remove");
    let started = Instant::now();
    loop {
        let (st, v) = post(&s, &body(json!(["reload/m"]))).await;
        if st == 502 {
            assert!(v["attempts"][0]["message"].as_str().expect("m").contains("not loaded"), "{v}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "removal not applied");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
