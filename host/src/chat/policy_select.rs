//! Which policy a request runs under — the one place that decides it, for
//! both chat routes and `/api/policy/check` (docs/decisions/policy-resolution.md).
//!
//! Candidates in order: the request's `smltp_policy`, the key's
//! `defaultPolicy`, its group's default, `policies.default`. A key's
//! `allowedPolicies` bounds them all: a request naming a policy outside it is
//! refused at once; otherwise the first candidate the key may use wins. A
//! policy the key may not use never runs because the request left it out.

use axum::http::StatusCode;

use super::providers::PluginSet;
use crate::error::{ChatError, text};
use crate::plugin_registry::PublishedPolicies;
use gatehouse_store::model::ApiKeyRecord;

/// Where the winning candidate came from (`metadata.smltp_policy_source`).
pub const REQUEST: &str = "request";
pub const API_KEY: &str = "api_key";
pub const GROUP: &str = "group";
pub const DEFAULT: &str = "default";

/// May `key` use `policy`? (No `allowedPolicies` means any.)
pub fn may_use(key: &ApiKeyRecord, policy: &str) -> bool {
    key.allowed_policies.as_ref().is_none_or(|a| a.iter().any(|p| p == policy))
}

/// Is `policy` loaded for `key`? A group's (tenant) policy exists only for
/// that group's keys: to any other key it is as unknown as a missing one.
/// `published` is the server's registry view (`ChatDeps::tenants`).
fn loaded_for(adapters: &dyn PluginSet, published: &PublishedPolicies, key: &ApiKeyRecord, policy: &str) -> bool {
    adapters.has_policy(policy) && published.visible(policy, key.group_id.as_deref())
}

/// The loaded policies `key` may use, sorted: all an error message may name.
pub fn usable_names(adapters: &dyn PluginSet, published: &PublishedPolicies, key: &ApiKeyRecord) -> Vec<String> {
    let mut names: Vec<String> =
        adapters.policy_names().into_iter().filter(|n| may_use(key, n) && published.visible(n, key.group_id.as_deref())).collect();
    names.sort();
    names
}

/// Why a stored or requested default cannot serve `key`, if it cannot.
pub fn default_problem(adapters: &dyn PluginSet, published: &PublishedPolicies, key: &ApiKeyRecord, policy: &str) -> Option<String> {
    if !loaded_for(adapters, published, key, policy) {
        Some(format!("no policy `{policy}` is loaded"))
    } else if !may_use(key, policy) {
        Some(format!("`{policy}` is not in the key's allowedPolicies"))
    } else {
        None
    }
}

/// Resolve the policy for one request. `group_default` is called only when
/// the request and the key's own default do not settle it (it reads the
/// group, so the common cases stay free of store reads).
pub async fn select(
    adapters: &dyn PluginSet,
    published: &PublishedPolicies,
    key: &ApiKeyRecord,
    requested: Option<&str>,
    group_default: impl AsyncFnOnce() -> Result<Option<String>, ChatError>,
    server_default: &str,
) -> Result<(String, &'static str), ChatError> {
    if let Some(p) = requested {
        if !may_use(key, p) {
            return Err(ChatError::access_denied(format!(
                "this API key may not use policy `{p}` (`smltp_policy`); it may use: {}",
                allowed_text(key)
            )));
        }
        return loaded(adapters, published, key, p, REQUEST);
    }
    let mut refused: Vec<String> = Vec::new();
    // The key's default was checked when it was set; one stored before that
    // check, or whose policy has since gone, is skipped (and logged at start).
    if let Some(p) = &key.default_policy {
        match default_problem(adapters, published, key, p) {
            None => return Ok((p.clone(), API_KEY)),
            Some(_) => refused.push(format!("`{p}` (the key's defaultPolicy)")),
        }
    }
    if key.group_id.is_some()
        && let Some(p) = group_default().await?
    {
        if may_use(key, &p) {
            return loaded(adapters, published, key, &p, GROUP);
        }
        refused.push(format!("`{p}` (the group's default)"));
    }
    if may_use(key, server_default) {
        return loaded(adapters, published, key, server_default, DEFAULT);
    }
    refused.push(format!("`{server_default}` (the server default)"));
    Err(ChatError::access_denied(format!(
        "this API key may use none of the policies that apply to it: {}; it may use: {}; name one with `smltp_policy`",
        refused.join(", "),
        allowed_text(key)
    )))
}

/// The winner must be loaded: a missing policy is an error, never a reason
/// to fall through to another (possibly weaker) one.
fn loaded(
    adapters: &dyn PluginSet,
    published: &PublishedPolicies,
    key: &ApiKeyRecord,
    name: &str,
    source: &'static str,
) -> Result<(String, &'static str), ChatError> {
    if loaded_for(adapters, published, key, name) {
        return Ok((name.to_owned(), source));
    }
    let what = match source {
        REQUEST => "",
        GROUP => " (the group's default)",
        _ => " (the server default)",
    };
    Err(ChatError::new(
        StatusCode::BAD_REQUEST,
        text::UNKNOWN_POLICY,
        format!("no policy `{name}`{what} is loaded; policies this key may use: {}", names_text(&usable_names(adapters, published, key))),
    ))
}

fn allowed_text(key: &ApiKeyRecord) -> String {
    match &key.allowed_policies {
        None => "any".to_owned(),
        Some(list) => names_text(list),
    }
}

fn names_text(names: &[String]) -> String {
    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
}

