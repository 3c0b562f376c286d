//! Crash safety under load: run mixed traffic against the real server, SIGKILL
//! it at random moments, restart it on the same data dir, and check that every
//! write the server acknowledged before the kill is still there.
//!
//! Shared by `tests/examples/kill_loop.rs` (`--cycles 20`, `--fleet <database
//! url>` for three hosts on PostgreSQL) and the short runs in
//! `tests/tests/crash_safety.rs` (one host on redb, 2 cycles) and
//! `tests/tests/fleet.rs` (three hosts on PostgreSQL, 2 cycles).
//!
//! On a fleet ([`Options::postgres`]) the traffic is spread over the hosts and
//! each cycle SIGKILLs one of them, chosen at random, while the others serve
//! on; the checks after its restart are made through it.
//!
//! Traffic, from concurrent workers until the kill:
//! - chat completions against the mock upstream through a failover chain
//!   (`fail500` then `ok`), so each one also commits an `api:model_failover`
//!   outbox event; every other one streamed; each with an `Idempotency-Key`;
//! - admin writes: a user, then a key for that user;
//! - webhook test deliveries to a local receiver.
//!
//! Checked after every restart, for what was acknowledged (a complete 2xx answer)
//! before the kill:
//! - the redb file opens cleanly: `gatehouse audit verify` offline, before the restart;
//! - usage totals are at least the acknowledged requests and tokens;
//! - each acknowledged idempotency key replays (`idempotent-replayed: true`, same body);
//! - each acknowledged user is listed and each acknowledged key authenticates;
//! - `GET /api/admin/audit/verify` reports an intact hash chain;
//! - the outbox holds at least one failover event per acknowledged chat.
//!
//! At the end: every outbox event and every acknowledged test delivery reached
//! the receiver at least once, and the requests cut by a kill are retried with
//! their idempotency key (once their in-flight lease has run out) and succeed.

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use reqwest::Method;
use serde_json::{Value, json};

use crate::Server;
use crate::mock_upstream::MockUpstream;

/// How a run is shaped.
#[derive(Debug, Clone)]
pub struct Options {
    pub cycles: usize,
    /// Seed of the kill moments and the traffic mix (printed, so a failure can be replayed).
    pub seed: u64,
    /// Concurrent chat workers (one admin and one webhook worker run beside them).
    pub chat_workers: usize,
    /// The server runs this long (uniformly at random) before each kill.
    pub min_run: Duration,
    pub max_run: Duration,
    /// `None`: one host on redb. `Some(url)`: [`Options::hosts`] hosts sharing
    /// the PostgreSQL database at `url` (which must exist).
    pub postgres: Option<String>,
    /// Hosts of a fleet on PostgreSQL (one on redb).
    pub hosts: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cycles: 20,
            seed: 0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id()),
            chat_workers: 3,
            min_run: Duration::from_millis(300),
            max_run: Duration::from_millis(2_500),
            postgres: None,
            hosts: 3,
        }
    }
}

/// What a run did and found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub cycles: usize,
    /// Requests answered 2xx before a kill (chats, admin writes, test deliveries).
    pub acknowledged: usize,
    /// Individual checks of acknowledged writes after restarts.
    pub writes_checked: usize,
    /// Acknowledged writes missing after a restart. Must be 0.
    pub lost: usize,
    /// Requests cut by a kill, retried with their idempotency key at the end.
    pub retried_after_crash: usize,
    /// Outbox events delivered to the receiver at least once.
    pub events_delivered: usize,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kill loop: {} cycles, {} requests acknowledged, {} writes checked, {} cut requests retried, {} events delivered, lost = {}",
            self.cycles, self.acknowledged, self.writes_checked, self.retried_after_crash, self.events_delivered, self.lost
        )
    }
}

/// xorshift64*: enough randomness for kill moments and the traffic mix.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A chat request with its idempotency key.
#[derive(Debug, Clone)]
struct Chat {
    key: String,
    body: Value,
    stream: bool,
}

/// A chat the server acknowledged: its answer, and the tokens it billed.
#[derive(Debug, Clone)]
struct AckedChat {
    chat: Chat,
    answer: String,
    tokens: u64,
}

