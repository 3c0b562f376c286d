//! Foundation: health, authentication, admin gating, persistence, crash safety,
//! config errors, graceful shutdown.

use gatehouse_tests::Server;
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn health_is_public_and_reports_storage() {
    let s = Server::start();
    let resp = s.client.get(s.url("/health")).send().await.expect("health");
    assert_eq!(resp.status(), 200);
    let rid = resp.headers().get("x-request-id").expect("request id header").to_str().expect("ascii").to_owned();
    assert!(rid.starts_with("req-"), "{rid}");
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["status"], "ok");
    assert_eq!(body["storage"]["ok"], true);
    assert!(body["version"].is_string());
    assert!(body["plugins"]["loaded"].is_u64());
}

#[tokio::test]
async fn missing_wrong_malformed_and_revoked_keys_get_401() {
    let s = Server::start();
    // Nested format on admin routes.
    for auth in [None, Some("Bearer sk-wrong-key-0123456789012345678901234567"), Some("Basic abc"), Some("Bearer nope")] {
        let mut req = s.client.get(s.url("/api/admin/users"));
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.expect("send");
        assert_eq!(resp.status(), 401, "{auth:?}");
        let body: Value = resp.json().await.expect("json");
        assert_eq!(body["success"], false);
        assert_eq!(body["error"]["code"], "UNAUTHORIZED", "{auth:?}");
    }
    // Flat format on the chat route.
    let resp = s.client.post(s.url("/chat/completions")).json(&json!({})).send().await.expect("send");
    assert_eq!(resp.status(), 401);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["error"], "Invalid API key");
    assert!(body["request_id"].as_str().expect("request id").starts_with("req-"));

    // Revoked key.
    let (_, secret, key_id) = s.create_key(json!({"admin": true})).await;
    let ok = s.client.get(s.url("/api/admin/users")).bearer_auth(&secret).send().await.expect("send");
    assert_eq!(ok.status(), 200);
    let revoke = s.admin(Method::POST, &format!("/api/admin/keys/{key_id}/revoke")).send().await.expect("revoke");
    assert_eq!(revoke.status(), 200);
    let resp = s.client.get(s.url("/api/admin/users")).bearer_auth(&secret).send().await.expect("send");
    assert_eq!(resp.status(), 401);
    let body: Value = resp.json().await.expect("json");
    assert!(body["error"]["message"].as_str().expect("msg").contains("revoked"));
}

#[tokio::test]
async fn non_admin_key_gets_403_on_admin_routes() {
    let s = Server::start();
    let (_, secret, _) = s.create_key(json!({"name": "plain"})).await;
    for (method, path) in [
        (Method::GET, "/api/admin/users"),
        (Method::POST, "/api/admin/users"),
        (Method::GET, "/api/admin/keys"),
        (Method::POST, "/api/admin/groups"),
    ] {
        let resp =
            s.client.request(method.clone(), s.url(path)).bearer_auth(&secret).json(&json!({"name": "x"})).send().await.expect("send");
        assert_eq!(resp.status(), 403, "{method} {path}");
        let body: Value = resp.json().await.expect("json");
        assert_eq!(body["error"]["code"], "INSUFFICIENT_PERMISSIONS");
    }
}

#[tokio::test]
async fn key_secret_is_shown_once_and_never_stored_in_plain_text() {
    let mut s = Server::start();
    let (_, secret, key_id) = s.create_key(json!({"name": "once"})).await;
    let listed: Value = s.admin(Method::GET, "/api/admin/keys").send().await.expect("list").json().await.expect("json");
    let text = listed.to_string();
    assert!(!text.contains(&secret), "listing must not show the secret");
    assert!(text.contains(&key_id));
    let one: Value = s.admin(Method::GET, &format!("/api/admin/keys/{key_id}")).send().await.expect("get").json().await.expect("json");
    assert!(one["data"].get("key").is_none());
    assert!(!one.to_string().contains(&secret[3..]));

    assert!(s.terminate(), "clean shutdown");
    let db = std::fs::read(s.data_dir.join("gatehouse.redb")).expect("redb file");
    let needle = &secret.as_bytes()[3..];
    assert!(!db.windows(needle.len()).any(|w| w == needle), "key secret found in the redb file");
    let admin_needle = &s.admin_key.as_bytes()[3..];
    assert!(!db.windows(admin_needle.len()).any(|w| w == admin_needle), "bootstrap key found in the redb file");
    assert!(!s.log().contains(&secret[3..]), "key secret found in the log");
}

