//! Authentication: `Authorization: Bearer sk-…` on every route but the public
//! ones, checked by [`authenticate`] (run by `api::middleware::authenticate`
//! on every request); handlers take [`Authed`] or [`Admin`] extractors, so a
//! handler that forgets auth does not compile, and one whose route was wrongly
//! listed as public fails closed (401). This module only authenticates:
//! admission and body intake are their own middleware.

pub mod failures;
pub mod keys;
pub mod limit_reply;
pub mod limits;

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};

use crate::config::ScrapeKey;
use crate::error::ErrorFormat;
use failures::FailureWatch;
use gatehouse_store::Store;
use gatehouse_store::model::ApiKeyRecord;
use keys::KeyHash;

/// Routes served without a key. The only list of them.
pub const PUBLIC_ROUTES: &[&str] = &["/health"];

pub fn is_public(path: &str) -> bool {
    PUBLIC_ROUTES.contains(&path)
}

/// The one route the scrape key (`metrics.scrape_key_env`) opens.
pub const METRICS_ROUTE: &str = "/metrics";

/// Marks a request that presented the scrape key on [`METRICS_ROUTE`].
#[derive(Debug, Clone, Copy)]
pub struct ScrapeAccess;

/// The caller, as the middleware authenticated it.
#[derive(Debug, Clone)]
pub struct AuthContext {
    pub key: Arc<ApiKeyRecord>,
}

impl AuthContext {
    pub fn is_admin(&self) -> bool {
        self.key.admin
    }

    /// The group a tenant admin key administers (`None` for every other key).
    pub fn tenant_group(&self) -> Option<&str> {
        if self.key.tenant_admin && !self.key.admin { self.key.group_id.as_deref() } else { None }
    }

    /// May this key administer `group`'s tenant routes? Admins any group,
    /// a tenant admin only its own.
    pub fn may_administer(&self, group: &str) -> bool {
        self.is_admin() || self.tenant_group() == Some(group)
    }
}

/// Does the request carry the configured scrape key? Anything else goes on to
/// the ordinary key check (and its 401 and failure count).
pub fn presents_scrape_key(expected: Option<&ScrapeKey>, req: &Request) -> bool {
    let Some(expected) = expected else { return false };
    let token = req.headers().get(axum::http::header::AUTHORIZATION).and_then(|h| h.to_str().ok()).and_then(keys::bearer_token);
    token.is_some_and(|t| expected.matches(t))
}

/// The key a request presents, or the 401 (500 if the store fails) in its
/// route's format; every refusal is counted in `failures` by client address.
pub async fn authenticate(store: &dyn Store, failures: &FailureWatch, req: &Parts) -> Result<AuthContext, Box<Response>> {
    let path = req.uri.path();
    let format = ErrorFormat::for_path(path);
    let client = req.extensions.get::<failures::ClientAddr>().and_then(|c| c.0);
    let refuse = |reason: failures::Reason, revoked: Option<&str>, message: &str| {
        failures.record(client, reason, path, revoked);
        Box::new(format.unauthorized(message))
    };
    let Some(header) = req.headers.get(axum::http::header::AUTHORIZATION) else {
        return Err(refuse(failures::Reason::Missing, None, "missing API key: send `Authorization: Bearer sk-…`"));
    };
    let Some(token) = header.to_str().ok().and_then(keys::bearer_token) else {
        return Err(refuse(failures::Reason::Malformed, None, "malformed Authorization header: use `Bearer sk-…`"));
    };
    if !token.starts_with(keys::KEY_PREFIX) {
        return Err(refuse(failures::Reason::Invalid, None, "invalid API key: keys start with `sk-`"));
    }
    let hash = KeyHash::of(token);
    match store.find_key_by_hash(&hash).await {
        Ok(Some(key)) if key.is_revoked() => Err(refuse(failures::Reason::Revoked, Some(&key.id), "this API key has been revoked")),
        Ok(Some(key)) if key.suspended_at.is_some() => {
            Err(refuse(failures::Reason::Deactivated, None, "this API key's user is deactivated; an admin can reactivate them"))
        }
        Ok(Some(key)) => Ok(AuthContext { key }),
        Ok(None) => Err(refuse(failures::Reason::Invalid, None, "invalid API key")),
        Err(e) => {
            tracing::error!(error = %e, "key lookup failed");
            // A database out of reach is 503 with `Retry-After`; other store failures 500.
            Err(Box::new(match format {
                ErrorFormat::Flat => crate::error::ChatError::from(e).into_response(),
                _ => crate::error::AdminError::from(e).into_response(),
            }))
        }
    }
}

/// Any valid key.
#[derive(Debug, Clone)]
pub struct Authed(pub AuthContext);

/// A valid admin key.
#[derive(Debug, Clone)]
pub struct Admin(pub AuthContext);

impl<S: Send + Sync> FromRequestParts<S> for Authed {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        match parts.extensions.get::<AuthContext>() {
            Some(ctx) => Ok(Authed(ctx.clone())),
            None => Err(ErrorFormat::for_path(parts.uri.path()).unauthorized("missing API key")),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Admin {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Authed(ctx) = Authed::from_request_parts(parts, state).await?;
        if ctx.is_admin() { Ok(Admin(ctx)) } else { Err(ErrorFormat::for_path(parts.uri.path()).forbidden()) }
    }
}

/// An admin key or a tenant admin key (role `tenant_admin`), for the routes a
/// tenant admin may call for its own group; the handler checks the group with
/// [`AuthContext::may_administer`]. Any other key gets 403.
#[derive(Debug, Clone)]
pub struct AdminOrTenant(pub AuthContext);

impl<S: Send + Sync> FromRequestParts<S> for AdminOrTenant {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Authed(ctx) = Authed::from_request_parts(parts, state).await?;
        if ctx.is_admin() || ctx.tenant_group().is_some() {
            Ok(AdminOrTenant(ctx))
        } else {
            Err(ErrorFormat::for_path(parts.uri.path()).forbidden())
        }
    }
}

/// A reader of `/metrics`: an admin key or the scrape key. The labels name
/// every tenant's models and routes, so other keys get 403.
#[derive(Debug, Clone, Copy)]
pub struct MetricsReader;

impl<S: Send + Sync> FromRequestParts<S> for MetricsReader {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        if parts.extensions.get::<ScrapeAccess>().is_some() {
            return Ok(MetricsReader);
        }
        let Authed(ctx) = Authed::from_request_parts(parts, state).await?;
        if ctx.is_admin() {
            Ok(MetricsReader)
        } else {
            Err(crate::error::AdminError::new(
                axum::http::StatusCode::FORBIDDEN,
                crate::error::code::INSUFFICIENT_PERMISSIONS,
                "`/metrics` needs an admin API key or the scrape key named by `metrics.scrape_key_env`",
            )
            .into_response())
        }
    }
}
