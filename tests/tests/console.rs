//! The admin console in a real browser: Debian's headless Chromium, driven
//! through chromedriver (`gatehouse_tests::webdriver`), against a real server.
//! The flows an operator runs in the first hour, a screenshot of each page
//! (under the test's temp dir; `CONSOLE_SCREENSHOTS=<dir>` keeps copies), and
//! axe-core (vendored in `tests/vendor/axe-core`) on each page: no serious or
//! critical violation.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use gatehouse_tests::Server;
use gatehouse_tests::webdriver::{Browser, Driver};
use reqwest::Method;
use serde_json::{Value, json};

const AXE: &str = include_str!("../vendor/axe-core/axe.min.js");

/// Every admin call the console's pages make.
const CONSOLE_ADMIN_CALLS: &[(&str, &str)] = &[
    ("GET", "/api/admin/me"),
    ("GET", "/api/admin/overview"),
    ("GET", "/api/admin/audit/verify"),
    ("GET", "/api/admin/users"),
    ("POST", "/api/admin/users"),
    ("GET", "/api/admin/keys"),
    ("POST", "/api/admin/keys"),
    ("GET", "/api/admin/groups"),
    ("POST", "/api/admin/groups"),
    ("GET", "/api/admin/usage"),
    ("GET", "/api/admin/usage/series"),
    ("GET", "/audit-logs"),
    ("GET", "/api/admin/webhooks"),
    ("POST", "/api/admin/webhooks"),
    ("POST", "/api/admin/webhooks/wh_none/deliveries/none/retry"),
    ("GET", "/api/admin/plugins"),
    ("GET", "/api/admin/indexes"),
    ("POST", "/api/admin/indexes"),
];

/// Click the button whose text is exactly `text`.
async fn click_button(b: &Browser, text: &str) {
    let found = b
        .script(
            "const b = [...document.querySelectorAll('button')].find(x => x.textContent.trim() === arguments[0]);
             if (b) { b.click(); return true; } return false;",
            json!([text]),
        )
        .await;
    assert_eq!(found, true, "no button {text:?}");
}

/// Choose `value` in the select `css` (and tell the page it changed).
async fn choose(b: &Browser, css: &str, value: &str) {
    let ok = b
        .script(
            "const s = document.querySelector(arguments[0]); if (!s) return false; s.value = arguments[1];
             s.dispatchEvent(new Event('change')); return s.value === arguments[1];",
            json!([css, value]),
        )
        .await;
    assert_eq!(ok, true, "{css} has no option {value}");
}

/// Open a page of the console and wait for its heading.
async fn open(b: &Browser, s: &Server, page: &str, heading: &str) {
    b.goto(&s.url(&format!("/console/#/{page}"))).await;
    b.wait_text("#page h1", heading).await;
}

struct Shots {
    dir: PathBuf,
    keep: Option<PathBuf>,
}

impl Shots {
    /// Screenshot the page and run axe-core on it.
    async fn page(&self, b: &Browser, name: &str) {
        let path = self.dir.join(format!("{name}.png"));
        b.screenshot(&path).await;
        if let Some(keep) = &self.keep {
            std::fs::create_dir_all(keep).expect("screenshot dir");
            std::fs::copy(&path, keep.join(format!("{name}.png"))).expect("copy screenshot");
        }
        b.script(&format!("{AXE}\n;window.__axe = axe; return true;"), json!([])).await;
        let v = b
            .script_async(
                "const done = arguments[arguments.length - 1];
                 window.__axe.run(document)
                   .then(r => done({passes: r.passes.length, violations: r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))}))
                   .catch(e => done({passes: 0, violations: [{id: 'axe-failed', impact: 'critical', help: String(e)}]}));",
                json!([]),
            )
            .await;
        assert!(v["passes"].as_u64().is_some_and(|n| n > 10), "axe-core checked the {name} page: {v}");
        let bad: Vec<&Value> = v["violations"]
            .as_array()
            .expect("violations")
            .iter()
            .filter(|x| matches!(x["impact"].as_str(), Some("serious" | "critical")))
            .collect();
        assert!(bad.is_empty(), "axe-core on the {name} page: {bad:#?}");
    }
}

