//! Request ids `req-…`: made for every request, returned in the `x-request-id`
//! header, carried in flat error bodies, and attached to the request's log span.

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderValue;
use axum::response::Response;
use tracing::Instrument;

/// Response header carrying the request id.
pub const HEADER: &str = "x-request-id";

tokio::task_local! {
    static CURRENT: RequestId;
}

/// The id of the request being served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(pub String);

impl RequestId {
    pub fn new() -> Self {
        RequestId(format!("req-{}", uuid::Uuid::new_v4().simple()))
    }
}

impl Default for RequestId {
    fn default() -> Self {
        Self::new()
    }
}

/// The current request's id, if called while serving a request.
pub fn current() -> Option<String> {
    CURRENT.try_with(|id| id.0.clone()).ok()
}

/// The outermost step of every request, run by the route table's one
/// middleware (`api::middleware::per_request`) around the rest of it,
/// `inner`: assign the id, scope it, log the request, add the header, and
/// count and time the request by its route template for `/metrics`.
pub async fn scoped<F, Fut>(req: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    let id = RequestId::new();
    let route = req.extensions().get::<MatchedPath>().map_or("unmatched", MatchedPath::as_str).to_owned();
    let span = tracing::info_span!("request", id = %id.0, method = %req.method(), path = %req.uri().path());
    let started = std::time::Instant::now();
    let header = HeaderValue::from_str(&id.0).ok();
    let mut resp = CURRENT.scope(id, inner(req)).instrument(span.clone()).await;
    let elapsed = started.elapsed();
    span.in_scope(|| {
        tracing::debug!(status = resp.status().as_u16(), elapsed_us = elapsed.as_micros() as u64, "served");
    });
    crate::metrics::get().request_served(route, resp.status().as_u16(), elapsed);
    if let Some(v) = header {
        resp.headers_mut().insert(HEADER, v);
    }
    resp
}
