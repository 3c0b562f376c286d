//! A tenant's Rust policy from `gatehouse plugin new` to serving on a running
//! server through the watched folder: edit its term list, run its own tests,
//! see `plugin test` name every sample the edit changed, see a failed build
//! leave no component behind, see a panic's message in `plugin test` and in
//! the server log, and see the policy deny the chosen words without a restart.
//! A group's policies through the admin API: its tenant admin publishes under
//! names registered to the group, the policy runs for that group's keys only,
//! layered on the base policy (which it can tighten but never loosen; an
//! admin may name a group's own base), discovery lists it to that group's keys
//! only, and a shadow version is counted beside the active one (under the
//! configured limits), then activated and rolled back, each step audited.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use gatehouse_tests::Server;
use gatehouse_tests::server::binary;
use reqwest::Method;
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

/// Policy components for these tests, built once per test binary from
/// small Rust sources against the guest SDK, as a tenant would build them
/// (`cargo build --target wasm32-wasip2 --release`).
mod build {

    use std::path::Path;
    use std::process::Command;
    use std::sync::OnceLock;

    /// The built components.
    pub struct Built {
        /// `acme-policy` 0.1: refuses `pineapple`.
        pub acme_v1: Vec<u8>,
        /// `acme-policy` 0.2: refuses `pineapple` and `durian`.
        pub acme_v2: Vec<u8>,
        /// `acme-loose`: allows everything and asks for every laxity a policy can.
        pub loose: Vec<u8>,
        /// `acme-base`, the operator's base: refuses `forbidden-base`; strict
        /// shield, not switchable off; provider `echo` only.
        pub base: Vec<u8>,
        /// `beta-policy`: refuses nothing (a second group's).
        pub beta: Vec<u8>,
        /// A component whose `info()` says `public`, a built-in name.
        pub named_public: Vec<u8>,
        /// `acme-policy` 0.3: refuses `pineapple`, after filling 48 MiB of
        /// memory (more than a 32 MiB cap allows, less than the default 64).
        pub acme_hog: Vec<u8>,
        /// `acme-floor`, an operator's second policy: refuses `mango`.
        pub floor: Vec<u8>,
    }

    const V1: &str = r#"if ctx.mentions_any(["pineapple"]) { return deny("acme-policy: a word this tenant does not allow"); } allow()"#;
    const V2: &str =
        r#"if ctx.mentions_any(["pineapple", "durian"]) { return deny("acme-policy: a word this tenant does not allow"); } allow()"#;
    const LOOSE: &str = "allow().pii(DataAction::Allow).dlp(DataAction::Allow).shield(ShieldMode::Off).shield_may_disable(true)\
        .withhold_on_canary_leak(false).log_prompts(true).restore_pii(true)";
    const HOG: &str = r#"let hog = std::hint::black_box(vec![7u8; 48 << 20]); if hog[hog.len() / 2] == 0 { return deny("never"); }
        if ctx.mentions_any(["pineapple"]) { return deny("acme-policy: a word this tenant does not allow"); } allow()"#;
    const FLOOR: &str = r#"if ctx.mentions_any(["mango"]) { return deny("acme-floor: refused by the group's base policy"); } allow()"#;
    const BASE: &str = r#"if ctx.mentions_any(["forbidden-base"]) { return deny("acme-base: refused by the operator's base policy"); }
        allow().shield(ShieldMode::Strict).shield_may_disable(false).providers(["echo"])"#;

