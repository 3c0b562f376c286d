//! Config reload without a restart: a platform team adds a provider and
//! rotates its key by editing the config file (or sending SIGHUP); a broken
//! config keeps the old one serving.

use std::time::{Duration, Instant};

use gatehouse_tests::Server;
use gatehouse_tests::mock_upstream::MockUpstream;
use reqwest::Method;
use serde_json::{Value, json};

async fn ask(s: &Server, model: &str) -> (u16, Value) {
    let r = s
        .client
        .post(s.url("/chat/completions"))
        .bearer_auth(&s.admin_key)
        .json(&json!({"index": "Zero-Knowledge", "model": model, "prompt": "hi"}))
        .send()
        .await
        .expect("send");
    let st = r.status().as_u16();
    (st, r.json().await.expect("json"))
}

async fn until(s: &Server, model: &str, status: u16) {
    let started = Instant::now();
    loop {
        if ask(s, model).await.0 == status {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{model} never answered {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn providers_and_secrets_reload_and_a_bad_config_keeps_the_old_one() {
    let mock = MockUpstream::start().await;
    let s = Server::builder().plugin(gatehouse_tests::plugins::OPEN_POLICY, "open.wasm").toml("[policies]\ndefault = \"open\"\n").start();
    let base = std::fs::read_to_string(&s.config_path).expect("config");
    let (st, v) = ask(&s, "late/ok-a").await;
    assert_eq!(st, 400, "{v}");

    // Add a provider whose key comes from a file.
    let key_file = s.dir.path().join("late.key");
    std::fs::write(&key_file, "sk-first-secret\n").expect("key");
    let with_provider = format!(
        "{base}[providers.late]\nplugin = \"provider-openai\"\nbase_url = \"{}\"\napi_key_file = \"{}\"\n",
        mock.openai_base_url(),
        key_file.display()
    );
    std::fs::write(&s.config_path, &with_provider).expect("write config");
    until(&s, "late/ok-a", 200).await;
    assert_eq!(mock.last_request().expect("req").header("authorization"), Some("Bearer sk-first-secret"));

    // Rotate the key: re-read on SIGHUP.
    std::fs::write(&key_file, "sk-rotated-secret\n").expect("key");
    let pid = s.pid().expect("pid");
    std::process::Command::new("kill").args(["-HUP", &pid.to_string()]).status().expect("kill -HUP");
    let started = Instant::now();
    loop {
        ask(&s, "late/ok-b").await;
        if mock.last_request().and_then(|r| r.header("authorization").map(str::to_owned)).as_deref() == Some("Bearer sk-rotated-secret") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "rotated key never used");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A broken config: the old one keeps serving, and the failure is audited.
    std::fs::write(&s.config_path, format!("{with_provider}\n[limits.chat]\nper_minute = \"lots\"\n")).expect("write");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(ask(&s, "late/ok-c").await.0, 200);
    let v: Value =
        s.admin(Method::GET, "/audit-logs?type=config_management&severity=error").send().await.expect("audit").json().await.expect("json");
    assert!(v["data"]["pagination"]["total"].as_u64().expect("total") >= 1, "{v}");
    assert!(v["data"]["logs"][0]["description"].as_str().expect("d").contains("gatehouse.toml"), "the message names the file: {v}");
}

#[tokio::test]
async fn the_in_flight_limit_follows_a_reload() {
    let mock = MockUpstream::start().await;
    let s = Server::builder()
        .plugin(gatehouse_tests::plugins::OPEN_POLICY, "open.wasm")
        .toml(&format!(
            // One key drives the host here: its share is the whole host.
            "[policies]\ndefault = \"open\"\n[chat]\nmax_in_flight = 1\nkey_share = 1.0\n[providers.openai]\nplugin = \"provider-openai\"\nbase_url = \"{}\"\n",
            mock.openai_base_url()
        ))
        .start();
    // One slow request holds the only place.
    let slow = s
        .client
        .post(s.url("/chat/completions"))
        .bearer_auth(&s.admin_key)
        .json(&json!({"index": "Zero-Knowledge", "model": "openai/slow-4000-a", "prompt": "hold"}))
        .send();
    let held = tokio::spawn(slow);
    let started = Instant::now();
    while mock.count_for("slow-4000-a") == 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "the slow request never reached the upstream");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (st, v) = ask(&s, "openai/ok-a").await;
    assert_eq!(st, 503, "{v}");
    // Raised in the file: the next request is admitted while the slow one still runs.
    let text = std::fs::read_to_string(&s.config_path).expect("config");
    std::fs::write(&s.config_path, text.replace("max_in_flight = 1", "max_in_flight = 2")).expect("write config");
    until(&s, "openai/ok-a", 200).await;
    assert!(!held.is_finished(), "the slow request was still running when the raised limit admitted another");
    assert_eq!(held.await.expect("task").expect("send").status(), 200);
}

#[tokio::test]
async fn a_policys_config_follows_a_reload() {
    // The plugins' config texts are made once per config snapshot; a reload
    // must reach the next request.
    let s = Server::builder().toml("[plugins.settings.internal.config]\ndeny_terms = [\"falcon\"]\n").start();
    let base = std::fs::read_to_string(&s.config_path).expect("config");
    let say = |text: &'static str| {
        let s = &s;
        async move {
            let r = s
                .client
                .post(s.url("/chat/completions"))
                .bearer_auth(&s.admin_key)
                .json(&json!({"index": "Zero-Knowledge", "model": "echo/default", "prompt": text}))
                .send()
                .await
                .expect("send");
            r.status().as_u16()
        }
    };
    assert_eq!(say("about falcon").await, 403);
    assert_eq!(say("about eagle").await, 200);
    std::fs::write(&s.config_path, base.replace("\"falcon\"", "\"eagle\"")).expect("write config");
    let started = Instant::now();
    while say("about eagle").await != 403 {
        assert!(started.elapsed() < Duration::from_secs(10), "the new deny term never applied");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(say("about falcon").await, 200, "the old term is gone");
}
