//! The official OpenAI Python SDK against a running Gatehouse
//! (`pip install -r tests/python/requirements.txt`, as the README's test
//! command does): completion, streamed completion with usage, failover via
//! `extra_body`, 401 and 429 raised as the SDK's own exceptions.

use gatehouse_tests::Server;
use serde_json::json;

#[tokio::test]
async fn the_openai_python_sdk_works_unchanged() {
    let s = Server::builder()
        .plugin(gatehouse_tests::plugins::OPEN_POLICY, "open.wasm")
        .toml("[policies]\ndefault = \"open\"\n[providers.echo]\nplugin = \"provider-echo\"\nbase_url = \"echo://local\"\nmodels = [\"echo/default\"]\n[providers.broken]\nplugin = \"no-such-plugin\"\nbase_url = \"echo://local\"\n")
        .start();
    let (_, limited, _) = s.create_key(json!({"limits": {"perMinute": 1}})).await;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/test_openai_sdk.py");
    // The limited key's two calls (the script's last check) in one minute window.
    gatehouse_tests::windows::room_in_window(gatehouse_tests::windows::MINUTE, std::time::Duration::from_secs(29)).await;
    let out = tokio::process::Command::new("python3")
        .arg(&script)
        .env("GATEHOUSE_BASE_URL", &s.base_url)
        .env("GATEHOUSE_KEY", &s.admin_key)
        .env("GATEHOUSE_LIMITED_KEY", &limited)
        .output()
        .await
        .expect("python3 runs (install it, and `pip install -r tests/python/requirements.txt`)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "OpenAI SDK checks failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("6 passed, 0 failed"), "{stdout}");
}
