//! Webhook management under `/api/admin/webhooks` (admin API key; nested
//! error format `{success: false, error: {code, message}}`). Every change is
//! audited (`type` `webhook_management`) in the same commit as the change.
//!
//! # Endpoint object
//!
//! ```json
//! {
//!   "id": "wh_0192f0c1a2b37c4d8e9f0a1b2c3d4e5f",
//!   "url": "https://hooks.example.com/gatehouse",
//!   "description": "SIEM ingest",
//!   "events": ["api:model_failover", "dlp:incident"],
//!   "enabled": true,
//!   "status": "enabled",              // or "disabled"
//!   "failureCount": 0,                // failed deliveries in a row
//!   "disabledReason": null,           // e.g. "20 consecutive failed deliveries (last: HTTP 500)"
//!   "disabledAt": null,
//!   "createdAt": "2026-11-23T10:00:00.000Z",
//!   "updatedAt": "2026-11-23T10:00:00.000Z"
//! }
//! ```
//! The signing secret is never part of it.
//!
//! # Routes
//!
//! | Method and path | Body | 2xx answer (`data`) |
//! |---|---|---|
//! | `GET /api/admin/webhooks` | — | 200 `{endpoints: [endpoint], events: [{name, description}]}` (the event catalog) |
//! | `POST /api/admin/webhooks` | `{url, events, description?, enabled?}` | 201 `{endpoint, secret: "whsec_…", note}` — the only time the secret is shown |
//! | `GET /api/admin/webhooks/{id}` | — | 200 endpoint |
//! | `PUT /api/admin/webhooks/{id}` | any of `{url, events, description, enabled}` | 200 endpoint; `enabled: true` on a disabled endpoint resets `failureCount` to 0 |
//! | `POST /api/admin/webhooks/{id}/rotate-secret` | — | 200 `{endpoint, secret: "whsec_…", note}`; later deliveries (retries included) are signed with the new secret only |
//! | `POST /api/admin/webhooks/{id}/test` | — | 202 `{eventId: "evt_test_…", deliveryId, status: "queued"}` |
//! | `DELETE /api/admin/webhooks/{id}` | — | 200 `{id, deleted: true}` |
//! | `GET /api/admin/webhooks/{id}/deliveries?limit=50` | — | 200 `{deliveries: [delivery]}`, newest first |
//! | `POST /api/admin/webhooks/{id}/deliveries/{deliveryId}/retry` | — | 202 delivery (pending again, `attempts: 0`, `retries` one more) |
//!
//! Field rules: `url` is `http` or `https`, at most 2048 characters, without
//! user info, and may not point at a private, loopback, link-local,
//! unspecified, CGNAT, unique-local, multicast or reserved address (however it
//! is spelled, and after DNS resolution) unless the gateway runs with
//! `WEBHOOKS_ALLOW_PRIVATE=true`; it is stored normalised (`http://EXAMPLE.com`
//! → `http://example.com/`). `events` is a non-empty list of catalog names or
//! `*` (all); duplicates are dropped; an unknown name is a 400. `description`
//! is at most 500 characters (default `""`); `enabled` defaults to `true`.
//! Unknown fields are refused. A disabled endpoint (by `enabled: false` or
//! after 20 failed deliveries in a row) receives nothing: its queued
//! deliveries are cancelled as they come due (status `cancelled`), and events
//! fired while it is disabled are not queued for it.
//!
//! The test route queues a `webhook:test` event `{message, endpointId}` with id
//! `evt_test_<hex>` for this endpoint only, as a normal delivery (retries, and
//! it counts toward auto-disable). It answers at once; watch the result in the
//! deliveries view. A disabled endpoint answers 409 `CONFLICT`.
//!
//! # Delivery object (the deliveries view)
//!
//! Pending deliveries (waiting for a retry, or test deliveries) and the last
//! `webhooks.deliveries_kept_per_endpoint` finished ones, most recently
//! updated first. A first attempt of an outbox event appears once it has an
//! outcome (acknowledged, failed, or scheduled for a retry).
//!
//! ```json
//! {
//!   "id": "0192f0c1-a2b3-7c4d-8e9f-0a1b2c3d4e5f",   // X-Gatehouse-Delivery
//!   "eventId": "evt_…", "eventType": "api:model_failover",
//!   "status": "pending",              // pending | succeeded | failed | cancelled
//!   "attempts": 1,                    // since the last manual retry
//!   "retries": 0,                     // manual retries
//!   "lastStatusCode": 503,            // null if no HTTP answer
//!   "lastLatencyMs": 12,
//!   "lastError": "HTTP 503",          // or "timed out after 5000 ms", "connection failed: …", "refused by the URL guard: …"
//!   "nextAttemptAt": "2026-11-23T10:00:10.000Z",
//!   "createdAt": "…", "updatedAt": "…"
//! }
//! ```
//!
//! # What a receiver gets
//! `POST <url>` with the envelope `{id, type, created, data}` and
//! `Content-Type: application/json`, `X-Gatehouse-Event: <type>`,
//! `X-Gatehouse-Delivery: <UUID, the same on every attempt and after a
//! restart>`, `X-Gatehouse-Signature: t=<unix seconds>,v1=<hex>` where `<hex>`
//! is the lowercase hex HMAC-SHA256, keyed by the whole `whsec_…` string, of
//! `<t>.<raw body>` (exactly one `v1`). Any 2xx acknowledges; other statuses
//! (redirects are not followed), connection errors and no answer within
//! `webhooks.timeout_ms` are failures, retried after the next delay of
//! `webhooks.retry_delays_secs`. Delivery is at-least-once: deduplicate on
//! `X-Gatehouse-Delivery`. Receivers that verify this: `examples/webhooks/`.
//!
//! # Configuration (`[webhooks]`)
//! | key | default | meaning |
//! |---|---|---|
//! | `allow_private` | `false` | allow private/loopback/link-local targets (`WEBHOOKS_ALLOW_PRIVATE=true`) |
//! | `retry_delays_secs` | `[0, 10, 60]` | delay before each attempt; its length is the number of attempts |
//! | `retry_delays_ms` | — | the same in milliseconds (set one of the two) |
//! | `timeout_ms` | `5000` | per attempt |
//! | `disable_after` | `20` | failed deliveries in a row that disable an endpoint |
//! | `poll_interval_ms` | `100` | how often the dispatcher reads new outbox events |
//! | `max_in_flight_per_endpoint` | `8` | concurrent requests to one endpoint |
//! | `deliveries_kept_per_endpoint` | `200` | finished deliveries kept for the deliveries view |
//! | `events_retention_days` | `30` | days an outbox event is kept once every enabled endpoint is past it; `0` keeps all |
//!
//! # Errors
//! 400 `VALIDATION_ERROR` (bad body, URL refused, unknown event), 404
//! `NOT_FOUND` (no such endpoint or delivery), 409 `CONFLICT` (test on a
//! disabled endpoint; a retry the delivery's state refuses), plus the
//! 401/403 of every admin route.

