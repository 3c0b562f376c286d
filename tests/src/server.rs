//! A real `gatehouse serve` child process.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The admin key every test server is bootstrapped with.
pub fn admin_key_for(tag: &str) -> String {
    // Long enough for the key checks; unique per server so keys never collide across data dirs.
    format!("sk-test-admin-{tag}-0123456789abcdefghijklmnopqrstuvwxyz")
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from(".."))
}

/// Path of the `gatehouse` binary, built once per test process (a no-op when
/// `cargo test --workspace` already built it). `GATEHOUSE_TEST_BINARY` names a
/// binary to use as it is (long runs such as the soak, on a busy build machine).
///
/// The build selects the whole workspace and one example so that cargo
/// resolves features exactly as `cargo test --workspace` does (dev-dependencies
/// included): a plain `cargo build -p gatehouse-cli` resolves them without, so its
/// binary is a different build of the host and half the dependency graph, and
/// the README's test command compiled the host twice.
pub fn binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("GATEHOUSE_TEST_BINARY") {
            return PathBuf::from(bin);
        }
        let root = workspace_root();
        let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        // With jemalloc, as production builds: the suite tests their allocator.
        cmd.current_dir(&root).args(["build", "--quiet", "--workspace", "--features", "gatehouse-cli/jemalloc"]);
        cmd.args(["--bin", "gatehouse", "--example", "compare"]);
        if profile == "release" {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo build for the gatehouse binary");
        assert!(status.success(), "building the gatehouse binary failed");
        let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
        let bin = target.join(profile).join("gatehouse");
        assert!(bin.is_file(), "no binary at {}", bin.display());
        bin
    })
}

/// Options of a test server.
#[derive(Debug, Clone, Default)]
pub struct ServerBuilder {
    extra_toml: String,
    env: Vec<(String, String)>,
    data_dir: Option<PathBuf>,
    /// Components (source file, name in the watched folder) put in place before start.
    plugins: Vec<(String, String)>,
}

impl ServerBuilder {
    /// TOML appended to the generated config (which sets `listen`, `data_dir`
    /// and generous limits unless this text has a `[limits` table).
    pub fn toml(mut self, extra: &str) -> Self {
        self.extra_toml.push_str(extra);
        self.extra_toml.push('\n');
        self
    }

    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    /// Reuse a data dir (to test persistence across servers).
    pub fn data_dir(mut self, dir: &Path) -> Self {
        self.data_dir = Some(dir.to_path_buf());
        self
    }

    /// Put a component into the watched folder (`<data dir>/plugins`, the
    /// default) before the server starts, as an operator would. The data dir
    /// stays the server's own temp dir, removed with it.
    pub fn plugin(mut self, src: &str, file: &str) -> Self {
        self.plugins.push((src.into(), file.into()));
        self
    }

    pub fn start(self) -> Server {
        Server::spawn(self)
    }
}

/// A running server; killed when dropped.
pub struct Server {
    child: Option<Child>,
    builder: ServerBuilder,
    /// Temp dir holding the config, the data dir (unless given) and the log.
    pub dir: tempfile::TempDir,
    pub data_dir: PathBuf,
    pub config_path: PathBuf,
    pub log_path: PathBuf,
    pub base_url: String,
    pub admin_key: String,
    pub client: reqwest::Client,
}

impl Server {
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// A server with the default config.
    pub fn start() -> Server {
        ServerBuilder::default().start()
    }

    fn spawn(builder: ServerBuilder) -> Server {
        let dir = tempfile::Builder::new().prefix("gatehouse-test-").tempdir().expect("temp dir");
        let data_dir = builder.data_dir.clone().unwrap_or_else(|| dir.path().join("data"));
        for (src, file) in &builder.plugins {
            crate::plugins::install(src, &data_dir.join("plugins"), file);
        }
        let tag = dir.path().file_name().map(|n| n.to_string_lossy().replace(|c: char| !c.is_ascii_alphanumeric(), "")).unwrap_or_default();
        let mut server = Server {
            child: None,
            config_path: dir.path().join("gatehouse.toml"),
            log_path: dir.path().join("server.log"),
            data_dir,
            dir,
            base_url: String::new(),
            admin_key: admin_key_for(&tag),
            client: reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("http client"),
            builder,
        };
        server.write_config();
        server.launch();
        server
    }

