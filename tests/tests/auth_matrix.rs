//! The authentication matrix, generated from the route table: every operation
//! the running server lists in `GET /openapi.json` (built from the same route
//! registrations that serve requests) is called with no key, malformed keys, a
//! wrong key, a revoked admin key, a non-admin key, a tenant admin key (role
//! `tenant_admin`) and an admin key, and where the route has an owner, with
//! another tenant's key. A new route is in the
//! document, hence in this matrix, without anyone editing this file.

use std::collections::BTreeMap;

use gatehouse_tests::Server;
use reqwest::Method;
use serde_json::{Value, json};

/// Routes whose resource belongs to one key: path → how the owner case is set up.
/// Every non-admin route with a path parameter must be here (checked below).
const OWNED: &[&str] = &["/api/receipts/{bundle_id}"];

/// Admin routes a tenant admin key may call, for its own group: the matrix
/// calls them with the key's group as `{id}` (and checks below that another
/// group's is 403). Every other admin route is 403 for it, including the usage
/// routes: a tenant admin reads usage only by naming its own group
/// (`admin_api::a_tenant_admin_key_…` tests that).
const TENANT_ROUTES: &[&str] = &[
    "/api/admin/groups/{id}/policies",
    "/api/admin/groups/{id}/policies/{name}/versions",
    "/api/admin/groups/{id}/policies/{name}/shadow",
    "/api/admin/groups/{id}/policies/{name}/activate",
    "/api/admin/groups/{id}/policies/{name}/rollback",
];