/// A webhook receiver: answers 200, or 500 while `failing` is set, and
/// keeps the delivery id of every request it got.
struct Hook {
    url: String,
    got: Arc<Mutex<Vec<String>>>,
    failing: Arc<AtomicBool>,
}

async fn receiver() -> Hook {
    let got: Arc<Mutex<Vec<String>>> = Arc::default();
    let failing = Arc::new(AtomicBool::new(false));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind receiver");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let (ids, fail) = (got.clone(), failing.clone());
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let (ids, fail) = (ids.clone(), fail.clone());
        async move {
            let id = headers.get("x-gatehouse-delivery").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
            ids.lock().expect("lock").push(id);
            if fail.load(Ordering::SeqCst) { axum::http::StatusCode::INTERNAL_SERVER_ERROR } else { axum::http::StatusCode::OK }
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    Hook { url, got, failing }
}

/// Click "Refresh deliveries" until the first row of the deliveries table says `status`.
async fn wait_first_delivery(b: &Browser, status: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let row =
            b.script("const r = document.querySelector('#deliveries-table tbody tr'); return r ? r.textContent : ''", json!([])).await;
        let row = row.as_str().unwrap_or_default().to_owned();
        if row.contains(status) {
            return row;
        }
        assert!(std::time::Instant::now() < deadline, "the newest delivery never became {status}: {row}");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        click_button(b, "Refresh deliveries").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_runs_the_first_hour_in_the_console() {
    // Fast webhook retries, so a failed delivery is reached within the test.
    let s = Server::builder()
        .env("WEBHOOKS_ALLOW_PRIVATE", "true")
        .toml("[webhooks]\nretry_delays_ms = [0, 100]\npoll_interval_ms = 50")
        .start();
    let shots = Shots { dir: s.dir.path().join("screenshots"), keep: std::env::var_os("CONSOLE_SCREENSHOTS").map(PathBuf::from) };
    std::fs::create_dir_all(&shots.dir).expect("screenshot dir");
    let (_, plain, _) = s.create_key(json!({"name": "not an admin"})).await;
    let driver = Driver::start();
    let b = Browser::open(&driver).await;

    // A non-admin key is refused at sign-in.
    b.goto(&s.url("/console")).await;
    b.fill("#api-key", &plain).await;
    b.click("#sign-in-form button[type=submit]").await;
    b.wait_text("#status", "admin keys only").await;
    assert_eq!(b.script("return document.getElementById('nav').hidden", json!([])).await, true);
    assert_eq!(b.script("return sessionStorage.length", json!([])).await, 0, "a refused key is not kept");
    shots.page(&b, "sign-in").await;

    // Sign in with the admin key.
    b.fill("#api-key", &s.admin_key).await;
    b.click("#sign-in-form button[type=submit]").await;
    b.wait_text("#who", "Signed in").await;
    b.wait_text("#page h1", "Overview").await;
    let href = b.script("return location.href", json!([])).await;
    assert!(!href.as_str().unwrap_or_default().contains(&s.admin_key), "the key is never in a URL: {href}");
    shots.page(&b, "overview-empty").await;

    // Create a user and a key for them.
    open(&b, &s, "users", "Users").await;
    b.fill("#user-name", "Ada Console").await;
    b.fill("#user-email", "ada.console@example.com").await;
    b.click("#create-user button[type=submit]").await;
    b.wait_text("#users-table", "Ada Console").await;
    shots.page(&b, "users").await;
    let users: Value = s.admin(Method::GET, "/api/admin/users").send().await.expect("users").json().await.expect("json");
    let ada = users["data"].as_array().expect("users").iter().find(|u| u["name"] == "Ada Console").expect("Ada")["id"]
        .as_str()
        .expect("id")
        .to_owned();

    open(&b, &s, "keys", "Keys").await;
    choose(&b, "#key-user", &ada).await;
    b.fill("#key-name", "ada-key").await;
    b.click("#create-key button[type=submit]").await;
    let secret = b.wait_text("#new-key-secret", "sk-").await.trim().to_owned();

    // Restrict it: one model family and a per-minute limit.
    click_button(&b, "Edit ada-key").await;
    b.fill("#edit-models", "echo/default").await;
    b.fill("#edit-perMinute", "50").await;
    b.click("#edit-key button[type=submit]").await;
    b.wait_text("#keys-table", "perMinute 50").await;
    shots.page(&b, "keys").await;
    let keys: Value = s.admin(Method::GET, "/api/admin/keys").send().await.expect("keys").json().await.expect("json");
    let key = keys["data"].as_array().expect("keys").iter().find(|k| k["name"] == "ada-key").expect("ada-key").clone();
    assert_eq!(key["allowedModels"], json!(["echo/default"]));
    assert_eq!(key["limits"]["perMinute"], 50);

    // Use it through the API; the restriction holds.
    let (st, v) =
        s.chat_as(&secret, &json!({"index": "Zero-Knowledge", "model": "echo/default", "prompt": "hello from the console test"})).await;
    assert_eq!(st, 200, "{v}");
    let request_id = v["id"].as_str().expect("request id").to_owned();
    let (st, _) = s.chat_as(&secret, &json!({"index": "Zero-Knowledge", "model": "echo/other", "prompt": "not allowed"})).await;
    assert_eq!(st, 403, "a model outside the restriction");

    // The request shows in the overview and in usage.
    open(&b, &s, "overview", "Overview").await;
    let n: u64 = b.text("#kpi-requests .v").await.trim().parse().expect("a count");
    assert!(n >= 2, "the overview counts the chat requests: {n}");
    b.wait_text("#kpi-chain", "verified").await;
    shots.page(&b, "overview").await;

    open(&b, &s, "usage", "Usage").await;
    choose(&b, "#usage-user", &ada).await;
    b.click("#usage-filters button[type=submit]").await;
    b.wait_text("#usage-rows", &request_id).await;
    assert_eq!(b.text("#usage-requests .v").await.trim(), "1");
    let svg = b.script("return document.querySelectorAll('#usage-body svg.chart path').length", json!([])).await;
    assert!(svg.as_u64().is_some_and(|n| n >= 1), "a drawn series: {svg}");
    shots.page(&b, "usage").await;

    // Revoke it; its next chat is refused.
    open(&b, &s, "keys", "Keys").await;
    // The page asks before revoking; answer yes.
    b.script("window.confirm = () => true; return true;", json!([])).await;
    click_button(&b, "Revoke ada-key").await;
    b.wait_text("#keys-table", "revoked").await;
    let (st, _) = s.chat_as(&secret, &json!({"index": "Zero-Knowledge", "model": "echo/default", "prompt": "after revoke"})).await;
    assert_eq!(st, 401, "a revoked key");

    // The audit log: filtered, a record's detail, the chain verified.
    open(&b, &s, "audit", "Audit log").await;
    b.wait_text("#audit-chain", "Chain verified").await;
    b.fill("#audit-type", "api_key_management").await;
    b.click("#audit-filters button[type=submit]").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let types = b
            .script(
                "return [...document.querySelectorAll('#audit-table tbody tr')].map(r => r.cells[1] && r.cells[1].textContent)",
                json!([]),
            )
            .await;
        let types: Vec<String> = types.as_array().expect("rows").iter().filter_map(|t| t.as_str().map(str::to_owned)).collect();
        if types.len() >= 3 && types.iter().all(|t| t == "api_key_management") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the filter never applied: {types:?}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    click_button(&b, "Show").await;
    b.wait_text("#audit-detail", "\"hash\"").await;
    shots.page(&b, "audit").await;

    // A webhook: create it, send a test, see the delivery and its attempts.
    let hook = receiver().await;
    open(&b, &s, "webhooks", "Webhooks").await;
    b.fill("#webhook-url", &hook.url).await;
    b.click("#create-webhook button[type=submit]").await;
    b.wait_text("#webhook-secret", "whsec_").await;
    click_button(&b, "Send test").await;
    let row = wait_first_delivery(&b, "succeeded").await;
    assert!(row.contains("HTTP 200"), "{row}");
    let attempts = b.script("return document.querySelector('#deliveries-table tbody tr').cells[2].textContent", json!([])).await;
    assert_eq!(attempts, "1");
    assert_eq!(hook.got.lock().expect("lock").len(), 1, "the receiver got it");
    assert_eq!(b.script("return document.querySelectorAll('.retry-delivery').length", json!([])).await, 0, "no retry for a success");

    // A delivery the receiver refuses until told otherwise: failed, then retried from the page.
    hook.failing.store(true, Ordering::SeqCst);
    click_button(&b, "Send test").await;
    let row = wait_first_delivery(&b, "failed").await;
    assert!(row.contains("HTTP 500"), "{row}");
    let failed_id =
        b.script("return document.querySelector('#deliveries-table tbody tr .retry-delivery').dataset.delivery", json!([])).await;
    let failed_id = failed_id.as_str().expect("a Retry button on the failed delivery").to_owned();
    shots.page(&b, "webhooks-failed").await;
    hook.failing.store(false, Ordering::SeqCst);
    b.click("#deliveries-table tbody tr .retry-delivery").await;
    b.wait_text("#status", "queued again").await;
    wait_first_delivery(&b, "succeeded").await;
    let cells = b.script("return [...document.querySelector('#deliveries-table tbody tr').cells].map(c => c.textContent)", json!([])).await;
    assert_eq!((&cells[2], &cells[3]), (&json!("1"), &json!("1")), "one attempt since the retry, one retry: {cells}");
    let got = hook.got.lock().expect("lock").clone();
    assert_eq!(got.len(), 4, "one success, two failed attempts, one retried: {got:?}");
    assert!(got[1..].iter().all(|id| *id == failed_id), "the retry carries the same delivery id: {got:?}");
    shots.page(&b, "webhooks").await;

    // The playground blocks an attack.
    open(&b, &s, "playground", "Policy playground").await;
    b.click("#playground button[type=submit]").await;
    b.wait_text("#playground-outcome", "Blocked").await;
    b.wait_text("#verdicts-table", "block").await;
    shots.page(&b, "playground").await;

    open(&b, &s, "groups", "Groups").await;
    b.fill("#group-name", "Console tenant").await;
    b.click("#create-group button[type=submit]").await;
    b.wait_text("#groups-table", "Console tenant").await;
    shots.page(&b, "groups").await;

    open(&b, &s, "plugins", "Plugins and knowledge bases").await;
    b.wait_text("#plugins-table", "provider").await;
    b.wait_text("#indexes-table", "gatehouse-docs").await;
    shots.page(&b, "plugins").await;

    // Sign out forgets the key.
    b.click("#sign-out").await;
    b.wait_text("#sign-in", "Sign in").await;
    assert_eq!(b.script("return sessionStorage.length", json!([])).await, 0);
    b.close().await;
    assert!(!s.log().contains(&s.admin_key), "the admin key is never logged");
}

#[tokio::test]
async fn the_console_is_served_with_a_strict_policy_and_refuses_every_call_to_a_non_admin_key() {
    let s = Server::start();
    for path in ["/console", "/console/", "/console/app.js", "/console/console.css"] {
        let r = s.client.get(s.url(path)).send().await.expect("page");
        assert_eq!(r.status(), 200, "{path}: the pages hold no data and need no key");
        let csp = r.headers().get("content-security-policy").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        assert!(csp.contains("default-src 'self'") && csp.contains("script-src 'self'") && !csp.contains("unsafe"), "{path}: {csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(r.headers().get("x-content-type-options").and_then(|v| v.to_str().ok()), Some("nosniff"));
    }
    assert_eq!(s.client.get(s.url("/console/nope.js")).send().await.expect("missing").status(), 404);

    let (_, plain, _) = s.create_key(json!({"name": "plain"})).await;
    for (method, path) in CONSOLE_ADMIN_CALLS {
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        let r = s.client.request(method.clone(), s.url(path)).bearer_auth(&plain).json(&json!({})).send().await.expect("call");
        assert_eq!(r.status(), 403, "{method} {path} with a non-admin key");
        let r = s.client.request(method.clone(), s.url(path)).json(&json!({})).send().await.expect("call");
        assert_eq!(r.status(), 401, "{method} {path} without a key");
    }
}
