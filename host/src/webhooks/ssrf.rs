//! The URL guard: webhook targets may not reach the gateway's own
//! network unless the operator allows it (`WEBHOOKS_ALLOW_PRIVATE=true`).
//!
//! Two checks, one rule ([`forbidden`]):
//! * At create and update, [`check`] parses the URL the way the HTTP client
//!   will (WHATWG rules, via `reqwest::Url`), so every spelling of an address
//!   (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`, `127.0.0.1.`, full-width
//!   digits, `%31%32%37…`, `[::ffff:7f00:1]`) is decided on the address it
//!   really is, and resolves host names: a name with any forbidden address is
//!   refused.
//! * At delivery, [`CheckedResolver`] is the HTTP client's DNS resolver: it
//!   drops forbidden addresses from every answer, so the connection goes to an
//!   address that was checked at that moment (DNS rebinding cannot swap in
//!   `127.0.0.1` after the create-time check). URLs with an IP literal never
//!   reach a resolver, so the dispatcher runs [`parse`] before every attempt.
//!
//! IPv6 addresses that carry an IPv4 address are judged by it wherever the
//! gateway's network could turn them back into IPv4: IPv4-mapped, NAT64
//! (64:ff9b::/96), 6to4 (2002::/16) and ISATAP interface ids are refused when
//! the embedded address is; IPv4-compatible (::/96), IPv4-translated
//! (::ffff:0:0/96), local-use NAT64 (64:ff9b:1::/48) and Teredo (2001::/32)
//! are refused whole, as is everything outside global unicast (2000::/3).
//! Not detectable here: an operator's own NAT64 or 6rd prefix (any /32–/96
//! the network chose); a gateway on such a network should keep its egress
//! filtered there too.
//!
//! Also refused: schemes other than `http`/`https`, user info (`http://a@b/`:
//! a classic confusion trick, and a credential that listings would show), and
//! `localhost`/`*.localhost` names (RFC 6761).

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Longest URL accepted.
pub const MAX_URL_LEN: usize = 2048;
/// How long a create/update waits for DNS.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a URL or an address was refused. The texts are shown to the admin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefused {
    #[error("not a valid URL: {0}")]
    Invalid(String),
    #[error("only http and https URLs are accepted")]
    Scheme,
    #[error("user names and passwords in the URL are not accepted")]
    Userinfo,
    #[error("{host} is {reason}; such targets are refused unless the gateway runs with WEBHOOKS_ALLOW_PRIVATE=true")]
    Forbidden { host: String, reason: String },
    #[error("cannot resolve {host}: {detail}")]
    Unresolvable { host: String, detail: String },
}