use std::sync::Arc;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::admin::{new_id, ok, text_field};
use crate::api::json::AdminJson;
use crate::api::schema::Success;
use crate::auth::{Admin, AuthContext};
use crate::error::{AdminError, NestedError};
use crate::time::iso;
use crate::webhooks::store::{Delivery, DeliveryStatus, Endpoint, EndpointPatch, TEST_EVENT};
use crate::webhooks::{EVENT_CATALOG, WebhookSecret, Webhooks, is_known_event, ssrf};
use gatehouse_store::audit::{Audit, category, kind};
use gatehouse_store::model::{AuditEntry, AuditUser};
use gatehouse_store::records::OutboxEvent;

/// Longest description.
const MAX_DESCRIPTION: usize = 500;
/// Most event names on one endpoint.
const MAX_EVENTS: usize = 64;
/// Largest page of the deliveries view.
const MAX_DELIVERIES_PAGE: usize = 200;

type Wh = State<Arc<Webhooks>>;

/// The webhook routes, to merge into the host's route table (which applies
/// authentication and the other layers). Paths and methods come from the
/// handlers' `#[utoipa::path]`, as in `api/routes.rs`.
pub fn router<S: Clone + Send + Sync + 'static>(webhooks: Arc<Webhooks>) -> OpenApiRouter<S> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one, update, delete))
        .routes(routes!(rotate_secret))
        .routes(routes!(test))
        .routes(routes!(deliveries))
        .routes(routes!(retry_delivery))
        .with_state(webhooks)
}

/// A webhook endpoint; never its signing secret.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct EndpointView<'a> {
    id: &'a str,
    url: &'a str,
    description: &'a str,
    events: &'a [String],
    enabled: bool,
    /// `enabled` or `disabled`.
    status: &'static str,
    /// Failed deliveries in a row.
    failure_count: u32,
    disabled_reason: Option<&'a str>,
    disabled_at: Option<String>,
    created_at: String,
    updated_at: String,
}

