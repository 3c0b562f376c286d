//! Client addresses: address ranges (`server.trusted_proxies`) and the client
//! a trusted load balancer names in `X-Forwarded-For` / `Forwarded`.

use std::net::IpAddr;

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
}