/// The kind of address `ip` is, if webhooks may not go there; `None` for a
/// global unicast address.
pub fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, _, _) => "an unspecified (0.0.0.0/8) address",
        (10, _, _) => "a private address",
        (172, 16..=31, _) => "a private address",
        (192, 168, _) => "a private address",
        (127, _, _) => "a loopback address",
        (169, 254, _) => "a link-local address",
        (100, 64..=127, _) => "a shared (CGNAT, 100.64.0.0/10) address",
        (192, 0, 0) => "an IETF protocol address (192.0.0.0/24)",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "a documentation address",
        (192, 88, 99) => "a 6to4 relay address",
        (198, 18..=19, _) => "a benchmarking address",
        (224..=239, _, _) => "a multicast address",
        _ if ip.is_broadcast() => "the broadcast address",
        (240..=255, _, _) => "a reserved address",
        _ => return None,
    })
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        // ::ffff:a.b.c.d is a.b.c.d on a dual-stack socket.
        return forbidden_v4(v4).map(|_| "an IPv4-mapped IPv6 address of a forbidden IPv4 address");
    }
    let s = ip.segments();
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from(((hi as u32) << 16) | lo as u32);
    // ISATAP (RFC 5214): an interface id `0:5efe:a.b.c.d` (or `200:5efe:…`,
    // the u/g bits aside) under any prefix is tunnelled to a.b.c.d by the
    // site's ISATAP router. Checked before the prefix, which may be global.
    if s[4] & 0xfcff == 0 && s[5] == 0x5efe && forbidden_v4(embedded(s[6], s[7])).is_some() {
        return Some("an ISATAP address of a forbidden IPv4 address");
    }
    Some(match s {
        [0, 0, 0, 0, 0, 0, 0, 0] => "the unspecified address (::)",
        [0, 0, 0, 0, 0, 0, 0, 1] => "a loopback address",
        // ::a.b.c.d, deprecated; some stacks still route it to IPv4.
        [0, 0, 0, 0, 0, 0, _, _] => "an IPv4-compatible IPv6 address",
        // ::ffff:0:a.b.c.d (SIIT, RFC 2765): a stateless translator on the
        // gateway's network turns it into a.b.c.d. Never a public target.
        [0, 0, 0, 0, 0xffff, 0, _, _] => "an IPv4-translated (::ffff:0:0/96) address",
        // NAT64 (RFC 6052): the gateway's NAT64 would connect to the embedded IPv4.
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => {
            forbidden_v4(embedded(hi, lo))?;
            "a NAT64 address of a forbidden IPv4 address"
        }
        [0x64, 0xff9b, 1, ..] => "a local-use NAT64 address",
        [0x100, 0, 0, 0, ..] => "a discard-only address",
        // 6to4 (RFC 3056): 2002:AABB:CCDD::/48 embeds AA.BB.CC.DD.
        [0x2002, hi, lo, ..] => {
            forbidden_v4(embedded(hi, lo))?;
            "a 6to4 address of a forbidden IPv4 address"
        }
        [0x2001, 0xdb8, ..] => "a documentation address",
        // 2001::/23: IETF protocol assignments, Teredo (2001::/32) among them.
        [0x2001, 0..=0x1ff, ..] => "an IETF protocol (or Teredo) address",
        [0x3fff, 0..=0x0fff, ..] => "a documentation address",
        [x, ..] if x & 0xfe00 == 0xfc00 => "a unique-local (fc00::/7) address",
        [x, ..] if x & 0xffc0 == 0xfe80 => "a link-local address",
        [x, ..] if x & 0xffc0 == 0xfec0 => "a site-local address",
        [x, ..] if x & 0xff00 == 0xff00 => "a multicast address",
        // Only 2000::/3 is global unicast; the rest is reserved or special
        // (whatever it may embed), e.g. 0064:ff9b::/32 outside the NAT64 /96.
        [x, ..] if x & 0xe000 != 0x2000 => "not a global unicast (2000::/3) address",
        _ => return None,
    })
}

/// Names that always mean this machine (RFC 6761), whatever DNS says.
fn is_local_name(name: &str) -> bool {
    let n = name.trim_end_matches('.').to_ascii_lowercase();
    n == "localhost" || n.ends_with(".localhost")
}

/// Where a checked URL points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Ip(IpAddr),
    Name(String),
}

/// A URL that passed the syntax and literal-address checks.
#[derive(Debug, Clone)]
pub struct ParsedUrl {
    /// Normalised by the WHATWG rules: this form is stored and requested.
    pub url: Url,
    pub target: Target,
}

fn refuse(host: &str, reason: &str) -> UrlRefused {
    UrlRefused::Forbidden { host: host.to_owned(), reason: reason.to_owned() }
}

