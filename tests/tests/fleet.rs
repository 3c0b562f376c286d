//! Three `gatehouse serve` hosts on one throwaway PostgreSQL, behind no
//! balancer (each test picks the host): every promise of a single host holds
//! across the fleet. One cluster for the file, one database per case; the
//! cases run in order in one test (the last stops and restarts PostgreSQL,
//! then the audit chain written by all of them is verified).
//!
//! Runtime: 70 to 105 s on the shared two-core machine (three hosts start per
//! case; the outage cases wait for health to turn and back, the killed host's
//! delivery for its lease to lapse; the two-cycle kill loop restarts a host
//! twice; each host compiles every published plugin version itself), plus the
//! move from a single redb host (`db import`; two hosts started in turn).

use std::time::{Duration, Instant};

use gatehouse_tests::mock_upstream::MockUpstream;
use gatehouse_tests::server::admin_key_for;
use gatehouse_tests::{Server, TempPostgres};
use reqwest::Method;
use serde_json::{Value, json};

/// The hosts of one fleet, all with the same admin key.
struct Fleet {
    hosts: Vec<Server>,
    /// The database's URL, as the hosts' `GATEHOUSE_DATABASE_URL`.
    url: String,
}

impl Fleet {
    /// Start `n` hosts on a new database of `pg`, with one bootstrap admin key.
    fn start(pg: &TempPostgres, db: &str, n: usize, extra: &str) -> Fleet {
        Self::start_with(pg, db, n, extra, &[])
    }

    /// [`Fleet::start`], each host with `plugins` (component file, name) in its watched folder.
    fn start_with(pg: &TempPostgres, db: &str, n: usize, extra: &str, plugins: &[(&str, &str)]) -> Fleet {
        let url = pg.create_database(db);
        let admin = admin_key_for(&format!("fleet{db}"));
        let plugins: Vec<(String, String)> = plugins.iter().map(|(src, name)| (src.to_string(), name.to_string())).collect();
        // All at once, as an orchestrator starts them: one registers the
        // bootstrap admin key, the others find it.
        let starting: Vec<_> = (0..n)
            .map(|_| {
                let (url, admin, extra, plugins) = (url.clone(), admin.clone(), extra.to_owned(), plugins.clone());
                std::thread::spawn(move || {
                    let mut builder = Server::builder()
                        .toml(&format!("[store]\nbackend = \"postgres\"\npool_size = 8\n{extra}"))
                        .env("GATEHOUSE_DATABASE_URL", &url)
                        .env("GATEHOUSE_BOOTSTRAP_ADMIN_KEY", &admin);
                    for (src, name) in &plugins {
                        builder = builder.plugin(src, name);
                    }
                    builder.start()
                })
            })
            .collect();
        let hosts = starting
            .into_iter()
            .map(|s| {
                let mut host = s.join().expect("a host started");
                host.admin_key = admin.clone();
                host
            })
            .collect();
        Fleet { hosts, url }
    }

    fn host(&self, i: usize) -> &Server {
        &self.hosts[i]
    }
}

fn chat_body(prompt: &str) -> Value {
    json!({"index": "Zero-Knowledge", "model": "echo/default", "prompt": prompt})
}

async fn send_chat(host: &Server, key: &str, body: &Value) -> u16 {
    host.client.post(host.url("/chat/completions")).bearer_auth(key).json(body).send().await.expect("send").status().as_u16()
}

/// The usage row of a key (`requests`, tokens), as any host reads it.
async fn key_usage(host: &Server, key_id: &str) -> Value {
    let usage: Value = host.admin(Method::GET, "/api/admin/usage").send().await.expect("usage").json().await.expect("json");
    usage["data"]["keys"].as_array().and_then(|k| k.iter().find(|k| k["id"] == key_id).cloned()).unwrap_or(Value::Null)
}

