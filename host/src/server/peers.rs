//! Connections per client address (`server.max_connections_per_ip`, off by
//! default) and the client's address behind a trusted balancer
//! (`server.trusted_proxies`).
//!
//! A direct client is counted by its TCP peer address when its connection is
//! accepted; over the cap, the connection is closed at once (there is no
//! request yet to answer). Behind a load balancer every client shares the
//! balancer's address, so the cap would refuse everyone at once: a peer named
//! in `server.trusted_proxies` is not capped itself, and each request it
//! forwards counts, while it runs, against the client address it names in
//! `X-Forwarded-For` (or `Forwarded`). Over the cap such a request gets 503
//! `Server busy` in its route's format. The forwarded address also replaces
//! the peer address for the failed-authentication watch. A forwarded header
//! from any other peer is ignored: a client could write anything there.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use serde::Deserialize;

/// An address range (`10.0.0.0/8`, `2001:db8::/32`) or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl TryFrom<String> for Cidr {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s.as_str(), None),
        };
        let net: IpAddr =
            addr.trim().parse().map_err(|_| format!("`{s}` is not an IP address or range (e.g. `10.0.0.5` or `10.0.0.0/8`)"))?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => {
                p.trim().parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(|| format!("`{s}`: the prefix length must be 0 to {max}"))?
            }
        };
        Ok(Cidr { net: net.to_canonical(), prefix })
    }
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.net, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// Whether `peer` is one of the trusted balancers.
pub fn is_trusted(trusted: &[Cidr], peer: Option<IpAddr>) -> bool {
    peer.is_some_and(|p| trusted.iter().any(|c| c.contains(p)))
}

/// The client a trusted balancer forwarded: the right-most address in
/// `X-Forwarded-For` (else `Forwarded: for=`) that is not itself a trusted
/// proxy. Addresses left of it were written by the client and prove nothing.
pub fn forwarded_client(trusted: &[Cidr], headers: &HeaderMap) -> Option<IpAddr> {
    let from_right = |list: Vec<IpAddr>| list.into_iter().rev().find(|ip| !trusted.iter().any(|c| c.contains(*ip)));
    let xff: Vec<IpAddr> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|a| a.trim().parse::<IpAddr>().ok())
        .collect();
    if !xff.is_empty() {
        return from_right(xff);
    }
    let fwd: Vec<IpAddr> = headers
        .get_all("forwarded")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|element| {
            element.split(';').find_map(|pair| {
                let (k, v) = pair.split_once('=')?;
                k.trim().eq_ignore_ascii_case("for").then(|| node_ip(v.trim().trim_matches('"'))).flatten()
            })
        })
        .collect();
    from_right(fwd)
}

/// The address of a `Forwarded` node: `192.0.2.1`, `192.0.2.1:80`, `[2001:db8::1]:80`.
fn node_ip(node: &str) -> Option<IpAddr> {
    if let Some(rest) = node.strip_prefix('[') {
        return rest.split(']').next()?.parse().ok();
    }
    node.parse().ok().or_else(|| node.rsplit_once(':').and_then(|(a, _)| a.parse().ok()))
}

/// Marks a forwarded request whose client is at the cap; the auth layer
/// answers it with [`Crowded::refusal`].
#[derive(Debug, Clone, Copy)]
pub struct Crowded {
    pub ip: IpAddr,
    pub cap: usize,
}

impl Crowded {
    /// 503 `Server busy` in the route's format.
    pub fn refusal(&self, path: &str) -> axum::response::Response {
        let (ip, cap) = (self.ip, self.cap);
        tracing::debug!(%ip, cap, "request refused: its client is at server.max_connections_per_ip");
        let retry = crate::chat::admission::RETRY_AFTER_SECS;
        let message = format!(
            "your address ({ip}) has {cap} requests open through the load balancer, its limit (server.max_connections_per_ip); \
             retry after {retry} s"
        );
        crate::api::error::ErrorFormat::for_path(path).busy(&message, retry)
    }
}

