//! The admin console at `/console`: static pages embedded in the binary
//! (hand-written ES modules and CSS under `static/`, no build step), which
//! call the admin API with an admin key the operator pastes in.
//!
//! The pages themselves hold no data, so they are served without a key, outside
//! the authentication layer; every call they make carries the key as a bearer
//! header and is refused without an admin one. The key stays in the tab's
//! session storage: no cookie (so no cross-site request can ride on it), never
//! in a URL (so never in a log or a `Referer`). Every answer carries a strict
//! Content-Security-Policy (scripts and styles from these files only, no inline
//! script, calls to this origin only, no framing).

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The policy on every console answer; `'self'` is the gateway's own origin.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// (file name, content type, bytes).
const FILES: &[(&str, &str, &[u8])] = &[
    ("index.html", "text/html; charset=utf-8", include_bytes!("static/index.html")),
    ("console.css", "text/css; charset=utf-8", include_bytes!("static/console.css")),
    ("app.js", "text/javascript; charset=utf-8", include_bytes!("static/app.js")),
    ("api.js", "text/javascript; charset=utf-8", include_bytes!("static/api.js")),
    ("ui.js", "text/javascript; charset=utf-8", include_bytes!("static/ui.js")),
    ("chart.js", "text/javascript; charset=utf-8", include_bytes!("static/chart.js")),
    ("pages.js", "text/javascript; charset=utf-8", include_bytes!("static/pages.js")),
    ("people.js", "text/javascript; charset=utf-8", include_bytes!("static/people.js")),
    ("activity.js", "text/javascript; charset=utf-8", include_bytes!("static/activity.js")),
    ("operations.js", "text/javascript; charset=utf-8", include_bytes!("static/operations.js")),
];

/// The console's routes (no state: the pages are constants).
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new().route("/console", get(index)).route("/console/", get(index)).route("/console/{file}", get(file))
}

async fn index() -> Response {
    serve("index.html")
}

async fn file(Path(name): Path<String>) -> Response {
    serve(&name)
}

fn serve(name: &str) -> Response {
    let headers = [
        (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY)),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, body)) => {
            let body = from_dev_folder(name).unwrap_or_else(|| body.to_vec());
            (StatusCode::OK, headers, [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))], body).into_response()
        }
        None => (
            StatusCode::NOT_FOUND,
            headers,
            [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"))],
            "no such console file",
        )
            .into_response(),
    }
}

/// Debug builds only: with `GATEHOUSE_CONSOLE_DIR` set, the listed files are
/// read from that folder on each request, so the pages can be edited without
/// rebuilding the server. A release build always serves the embedded files.
fn from_dev_folder(name: &str) -> Option<Vec<u8>> {
    if !cfg!(debug_assertions) {
        return None;
    }
    let dir = std::env::var_os("GATEHOUSE_CONSOLE_DIR")?;
    std::fs::read(std::path::Path::new(&dir).join(name)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_pages_import_is_served() {
        // A module imported but not listed would be a 404 in the browser.
        for (name, _, body) in FILES {
            let text = std::str::from_utf8(body).expect("utf-8");
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let Some(from) = line.split("from \"./").nth(1) else { continue };
                let target = from.split('"').next().unwrap_or_default();
                assert!(FILES.iter().any(|(n, _, _)| *n == target), "{name} imports {target}, which is not served");
            }
        }
    }

    #[test]
    fn the_console_registers_only_its_own_pages() {
        // Its routes are outside the API document on purpose (pages, not API):
        // anything else registered here would be an undocumented, unauthenticated route.
        let source = include_str!("mod.rs");
        for call in source.split(".route(\"").skip(1) {
            assert!(call.starts_with("/console"), "the console registers {call:.40}");
        }
    }

    #[test]
    fn no_page_carries_inline_script_or_style() {
        // The policy forbids them; the browser would refuse them silently.
        for (name, _, body) in FILES.iter().filter(|(n, _, _)| n.ends_with(".html")) {
            let text = std::str::from_utf8(body).expect("utf-8");
            assert!(!text.contains("<script>") && !text.contains("style=") && !text.contains("<style"), "{name}");
            let handler = text.split(" on").skip(1).any(|rest| {
                let word: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
                !word.is_empty() && rest[word.len()..].starts_with('=')
            });
            assert!(!handler, "{name} has an inline event handler");
        }
    }
}