impl<'a> From<&'a Endpoint> for EndpointView<'a> {
    fn from(e: &'a Endpoint) -> Self {
        EndpointView {
            id: &e.id,
            url: &e.url,
            description: &e.description,
            events: &e.events,
            enabled: e.enabled,
            status: if e.enabled { "enabled" } else { "disabled" },
            failure_count: e.failure_count,
            disabled_reason: e.disabled_reason.as_deref(),
            disabled_at: e.disabled_at.map(iso),
            created_at: iso(e.created_at),
            updated_at: iso(e.updated_at),
        }
    }
}

fn delivery_view(d: &Delivery) -> Value {
    json!({
        "id": d.id,
        "eventId": d.event_id,
        "eventType": d.event_type,
        "status": match d.status {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Succeeded => "succeeded",
            DeliveryStatus::Failed => "failed",
            DeliveryStatus::Cancelled => "cancelled",
        },
        "attempts": d.attempts,
        "retries": d.retries,
        "lastStatusCode": d.last_status_code,
        "lastLatencyMs": d.last_latency_ms,
        "lastError": d.last_error,
        "nextAttemptAt": d.next_attempt_at.map(iso),
        "createdAt": iso(d.created_at),
        "updatedAt": iso(d.updated_at),
    })
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    /// `http` or `https`, at most 2048 characters; not a private address unless `WEBHOOKS_ALLOW_PRIVATE=true`.
    url: String,
    /// Catalog names or `*`.
    events: Vec<String>,
    /// At most 500 characters.
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    enabled: Option<bool>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct UpdateBody {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    events: Option<Vec<String>>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    enabled: Option<bool>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct DeliveriesQuery {
    /// 1 to 200; default 50.
    #[serde(default)]
    #[param(minimum = 1, maximum = 200)]
    limit: Option<usize>,
}

/// Known names, duplicates dropped, order kept.
fn check_events(events: Vec<String>) -> Result<Vec<String>, AdminError> {
    if events.is_empty() {
        return Err(AdminError::validation("`events` must name at least one event (or `*` for all)"));
    }
    if events.len() > MAX_EVENTS {
        return Err(AdminError::validation(format!("`events` has more than {MAX_EVENTS} entries")));
    }
    let mut out: Vec<String> = Vec::with_capacity(events.len());
    for e in events {
        let e = e.trim().to_owned();
        if !is_known_event(&e) {
            let names: Vec<&str> = EVENT_CATALOG.iter().map(|(n, _)| *n).collect();
            return Err(AdminError::validation(format!("`events`: unknown event {e:?}; known events are {}", names.join(", "))));
        }
        if !out.contains(&e) {
            out.push(e);
        }
    }
    Ok(out)
}

async fn check_url(wh: &Webhooks, url: &str) -> Result<String, AdminError> {
    ssrf::check(url, wh.allow_private(), wh.lookup.as_ref())
        .await
        .map(|u| u.to_string())
        .map_err(|e| AdminError::validation(format!("`url`: {e}")))
}

/// `scheme://host[:port]`: what audit records say about a target (a URL's
/// path or query may carry a token).
fn origin(url: &str) -> String {
    reqwest::Url::parse(url).map(|u| u.origin().ascii_serialization()).unwrap_or_default()
}

async fn actor(wh: &Webhooks, ctx: &AuthContext, audit: Audit, endpoint: &str) -> AuditEntry {
    let user = wh.host_store.get_user(&ctx.key.user_id).await.ok().flatten().map(|u| AuditUser::from(&u)).unwrap_or_else(|| AuditUser {
        id: ctx.key.user_id.clone(),
        name: String::new(),
        email: String::new(),
    });
    audit.user(Some(user)).meta("apiKeyId", ctx.key.id.clone()).meta("endpoint", endpoint).build()
}

/// `{endpoint, secret, note}`: the only time a secret is shown.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct EndpointWithSecret<'a> {
    endpoint: EndpointView<'a>,
    /// `whsec_…`
    secret: &'a str,
    note: &'static str,
}

fn not_found(id: &str) -> AdminError {
    AdminError::not_found(format!("webhook endpoint {id} not found"))
}

/// `GET /api/admin/webhooks`.
#[utoipa::path(
    get, path = "/api/admin/webhooks", tag = "webhooks",
    responses((status = 200, description = "`{endpoints: [endpoint], events: [{name, description}]}` (the event catalog)", body = Success<crate::api::schema::JsonObject>))
)]
async fn list(State(wh): Wh, Admin(_): Admin) -> Result<Json<Value>, AdminError> {
    let endpoints = wh.store.list_endpoints().await?;
    let events: Vec<Value> = EVENT_CATALOG.iter().map(|(name, description)| json!({"name": name, "description": description})).collect();
    Ok(ok(json!({
        "endpoints": endpoints.iter().map(EndpointView::from).collect::<Vec<_>>(),
        "events": events,
    })))
}

