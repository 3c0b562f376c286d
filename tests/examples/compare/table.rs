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
    /// A fleet's CPU per request process by process (nginx, each host, PostgreSQL).
    pub cpu_parts: Vec<(String, f64)>,
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
            cpu_parts: vec![],
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

/// The table's header and separator lines, and its number of columns.
fn header(rates: &[u32], errors: &str) -> (String, usize) {
    let top = rates.iter().copied().max().unwrap_or(1000);
    let mut head = vec!["target".to_owned()];
    head.extend(rates.iter().map(|r| format!("added p50 / p90 / p99 ms @ {r} rps")));
    head.extend(rates.iter().map(|r| format!("stream added TTFT p50 / p99 ms @ {r} rps")));
    head.extend(["max rps (64 conns)", errors, "CPU µs/req", "idle RSS MiB", "peak RSS MiB", "start-up ms"].map(str::to_owned));
    head.push(format!("vs nginx: added p50 @ {top} / max rps / CPU"));
    (format!("| {} |\n|{}\n", head.join(" | "), "---|".repeat(head.len())), head.len())
}

/// A Markdown table (also readable as plain text).
pub fn render(rows: &[Row], rates: &[u32]) -> String {
    let base = rows.iter().find(|r| r.name.starts_with("direct"));
    let nginx = rows.iter().find(|r| r.name == "nginx");
    let top = rates.iter().copied().max().unwrap_or(1000);
    let (mut out, columns) = header(rates, "errors (max run)");
    for row in rows {
        let mut cells = vec![row.name.clone()];
        if let Some(f) = &row.failure
            && row.fixed.is_empty()
        {
            cells.push(format!("not measured: {f}"));
            cells.extend(std::iter::repeat_n(String::new(), columns - 2));
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
            continue;
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
    out.push_str(&parts(rows));
    out
}

/// Cores of the machine the ceiling below is derived for.
const CEILING_CORES: f64 = 2.0;

/// Below the table: the CPU per request of each process of the rows served
/// by several (a fleet: nginx, each host, PostgreSQL), and the ceiling that
/// cost sets: requests per second two cores could serve if they did nothing
/// else (2 cores / the summed CPU per request of every process).
fn parts(rows: &[Row]) -> String {
    let mut out = String::new();
    for row in rows.iter().filter(|r| !r.cpu_parts.is_empty()) {
        let each: Vec<String> = row.cpu_parts.iter().map(|(name, us)| format!("{name} {us:.0}")).collect();
        let ceiling = row
            .cpu_us_per_req
            .filter(|us| *us > 0.0)
            .map_or(String::new(), |us| format!("; ceiling {:.0} req/s on {CEILING_CORES:.0} cores", CEILING_CORES * 1e6 / us));
        out.push_str(&format!("\nCPU µs per request, {}: {}{ceiling}\n", row.name, each.join(", ")));
    }
    out
}

/// The median of the values present, with their range; `None` if none.
fn spread(values: impl IntoIterator<Item = Option<f64>>) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = values.into_iter().flatten().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    Some((median, v[0], v[n - 1]))
}

/// `median (min–max)` with `fmt` for each number; the range only when there is one.
fn spread_cell(s: Option<(f64, f64, f64)>, fmt: impl Fn(f64) -> String) -> String {
    match s {
        None => "—".into(),
        Some((m, lo, hi)) if lo == hi => fmt(m),
        Some((m, lo, hi)) => format!("{} ({}–{})", fmt(m), fmt(lo), fmt(hi)),
    }
}

/// Per round: the row of `name` and that round's direct and nginx rows.
struct Round<'a> {
    row: Option<&'a Row>,
    base: Option<&'a Row>,
    nginx: Option<&'a Row>,
}

