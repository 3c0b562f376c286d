//! `GET /metrics`: the Prometheus exposition of `crate::metrics`, with the
//! gauges that are sampled rather than kept on every path.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::app::AppState;
use crate::auth::MetricsReader;
use crate::metrics;

/// `GET /metrics`.
#[utoipa::path(
    get, path = "/metrics", tag = "admin",
    description = "For admin keys and the scrape key named by `metrics.scrape_key_env` (Prometheus' `authorization` \
                   credentials); any other key gets 403. Models the config does not list are labelled `other`.",
    responses((status = 200, description = "Prometheus/OpenMetrics text", body = String,
               content_type = "application/openmetrics-text"))
)]
pub async fn metrics(State(app): State<AppState>, _reader: MetricsReader) -> Response {
    // Sampled at scrape time: a read of the store, not a counter kept on every path.
    match app.webhooks.queue_depth().await {
        Ok(depth) => {
            metrics::get().webhook_queue_depth.set(i64::try_from(depth).unwrap_or(i64::MAX));
        }
        Err(e) => tracing::warn!(error = %e, "reading the webhook queue depth failed"),
    }
    metrics::get().provider_sessions.set(i64::try_from(gatehouse_plugin_host::plugin::provider_sessions_held()).unwrap_or(i64::MAX));
    metrics::get().chat_in_flight.set(i64::try_from(app.chat.admission.in_flight()).unwrap_or(i64::MAX));
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], metrics::get().encode()).into_response()
}
