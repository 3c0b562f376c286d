//! Per-call overhead of each plugin world: a fresh store from the
//! pre-instantiated component, the call, and the drop — what every request
//! pays per plugin. Prints median, p90 and p99 over many calls.
//!
//! Run: `cargo bench -p gatehouse --bench plugin_calls [-- FILTER]`
//! (FILTER: only rows whose label contains it, e.g. `policy`).
//!
//! Rows marked "small" measure the fixed cost (tiny inputs); the others show
//! what a realistic 2 KB prompt adds inside the guest. The retriever world
//! has a row only when a retriever component is bundled.
//!
//! `GATEHOUSE_BENCH_PLUGINS=DIR` loads DIR's components over the bundled
//! ones of the same name (the watched folder's override), so a guest change
//! or a guest build option can be measured without rebuilding the host.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse_plugin_host::plugin::{policy_calls as pc, provider_calls as pv, retriever_calls as rc, shield_calls as sc};
use gatehouse_plugin_host::{Kind, LogSink, PluginRuntime, PluginsConfig, Registry};

/// Calls per row (shield rows with 2 KB inputs use a fifth of it).
const N: usize = 5000;
const WARMUP: usize = 200;

struct Bench {
    filter: Option<String>,
}

impl Bench {
    fn run(&self, label: &str, n: usize, mut f: impl FnMut()) {
        if self.filter.as_deref().is_some_and(|w| !label.contains(w)) {
            return;
        }
        for _ in 0..WARMUP {
            f();
        }
        let mut samples: Vec<Duration> = (0..n)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect();
        samples.sort();
        let pick = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1e6;
        println!(
            "{label:<44} n={:<5} median {:>7.1} µs   p90 {:>7.1} µs   p99 {:>7.1} µs",
            samples.len(),
            pick(0.5),
            pick(0.9),
            pick(0.99)
        );
    }
}

fn chat(text: &str) -> pv::ChatRequest {
    pv::ChatRequest {
        model: "default".into(),
        messages: vec![pv::Message { role: pv::Role::User, content: text.into() }],
        temperature: 0.7,
        max_tokens: 1000,
        stream: false,
        stop: vec![],
        extra_json: String::new(),
    }
}

