//! `GET /api/admin/overview`: the console's first page, per minute over the
//! last hours: chat requests, errors (5xx) and refusals (4xx), p50/p99 latency,
//! failovers, Prompt Shield blocks and DLP hits.
//!
//! A sampler reads the process's own metrics (the same figures `/metrics`
//! exposes) and the new outbox events once a minute and keeps 24 hours of
//! readings in memory, so this host's history starts when it started; each
//! answer adds a reading taken at the call, so the newest minute is live.
//! Nothing here runs on the chat path: the sampler reads counters the
//! request layer keeps anyway.

use axum::Json;
use axum::extract::{Query, State};
use chrono::Utc;
use serde_json::{Value, json};

use super::ok;
use crate::api::list_params::{Params, check_known, int_param};
use crate::app::AppState;
use crate::app::console::Reading;
use crate::auth::Admin;
use crate::error::AdminError;
use crate::time::iso;

/// The routes whose requests the overview counts.
const CHAT_ROUTES: &[&str] = &["/chat/completions", "/api/external/v1/chat/completions"];
/// One reading a minute, 24 hours of them.
const STEP_SECONDS: u64 = 60;
const KEPT: usize = 24 * 60;

/// One line of the text exposition: (name, labels, value).
type Sample<'a> = (&'a str, Vec<(&'a str, &'a str)>, f64);

/// `name{labels} value` → (name, labels, value).
fn parse_line(line: &str) -> Option<Sample<'_>> {
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let (name, labels) = match head.split_once('{') {
        Some((n, rest)) => (n, rest.strip_suffix('}')?),
        None => (head, ""),
    };
    let labels = labels
        .split(',')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k, v.trim_matches('"')))
        })
        .collect();
    Some((name, labels, value))
}

fn label<'a>(labels: &[(&str, &'a str)], key: &str) -> Option<&'a str> {
    labels.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// The counters of the metrics registry, summed over the chat routes.
fn read_metrics(text: &str, r: &mut Reading) {
    let mut buckets: Vec<(f64, u64)> = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, labels, value)) = parse_line(line) else { continue };
        let chat = label(&labels, "route").is_some_and(|route| CHAT_ROUTES.contains(&route));
        match name {
            "gatehouse_http_requests_total" if chat => {
                let n = value as u64;
                r.requests += n;
                match label(&labels, "status").and_then(|s| s.parse::<u16>().ok()) {
                    Some(s) if s >= 500 => r.errors += n,
                    Some(s) if s >= 400 => r.refused += n,
                    _ => {}
                }
            }
            "gatehouse_http_request_duration_seconds_bucket" if chat => {
                let le = match label(&labels, "le") {
                    Some("+Inf") => f64::INFINITY,
                    Some(le) => le.parse().unwrap_or(f64::INFINITY),
                    None => continue,
                };
                match buckets.iter_mut().find(|(b, _)| *b == le) {
                    Some((_, n)) => *n += value as u64,
                    None => buckets.push((le, value as u64)),
                }
            }
            "gatehouse_failovers_total" => r.failovers += value as u64,
            _ => {}
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    r.buckets = buckets;
}

async fn take_reading(app: &AppState) -> Reading {
    let mut r = Reading { at: Utc::now(), ..Default::default() };
    read_metrics(&crate::metrics::get().encode(), &mut r);
    let s = &app.overview;
    let mut ev = s.events.lock().await;
    let counting = ev.primed;
    let mut read_to_end = true;
    // Read the outbox forward from where the last reading stopped.
    loop {
        let page = match app.store.outbox_after(ev.after, 1000).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "the overview could not read the outbox");
                read_to_end = false;
                break;
            }
        };
        let Some((last, _)) = page.last() else { break };
        ev.after = *last;
        for (_, e) in page.iter().filter(|_| counting) {
            match e.kind.as_str() {
                "promptshield:attack:blocked" => ev.shield_blocks += 1,
                "dlp:incident" => ev.dlp_hits += 1,
                _ => {}
            }
        }
        if page.len() < 1000 {
            break;
        }
    }
    ev.primed |= read_to_end;
    (r.shield_blocks, r.dlp_hits) = (ev.shield_blocks, ev.dlp_hits);
    r
}

/// Take a reading every minute until `stop`; started and joined by the
/// server (`server::background`).
pub async fn run(app: AppState, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(STEP_SECONDS));
    loop {
        let reading = async {
            tick.tick().await;
            take_reading(&app).await
        };
        let r = tokio::select! {
            r = reading => r,
            () = crate::shutdown::stopped(&mut stop) => return,
        };
        let mut readings = app.overview.readings.lock().unwrap_or_else(|p| p.into_inner());
        if readings.len() == KEPT {
            readings.pop_front();
        }
        readings.push_back(r);
    }
}

/// The latency (ms) under which `q` of the requests between two readings fell: the bound of its bucket.
fn quantile_ms(before: &[(f64, u64)], after: &[(f64, u64)], q: f64) -> Option<f64> {
    let delta: Vec<(f64, u64)> =
        after.iter().map(|(le, n)| (*le, n.saturating_sub(before.iter().find(|(b, _)| b == le).map_or(0, |(_, m)| *m)))).collect();
    let total = delta.last()?.1;
    if total == 0 {
        return None;
    }
    let want = (q * total as f64).ceil() as u64;
    delta.iter().find(|(_, n)| *n >= want).map(|(le, _)| if le.is_finite() { le * 1000.0 } else { f64::INFINITY }).filter(|v| v.is_finite())
}