async fn limit_100_with_3_hosts_and_50_clients_each_admits_exactly_100(pg: &TempPostgres) {
    let fleet = Fleet::start(pg, "limits", 3, "");
    let (_user, key, key_id) = fleet.host(0).create_key(json!({"name": "busy", "limits": {"perDay": 100}})).await;
    let mut clients = Vec::new();
    for h in 0..3 {
        for c in 0..50 {
            let (host_url, client, key) = (fleet.host(h).url("/chat/completions"), fleet.host(h).client.clone(), key.clone());
            clients.push(async move {
                let mut statuses = Vec::new();
                for r in 0..2 {
                    let body = chat_body(&format!("client {h}/{c} request {r}"));
                    let resp = client.post(&host_url).bearer_auth(&key).json(&body).send().await.expect("send");
                    statuses.push(resp.status().as_u16());
                }
                statuses
            });
        }
    }
    let statuses: Vec<u16> = futures::future::join_all(clients).await.into_iter().flatten().collect();
    assert_eq!(statuses.len(), 300);
    let admitted = statuses.iter().filter(|s| **s == 200).count();
    let refused = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!((admitted, refused), (100, 200), "exactly the limit is admitted across the hosts: {statuses:?}");
    // Billed once per admitted request, whichever host served it.
    assert_eq!(key_usage(fleet.host(2), &key_id).await["requests"], 100);
    // api:limit_reached (and its audit record) once for the whole fleet.
    let reached = fleet.host(1).audit_total("type=rate_limit").await;
    assert_eq!(reached, 1, "the first refusal is reported once, whichever host refused");
    let events: Value = fleet
        .host(0)
        .admin(Method::GET, "/api/admin/events?type=api:limit_reached")
        .send()
        .await
        .expect("events")
        .json()
        .await
        .expect("json");
    assert_eq!(events["data"].as_array().map(Vec::len), Some(1), "{events}");
}

async fn an_idempotent_duplicate_on_two_hosts_at_once_runs_and_is_billed_once(pg: &TempPostgres) {
    let mock = MockUpstream::start().await;
    let provider = format!("[providers.openai]\nplugin = \"provider-openai\"\nbase_url = \"{}\"\n", mock.openai_base_url());
    let fleet = Fleet::start(pg, "idempotency", 3, &provider);
    let (_user, key, key_id) = fleet.host(0).create_key(json!({"name": "retrier"})).await;
    // The upstream takes a while, so the duplicate arrives while the first is in flight.
    let body = json!({"index": "Zero-Knowledge", "model": "openai/slow-800-a", "prompt": "pay once"});
    let send = |host: &Server| {
        host.client.post(host.url("/chat/completions")).bearer_auth(&key).header("Idempotency-Key", "fleet-dup-1").json(&body).send()
    };
    let (a, c) = tokio::join!(send(fleet.host(0)), send(fleet.host(2)));
    let (a, c) = (a.expect("host A"), c.expect("host C"));
    assert_eq!((a.status().as_u16(), c.status().as_u16()), (200, 200));
    let (a, c): (Value, Value) = (a.json().await.expect("json"), c.json().await.expect("json"));
    assert_eq!(a, c, "the duplicate gets the stored answer");
    assert_eq!(mock.request_count(), 1, "executed once across the fleet");
    assert_eq!(key_usage(fleet.host(1), &key_id).await["requests"], 1, "billed once");
}

