//! What comes in, checked before any handler sees it: the path must decode to
//! UTF-8, a chat request must be admitted (`chat::admission`: the key's
//! limits, a place under `chat.max_in_flight`, the key's share of bodies
//! being received), and the body is read whole within a size cap, a
//! deadline and the host-wide cap on bytes being received.
//!
//! Called by the authentication layer once the caller is known, so an
//! anonymous client never gets its body read.
//! A path whose percent-encoding is not UTF-8 (`/api/receipts/%ff`) is a 400
//! in the route's format rather than the extractors' plain-text rejection.
//! A declared `Content-Length` over `server.max_body_bytes` is refused with
//! 413 before a byte of the body is read; a chunked body is counted as it
//! arrives and refused the moment it passes the cap. A client that trickles
//! its body (slowloris) gets 408 when `server.body_read_timeout_ms` has passed
//! since its headers arrived. A body that would take the bytes being
//! received by all connections past `server.max_buffered_body_bytes` gets
//! 503 `Server busy`. All answers use the route's error format. A chat body
//! that times out or breaks off is charged to its key (`admission::abandoned`).

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::Response;
use http_body_util::BodyExt;

use crate::app::AppState;
use crate::auth::AuthContext;
use crate::chat::admission;
use crate::error::ErrorFormat;

/// The route that takes a component's bytes (`POST`): its body cap is
/// `plugins.max_component_mb`, not `server.max_body_bytes`.
const PLUGIN_UPLOAD: &str = "/api/admin/plugins";

/// The group of a group-policy upload path (`/api/admin/groups/{id}/policies`).
fn group_policy_upload(path: &str) -> Option<&str> {
    let group = path.strip_prefix("/api/admin/groups/")?.strip_suffix("/policies")?;
    (!group.is_empty() && !group.contains('/')).then_some(group)
}

/// Check the path, admit a chat request, then buffer the body under the caps
/// and the deadline: the request to serve, or the answer that refuses it.
/// Called by the authentication layer (`auth::layer`) once the caller is known.
pub async fn take(app: &AppState, mut req: Request) -> Result<Request, Response> {
    let (max, timeout, buffered_max) = {
        let cfg = app.config();
        // A component published by an admin, or a group's policy by an admin
        // or that group's tenant admin, may be as large as the watched folder
        // accepts (an interpreted-language policy is tens of MiB).
        let path = req.uri().path();
        let upload = req.method() == axum::http::Method::POST
            && req.extensions().get::<AuthContext>().is_some_and(|auth| {
                (path == PLUGIN_UPLOAD && auth.is_admin()) || group_policy_upload(path).is_some_and(|g| auth.may_administer(g))
            });
        let max = if upload {
            cfg.server.max_body_bytes.max((cfg.plugins.max_component_mb as usize).saturating_mul(1024 * 1024))
        } else {
            cfg.server.max_body_bytes
        };
        (max, Duration::from_millis(cfg.server.body_read_timeout_ms), cfg.server.max_buffered_body_bytes)
    };
    let format = ErrorFormat::for_path(req.uri().path());
    if percent_encoding::percent_decode_str(req.uri().path()).decode_utf8().is_err() {
        return Err(format.error(StatusCode::BAD_REQUEST, "the path is not valid UTF-8 once percent-decoded"));
    }
    // Admission first (chat routes): a refused body is never read.
    let admitted = admission::admit(&app.chat, req.uri().path(), req.extensions().get::<AuthContext>()).await?;
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large(format, max));
    }
    let Some(admit) = admitted else {
        return read(app, req, format, max, timeout, buffered_max).await.map_err(|(resp, _)| resp);
    };
    let ctx = req.extensions().get::<AuthContext>().cloned();
    let admission::Admit { slot, body, load } = admit;
    req.extensions_mut().insert(slot);
    let result = read(app, req, format, max, timeout, buffered_max).await;
    // The body has arrived (or not): its place among the key's bodies is free.
    drop(body);
    match result {
        Ok(req) => Ok(req),
        Err((resp, abandoned)) => {
            if let (Some(why), Some(ctx)) = (abandoned, ctx) {
                admission::abandoned(&app.chat, &ctx, &load, why).await;
            }
            Err(resp)
        }
    }
}

/// Buffer the body: the request with its body in memory, or the refusal and,
/// when the client abandoned the body, why.
async fn read(
    app: &AppState,
    req: Request,
    format: ErrorFormat,
    max: usize,
    timeout: Duration,
    buffered_max: usize,
) -> Result<Request, (Response, Option<&'static str>)> {
    if axum::body::HttpBody::size_hint(req.body()).exact() == Some(0) {
        return Ok(req);
    }
    let (parts, mut body) = req.into_parts();
    let mut receiving = app.chat.admission.receiving();
    let collect = async {
        let mut chunks: Vec<Bytes> = Vec::new();
        let mut len = 0usize;
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame?.into_data() else { continue };
            len += data.len();
            if len > max {
                return Ok(Err(too_large(format, max)));
            }
            if !receiving.add(data.len(), buffered_max) {
                tracing::warn!(buffered_max, "request body refused: server.max_buffered_body_bytes are being received");
                let message = format!(
                    "the gateway is receiving its limit of {buffered_max} bytes of request bodies at once \
                     (server.max_buffered_body_bytes); retry after {} s",
                    admission::RETRY_AFTER_SECS
                );
                return Ok(Err(format.busy(&message, admission::RETRY_AFTER_SECS)));
            }
            chunks.push(data);
        }
        Ok::<_, axum::Error>(Ok(join(chunks, len)))
    };
    match tokio::time::timeout(timeout, collect).await {
        Ok(Ok(Ok(bytes))) => Ok(Request::from_parts(parts, Body::from(bytes))),
        Ok(Ok(Err(refused))) => Err((refused, None)),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "request body could not be read");
            Err((
                format.error(
                    StatusCode::BAD_REQUEST,
                    "the request body could not be read (the connection broke or the chunked encoding is invalid)",
                ),
                Some("cut off"),
            ))
        }
        Err(_) => Err((
            format.error(
                StatusCode::REQUEST_TIMEOUT,
                &format!("the request body did not arrive within {} ms; send it in one go", timeout.as_millis()),
            ),
            Some("timed out"),
        )),
    }
}

/// One buffer of the chunks (no copy for the usual single chunk).
fn join(mut chunks: Vec<Bytes>, len: usize) -> Bytes {
    if chunks.len() == 1 {
        return chunks.pop().unwrap_or_default();
    }
    let mut all = Vec::with_capacity(len);
    for c in &chunks {
        all.extend_from_slice(c);
    }
    Bytes::from(all)
}

fn too_large(format: ErrorFormat, max: usize) -> Response {
    format.error(StatusCode::PAYLOAD_TOO_LARGE, &format!("the request body is larger than {max} bytes"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_groups_own_policy_route_is_a_group_upload() {
        assert_eq!(super::group_policy_upload("/api/admin/groups/grp_a/policies"), Some("grp_a"));
        for other in
            ["/api/admin/groups//policies", "/api/admin/groups/a/b/policies", "/api/admin/groups/a/policies/x", "/api/admin/plugins"]
        {
            assert_eq!(super::group_policy_upload(other), None, "{other}");
        }
    }
}
