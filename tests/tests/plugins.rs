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
    assert!(s.audit_total("type=plugin_management&search=plugin_failed").await >= 1, "the failed load is audited");
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

// ---- The watched folder as an attacker or a careless operator fills it ----

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// `GET /api/admin/plugins`'s `data`.
async fn listing(s: &Server) -> Value {
    let v: Value = s.admin(Method::GET, "/api/admin/plugins").send().await.expect("list").json().await.expect("json");
    v["data"].clone()
}

/// The listing's entry for a file of the watched folder.
fn file_entry<'a>(listing: &'a Value, file: &str) -> Option<&'a Value> {
    listing["files"].as_array()?.iter().find(|f| f["file"] == file)
}

/// The listing's entry for a serving plugin.
fn plugin_entry<'a>(listing: &'a Value, name: &str) -> Option<&'a Value> {
    listing["plugins"].as_array()?.iter().find(|p| p["name"] == name)
}

/// Poll the listing until `pred` holds (10 s at most).
async fn listing_until(s: &Server, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let l = listing(s).await;
        if pred(&l) {
            return l;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{what} never happened: {l:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every `plugin_management` audit record, oldest first.
async fn plugin_audit(s: &Server) -> Vec<Value> {
    let v: Value =
        s.admin(Method::GET, "/audit-logs?type=plugin_management&limit=100").send().await.expect("audit").json().await.expect("json");
    let mut logs = v["data"]["logs"].as_array().expect("logs").clone();
    logs.reverse();
    logs
}

/// Poll the plugin audit records until `pred` holds (10 s at most): they are written after the event.
async fn audit_until(s: &Server, what: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let logs = plugin_audit(s).await;
        if pred(&logs) {
            return logs;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{what} never audited: {logs:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The audit records of one operation (`plugin_failed`, …) whose metadata `field` equals `value`.
fn audited<'a>(logs: &'a [Value], operation: &str, field: &str, value: &str) -> Vec<&'a Value> {
    logs.iter().filter(|l| l["metadata"]["operation"] == operation && l["metadata"][field] == value).collect()
}

#[tokio::test]
async fn hostile_files_in_the_watched_folder_are_refused_unread_and_named_safely() {
    let data = tempfile::tempdir().expect("tmp");
    let dir = data.path().join("plugins");
    install(plugins::OPEN_POLICY, &dir, "open.wasm");
    // A sparse 1 GiB file: reading it whole would cost a GiB of memory.
    std::fs::File::create(dir.join("big.wasm")).expect("big").set_len(1 << 30).expect("sparse");
    // Links out of the folder: one to a working component, one to a text file.
    let outside = data.path().join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::copy(plugins::RELOAD_A, outside.join("component.wasm")).expect("copy");
    std::fs::write(outside.join("passwd"), "root:x:0:0:TOPSECRET-ROOT-LINE:/root:/bin/bash\n").expect("passwd");
    std::os::unix::fs::symlink(outside.join("component.wasm"), dir.join("linked.wasm")).expect("symlink");
    std::os::unix::fs::symlink(outside.join("passwd"), dir.join("passwd.wasm")).expect("symlink");
    // A name that would forge a log line, and a near-miss extension.
    install_bytes(b"\0asm but not really a component", &dir, "evil\nERROR forged line.wasm");
    install(plugins::ECHO_OVERRIDE, &dir, "UPPER.WASM");
    let s = Server::builder().data_dir(data.path()).toml(&providers(&[("reload", "provider-reload")])).start();
    let l = listing(&s).await;

    // The big file is refused by its size, never read.
    let rss = gatehouse_tests::procfs::rss_kib(s.pid().expect("pid")).expect("rss");
    assert!(rss < 512 * 1024, "RSS {rss} KiB: the 1 GiB file was read");
    let big = file_entry(&l, "big.wasm").unwrap_or_else(|| panic!("big.wasm is listed: {l:#}"));
    assert_eq!(big["status"], "refused", "{big}");
    assert!(big["error"].as_str().expect("error").contains("plugins.max_component_mb"), "{big}");
    assert!(big.get("sha256").is_none_or(Value::is_null), "never read, so never hashed: {big}");

    // Links are refused whatever they point to; the linked component never serves.
    for link in ["linked.wasm", "passwd.wasm"] {
        let e = file_entry(&l, link).unwrap_or_else(|| panic!("{link} is listed: {l:#}"));
        assert_eq!(e["status"], "refused", "{e}");
        assert!(e["error"].as_str().expect("error").contains("symbolic link"), "{e}");
    }
    assert!(plugin_entry(&l, "provider-reload").is_none(), "a linked component was loaded: {l:#}");
    let (st, _) = post(&s, &body(json!(["reload/m"]))).await;
    assert_eq!(st, 502, "the linked component serves");

    // `*.WASM` is reported, not ignored, and does not load either.
    let upper = file_entry(&l, "UPPER.WASM").unwrap_or_else(|| panic!("UPPER.WASM is listed: {l:#}"));
    assert_eq!(upper["status"], "refused", "{upper}");
    assert!(upper["error"].as_str().expect("error").contains("UPPER.wasm"), "the error says how to fix it: {upper}");
    assert_eq!(plugin_entry(&l, "provider-echo").expect("echo")["source"]["type"], "bundled");

    // Every refusal is audited once, by the file's escaped name; nothing of the linked files leaks.
    let logs =
        audit_until(&s, "the refusals", |logs| logs.iter().filter(|r| r["metadata"]["operation"] == "plugin_failed").count() >= 5).await;
    for file in ["big.wasm", "linked.wasm", "passwd.wasm", "UPPER.WASM", "evil\\nERROR forged line.wasm"] {
        assert_eq!(audited(&logs, "plugin_failed", "plugin", file).len(), 1, "{file}: {logs:#?}");
    }
    let audit_text = serde_json::to_string(&logs).expect("json");
    let log = s.log();
    for text in [&audit_text, &log] {
        assert!(!text.contains("TOPSECRET") && !text.contains("0x72, 0x6f, 0x6f, 0x74"), "a linked file's bytes leaked: {text}");
        assert!(!text.contains("evil\nERROR"), "a raw newline from a file name reached the log or audit");
    }
    assert!(!log.lines().any(|line| line.starts_with("ERROR forged")), "a file name forged a log line:\n{log}");
    assert!(log.contains("evil\\nERROR forged line.wasm"), "the name is logged escaped:\n{log}");
    // Nothing of it was loaded or reported twice while the server idled.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(plugin_audit(&s).await.len(), logs.len(), "refusals are reported once");
}

/// A counter of `/metrics` (0 when it is absent).
async fn metric(s: &Server, name: &str) -> f64 {
    let text = s.admin(Method::GET, "/metrics").send().await.expect("metrics").text().await.expect("text");
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok()).unwrap_or(0.0)
}

#[tokio::test]
async fn an_idle_watched_folder_is_not_rescanned() {
    let data = tempfile::tempdir().expect("tmp");
    let dir = data.path().join("plugins");
    install(plugins::OPEN_POLICY, &dir, "open.wasm");
    install(plugins::RELOAD_A, &dir, "provider-reload.wasm");
    install_bytes(b"\0asm but not really a component", &dir, "garbage.wasm");
    let s = Server::builder().data_dir(data.path()).toml(&providers(&[("reload", "provider-reload")])).start();
    // A change is picked up (that takes one or two scans) …
    install(plugins::ECHO_OVERRIDE, &dir, "echo.wasm");
    listing_until(&s, "the override serves", |l| plugin_entry(l, "provider-echo").is_some_and(|p| p["source"]["type"] == "file")).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let settled = metric(&s, "gatehouse_plugin_scans_total").await;
    assert!(settled >= 2.0, "the start and the change were scanned: {settled}");
    // … and then nothing happens while nothing changes: the scans' own reads are no change.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let later = metric(&s, "gatehouse_plugin_scans_total").await;
    assert_eq!(later, settled, "the folder was rescanned {} times while idle", later - settled);
    assert_eq!(answer(&s).await.expect("serves"), "answer from version a");
}

#[tokio::test]
async fn plugin_names_in_the_watched_folder_resolve_deterministically_and_are_audited_as_they_happen() {
    let data = tempfile::tempdir().expect("tmp");
    let dir = data.path().join("plugins");
    install(plugins::OPEN_POLICY, &dir, "open.wasm");
    install(plugins::RELOAD_A, &dir, "d1.wasm");
    install(plugins::RELOAD_B, &dir, "d2.wasm");
    install(plugins::BAD_TRAP, &dir, "r.wasm");
    install(plugins::INTERNAL_OVERRIDE, &dir, "policy.wasm");
    let s = Server::builder().data_dir(data.path()).toml(&providers(&[("reload", "provider-reload")])).start();
    let l = listing(&s).await;
    let logs =
        audit_until(&s, "the refusals", |logs| logs.iter().filter(|r| r["metadata"]["operation"] == "plugin_failed").count() >= 2).await;

    // Two files, one name: the first by file name serves, the other is refused naming both.
    assert_eq!(answer(&s).await.expect("serves"), "answer from version a");
    let d2 = file_entry(&l, "d2.wasm").unwrap_or_else(|| panic!("d2.wasm is listed: {l:#}"));
    assert_eq!(d2["status"], "refused", "{d2}");
    assert!(d2["error"].as_str().expect("error").contains("d1.wasm"), "{d2}");
    let refused = audited(&logs, "plugin_failed", "plugin", "d2.wasm");
    assert_eq!(refused.len(), 1, "{logs:#?}");
    assert!(refused[0]["description"].as_str().expect("d").contains("d1.wasm"), "{}", refused[0]);
    for op in ["plugin_loaded", "plugin_reloaded"] {
        let claims: Vec<_> = logs
            .iter()
            .filter(|r| r["metadata"]["operation"] == op && r["metadata"]["source"].as_str().is_some_and(|s| s.ends_with("d2.wasm")))
            .collect();
        assert!(claims.is_empty(), "the audit says the refused file serves: {claims:#?}");
    }

    // A file named like a built-in security policy never replaces it silently.
    let policy = file_entry(&l, "policy.wasm").unwrap_or_else(|| panic!("policy.wasm is listed: {l:#}"));
    assert_eq!(policy["status"], "refused", "{policy}");
    assert!(policy["error"].as_str().expect("error").contains("plugins.allow_policy_overrides"), "{policy}");
    assert_eq!(plugin_entry(&l, "internal").expect("internal")["source"]["type"], "bundled");
    assert_eq!(audited(&logs, "plugin_failed", "plugin", "policy.wasm").len(), 1, "{logs:#?}");

    // A file whose content becomes a component of another name: the old name is removed, the new one loaded.
    install(plugins::ECHO_OVERRIDE, &dir, "r.wasm");
    let l = listing_until(&s, "the rename", |l| plugin_entry(l, "bad-trap").is_none()).await;
    assert_eq!(plugin_entry(&l, "provider-echo").expect("echo")["source"]["type"], "file", "{l:#}");
    let logs = audit_until(&s, "the rename", |logs| !audited(logs, "plugin_reloaded", "plugin", "provider-echo").is_empty()).await;
    let removed = audited(&logs, "plugin_removed", "plugin", "bad-trap");
    assert_eq!(removed.len(), 1, "{logs:#?}");
    assert!(removed[0]["metadata"]["source"].as_str().expect("source").ends_with("r.wasm"), "{}", removed[0]);
    let echo = audited(&logs, "plugin_reloaded", "plugin", "provider-echo");
    assert_eq!(echo.len(), 1, "the override of the bundled echo is audited: {logs:#?}");
    let from_r = |op: &str, plugin: &str| {
        audited(&logs, op, "plugin", plugin)
            .iter()
            .filter(|r| r["metadata"]["source"].as_str().is_some_and(|s| s.ends_with("r.wasm")))
            .count()
    };
    assert_eq!((from_r("plugin_reloaded", "bad-trap"), from_r("plugin_loaded", "provider-echo")), (0, 0), "{logs:#?}");

    // A file that fails the check: listed with its error and its own hash; the version before serves on.
    let garbage = b"\0asm but not really a component";
    install_bytes(garbage, &dir, "d1.wasm");
    let l = listing_until(&s, "the refusal of d1.wasm", |l| file_entry(l, "d1.wasm").is_some_and(|f| f["status"] == "refused")).await;
    let d1 = file_entry(&l, "d1.wasm").expect("d1");
    assert!(d1["error"].as_str().expect("error").contains("not a valid WebAssembly component"), "{d1}");
    assert_eq!(d1["sha256"], sha256_hex(garbage), "the hash is the file's, not the serving version's: {d1}");
    let version_a = sha256_hex(&std::fs::read(plugins::RELOAD_A).expect("read"));
    assert_eq!(d1["previous"]["sha256"], version_a.as_str(), "{d1}");
    let serving = plugin_entry(&l, "provider-reload").expect("provider-reload");
    assert_eq!(serving["sha256"], version_a.as_str());
    assert!(serving["fileError"].as_str().expect("fileError").contains("not a valid WebAssembly component"), "{serving}");
    assert_eq!(answer(&s).await.expect("serves"), "answer from version a");

    // The operator allows the override of `internal` by name: a config reload applies it.
    let config = std::fs::read_to_string(&s.config_path).expect("config");
    std::fs::write(&s.config_path, format!("{config}\n[plugins]\nallow_policy_overrides = [\"internal\"]\n")).expect("write config");
    let l = listing_until(&s, "the allowed override", |l| plugin_entry(l, "internal").is_some_and(|p| p["source"]["type"] == "file")).await;
    assert_eq!(file_entry(&l, "policy.wasm").expect("policy")["status"], "serving", "{l:#}");
    let logs = audit_until(&s, "the override", |logs| !audited(logs, "plugin_reloaded", "plugin", "internal").is_empty()).await;
    assert_eq!(audited(&logs, "plugin_reloaded", "plugin", "internal").len(), 1, "{logs:#?}");
}
