//! Failed authentication, watched per client address: every failure is
//! counted in `gatehouse_auth_failures_total{reason}`; a burst —
//! [`BURST`] failures from one address within [`WINDOW`] — writes one
//! `authentication` audit record for that window (a flood of bad keys writes
//! one record a minute per address, not one per request). No secret is ever
//! recorded: the reasons, the count, the address, the paths tried and, for a
//! revoked key, its key id.
//!
//! The table of addresses is bounded ([`MAX_ADDRESSES`]): when full, windows
//! that have ended are dropped, and if every entry is still live the new
//! address is counted in the metric only.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use gatehouse_store::Store;
use gatehouse_store::audit::{Audit, category, kind, outcome};
use gatehouse_store::model::{AuditEntry, Severity};

/// Failures from one address within [`WINDOW`] that make a burst.
pub const BURST: u32 = 10;
/// The window a burst is counted in.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Addresses tracked at once.
const MAX_ADDRESSES: usize = 16_384;
/// Paths remembered per window for the record.
const MAX_PATHS: usize = 5;

/// The address a request's connection came from (`None` when the socket
/// could not say), put in the request's extensions by the server.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub Option<IpAddr>);

/// Why a request was not authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Missing = 0,
    Malformed = 1,
    Invalid = 2,
    Revoked = 3,
    /// The key's user is deactivated.
    Deactivated = 4,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Missing => "missing",
            Reason::Malformed => "malformed",
            Reason::Invalid => "invalid",
            Reason::Revoked => "revoked",
            Reason::Deactivated => "deactivated",
        }
    }

    /// In discriminant order: `ALL[r as usize] == r`, the index of a window's count.
    const ALL: [Reason; 5] = [Reason::Missing, Reason::Malformed, Reason::Invalid, Reason::Revoked, Reason::Deactivated];
}

#[derive(Debug)]
struct Window {
    started: Instant,
    count: u32,
    by_reason: [u32; 5],
    paths: Vec<String>,
    revoked_keys: Vec<String>,
}

impl Window {
    fn new(now: Instant) -> Self {
        Window { started: now, count: 0, by_reason: [0; 5], paths: Vec::new(), revoked_keys: Vec::new() }
    }
}

/// The watch; one per server.
pub struct FailureWatch {
    windows: Mutex<HashMap<IpAddr, Window>>,
    records: mpsc::Sender<AuditEntry>,
}

impl std::fmt::Debug for FailureWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FailureWatch").finish_non_exhaustive()
    }
}

impl FailureWatch {
    /// A watch whose burst records are appended to `store` by a background task.
    pub fn start(store: Arc<dyn Store>) -> Arc<Self> {
        let (tx, mut rx) = mpsc::channel::<AuditEntry>(256);
        #[expect(
            clippy::disallowed_methods,
            reason = "ends when the watch is dropped (its channel closes); burst records are best effort and the store flush at shutdown commits what reached it"
        )]
        tokio::spawn(async move {
            while let Some(entry) = rx.recv().await {
                if let Err(e) = store.append_audit(vec![entry]).await {
                    tracing::error!(error = %e, "auditing a burst of failed authentication failed");
                }
            }
        });
        Arc::new(Self::with_sink(tx))
    }

    fn with_sink(records: mpsc::Sender<AuditEntry>) -> Self {
        FailureWatch { windows: Mutex::new(HashMap::new()), records }
    }

    /// Count one failure from `addr` (unknown when the connection's address is not known).
    pub fn record(&self, addr: Option<IpAddr>, reason: Reason, path: &str, revoked_key: Option<&str>) {
        self.record_at(Instant::now(), addr, reason, path, revoked_key);
    }

    fn record_at(&self, now: Instant, addr: Option<IpAddr>, reason: Reason, path: &str, revoked_key: Option<&str>) {
        crate::metrics::get().auth_failures.get_or_create(&crate::metrics::ReasonLabel { reason: reason.as_str().to_owned() }).inc();
        let Some(addr) = addr else { return };
        let burst = {
            let mut windows = self.windows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if windows.len() >= MAX_ADDRESSES && !windows.contains_key(&addr) {
                windows.retain(|_, w| now.duration_since(w.started) < WINDOW);
                if windows.len() >= MAX_ADDRESSES {
                    return;
                }
            }
            let w = windows.entry(addr).or_insert_with(|| Window::new(now));
            if now.duration_since(w.started) >= WINDOW {
                *w = Window::new(now);
            }
            w.count += 1;
            w.by_reason[reason as usize] += 1;
            if w.paths.len() < MAX_PATHS && !w.paths.iter().any(|p| p == path) {
                w.paths.push(path.chars().take(200).collect());
            }
            if let Some(id) = revoked_key
                && w.revoked_keys.len() < MAX_PATHS
                && !w.revoked_keys.iter().any(|k| k == id)
            {
                w.revoked_keys.push(id.to_owned());
            }
            (w.count == BURST).then(|| burst_record(addr, w))
        };
        if let Some(entry) = burst {
            tracing::warn!(client = %addr, failures = BURST, window_secs = WINDOW.as_secs(), "burst of failed authentication");
            if self.records.try_send(entry).is_err() {
                tracing::warn!("authentication audit queue full; a burst record was dropped");
            }
        }
    }
}