/// Everything acknowledged or cut, shared by the workers.
#[derive(Debug, Default)]
struct Ledger {
    chats: Vec<AckedChat>,
    /// Chats whose answer never arrived whole (cut by the kill), with the cycle they were cut in.
    cut: Vec<(Chat, Instant)>,
    users: Vec<String>,
    /// (key id, secret)
    keys: Vec<(String, String)>,
    test_events: Vec<String>,
}

/// Webhook receiver on loopback: records the `id` of every delivery body.
#[derive(Clone, Default)]
struct Receiver {
    ids: Arc<Mutex<Vec<String>>>,
}

async fn receive(State(r): State<Receiver>, body: Bytes) -> StatusCode {
    if let Some(id) = serde_json::from_slice::<Value>(&body).ok().and_then(|v| v["id"].as_str().map(str::to_owned)) {
        r.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(id);
    }
    StatusCode::OK
}

impl Receiver {
    async fn start() -> Result<(Receiver, String)> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hook", listener.local_addr()?);
        let r = Receiver::default();
        let app = axum::Router::new().fallback(receive).with_state(r.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok((r, url))
    }

    fn received(&self) -> HashSet<String> {
        self.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().cloned().collect()
    }
}

/// Run the loop. Missing acknowledged writes are counted in [`Report::lost`]
/// (and each is printed); `Err` is for a run that could not be carried out.
pub async fn run(opts: Options) -> Result<Report> {
    let mut rng = Rng(opts.seed | 1);
    println!("kill loop: seed {:#x}, {} cycles", opts.seed, opts.cycles);
    let mock = MockUpstream::start().await;
    let (receiver, hook_url) = Receiver::start().await?;
    let toml = format!(
        "[webhooks]\nretry_delays_secs = [0, 1, 1, 1, 1]\npoll_interval_ms = 50\n\
         [upstream]\nbreaker_failures = 1000000000\n\
         [providers.openai]\nplugin = \"provider-openai\"\nbase_url = \"{}\"\nmodels = [\"openai/*\"]\n",
        mock.openai_base_url()
    );
    let mut hosts = start_hosts(&opts, &toml);
    let n = hosts.len();
    let endpoint: Value =
        hosts[0].admin(Method::POST, "/api/admin/webhooks").json(&json!({"url": hook_url, "events": ["*"]})).send().await?.json().await?;
    let endpoint = endpoint["data"]["endpoint"]["id"].as_str().ok_or_else(|| anyhow!("no endpoint id: {endpoint}"))?.to_owned();

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut report = Report::default();
    let mut checked = CheckedUpTo::default();
    for cycle in 0..opts.cycles {
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        // Each worker on its own host, in turn: a fleet's traffic reaches every host.
        let on = |i: usize| &hosts[(cycle + i) % n];
        for w in 0..opts.chat_workers {
            workers.push(tokio::spawn(chat_worker(
                on(w).base_url.clone(),
                on(w).admin_key.clone(),
                ledger.clone(),
                stop.clone(),
                Rng(rng.next() | 1),
                cycle * 100 + w,
            )));
        }
        let (a, b) = (on(opts.chat_workers), on(opts.chat_workers + 1));
        workers.push(tokio::spawn(admin_worker(a.base_url.clone(), a.admin_key.clone(), ledger.clone(), stop.clone())));
        workers.push(tokio::spawn(webhook_worker(b.base_url.clone(), b.admin_key.clone(), endpoint.clone(), ledger.clone(), stop.clone())));

        let span = opts.max_run.saturating_sub(opts.min_run).as_millis() as u64;
        tokio::time::sleep(opts.min_run + Duration::from_millis(rng.below(span + 1))).await;
        let victim = rng.below(n as u64) as usize;
        hosts[victim].kill9();
        stop.store(true, Ordering::SeqCst);
        for w in workers {
            w.await?;
        }
        offline_verify(&hosts[victim], opts.postgres.as_deref()).with_context(|| format!("cycle {cycle}: the store after SIGKILL"))?;
        hosts[victim].restart();
        let (n, lost) = check(&hosts[victim], &ledger, &mut checked).await.with_context(|| format!("cycle {cycle}, after restart"))?;
        report.writes_checked += n;
        report.lost += lost;
        report.cycles = cycle + 1;
        println!("cycle {}: {} writes checked so far, {} lost", cycle + 1, report.writes_checked, report.lost);
    }

    // Requests cut by a kill: retried with the same key and body they succeed
    // (fresh, or replayed if they had been committed). An in-flight record
    // holds its key for 30 s after the crash, so only older ones are retried.
    let cut: Vec<Chat> = {
        let l = ledger.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        l.cut.iter().filter(|(_, at)| at.elapsed() > Duration::from_secs(31)).map(|(c, _)| c.clone()).collect()
    };
    let client = client();
    let s = &hosts[0];
    for chat in &cut {
        let (status, _, _) = send_chat(&client, &s.base_url, &s.admin_key, chat).await?;
        ensure!(status == 200, "retry of {} after the crash answered {status}", chat.key);
        report.retried_after_crash += 1;
    }

    // Every outbox event, and every acknowledged test delivery, reaches the receiver.
    let outbox = outbox_ids(s).await?;
    let tests: Vec<String> = ledger.lock().unwrap_or_else(std::sync::PoisonError::into_inner).test_events.clone();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let got = receiver.received();
        let missing: Vec<&String> = outbox.iter().chain(tests.iter()).filter(|id| !got.contains(*id)).collect();
        if missing.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            eprintln!("LOST: {} events never delivered, e.g. {:?}", missing.len(), &missing[..missing.len().min(5)]);
            report.lost += missing.len();
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    report.events_delivered = outbox.len() + tests.len();
    report.writes_checked += outbox.len() + tests.len();

    let l = ledger.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    report.acknowledged = l.chats.len() + l.users.len() + l.keys.len() + l.test_events.len();
    drop(l);
    for (i, h) in hosts.iter_mut().enumerate() {
        ensure!(h.terminate(), "host {i} did not shut down cleanly at the end");
    }
    Ok(report)
}

