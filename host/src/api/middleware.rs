//! The middleware of the route table: [`per_request`], three steps in one
//! layer: the request id (`crate::request_id`), [`authenticate`] (who is
//! calling; a forwarded client over its connection cap is refused here), then
//! the intake (admission of chat requests and the body read under its caps,
//! [`super::intake::take`]), so an anonymous client never gets its body read; and
//! [`admin_read_limit`] on the admin reads.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::app::AppState;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use chrono::Utc;

use crate::auth::limits::{BucketSet, effective};
use crate::auth::{self, AuthContext, METRICS_ROUTE, ScrapeAccess, is_public};
use crate::error::{AdminError, code};

/// The request id, authentication, then admission and the body's intake:
/// one layer, not three, because each `from_fn` layer clones the state,
/// boxes the rest of the request's future once more and copies it there, per
/// request (paired runs: one layer fewer cost 6 % less CPU per chat request).
/// Every answer, a refusal too, has the request id.
pub async fn per_request(State(app): State<AppState>, req: Request, next: Next) -> Response {
    crate::request_id::scoped(req, |req| async move {
        let req = match authenticate(&app, req).await {
            Ok(req) => req,
            Err(refused) => return refused,
        };
        match super::intake::take(&app, req).await {
            Ok(req) => next.run(req).await,
            Err(refused) => refused,
        }
    })
    .await
}

/// Authenticate every non-public request (the scrape key opens `/metrics` only).
pub async fn authenticate(app: &AppState, mut req: Request) -> Result<Request, Response> {
    // A forwarded client over `server.max_connections_per_ip` (`server::peers`).
    if let Some(crowded) = req.extensions().get::<Crowded>() {
        return Err(crowded.refusal(req.uri().path()));
    }
    if req.uri().path() == METRICS_ROUTE && auth::presents_scrape_key(app.config().metrics.scrape_key.as_ref(), &req) {
        req.extensions_mut().insert(ScrapeAccess);
    } else if !is_public(req.uri().path()) {
        // The head alone crosses the store read (a body is not `Sync`).
        let (mut head, body) = req.into_parts();
        match auth::authenticate(app.store.as_ref(), &app.auth_failures, &head).await {
            Ok(ctx) => {
                head.extensions.insert(ctx);
            }
            Err(refused) => return Err(*refused),
        }
        req = Request::from_parts(head, body);
    }
    Ok(req)
}

/// Marks a forwarded request whose client is at the cap; [`authenticate`]
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
        crate::error::ErrorFormat::for_path(path).busy(&message, retry)
    }
}

/// Rate limits of the admin read routes, per key.
pub async fn admin_read_limit(State(app): State<AppState>, req: Request, next: Next) -> Response {
    let Some(ctx) = req.extensions().get::<AuthContext>().cloned() else {
        return next.run(req).await;
    };
    let limits = effective(app.config().limits.admin_read, &Default::default());
    let d = app.limiter.check(BucketSet::AdminRead, &ctx.key.id, limits, Utc::now());
    let resp = if let Some(x) = &d.exceeded {
        let (events, audit) = crate::auth::limit_reply::limit_reached(&ctx, &d);
        if !events.is_empty()
            && let Err(e) = app.store.enqueue_events(events, audit).await
        {
            tracing::error!(error = %e, "recording api:limit_reached failed");
        }
        let mut e = AdminError::new(
            StatusCode::TOO_MANY_REQUESTS,
            code::RATE_LIMIT_EXCEEDED,
            format!("this API key reached its {} limit of {} admin reads; retry after {} s", x.window.name(), x.limit, x.retry_after_secs),
        );
        e.retry_after = Some(x.retry_after_secs);
        e.into_response()
    } else {
        next.run(req).await
    };
    crate::auth::limit_reply::with_limit_headers(resp, &d)
}
