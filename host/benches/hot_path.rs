//! The host's own per-request costs on the chat path, outside the plugins
//! (`plugin_calls` measures those): authentication (SHA-256 of the key and
//! the key lookup: in memory once read, redb for an unknown key), the rate-limit check,
//! request validation, and the usage write through the group commit with
//! durable writes on and off. Prints median, p90 and p99.
//!
//! Run: `cargo bench -p gatehouse --bench hot_path [-- FILTER]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse::api::admin::keys::new_key;
use gatehouse::auth::keys::{ApiKeySecret, KeyHash};
use gatehouse::auth::limits::{BucketSet, Limiter};
use gatehouse::chat::request::{self, TimeoutDefaults};
use gatehouse::config::RateLimits;
use gatehouse_store::Store;
use gatehouse_store::audit::{Audit, category, kind};
use gatehouse_store::model::User;
use gatehouse_store::records::{RequestOutcome, UsageDelta};
use gatehouse_store::redb::RedbStore;

const N: usize = 20_000;
const WARMUP: usize = 500;

struct Bench {
    filter: Option<String>,
}

fn report(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pick = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1e6;
    println!("{label:<52} n={:<6} median {:>8.2} µs   p90 {:>8.2} µs   p99 {:>8.2} µs", samples.len(), pick(0.5), pick(0.9), pick(0.99));
}

impl Bench {
    fn wants(&self, label: &str) -> bool {
        self.filter.as_deref().is_none_or(|w| label.contains(w))
    }

    fn run(&self, label: &str, n: usize, mut f: impl FnMut()) {
        if !self.wants(label) {
            return;
        }
        for _ in 0..WARMUP.min(n) {
            f();
        }
        let samples: Vec<Duration> = (0..n)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect();
        report(label, samples);
    }
}

fn store(durable: bool) -> (tempfile::TempDir, Arc<RedbStore>) {
    let dir = tempfile::tempdir().expect("tmp");
    let s = RedbStore::open(dir.path(), durable).expect("store");
    (dir, Arc::new(s))
}