async fn a_key_revoked_on_host_a_is_refused_on_host_c_within_the_bound(pg: &TempPostgres) {
    let fleet = Fleet::start(pg, "revoke", 3, "");
    let (_user, key, key_id) = fleet.host(0).create_key(json!({"name": "to revoke"})).await;
    // Host C knows the key (its cache holds it).
    assert_eq!(send_chat(fleet.host(2), &key, &chat_body("before")).await, 200);
    let revoked = fleet.host(0).admin(Method::POST, &format!("/api/admin/keys/{key_id}/revoke")).send().await.expect("revoke");
    assert_eq!(revoked.status().as_u16(), 200);
    let at = Instant::now();
    // The stated bound: 1 s (a notification, or the cache's TTL).
    let bound = Duration::from_secs(1);
    loop {
        let status = send_chat(fleet.host(2), &key, &chat_body("after")).await;
        if status == 401 {
            break;
        }
        assert_eq!(status, 200);
        assert!(at.elapsed() < bound + Duration::from_millis(500), "host C still accepts the key after {:?}", at.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(at.elapsed() < bound, "refused after {:?}, the bound is {bound:?}", at.elapsed());
}

/// A webhook receiver on loopback that records each delivery id and, while
/// `hold` is set, never answers (the sender is left holding the delivery).
#[derive(Clone, Default)]
struct Receiver {
    ids: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    hold: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Receiver {
    async fn start(self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind receiver");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
            let me = self.clone();
            async move {
                let id = headers.get("x-gatehouse-delivery").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
                me.ids.lock().expect("lock").push(id);
                if me.hold.load(std::sync::atomic::Ordering::SeqCst) {
                    std::future::pending::<()>().await;
                }
                axum::http::StatusCode::OK
            }
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        url
    }

    async fn wait_for(&self, n: usize, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        loop {
            let ids = self.ids.lock().expect("lock").clone();
            if ids.len() >= n {
                return ids;
            }
            assert!(Instant::now() < deadline, "expected {n} delivery attempts within {within:?}, got {ids:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The process id in the lease owner's name (`pid-<pid>-<random>`) of an endpoint.
fn lease_owner_pid(pg: &TempPostgres, db: &str, endpoint: &str) -> Option<u32> {
    let out = pg.psql(db, &format!("SELECT lease_owner FROM webhook_cursors WHERE endpoint_id = '{endpoint}' AND lease_until > now()"));
    let owner = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    owner.strip_prefix("pid-")?.split('-').next()?.parse().ok()
}

async fn a_host_killed_holding_a_delivery_has_it_delivered_by_another_with_the_same_id(pg: &TempPostgres) {
    let receiver = Receiver::default();
    receiver.hold.store(true, std::sync::atomic::Ordering::SeqCst);
    let url = receiver.clone().start().await;
    let mut fleet = Fleet::start(pg, "webhooks", 3, "[webhooks]\nallow_private = true\npoll_interval_ms = 200\n");
    let created: Value = fleet
        .host(0)
        .admin(Method::POST, "/api/admin/webhooks")
        .json(&json!({"url": url, "events": ["webhook:test"], "description": "fleet receiver"}))
        .send()
        .await
        .expect("create endpoint")
        .json()
        .await
        .expect("json");
    let endpoint = created["data"]["endpoint"]["id"].as_str().unwrap_or_else(|| panic!("{created}")).to_owned();
    // One host's dispatcher owns the endpoint's deliveries.
    let deadline = Instant::now() + Duration::from_secs(10);
    let owner = loop {
        if let Some(pid) = lease_owner_pid(pg, "webhooks", &endpoint)
            && let Some(i) = fleet.hosts.iter().position(|h| h.pid() == Some(pid))
        {
            break i;
        }
        assert!(Instant::now() < deadline, "no host took the endpoint's lease");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Queued through another host; the owner sends it, and the receiver keeps it waiting.
    let queued: Value = fleet
        .host((owner + 1) % 3)
        .admin(Method::POST, &format!("/api/admin/webhooks/{endpoint}/test"))
        .send()
        .await
        .expect("test delivery")
        .json()
        .await
        .expect("json");
    let delivery = queued["data"]["deliveryId"].as_str().unwrap_or_else(|| panic!("{queued}")).to_owned();
    assert_eq!(receiver.wait_for(1, Duration::from_secs(10)).await, std::slice::from_ref(&delivery), "the owner sent it");

    fleet.hosts[owner].kill9();
    receiver.hold.store(false, std::sync::atomic::Ordering::SeqCst);
    // Within the lease (10 s) and a look or two, another host sends it again, with the same id.
    let ids = receiver.wait_for(2, Duration::from_secs(25)).await;
    assert_eq!(ids[1], delivery, "the same delivery id: {ids:?}");
    let survivor = fleet.host((owner + 1) % 3);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v: Value = survivor
            .admin(Method::GET, &format!("/api/admin/webhooks/{endpoint}/deliveries"))
            .send()
            .await
            .expect("deliveries")
            .json()
            .await
            .expect("json");
        let status =
            v["data"]["deliveries"].as_array().and_then(|d| d.iter().find(|d| d["id"] == delivery.as_str())).map(|d| d["status"].clone());
        if status == Some(json!("succeeded")) {
            break;
        }
        assert!(Instant::now() < deadline, "the delivery was not recorded as succeeded: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn health(host: &Server) -> (u16, Value) {
    match host.client.get(host.url("/health")).timeout(Duration::from_secs(10)).send().await {
        Ok(r) => (r.status().as_u16(), r.json().await.unwrap_or(Value::Null)),
        Err(e) => panic!("/health did not answer: {e}"),
    }
}

async fn wait_health(host: &Server, want: u16) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = health(host).await;
        if status == want {
            return body;
        }
        assert!(Instant::now() < deadline, "/health stayed {status}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn postgres_stopped_and_restarted_under_load_loses_nothing_acknowledged(pg: &mut TempPostgres) -> Fleet {
    let fleet = Fleet::start(pg, "outage", 3, "");
    let (_user, key, key_id) = fleet.host(0).create_key(json!({"name": "steady"})).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Load on every host: chat requests, counted as acknowledged when answered 200.
    let load: Vec<_> = (0..3)
        .map(|h| {
            let (url, client, key, stop) =
                (fleet.host(h).url("/chat/completions"), fleet.host(h).client.clone(), key.clone(), stop.clone());
            async move {
                let mut acknowledged = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let resp =
                        client.post(&url).bearer_auth(&key).json(&chat_body("under load")).timeout(Duration::from_secs(15)).send().await;
                    match resp {
                        Ok(r) if r.status() == 200 => acknowledged += 1,
                        Ok(r) => assert_eq!(r.status(), 503, "an outage answers 503 Database unavailable"),
                        Err(_) => {}
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                acknowledged
            }
        })
        .collect();
    let load = futures::future::join_all(load);
    let outage = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        pg.stop();
        for h in 0..3 {
            let body = wait_health(fleet.host(h), 503).await;
            assert_eq!(body["status"], "degraded", "{body}");
        }
        // A write meanwhile: 503 with the nested code and a time to come back, on every host.
        for h in 0..3 {
            let r = fleet
                .host(h)
                .admin(reqwest::Method::POST, "/api/admin/users")
                .json(&serde_json::json!({"name": "during the outage", "email": format!("outage{h}@example.com")}))
                .timeout(Duration::from_secs(15))
                .send()
                .await
                .expect("send");
            assert_eq!(r.status(), 503, "host {h}");
            assert!(r.headers().contains_key("retry-after"), "host {h}: no Retry-After");
            let body: serde_json::Value = r.json().await.expect("json");
            assert_eq!(body["error"]["code"], "DATABASE_UNAVAILABLE", "host {h}: {body}");
        }
        pg.restart();
        for h in 0..3 {
            wait_health(fleet.host(h), 200).await;
        }
        // Some load after the recovery too.
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    };
    let (acknowledged, ()) = tokio::join!(load, outage);
    let acknowledged: u64 = acknowledged.into_iter().sum();
    assert!(acknowledged > 0, "no request was served around the outage");
    // Every acknowledged request is billed; a request that failed may have been too (its commit's answer was lost).
    let billed = key_usage(fleet.host(1), &key_id).await["requests"].as_u64().expect("usage row");
    assert!(billed >= acknowledged, "{acknowledged} answered 200 but {billed} billed");
    // The hosts serve again without a restart.
    for h in 0..3 {
        assert_eq!(send_chat(fleet.host(h), &key, &chat_body("after the outage")).await, 200, "host {h}");
    }
    fleet
}

async fn a_host_started_while_postgres_is_down_answers_degraded_and_serves_once_it_returns(pg: &mut TempPostgres) {
    let url = pg.create_database("late");
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
    let admin = admin_key_for("fleetlate");
    pg.stop();
    let starting = {
        let admin = admin.clone();
        // `start` returns once the host serves, which needs the database.
        std::thread::spawn(move || {
            Server::builder()
                .toml("[store]\nbackend = \"postgres\"\n")
                .env("GATEHOUSE_DATABASE_URL", &url)
                .env("GATEHOUSE_LISTEN", &format!("127.0.0.1:{port}"))
                .env("GATEHOUSE_BOOTSTRAP_ADMIN_KEY", &admin)
                .start()
        })
    };
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().expect("client");
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        if let Ok(r) = client.get(format!("http://127.0.0.1:{port}/health")).send().await {
            assert_eq!(r.status().as_u16(), 503, "health while the database is away");
            break r.json::<Value>().await.expect("json");
        }
        assert!(Instant::now() < deadline, "the waiting host never answered /health");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(body["status"], "degraded", "{body}");
    let chat = client.post(format!("http://127.0.0.1:{port}/chat/completions")).bearer_auth(&admin).json(&chat_body("early")).send().await;
    let chat = chat.expect("an answer while waiting");
    assert_eq!(chat.status().as_u16(), 503);
    assert!(chat.headers().contains_key("retry-after"));
    // Still trying a few seconds on: the host did not exit.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!starting.is_finished(), "the host gave up or started without its database");
    pg.restart();
    let mut host = tokio::task::spawn_blocking(move || starting.join().expect("the host started")).await.expect("join");
    host.admin_key = admin;
    assert_eq!(wait_health(&host, 200).await["status"], "ok");
    let (_user, key, _id) = host.create_key(json!({"name": "late"})).await;
    assert_eq!(send_chat(&host, &key, &chat_body("now")).await, 200);
}

/// Does `r` (a receipt as served) verify with `key`, by the documented rule
/// (docs/api.md#receipts; the same check as the chat tests').
fn verify_receipt(key: &ed25519_dalek::VerifyingKey, r: &Value) -> bool {
    use base64::Engine as _;
    use ed25519_dalek::Verifier;
    use sha2::{Digest, Sha256};
    let Ok(sig) = base64::engine::general_purpose::STANDARD.decode(r["signature"].as_str().unwrap_or_default()) else { return false };
    let Ok(sig) = ed25519_dalek::Signature::from_slice(&sig) else { return false };
    let canonical = serde_json::to_vec(&r["receipt"]).expect("canonical: serde_json sorts keys");
    let msg = match r.get("batch") {
        None => canonical,
        Some(batch) => {
            let mut h = Sha256::digest([&[0u8][..], &canonical].concat()).to_vec();
            for step in batch["path"].as_array().expect("path") {
                let sib = hex::decode(step["hash"].as_str().expect("hash")).expect("hex");
                let pair = if step["side"] == "left" { [sib, h].concat() } else { [h, sib].concat() };
                h = Sha256::digest([&[1u8][..], &pair].concat()).to_vec();
            }
            if hex::encode(&h) != batch["root"].as_str().expect("root") {
                return false;
            }
            format!("gatehouse-receipts-v1:{}", hex::encode(&h)).into_bytes()
        }
    };
    key.verify(&msg, &sig).is_ok()
}

async fn a_receipt_signed_by_host_a_verifies_with_the_keys_host_c_lists(fleet: &Fleet) {
    use base64::Engine as _;
    let (_user, key, _id) = fleet.host(0).create_key(json!({"name": "receipts"})).await;
    let answer: Value = fleet
        .host(0)
        .client
        .post(fleet.host(0).url("/chat/completions"))
        .bearer_auth(&key)
        .json(&chat_body("sign me"))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    let url = answer["metadata"]["smltp"]["receipt_url"].as_str().expect("a receipt url").to_owned();
    let r: Value = fleet.host(0).admin(Method::GET, &url).send().await.expect("receipt").json().await.expect("json");
    let r = r["data"].clone();
    let signer = r["receipt"]["signing_key_id"].as_str().expect("signing_key_id").to_owned();
    let listed: Value =
        fleet.host(2).admin(Method::GET, "/api/receipts/public-key").send().await.expect("keys").json().await.expect("json");
    let listed = listed["data"].clone();
    assert_ne!(listed["keyId"], signer.as_str(), "host C signs with a key of its own");
    let keys = listed["keys"].as_array().expect("keys");
    assert!(keys.len() >= 3, "every host of the fleet registered its key: {listed}");
    let public = keys.iter().find(|k| k["keyId"] == signer.as_str()).expect("host A's key among host C's").clone();
    let bytes: [u8; 32] = base64::engine::general_purpose::STANDARD
        .decode(public["publicKey"].as_str().expect("publicKey"))
        .expect("base64")
        .try_into()
        .expect("32 bytes");
    let public = ed25519_dalek::VerifyingKey::from_bytes(&bytes).expect("a key");
    assert!(verify_receipt(&public, &r), "host A's receipt does not verify with the key host C lists: {r}");
    let mut tampered = r.clone();
    tampered["receipt"]["served_model"] = json!("openai/gpt-4o");
    assert!(!verify_receipt(&public, &tampered), "a changed receipt still verifies");
}

/// `gatehouse <args> --config <host 0's config>` against the fleet's database: stdout, or a panic with stderr.
fn cli(fleet: &Fleet, args: &[&str]) -> String {
    let out = std::process::Command::new(gatehouse_tests::server::binary())
        .args(args)
        .arg("--config")
        .arg(&fleet.host(0).config_path)
        .env("GATEHOUSE_DATABASE_URL", &fleet.url)
        .output()
        .expect("run gatehouse");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "gatehouse {args:?}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

async fn the_key_and_audit_commands_work_on_the_fleets_database(fleet: &Fleet) {
    let created = cli(fleet, &["keys", "create-admin", "--name", "from the cli"]);
    let secret = created.lines().map(str::trim).find(|l| l.starts_with("sk-")).expect("the new key in the output").to_owned();
    let id = created.split_whitespace().nth(3).expect("the key id").trim_end_matches(';').to_owned();
    // Written to the fleet's database, not a file next to the config: every host knows it at once.
    for h in 0..3 {
        let r = fleet.host(h).client.get(fleet.host(h).url("/api/admin/users")).bearer_auth(&secret).send().await.expect("send");
        assert_eq!(r.status().as_u16(), 200, "host {h} refuses the key the CLI created");
    }
    assert!(cli(fleet, &["keys", "list"]).lines().any(|l| l.starts_with(&format!("{id}\t"))), "`keys list` misses {id}");
    cli(fleet, &["keys", "revoke", &id]);
    let listed = cli(fleet, &["keys", "list"]);
    assert!(listed.lines().any(|l| l.starts_with(&format!("{id}\t")) && l.ends_with("revoked")), "{listed}");
    // The chain the hosts and the CLI wrote, verified offline from the database.
    let report: Value = serde_json::from_str(&cli(fleet, &["audit", "verify"])).expect("a JSON report");
    assert_eq!(report["ok"], true, "{report}");
    assert!(report["records"].as_u64().expect("records") > 3, "{report}");
}

/// The kill loop of `tests/examples/kill_loop.rs --fleet`, two cycles: one of three hosts SIGKILLed per cycle.
async fn acknowledged_writes_survive_a_host_of_the_fleet_killed_under_load(pg: &TempPostgres) {
    let opts = gatehouse_tests::kill_loop::Options {
        cycles: 2,
        chat_workers: 2,
        min_run: Duration::from_millis(800),
        max_run: Duration::from_millis(1500),
        postgres: Some(pg.create_database("killloop")),
        hosts: 3,
        ..Default::default()
    };
    let report = gatehouse_tests::kill_loop::run(opts).await.unwrap_or_else(|e| panic!("{e:#}"));
    println!("fleet {report}");
    assert_eq!(report.cycles, 2);
    assert_eq!(report.lost, 0);
    assert!(report.acknowledged > 0, "nothing was acknowledged before the kills: the test proved nothing");
    assert!(report.writes_checked >= report.acknowledged, "{report}");
}

/// A single host on redb grows into a fleet: it serves (keys, chats, audit,
/// a webhook delivery it is left holding), stops; `gatehouse db import`
/// copies its data dir into an empty database; a host on PostgreSQL then
/// accepts the same key, shows the same usage, delivers the held delivery
/// with the same id, and the chain verifies (`gatehouse db verify`).
async fn a_single_host_on_redb_moves_to_postgres_with_db_import(pg: &TempPostgres) {
    let receiver = Receiver::default();
    receiver.hold.store(true, std::sync::atomic::Ordering::SeqCst);
    let hook = receiver.clone().start().await;
    let webhooks = "[webhooks]\nallow_private = true\npoll_interval_ms = 200\n";
    let mut single = Server::builder().toml(webhooks).start();
    let (_user, key, key_id) = single.create_key(json!({"name": "moving house"})).await;
    for i in 0..3 {
        assert_eq!(send_chat(&single, &key, &chat_body(&format!("before the move {i}"))).await, 200);
    }
    let created: Value = single
        .admin(Method::POST, "/api/admin/webhooks")
        .json(&json!({"url": hook, "events": ["webhook:test"], "description": "moves along"}))
        .send()
        .await
        .expect("create endpoint")
        .json()
        .await
        .expect("json");
    let endpoint = created["data"]["endpoint"]["id"].as_str().unwrap_or_else(|| panic!("{created}")).to_owned();
    let queued: Value =
        single.admin(Method::POST, &format!("/api/admin/webhooks/{endpoint}/test")).send().await.expect("test").json().await.expect("json");
    let delivery = queued["data"]["deliveryId"].as_str().unwrap_or_else(|| panic!("{queued}")).to_owned();
    assert_eq!(receiver.wait_for(1, Duration::from_secs(10)).await, std::slice::from_ref(&delivery), "the single host sent it");
    let usage = key_usage(&single, &key_id).await;
    let records = single.audit_total("").await;
    single.terminate();
    receiver.hold.store(false, std::sync::atomic::Ordering::SeqCst);

    let url = pg.create_database("imported");
    let config = single.dir.path().join("fleet.toml");
    std::fs::write(&config, "[store]\nbackend = \"postgres\"\npool_size = 4\n").expect("config");
    let gatehouse = |args: &[&str]| {
        std::process::Command::new(gatehouse_tests::server::binary())
            .args(args)
            .arg("--config")
            .arg(&config)
            .env("GATEHOUSE_DATABASE_URL", &url)
            .output()
            .expect("run gatehouse")
    };
    let data_dir = single.data_dir.to_string_lossy().into_owned();
    let out = gatehouse(&["db", "import", "--from", &data_dir]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "db import: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("imported and verified"), "{stdout}");
    let again = gatehouse(&["db", "import", "--from", &data_dir]);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("not empty"), "a second import is refused");

    let mut host = Server::builder()
        .toml(&format!("[store]\nbackend = \"postgres\"\npool_size = 8\n{webhooks}"))
        .env("GATEHOUSE_DATABASE_URL", &url)
        .env("GATEHOUSE_BOOTSTRAP_ADMIN_KEY", &single.admin_key)
        .start();
    host.admin_key = single.admin_key.clone();
    assert_eq!(key_usage(&host, &key_id).await, usage, "the same usage on the fleet");
    let ids = receiver.wait_for(2, Duration::from_secs(20)).await;
    assert_eq!(ids[1], delivery, "the delivery the single host held goes out from the fleet with its id: {ids:?}");
    assert_eq!(send_chat(&host, &key, &chat_body("after the move")).await, 200, "the same key works on the fleet");
    assert_eq!(key_usage(&host, &key_id).await["requests"], usage["requests"].as_u64().expect("requests") + 1);
    assert!(host.audit_total("").await > records, "the fleet's chain goes on from the host's");
    let verified = gatehouse(&["db", "verify"]);
    let report: Value = serde_json::from_slice(&verified.stdout).expect("a JSON report");
    assert_eq!(report["ok"], true, "{report}");
}

/// What `reload/m` answers on `host` (the content of the provider's reply), or the error.
async fn reload_answer(host: &Server) -> Result<String, String> {
    let body = json!({"index": "Zero-Knowledge", "models": ["reload/m"], "prompt": "hello", "prompt_shield": {"enabled": false}});
    let (st, v) = host.chat_as(&host.admin_key, &body).await;
    if st != 200 {
        return Err(format!("{st}: {v}"));
    }
    Ok(v["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_owned())
}

/// How long a registry change may take to serve on every host: the NOTIFY
/// at commit, then each host fetches, compiles (a debug build of the engine,
/// three hosts on two cores; the compiled-artifact cache is shared, so
/// usually one compiles and the others load) and swaps. Measured: under
/// 100 ms for each change; the bound leaves room for a cold cache.
const REGISTRY_BOUND: Duration = Duration::from_secs(10);

/// Poll every host until `reload/m` answers `want` on all of them, within
/// [`REGISTRY_BOUND`]; returns how long the slowest took.
async fn every_host_answers(fleet: &Fleet, want: &str) -> Duration {
    let at = Instant::now();
    let mut pending: Vec<usize> = (0..fleet.hosts.len()).collect();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for h in pending {
            let got = reload_answer(fleet.host(h)).await;
            if got.as_deref() != Ok(want) {
                assert!(at.elapsed() < REGISTRY_BOUND, "host {h} does not serve {want:?} after {:?}: {got:?}", at.elapsed());
                still.push(h);
            }
        }
        pending = still;
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    at.elapsed()
}

async fn publish_plugin(host: &Server, bytes: Vec<u8>) -> (u16, Value) {
    let r = host
        .admin(Method::POST, "/api/admin/plugins")
        .header("content-type", "application/wasm")
        .body(bytes)
        .send()
        .await
        .expect("publish");
    let st = r.status().as_u16();
    (st, r.json().await.expect("json"))
}

async fn a_plugin_published_once_serves_on_every_host_a_broken_upload_changes_none_and_a_rollback_reaches_all(pg: &TempPostgres) {
    use gatehouse_tests::plugins;
    let config = "[policies]\ndefault = \"open\"\n[providers.reload]\nplugin = \"provider-reload\"\nbase_url = \"echo://local\"\n";
    let fleet = Fleet::start_with(pg, "registry", 3, config, &[(plugins::OPEN_POLICY, "open.wasm")]);
    for h in 0..3 {
        assert!(reload_answer(fleet.host(h)).await.is_err(), "host {h} serves reload/m before it is published");
    }
    let component = |path: &str| std::fs::read(path).expect("test component");

    // Published once, on host A: every host serves it.
    let (st, v) = publish_plugin(fleet.host(0), component(plugins::RELOAD_A)).await;
    assert_eq!((st, v["data"]["plugin"]["version"].as_u64()), (201, Some(1)), "{v}");
    let took = every_host_answers(&fleet, "answer from version a").await;
    println!("version 1 served by all three hosts after {took:?}");
    let (st, v) = publish_plugin(fleet.host(2), component(plugins::RELOAD_B)).await;
    assert_eq!((st, v["data"]["plugin"]["version"].as_u64()), (201, Some(2)), "{v}");
    let took = every_host_answers(&fleet, "answer from version b").await;
    println!("version 2 served by all three hosts after {took:?}");

    // A broken upload on host B: refused, stored nowhere, and no host's plugin changes.
    let (st, v) = publish_plugin(fleet.host(1), b"\0asm but not really".to_vec()).await;
    assert_eq!(st, 400, "{v}");
    assert!(v["error"]["message"].as_str().unwrap_or_default().contains("not a valid WebAssembly component"), "{v}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    for h in 0..3 {
        assert_eq!(reload_answer(fleet.host(h)).await.as_deref(), Ok("answer from version b"), "host {h} after the refused upload");
        let versions: Value = fleet
            .host(h)
            .admin(Method::GET, "/api/admin/plugins/provider-reload/versions")
            .send()
            .await
            .expect("versions")
            .json()
            .await
            .expect("json");
        assert_eq!(versions["data"].as_array().map(Vec::len), Some(2), "host {h}: the refused upload was not kept: {versions}");
    }

    // A rollback on host B reaches every host.
    let r = fleet.host(1).admin(Method::POST, "/api/admin/plugins/provider-reload/rollback").send().await.expect("rollback");
    let (st, v): (u16, Value) = (r.status().as_u16(), r.json().await.expect("json"));
    assert_eq!((st, v["data"]["plugin"]["version"].as_u64()), (200, Some(1)), "{v}");
    let took = every_host_answers(&fleet, "answer from version a").await;
    println!("the rollback served by all three hosts after {took:?}");
    // Each host audits its own loads, as for a file drop (appended just after the swap).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let loads = fleet.host(0).audit_total("type=plugin_management&search=plugin_reloaded").await;
        if loads >= 3 * 2 {
            break;
        }
        assert!(Instant::now() < deadline, "every host reloads twice (version 2, then the rollback): {loads} records");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hosts_on_one_postgres_keep_every_promise() {
    let mut pg = TempPostgres::start();
    a_single_host_on_redb_moves_to_postgres_with_db_import(&pg).await;
    limit_100_with_3_hosts_and_50_clients_each_admits_exactly_100(&pg).await;
    an_idempotent_duplicate_on_two_hosts_at_once_runs_and_is_billed_once(&pg).await;
    a_key_revoked_on_host_a_is_refused_on_host_c_within_the_bound(&pg).await;
    a_host_killed_holding_a_delivery_has_it_delivered_by_another_with_the_same_id(&pg).await;
    a_plugin_published_once_serves_on_every_host_a_broken_upload_changes_none_and_a_rollback_reaches_all(&pg).await;
    acknowledged_writes_survive_a_host_of_the_fleet_killed_under_load(&pg).await;
    let fleet = postgres_stopped_and_restarted_under_load_loses_nothing_acknowledged(&mut pg).await;
    a_host_started_while_postgres_is_down_answers_degraded_and_serves_once_it_returns(&mut pg).await;
    a_receipt_signed_by_host_a_verifies_with_the_keys_host_c_lists(&fleet).await;
    the_key_and_audit_commands_work_on_the_fleets_database(&fleet).await;
    // After all that, the one chain the three hosts wrote verifies (from any of them).
    for h in 0..3 {
        let v: Value =
            fleet.host(h).admin(Method::GET, "/api/admin/audit/verify").send().await.expect("verify").json().await.expect("json");
        assert_eq!(v["data"]["ok"], true, "host {h}: {v}");
        assert!(v["data"]["records"].as_u64().expect("records") > 3, "{v}");
    }
}
