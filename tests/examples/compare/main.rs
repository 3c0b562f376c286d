//! Comparative benchmark: the same OpenAI-style chat traffic sent straight to
//! a fast mock upstream, through nginx, through LiteLLM's proxy and through
//! Gatehouse (durable writes on, then relaxed), on one machine. Prints one
//! table (see `docs/benchmarks.md`).
//!
//! Run: `bash tests/bench/compare.sh` (installs nginx, LiteLLM and oha when
//! missing, then runs this with their paths), or directly:
//! `cargo run --release -p gatehouse-tests --example compare -- --oha PATH --litellm PATH`
//!
//! Cores: the gateway under test on core 1 (`taskset -c 1`); the mock, `oha`
//! and this driver (which also is the streaming client) on core 0.
//!
//! Options: `--secs N` (per phase, default 10), `--rates 200,1000`,
//! `--only direct,nginx,litellm,durable,relaxed` (also `pg1`: one host on
//! PostgreSQL, `pg3`: three hosts on PostgreSQL behind nginx, `pg1k` and
//! `pg3k`: the same with 16 keys, nginx in front giving each request one —
//! only when named; `fleet.rs`), `--delay-ms D` (the mock's
//! answer time, default 1), `--chunk-delay-ms C` (between stream deltas,
//! default 1), `--conns N` (max-throughput connections, default 64),
//! `--rounds N` (run every target N times, round by round, then print the
//! medians; default 1), `--pgo PATH` (also a row for that Gatehouse binary,
//! durable: the profile-guided build `tests/bench/pgo.sh` makes; target tag
//! `pgo`), `--prompt-bytes N` (send a user message of about N
//! bytes of prose instead of the one-sentence default, so the plugins that
//! read every byte show their cost on realistic prompts), `--markdown FILE`
//! (also write the tables there).
//!
//! Rounds: on a shared machine a run of one target can be a fifth slower
//! than the next. With `--rounds N` each round runs every target once, in
//! order, so nginx and Gatehouse of one round see the same machine; the
//! ratios to nginx are taken within each round and their median reported.

mod fleet;
mod load;
mod mock;
mod procstat;
mod table;
mod targets;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use load::Call;
use table::Row;

