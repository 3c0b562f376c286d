//! A tenant's Rust policy from `gatehouse plugin new` to serving on a running
//! server through the watched folder: edit its term list, run its own tests,
//! see `plugin test` name every sample the edit changed, see a failed build
//! leave no component behind, see a panic's message in `plugin test` and in
//! the server log, and see the policy deny the chosen words without a restart.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use gatehouse_tests::Server;
use gatehouse_tests::server::binary;
use serde_json::{Value, json};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace").to_path_buf()
}

/// Run `program` in `dir` with a shared target dir (the dependencies build once) and no inherited flags.
fn run(program: &Path, dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(program);
    cmd.current_dir(dir).args(args).env("CARGO_TARGET_DIR", workspace().join("target/policy-templates"));
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET", "CARGO_MANIFEST_DIR"] {
        cmd.env_remove(var);
    }
    cmd.output().expect("run")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[tokio::test]
async fn a_rust_policy_from_plugin_new_is_tested_and_takes_effect_without_a_restart() {
    let s = Server::start();
    let body = |text: &str| json!({"index": "Zero-Knowledge", "model": "echo/default", "prompt": text, "smltp_policy": "my-policy"});
    // No pooled connections: the builds below leave the client idle for longer
    // than the server keeps an idle connection.
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).timeout(Duration::from_secs(60)).build().expect("client");
    let post = |b: Value| client.post(s.url("/chat/completions")).bearer_auth(&s.admin_key).json(&b).send();
    let r = post(body("hello")).await.expect("send");
    assert_eq!(r.status(), 400, "not there yet");

    // 1. Scaffold outside the repository, edit the term list, run the policy's own tests.
    let work = tempfile::tempdir().expect("tmp");
    let project = work.path().join("my-policy");
    let o = run(binary(), work.path(), &["plugin", "new", "--lang", "rust", "my-policy", "--dir", project.to_str().expect("utf-8")]);
    assert!(o.status.success(), "{}", text(&o));
    let lib = project.join("src/lib.rs");
    let src = std::fs::read_to_string(&lib).expect("lib.rs");
    let list = "const DENY_TERMS: &[&str] = &[\"project falcon\", \"forbidden-word\"];";
    assert!(src.contains(list), "the template's term list is where the README says");
    let edited = src.replace(list, "const DENY_TERMS: &[&str] = &[\"pineapple\", \"durian\"];");
    std::fs::write(&lib, &edited).expect("write lib.rs");
    let cargo = PathBuf::from(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    let o = run(&cargo, &project, &["test", "--locked"]);
    assert!(o.status.success(), "the policy's own tests pass after its list is edited: {}", text(&o));

    // 2. `plugin test` names each sample the edit changed, with the difference, and exits 1.
    let o = run(binary(), &project, &["plugin", "build"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(binary(), &project, &["plugin", "test"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("serves as policy `my-policy`"), "{out}");
    assert!(out.contains("FAIL  deny term 1") && out.contains("allow: expected false, got true"), "{out}");
    assert!(out.contains("ok    unapproved model echo/large"), "the rest still pass: {out}");

    // 3. A build that fails leaves no component, not the previous one.
    std::fs::write(&lib, edited.replace("struct Policy;", "struct Policy")).expect("break lib.rs");
    let o = run(binary(), &project, &["plugin", "build"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(!project.join("build/policy.wasm").exists(), "the previous build is gone");
    let o = run(binary(), &project, &["plugin", "test"]);
    assert!(!o.status.success() && text(&o).contains("run `gatehouse plugin build` first"), "{}", text(&o));

    // 4. A panic's message and location reach `plugin test`.
    let panicking = edited.replace(
        "    fn evaluate(ctx: PolicyContext) -> PolicyDecision {\n",
        "    fn evaluate(ctx: PolicyContext) -> PolicyDecision {\n        if ctx.mentions_any([\"boom\"]) {\n            panic!(\"boom requested\");\n        }\n",
    );
    assert_ne!(panicking, edited);
    std::fs::write(&lib, &panicking).expect("write lib.rs");
    let o = run(binary(), &project, &["plugin", "build"]);
    assert!(o.status.success(), "{}", text(&o));
    let boom = project.join("boom.jsonl");
    std::fs::write(&boom, "{\"name\": \"boom\", \"request\": {\"prompt\": \"boom\"}, \"expect\": {\"allow\": true}}\n").expect("write");
    let o = run(binary(), &project, &["plugin", "test", "--samples", boom.to_str().expect("utf-8")]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("FAIL  boom") && out.contains("panicked at src/lib.rs:") && out.contains("boom requested"), "{out}");

    // 5. Into the watched folder (temporary name, then rename): it takes effect without a restart.
    let dir = s.data_dir.join("plugins");
    std::fs::copy(project.join("build/policy.wasm"), dir.join(".my-policy.wasm.tmp")).expect("copy");
    std::fs::rename(dir.join(".my-policy.wasm.tmp"), dir.join("my-policy.wasm")).expect("rename");
    let started = Instant::now();
    loop {
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

    // A panic refuses the request, and the server log says where the policy panicked.
    let r = post(body("boom")).await.expect("send");
    assert!(!r.status().is_success(), "a panicking policy never lets a request through");
    let started = Instant::now();
    while !s.log().contains("boom requested") {
        assert!(started.elapsed() < Duration::from_secs(5), "the panic's message is not in the log:\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(s.log().contains("panicked at src/lib.rs:"), "{}", s.log());
}