/// `POST /api/admin/webhooks`.
#[utoipa::path(
    post, path = "/api/admin/webhooks", tag = "webhooks", request_body = CreateBody,
    responses(
        (status = 201, description = "Created; the signing secret is shown only here", body = Success<EndpointWithSecret>),
        (status = 400, description = "Bad body, URL refused or unknown event (`VALIDATION_ERROR`)", body = NestedError),
    )
)]
async fn create(State(wh): Wh, Admin(ctx): Admin, AdminJson(body): AdminJson<CreateBody>) -> Result<(StatusCode, Json<Value>), AdminError> {
    let events = check_events(body.events)?;
    let description = text_field("description", body.description.as_deref().unwrap_or_default(), MAX_DESCRIPTION, false)?;
    let url = check_url(&wh, &body.url).await?;
    let now = Utc::now();
    let endpoint = Endpoint {
        id: new_id("wh"),
        url,
        description,
        events,
        enabled: body.enabled.unwrap_or(true),
        failure_count: 0,
        disabled_reason: None,
        disabled_at: None,
        created_at: now,
        updated_at: now,
    };
    let secret = WebhookSecret::generate();
    let audit = actor(
        &wh,
        &ctx,
        Audit::new(kind::WEBHOOK_MANAGEMENT, category::SYSTEM_INTEGRITY, format!("Webhook endpoint {} created", endpoint.id))
            .meta("operation", "create_webhook")
            .meta("webhookId", endpoint.id.clone())
            .meta("target", origin(&endpoint.url))
            .meta("events", endpoint.events.clone())
            .meta("enabled", endpoint.enabled),
        "POST /api/admin/webhooks",
    )
    .await;
    let endpoint = wh.store.create_endpoint(endpoint, secret.clone().into(), audit).await?;
    wh.kick(&endpoint.id);
    Ok((
        StatusCode::CREATED,
        ok(EndpointWithSecret {
            endpoint: EndpointView::from(&endpoint),
            secret: secret.expose(),
            note: "store this signing secret now: it is not shown again",
        }),
    ))
}

/// `GET /api/admin/webhooks/{id}`.
#[utoipa::path(
    get, path = "/api/admin/webhooks/{id}", tag = "webhooks", params(("id" = String, Path, description = "`wh_…`")),
    responses((status = 200, description = "The endpoint", body = Success<EndpointView>), (status = 404, description = "No such endpoint", body = NestedError))
)]
async fn get_one(State(wh): Wh, Admin(_): Admin, Path(id): Path<String>) -> Result<Json<Value>, AdminError> {
    let e = wh.store.get_endpoint(&id).await?.ok_or_else(|| not_found(&id))?;
    Ok(ok(EndpointView::from(&e)))
}