fn body(messages: usize, words: usize) -> Vec<u8> {
    let text = "lorem ipsum dolor sit amet ".repeat(words / 5 + 1);
    let msgs: Vec<_> =
        (0..messages).map(|i| serde_json::json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": text})).collect();
    serde_json::json!({"model": "openai/gpt-4o-mini", "index": "Zero-Knowledge", "messages": msgs, "temperature": 0.2, "max_tokens": 200})
        .to_string()
        .into_bytes()
}

fn outcome(key_id: &str) -> RequestOutcome {
    RequestOutcome {
        usage: Some(UsageDelta {
            user_id: "usr_bench".into(),
            key_id: key_id.into(),
            group_id: None,
            model: "echo/bench".into(),
            request_id: "req-bench".into(),
            prompt_tokens: 42,
            completion_tokens: 8,
        }),
        ..Default::default()
    }
}

/// `writers` tasks each doing `per_writer` sequential usage writes; returns each write's latency.
fn usage_writes(rt: &tokio::runtime::Runtime, s: &Arc<RedbStore>, writers: usize, per_writer: usize) -> (Vec<Duration>, Duration) {
    let t0 = Instant::now();
    let samples = rt.block_on(async {
        let tasks: Vec<_> = (0..writers)
            .map(|w| {
                let s = s.clone();
                #[expect(clippy::disallowed_methods, reason = "a benchmark's load generator, joined by the benchmark")]
                tokio::spawn(async move {
                    let mut v = Vec::with_capacity(per_writer);
                    for _ in 0..per_writer {
                        let t = Instant::now();
                        s.finish_request(outcome(&format!("key_{w}"))).await.expect("write");
                        v.push(t.elapsed());
                    }
                    v
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.expect("task"));
        }
        all
    });
    (samples, t0.elapsed())
}

fn receipt(bundle_id: &str) -> gatehouse_store::receipts::Receipt {
    let hash = gatehouse_store::receipts::sha256_hex(bundle_id.as_bytes());
    gatehouse_store::receipts::Receipt {
        bundle_id: bundle_id.into(),
        request_id: "req-0123456789abcdef0123456789abcdef".into(),
        request_hash: hash.clone(),
        response_hash: hash.clone(),
        policy: "internal".into(),
        policy_hash: Some(hash),
        shield_verdict: "allow".into(),
        requested_model: "openai/gpt-mock".into(),
        served_model: "openai/gpt-mock".into(),
        key_id: "key_0123456789abcdef".into(),
        created_at: "2026-11-24T15:00:00.000Z".into(),
        completed_at: "2026-11-24T15:00:00.002Z".into(),
        signing_key_id: "0123456789abcdef".into(),
    }
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let b = Bench { filter };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");

    // Authentication, as the middleware does it.
    let (_d, s) = store(false);
    let user = User {
        id: "usr_bench".into(),
        name: "bench".into(),
        email: "bench@example.com".into(),
        created_at: chrono::Utc::now(),
        deactivated_at: None,
    };
    rt.block_on(s.create_user(user, Audit::new(kind::USER_MANAGEMENT, category::ACCESS_CONTROL, "bench user").build())).expect("user");
    let secret = ApiKeySecret::generate();
    let key = new_key("usr_bench", &secret);
    let key_id = key.id.clone();
    rt.block_on(s.create_key(key, Audit::new(kind::API_KEY_MANAGEMENT, category::ACCESS_CONTROL, "bench key").build())).expect("key");
    // Other keys, so the lookup is not in a one-entry table.
    for _ in 0..1000 {
        let k = new_key("usr_bench", &ApiKeySecret::generate());
        rt.block_on(s.create_key(k, Audit::new(kind::API_KEY_MANAGEMENT, category::ACCESS_CONTROL, "bench key").build())).expect("key");
    }
    let header = format!("Bearer {}", secret.expose());
    b.run("auth  sha-256 of the key", N, || {
        std::hint::black_box(KeyHash::of(secret.expose()));
    });
    b.run("auth  header -> hash -> key lookup (in memory)", N, || {
        let token = gatehouse::auth::keys::bearer_token(&header).expect("token");
        let found = futures::executor::block_on(s.find_key_by_hash(&KeyHash::of(token))).expect("lookup").expect("found");
        std::hint::black_box(found);
    });
    let unknown = KeyHash::of("sk-unknown-key-0123456789abcdefghijklmnop");
    b.run("auth  unknown key (redb lookup miss, never cached)", N, || {
        std::hint::black_box(futures::executor::block_on(s.find_key_by_hash(&unknown)).expect("lookup"));
    });

    // Rate limit check (in-memory counters; the quota write it spawns is not timed here).
    {
        let _enter = rt.enter();
        let limiter = Limiter::new(s.clone() as Arc<dyn Store>);
        let limits = RateLimits { per_minute: u64::MAX / 2, per_hour: u64::MAX / 2, per_day: u64::MAX / 2, per_month: u64::MAX / 2 };
        b.run("limits  check (warm counters, one key)", N, || {
            let d = limiter.check(BucketSet::Chat, &key_id, limits, chrono::Utc::now());
            assert!(d.allowed);
        });
    }
    // Let the spawned quota writes drain before the write benchmarks.
    std::thread::sleep(Duration::from_secs(1));

    // Request validation.
    let defaults = TimeoutDefaults { timeout_ms: 60_000, first_token_timeout_ms: 15_000 };
    for (label, raw) in [
        ("validate  1 message, 12 words", body(1, 12)),
        ("validate  1 message, 2 KB", body(1, 400)),
        ("validate  20 messages, 20 KB", body(20, 200)),
    ] {
        b.run(label, N, || {
            std::hint::black_box(request::parse(&raw, defaults).expect("valid"));
        });
    }

    // Receipt signing: one receipt alone (one Ed25519 signature), and the
    // cost per receipt when a commit of 12 signs them together (the batch
    // the 64-connection benchmark commits).
    {
        let dir = tempfile::tempdir().expect("tmp");
        let signer = gatehouse_store::receipts::Signer25519::load_or_create(dir.path()).expect("key");
        let one = receipt("rcpt_bench");
        b.run("receipt  signed alone", N / 4, || {
            std::hint::black_box(signer.sign(one.clone()));
        });
        let twelve: Vec<_> = (0..12).map(|i| receipt(&format!("rcpt_bench_{i}"))).collect();
        if b.wants("receipt  batch of 12") {
            let mut samples = Vec::with_capacity(N / 4);
            for _ in 0..N / 4 {
                let t = Instant::now();
                std::hint::black_box(signer.sign_batch(twelve.clone()));
                samples.push(t.elapsed() / 12);
            }
            report("receipt  batch of 12, per receipt", samples);
        }
    }

    // Usage writes through the group commit: one writer (each write waits for its own commit),
    // then 64 concurrent writers (the commit is shared by whatever queued meanwhile).
    for durable in [true, false] {
        let tag = if durable { "durable" } else { "relaxed" };
        for writers in [1usize, 64] {
            let label = format!("usage write  {tag}, {writers} concurrent");
            if !b.wants(&label) {
                continue;
            }
            let (_d, s) = store(durable);
            let per = if writers == 1 {
                if durable { 500 } else { 5000 }
            } else if durable {
                100
            } else {
                300
            };
            usage_writes(&rt, &s, writers, 20);
            let (samples, wall) = usage_writes(&rt, &s, writers, per);
            let n = samples.len();
            report(&label, samples);
            println!("{:<52} {:.0} writes/s", "", n as f64 / wall.as_secs_f64());
        }
    }
}