fn point(before: &Reading, after: &Reading) -> Value {
    json!({
        "start": iso(before.at),
        "end": iso(after.at),
        "requests": after.requests.saturating_sub(before.requests),
        "errors": after.errors.saturating_sub(before.errors),
        "refused": after.refused.saturating_sub(before.refused),
        "p50Ms": quantile_ms(&before.buckets, &after.buckets, 0.5),
        "p99Ms": quantile_ms(&before.buckets, &after.buckets, 0.99),
        "failovers": after.failovers.saturating_sub(before.failovers),
        "shieldBlocks": after.shield_blocks.saturating_sub(before.shield_blocks),
        "dlpHits": after.dlp_hits.saturating_sub(before.dlp_hits),
    })
}

/// The query parameters of `GET /api/admin/overview`.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct OverviewQuery {
    /// How far back, 1 to 1440; default 60 (`INVALID_MINUTES`).
    #[param(minimum = 1, maximum = 1440)]
    minutes: Option<u64>,
}

/// `GET /api/admin/overview`.
#[utoipa::path(
    get, path = "/api/admin/overview", tag = "admin", params(OverviewQuery),
    responses(
        (status = 200, description = "`{since, stepSeconds, totals, points: [{start, end, requests, errors, refused, p50Ms, p99Ms, failovers, shieldBlocks, dlpHits}]}`: this host since it started, per minute, oldest first; the last point runs to now",
         body = crate::api::schema::Success<crate::api::schema::JsonObject>),
        (status = 400, description = "Bad parameter (`INVALID_…`)", body = crate::error::NestedError),
    )
)]
pub async fn overview(State(app): State<AppState>, Admin(_): Admin, Query(p): Query<Params>) -> Result<Json<Value>, AdminError> {
    check_known(&p, &["minutes"])?;
    let minutes = int_param(&p, "minutes", "INVALID_MINUTES", 60, 1, KEPT as u64)?;
    let now = take_reading(&app).await;
    let since = now.at - chrono::Duration::minutes(minutes as i64);
    let mut readings: Vec<Reading> =
        app.overview.readings.lock().unwrap_or_else(|p| p.into_inner()).iter().filter(|r| r.at >= since).cloned().collect();
    // The process's start is the zero reading: everything counted since is after it.
    let started_at = Utc::now() - chrono::Duration::from_std(app.started.elapsed()).unwrap_or_default();
    let started = Reading { at: started_at, ..Default::default() };
    if readings.first().is_none_or(|r| r.at > since) && started.at >= since {
        readings.insert(0, started);
    }
    readings.push(now);
    let points: Vec<Value> = readings.windows(2).map(|w| point(&w[0], &w[1])).collect();
    let first = readings.first().cloned().unwrap_or_default();
    let last = readings.last().cloned().unwrap_or_default();
    let mut totals = point(&first, &last);
    if let Some(t) = totals.as_object_mut() {
        t.remove("start");
        t.remove("end");
    }
    Ok(ok(json!({"since": iso(first.at), "stepSeconds": STEP_SECONDS, "totals": totals, "points": points})))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# TYPE gatehouse_http_requests counter\n\
        gatehouse_http_requests_total{route=\"/chat/completions\",status=\"200\"} 7\n\
        gatehouse_http_requests_total{route=\"/chat/completions\",status=\"403\"} 2\n\
        gatehouse_http_requests_total{route=\"/api/external/v1/chat/completions\",status=\"502\"} 1\n\
        gatehouse_http_requests_total{route=\"/api/admin/users\",status=\"200\"} 50\n\
        gatehouse_http_request_duration_seconds_bucket{le=\"0.001\",route=\"/chat/completions\"} 5\n\
        gatehouse_http_request_duration_seconds_bucket{le=\"0.01\",route=\"/chat/completions\"} 9\n\
        gatehouse_http_request_duration_seconds_bucket{le=\"+Inf\",route=\"/chat/completions\"} 9\n\
        gatehouse_http_request_duration_seconds_bucket{le=\"0.001\",route=\"/api/external/v1/chat/completions\"} 0\n\
        gatehouse_http_request_duration_seconds_bucket{le=\"0.01\",route=\"/api/external/v1/chat/completions\"} 0\n\
        gatehouse_http_request_duration_seconds_bucket{le=\"+Inf\",route=\"/api/external/v1/chat/completions\"} 1\n\
        gatehouse_failovers_total{reason=\"timeout\"} 3\n";

    #[test]
    fn only_the_chat_routes_are_counted_by_status_class() {
        let mut r = Reading::default();
        read_metrics(TEXT, &mut r);
        assert_eq!((r.requests, r.errors, r.refused, r.failovers), (10, 1, 2, 3));
        assert_eq!(r.buckets, vec![(0.001, 5), (0.01, 9), (f64::INFINITY, 10)]);
    }

    #[test]
    fn percentiles_are_the_bounds_of_the_buckets_holding_them_between_two_readings() {
        let before = vec![(0.001, 5), (0.01, 5), (f64::INFINITY, 5)];
        let after = vec![(0.001, 6), (0.01, 15), (f64::INFINITY, 15)];
        // 10 requests since: 1 under 1 ms, 9 under 10 ms.
        assert_eq!(quantile_ms(&before, &after, 0.5), Some(10.0));
        assert_eq!(quantile_ms(&before, &after, 0.05), Some(1.0));
        assert_eq!(quantile_ms(&after, &after, 0.5), None, "no request, no latency");
        let slow = vec![(0.001, 6), (0.01, 15), (f64::INFINITY, 16)];
        assert_eq!(quantile_ms(&before, &slow, 0.99), None, "beyond the last bound: unknown, not infinite");
    }
}