/// `PUT /api/admin/webhooks/{id}`.
#[utoipa::path(
    put, path = "/api/admin/webhooks/{id}", tag = "webhooks", params(("id" = String, Path, description = "`wh_…`")), request_body = UpdateBody,
    responses(
        (status = 200, description = "The changed endpoint; `enabled: true` on a disabled one resets `failureCount`", body = Success<EndpointView>),
        (status = 400, description = "Bad body (`VALIDATION_ERROR`)", body = NestedError),
        (status = 404, description = "No such endpoint", body = NestedError),
    )
)]
async fn update(
    State(wh): Wh,
    Admin(ctx): Admin,
    Path(id): Path<String>,
    AdminJson(body): AdminJson<UpdateBody>,
) -> Result<Json<Value>, AdminError> {
    let current = wh.store.get_endpoint(&id).await?.ok_or_else(|| not_found(&id))?;
    if body.url.is_none() && body.events.is_none() && body.description.is_none() && body.enabled.is_none() {
        return Err(AdminError::validation("send at least one of `url`, `events`, `description`, `enabled`"));
    }
    let events = body.events.map(check_events).transpose()?;
    let description = body.description.as_deref().map(|d| text_field("description", d, MAX_DESCRIPTION, false)).transpose()?;
    let url = match &body.url {
        Some(u) => Some(check_url(&wh, u).await?),
        None => None,
    };
    let mut changed: Vec<&str> = Vec::new();
    for (name, set) in
        [("url", url.is_some()), ("events", events.is_some()), ("description", description.is_some()), ("enabled", body.enabled.is_some())]
    {
        if set {
            changed.push(name);
        }
    }
    let what = match body.enabled {
        Some(true) if !current.enabled => "re-enabled (failure counter reset)",
        Some(false) if current.enabled => "disabled",
        _ => "updated",
    };
    let mut audit = Audit::new(kind::WEBHOOK_MANAGEMENT, category::SYSTEM_INTEGRITY, format!("Webhook endpoint {id} {what}"))
        .meta("operation", "update_webhook")
        .meta("webhookId", id.clone())
        .meta("changed", changed);
    if let Some(u) = &url {
        audit = audit.meta("target", origin(u));
    }
    if let Some(e) = &events {
        audit = audit.meta("events", e.clone());
    }
    if let Some(en) = body.enabled {
        audit = audit.meta("enabled", en);
    }
    let audit = actor(&wh, &ctx, audit, "PUT /api/admin/webhooks/{id}").await;
    let patch = EndpointPatch { url, description, events, enabled: body.enabled };
    let e = wh.store.update_endpoint(&id, patch, audit).await?;
    wh.kick(&id);
    Ok(ok(EndpointView::from(&e)))
}

/// `POST /api/admin/webhooks/{id}/rotate-secret`.
#[utoipa::path(
    post, path = "/api/admin/webhooks/{id}/rotate-secret", tag = "webhooks", params(("id" = String, Path, description = "`wh_…`")),
    responses(
        (status = 200, description = "The new secret; later deliveries are signed with it only", body = Success<EndpointWithSecret>),
        (status = 404, description = "No such endpoint", body = NestedError),
    )
)]
async fn rotate_secret(State(wh): Wh, Admin(ctx): Admin, Path(id): Path<String>) -> Result<Json<Value>, AdminError> {
    let secret = WebhookSecret::generate();
    let audit = actor(
        &wh,
        &ctx,
        Audit::new(kind::WEBHOOK_MANAGEMENT, category::DATA_PROTECTION, format!("Signing secret of webhook endpoint {id} rotated"))
            .meta("operation", "rotate_webhook_secret")
            .meta("webhookId", id.clone()),
        "POST /api/admin/webhooks/{id}/rotate-secret",
    )
    .await;
    let e = wh.store.rotate_secret(&id, secret.clone().into(), audit).await?;
    Ok(ok(EndpointWithSecret {
        endpoint: EndpointView::from(&e),
        secret: secret.expose(),
        note: "store this signing secret now: it is not shown again; the old one no longer signs anything",
    }))
}

/// `POST /api/admin/webhooks/{id}/test`.
#[utoipa::path(
    post, path = "/api/admin/webhooks/{id}/test", tag = "webhooks", params(("id" = String, Path, description = "`wh_…`")),
    responses(
        (status = 202, description = "`{eventId, deliveryId, status: \"queued\"}`", body = Success<crate::api::schema::JsonObject>),
        (status = 404, description = "No such endpoint", body = NestedError),
        (status = 409, description = "The endpoint is disabled (`CONFLICT`)", body = NestedError),
    )
)]
async fn test(State(wh): Wh, Admin(ctx): Admin, Path(id): Path<String>) -> Result<(StatusCode, Json<Value>), AdminError> {
    let now = Utc::now();
    let event = OutboxEvent {
        id: format!("evt_test_{}", uuid::Uuid::new_v4().simple()),
        kind: TEST_EVENT.to_owned(),
        created: now.timestamp(),
        data: json!({
            "message": "This is a test delivery from Gatehouse.",
            "endpointId": id,
        }),
    };
    let delay = wh.config.load().webhooks.retry_delays().first().copied().unwrap_or_default();
    let delivery = Delivery::new(&id, &event, now, now + delay)?;
    let audit = actor(
        &wh,
        &ctx,
        Audit::new(kind::WEBHOOK_MANAGEMENT, category::SYSTEM_INTEGRITY, format!("Test delivery queued for webhook endpoint {id}"))
            .meta("operation", "test_webhook")
            .meta("webhookId", id.clone())
            .meta("eventId", event.id.clone())
            .meta("deliveryId", delivery.id.clone()),
        "POST /api/admin/webhooks/{id}/test",
    )
    .await;
    let delivery_id = delivery.id.clone();
    wh.store.queue_delivery(delivery, audit).await?;
    wh.kick(&id);
    Ok((StatusCode::ACCEPTED, ok(json!({"eventId": event.id, "deliveryId": delivery_id, "status": "queued"}))))
}