/// Syntax, scheme, user info and (for IP literals and `localhost` names) the
/// address. Does no I/O.
pub fn parse(raw: &str, allow_private: bool) -> Result<ParsedUrl, UrlRefused> {
    if raw.len() > MAX_URL_LEN {
        return Err(UrlRefused::Invalid(format!("longer than {MAX_URL_LEN} characters")));
    }
    let url = Url::parse(raw.trim()).map_err(|e| UrlRefused::Invalid(e.to_string()))?;
    // Normalising percent-encodes, so the stored form can outgrow the input;
    // it is what the dispatcher checks again before each attempt (found by
    // the `webhook_url` fuzz target).
    if url.as_str().len() > MAX_URL_LEN {
        return Err(UrlRefused::Invalid(format!("longer than {MAX_URL_LEN} characters once normalised")));
    }
    if !matches!(url.scheme(), "http" | "https") {
        return Err(UrlRefused::Scheme);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlRefused::Userinfo);
    }
    let host = url.host_str().ok_or_else(|| UrlRefused::Invalid("the URL has no host".into()))?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let target = match bare.parse::<IpAddr>() {
        Ok(ip) => Target::Ip(ip),
        Err(_) => {
            let name = host.trim_end_matches('.');
            if name.is_empty() {
                return Err(UrlRefused::Invalid("the URL has no host".into()));
            }
            // The WHATWG parser turns numeric hosts into addresses; this only
            // matters if a spelling ever slips through as a name.
            match name.parse::<Ipv4Addr>() {
                Ok(v4) => Target::Ip(IpAddr::V4(v4)),
                Err(_) => Target::Name(name.to_owned()),
            }
        }
    };
    if !allow_private {
        match &target {
            Target::Ip(ip) => {
                if let Some(reason) = forbidden(*ip) {
                    return Err(refuse(host, reason));
                }
            }
            Target::Name(n) if is_local_name(n) => {
                return Err(refuse(host, "a name of this machine"));
            }
            Target::Name(_) => {}
        }
    }
    Ok(ParsedUrl { url, target })
}

/// How host names become addresses; the system resolver in production, a
/// table in tests.
pub trait Lookup: Send + Sync + 'static {
    fn lookup(&self, host: String) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>>;
}

/// The operating system's resolver (`getaddrinfo`, on tokio's blocking pool).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: String) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// The create/update check: [`parse`], then (unless private targets are
/// allowed) resolve a host name and refuse it if it has no address or any
/// forbidden one. Returns the normalised URL to store.
pub async fn check(raw: &str, allow_private: bool, lookup: &dyn Lookup) -> Result<Url, UrlRefused> {
    let parsed = parse(raw, allow_private)?;
    if allow_private {
        return Ok(parsed.url);
    }
    if let Target::Name(name) = &parsed.target {
        let unresolvable = |detail: String| UrlRefused::Unresolvable { host: name.clone(), detail };
        let addrs = tokio::time::timeout(LOOKUP_TIMEOUT, lookup.lookup(name.clone()))
            .await
            .map_err(|_| unresolvable("the DNS lookup timed out".into()))?
            .map_err(|e| unresolvable(e.to_string()))?;
        if addrs.is_empty() {
            return Err(unresolvable("no addresses".into()));
        }
        for ip in addrs {
            if let Some(reason) = forbidden(ip) {
                return Err(refuse(name, &format!("a name resolving to {ip}, {reason}")));
            }
        }
    }
    Ok(parsed.url)
}

/// The delivery client's DNS resolver: resolves with `lookup` and keeps only
/// allowed addresses, so the socket connects to an address checked now.
#[derive(Clone)]
pub struct CheckedResolver {
    lookup: Arc<dyn Lookup>,
    allow_private: Arc<dyn Fn() -> bool + Send + Sync>,
}

impl CheckedResolver {
    /// `allow_private` is asked on every lookup, so a config reload applies at once.
    pub fn new(lookup: Arc<dyn Lookup>, allow_private: Arc<dyn Fn() -> bool + Send + Sync>) -> Self {
        CheckedResolver { lookup, allow_private }
    }

