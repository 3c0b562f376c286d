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