/// `DELETE /api/admin/webhooks/{id}`.
#[utoipa::path(
    delete, path = "/api/admin/webhooks/{id}", tag = "webhooks", params(("id" = String, Path, description = "`wh_…`")),
    responses((status = 200, description = "`{id, deleted: true}`", body = Success<crate::api::schema::JsonObject>), (status = 404, description = "No such endpoint", body = NestedError))
)]
async fn delete(State(wh): Wh, Admin(ctx): Admin, Path(id): Path<String>) -> Result<Json<Value>, AdminError> {
    let audit = actor(
        &wh,
        &ctx,
        Audit::new(kind::WEBHOOK_MANAGEMENT, category::SYSTEM_INTEGRITY, format!("Webhook endpoint {id} deleted"))
            .meta("operation", "delete_webhook")
            .meta("webhookId", id.clone()),
        "DELETE /api/admin/webhooks/{id}",
    )
    .await;
    wh.store.delete_endpoint(&id, audit).await?;
    wh.kick(&id);
    Ok(ok(json!({"id": id, "deleted": true})))
}

/// `GET /api/admin/webhooks/{id}/deliveries`.
#[utoipa::path(
    get, path = "/api/admin/webhooks/{id}/deliveries", tag = "webhooks",
    params(("id" = String, Path, description = "`wh_…`"), DeliveriesQuery),
    responses(
        (status = 200, description = "`{deliveries: [delivery]}`, most recently updated first", body = Success<crate::api::schema::JsonObject>),
        (status = 400, description = "Bad `limit` (`VALIDATION_ERROR`)", body = NestedError),
        (status = 404, description = "No such endpoint", body = NestedError),
    )
)]
async fn deliveries(
    State(wh): Wh,
    Admin(_): Admin,
    Path(id): Path<String>,
    q: Result<Query<DeliveriesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, AdminError> {
    let Query(q) = q.map_err(|e| AdminError::validation(e.body_text()))?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=MAX_DELIVERIES_PAGE).contains(&limit) {
        return Err(AdminError::validation(format!("`limit` must be from 1 to {MAX_DELIVERIES_PAGE}")));
    }
    wh.store.get_endpoint(&id).await?.ok_or_else(|| not_found(&id))?;
    let rows = wh.store.recent_deliveries(&id, limit).await?;
    Ok(ok(json!({"deliveries": rows.iter().map(delivery_view).collect::<Vec<_>>()})))
}

/// `POST /api/admin/webhooks/{id}/deliveries/{deliveryId}/retry`.
#[utoipa::path(
    post, path = "/api/admin/webhooks/{id}/deliveries/{deliveryId}/retry", tag = "webhooks",
    params(("id" = String, Path, description = "`wh_…`"), ("deliveryId" = String, Path, description = "The delivery's id (`X-Gatehouse-Delivery`)")),
    responses(
        (status = 202, description = "The delivery, pending again with the same id and body and a fresh set of attempts", body = Success<crate::api::schema::JsonObject>),
        (status = 404, description = "No such endpoint or delivery", body = NestedError),
        (status = 409, description = "The delivery is pending or succeeded, kept no body, or the endpoint is disabled (`CONFLICT`)", body = NestedError),
    )
)]
async fn retry_delivery(
    State(wh): Wh,
    Admin(ctx): Admin,
    Path((id, delivery_id)): Path<(String, String)>,
) -> Result<(StatusCode, Json<Value>), AdminError> {
    let delay = wh.config.load().webhooks.retry_delays().first().copied().unwrap_or_default();
    let audit = actor(
        &wh,
        &ctx,
        Audit::new(
            kind::WEBHOOK_MANAGEMENT,
            category::SYSTEM_INTEGRITY,
            format!("Delivery {delivery_id} of webhook endpoint {id} queued again"),
        )
        .meta("operation", "retry_webhook_delivery")
        .meta("webhookId", id.clone())
        .meta("deliveryId", delivery_id.clone()),
        "POST /api/admin/webhooks/{id}/deliveries/{deliveryId}/retry",
    )
    .await;
    let d = wh.store.requeue_delivery(&id, &delivery_id, Utc::now() + delay, audit).await?;
    wh.kick(&id);
    Ok((StatusCode::ACCEPTED, ok(delivery_view(&d))))
}
