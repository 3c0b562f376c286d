//! `outbound-http` for plugins: only to hosts the operator granted the plugin
//! (`allowed_outbound_hosts`), checked by the host on every request. The
//! plugin never gets a socket. Calls block the calling thread, so callers run
//! plugins that use it on the blocking pool.

use std::sync::OnceLock;
use std::time::Duration;

/// Most bytes of a response handed to a plugin.
const MAX_BODY: usize = 4 * 1024 * 1024;

/// A plugin's grant.
#[derive(Default)]
pub struct Grant {
    /// `host` or `host:port`, lowercase.
    hosts: Vec<String>,
    /// Headers the host adds to every request (`outbound_header_env`):
    /// lowercase name, secret value. Never shown by `Debug`, never logged.
    headers: Vec<(String, String)>,
    /// Built on first use, on the thread that makes the call: the blocking
    /// client must not be created from async code (plugins are loaded there).
    client: OnceLock<Option<reqwest::blocking::Client>>,
}

type Response = (u16, Vec<(String, String)>, String);

/// Two grants are the same when they name the same hosts and headers (the lazily built client is not part of it).
impl PartialEq for Grant {
    fn eq(&self, other: &Self) -> bool {
        self.hosts == other.hosts && self.headers == other.headers
    }
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Grant").field("hosts", &self.hosts).field("headers", &names).finish_non_exhaustive()
    }
}

impl Grant {
    pub fn new(hosts: &[String], headers: Vec<(String, String)>) -> Self {
        Grant {
            hosts: hosts.iter().map(|h| h.trim().to_lowercase()).collect(),
            headers: headers.into_iter().map(|(n, v)| (n.to_ascii_lowercase(), v)).collect(),
            client: OnceLock::new(),
        }
    }

    fn client(&self) -> Option<&reqwest::blocking::Client> {
        self.client
            .get_or_init(|| {
                if self.hosts.is_empty() {
                    return None;
                }
                reqwest::blocking::Client::builder()
                    .timeout(Duration::from_secs(10))
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|e| tracing::error!(error = %e, "cannot build the outbound HTTP client"))
                    .ok()
            })
            .as_ref()
    }

    /// Is this URL's host granted?
    pub fn allows(&self, url: &reqwest::Url) -> bool {
        let Some(host) = url.host_str().map(str::to_lowercase) else {
            return false;
        };
        let with_port = url.port_or_known_default().map(|p| format!("{host}:{p}"));
        self.hosts.iter().any(|h| *h == host || with_port.as_deref() == Some(h.as_str()))
    }

    pub fn send(&self, method: &str, url: &str, headers: &[(String, String)], body: String) -> Result<Response, String> {
        let url = reqwest::Url::parse(url).map_err(|e| format!("invalid URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("only http and https URLs are allowed".into());
        }
        if !self.allows(&url) {
            return Err(format!("outbound HTTP to {} is not granted to this plugin", url.host_str().unwrap_or("?")));
        }
        let client = self.client().ok_or("outbound HTTP is not available")?;
        let method = reqwest::Method::from_bytes(method.as_bytes()).map_err(|_| "invalid method".to_owned())?;
        let mut rb = client.request(method, url);
        // The plugin's own headers, except those the host sets: a granted header cannot be replaced or doubled.
        for (k, v) in headers.iter().filter(|(k, _)| !self.headers.iter().any(|(g, _)| g.eq_ignore_ascii_case(k))) {
            rb = rb.header(k, v);
        }
        for (k, v) in &self.headers {
            rb = rb.header(k, v);
        }
        let resp = rb.body(body).send().map_err(|e| format!("request failed: {}", e.without_url()))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().iter().filter_map(|(k, v)| v.to_str().ok().map(|v| (k.to_string(), v.to_owned()))).collect();
        let bytes = resp.bytes().map_err(|e| format!("reading the response failed: {}", e.without_url()))?;
        if bytes.len() > MAX_BODY {
            return Err(format!("response larger than {MAX_BODY} bytes"));
        }
        Ok((status, headers, String::from_utf8_lossy(&bytes).into_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_match_host_and_port() {
        let g = Grant::new(&["search.internal:9200".into(), "Example.org".into()], Vec::new());
        assert!(g.allows(&reqwest::Url::parse("http://search.internal:9200/_search").expect("url")));
        assert!(!g.allows(&reqwest::Url::parse("http://search.internal:9300/").expect("url")));
        assert!(g.allows(&reqwest::Url::parse("https://example.org/x").expect("url")));
        assert!(!g.allows(&reqwest::Url::parse("https://evil.example.org/x").expect("url")));
        let none = Grant::new(&[], Vec::new());
        assert!(none.send("GET", "http://example.org/", &[], String::new()).is_err());
    }

    #[test]
    fn granted_header_values_never_show_in_debug_output() {
        let g = Grant::new(&["search.internal".into()], vec![("Authorization".into(), "Bearer s3cret-value".into())]);
        let shown = format!("{g:?}");
        assert!(shown.contains("authorization"), "{shown}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_ne!(
            g,
            Grant::new(&["search.internal".into()], vec![("authorization".into(), "Bearer other".into())]),
            "a new value is a new grant"
        );
    }
}