/// One host on redb, or a fleet of [`Options::hosts`] on the database
/// [`Options::postgres`] names, all with the same admin key.
fn start_hosts(opts: &Options, toml: &str) -> Vec<Server> {
    let Some(url) = &opts.postgres else {
        return vec![Server::builder().env("WEBHOOKS_ALLOW_PRIVATE", "true").toml(toml).start()];
    };
    let admin = crate::server::admin_key_for("killloopfleet");
    (0..opts.hosts.max(1))
        .map(|_| {
            let mut host = Server::builder()
                .env("WEBHOOKS_ALLOW_PRIVATE", "true")
                .env("GATEHOUSE_DATABASE_URL", url)
                .env("GATEHOUSE_BOOTSTRAP_ADMIN_KEY", &admin)
                .toml(&format!("[store]\nbackend = \"postgres\"\npool_size = 8\n{toml}"))
                .start();
            host.admin_key = admin.clone();
            host
        })
        .collect()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap_or_default()
}

/// Send a chat; returns (status, whole answer, replayed?). An answer cut short
/// (no `[DONE]` on a stream) is an error: it was not acknowledged.
async fn send_chat(client: &reqwest::Client, base: &str, key: &str, chat: &Chat) -> Result<(u16, String, bool)> {
    let resp = client
        .post(format!("{base}/chat/completions"))
        .bearer_auth(key)
        .header("Idempotency-Key", &chat.key)
        .json(&chat.body)
        .send()
        .await?;
    let status = resp.status().as_u16();
    let replayed = resp.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
    let text = resp.text().await?;
    if chat.stream && status == 200 && !text.contains("data: [DONE]") {
        bail!("stream cut short");
    }
    Ok((status, text, replayed))
}

/// Tokens billed, from a JSON answer or a stream's `usage` frame.
fn tokens_of(answer: &str, stream: bool) -> u64 {
    let total = |v: &Value| v["total_tokens"].as_u64().unwrap_or(0);
    if !stream {
        return serde_json::from_str::<Value>(answer).map(|v| total(&v["usage"])).unwrap_or(0);
    }
    answer
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v["type"] == "usage")
        .map(|v| total(&v["data"]))
        .unwrap_or(0)
}

