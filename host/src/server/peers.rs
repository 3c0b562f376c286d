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

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
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