    /// The components, built on first use (tests of one binary share them).
    pub fn built() -> &'static Built {
        static BUILT: OnceLock<Built> = OnceLock::new();
        BUILT.get_or_init(|| {
            let ws = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace").to_path_buf();
            let project = tempfile::tempdir().expect("tmp");
            let sdk = ws.join("plugins/sdk");
            let manifest = format!(
                "[workspace]\n[package]\nname = \"my-policy\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\
                 [lib]\ncrate-type = [\"cdylib\"]\n[dependencies]\ngatehouse-sdk = {{ path = {:?} }}\n\
                 [profile.release]\nopt-level = \"s\"\npanic = \"abort\"\nstrip = true\n",
                sdk.display().to_string()
            );
            std::fs::write(project.path().join("Cargo.toml"), manifest).expect("Cargo.toml");
            // The Rust template's lock file (what `gatehouse plugin new` writes), for this project's name.
            let lock = std::fs::read_to_string(ws.join("sdk/templates/rust/Cargo.lock")).expect("the template's Cargo.lock");
            std::fs::write(project.path().join("Cargo.lock"), lock.replace("{{name}}", "my-policy")).expect("Cargo.lock");
            std::fs::create_dir_all(project.path().join("src")).expect("src");
            // The target dir the template tests use: the SDK's dependencies build once.
            let target = ws.join("target/policy-templates");
            let build = |name: &str, version: &str, body: &str| -> Vec<u8> {
                let src = format!(
                    "use gatehouse_sdk::policy::prelude::*;\nstruct P;\nimpl Guest for P {{\n\
                     fn info() -> PluginInfo {{ plugin_info({name:?}, {version:?}, \"tenant-policy test\") }}\n\
                     #[allow(unused_variables)]\nfn evaluate(ctx: PolicyContext) -> PolicyDecision {{ {body} }}\n}}\nexport_policy!(P);\n"
                );
                std::fs::write(project.path().join("src/lib.rs"), src).expect("lib.rs");
                let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                    .current_dir(project.path())
                    .args(["build", "--quiet", "--locked", "--target", "wasm32-wasip2", "--release", "--target-dir"])
                    .arg(&target)
                    .env_remove("CARGO_TARGET_DIR")
                    .env_remove("RUSTFLAGS")
                    .env_remove("CARGO_ENCODED_RUSTFLAGS")
                    .status()
                    .expect("run cargo");
                assert!(status.success(), "building test policy {name} failed");
                std::fs::read(target.join("wasm32-wasip2/release/my_policy.wasm")).expect("built component")
            };
            Built {
                acme_v1: build("acme-policy", "0.1.0", V1),
                acme_v2: build("acme-policy", "0.2.0", V2),
                loose: build("acme-loose", "0.1.0", LOOSE),
                base: build("acme-base", "0.1.0", BASE),
                beta: build("beta-policy", "0.1.0", "allow()"),
                named_public: build("public", "9.9.9", "allow()"),
                acme_hog: build("acme-policy", "0.3.0", HOG),
                floor: build("acme-floor", "0.1.0", FLOOR),
            }
        })
    }
}

/// The tenant-policy routes of group `g`.
fn policies(g: &str) -> String {
    format!("/api/admin/groups/{g}/policies")
}

async fn call(s: &Server, key: &str, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut r = s.client.request(method, s.url(path)).bearer_auth(key);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.expect("send");
    let st = r.status().as_u16();
    (st, r.json().await.unwrap_or(Value::Null))
}

async fn publish(s: &Server, key: &str, group: &str, bytes: &[u8], query: &str) -> (u16, Value) {
    let r = s
        .client
        .post(s.url(&format!("{}{query}", policies(group))))
        .bearer_auth(key)
        .header("content-type", "application/wasm")
        .body(bytes.to_vec())
        .send()
        .await
        .expect("publish");
    let st = r.status().as_u16();
    (st, r.json().await.unwrap_or(Value::Null))
}

async fn group(s: &Server, name: &str) -> String {
    let (st, v) = call(s, &s.admin_key, Method::POST, "/api/admin/groups", Some(json!({"name": name}))).await;
    assert_eq!(st, 201, "{v}");
    v["data"]["id"].as_str().expect("group id").to_owned()
}

fn chat(policy: &str, text: &str) -> Value {
    json!({"index": "Zero-Knowledge", "model": "echo/default", "prompt": text, "smltp_policy": policy})
}

/// The audit records of a search, newest first.
async fn audit(s: &Server, query: &str) -> Vec<Value> {
    let (_, v) = call(s, &s.admin_key, Method::GET, &format!("/audit-logs?type=plugin_management&{query}"), None).await;
    v["data"]["logs"].as_array().cloned().unwrap_or_default()
}

/// Calls the plugin runtime has made to `name` on this host.
async fn calls(s: &Server, name: &str) -> u64 {
    let (_, v) = call(s, &s.admin_key, Method::GET, "/api/admin/plugins", None).await;
    v["data"]["plugins"].as_array().and_then(|a| a.iter().find(|p| p["name"] == name)).map_or(0, |p| p["calls"].as_u64().unwrap_or(0))
}

const TWO_PROVIDERS: &str = "[providers.echo]\nplugin = \"provider-echo\"\nbase_url = \"echo://local\"\n\
    [providers.mirror]\nplugin = \"provider-echo\"\nbase_url = \"echo://local\"\n";

/// A server whose base policy (`policies.default`) is the operator's
/// `acme-base`, dropped into the watched folder; groups A (with a tenant
/// admin and a user key) and B (a user key).
struct Tenants {
    s: Server,
    a: String,
    b: String,
    a_admin: String,
    a_user: String,
    b_user: String,
    b_admin: String,
}