async fn chat_worker(base: String, key: String, ledger: Arc<Mutex<Ledger>>, stop: Arc<AtomicBool>, mut rng: Rng, id: usize) {
    let client = client();
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let stream = rng.below(2) == 0;
        let words = 1 + rng.below(12);
        let prompt = (0..words).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
        let chat = Chat {
            key: format!("kl-{id}-{n}-{}", rng.next()),
            body: json!({
                "index": "Zero-Knowledge",
                "models": ["openai/fail500-a", "openai/ok-b"],
                "prompt": format!("kill loop {prompt}"),
                "stream": stream,
            }),
            stream,
        };
        match send_chat(&client, &base, &key, &chat).await {
            Ok((200, answer, _)) => {
                let tokens = tokens_of(&answer, stream);
                ledger.lock().unwrap_or_else(std::sync::PoisonError::into_inner).chats.push(AckedChat { chat, answer, tokens });
            }
            Ok((status, body, _)) => {
                // Only a dying server may refuse; anything else is a bug worth seeing.
                if !stop.load(Ordering::SeqCst) {
                    eprintln!("kill loop: chat answered {status}: {body}");
                }
            }
            Err(_) => {
                ledger.lock().unwrap_or_else(std::sync::PoisonError::into_inner).cut.push((chat, Instant::now()));
                // The server is gone; wait for the stop flag rather than spin.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

async fn admin_worker(base: String, key: String, ledger: Arc<Mutex<Ledger>>, stop: Arc<AtomicBool>) {
    let client = client();
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let user = client
            .post(format!("{base}/api/admin/users"))
            .bearer_auth(&key)
            .json(&json!({"name": format!("kill loop user {n}")}))
            .send()
            .await;
        let Ok(user) = user else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        if user.status() != 201 {
            continue;
        }
        let Ok(v) = user.json::<Value>().await else { continue };
        let Some(uid) = v["data"]["id"].as_str().map(str::to_owned) else { continue };
        ledger.lock().unwrap_or_else(std::sync::PoisonError::into_inner).users.push(uid.clone());
        let created =
            client.post(format!("{base}/api/admin/keys")).bearer_auth(&key).json(&json!({"userId": uid, "name": "kl"})).send().await;
        if let Ok(r) = created
            && r.status() == 201
            && let Ok(v) = r.json::<Value>().await
            && let (Some(id), Some(secret)) = (v["data"]["apiKey"]["id"].as_str(), v["data"]["key"].as_str())
        {
            ledger.lock().unwrap_or_else(std::sync::PoisonError::into_inner).keys.push((id.to_owned(), secret.to_owned()));
        }
    }
}

async fn webhook_worker(base: String, key: String, endpoint: String, ledger: Arc<Mutex<Ledger>>, stop: Arc<AtomicBool>) {
    let client = client();
    while !stop.load(Ordering::SeqCst) {
        let r = client.post(format!("{base}/api/admin/webhooks/{endpoint}/test")).bearer_auth(&key).send().await;
        match r {
            Ok(r) if r.status() == 202 => {
                if let Ok(v) = r.json::<Value>().await
                    && let Some(id) = v["data"]["eventId"].as_str()
                {
                    ledger.lock().unwrap_or_else(std::sync::PoisonError::into_inner).test_events.push(id.to_owned());
                }
            }
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
        // A test delivery every ~100 ms is plenty.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Open the store the way an operator would after a crash: the offline
/// `gatehouse audit verify` (exit 0, chain intact), on the redb file or the
/// fleet's database (`postgres`: its URL).
fn offline_verify(s: &Server, postgres: Option<&str>) -> Result<()> {
    let mut cmd = std::process::Command::new(crate::server::binary());
    cmd.args(["audit", "verify", "--config"]).arg(&s.config_path);
    if let Some(url) = postgres {
        cmd.env("GATEHOUSE_DATABASE_URL", url);
    }
    let out = cmd.output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success() && stdout.contains("\"ok\": true"),
        "audit verify failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// How far each list of the ledger has been checked already (each write is
/// checked once, after the first restart that follows its acknowledgement).
#[derive(Debug, Default)]
struct CheckedUpTo {
    chats: usize,
    keys: usize,
}

/// A check of an acknowledged write: counted, and printed when it fails.
fn verdict(ok: bool, lost: &mut usize, what: impl FnOnce() -> String) {
    if !ok {
        eprintln!("LOST: {}", what());
        *lost += 1;
    }
}

/// Check acknowledged writes against the restarted server; returns (checks made, writes lost).
async fn check(s: &Server, ledger: &Arc<Mutex<Ledger>>, upto: &mut CheckedUpTo) -> Result<(usize, usize)> {
    let (chats, users, keys) = {
        let l = ledger.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        (l.chats.clone(), l.users.clone(), l.keys.clone())
    };
    let (mut n, mut lost) = (0, 0);

    // Usage: at least what was acknowledged (requests cut by a kill may add more).
    let usage: Value = s.admin(Method::GET, "/api/admin/usage").send().await?.json().await?;
    let rows = usage["data"]["keys"].as_array().cloned().unwrap_or_default();
    let requests: u64 = rows.iter().map(|r| r["requests"].as_u64().unwrap_or(0)).sum();
    let tokens: u64 = rows.iter().map(|r| r["totalTokens"].as_u64().unwrap_or(0)).sum();
    let acked_tokens: u64 = chats.iter().map(|c| c.tokens).sum();
    verdict(requests >= chats.len() as u64, &mut lost, || format!("usage: {requests} requests recorded, {} acknowledged", chats.len()));
    verdict(tokens >= acked_tokens, &mut lost, || format!("usage: {tokens} tokens recorded, {acked_tokens} acknowledged"));
    n += 2;

    // Idempotency records of the chats acknowledged since the last check replay.
    let client = client();
    for acked in &chats[upto.chats..] {
        let (status, answer, replayed) = send_chat(&client, &s.base_url, &s.admin_key, &acked.chat).await?;
        verdict(status == 200 && replayed && answer == acked.answer, &mut lost, || {
            format!("idempotency record {}: status {status}, replayed {replayed}, same body {}", acked.chat.key, answer == acked.answer)
        });
        n += 1;
    }
    upto.chats = chats.len();

    // Users and keys.
    let listed: Value = s.admin(Method::GET, "/api/admin/users").send().await?.json().await?;
    let listed: BTreeSet<&str> = listed["data"].as_array().into_iter().flatten().filter_map(|u| u["id"].as_str()).collect();
    for u in &users {
        verdict(listed.contains(u.as_str()), &mut lost, || format!("user {u}"));
        n += 1;
    }
    for (id, secret) in &keys[upto.keys..] {
        let r = client.get(format!("{}/api/models", s.base_url)).bearer_auth(secret).send().await?;
        verdict(r.status() == 200, &mut lost, || format!("key {id} (status {})", r.status()));
        n += 1;
    }
    upto.keys = keys.len();

    // The audit chain.
    let v: Value = s.admin(Method::GET, "/api/admin/audit/verify").send().await?.json().await?;
    verdict(v["data"]["ok"] == true, &mut lost, || format!("audit chain: {v}"));
    n += 1;

    // One failover event per acknowledged chat, at least.
    let failovers = count_events(s, "api:model_failover").await?;
    verdict(failovers >= chats.len(), &mut lost, || format!("outbox: {failovers} failover events for {} acknowledged chats", chats.len()));
    n += 1;
    Ok((n, lost))
}

async fn outbox_page(s: &Server, after: u64, kind: Option<&str>) -> Result<Vec<Value>> {
    let mut path = format!("/api/admin/events?after={after}&limit=1000");
    if let Some(k) = kind {
        path.push_str(&format!("&type={k}"));
    }
    let v: Value = s.admin(Method::GET, &path).send().await?.json().await?;
    v["data"].as_array().cloned().ok_or_else(|| anyhow!("bad events answer: {v}"))
}

async fn count_events(s: &Server, kind: &str) -> Result<usize> {
    Ok(outbox_ids_of(s, Some(kind)).await?.len())
}

async fn outbox_ids(s: &Server) -> Result<Vec<String>> {
    outbox_ids_of(s, None).await
}

async fn outbox_ids_of(s: &Server, kind: Option<&str>) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    let mut after = 0;
    loop {
        let page = outbox_page(s, after, kind).await?;
        let Some(last) = page.last().and_then(|e| e["seq"].as_u64()) else { break };
        after = last;
        ids.extend(page.iter().filter_map(|e| e["event"]["id"].as_str().map(str::to_owned)));
    }
    Ok(ids)
}
