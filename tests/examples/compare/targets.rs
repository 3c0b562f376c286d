//! Starting the systems under test, each pinned to core 1 (`taskset -c 1`):
//! nginx as a plain reverse proxy, LiteLLM's proxy, and Gatehouse with its
//! default pipeline; plus the mock itself as the direct baseline.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::load::{Call, StreamKind};

/// A running system under test.
pub struct Target {
    pub name: String,
    /// Root of the process tree to measure (`None`: not ours to measure).
    pub pid: Option<u32>,
    /// When a row is served by several process trees (a fleet's hosts, its
    /// load balancer, its database): each by name, `pid`'s included. The
    /// row's CPU and memory are their sum, and the CPU is also shown per part.
    pub parts: Vec<(String, u32)>,
    pub json: Call,
    pub stream: Call,
    pub kind: StreamKind,
    /// Spawn to first healthy answer.
    pub startup: Option<Duration>,
    /// The target's own log, if it writes one (shown when a check fails).
    pub log: Option<PathBuf>,
    child: Option<Child>,
    /// Processes started with the target and stopped with it.
    others: Vec<Child>,
    /// What must outlive the target's processes: the database, temp dirs.
    _keep: Vec<Box<dyn std::any::Any>>,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Target {
    fn drop(&mut self) {
        for c in self.others.iter_mut().chain(self.child.as_mut()) {
            let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
        }
        for mut c in std::mem::take(&mut self.others) {
            stop(&mut c);
        }
        if let Some(mut c) = self.child.take() {
            stop(&mut c);
        }
    }
}

/// Wait up to 10 s for a process sent SIGTERM (nginx's master takes its
/// workers down with it), then kill it.
fn stop(c: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = c.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    let _ = c.wait();
}

pub fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The chat body every OpenAI-style target gets (the same prompt Gatehouse gets).
pub const PROMPT: &str = "Summarise in one sentence why a gateway should add little latency.";

/// About `bytes` bytes of ordinary business prose (whole sentences, at least one).
pub fn prose(bytes: usize) -> String {
    const SENTENCES: [&str; 6] = [
        "The quarterly report shows revenue up eight percent in the northern region. ",
        "Please summarise the main risks for the board and suggest two next steps. ",
        "Customer churn fell after the support team moved to a follow-the-sun rota. ",
        "Shipping costs rose in March because two carriers raised their fuel surcharges. ",
        "The new onboarding flow cut the time to first invoice from nine days to four. ",
        "Keep the tone neutral, avoid jargon and mention the figures that changed most. ",
    ];
    let mut text = String::new();
    for s in SENTENCES.iter().cycle() {
        if !text.is_empty() && text.len() + s.len() > bytes {
            break;
        }
        text.push_str(s);
    }
    text.trim_end().to_owned()
}

fn openai_calls(base: &str, model: &str) -> (Call, Call) {
    let msgs = serde_json::json!([{"role": "user", "content": PROMPT}]);
    let json = serde_json::json!({"model": model, "messages": msgs}).to_string();
    let stream = serde_json::json!({"model": model, "messages": msgs, "stream": true}).to_string();
    let url = format!("{base}/v1/chat/completions");
    (Call { url: url.clone(), body: json, headers: vec![] }, Call { url, body: stream, headers: vec![] })
}

/// Poll `http://127.0.0.1:{port}{path}` until it answers 200; returns the time since `t0`.
/// Plain blocking HTTP/1.0 over std's TCP: no client runtime inside the driver's runtime.
fn wait_healthy(port: u16, path: &str, t0: Instant, limit: Duration, child: &mut Child) -> anyhow::Result<Duration> {
    use std::io::{Read, Write};
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut head = [0u8; 16];
            if s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes()).is_ok()
                && s.read(&mut head).is_ok_and(|n| n >= 12)
                && head[9..12] == *b"200"
            {
                return Ok(t0.elapsed());
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            bail!("exited during start-up ({status})");
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            bail!("not healthy after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn pinned(program: &Path) -> Command {
    let mut c = Command::new("taskset");
    c.arg("-c").arg("1").arg(program);
    c
}

impl Target {
    /// Send `prompt` as the user message of both calls instead of [`PROMPT`].
    pub fn use_prompt(&mut self, prompt: &str) -> anyhow::Result<()> {
        for call in [&mut self.json, &mut self.stream] {
            let mut body: serde_json::Value = serde_json::from_str(&call.body).context("a target's request body is not JSON")?;
            let content = body.pointer_mut("/messages/0/content").context("a target's request body has no user message")?;
            *content = prompt.into();
            call.body = body.to_string();
        }
        Ok(())
    }

    /// A proxy in front of the mock that speaks OpenAI's API on `port` (model `gpt-mock`).
    /// `key`: sent as a bearer token when the proxy wants one.
    fn openai_proxy(
        name: &str,
        port: u16,
        key: Option<&str>,
        startup: Duration,
        log: PathBuf,
        child: Child,
        dir: tempfile::TempDir,
    ) -> Target {
        let (mut json, mut stream) = openai_calls(&format!("http://127.0.0.1:{port}"), "gpt-mock");
        if let Some(key) = key {
            for call in [&mut json, &mut stream] {
                call.headers.push(("authorization".into(), format!("Bearer {key}")));
            }
        }
        Target {
            name: name.into(),
            pid: Some(child.id()),
            json,
            stream,
            kind: StreamKind::OpenAi,
            startup: Some(startup),
            log: Some(log),
            child: Some(child),
            parts: vec![],
            others: vec![],
            _keep: vec![],
            _dir: Some(dir),
        }
    }
}

/// The mock itself: the baseline every "added" figure subtracts.
pub fn direct(mock_port: u16, mock_pid: u32) -> Target {
    let (json, stream) = openai_calls(&format!("http://127.0.0.1:{mock_port}"), "gpt-mock");
    Target {
        name: "direct to mock".into(),
        pid: Some(mock_pid),
        json,
        stream,
        kind: StreamKind::OpenAi,
        startup: None,
        log: None,
        child: None,
        parts: vec![],
        others: vec![],
        _keep: vec![],
        _dir: None,
    }
}

pub fn nginx(mock_port: u16) -> anyhow::Result<Target> {
    let (child, port, startup, dir) = start_nginx(&[mock_port])?;
    let log = dir.path().join("error.log");
    Ok(Target::openai_proxy("nginx", port, None, startup, log, child, dir))
}

/// nginx on core 1 as a plain reverse proxy over `upstreams` (round robin,
/// kept-alive connections): the proxy row's, and the load balancer in front
/// of a fleet. Returns the master, its port, its start-up time and its folder.
pub fn start_nginx(upstreams: &[u16]) -> anyhow::Result<(Child, u16, Duration, tempfile::TempDir)> {
    start_nginx_with_keys(upstreams, &[])
}

/// [`start_nginx`] that, given `keys`, replaces each request's bearer token
/// with one of them chosen by the request's id (`split_clients`): many keys'
/// traffic from a load tool that sends one header.
pub fn start_nginx_with_keys(upstreams: &[u16], keys: &[String]) -> anyhow::Result<(Child, u16, Duration, tempfile::TempDir)> {
    let bin = ["/usr/sbin/nginx", "/usr/bin/nginx"].iter().map(PathBuf::from).find(|p| p.is_file()).context("nginx is not installed")?;
    let dir = tempfile::Builder::new().prefix("bench-nginx-").tempdir()?;
    let port = free_port()?;
    let p = dir.path().display().to_string();
    let servers: String = upstreams.iter().map(|u| format!("server 127.0.0.1:{u}; ")).collect();
    let (split, set_key) = if keys.is_empty() {
        (String::new(), "")
    } else {
        // nginx takes percentages with at most two decimals; the last key takes the rest.
        let share = (10_000 / keys.len()) as f64 / 100.0;
        let mut lines: String = keys[..keys.len() - 1].iter().map(|k| format!("    {share:.2}% \"Bearer {k}\";\n")).collect();
        lines.push_str(&format!("    * \"Bearer {}\";\n", keys[keys.len() - 1]));
        (format!("  split_clients \"$request_id\" $bench_key {{\n{lines}  }}\n"), " proxy_set_header Authorization $bench_key;")
    };
    let conf = format!(
        "worker_processes 1;\nuser root;\npid {p}/nginx.pid;\nerror_log {p}/error.log warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {p}/body;\n  proxy_temp_path {p}/proxy;\n  fastcgi_temp_path {p}/fastcgi;\n  uwsgi_temp_path {p}/uwsgi;\n  scgi_temp_path {p}/scgi;\n\
         \x20 upstream up {{ {servers}keepalive 128; }}\n{split}\
         \x20 server {{\n    listen 127.0.0.1:{port};\n    location = /nginx-health {{ return 200 \"ok\"; }}\n\
         \x20   location / {{ proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off;{set_key} }}\n  }}\n}}\n"
    );
    let conf_path = dir.path().join("nginx.conf");
    std::fs::write(&conf_path, conf)?;
    let t0 = Instant::now();
    let mut child = pinned(&bin)
        .arg("-p")
        .arg(dir.path())
        .arg("-c")
        .arg(&conf_path)
        .args(["-g", "daemon off;"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("spawn nginx")?;
    let startup = wait_healthy(port, "/nginx-health", t0, Duration::from_secs(20), &mut child)?;
    Ok((child, port, startup, dir))
}

/// LiteLLM's proxy refuses to start without a master key; requests then authenticate with it.
const LITELLM_KEY: &str = "sk-bench-litellm-0123456789abcdef";

pub fn litellm(bin: &Path, mock_port: u16) -> anyhow::Result<Target> {
    if !bin.is_file() {
        bail!("LiteLLM is not installed at {}", bin.display());
    }
    let dir = tempfile::Builder::new().prefix("bench-litellm-").tempdir()?;
    let port = free_port()?;
    let conf = format!(
        "model_list:\n  - model_name: gpt-mock\n    litellm_params:\n      model: openai/gpt-mock\n      api_base: http://127.0.0.1:{mock_port}/v1\n      api_key: sk-mock\n\
         litellm_settings:\n  telemetry: false\n"
    );
    let conf_path = dir.path().join("config.yaml");
    std::fs::write(&conf_path, conf)?;
    let log = std::fs::File::create(dir.path().join("litellm.log"))?;
    let t0 = Instant::now();
    let mut child = pinned(bin)
        .arg("--config")
        .arg(&conf_path)
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--num_workers", "1"])
        .current_dir(dir.path())
        // No network at start-up: the cost map ships in the package.
        .env("LITELLM_MASTER_KEY", LITELLM_KEY)
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("spawn litellm")?;
    let startup = wait_healthy(port, "/health/liveliness", t0, Duration::from_secs(240), &mut child)
        .with_context(|| format!("LiteLLM log:\n{}", std::fs::read_to_string(dir.path().join("litellm.log")).unwrap_or_default()))?;
    let log = dir.path().join("litellm.log");
    Ok(Target::openai_proxy("LiteLLM", port, Some(LITELLM_KEY), startup, log, child, dir))
}

/// The admin key the benchmark's Gatehouse is bootstrapped with.
pub const GATEHOUSE_KEY: &str = "sk-bench-admin-0123456789abcdefghijklmnopqrstuvwxyz";

/// The benchmark's Gatehouse config: the default pipeline (policy `internal`:
/// Prompt Shield, PII/DLP, `provider-openai` to the mock) with chat limits
/// raised. Also printed by `compare gatehouse-config` for `profile.sh`.
pub fn gatehouse_config(port: u16, mock_port: u16, data: &Path, durable: bool) -> String {
    format!(
        "listen = \"127.0.0.1:{port}\"\ndata_dir = \"{}\"\ndurable_writes = {durable}\n\
         [limits.chat]\nper_minute = 100000000\nper_hour = 100000000\nper_day = 100000000\nper_month = 1000000000\n\
         [providers.openai]\nplugin = \"provider-openai\"\nbase_url = \"http://127.0.0.1:{mock_port}/v1\"\nmodels = [\"openai/gpt-mock\"]\n",
        data.display()
    )
}

/// Gatehouse with the benchmark config ([`gatehouse_config`]).
pub fn gatehouse(bin: &Path, mock_port: u16, durable: bool) -> anyhow::Result<Target> {
    let dir = tempfile::Builder::new().prefix("bench-gatehouse-").tempdir()?;
    let port = free_port()?;
    let conf = gatehouse_config(port, mock_port, &dir.path().join("data"), durable);
    let (child, startup) = start_gatehouse(bin, dir.path(), &conf, &[])?;
    let name = if durable { "Gatehouse (durable)" } else { "Gatehouse (relaxed)" };
    Ok(Target::gatehouse_at(name, port, startup, dir.path().join("gatehouse.log"), child, dir))
}

/// One Gatehouse process on core 1 with config `conf` (written to
/// `dir/gatehouse.toml`, its log `dir/gatehouse.log`), bootstrapped with
/// [`GATEHOUSE_KEY`] and `env` added; returns once it answers `/health`.
pub fn start_gatehouse(bin: &Path, dir: &Path, conf: &str, env: &[(&str, &str)]) -> anyhow::Result<(Child, Duration)> {
    let port: u16 = conf
        .lines()
        .find_map(|l| l.strip_prefix("listen = \"127.0.0.1:"))
        .and_then(|rest| rest.trim_end_matches('"').parse().ok())
        .context("the config names no loopback listen port")?;
    let conf_path = dir.join("gatehouse.toml");
    std::fs::write(&conf_path, conf)?;
    let log = std::fs::File::create(dir.join("gatehouse.log"))?;
    let t0 = Instant::now();
    let mut cmd = pinned(bin);
    cmd.arg("serve")
        .arg("--config")
        .arg(&conf_path)
        .current_dir(dir)
        .env("GATEHOUSE_BOOTSTRAP_ADMIN_KEY", GATEHOUSE_KEY)
        .env("RUST_LOG", "warn")
        .env_remove("GATEHOUSE_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().context("spawn gatehouse")?;
    let startup = wait_healthy(port, "/health", t0, Duration::from_secs(120), &mut child)
        .with_context(|| format!("Gatehouse log:\n{}", std::fs::read_to_string(dir.join("gatehouse.log")).unwrap_or_default()))?;
    Ok((child, startup))
}

impl Target {
    /// Gatehouse's chat calls on `port` (the benchmark's key, model and
    /// knowledge base), measured as `child`'s process tree.
    pub fn gatehouse_at(name: &str, port: u16, startup: Duration, log: PathBuf, child: Child, dir: tempfile::TempDir) -> Target {
        let url = format!("http://127.0.0.1:{port}/chat/completions");
        let body = |stream: bool| {
            serde_json::json!({"model": "openai/gpt-mock", "index": "Zero-Knowledge", "messages": [{"role": "user", "content": PROMPT}], "stream": stream})
                .to_string()
        };
        let headers = vec![("authorization".to_owned(), format!("Bearer {GATEHOUSE_KEY}"))];
        Target {
            name: name.into(),
            pid: Some(child.id()),
            json: Call { url: url.clone(), body: body(false), headers: headers.clone() },
            stream: Call { url, body: body(true), headers },
            kind: StreamKind::Gatehouse,
            startup: Some(startup),
            log: Some(log),
            child: Some(child),
            parts: vec![],
            others: vec![],
            _keep: vec![],
            _dir: Some(dir),
        }
    }

    /// Add a process started for this target: stopped with it, measured as
    /// part `name` when `measure`.
    pub fn add_process(&mut self, name: &str, child: Child, measure: bool) {
        if measure {
            self.parts.push((name.to_owned(), child.id()));
        }
        self.others.push(child);
    }

    /// Keep `thing` alive as long as the target (a database, a folder).
    pub fn keep(&mut self, thing: impl std::any::Any) {
        self._keep.push(Box::new(thing));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_is_about_the_size_asked_for() {
        for n in [2048, 8192] {
            let p = prose(n);
            assert!(p.len() <= n && p.len() + 90 > n, "{n}: {}", p.len());
        }
        assert!(prose(10).ends_with("region."), "at least one whole sentence");
    }

    #[test]
    fn the_prompt_replaces_the_user_message_of_both_calls() {
        let mut t = direct(9, 1);
        t.use_prompt("a longer prompt").expect("use_prompt");
        for call in [&t.json, &t.stream] {
            let body: serde_json::Value = serde_json::from_str(&call.body).expect("JSON body");
            assert_eq!(body["messages"][0]["content"], "a longer prompt");
            assert_eq!(body["model"], "gpt-mock");
        }
        assert_eq!(serde_json::from_str::<serde_json::Value>(&t.stream.body).expect("JSON body")["stream"], true);
    }
}