async fn tenants() -> Tenants {
    tenants_with("").await
}

/// [`tenants`], with `extra` appended to the config.
async fn tenants_with(extra: &str) -> Tenants {
    let built = build::built();
    let dir = tempfile::tempdir().expect("tmp");
    let base = dir.path().join("acme-base.wasm");
    std::fs::write(&base, &built.base).expect("write base");
    let toml = format!("[policies]\ndefault = \"acme-base\"\n{TWO_PROVIDERS}{extra}");
    let s = Server::builder().toml(&toml).plugin(base.to_str().expect("utf-8"), "acme-base.wasm").start();
    let a = group(&s, "Acme").await;
    let b = group(&s, "Beta").await;
    let (_, a_admin, _) = s.create_key(json!({"name": "acme admin", "tenantAdmin": true, "groupId": a})).await;
    let (_, a_user, _) = s.create_key(json!({"name": "acme user", "groupId": a})).await;
    let (_, b_user, _) = s.create_key(json!({"name": "beta user", "groupId": b})).await;
    let (_, b_admin, _) = s.create_key(json!({"name": "beta admin", "tenantAdmin": true, "groupId": b})).await;
    Tenants { s, a, b, a_admin, a_user, b_user, b_admin }
}

#[tokio::test]
async fn a_tenant_admin_publishes_for_its_own_group_only_under_names_registered_to_it() {
    let built = build::built();
    let t = tenants().await;
    let s = &t.s;
    // Another group's route, a plain key, a tenant admin on an operator route: 403.
    let (st, v) = publish(s, &t.a_admin, &t.b, &built.beta, "").await;
    assert_eq!(st, 403, "group A's admin publishing for B: {v}");
    let (st, _) = publish(s, &t.a_user, &t.a, &built.acme_v1, "").await;
    assert_eq!(st, 403, "a key of the group without tenantAdmin");
    let r = s.client.post(s.url("/api/admin/plugins")).bearer_auth(&t.a_admin).body(built.acme_v1.clone()).send().await.expect("send");
    assert_eq!(r.status(), 403, "the operator's publish route");
    let (st, _) = call(s, &t.a_admin, Method::GET, &policies(&t.b), None).await;
    assert_eq!(st, 403, "listing another group's policies");

    let (st, v) = publish(s, &t.a_admin, &t.a, &built.acme_v1, "").await;
    assert_eq!(st, 201, "{v}");
    let p = &v["data"]["plugin"];
    assert_eq!(
        (p["name"].as_str(), p["version"].as_u64(), p["groupId"].as_str()),
        (Some("acme-policy"), Some(1), Some(t.a.as_str())),
        "{v}"
    );
    assert_eq!(v["data"]["thisHost"]["serving"], true, "{v}");
    let hash = p["policyHash"].as_str().expect("policy hash").to_owned();

    // Clashes: another group's name, a built-in name, the operator's file, an operator's published name.
    let (st, v) = publish(s, &t.b_admin, &t.b, &built.acme_v2, "").await;
    assert_eq!(st, 409, "group B taking A's name: {v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("taken") && !message.contains(&t.a), "B learns nothing of A: {v}");
    for (bytes, what) in [(&built.named_public, "a built-in policy name"), (&built.base, "the operator's file")] {
        let (st, v) = publish(s, &t.a_admin, &t.a, bytes, "").await;
        assert_eq!(st, 409, "{what}: {v}");
    }
    let r = s.admin(Method::POST, "/api/admin/plugins").body(built.beta.clone()).send().await.expect("send");
    assert_eq!(r.status(), 201, "the operator publishes beta-policy");
    let (st, v) = publish(s, &t.b_admin, &t.b, &built.beta, "").await;
    assert_eq!(st, 409, "an operator's published name: {v}");
    let r = s.admin(Method::POST, "/api/admin/plugins").body(built.acme_v2.clone()).send().await.expect("send");
    assert_eq!(r.status(), 409, "the operator's route cannot take a group's name either");

    // The operator may act for any group; each list shows that group's own.
    let (st, v) = call(s, &s.admin_key, Method::GET, &policies(&t.a), None).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["data"]["basePolicy"], "acme-base");
    assert_eq!(v["data"]["policies"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v["data"]["policies"][0]["active"]["policyHash"], hash.as_str());
    let (_, v) = call(s, &t.b_admin, Method::GET, &policies(&t.b), None).await;
    assert_eq!(v["data"]["policies"], json!([]), "B has none: {v}");
    let (st, _) = call(s, &t.b_admin, Method::GET, &format!("{}/acme-policy/versions", policies(&t.b)), None).await;
    assert_eq!(st, 404, "A's policy is not B's");
    let (st, _) = call(s, &t.b_admin, Method::POST, &format!("{}/acme-policy/rollback", policies(&t.b)), None).await;
    assert_eq!(st, 404);

    // Audited with the hash; refusals too.
    let logs = audit(s, "search=tenant_policy_publish").await;
    assert!(logs.iter().any(|l| l.to_string().contains(&hash) && l["outcome"] == "success"), "{logs:?}");
    assert!(logs.iter().filter(|l| l["outcome"] == "failure").count() >= 4, "the refused uploads are audited: {logs:?}");
}

#[tokio::test]
async fn a_groups_policy_runs_only_for_its_keys_and_never_loosens_its_base() {
    let built = build::built();
    let t = tenants().await;
    let s = &t.s;
    for bytes in [&built.acme_v1, &built.loose] {
        let (st, v) = publish(s, &t.a_admin, &t.a, bytes, "").await;
        assert_eq!(st, 201, "{v}");
    }

    // Group A's keys run it; the hash is the tenant version's.
    let (st, v) = s.chat_as(&t.a_user, &chat("acme-policy", "a pineapple pizza")).await;
    assert_eq!((st, v["error"].as_str()), (403, Some("Access denied")), "{v}");
    let (st, v) = s.chat_as(&t.a_user, &chat("acme-policy", "a margherita")).await;
    assert_eq!(st, 200, "{v}");
    let (_, versions) = call(s, &s.admin_key, Method::GET, &format!("{}/acme-policy/versions", policies(&t.a)), None).await;
    assert_eq!(v["metadata"]["smltp_policy_hash"], versions["data"][0]["policyHash"], "{v} {versions}");

    // Group B's key, and a key of no group: as unknown as a policy that does not exist; never run.
    let before = calls(s, "acme-policy").await;
    for key in [&t.b_user, &s.admin_key] {
        let (st, v) = s.chat_as(key, &chat("acme-policy", "a pineapple pizza")).await;
        assert_eq!((st, v["error"].as_str()), (400, Some("Unknown policy")), "{v}");
        let usable = v["message"].as_str().unwrap_or_default().split("may use:").nth(1).unwrap_or_default().to_owned();
        assert!(usable.contains("acme-base") && !usable.contains("acme-policy") && !usable.contains("acme-loose"), "{v}");
        let (st, _) = s.chat_as(key, &chat("no-such-policy", "hello")).await;
        assert_eq!(st, 400);
    }
    let (st, v) = s.chat_as(&t.b_user, &json!({"index": "Zero-Knowledge", "model": "echo/default", "prompt": "a pineapple pizza"})).await;
    assert_eq!((st, v["metadata"]["smltp_policy_used"].as_str()), (200, Some("acme-base")), "B's traffic runs its own default: {v}");
    assert_eq!(calls(s, "acme-policy").await, before, "acme-policy never ran on B's traffic");

    // acme-loose asks for every laxity; its base refuses each at run time.
    let (st, v) = s.chat_as(&t.a_user, &chat("acme-loose", "tell me about forbidden-base")).await;
    assert_eq!(st, 403, "what the base denies stays denied: {v}");
    assert!(v["message"].as_str().unwrap_or_default().contains("acme-base"), "{v}");
    let mut off = chat("acme-loose", "hello");
    off["prompt_shield"] = json!({"enabled": false});
    let (st, v) = s.chat_as(&t.a_user, &off).await;
    assert_eq!(st, 403, "the shield stays on: {v}");
    let mut elsewhere = chat("acme-loose", "hello");
    elsewhere["model"] = json!("mirror/default");
    let (st, v) = s.chat_as(&t.a_user, &elsewhere).await;
    assert_eq!(st, 403, "a provider the base does not allow: {v}");
    let (st, v) = s.chat_as(&t.a_user, &chat("acme-loose", "hello")).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["metadata"]["prompt_shield_policy"]["mode"], "strict", "the base's stricter shield mode: {v}");
    assert_eq!(v["metadata"]["smltp_policy_used"], "acme-loose");
    // The same through the policy check.
    let r = s.client.post(s.url("/api/policy/check")).bearer_auth(&t.a_user).json(&chat("acme-loose", "forbidden-base")).send().await;
    let v: Value = r.expect("check").json().await.expect("json");
    assert_eq!(v["allowed"], false, "{v}");
}

