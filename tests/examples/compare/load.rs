//! Load: `oha` for fixed-rate and max-throughput JSON requests (latency from
//! the scheduled send time: `-q RATE --latency-correction`), and a small
//! open-loop client of our own for the time to first token of streams.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use serde_json::Value;

/// One HTTP target: URL, body, extra headers.
#[derive(Debug, Clone)]
pub struct Call {
    pub url: String,
    pub body: String,
    pub headers: Vec<(String, String)>,
}

/// What one `oha` run reports.
#[derive(Debug, Clone, Default)]
pub struct OhaRun {
    /// Responses with status 200.
    pub ok: u64,
    /// Other statuses and transport errors.
    pub errors: u64,
    /// Successful responses per second over the run.
    pub ok_rps: f64,
    /// Seconds.
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    /// Short description of the errors, if any.
    pub error_kinds: String,
}

fn pct(map: &Value, key: &str) -> f64 {
    map.get(key).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// Run `oha` pinned to core 0 for `secs`. `rate`: fixed schedule with
/// latency correction; `None`: as fast as `conns` connections go.
pub fn oha(bin: &Path, call: &Call, rate: Option<u32>, conns: u32, secs: u32) -> anyhow::Result<OhaRun> {
    let mut cmd = Command::new("taskset");
    cmd.arg("-c").arg("0").arg(bin);
    cmd.args(["--no-tui", "--output-format", "json", "-w", "-m", "POST", "-T", "application/json"]);
    cmd.arg("-z").arg(format!("{secs}s")).arg("-c").arg(conns.to_string()).arg("-t").arg("30s");
    if let Some(r) = rate {
        cmd.arg("-q").arg(r.to_string()).arg("--latency-correction");
    }
    for (k, v) in &call.headers {
        cmd.arg("-H").arg(format!("{k}: {v}"));
    }
    cmd.arg("-d").arg(&call.body).arg(&call.url);
    let out = cmd.output().context("run oha")?;
    if !out.status.success() {
        bail!("oha failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let v: Value = serde_json::from_slice(&out.stdout).context("oha JSON output")?;
    let statuses = v.get("statusCodeDistribution").and_then(Value::as_object).cloned().unwrap_or_default();
    let ok = statuses.get("200").and_then(Value::as_u64).unwrap_or(0);
    let other: u64 = statuses.iter().filter(|(k, _)| *k != "200").filter_map(|(_, n)| n.as_u64()).sum();
    let errs = v.get("errorDistribution").and_then(Value::as_object).cloned().unwrap_or_default();
    let transport: u64 = errs.values().filter_map(Value::as_u64).sum();
    let mut kinds: Vec<String> = statuses.iter().filter(|(k, _)| *k != "200").map(|(k, n)| format!("HTTP {k}: {n}")).collect();
    kinds.extend(errs.iter().map(|(k, n)| format!("{k}: {n}")));
    let total = v.pointer("/summary/total").and_then(Value::as_f64).unwrap_or(f64::from(secs));
    // Percentiles of the successful responses when oha reports them apart.
    let lat =
        v.get("latencyPercentilesSuccessful").filter(|m| !m.is_null()).or_else(|| v.get("latencyPercentiles")).cloned().unwrap_or_default();
    Ok(OhaRun {
        ok,
        errors: other + transport,
        ok_rps: ok as f64 / total.max(1e-9),
        p50: pct(&lat, "p50"),
        p90: pct(&lat, "p90"),
        p99: pct(&lat, "p99"),
        error_kinds: kinds.join(", "),
    })
}

/// How a target frames a streamed answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// OpenAI `chat.completion.chunk` frames (mock, nginx, LiteLLM).
    OpenAi,
    /// Gatehouse's own `{"type": "chunk", "data": {...}}` frames.
    Gatehouse,
}

/// Does one SSE `data:` payload carry the first non-empty content delta?
fn is_first_token(kind: StreamKind, data: &str) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(data) else { return false };
    let chunk = match kind {
        StreamKind::OpenAi => &v,
        StreamKind::Gatehouse => {
            if v.get("type").and_then(Value::as_str) != Some("chunk") {
                return false;
            }
            match v.get("data") {
                Some(d) => d,
                None => return false,
            }
        }
    };
    chunk.pointer("/choices/0/delta/content").and_then(Value::as_str).is_some_and(|s| !s.is_empty())
}

/// Result of a streaming run.
#[derive(Debug, Clone, Default)]
pub struct StreamRun {
    /// Time to first token from the scheduled send time, successful streams only.
    pub ttft: Vec<Duration>,
    pub errors: u64,
    pub scheduled: u64,
    pub first_error: Option<String>,
}

impl StreamRun {
    pub fn quantile(&self, q: f64) -> f64 {
        quantile(&self.ttft, q)
    }
}

/// Quantile in seconds of a sample (nearest rank).
pub fn quantile(v: &[Duration], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort();
    let i = ((s.len() as f64 * q).ceil() as usize).clamp(1, s.len()) - 1;
    s[i].as_secs_f64()
}

async fn one_stream(client: &reqwest::Client, call: &Call, kind: StreamKind, scheduled: Instant) -> Result<Duration, String> {
    let mut req = client.post(&call.url).header("content-type", "application/json").body(call.body.clone());
    for (k, v) in &call.headers {
        req = req.header(k, v);
    }
    let resp = req.send().await.map_err(|e| format!("send: {e}"))?;
    if resp.status() != 200 {
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        return Err(format!("HTTP {status}: {}", text.chars().take(200).collect::<String>()));
    }
    let mut body = resp.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    let mut ttft = None;
    while let Some(piece) = body.next().await {
        let piece = piece.map_err(|e| format!("body: {e}"))?;
        if ttft.is_some() {
            continue; // drain the rest, as a client would
        }
        buf.extend_from_slice(&piece);
        while let Some(pos) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&line);
            if let Some(data) = line.trim_end().strip_prefix("data:")
                && ttft.is_none()
                && is_first_token(kind, data.trim_start())
            {
                ttft = Some(scheduled.elapsed());
            }
        }
    }
    ttft.ok_or_else(|| "stream ended without a content delta".to_owned())
}

/// Open-loop streams at `rate` per second for `secs`: request `i` is due at
/// `start + i / rate`, whether or not earlier ones have finished.
pub async fn streams(call: &Call, kind: StreamKind, rate: u32, secs: u32) -> StreamRun {
    let client = reqwest::Client::builder().pool_max_idle_per_host(1024).timeout(Duration::from_secs(30)).build().expect("http client");
    let n = u64::from(rate) * u64::from(secs);
    let out = Arc::new(Mutex::new(StreamRun { scheduled: n, ..StreamRun::default() }));
    let start = Instant::now() + Duration::from_millis(20);
    let period = Duration::from_secs_f64(1.0 / f64::from(rate));
    let mut tasks = Vec::with_capacity(n as usize);
    for i in 0..n {
        let due = start + period.mul_f64(i as f64);
        tokio::time::sleep_until(due.into()).await;
        let (client, call, out) = (client.clone(), call.clone(), out.clone());
        tasks.push(tokio::spawn(async move {
            let r = one_stream(&client, &call, kind, due).await;
            let mut o = out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match r {
                Ok(d) => o.ttft.push(d),
                Err(e) => {
                    o.errors += 1;
                    o.first_error.get_or_insert(e);
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let o = out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    o.clone()
}
