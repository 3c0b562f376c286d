//! `GET /openapi.json`: the document is valid OpenAPI 3.1 (checked by
//! `openapi-spec-validator`), lists exactly the router's routes and methods,
//! and the running API conforms to it under schemathesis' property-based
//! tests (no unexpected 5xx; statuses, content types, headers and bodies as
//! documented). Python packages: `pip install -r tests/python/requirements.txt`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gatehouse_tests::Server;
use gatehouse_tests::mock_upstream::MockUpstream;
use reqwest::Method;
use serde_json::{Value, json};

const METHODS: &[&str] = &["get", "put", "post", "delete", "patch"];

fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python")
}

async fn document(s: &Server) -> Value {
    let r = s.admin(Method::GET, "/openapi.json").send().await.expect("send");
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().expect("ascii").starts_with("application/json"));
    r.json().await.expect("json")
}

/// `/api/admin/keys/{id}` → `/api/admin/keys/probe`.
fn concrete(template: &str) -> String {
    template.split('/').map(|seg| if seg.starts_with('{') { "probe" } else { seg }).collect::<Vec<_>>().join("/")
}

#[tokio::test]
async fn the_document_is_valid_openapi_3_1_and_lists_exactly_the_routes() {
    let s = Server::start();
    // Not public (docs/decisions/routes-and-formats.md: only /health is).
    let anon = s.client.get(s.url("/openapi.json")).send().await.expect("send");
    assert_eq!(anon.status(), 401);
    let doc = document(&s).await;
    assert!(doc["openapi"].as_str().expect("version").starts_with("3.1."), "{}", doc["openapi"]);

    let file = s.dir.path().join("openapi.json");
    std::fs::write(&file, serde_json::to_vec(&doc).expect("serialise")).expect("write");
    let out = tokio::process::Command::new("python3")
        .arg(python_dir().join("validate_openapi.py"))
        .arg(&file)
        .output()
        .await
        .expect("python3 runs (and `pip install -r tests/python/requirements.txt`)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "openapi-spec-validator: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("valid: 3.1"), "{stdout}");

    // Every documented path is a route with exactly the documented methods:
    // a method the route lacks gets 405 and axum's `Allow` lists the route's.
    let paths = doc["paths"].as_object().expect("paths");
    let mut operation_ids = BTreeSet::new();
    for (template, item) in paths {
        let documented: BTreeSet<String> = METHODS.iter().filter(|m| item.get(**m).is_some()).map(|m| m.to_ascii_uppercase()).collect();
        assert!(!documented.is_empty(), "{template} has no operation");
        let r = s.admin(Method::TRACE, &concrete(template)).send().await.expect("send");
        assert_eq!(r.status(), 405, "TRACE {template}: the router has no such route");
        let allow: BTreeSet<String> = r
            .headers()
            .get("allow")
            .map(|v| v.to_str().expect("ascii").split(',').map(|m| m.trim().to_owned()).filter(|m| m != "HEAD").collect())
            .unwrap_or_default();
        assert_eq!(allow, documented, "methods of {template}: router vs document");
        for m in &documented {
            let op = &item[m.to_ascii_lowercase()];
            assert!(operation_ids.insert(op["operationId"].as_str().expect("operationId").to_owned()), "duplicate id at {m} {template}");
            // Every JSON success answer names its shape (a component with properties),
            // so a generic envelope cannot collapse into a bare `object`.
            for (status, resp) in op["responses"].as_object().expect("responses") {
                let Some(schema) = resp.pointer("/content/application~1json/schema") else { continue };
                if !status.starts_with('2') || template == "/openapi.json" {
                    continue;
                }
                let name = schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/"));
                let component = name.map(|n| &doc["components"]["schemas"][n]);
                assert!(
                    component.is_some_and(|c| c["properties"].is_object()),
                    "{m} {template} {status}: the body schema {schema} names no shape"
                );
            }
            let security = op["security"].as_array().expect("every operation states its security");
            if template == "/health" {
                assert!(security.is_empty(), "/health is public");
            } else {
                assert_eq!(security, &vec![json!({"bearer": []})], "{m} {template}");
                assert!(op["responses"].get("401").is_some(), "{m} {template} documents 401");
            }
        }
    }
    // The routes the docs name are all there (the converse,
    // "no route outside the document", holds by construction: the route table
    // only registers through `routes!`, which a host unit test enforces).
    for p in [
        "/health",
        "/metrics",
        "/openapi.json",
        "/chat/completions",
        "/api/external/v1/chat/completions",
        "/audit-logs",
        "/groups",
        "/api/admin/keys/{id}",
        "/api/admin/groups/{id}/members/{userId}",
        "/api/admin/webhooks/{id}/deliveries",
    ] {
        assert!(paths.contains_key(p), "{p} missing from the document");
    }
    let unknown = s.admin(Method::GET, "/api/admin/no-such-route").send().await.expect("send");
    assert_eq!(unknown.status(), 404);
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
}