#[tokio::test]
async fn keys_survive_a_restart() {
    let mut s = Server::start();
    let (_, secret, _) = s.create_key(json!({"admin": true})).await;
    assert!(s.terminate());
    s.restart();
    let resp = s.client.get(s.url("/api/admin/users")).bearer_auth(&secret).send().await.expect("send");
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn acknowledged_writes_survive_sigkill() {
    let mut s = Server::start();
    let (user_id, secret, _) = s.create_key(json!({"admin": true})).await;
    // Kill right after the acknowledgement: no graceful shutdown, no flush.
    s.kill9();
    s.restart();
    let users: Value = s.admin(Method::GET, "/api/admin/users").send().await.expect("list").json().await.expect("json");
    assert!(users.to_string().contains(&user_id), "user lost after SIGKILL");
    let resp = s.client.get(s.url("/api/admin/users")).bearer_auth(&secret).send().await.expect("send");
    assert_eq!(resp.status(), 200, "key lost after SIGKILL");
}

#[tokio::test]
async fn groups_and_memberships() {
    let s = Server::start();
    let (user_id, _, _) = s.create_key(json!({})).await;
    let g: Value = s
        .admin(Method::POST, "/api/admin/groups")
        .json(&json!({"name": "Research", "description": "the lab"}))
        .send()
        .await
        .expect("create group")
        .json()
        .await
        .expect("json");
    let gid = g["data"]["id"].as_str().expect("group id");
    assert_eq!(g["data"]["status"], "Active");
    let add =
        s.admin(Method::POST, &format!("/api/admin/groups/{gid}/members")).json(&json!({"userId": user_id})).send().await.expect("add");
    assert_eq!(add.status(), 201);
    let again = s
        .admin(Method::POST, &format!("/api/admin/groups/{gid}/members"))
        .json(&json!({"userId": user_id}))
        .send()
        .await
        .expect("add again");
    assert_eq!(again.status(), 409);
    let missing =
        s.admin(Method::POST, "/api/admin/groups/grp_nope/members").json(&json!({"userId": user_id})).send().await.expect("add to missing");
    assert_eq!(missing.status(), 404);
    let upd = s.admin(Method::PUT, &format!("/api/admin/groups/{gid}")).json(&json!({"status": "Inactive"})).send().await.expect("update");
    assert_eq!(upd.status(), 200);
    let body: Value = upd.json().await.expect("json");
    assert_eq!(body["data"]["status"], "Inactive");
    let bad =
        s.admin(Method::PUT, &format!("/api/admin/groups/{gid}")).json(&json!({"status": "Sleeping"})).send().await.expect("bad update");
    assert_eq!(bad.status(), 400);
    let rm = s.admin(Method::DELETE, &format!("/api/admin/groups/{gid}/members/{user_id}")).send().await.expect("remove");
    assert_eq!(rm.status(), 200);
}

#[tokio::test]
async fn bad_bodies_get_validation_errors() {
    let s = Server::start();
    for body in ["{not json", "{\"name\": 5}", "{\"name\": \"\"}", "{\"name\":\"a\",\"email\":\"no-at\"}"] {
        let resp =
            s.admin(Method::POST, "/api/admin/users").header("content-type", "application/json").body(body).send().await.expect("send");
        assert_eq!(resp.status(), 400, "{body}");
        let v: Value = resp.json().await.expect("json");
        assert_eq!(v["error"]["code"], "VALIDATION_ERROR", "{body}");
    }
    let resp = s.admin(Method::POST, "/api/admin/keys").json(&json!({"userId": "usr_missing"})).send().await.expect("send");
    assert_eq!(resp.status(), 400);
}

#[tokio::test]
async fn unknown_routes_need_a_key_then_404() {
    let s = Server::start();
    let anon = s.client.get(s.url("/api/admin/nothing-here")).send().await.expect("send");
    assert_eq!(anon.status(), 401);
    let authed = s.admin(Method::GET, "/api/admin/nothing-here").send().await.expect("send");
    assert_eq!(authed.status(), 404);
    let v: Value = authed.json().await.expect("json");
    assert_eq!(v["error"]["code"], "NOT_FOUND");
}

#[tokio::test]
async fn sigterm_shuts_down_cleanly_and_audit_chain_verifies() {
    let mut s = Server::start();
    s.create_key(json!({})).await;
    let at = std::time::Instant::now();
    assert!(s.terminate(), "exit status 0 after SIGTERM");
    // Nothing in flight: the background loops (overview sampler, knowledge-base
    // merge) stop at the signal and are joined well inside a second or two.
    assert!(at.elapsed() < std::time::Duration::from_secs(5), "shutdown took {:?}", at.elapsed());
    assert!(!s.log().contains("background loops still running"), "a loop ignored the stop signal:\n{}", s.log());
    let out = std::process::Command::new(gatehouse_tests::server::binary())
        .args(["audit", "verify", "--config"])
        .arg(&s.config_path)
        .output()
        .expect("run audit verify");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("\"ok\": true"), "{stdout}");
}

#[tokio::test]
async fn audit_chain_verifies_over_http() {
    let s = Server::start();
    s.create_key(json!({})).await;
    let v: Value = s.admin(Method::GET, "/api/admin/audit/verify").send().await.expect("send").json().await.expect("json");
    assert_eq!(v["data"]["ok"], true, "{v}");
    assert!(v["data"]["records"].as_u64().expect("n") >= 4);
}

#[test]
fn a_bad_config_stops_the_start_naming_the_key() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "[limits.chat]\nper_minute = \"many\"\n").expect("write");
    let out = std::process::Command::new(gatehouse_tests::server::binary()).args(["serve", "--config"]).arg(&cfg).output().expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml"), "{err}");
    assert!(err.contains("per_minute"), "{err}");
}

#[test]
fn offline_cli_creates_an_admin_key_that_the_server_accepts() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("g.toml");
    std::fs::write(&cfg, format!("listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n", dir.path().join("data").display())).expect("write");
    let out = std::process::Command::new(gatehouse_tests::server::binary())
        .args(["keys", "create-admin", "--config"])
        .arg(&cfg)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let secret = stdout.split_whitespace().find(|w| w.starts_with("sk-")).expect("printed key").to_owned();
    let s = Server::builder().data_dir(&dir.path().join("data")).start();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let status = rt.block_on(async { s.client.get(s.url("/api/admin/users")).bearer_auth(&secret).send().await.expect("send").status() });
    assert_eq!(status, 200);
}