/// Poll the shadow's counts until `evaluated` reaches `n` (10 s at most).
async fn shadow_counts(s: &Server, key: &str, path: &str, n: u64) -> Value {
    shadow_counts_of(s, key, path, "evaluated", n).await
}

/// Poll the shadow's counts until `field` reaches `n` (10 s at most).
async fn shadow_counts_of(s: &Server, key: &str, path: &str, field: &str, n: u64) -> Value {
    let started = Instant::now();
    loop {
        let (st, v) = call(s, key, Method::GET, path, None).await;
        if st == 200 && v["data"][field].as_u64() >= Some(n) {
            return v["data"].clone();
        }
        assert!(started.elapsed() < Duration::from_secs(10), "the shadow never counted {n} {field}: {st} {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_shadow_version_counts_its_disagreements_then_is_activated_and_rolled_back() {
    let built = build::built();
    let t = tenants().await;
    let s = &t.s;
    let base = policies(&t.a);
    let (st, v) = publish(s, &t.a_admin, &t.a, &built.acme_v1, "").await;
    assert_eq!(st, 201, "{v}");
    let (st, v) = publish(s, &t.a_admin, &t.a, &built.acme_v2, "?state=shadow").await;
    assert_eq!((st, v["data"]["plugin"]["state"].as_str()), (201, Some("shadow")), "{v}");
    let (v1_hash, v2_hash) = {
        let (_, v) = call(s, &t.a_admin, Method::GET, &format!("{base}/acme-policy/versions"), None).await;
        (v["data"][0]["policyHash"].as_str().expect("v1").to_owned(), v["data"][1]["policyHash"].as_str().expect("v2").to_owned())
    };
    let (st, v) = call(s, &t.a_admin, Method::GET, &format!("{base}/acme-policy/shadow"), None).await;
    assert_eq!((st, v["data"]["version"].as_u64(), v["data"]["evaluated"].as_u64()), (200, Some(2), Some(0)), "{v}");

    // Five requests: the shadow would refuse the two that mention durian; the active version decides.
    for text in ["hello", "a durian smoothie", "a margherita", "durian again", "pineapple"] {
        let (st, v) = s.chat_as(&t.a_user, &chat("acme-policy", text)).await;
        let expected = if text.contains("pineapple") { 403 } else { 200 };
        assert_eq!(st, expected, "{text}: {v}");
    }
    let counts = shadow_counts(s, &t.a_admin, &format!("{base}/acme-policy/shadow"), 5).await;
    assert_eq!(
        (counts["evaluated"].as_u64(), counts["agreed"].as_u64(), counts["disagreed"].as_u64(), counts["dropped"].as_u64()),
        (Some(5), Some(3), Some(2), Some(0)),
        "{counts}"
    );
    let sample = &counts["samples"][0];
    assert_eq!(sample["fields"], json!(["allow"]), "{counts}");
    assert_eq!((sample["active"]["allow"].as_bool(), sample["shadow"]["allow"].as_bool()), (Some(true), Some(false)));
    assert!(!counts.to_string().contains("durian"), "no request text in the sample: {counts}");
    let (st, _) = call(s, &t.b_admin, Method::GET, &format!("{}/acme-policy/shadow", policies(&t.b)), None).await;
    assert_eq!(st, 404, "B sees nothing of A's shadow");

    // Activate v2: durian is refused; roll back to v1: it is not.
    let (st, v) = call(s, &t.a_admin, Method::POST, &format!("{base}/acme-policy/activate"), Some(json!({"version": 2}))).await;
    assert_eq!((st, v["data"]["plugin"]["state"].as_str()), (200, Some("active")), "{v}");
    let (st, v) = s.chat_as(&t.a_user, &chat("acme-policy", "a durian smoothie")).await;
    assert_eq!(st, 403, "{v}");
    assert_eq!(v["message"].as_str().map(|m| m.contains("acme-policy")), Some(true), "{v}");
    let (st, _) = call(s, &t.a_admin, Method::GET, &format!("{base}/acme-policy/shadow"), None).await;
    assert_eq!(st, 404, "an activated shadow is no longer the shadow");
    let (st, v) = call(s, &t.a_admin, Method::POST, &format!("{base}/acme-policy/rollback"), None).await;
    assert_eq!((st, v["data"]["plugin"]["version"].as_u64()), (200, Some(1)), "{v}");
    let (st, v) = s.chat_as(&t.a_user, &chat("acme-policy", "a durian smoothie")).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["metadata"]["smltp_policy_hash"], v1_hash.as_str());
    // Shadow v2 again by version, then activate it from the shadow.
    let (st, v) = call(s, &t.a_admin, Method::POST, &format!("{base}/acme-policy/shadow"), Some(json!({"version": 2}))).await;
    assert_eq!((st, v["data"]["plugin"]["state"].as_str()), (200, Some("shadow")), "{v}");
    let (st, _) = call(s, &t.a_admin, Method::POST, &format!("{base}/acme-policy/shadow"), Some(json!({"version": 1}))).await;
    assert_eq!(st, 409, "the active version cannot be the shadow");

    // Every step audited with the version's policy hash.
    for (step, hash) in [("publish", &v2_hash), ("activate", &v2_hash), ("rollback", &v1_hash), ("shadow", &v2_hash)] {
        let logs = audit(s, &format!("search=tenant_policy_{step}")).await;
        assert!(
            logs.iter().any(|l| l["outcome"] == "success" && l.to_string().contains(hash.as_str()) && l.to_string().contains(&t.a)),
            "{step}: {logs:?}"
        );
    }
}

/// The serving plugin `name` as `GET /api/admin/plugins` lists it.
async fn serving(s: &Server, name: &str) -> Value {
    let (_, v) = call(s, &s.admin_key, Method::GET, "/api/admin/plugins", None).await;
    v["data"]["plugins"].as_array().and_then(|a| a.iter().find(|p| p["name"] == name)).cloned().unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_shadow_runs_under_the_configured_limits_and_its_faults_stay_the_shadows() {
    let built = build::built();
    // 32 MiB per instance, below the plugin default of 64 MiB; the shadow version fills 48 MiB.
    let t = tenants_with("[plugins]\nmemory_limit_mb = 32\n").await;
    let s = &t.s;
    let base = policies(&t.a);
    let (st, v) = publish(s, &t.a_admin, &t.a, &built.acme_v1, "").await;
    assert_eq!(st, 201, "{v}");
    let (st, v) = publish(s, &t.a_admin, &t.a, &built.acme_hog, "?state=shadow").await;
    assert_eq!((st, v["data"]["plugin"]["state"].as_str()), (201, Some("shadow")), "{v}");

    // The active version decides every request as if there were no shadow.
    for (text, expected) in [("hello", 200), ("a pineapple pizza", 403), ("a margherita", 200)] {
        let (st, v) = s.chat_as(&t.a_user, &chat("acme-policy", text)).await;
        assert_eq!(st, expected, "{text}: {v}");
    }
    let counts = shadow_counts_of(s, &t.a_admin, &format!("{base}/acme-policy/shadow"), "faults", 3).await;
    assert_eq!(
        (counts["version"].as_u64(), counts["faults"].as_u64(), counts["evaluated"].as_u64(), counts["dropped"].as_u64()),
        (Some(2), Some(3), Some(0), Some(0)),
        "under the configured 32 MiB every evaluation of the shadow fails, and is counted: {counts}"
    );
    // The serving snapshot still holds version 1, which never faulted.
    let p = serving(s, "acme-policy").await;
    assert_eq!((p["source"]["type"].as_str(), p["source"]["version"].as_u64()), (Some("published"), Some(1)), "{p}");
    assert!(p["calls"].as_u64() >= Some(3) && p["faults"].as_u64() == Some(0), "{p}");
}

#[tokio::test]
async fn discovery_lists_a_groups_policies_to_that_groups_keys_only() {
    let built = build::built();
    let t = tenants().await;
    let s = &t.s;
    let (st, v) = publish(s, &t.a_admin, &t.a, &built.acme_v1, "").await;
    assert_eq!(st, 201, "{v}");
    let (st, v) = publish(s, &t.b_admin, &t.b, &built.beta, "").await;
    assert_eq!(st, 201, "{v}");
    let (_, no_group, _) = s.create_key(json!({"name": "no group"})).await;
    let listed = |v: &Value| -> Vec<String> {
        v["data"].as_array().into_iter().flatten().filter_map(|p| p["name"].as_str().map(str::to_owned)).collect()
    };
    for (who, key, own) in [
        ("A's user", &t.a_user, Some("acme-policy")),
        ("A's tenant admin", &t.a_admin, Some("acme-policy")),
        ("B's user", &t.b_user, Some("beta-policy")),
        ("a key of no group", &no_group, None),
    ] {
        let (st, v) = call(s, key, Method::GET, "/api/policies", None).await;
        assert_eq!(st, 200, "{who}: {v}");
        let names = listed(&v);
        assert!(names.iter().any(|n| n == "acme-base"), "{who} sees the operator's policies: {names:?}");
        if let Some(own) = own {
            assert!(names.iter().any(|n| n == own), "{who} sees its group's {own}: {names:?}");
        }
        let other_groups = ["acme-policy", "beta-policy"].into_iter().filter(|n| Some(*n) != own);
        for n in other_groups {
            assert!(!names.iter().any(|m| m == n), "{who} must not learn of {n}: {names:?}");
        }
    }
    // An admin key sees every group's, with its group, as not selectable by it.
    let (_, v) = call(s, &s.admin_key, Method::GET, "/api/policies", None).await;
    let entry = |n: &str| v["data"].as_array().and_then(|a| a.iter().find(|p| p["name"] == n)).cloned().unwrap_or(Value::Null);
    assert_eq!(
        (entry("acme-policy")["groupId"].as_str(), entry("acme-policy")["selectable"].as_bool()),
        (Some(t.a.as_str()), Some(false)),
        "{v}"
    );
    assert_eq!(
        (entry("beta-policy")["groupId"].as_str(), entry("beta-policy")["selectable"].as_bool()),
        (Some(t.b.as_str()), Some(false)),
        "{v}"
    );
    assert_eq!((entry("acme-base")["groupId"].clone(), entry("acme-base")["selectable"].as_bool()), (Value::Null, Some(true)), "{v}");
}

/// `/api/policy/check`'s `allowed` for `text` under `policy`, as `key`.
async fn allowed(s: &Server, key: &str, policy: &str, text: &str) -> bool {
    let r = s.client.post(s.url("/api/policy/check")).bearer_auth(key).json(&chat(policy, text)).send().await.expect("check");
    let v: Value = r.json().await.expect("json");
    v["allowed"].as_bool().unwrap_or_else(|| panic!("{v}"))
}

#[tokio::test]
async fn an_admin_names_a_groups_base_policy_and_the_groups_policies_layer_on_it() {
    let built = build::built();
    let t = tenants().await;
    let s = &t.s;
    let a_base = format!("/api/admin/groups/{}/base-policy", t.a);
    for (key, group, bytes) in [(&t.a_admin, &t.a, &built.acme_v1), (&t.b_admin, &t.b, &built.beta)] {
        let (st, v) = publish(s, key, group, bytes, "").await;
        assert_eq!(st, 201, "{v}");
    }
    let r = s.admin(Method::POST, "/api/admin/plugins").body(built.floor.clone()).send().await.expect("send");
    assert_eq!(r.status(), 201, "the operator publishes acme-floor");

    // By default the base is `policies.default`: acme-base refuses `forbidden-base`, nothing refuses mango.
    let (st, v) = s.chat_as(&t.a_user, &chat("acme-policy", "a mango lassi")).await;
    assert_eq!(st, 200, "{v}");
    assert!(!allowed(s, &t.a_user, "acme-policy", "forbidden-base").await);

    // Only an admin names a base, and only an operator's policy loaded here.
    let (st, _) = call(s, &t.a_admin, Method::PUT, &a_base, Some(json!({"basePolicy": "acme-floor"}))).await;
    assert_eq!(st, 403, "a tenant admin does not choose its own base");
    for (bad, why) in [("acme-policy", "a group's policy"), ("beta-policy", "another group's"), ("no-such-policy", "not loaded")] {
        let (st, v) = call(s, &s.admin_key, Method::PUT, &a_base, Some(json!({"basePolicy": bad}))).await;
        assert_eq!(st, 400, "{why}: {v}");
        assert!(v["error"]["message"].as_str().unwrap_or_default().contains(bad), "the message names it: {v}");
    }
    let (st, v) =
        call(s, &s.admin_key, Method::PUT, "/api/admin/groups/grp_nonexistent/base-policy", Some(json!({"basePolicy": "acme-floor"})))
            .await;
    assert_eq!(st, 404, "{v}");
    let (st, v) = call(s, &s.admin_key, Method::PUT, &a_base, Some(json!({"basePolicy": "acme-floor"}))).await;
    assert_eq!(
        (st, v["data"]["basePolicy"].as_str(), v["data"]["basePolicySource"].as_str()),
        (200, Some("acme-floor"), Some("group")),
        "{v}"
    );
    let (_, v) = call(s, &t.a_admin, Method::GET, &policies(&t.a), None).await;
    assert_eq!((v["data"]["basePolicy"].as_str(), v["data"]["basePolicySource"].as_str()), (Some("acme-floor"), Some("group")), "{v}");

    // A's policies now layer on acme-floor: mango is refused, acme-base's word is not.
    let (st, v) = s.chat_as(&t.a_user, &chat("acme-policy", "a mango lassi")).await;
    assert_eq!(st, 403, "{v}");
    assert!(v["message"].as_str().unwrap_or_default().contains("acme-floor"), "{v}");
    let (st, v) = s.chat_as(&t.a_user, &chat("acme-policy", "tell me about forbidden-base")).await;
    assert_eq!(st, 200, "{v}");
    assert!(!allowed(s, &t.a_user, "acme-policy", "a mango lassi").await);
    assert!(allowed(s, &t.a_user, "acme-policy", "forbidden-base").await);
    // B's policies keep the server default.
    assert!(allowed(s, &t.b_user, "beta-policy", "a mango lassi").await);
    assert!(!allowed(s, &t.b_user, "beta-policy", "forbidden-base").await);
    let (_, v) = call(s, &t.b_admin, Method::GET, &policies(&t.b), None).await;
    assert_eq!((v["data"]["basePolicy"].as_str(), v["data"]["basePolicySource"].as_str()), (Some("acme-base"), Some("default")), "{v}");

    // `null` goes back to the server default.
    let (st, v) = call(s, &s.admin_key, Method::PUT, &a_base, Some(json!({"basePolicy": null}))).await;
    assert_eq!(
        (st, v["data"]["basePolicy"].as_str(), v["data"]["basePolicySource"].as_str()),
        (200, Some("acme-base"), Some("default")),
        "{v}"
    );
    assert!(allowed(s, &t.a_user, "acme-policy", "a mango lassi").await);
    let logs = audit(s, "search=tenant_policy_base").await;
    assert!(logs.iter().filter(|l| l["outcome"] == "success").count() >= 2 && logs.iter().any(|l| l["outcome"] == "failure"), "{logs:?}");
}

#[tokio::test]
async fn shadow_counts_outlive_a_restart_and_are_reported_per_host_and_summed() {
    let built = build::built();
    let mut t = tenants().await;
    let path = format!("{}/acme-policy/shadow", policies(&t.a));
    let (st, v) = publish(&t.s, &t.a_admin, &t.a, &built.acme_v1, "").await;
    assert_eq!(st, 201, "{v}");
    let (st, v) = publish(&t.s, &t.a_admin, &t.a, &built.acme_v2, "?state=shadow").await;
    assert_eq!(st, 201, "{v}");
    for text in ["hello", "a durian smoothie", "a margherita"] {
        let (st, v) = t.s.chat_as(&t.a_user, &chat("acme-policy", text)).await;
        assert_eq!(st, 200, "{text}: {v}");
    }
    let counts = shadow_counts(&t.s, &t.a_admin, &path, 3).await;
    assert_eq!((counts["fleet"]["evaluated"].as_u64(), counts["hosts"].as_array().map(Vec::len)), (Some(3), Some(1)), "{counts}");
    assert_eq!(counts["hosts"][0]["thisHost"], true, "{counts}");

    // Saved every few seconds: wait for a save after the three were counted, then kill the host.
    let counted = chrono::Utc::now();
    let started = Instant::now();
    loop {
        let (_, v) = call(&t.s, &t.a_admin, Method::GET, &path, None).await;
        let saved = v["data"]["hosts"][0]["savedAt"]
            .as_str()
            .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
            .map(|d| d.with_timezone(&chrono::Utc));
        if saved.is_some_and(|s| s > counted) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "the counts were never saved: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    t.s.restart();

    // The restarted host goes on from what it saved; the sample (request-level detail) starts anew.
    let (st, v) = call(&t.s, &t.a_admin, Method::GET, &path, None).await;
    assert_eq!(st, 200, "{v}");
    let c = &v["data"];
    assert_eq!(
        (c["evaluated"].as_u64(), c["agreed"].as_u64(), c["disagreed"].as_u64(), c["fleet"]["evaluated"].as_u64()),
        (Some(3), Some(2), Some(1), Some(3)),
        "{v}"
    );
    let (st, v) = t.s.chat_as(&t.a_user, &chat("acme-policy", "durian again")).await;
    assert_eq!(st, 200, "{v}");
    let counts = shadow_counts(&t.s, &t.a_admin, &path, 4).await;
    assert_eq!((counts["disagreed"].as_u64(), counts["fleet"]["disagreed"].as_u64()), (Some(2), Some(2)), "{counts}");
}
