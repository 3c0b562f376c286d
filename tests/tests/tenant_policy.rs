//! The README's "Write a tenant policy" steps against a running server:
//! scaffold from examples/tenant-policy, edit its word list, run its own
//! tests, build it for wasm32-wasip2, copy it into the watched folder
//! (temporary name, then rename), and see the policy deny the chosen words
//! without a restart.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use gatehouse_tests::Server;
use serde_json::{Value, json};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            if entry.file_name() != "target" {
                copy_dir(&entry.path(), &dest);
            }
        } else {
            std::fs::copy(entry.path(), dest).expect("copy");
        }
    }
}

#[tokio::test]
async fn a_tenant_policy_built_from_the_template_takes_effect_without_a_restart() {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace").to_path_buf();
    let s = Server::start();
    let body = |text: &str| json!({"index": "Zero-Knowledge", "model": "echo/default", "prompt": text, "smltp_policy": "my-policy"});
    // No pooled connections: the builds below leave the client idle for longer
    // than the server keeps an idle connection, and a POST on a connection the
    // server is closing fails with `IncompleteMessage`.
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).timeout(Duration::from_secs(60)).build().expect("client");
    let post = |b: Value| client.post(s.url("/chat/completions")).bearer_auth(&s.admin_key).json(&b).send();
    // Not there yet.
    let r = post(body("hello")).await.expect("send");
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["error"], "Unknown policy");

    // 1. Scaffold: copy the template, edit its word list, point it at the SDK.
    let work = tempfile::tempdir().expect("tmp");
    let project = work.path().join("my-policy");
    copy_dir(&ws.join("examples/tenant-policy"), &project);
    let lib = project.join("src/lib.rs");
    let src = std::fs::read_to_string(&lib).expect("lib.rs");
    let list = "const DENY_TERMS: &[&str] = &[\"forbidden-word\"];";
    assert!(src.contains(list), "the template's word list is where the README says");
    std::fs::write(&lib, src.replace(list, "const DENY_TERMS: &[&str] = &[\"pineapple\", \"durian\"];")).expect("write lib.rs");
    let manifest = project.join("Cargo.toml");
    let sdk = ws.join("plugins/sdk");
    let toml = std::fs::read_to_string(&manifest)
        .expect("Cargo.toml")
        .replace("path = \"../../plugins/sdk\"", &format!("path = {:?}", sdk.display().to_string()));
    std::fs::write(&manifest, toml).expect("write Cargo.toml");

    // 2. Its own tests pass with the edited list, and it builds, as the README
    // says: against its lock file (a shared target dir only to save time).
    let target = ws.join("target/tenant-policy-test");
    let cargo = |args: &[&str]| {
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(&project)
            .args(args)
            .args(["--locked", "--target-dir"])
            .arg(&target)
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .status()
            .expect("run cargo")
    };
    assert!(cargo(&["test"]).success(), "the template's own tests pass after its word list is edited");
    assert!(cargo(&["build", "--target", "wasm32-wasip2", "--release"]).success(), "the template builds");
    let wasm = target.join("wasm32-wasip2/release/my_policy.wasm");

    // 3. Copy into the watched folder: temporary name, then rename.
    let dir = s.data_dir.join("plugins");
    std::fs::copy(&wasm, dir.join(".my-policy.wasm.tmp")).expect("copy");
    std::fs::rename(dir.join(".my-policy.wasm.tmp"), dir.join("my-policy.wasm")).expect("rename");

    // 4. It takes effect without a restart, for every word of the edited list.
    let started = Instant::now();
    loop {
        // The client's pooled connection sat idle through the build, and the server may close it
        // (keep-alive timeout) just as it is reused: a failed send is polled again, like a policy
        // that is not loaded yet.
        let sent = post(body("I would like a pineapple pizza")).await;
        if let Ok(r) = sent
            && r.status() == 403
        {
            let v: Value = r.json().await.expect("json");
            assert_eq!(v["error"], "Access denied");
            assert!(v["message"].as_str().expect("m").contains("my-policy"), "{v}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "the policy never loaded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = post(body("Is DURIAN a fruit?")).await.expect("send");
    assert_eq!(r.status(), 403, "the second word of the list is refused too");
    let r = post(body("I would like a margherita")).await.expect("send");
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["metadata"]["smltp_policy_used"], "my-policy", "{v}");
    assert_eq!(v["metadata"]["smltp_policy_source"], "request");
}