/// The medians of one figure over the rounds that held `rate`: each round's
/// `quantiles` of the target's `run` minus the direct row's (the direct row
/// itself: absolute), the range of quantile `ranged.0` (named `ranged.1`),
/// and in how many rounds the rate held when not all did.
fn medians_cell<T, const N: usize>(
    rounds: &[Round],
    rate: u32,
    run: impl Fn(&Row) -> Option<&T>,
    kept: impl Fn(&T) -> bool,
    quantiles: impl Fn(&T) -> [f64; N],
    ranged: (usize, &str),
) -> String {
    let (mut added, mut measured, mut is_base) = (Vec::<[f64; N]>::new(), 0, false);
    for r in rounds {
        let (Some(row), Some(base)) = (r.row, r.base) else { continue };
        let Some(x) = run(row) else { continue };
        measured += 1;
        is_base = std::ptr::eq(row, base);
        if !kept(x) {
            continue;
        }
        let q = quantiles(x);
        if is_base {
            added.push(q);
        } else if let Some(b) = run(base).map(&quantiles) {
            added.push(std::array::from_fn(|i| q[i] - b[i]));
        }
    }
    if measured == 0 {
        return "—".into();
    }
    if added.is_empty() {
        return format!("could not hold {rate} rps in any of {measured} rounds");
    }
    let median = |i: usize| spread(added.iter().map(|a| Some(a[i])));
    let figures: Vec<String> = (0..N).map(|i| ms(median(i).map_or(f64::NAN, |s| s.0))).collect();
    let (_, lo, hi) = median(ranged.0).unwrap_or((f64::NAN, f64::NAN, f64::NAN));
    let mut cell = format!("{}{} ({} {}–{})", if is_base { "base " } else { "" }, figures.join(" / "), ranged.1, ms(lo), ms(hi));
    if added.len() < measured {
        cell.push_str(&format!("; held in {} of {measured}", added.len()));
    }
    cell
}

/// The run at `rate` of a row's runs.
fn at<T>(runs: &[(u32, T)], rate: u32) -> Option<&T> {
    runs.iter().find(|(q, _)| *q == rate).map(|(_, x)| x)
}

/// Added p50 / p90 / p99 at a fixed `rate` (median over rounds, p50's range).
fn fixed_medians(rounds: &[Round], rate: u32) -> String {
    medians_cell::<OhaRun, 3>(rounds, rate, |row| at(&row.fixed, rate), |x| held(x, rate), |x| [x.p50, x.p90, x.p99], (0, "p50"))
}

/// Streams: added TTFT p50 / p99 at `rate` (median over rounds, p99's range).
fn stream_medians(rounds: &[Round], rate: u32) -> String {
    medians_cell::<StreamRun, 2>(
        rounds,
        rate,
        |row| at(&row.streams, rate),
        stream_held,
        |x| [x.quantile(0.5), x.quantile(0.99)],
        (1, "p99"),
    )
}

/// Per round, `f` of the target's row over `f` of that round's nginx row;
/// their median and range.
fn ratios(per: &[Round], f: impl Fn(&Row, &Round) -> Option<f64>) -> Option<(f64, f64, f64)> {
    spread(per.iter().map(|r| {
        let (a, b) = (f(r.row?, r)?, f(r.nginx?, r)?);
        (b.abs() > 1e-12 && a.is_finite() && b.is_finite()).then(|| a / b)
    }))
}