#[tokio::test]
async fn schemathesis_finds_no_server_error_and_no_answer_outside_the_document() {
    let mock = MockUpstream::start().await;
    let s = Server::builder()
        .toml(&format!(
            "[providers.openai]\nplugin = \"provider-openai\"\nbase_url = \"{}\"\napi_key_env = \"MOCK_OPENAI_KEY\"\nmodels = [\"openai/gpt-4o-mini\"]\n",
            mock.openai_base_url()
        ))
        .env("MOCK_OPENAI_KEY", "sk-upstream-openai-secret")
        .start();
    // Schemathesis reuses ids it saw in responses, so it would find the admin
    // key in `GET /api/admin/keys` and revoke or demote it halfway through.
    // The two key-changing operations get a key of their own instead.
    let (_, _, victim) = s.create_key(json!({"name": "schemathesis target"})).await;
    let config = s.dir.path().join("schemathesis.toml");
    std::fs::write(
        &config,
        format!(
            "[[operations]]\ninclude-operation-id = \"put_api_admin_keys_id\"\nparameters = {{ id = \"{victim}\" }}\n\n\
             [[operations]]\ninclude-operation-id = \"post_api_admin_keys_id_revoke\"\nparameters = {{ id = \"{victim}\" }}\n"
        ),
    )
    .expect("write config");
    let seed = std::env::var("GATEHOUSE_SCHEMATHESIS_SEED").unwrap_or_else(|_| "20261123".into());
    let examples = std::env::var("GATEHOUSE_SCHEMATHESIS_EXAMPLES").unwrap_or_else(|_| "10".into());
    let phases = std::env::var("GATEHOUSE_SCHEMATHESIS_PHASES").unwrap_or_else(|_| "examples,coverage,fuzzing".into());
    let mut cmd = tokio::process::Command::new("python3");
    cmd.args(["-m", "schemathesis.cli", "--config-file"])
        .arg(&config)
        .arg("run")
        .arg(s.url("/openapi.json"))
        .args(["-H", &format!("Authorization: Bearer {}", s.admin_key)])
        .args(["--phases", &phases, "--max-examples", &examples, "--seed", &seed])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance",
        ])
        // One worker: with threads, CPython 3.11's `ast.parse` (used by Hypothesis to describe
        // strategies) can fail with "AST constructor recursion depth mismatch", a flaky
        // generator error rather than a finding about the server.
        .args(["--request-timeout", "20", "--workers", "1", "--no-shrink", "--output-truncate", "false"])
        .current_dir(s.dir.path())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(300), cmd.output())
        .await
        .expect("schemathesis finished within 300 s")
        .expect("python3 runs (and `pip install -r tests/python/requirements.txt`)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis found problems:\n{stdout}\n{}\nserver log (tail):\n{}",
        String::from_utf8_lossy(&out.stderr),
        s.log().lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    );
    // Valid chats reached the upstream and were answered.
    assert!(mock.requests().iter().any(|r| r.model() == Some("gpt-4o-mini")), "no chat reached the mock upstream:\n{stdout}");
    // The admin key survived the run.
    assert_eq!(s.admin(Method::GET, "/api/admin/keys").send().await.expect("send").status(), 200);
}
