//! A small WebDriver client (the W3C protocol over HTTP, with reqwest) for the
//! console's browser tests: Debian's headless Chromium driven by its
//! `chromedriver`. Only what the tests use: navigate, find, click, type,
//! read text, run a script, take a screenshot.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// The W3C key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A running `chromedriver`, killed on drop.
pub struct Driver {
    child: Child,
    pub url: String,
}

impl Driver {
    /// Start `chromedriver` on a free port and wait until it answers.
    pub fn start() -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian: apt-get install chromium chromium-driver; .ci/run installs them)");
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver { child, url }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One browser session.
pub struct Browser {
    http: reqwest::Client,
    base: String,
}

impl Browser {
    /// A headless Chromium with a laptop-sized window.
    pub async fn open(driver: &Driver) -> Browser {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().expect("client");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": ["--headless", "--no-sandbox", "--disable-background-networking", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1366,900"],
            },
        }}});
        let v: Value =
            http.post(format!("{}/session", driver.url)).json(&caps).send().await.expect("new session").json().await.expect("json");
        let id = v["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {v}")).to_owned();
        Browser { http, base: format!("{}/session/{id}", driver.url) }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let v: Value = req.send().await.expect("webdriver call").json().await.expect("webdriver json");
        v["value"].clone()
    }

    async fn checked(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let v = self.call(method, path, body).await;
        if let Some(err) = v.get("error") {
            panic!("webdriver {path}: {err}: {}", v["message"]);
        }
        v
    }

    pub async fn goto(&self, url: &str) {
        self.checked(reqwest::Method::POST, "/url", Some(json!({"url": url}))).await;
    }

    /// The first element matching `css`, waiting up to 15 s for it.
    pub async fn find(&self, css: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let v = self.call(reqwest::Method::POST, "/element", Some(json!({"using": "css selector", "value": css}))).await;
            if let Some(id) = v[ELEMENT].as_str() {
                return id.to_owned();
            }
            assert!(Instant::now() < deadline, "no element {css}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn click(&self, css: &str) {
        let id = self.find(css).await;
        self.checked(reqwest::Method::POST, &format!("/element/{id}/click"), Some(json!({}))).await;
    }

    /// Clear a field and type `text` into it.
    pub async fn fill(&self, css: &str, text: &str) {
        let id = self.find(css).await;
        self.checked(reqwest::Method::POST, &format!("/element/{id}/clear"), Some(json!({}))).await;
        self.checked(reqwest::Method::POST, &format!("/element/{id}/value"), Some(json!({"text": text}))).await;
    }

    pub async fn text(&self, css: &str) -> String {
        let id = self.find(css).await;
        self.checked(reqwest::Method::GET, &format!("/element/{id}/text"), None).await.as_str().unwrap_or_default().to_owned()
    }

    /// Wait (up to 20 s) until the text of `css` contains `needle`; returns the text.
    pub async fn wait_text(&self, css: &str, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let v = self.call(reqwest::Method::POST, "/element", Some(json!({"using": "css selector", "value": css}))).await;
            if let Some(id) = v[ELEMENT].as_str() {
                let t = self.call(reqwest::Method::GET, &format!("/element/{id}/text"), None).await;
                let t = t.as_str().unwrap_or_default();
                if t.contains(needle) {
                    return t.to_owned();
                }
                assert!(Instant::now() < deadline, "{css} never showed {needle:?}; it shows {t:?}");
            } else {
                assert!(Instant::now() < deadline, "no element {css} (waiting for {needle:?})");
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }

    /// Run a script (its `return` value comes back).
    pub async fn script(&self, script: &str, args: Value) -> Value {
        self.checked(reqwest::Method::POST, "/execute/sync", Some(json!({"script": script, "args": args}))).await
    }

    /// Run a script that calls its last argument with the result.
    pub async fn script_async(&self, script: &str, args: Value) -> Value {
        self.checked(reqwest::Method::POST, "/execute/async", Some(json!({"script": script, "args": args}))).await
    }

    /// Save a PNG of the viewport.
    pub async fn screenshot(&self, path: &Path) {
        let v = self.checked(reqwest::Method::GET, "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap_or_default()).expect("base64 screenshot");
        std::fs::write(path, png).expect("write screenshot");
    }

    pub async fn close(self) {
        let _ = self.http.delete(&self.base).send().await;
    }
}