fn burst_record(addr: IpAddr, w: &Window) -> AuditEntry {
    let reasons: serde_json::Map<String, serde_json::Value> = Reason::ALL
        .iter()
        .zip(w.by_reason)
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| (r.as_str().to_owned(), serde_json::Value::from(n)))
        .collect();
    let mut a = Audit::new(
        kind::AUTHENTICATION,
        category::ACCESS_CONTROL,
        format!("{BURST} failed authentications from {addr} within {} s", WINDOW.as_secs()),
    )
    .severity(Severity::Warning)
    .outcome(outcome::BLOCKED)
    .meta("operation", "auth_failure_burst")
    .meta("clientAddress", addr.to_string())
    .meta("failures", BURST)
    .meta("windowSeconds", WINDOW.as_secs())
    .meta("reasons", serde_json::Value::Object(reasons))
    .meta("paths", w.paths.clone());
    if !w.revoked_keys.is_empty() {
        a = a.meta("revokedKeyIds", w.revoked_keys.clone());
    }
    a.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch() -> (FailureWatch, mpsc::Receiver<AuditEntry>) {
        let (tx, rx) = mpsc::channel(16);
        (FailureWatch::with_sink(tx), rx)
    }

    #[test]
    fn one_record_per_burst_per_address_and_window() {
        let (w, mut rx) = watch();
        let a: IpAddr = "203.0.113.7".parse().expect("ip");
        let b: IpAddr = "198.51.100.2".parse().expect("ip");
        let t0 = Instant::now();
        for i in 0..BURST - 1 {
            w.record_at(t0 + Duration::from_millis(u64::from(i)), Some(a), Reason::Invalid, "/chat/completions", None);
        }
        assert!(rx.try_recv().is_err(), "below the burst: no record");
        w.record_at(t0 + Duration::from_secs(1), Some(a), Reason::Revoked, "/api/admin/users", Some("key_9"));
        let e = rx.try_recv().expect("a burst record");
        assert_eq!(e.kind, kind::AUTHENTICATION);
        assert_eq!(e.metadata["clientAddress"], "203.0.113.7");
        assert_eq!(e.metadata["reasons"], serde_json::json!({"invalid": 9, "revoked": 1}));
        assert_eq!(e.metadata["paths"], serde_json::json!(["/chat/completions", "/api/admin/users"]));
        assert_eq!(e.metadata["revokedKeyIds"], serde_json::json!(["key_9"]));

        // More in the same window: counted, not recorded again; another address is separate.
        for _ in 0..50 {
            w.record_at(t0 + Duration::from_secs(2), Some(a), Reason::Invalid, "/chat/completions", None);
        }
        for _ in 0..BURST - 1 {
            w.record_at(t0 + Duration::from_secs(2), Some(b), Reason::Missing, "/chat/completions", None);
        }
        assert!(rx.try_recv().is_err(), "one record per window; b is below the burst");

        // The next window starts over.
        for _ in 0..BURST {
            w.record_at(t0 + WINDOW + Duration::from_secs(1), Some(a), Reason::Malformed, "/x", None);
        }
        let e = rx.try_recv().expect("a record for the next window");
        assert_eq!(e.metadata["reasons"], serde_json::json!({"malformed": BURST}));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn the_table_of_addresses_is_bounded() {
        let (w, _rx) = watch();
        let t0 = Instant::now();
        for i in 0..(MAX_ADDRESSES as u32 + 100) {
            let ip = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            w.record_at(t0, Some(ip), Reason::Invalid, "/", None);
        }
        assert!(w.windows.lock().expect("lock").len() <= MAX_ADDRESSES);
        // Once the windows have ended, new addresses are tracked again.
        w.record_at(t0 + WINDOW, Some("192.0.2.1".parse().expect("ip")), Reason::Invalid, "/", None);
        assert!(w.windows.lock().expect("lock").contains_key(&"192.0.2.1".parse::<IpAddr>().expect("ip")));
    }
}