/// Places held per client address.
#[derive(Debug, Default)]
pub struct Peers {
    held: Mutex<HashMap<IpAddr, usize>>,
}

impl Peers {
    /// A place for `ip` if it holds fewer than `cap`; `None` when it is at the cap.
    pub fn enter(self: &Arc<Self>, ip: IpAddr, cap: usize) -> Option<PeerPlace> {
        let ip = ip.to_canonical();
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let n = held.entry(ip).or_insert(0);
        if *n >= cap {
            return None;
        }
        *n += 1;
        Some(PeerPlace { peers: Arc::clone(self), ip })
    }

    #[cfg(test)]
    fn held(&self, ip: IpAddr) -> usize {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).get(&ip).copied().unwrap_or(0)
    }
}

/// One connection's (or forwarded request's) place, given back when dropped.
#[derive(Debug)]
pub struct PeerPlace {
    peers: Arc<Peers>,
    ip: IpAddr,
}

impl Drop for PeerPlace {
    fn drop(&mut self) {
        let mut held = self.peers.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = held.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Cidr {
        Cidr::try_from(s.to_owned()).expect("valid")
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn ranges_contain_their_addresses_and_nothing_else() {
        assert!(cidr("10.0.0.0/8").contains(ip("10.200.1.2")));
        assert!(!cidr("10.0.0.0/8").contains(ip("11.0.0.1")));
        assert!(cidr("127.0.0.1").contains(ip("127.0.0.1")));
        assert!(!cidr("127.0.0.1").contains(ip("127.0.0.2")));
        assert!(cidr("0.0.0.0/0").contains(ip("192.0.2.1")));
        assert!(cidr("2001:db8::/32").contains(ip("2001:db8:1::5")));
        assert!(!cidr("2001:db8::/32").contains(ip("10.0.0.1")));
        assert!(cidr("127.0.0.0/8").contains(ip("::ffff:127.0.0.1")), "an IPv4-mapped peer is its IPv4 address");
        for bad in ["", "10.0.0.0/33", "example.com", "10.0.0.0/x"] {
            assert!(Cidr::try_from(bad.to_owned()).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_forwarded_client_is_the_right_most_untrusted_address() {
        let trusted = [cidr("10.0.0.0/8")];
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", "1.2.3.4, 198.51.100.7, 10.0.0.2".parse().expect("h"));
        assert_eq!(forwarded_client(&trusted, &h), Some(ip("198.51.100.7")), "the client wrote 1.2.3.4 itself");
        let mut h = HeaderMap::new();
        h.insert("forwarded", "for=192.0.2.60;proto=http, for=\"[2001:db8::1]:4711\"".parse().expect("h"));
        assert_eq!(forwarded_client(&trusted, &h), Some(ip("2001:db8::1")));
        let mut h = HeaderMap::new();
        h.insert("forwarded", "for=192.0.2.60:8080".parse().expect("h"));
        assert_eq!(forwarded_client(&trusted, &h), Some(ip("192.0.2.60")));
        assert_eq!(forwarded_client(&trusted, &HeaderMap::new()), None, "no header: the balancer's own request");
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", "10.0.0.3".parse().expect("h"));
        assert_eq!(forwarded_client(&trusted, &h), None, "only trusted hops");
    }

    #[test]
    fn places_are_capped_per_address_and_given_back() {
        let peers = Arc::new(Peers::default());
        let a = ip("192.0.2.1");
        let first = peers.enter(a, 2).expect("one");
        let _second = peers.enter(a, 2).expect("two");
        assert!(peers.enter(a, 2).is_none(), "the third from one address");
        assert!(peers.enter(ip("192.0.2.2"), 2).is_some(), "another address has its own places");
        drop(first);
        assert_eq!(peers.held(a), 1);
        assert!(peers.enter(a, 2).is_some());
    }
}
