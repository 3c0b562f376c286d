//! The one table: added latency (target minus direct) at fixed rates,
//! streaming added time to first token, max throughput, CPU per request,
//! memory and start-up, with ratios to nginx.

use std::time::Duration;

use crate::load::{OhaRun, StreamRun};

/// Everything measured for one target.
pub struct Row {
    pub name: String,
    pub fixed: Vec<(u32, OhaRun)>,
    pub streams: Vec<(u32, StreamRun)>,
    pub max: Option<OhaRun>,
    pub cpu_us_per_req: Option<f64>,
    pub idle_kib: Option<u64>,
    pub peak_kib: Option<u64>,
    pub startup: Option<Duration>,
    /// Why the target has no figures (not installed, did not start, failed a check).
    pub failure: Option<String>,
}

impl Row {
    pub fn new(name: &str) -> Row {
        Row {
            name: name.into(),
            fixed: vec![],
            streams: vec![],
            max: None,
            cpu_us_per_req: None,
            idle_kib: None,
            peak_kib: None,
            startup: None,
            failure: None,
        }
    }
}

/// Did a fixed-rate run keep its schedule? At least 95 % of the scheduled
/// requests answered 200 per second, and at most 1 % errors.
pub fn held(r: &OhaRun, rate: u32) -> bool {
    let total = r.ok + r.errors;
    r.ok_rps >= 0.95 * f64::from(rate) && (total == 0 || r.errors * 100 <= total)
}

/// Did a streaming run keep its schedule? At most 1 % errors, 95 % of the streams served, and no
/// queue: a median time to first token over 0.5 s (against a 1 ms upstream) means requests waited
/// for the gateway, the open-loop equivalent of not holding the rate.
fn stream_held(r: &StreamRun) -> bool {
    r.scheduled > 0 && r.errors * 100 <= r.scheduled && (r.ttft.len() as u64) * 100 >= r.scheduled * 95 && r.quantile(0.5) <= 0.5
}

fn ms(s: f64) -> String {
    if s.is_nan() { "?".into() } else { format!("{:.2}", s * 1e3) }
}

fn fixed_cell(row: &Row, base: Option<&Row>, rate: u32) -> String {
    let Some((_, r)) = row.fixed.iter().find(|(q, _)| *q == rate) else { return "—".into() };
    if !held(r, rate) {
        return format!("could not hold {rate} rps ({:.0} ok/s, {} errors)", r.ok_rps, r.errors);
    }
    let is_base = base.is_some_and(|b| std::ptr::eq(row, b));
    match base.and_then(|b| b.fixed.iter().find(|(q, _)| *q == rate)).map(|(_, b)| b) {
        Some(b) if !is_base => format!("{} / {} / {}", ms(r.p50 - b.p50), ms(r.p90 - b.p90), ms(r.p99 - b.p99)),
        _ => format!("base {} / {} / {}", ms(r.p50), ms(r.p90), ms(r.p99)),
    }
}

fn stream_cell(row: &Row, base: Option<&Row>, rate: u32) -> String {
    let Some((_, r)) = row.streams.iter().find(|(q, _)| *q == rate) else { return "—".into() };
    if !stream_held(r) {
        let why = r.first_error.as_deref().unwrap_or("queued").chars().take(60).collect::<String>();
        return format!("could not hold {rate} rps ({} ok, {} errors: {why}; TTFT p50 {} ms)", r.ttft.len(), r.errors, ms(r.quantile(0.5)));
    }
    let is_base = base.is_some_and(|b| std::ptr::eq(row, b));
    match base.and_then(|b| b.streams.iter().find(|(q, _)| *q == rate)).map(|(_, b)| b) {
        Some(b) if !is_base => format!("{} / {}", ms(r.quantile(0.5) - b.quantile(0.5)), ms(r.quantile(0.99) - b.quantile(0.99))),
        _ => format!("base {} / {}", ms(r.quantile(0.5)), ms(r.quantile(0.99))),
    }
}

fn mib(k: Option<u64>) -> String {
    k.map_or("—".into(), |k| format!("{:.1}", k as f64 / 1024.0))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b.abs() > 1e-12 && a.is_finite() && b.is_finite() => format!("{:.1}x", a / b),
        _ => "—".into(),
    }
}

/// Added p50 at the highest rate both held, for the ratio column.
fn added_p50(row: &Row, base: Option<&Row>, rate: u32) -> Option<f64> {
    let r = &row.fixed.iter().find(|(q, _)| *q == rate)?.1;
    let b = &base?.fixed.iter().find(|(q, _)| *q == rate)?.1;
    held(r, rate).then_some(r.p50 - b.p50)
}

/// A Markdown table (also readable as plain text).
pub fn render(rows: &[Row], rates: &[u32]) -> String {
    let base = rows.iter().find(|r| r.name.starts_with("direct"));
    let nginx = rows.iter().find(|r| r.name == "nginx");
    let top = rates.iter().copied().max().unwrap_or(1000);
    let mut head = vec!["target".to_owned()];
    for r in rates {
        head.push(format!("added p50 / p90 / p99 ms @ {r} rps"));
    }
    for r in rates {
        head.push(format!("stream added TTFT p50 / p99 ms @ {r} rps"));
    }
    head.extend(
        [
            "max rps (64 conns)",
            "errors (max run)",
            "CPU µs/req",
            "idle RSS MiB",
            "peak RSS MiB",
            "start-up ms",
            &format!("vs nginx: added p50 @ {top} / max rps / CPU"),
        ]
        .map(str::to_owned),
    );
    let mut out = format!("| {} |\n|{}\n", head.join(" | "), "---|".repeat(head.len()));
    for row in rows {
        let mut cells = vec![row.name.clone()];
        if let Some(f) = &row.failure {
            if row.fixed.is_empty() {
                cells.push(format!("not measured: {f}"));
                cells.extend(std::iter::repeat_n(String::new(), head.len() - 2));
                out.push_str(&format!("| {} |\n", cells.join(" | ")));
                continue;
            }
        }
        for &r in rates {
            cells.push(fixed_cell(row, base, r));
        }
        for &r in rates {
            cells.push(stream_cell(row, base, r));
        }
        let max_rps = row.max.as_ref().map(|m| m.ok_rps);
        cells.push(max_rps.map_or("—".into(), |v| format!("{v:.0}")));
        cells.push(row.max.as_ref().map_or("—".into(), |m| {
            if m.errors == 0 { "0".into() } else { format!("{} ({})", m.errors, m.error_kinds.chars().take(80).collect::<String>()) }
        }));
        cells.push(row.cpu_us_per_req.map_or("—".into(), |v| format!("{v:.0}")));
        cells.push(mib(row.idle_kib));
        cells.push(mib(row.peak_kib));
        cells.push(row.startup.map_or("—".into(), |d| format!("{:.0}", d.as_secs_f64() * 1e3)));
        let is_base = base.is_some_and(|b| std::ptr::eq(row, b));
        cells.push(if is_base || nginx.is_none() {
            "—".into()
        } else {
            format!(
                "{} / {} / {}",
                ratio(added_p50(row, base, top), nginx.and_then(|n| added_p50(n, base, top))),
                ratio(max_rps, nginx.and_then(|n| n.max.as_ref().map(|m| m.ok_rps))),
                ratio(row.cpu_us_per_req, nginx.and_then(|n| n.cpu_us_per_req))
            )
        });
        if let Some(f) = &row.failure {
            cells[0] = format!("{} (incomplete: {f})", row.name);
        }
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}