    fn write_config(&self) {
        let mut toml = format!("listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n", self.data_dir.display().to_string().replace('\\', "\\\\"));
        // The caller's text first, so its top-level keys come before any table.
        toml.push_str(&self.builder.extra_toml);
        if !self.builder.extra_toml.contains("[limits") {
            toml.push_str(
                "\n[limits.chat]\nper_minute = 100000\nper_hour = 1000000\nper_day = 1000000\nper_month = 10000000\n\
                 [limits.admin_read]\nper_minute = 100000\nper_hour = 1000000\nper_day = 1000000\nper_month = 10000000\n",
            );
        }
        std::fs::write(&self.config_path, toml).expect("write config");
    }

    fn launch(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log_path).expect("log file");
        let mut cmd = Command::new(binary());
        cmd.arg("serve")
            .arg("--config")
            .arg(&self.config_path)
            .current_dir(self.dir.path())
            .env("GATEHOUSE_BOOTSTRAP_ADMIN_KEY", &self.admin_key)
            .env("RUST_LOG", std::env::var("GATEHOUSE_TEST_LOG").unwrap_or_else(|_| "info".into()))
            .env_remove("GATEHOUSE_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        for (k, v) in &self.builder.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn gatehouse");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                if let Some(url) = line.trim().strip_prefix("gatehouse listening on ") {
                    let _ = tx.send(url.to_owned());
                }
                line.clear();
            }
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(url) => self.base_url = url,
            Err(_) => {
                let _ = child.kill();
                panic!("gatehouse did not start; log:\n{}", self.log());
            }
        }
        self.child = Some(child);
    }

    /// Full URL of a path.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url, path)
    }

    /// The server's log so far (stderr).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL: no shutdown, no flush.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then wait for a clean exit; returns whether it exited successfully.
    pub fn terminate(&mut self) -> bool {
        let Some(mut c) = self.child.take() else { return false };
        let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = c.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        false
    }

    /// Start again on the same data dir and config (a new port).
    pub fn restart(&mut self) {
        self.kill9();
        self.launch();
    }

    /// A request with the admin key.
    pub fn admin(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, self.url(path)).bearer_auth(&self.admin_key)
    }

    /// `POST /chat/completions` with `key`: the status and the JSON answer.
    pub async fn chat_as(&self, key: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
        let r = self.client.post(self.url("/chat/completions")).bearer_auth(key).json(body).send().await.expect("send the chat request");
        let status = r.status().as_u16();
        (status, r.json().await.expect("a JSON answer"))
    }

    /// How many audit records `/audit-logs?{query}` matches (read with the admin key).
    pub async fn audit_total(&self, query: &str) -> u64 {
        let v: serde_json::Value = self
            .admin(reqwest::Method::GET, &format!("/audit-logs?{query}"))
            .send()
            .await
            .expect("read the audit log")
            .json()
            .await
            .expect("a JSON answer");
        v["data"]["pagination"]["total"].as_u64().unwrap_or_else(|| panic!("no total in {v}"))
    }

    /// Create a user and a key with the given options (camelCase, as the admin API takes them).
    /// Returns (user id, key secret, key id).
    pub async fn create_key(&self, options: serde_json::Value) -> (String, String, String) {
        // Emails are unique per server: one address per user this helper creates.
        static USERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = USERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let user: serde_json::Value = self
            .admin(reqwest::Method::POST, "/api/admin/users")
            .json(&serde_json::json!({"name": "test user", "email": format!("user{n}@example.com")}))
            .send()
            .await
            .expect("create user")
            .json()
            .await
            .expect("user json");
        let user_id = user["data"]["id"].as_str().expect("user id").to_owned();
        let mut body = options;
        body["userId"] = serde_json::Value::String(user_id.clone());
        let resp = self.admin(reqwest::Method::POST, "/api/admin/keys").json(&body).send().await.expect("create key");
        assert_eq!(resp.status(), 201, "create key");
        let key: serde_json::Value = resp.json().await.expect("key json");
        (user_id, key["data"]["key"].as_str().expect("secret").to_owned(), key["data"]["apiKey"]["id"].as_str().expect("key id").to_owned())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}