fn providers(b: &Bench, reg: &Registry, prompt: &str) {
    let echo_up = pv::Upstream { base_url: "echo://local".into(), api_key: None, config_json: "{}".into() };
    if let Some(p) = reg.of_kind("provider-echo", Kind::Provider) {
        let ev = pv::StreamEvent { event: String::new(), data: r#"{"delta":"hi"}"#.into() };
        b.run("provider  parse-stream-event small (echo)", N, || {
            p.parse_stream_event(&echo_up, "", &ev).expect("call").expect("event");
        });
        let small = chat("hello");
        b.run("provider  build-request small (echo)", N, || {
            p.build_request(&echo_up, &small).expect("call").expect("request");
        });
        let big = chat(prompt);
        b.run("provider  build-request 2 KB (echo)", N, || {
            p.build_request(&echo_up, &big).expect("call").expect("request");
        });
    }
    if let Some(p) = reg.of_kind("provider-openai", Kind::Provider) {
        let up = pv::Upstream { base_url: "http://127.0.0.1:1/v1".into(), api_key: Some("sk-x".into()), config_json: "{}".into() };
        let big = chat(prompt);
        b.run("provider  build-request 2 KB (openai)", N, || {
            p.build_request(&up, &big).expect("call").expect("request");
        });
        let body = r#"{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#;
        b.run("provider  parse-response small (openai)", N, || {
            p.parse_response(&up, 200, body).expect("call").expect("completion");
        });
        let ev = pv::StreamEvent {
            event: String::new(),
            data: r#"{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}"#.into(),
        };
        b.run("provider  parse-stream-event small (openai)", N, || {
            p.parse_stream_event(&up, "", &ev).expect("call").expect("event");
        });
        // One attempt's calls: a fresh instance per call, then one instance for the attempt.
        let small = chat("hello");
        b.run("provider  attempt build+parse, per call (openai)", N, || {
            p.build_request(&up, &small).expect("call").expect("request");
            p.parse_response(&up, 200, body).expect("call").expect("completion");
        });
        b.run("provider  attempt build+parse, session (openai)", N, || {
            let mut s = p.provider_session().expect("session");
            s.build_request(&up, &small).expect("call").expect("request");
            s.parse_response(&up, 200, body).expect("call").expect("completion");
        });
        b.run("provider  stream build+12 events, per call", N / 5, || {
            p.build_request(&up, &small).expect("call").expect("request");
            for _ in 0..12 {
                p.parse_stream_event(&up, "", &ev).expect("call").expect("event");
            }
        });
        b.run("provider  stream build+12 events, session", N / 5, || {
            let mut s = p.provider_session().expect("session");
            s.build_request(&up, &small).expect("call").expect("request");
            for _ in 0..12 {
                s.parse_stream_event(&up, "", &ev).expect("call").expect("event");
            }
        });
    }
}

fn policies(b: &Bench, reg: &Registry, prompt: &str) {
    let Some(p) = reg.of_kind("internal", Kind::Policy) else {
        println!("(no `internal` policy loaded)");
        return;
    };
    let ctx = |text: &str| pc::PolicyContext {
        policy_name: "internal".into(),
        key_id: "key".into(),
        user_id: "user".into(),
        group_id: None,
        models: vec!["echo/default".into()],
        index: "Zero-Knowledge".into(),
        messages: vec![pc::Message { role: pc::Role::User, content: text.into() }],
        shield_disable_requested: false,
        config_json: "{}".into(),
    };
    let small = ctx("hello");
    b.run("policy    evaluate small (internal)", N, || {
        p.evaluate(&small).expect("call");
    });
    let big = ctx(prompt);
    b.run("policy    evaluate 2 KB (internal)", N, || {
        p.evaluate(&big).expect("call");
    });
}

fn shields(b: &Bench, reg: &Registry, prompt: &str) {
    for name in reg.names_of(Kind::Shield) {
        let Some(p) = reg.of_kind(&name, Kind::Shield) else { continue };
        b.run(&format!("shield    make-canary small ({name})"), N, || {
            p.make_canary("00112233445566778899aabbccddeeff").expect("call");
        });
        let req = |text: &str| sc::InspectRequest {
            stage: sc::Stage::Input,
            strictness: sc::Strictness::Balanced,
            config_json: r#"{"pii":"redact","dlp":"block"}"#.into(),
            texts: vec![text.into()],
        };
        let small = req("hello");
        b.run(&format!("shield    inspect small ({name})"), N, || {
            p.inspect(&small).expect("call");
        });
        let big = req(prompt);
        b.run(&format!("shield    inspect 2 KB ({name})"), N / 5, || {
            p.inspect(&big).expect("call");
        });
    }
}

fn retrievers(b: &Bench, reg: &Registry) {
    let names = reg.names_of(Kind::Retriever);
    if names.is_empty() {
        println!("(no retriever component bundled: no retriever row)");
    }
    for name in names {
        let Some(p) = reg.of_kind(&name, Kind::Retriever) else { continue };
        let req = rc::RetrieveRequest {
            index: "bench".into(),
            query: "quarterly report".into(),
            k: 3,
            filters: vec![],
            config_json: "{}".into(),
        };
        b.run(&format!("retriever retrieve small ({name})"), N, || {
            // A retriever without an index configured answers with an error value; the call is what we time.
            let _ = p.retrieve(&req).expect("call");
        });
    }
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let b = Bench { filter };
    let data = tempfile::tempdir().expect("tmp");
    let config = PluginsConfig { dir: std::env::var_os("GATEHOUSE_BENCH_PLUGINS").map(Into::into), ..PluginsConfig::default() };
    let rt = PluginRuntime::start(&config, data.path(), gatehouse_bundled::BUNDLED, Arc::new(LogSink)).expect("runtime");
    let reg = rt.snapshot();
    let prompt = "Please summarise the attached quarterly report for the board. ".repeat(32); // ~2 KB

    providers(&b, &reg, &prompt);
    policies(&b, &reg, &prompt);
    shields(&b, &reg, &prompt);
    retrievers(&b, &reg);
    println!("(instantiate + call + drop, one thread; {} plugins loaded)", reg.len());
    if let Some(dir) = &config.dir {
        let from_dir = reg.list().into_iter().filter(|p| matches!(p.source, gatehouse_plugin_host::Source::File(_))).count();
        println!("({from_dir} of them from {})", dir.display());
    }
}