/// The medians over rounds (each a `Vec<Row>` of one pass over the targets),
/// in the columns of [`render`]. Ratios to nginx are taken within a round
/// (both measured minutes apart on the same machine), then their median.
pub fn render_medians(rounds: &[Vec<Row>], rates: &[u32]) -> String {
    let top = rates.iter().copied().max().unwrap_or(1000);
    let (mut out, _) = header(rates, "errors (max runs)");
    let mut names: Vec<&str> = Vec::new();
    for rows in rounds {
        for row in rows {
            if !names.contains(&row.name.as_str()) {
                names.push(&row.name);
            }
        }
    }
    for name in names {
        let per: Vec<Round> = rounds
            .iter()
            .map(|rows| Round {
                row: rows.iter().find(|r| r.name == name),
                base: rows.iter().find(|r| r.name.starts_with("direct")),
                nginx: rows.iter().find(|r| r.name == "nginx"),
            })
            .collect();
        let failed = per.iter().filter(|r| r.row.is_none_or(|row| row.failure.is_some())).count();
        let mut cells = vec![if failed > 0 { format!("{name} ({failed} of {} rounds incomplete)", per.len()) } else { name.to_owned() }];
        for &r in rates {
            cells.push(fixed_medians(&per, r));
        }
        for &r in rates {
            cells.push(stream_medians(&per, r));
        }
        let rows = || per.iter().filter_map(|r| r.row);
        let max_rps = |row: &Row| row.max.as_ref().map(|m| m.ok_rps);
        cells.push(spread_cell(spread(rows().map(max_rps)), |v| format!("{v:.0}")));
        let errors: u64 = rows().filter_map(|r| r.max.as_ref()).map(|m| m.errors).sum();
        cells.push(errors.to_string());
        cells.push(spread_cell(spread(rows().map(|r| r.cpu_us_per_req)), |v| format!("{v:.0}")));
        let kib = |k: Option<u64>| k.map(|k| k as f64 / 1024.0);
        cells.push(spread_cell(spread(rows().map(|r| kib(r.idle_kib))), |v| format!("{v:.1}")));
        cells.push(spread_cell(spread(rows().map(|r| kib(r.peak_kib))), |v| format!("{v:.1}")));
        cells.push(spread_cell(spread(rows().map(|r| r.startup.map(|d| d.as_secs_f64() * 1e3))), |v| format!("{v:.0}")));
        let is_base = name.starts_with("direct");
        let x = |v: f64| format!("{v:.1}x");
        cells.push(if is_base || per.iter().all(|r| r.nginx.is_none()) {
            "—".into()
        } else {
            format!(
                "{} / {} / {}",
                spread_cell(ratios(&per, |row, r| added_p50(row, r.base, top)), x),
                spread_cell(ratios(&per, |row, _| max_rps(row)), x),
                spread_cell(ratios(&per, |row, _| row.cpu_us_per_req), x)
            )
        });
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::OhaRun;

    fn oha(p50_ms: f64, ok_rps: f64) -> OhaRun {
        OhaRun {
            ok: (ok_rps * 10.0) as u64,
            errors: 0,
            ok_rps,
            p50: p50_ms / 1e3,
            p90: p50_ms / 1e3,
            p99: p50_ms / 1e3,
            error_kinds: String::new(),
        }
    }

    fn row(name: &str, p50_ms: f64, held_rps: f64, cpu: f64) -> Row {
        let mut r = Row::new(name);
        r.fixed.push((1000, oha(p50_ms, held_rps)));
        r.max = Some(oha(1.0, 1e6 / cpu));
        r.cpu_us_per_req = Some(cpu);
        r
    }

    #[test]
    fn spread_is_median_and_range() {
        assert_eq!(spread([Some(3.0), None, Some(1.0), Some(2.0)]), Some((2.0, 1.0, 3.0)));
        assert_eq!(spread([Some(4.0), Some(1.0)]), Some((2.5, 1.0, 4.0)));
        assert_eq!(spread([None, Some(f64::NAN)]), None);
    }

    #[test]
    fn medians_take_ratios_within_rounds_and_skip_rates_not_held() {
        // Round 2 is a slow machine for everyone: the per-round CPU ratio stays 10x.
        let rounds = vec![
            vec![row("direct to mock", 2.0, 1000.0, 10.0), row("nginx", 2.1, 1000.0, 20.0), row("Gatehouse (durable)", 2.5, 1000.0, 200.0)],
            vec![row("direct to mock", 2.0, 1000.0, 20.0), row("nginx", 2.2, 1000.0, 40.0), row("Gatehouse (durable)", 2.6, 1000.0, 400.0)],
            vec![row("direct to mock", 2.0, 1000.0, 10.0), row("nginx", 2.1, 1000.0, 20.0), row("Gatehouse (durable)", 9.0, 500.0, 200.0)],
        ];
        let t = render_medians(&rounds, &[1000]);
        let gh = t.lines().find(|l| l.starts_with("| Gatehouse")).expect("Gatehouse row");
        // Added p50 from the two rounds that held 1,000 rps: 0.5 and 0.6 ms.
        assert!(gh.contains("0.55 / 0.55 / 0.55 (p50 0.50–0.60); held in 2 of 3"), "{gh}");
        assert!(gh.contains("| 200 (200–400) |"), "{gh}");
        // CPU ratio 10x in every round; added-p50 ratio 5x and 3x in the rounds that held.
        assert!(gh.ends_with("4.0x (3.0x–5.0x) / 0.1x / 10.0x |"), "{gh}");
        let direct = t.lines().find(|l| l.starts_with("| direct")).expect("direct row");
        assert!(direct.contains("base 2.00 / 2.00 / 2.00"), "{direct}");
    }
}