/// At start: log every active key whose stored `defaultPolicy` could not
/// serve it (written before the check existed, or its policy is gone). Such
/// a default is skipped at request time; the log says which keys to fix.
pub async fn log_stored_defaults(store: &dyn gatehouse_store::Store, adapters: &dyn PluginSet, published: &PublishedPolicies) {
    let keys = match store.list_keys().await {
        Ok(keys) => keys,
        Err(e) => {
            tracing::warn!(error = %e, "could not list API keys to check their default policies");
            return;
        }
    };
    for key in keys.iter().filter(|k| !k.is_revoked()) {
        if let Some(p) = &key.default_policy
            && let Some(problem) = default_problem(adapters, published, key, p)
        {
            tracing::warn!(
                key_id = %key.id, default_policy = %p,
                "API key {}'s defaultPolicy is skipped: {problem}; set a valid one with PUT /api/admin/keys/{}", key.id, key.id
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::chat::attempt::ProviderAdapter;
    use crate::chat::security::{Detector, PolicyEngine};

    struct Loaded(&'static [&'static str]);

    impl PluginSet for Loaded {
        fn provider(&self, _: &str) -> Option<Arc<dyn ProviderAdapter>> {
            None
        }
        fn policy(&self, _: &str) -> Option<Arc<dyn PolicyEngine>> {
            None
        }
        fn has_policy(&self, name: &str) -> bool {
            self.0.contains(&name)
        }
        fn detector(&self, _: &str) -> Option<Arc<dyn Detector>> {
            None
        }
        fn policy_names(&self) -> Vec<String> {
            self.0.iter().map(|s| (*s).to_owned()).collect()
        }
    }

    const ALL: Loaded = Loaded(&["internal", "public", "confidential"]);
    /// A registry view in which no policy is a group's.
    fn none() -> PublishedPolicies {
        PublishedPolicies::default()
    }

    fn key(allowed: Option<&[&str]>, default: Option<&str>, group: bool) -> ApiKeyRecord {
        let mut k = crate::api::admin::keys::new_key("usr_1", &crate::auth::keys::ApiKeySecret::generate());
        k.allowed_policies = allowed.map(|a| a.iter().map(|s| (*s).to_owned()).collect());
        k.default_policy = default.map(str::to_owned);
        k.group_id = group.then(|| "grp_1".to_owned());
        k
    }

    fn run(k: &ApiKeyRecord, requested: Option<&str>, group: Option<&str>) -> Result<(String, &'static str), (u16, String)> {
        futures::executor::block_on(select(&ALL, &none(), k, requested, async || Ok(group.map(str::to_owned)), "internal"))
            .map_err(|e| (e.status.as_u16(), e.message))
    }

    #[test]
    fn candidates_go_request_key_group_default() {
        let k = key(None, Some("confidential"), true);
        assert_eq!(run(&k, Some("public"), Some("internal")), Ok(("public".into(), REQUEST)));
        assert_eq!(run(&k, None, Some("public")), Ok(("confidential".into(), API_KEY)));
        assert_eq!(run(&key(None, None, true), None, Some("public")), Ok(("public".into(), GROUP)));
        assert_eq!(run(&key(None, None, true), None, None), Ok(("internal".into(), DEFAULT)));
        assert_eq!(run(&key(None, None, false), None, Some("public")), Ok(("internal".into(), DEFAULT)), "no group, no group default");
    }

    #[test]
    fn every_candidate_is_bounded_by_allowed_policies() {
        let only_public = key(Some(&["public"]), None, true);
        let (status, msg) = run(&only_public, Some("internal"), None).expect_err("a request outside the list");
        assert_eq!(status, 403);
        assert!(msg.contains("`internal`"), "{msg}");
        let (status, msg) = run(&only_public, None, Some("confidential")).expect_err("no candidate allowed");
        assert_eq!(status, 403);
        assert!(msg.contains("`confidential` (the group's default)") && msg.contains("`internal` (the server default)"), "{msg}");
        assert_eq!(run(&only_public, None, Some("public")), Ok(("public".into(), GROUP)));
        // A stored default outside the list (or not loaded) is skipped, not used.
        let stale = key(Some(&["public"]), Some("internal"), false);
        let (_, msg) = run(&stale, None, None).expect_err("refused");
        assert!(msg.contains("`internal` (the key's defaultPolicy)"), "{msg}");
        let gone = key(None, Some("gone"), false);
        assert_eq!(run(&gone, None, None), Ok(("internal".into(), DEFAULT)));
    }

    #[test]
    fn the_group_is_read_only_when_needed() {
        let k = key(None, Some("public"), true);
        let r = futures::executor::block_on(select(&ALL, &none(), &k, None, async || panic!("the key's default settles it"), "internal"));
        assert_eq!(r.map_err(|e| e.message), Ok(("public".into(), API_KEY)));
        let r =
            futures::executor::block_on(select(&ALL, &none(), &k, Some("internal"), async || panic!("the request settles it"), "internal"));
        assert_eq!(r.map_err(|e| e.message), Ok(("internal".into(), REQUEST)));
    }

    #[test]
    fn a_missing_winner_is_an_error_never_a_fall_through() {
        let k = key(Some(&["public", "tenant-x"]), None, true);
        let (status, msg) = run(&k, Some("tenant-x"), None).expect_err("not loaded");
        assert_eq!(status, 400);
        assert!(msg.ends_with("policies this key may use: public"), "only the key's own: {msg}");
        let (status, _) = run(&k, None, Some("tenant-x")).expect_err("the group's default is not loaded");
        assert_eq!(status, 400);
        assert_eq!(usable_names(&ALL, &none(), &key(None, None, false)), ["confidential", "internal", "public"]);
    }
}