struct Opts {
    oha: PathBuf,
    litellm: PathBuf,
    secs: u32,
    rates: Vec<u32>,
    only: Vec<String>,
    delay_ms: u64,
    chunk_delay_ms: u64,
    conns: u32,
    rounds: u32,
    prompt_bytes: Option<usize>,
    markdown: Option<PathBuf>,
    pgo: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> anyhow::Result<Opts> {
    let mut o = Opts {
        oha: PathBuf::from("oha"),
        litellm: PathBuf::from("litellm"),
        secs: 10,
        rates: vec![200, 1000],
        only: vec![],
        delay_ms: 1,
        chunk_delay_ms: 1,
        conns: 64,
        rounds: 1,
        prompt_bytes: None,
        markdown: None,
        pgo: None,
    };
    for pair in args.chunks(2) {
        let v = pair.get(1).with_context(|| format!("{} needs a value", pair[0]))?;
        match pair[0].as_str() {
            "--oha" => o.oha = v.into(),
            "--litellm" => o.litellm = v.into(),
            "--secs" => o.secs = v.parse()?,
            "--rates" => o.rates = v.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--only" => o.only = v.split(',').map(str::to_owned).collect(),
            "--delay-ms" => o.delay_ms = v.parse()?,
            "--chunk-delay-ms" => o.chunk_delay_ms = v.parse()?,
            "--conns" => o.conns = v.parse()?,
            "--rounds" => o.rounds = v.parse::<u32>()?.max(1),
            "--prompt-bytes" => o.prompt_bytes = Some(v.parse()?),
            "--markdown" => o.markdown = Some(v.into()),
            "--pgo" => o.pgo = Some(v.into()),
            other => bail!("unknown option {other}"),
        }
    }
    Ok(o)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("mock") {
        let o = parse_args(&args[1..].iter().filter(|a| *a != "--port").cloned().collect::<Vec<_>>()).ok();
        let port = args.iter().position(|a| a == "--port").and_then(|i| args.get(i + 1)).and_then(|p| p.parse().ok()).unwrap_or(0);
        let (d, c) = o.map_or((1, 1), |o| (o.delay_ms, o.chunk_delay_ms));
        return mock::serve(port, Duration::from_millis(d), Duration::from_millis(c));
    }
    if args.first().map(String::as_str) == Some("gatehouse-config") {
        // `compare gatehouse-config PORT MOCK_PORT DATA_DIR DURABLE`: the benchmark's config on stdout.
        let [port, mock_port, data, durable] = &args[1..] else {
            bail!("usage: compare gatehouse-config PORT MOCK_PORT DATA_DIR true|false");
        };
        print!("{}", targets::gatehouse_config(port.parse()?, mock_port.parse()?, std::path::Path::new(data), durable.parse()?));
        return Ok(());
    }
    let mut opts = parse_args(&args)?;
    // Targets run in their own directories: make relative tool paths absolute.
    for p in [&mut opts.oha, &mut opts.litellm].into_iter().chain(opts.pgo.as_mut()) {
        if let Ok(abs) = std::fs::canonicalize(&*p) {
            *p = abs;
        }
    }
    // This driver is the streaming client: keep it on core 0 with the mock and oha.
    let _ = Command::new("taskset").args(["-a", "-p", "-c", "0", &std::process::id().to_string()]).stdout(Stdio::null()).status();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(run(opts))
}

/// The mock as its own process on core 0.
struct MockProc(Child);

impl Drop for MockProc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_mock(o: &Opts) -> anyhow::Result<(MockProc, u16)> {
    let port = targets::free_port()?;
    let exe = std::env::current_exe()?;
    let child = Command::new("taskset")
        .arg("-c")
        .arg("0")
        .arg(exe)
        .args([
            "mock",
            "--port",
            &port.to_string(),
            "--delay-ms",
            &o.delay_ms.to_string(),
            "--chunk-delay-ms",
            &o.chunk_delay_ms.to_string(),
        ])
        .stdout(Stdio::null())
        .spawn()?;
    let mock = MockProc(child);
    // On a thread of its own: a blocking client may not be dropped inside the driver's runtime.
    let ready = std::thread::spawn(move || {
        let client = reqwest::blocking::Client::new();
        let t0 = Instant::now();
        while client.get(format!("http://127.0.0.1:{port}/health")).send().is_err() {
            if t0.elapsed() > Duration::from_secs(10) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    });
    if !ready.join().unwrap_or(false) {
        bail!("the mock did not start");
    }
    Ok((mock, port))
}

/// Keys of the many-keys fleet rows (`pg1k`, `pg3k`).
const FLEET_KEYS: usize = 16;

/// The fleet rows (`pg1`, `pg3`, `pg1k`, `pg3k`) run only when `--only` names them: they
/// need PostgreSQL and are not part of the comparison with other gateways.
fn wanted(o: &Opts, tag: &str) -> bool {
    o.only.iter().any(|w| w == tag) || (o.only.is_empty() && !tag.starts_with("pg"))
}

/// One request of each kind must succeed and carry the mock's answer.
async fn sanity(t: &targets::Target) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let send = |c: &Call| {
        let mut r = client.post(&c.url).header("content-type", "application/json").body(c.body.clone());
        for (k, v) in &c.headers {
            r = r.header(k, v);
        }
        r.send()
    };
    let r = send(&t.json).await?;
    let status = r.status();
    let text = r.text().await?;
    if status != 200 || !text.contains(mock::WORDS[0].trim()) {
        bail!("JSON request: HTTP {status}: {}", text.chars().take(300).collect::<String>());
    }
    let r = send(&t.stream).await?;
    let status = r.status();
    let text = r.text().await?;
    // Gatehouse re-chunks the text (its output scan holds back a short tail), so look for frames, not words.
    if status != 200 || !text.contains("\"content\"") || !text.contains("[DONE]") {
        bail!("stream request: HTTP {status}: {}", text.chars().take(300).collect::<String>());
    }
    Ok(())
}

async fn measure(o: &Opts, t: &targets::Target, row: &mut Row) -> anyhow::Result<()> {
    // The process trees to measure: the parts of a fleet, or the one process.
    let roots: Vec<(String, u32)> =
        if t.parts.is_empty() { t.pid.map(|p| (String::new(), p)).into_iter().collect() } else { t.parts.clone() };
    let sum = |f: fn(u32) -> u64| (!roots.is_empty()).then(|| roots.iter().map(|(_, p)| f(*p)).sum::<u64>());
    tokio::time::sleep(Duration::from_secs(1)).await;
    row.idle_kib = sum(procstat::rss_kib);
    sanity(t).await?;
    // Warm-up: connections, caches, lazy plugin instances.
    load::oha(&o.oha, &t.json, Some(200), 16, 2)?;
    let _ = load::streams(&t.stream, t.kind, 50, 1).await;
    for &rate in &o.rates {
        eprintln!("  {}: JSON at {rate} req/s", t.name);
        let r = load::oha(&o.oha, &t.json, Some(rate), 64, o.secs)?;
        row.fixed.push((rate, r));
    }
    for &rate in &o.rates {
        eprintln!("  {}: streams at {rate} req/s", t.name);
        let r = load::streams(&t.stream, t.kind, rate, o.secs).await;
        row.streams.push((rate, r));
    }
    eprintln!("  {}: max throughput, {} connections", t.name, o.conns);
    let before: Vec<u64> = roots.iter().map(|(_, p)| procstat::cpu_ticks(*p)).collect();
    let r = load::oha(&o.oha, &t.json, None, o.conns, o.secs)?;
    let after: Vec<u64> = roots.iter().map(|(_, p)| procstat::cpu_ticks(*p)).collect();
    if r.ok > 0 && !roots.is_empty() {
        let per_req = |b: u64, a: u64| a.saturating_sub(b) as f64 / procstat::clk_tck() as f64 * 1e6 / r.ok as f64;
        row.cpu_us_per_req = Some(per_req(before.iter().sum(), after.iter().sum()));
        if !t.parts.is_empty() {
            row.cpu_parts =
                roots.iter().zip(before.iter().zip(&after)).map(|((name, _), (b, a))| (name.clone(), per_req(*b, *a))).collect();
        }
    }
    row.max = Some(r);
    row.peak_kib = sum(procstat::hwm_kib);
    Ok(())
}

async fn run(o: Opts) -> anyhow::Result<()> {
    let load_before = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let started = chrono::Utc::now();
    let gh_wanted = ["durable", "relaxed", "pg1", "pg3", "pg1k", "pg3k"].iter().any(|t| wanted(&o, t));
    // Builds the release binary (and the bundled plugins) if needed.
    let gatehouse_bin = if gh_wanted { gatehouse_tests::server::binary().to_path_buf() } else { PathBuf::new() };
    let (mock, mock_port) = start_mock(&o)?;
    let mock_pid = mock.0.id();

    let pgo_bin = o.pgo.clone().filter(|_| wanted(&o, "pgo"));
    type Starter<'a> = Box<dyn Fn() -> anyhow::Result<targets::Target> + 'a>;
    let mut list: Vec<(&str, &str, Starter)> = vec![
        ("direct", "direct to mock", Box::new(|| Ok(targets::direct(mock_port, mock_pid)))),
        ("nginx", "nginx", Box::new(|| targets::nginx(mock_port))),
        ("litellm", "LiteLLM", Box::new(|| targets::litellm(&o.litellm, mock_port))),
        ("durable", "Gatehouse (durable)", Box::new(|| targets::gatehouse(&gatehouse_bin, mock_port, true))),
        ("relaxed", "Gatehouse (relaxed)", Box::new(|| targets::gatehouse(&gatehouse_bin, mock_port, false))),
        ("pg1", "Gatehouse on PostgreSQL", Box::new(|| fleet::gatehouse_pg(&gatehouse_bin, mock_port, 1, 0))),
        ("pg3", "3 hosts on PostgreSQL behind nginx", Box::new(|| fleet::gatehouse_pg(&gatehouse_bin, mock_port, 3, 0))),
        (
            "pg1k",
            "PostgreSQL, 1 host, 16 keys (nginx in front)",
            Box::new(|| fleet::gatehouse_pg(&gatehouse_bin, mock_port, 1, FLEET_KEYS)),
        ),
        (
            "pg3k",
            "PostgreSQL, 3 hosts, 16 keys (nginx in front)",
            Box::new(|| fleet::gatehouse_pg(&gatehouse_bin, mock_port, 3, FLEET_KEYS)),
        ),
    ];
    if let Some(bin) = &pgo_bin {
        if !bin.is_file() {
            bail!("--pgo {}: no such binary (build it with `bash tests/bench/pgo.sh`)", bin.display());
        }
        list.push(("pgo", "Gatehouse PGO build (durable)", Box::new(move || targets::gatehouse(bin, mock_port, true))));
    }
    // Start-up is measured with a warm compiled-plugin cache: fill it first.
    for bin in gh_wanted.then_some(&gatehouse_bin).into_iter().chain(pgo_bin.as_ref()) {
        eprintln!("warming Gatehouse's compiled-plugin cache ({})", bin.display());
        drop(targets::gatehouse(bin, mock_port, false)?);
    }
    let mut rounds: Vec<Vec<Row>> = Vec::new();
    let mut out = String::new();
    for round in 1..=o.rounds {
        if o.rounds > 1 {
            eprintln!("round {round} of {}", o.rounds);
        }
        let mut rows: Vec<Row> = Vec::new();
        for (tag, name, start) in &list {
            if !wanted(&o, tag) {
                continue;
            }
            eprintln!("{name}: starting");
            rows.push(measure_target(&o, name, start).await);
        }
        let text = table::render(&rows, &o.rates);
        if o.rounds > 1 {
            let section = format!("Round {round} of {} ({} UTC)\n{text}", o.rounds, chrono::Utc::now().format("%H:%M"));
            eprintln!("{section}");
            out.push_str(&section);
            out.push('\n');
        } else {
            out.push_str(&text);
        }
        rounds.push(rows);
    }
    drop(mock);
    let load_after = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let header = format!(
        "Gatehouse comparative benchmark, {} UTC; mock answer time {} ms (+{} ms between stream deltas); {} s per phase; \
         max throughput with {} connections\nloadavg before: {}loadavg after:  {}",
        started.format("%Y-%m-%d %H:%M"),
        o.delay_ms,
        o.chunk_delay_ms,
        o.secs,
        o.conns,
        load_before,
        load_after
    );
    if o.rounds > 1 {
        out.push_str(&format!("Medians of {} rounds (min–max in brackets; ratios to nginx taken within each round)\n", o.rounds));
        out.push_str(&table::render_medians(&rounds, &o.rates));
    }
    println!("{header}\n{out}");
    if let Some(path) = &o.markdown {
        std::fs::write(path, format!("{header}\n{out}"))?;
    }
    Ok(())
}

/// Start one target and measure it; a target that cannot start or fails a
/// check gets a row saying why (with the end of its log on stderr).
async fn measure_target(o: &Opts, name: &str, start: &dyn Fn() -> anyhow::Result<targets::Target>) -> Row {
    let mut row = Row::new(name);
    let started = start().and_then(|mut t| {
        // The list's name, so progress lines tell two Gatehouse builds apart.
        t.name = name.to_owned();
        if let Some(n) = o.prompt_bytes {
            t.use_prompt(&targets::prose(n))?;
        }
        Ok(t)
    });
    match started {
        Ok(t) => {
            row.startup = t.startup;
            if let Err(e) = measure(o, &t, &mut row).await {
                eprintln!("{name}: {e:#}");
                if let Some(log) = t.log.as_ref().and_then(|p| std::fs::read(p).ok()).map(|b| String::from_utf8_lossy(&b).into_owned()) {
                    let lines: Vec<&str> = log.lines().collect();
                    eprintln!("{name}: end of its log:\n{}", lines[lines.len().saturating_sub(40)..].join("\n"));
                }
                row.failure = Some(format!("{e:#}").lines().next().unwrap_or_default().to_owned());
            }
        }
        Err(e) => {
            eprintln!("{name}: could not start: {e:#}");
            row.failure = Some(format!("could not start: {}", format!("{e:#}").lines().next().unwrap_or_default()));
        }
    }
    row
}
