//! What comes in, checked before any handler sees it: the path must decode to
//! UTF-8, a chat request must get a place under `chat.max_in_flight`
//! (`chat::admission`), and the body is read whole within a size cap and a
//! deadline.
//!
//! Called by the authentication layer once the caller is known, so an
//! anonymous client never gets its body read.
//! A path whose percent-encoding is not UTF-8 (`/api/receipts/%ff`) is a 400
//! in the route's format rather than the extractors' plain-text rejection.
//! A declared `Content-Length` over `server.max_body_bytes` is refused with
//! 413 before a byte of the body is read; a chunked body is counted as it
//! arrives and refused the moment it passes the cap. A client that trickles
//! its body (slowloris) gets 408 when `server.body_read_timeout_ms` has passed
//! since its headers arrived. Both answers use the route's error format.

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::error::ErrorFormat;
use crate::app::AppState;

/// Check the path, admit a chat request, then buffer the body under the cap
/// and the deadline: the request to serve, or the answer that refuses it.
/// Called by the authentication layer (`auth::layer`) once the caller is known.
pub async fn take(app: &AppState, mut req: Request) -> Result<Request, Response> {
    let (max, timeout) = {
        let cfg = app.config();
        (cfg.server.max_body_bytes, Duration::from_millis(cfg.server.body_read_timeout_ms))
    };
    let format = ErrorFormat::for_path(req.uri().path());
    if percent_encoding::percent_decode_str(req.uri().path()).decode_utf8().is_err() {
        return Err(format.error(StatusCode::BAD_REQUEST, "the path is not valid UTF-8 once percent-decoded"));
    }
    // Load shedding first (chat routes): a refused body is never read.
    match crate::chat::admission::admit(app, req.uri().path()) {
        Ok(Some(slot)) => {
            req.extensions_mut().insert(slot);
        }
        Ok(None) => {}
        Err(busy) => return Err(busy.into_response()),
    }
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large(format, max));
    }
    if axum::body::HttpBody::size_hint(req.body()).exact() == Some(0) {
        return Ok(req);
    }
    let (parts, body) = req.into_parts();
    let bytes = match tokio::time::timeout(timeout, Limited::new(body, max).collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => return Err(too_large(format, max)),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "request body could not be read");
            return Err(format.error(
                StatusCode::BAD_REQUEST,
                "the request body could not be read (the connection broke or the chunked encoding is invalid)",
            ));
        }
        Err(_) => {
            return Err(format.error(
                StatusCode::REQUEST_TIMEOUT,
                &format!("the request body did not arrive within {} ms; send it in one go", timeout.as_millis()),
            ));
        }
    };
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

fn too_large(format: ErrorFormat, max: usize) -> Response {
    format.error(StatusCode::PAYLOAD_TOO_LARGE, &format!("the request body is larger than {max} bytes"))
}