/// Fill path parameters with ids that exist nowhere, so no call changes anything.
fn concrete(path: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').map_or(rest.len(), |c| open + c + 1);
        out.push_str("nonexistent-0000");
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

#[derive(Debug, Clone)]
struct Op {
    method: Method,
    path: String,
    public: bool,
    admin_only: bool,
    has_body: bool,
}

/// Every operation of the document.
fn operations(doc: &Value) -> Vec<Op> {
    let mut ops = Vec::new();
    let paths = doc["paths"].as_object().expect("paths in /openapi.json");
    for (path, item) in paths {
        for (m, op) in item.as_object().expect("path item") {
            let Ok(method) = m.to_uppercase().parse::<Method>() else { continue };
            if !op.is_object() || !["GET", "POST", "PUT", "DELETE", "PATCH"].contains(&method.as_str()) {
                continue;
            }
            let public = op["security"].as_array().is_some_and(Vec::is_empty);
            let admin_only = op["responses"].get("403").is_some()
                && op["tags"].as_array().into_iter().flatten().any(|t| t == "admin" || t == "webhooks");
            ops.push(Op { method, path: path.clone(), public, admin_only, has_body: op.get("requestBody").is_some() });
        }
    }
    ops
}

async fn call(s: &Server, op: &Op, path: &str, auth: Option<&str>) -> (u16, Value) {
    let mut req = s.client.request(op.method.clone(), s.url(path));
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    if op.has_body {
        req = req.json(&json!({}));
    }
    let resp = req.send().await.expect("send");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// A 401 in the route's error format.
fn is_401_in_format(path: &str, status: u16, body: &Value) -> bool {
    status == 401
        && if path == "/chat/completions" {
            body["error"] == "Invalid API key"
        } else if path.starts_with("/api/external/v1/") {
            body["error"]["code"] == "invalid_api_key"
        } else {
            body["error"]["code"] == "UNAUTHORIZED"
        }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_every_kind_of_caller_as_expected() {
    let s = Server::start();
    let admin = format!("Bearer {}", s.admin_key);
    let (_, plain_secret, _) = s.create_key(json!({"name": "plain"})).await;
    let plain = format!("Bearer {plain_secret}");
    let (_, other_secret, _) = s.create_key(json!({"name": "other tenant"})).await;
    let (_, revoked_secret, revoked_id) = s.create_key(json!({"name": "revoked admin", "admin": true})).await;
    let r = s.admin(Method::POST, &format!("/api/admin/keys/{revoked_id}/revoke")).send().await.expect("revoke");
    assert_eq!(r.status(), 200);
    let revoked = format!("Bearer {revoked_secret}");
    let wrong = "Bearer sk-wrongwrongwrongwrongwrongwrongwrongwrong0123".to_owned();
    let group: Value =
        s.admin(Method::POST, "/api/admin/groups").json(&json!({"name": "Acme"})).send().await.expect("group").json().await.expect("json");
    let group_id = group["data"]["id"].as_str().expect("group id");
    let (_, tenant_secret, _) = s.create_key(json!({"name": "acme admin", "tenantAdmin": true, "groupId": group_id})).await;
    let other: Value =
        s.admin(Method::POST, "/api/admin/groups").json(&json!({"name": "Beta"})).send().await.expect("group").json().await.expect("json");
    let other_group = other["data"]["id"].as_str().expect("group id");
    let tenant = format!("Bearer {tenant_secret}");

    let doc: Value = s.admin(Method::GET, "/openapi.json").send().await.expect("openapi").json().await.expect("json");
    let ops = operations(&doc);
    assert!(ops.len() >= 30, "only {} operations in /openapi.json", ops.len());
    for must in [
        "/chat/completions",
        "/api/admin/keys",
        "/api/admin/webhooks",
        "/api/admin/webhooks/{id}/deliveries/{deliveryId}/retry",
        "/health",
        "/openapi.json",
    ] {
        assert!(ops.iter().any(|o| o.path == must), "{must} missing from /openapi.json");
    }
    // Metrics name every tenant's traffic: admins (and the configured scrape key) only.
    assert!(ops.iter().any(|o| o.path == "/metrics" && o.admin_only), "/metrics is not admin-only");

    let mut failures = Vec::new();
    let mut calls = 0;
    let mut table: BTreeMap<String, Vec<u16>> = BTreeMap::new();
    for op in &ops {
        let path = concrete(&op.path);
        let name = format!("{} {}", op.method, op.path);
        let mut row = Vec::new();
        let cases: [(&str, Option<&str>); 8] = [
            ("no key", None),
            ("malformed (Basic)", Some("Basic YWRtaW46YWRtaW4=")),
            ("malformed (no sk-)", Some("Bearer not-a-gatehouse-key")),
            ("wrong key", Some(wrong.as_str())),
            ("revoked admin key", Some(revoked.as_str())),
            ("non-admin key", Some(plain.as_str())),
            ("tenant admin key", Some(tenant.as_str())),
            ("admin key", Some(admin.as_str())),
        ];
        let tenant_route = TENANT_ROUTES.contains(&op.path.as_str());
        let own_group_path = concrete(&op.path.replace("{id}", group_id));
        for (case, auth) in cases {
            let path = if case == "tenant admin key" && tenant_route { &own_group_path } else { &path };
            let (status, body) = call(&s, op, path, auth).await;
            calls += 1;
            row.push(status);
            let ok = match case {
                _ if status >= 500 => false,
                _ if op.public => status != 401 && status != 403,
                "non-admin key" if op.admin_only => status == 403,
                "tenant admin key" if op.admin_only && !TENANT_ROUTES.contains(&op.path.as_str()) => status == 403,
                "non-admin key" | "tenant admin key" | "admin key" => status != 401 && status != 403,
                _ => is_401_in_format(&op.path, status, &body),
            };
            if !ok {
                failures.push(format!("{name} with {case}: {status} {body}"));
            }
        }
        table.insert(name.clone(), row);
        // Its own group's routes only: another group's are 403.
        if tenant_route {
            let (status, body) = call(&s, op, &concrete(&op.path.replace("{id}", other_group)), Some(tenant.as_str())).await;
            calls += 1;
            if status != 403 {
                failures.push(format!("{name} for another group with tenant admin key: {status} {body}"));
            }
        }
        // A route with a parameter that any key may call must say whose resource it is.
        if !op.public && !op.admin_only && op.path.contains('{') && !OWNED.contains(&op.path.as_str()) {
            failures.push(format!("{} {}: a non-admin route with a path parameter has no owner case in OWNED", op.method, op.path));
        }
    }

    // Owner case: a receipt belongs to the key that made the request.
    let chat = s
        .client
        .post(s.url("/chat/completions"))
        .bearer_auth(&plain_secret)
        .json(&json!({"model": "echo/default", "index": "Zero-Knowledge", "prompt": "receipt please"}))
        .send()
        .await
        .expect("chat");
    assert_eq!(chat.status(), 200);
    let chat: Value = chat.json().await.expect("json");
    let bundle = chat["metadata"]["smltp"]["bundle_id"].as_str().expect("bundle id").to_owned();
    let receipt = format!("/api/receipts/{bundle}");
    for (who, key, expected) in [("owner", &plain_secret, 200), ("another tenant", &other_secret, 404), ("admin", &s.admin_key, 200)] {
        let st = s.client.get(s.url(&receipt)).bearer_auth(key).send().await.expect("receipt").status().as_u16();
        calls += 1;
        if st != expected {
            failures.push(format!("GET /api/receipts/{{bundle_id}} by {who}: {st}, expected {expected}"));
        }
    }

    println!("auth matrix: {} operations x 8 callers + 3 owner cases = {calls} calls", ops.len());
    println!("{:<55} none basic nosk wrong revok plain tenant admin", "operation");
    for (name, row) in &table {
        println!("{name:<55} {}", row.iter().map(|s| format!("{s:>5}")).collect::<Vec<_>>().join(""));
    }
    assert!(failures.is_empty(), "{} unexpected answers:\n{}", failures.len(), failures.join("\n"));
}