    /// The checked addresses of `host` (port 0: the client fills in the URL's).
    pub async fn resolve_checked(&self, host: &str) -> Result<Vec<SocketAddr>, UrlRefused> {
        let allow = (self.allow_private)();
        if !allow && is_local_name(host) {
            return Err(refuse(host, "a name of this machine"));
        }
        let addrs = self
            .lookup
            .lookup(host.to_owned())
            .await
            .map_err(|e| UrlRefused::Unresolvable { host: host.to_owned(), detail: e.to_string() })?;
        let mut refused = None;
        let kept: Vec<SocketAddr> = addrs
            .into_iter()
            .filter(|ip| match forbidden(*ip) {
                Some(reason) if !allow => {
                    refused.get_or_insert((*ip, reason));
                    false
                }
                _ => true,
            })
            .map(|ip| SocketAddr::new(ip, 0))
            .collect();
        match (kept.is_empty(), refused) {
            (true, Some((ip, reason))) => Err(refuse(host, &format!("a name resolving to {ip}, {reason}"))),
            (true, None) => Err(UrlRefused::Unresolvable { host: host.to_owned(), detail: "no addresses".into() }),
            (false, _) => Ok(kept),
        }
    }
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = this.resolve_checked(&host).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A DNS table: unknown names do not resolve.
    struct Table(HashMap<&'static str, Vec<IpAddr>>);

    impl Lookup for Table {
        fn lookup(&self, host: String) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>> {
            let r = self.0.get(host.as_str()).cloned().ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such host"));
            Box::pin(async move { r })
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    fn dns() -> Table {
        Table(HashMap::from([
            ("example.com", vec![ip("93.184.216.34")]),
            ("v6.example.com", vec![ip("2606:2800:220:1:248:1893:25c8:1946")]),
            ("localtest.me", vec![ip("127.0.0.1")]),
            ("metadata.google.internal", vec![ip("169.254.169.254")]),
            ("mixed.example", vec![ip("93.184.216.34"), ip("10.0.0.5")]),
            ("ula.example", vec![ip("fd00::1")]),
            ("mapped.example", vec![ip("::ffff:192.168.0.1")]),
        ]))
    }

    #[tokio::test]
    async fn ssrf_attempts_are_all_refused() {
        let cases: &[&str] = &[
            // Schemes
            "ftp://example.com/",
            "file:///etc/passwd",
            "gopher://example.com:70/_x",
            "javascript:alert(1)",
            "ws://example.com/",
            // Plain private, loopback, link-local, unspecified, CGNAT
            "http://127.0.0.1/",
            "http://127.255.255.254:8080/hook",
            "http://10.0.0.1/",
            "http://172.16.0.1/",
            "http://172.31.255.255/",
            "http://192.168.1.1/",
            "http://169.254.169.254/latest/meta-data/",
            "http://0.0.0.0/",
            "http://0/",
            "http://100.64.0.1/",
            "http://100.127.255.254/",
            // Multicast, broadcast, reserved, special-purpose
            "http://224.0.0.1/",
            "http://255.255.255.255/",
            "http://240.0.0.1/",
            "http://192.0.0.8/",
            "http://198.18.0.1/",
            "http://192.0.2.1/",
            // Encodings of 127.0.0.1
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://0x7f.1/",
            "http://0x7f000001/",
            "http://017700000001/",
            "http://127.1/",
            "http://127.0.1/",
            "http://127.000.000.001/",
            "http://127.0.0.1./",
            "http://%31%32%37.0.0.1/",
            "http://\u{ff11}\u{ff12}\u{ff17}.0.0.1/",
            "http://127\u{3002}0\u{3002}0\u{3002}1/",
            "HTTP://127.0.0.1/",
            "http:///127.0.0.1/",
            "http://127.0.0.1\\@example.com/",
            // IPv6 and IPv4-in-IPv6
            "http://[::1]/",
            "http://[::]/",
            "http://[0:0:0:0:0:0:0:1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://[::ffff:a9fe:a9fe]/",
            "http://[::127.0.0.1]/",
            "http://[64:ff9b::7f00:1]/",
            "http://[2002:7f00:1::1]/",
            "http://[2001:0::1]/",
            "http://[fc00::1]/",
            "http://[fd12:3456::1]/",
            "http://[fe80::1]/",
            "http://[ff02::1]/",
            // User info tricks
            "http://evil@127.0.0.1/",
            "http://example.com@127.0.0.1/",
            "http://127.0.0.1:80@example.com/",
            "http://user:pass@example.com/",
            // Names of this machine, and names resolving inside
            "http://localhost/",
            "http://LOCALHOST:8080/",
            "http://localhost./",
            "http://api.localhost/",
            "http://\u{24db}ocalhost/",
            "http://%6c%6f%63%61%6c%68%6f%73%74/",
            "http://localtest.me/",
            "http://metadata.google.internal/computeMetadata/v1/",
            "http://mixed.example/",
            "http://ula.example/",
            "http://mapped.example/",
            "http://does-not-resolve.example/",
            // Garbage
            "",
            "not a url",
            "http://",
            "http://[::1/",
        ];
        assert!(cases.len() >= 25);
        let dns = dns();
        for raw in cases {
            let r = check(raw, false, &dns).await;
            assert!(r.is_err(), "{raw:?} was accepted as {r:?}");
            // Refused for what it targets, not because the parser gave up
            // (the parser is the HTTP client's: what it cannot parse, it cannot send).
            let garbage = matches!(*raw, "" | "not a url" | "http://" | "http://[::1/");
            assert_eq!(matches!(r, Err(UrlRefused::Invalid(_))), garbage, "{raw:?}: {r:?}");
        }
    }

    #[tokio::test]
    async fn public_targets_pass_and_are_normalised() {
        let dns = dns();
        for (raw, stored) in [
            ("https://example.com/hook", "https://example.com/hook"),
            ("https://EXAMPLE.com./hook?x=1", "https://example.com./hook?x=1"),
            ("http://8.8.8.8:8080/x", "http://8.8.8.8:8080/x"),
            ("http://134744072/", "http://8.8.8.8/"),
            ("https://[2606:4700::1111]/", "https://[2606:4700::1111]/"),
            ("https://v6.example.com/", "https://v6.example.com/"),
            ("http://[::ffff:8.8.8.8]/", "http://[::ffff:808:808]/"),
        ] {
            let url = check(raw, false, &dns).await.unwrap_or_else(|e| panic!("{raw}: {e}"));
            assert_eq!(url.as_str(), stored);
        }
    }

    #[test]
    fn the_length_limit_applies_to_the_stored_form() {
        // 2,000 bytes in, about 4,000 once `é` is percent-encoded: refused
        // now, rather than stored and refused before every delivery.
        let raw = format!("https://example.com/{}", "\u{e9}".repeat(990));
        assert!(raw.len() <= MAX_URL_LEN);
        assert!(matches!(parse(&raw, false), Err(UrlRefused::Invalid(m)) if m.contains("normalised")));
        let ok = format!("https://example.com/{}", "a".repeat(1990));
        assert!(parse(&ok, false).is_ok());
    }

    #[tokio::test]
    async fn allow_private_lets_loopback_through_but_not_other_schemes() {
        let dns = dns();
        for raw in ["http://127.0.0.1:9/", "http://localhost/", "http://[::1]/", "http://10.1.2.3/"] {
            assert!(check(raw, true, &dns).await.is_ok(), "{raw}");
        }
        assert_eq!(check("ftp://127.0.0.1/", true, &dns).await, Err(UrlRefused::Scheme));
        assert_eq!(check("http://a@127.0.0.1/", true, &dns).await, Err(UrlRefused::Userinfo));
    }

    #[test]
    fn every_forbidden_range_has_a_reason_and_global_addresses_none() {
        for bad in [
            "0.1.2.3",
            "10.255.0.1",
            "100.100.0.0",
            "127.8.8.8",
            "169.254.0.1",
            "172.20.0.1",
            "192.0.0.1",
            "192.88.99.1",
            "192.168.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "239.255.255.250",
            "250.1.1.1",
            "255.255.255.255",
            "::",
            "::1",
            "::2",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "64:ff9b:1::1",
            "100::1",
            "2001::1",
            "2001:db8::1",
            "2002:c0a8:101::1",
            "3fff::1",
            "fc00::",
            "fdff::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff00::1",
        ] {
            assert!(forbidden(ip(bad)).is_some(), "{bad} should be refused");
        }
        for good in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.0.1",
            "172.32.0.1",
            "192.169.0.1",
            "198.17.0.1",
            "198.20.0.1",
            "223.255.255.255",
            "2606:4700::1111",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "::ffff:8.8.8.8",
            "2400:cb00::1",
        ] {
            assert_eq!(forbidden(ip(good)), None, "{good} should be allowed");
        }
    }

    /// IPv4 inside IPv6: every embedding a stack, a translator or a tunnel
    /// turns back into the IPv4 address is judged by that address, and the
    /// ranges that only a local translator would honour are refused whole.
    #[test]
    fn ipv4_embedded_in_ipv6_is_judged_by_its_ipv4() {
        for bad in [
            // IPv4-translated (SIIT, ::ffff:0:0/96): refused whole.
            "::ffff:0:7f00:1",
            "::ffff:0:a00:1",
            "::ffff:0:808:808",
            // IPv4-mapped and IPv4-compatible.
            "::ffff:a9fe:a9fe",
            "::a00:1",
            // NAT64 (64:ff9b::/96 with a private IPv4; the local-use /48 whole).
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1:a00:1::",
            "64:ff9b:1::808:808",
            // 6to4 of a private IPv4.
            "2002:a00:1::1",
            "2002:a9fe:a9fe::",
            // Teredo (2001::/32): refused whole.
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            // ISATAP interface ids embedding a private IPv4, under any prefix.
            "2600:1f18::5efe:a00:1",
            "2600:1f18::200:5efe:c0a8:101",
            // Not global unicast (outside 2000::/3), whatever it embeds.
            "64:ff9b:0:0:1::a00:1",
            "5f00::1",
            "4000::808:808",
        ] {
            assert!(forbidden(ip(bad)).is_some(), "{bad} should be refused");
        }
        for good in ["64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8", "2600:1f18::5efe:808:808", "2a00:1450:4001::1"] {
            assert_eq!(forbidden(ip(good)), None, "{good} should be allowed");
        }
    }

    fn resolver(allow: bool, table: Table) -> CheckedResolver {
        CheckedResolver::new(Arc::new(table), Arc::new(move || allow))
    }

    #[tokio::test]
    async fn the_resolver_drops_forbidden_addresses_at_delivery_time() {
        // DNS rebinding: the name resolved to a public address when the
        // endpoint was created; at delivery it answers 127.0.0.1.
        let r = resolver(false, Table(HashMap::from([("rebind.example", vec![ip("127.0.0.1")])])));
        let err = r.resolve_checked("rebind.example").await.expect_err("refused");
        assert!(matches!(err, UrlRefused::Forbidden { .. }), "{err}");
        // Mixed answers: only the checked public address is handed to the socket.
        let r = resolver(false, dns());
        let kept = r.resolve_checked("mixed.example").await.expect("public part");
        assert_eq!(kept, vec![SocketAddr::new(ip("93.184.216.34"), 0)]);
        assert!(r.resolve_checked("localhost").await.is_err());
        assert!(r.resolve_checked("nowhere.example").await.is_err());
        // Allowed when the operator says so.
        let r = resolver(true, dns());
        assert_eq!(r.resolve_checked("localtest.me").await.expect("allowed").len(), 1);
    }

    /// End to end through reqwest: a name that resolves to 127.0.0.1 at
    /// delivery time never reaches the loopback listener.
    #[tokio::test]
    async fn a_rebound_name_never_reaches_loopback() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let h = hits.clone();
        #[expect(clippy::disallowed_methods, reason = "a test's server, dropped with the test's runtime")]
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let _ = sock.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
            }
        });
        let client = |allow: bool| {
            reqwest::Client::builder()
                .no_proxy()
                .dns_resolver(Arc::new(resolver(allow, Table(HashMap::from([("rebind.example", vec![ip("127.0.0.1")])])))))
                .build()
                .expect("client")
        };
        let url = format!("http://rebind.example:{port}/hook");
        let err = client(false).post(&url).send().await.expect_err("refused");
        let mut chain = String::new();
        let mut guarded = false;
        let mut e: Option<&dyn std::error::Error> = Some(&err);
        while let Some(x) = e {
            chain.push_str(&x.to_string());
            guarded |= matches!(x.downcast_ref::<UrlRefused>(), Some(UrlRefused::Forbidden { .. }));
            e = x.source();
        }
        assert!(chain.contains("127.0.0.1"), "{chain}");
        assert!(guarded, "the guard's error is in the chain (the dispatcher reports it): {chain}");
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
        // The same name with private targets allowed does connect (the test is sound).
        let resp = client(true).post(&url).send().await.expect("allowed");
        assert_eq!(resp.status(), 200);
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
