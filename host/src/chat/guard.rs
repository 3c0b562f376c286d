//! Runs the input side of the security pipeline on a prepared request:
//! policy → Prompt Shield on the input (and a canary made) → PII/DLP → the
//! canary planted.

use rand::RngCore;
use serde_json::json;

use super::handler::Prepared;
use super::request::ZERO_KNOWLEDGE;
use super::screen::{self, FieldTexts};
use super::security::{self, Guarded, PII_DLP, PROMPT_SHIELD, PolicyInput, Refusal, Strictness, Subject};
use crate::api::error::ChatError;
use crate::app::AppState;
use crate::auth::AuthContext;

fn refuse(error: ChatError) -> Box<Refusal> {
    Box::new(Refusal { error, events: Vec::new(), audit: Vec::new(), verdicts: Vec::new() })
}

pub fn subject(ctx: &AuthContext, p: &Prepared) -> Subject {
    Subject {
        key_id: ctx.key.id.clone(),
        user_id: p.bill_user.clone(),
        request_id: p.request_id.clone(),
        policy: p.meta.policy_used.clone(),
    }
}

/// Apply the policy and the input detectors. On success the request's
/// messages may be redacted and carry a canary; the returned state drives the
/// output checks.
pub fn guard_input(app: &AppState, ctx: &AuthContext, p: &mut Prepared) -> Result<Guarded, Box<Refusal>> {
    let mut guarded = Guarded { verdict: "allow", ..Default::default() };
    match run(app, ctx, p, &mut guarded) {
        Ok(()) => Ok(guarded),
        Err(mut refusal) => {
            // Verdicts so far come first; the refusing stage may have pushed its own already.
            let mut all = std::mem::take(&mut guarded.verdicts);
            all.append(&mut refusal.verdicts);
            refusal.verdicts = all;
            Err(refusal)
        }
    }
}

fn run(app: &AppState, ctx: &AuthContext, p: &mut Prepared, guarded: &mut Guarded) -> Result<(), Box<Refusal>> {
    let who = subject(ctx, p);
    let policy_name = p.meta.policy_used.clone();
    let engine =
        p.adapters.policy(&policy_name).ok_or_else(|| refuse(ChatError::access_denied(format!("policy {policy_name} is not loaded"))))?;

    // What is screened besides the messages (docs/decisions/screening.md):
    // the pass-through fields' strings, the stop sequences and the text
    // hidden in tag characters.
    // Nothing is collected when neither is there.
    let mut fields = if p.params.extra.is_empty() && p.normalized.stop.is_empty() {
        FieldTexts::default()
    } else {
        FieldTexts::collect(&p.params.extra, &p.normalized.stop)
    };
    let extra_texts = screen::policy_texts(&fields, &p.params.hidden);

    // Policy.
    let config = app.config();
    let requested = p.params.prompt_shield.clone().unwrap_or_default();
    let policy_config = app.config_texts.policy(&config, &policy_name);
    let input = PolicyInput {
        policy_name: &policy_name,
        key_id: &ctx.key.id,
        user_id: &p.bill_user,
        group_id: ctx.key.group_id.as_deref(),
        models: p.params.chain.iter().map(|e| e.model.to_string()).collect(),
        index: &p.params.index,
        messages: &p.normalized.messages,
        extra_texts: &extra_texts,
        shield_disable_requested: requested.enabled == Some(false),
        config_json: &policy_config,
    };
    let decision = security::apply_policy(engine.as_ref(), &input, &who)?;
    p.meta.policy_hash = Some(engine.hash());
    guarded.verdicts.push(json!({
        "stage": "policy", "plugin": policy_name, "action": "allow", "score": 0.0, "reasons": decision.reason.iter().collect::<Vec<_>>(),
    }));
    if p.params.index != ZERO_KNOWLEDGE
        && let Some(allowed) = &decision.allowed_indexes
        && !allowed.contains(&p.params.index)
    {
        return Err(refuse(ChatError::access_denied(format!("policy {policy_name} does not allow knowledge base {}", p.params.index))));
    }
    if let Some(providers) = &decision.allowed_providers
        && !p.params.chain.iter().any(|e| providers.iter().any(|a| a == e.model.provider()))
    {
        return Err(refuse(ChatError::access_denied(format!("policy {policy_name} allows none of the providers in the model chain"))));
    }

    // Prompt Shield on the input.
    // A policy may switch Prompt Shield off (`shield-mode = "off"`); a request may
    // switch it off only where the policy allows, and on again at will.
    let policy_off = decision.shield_mode == "off";
    let enabled = match requested.enabled {
        Some(false) => !decision.shield_may_disable,
        Some(true) => true,
        None => !policy_off,
    };
    let (mode, source) = match requested.policy.as_deref() {
        Some(m) => (
            Strictness::parse(m).ok_or_else(|| {
                refuse(ChatError::invalid_request(format!("`prompt_shield.policy` is `{m}`; use monitor, balanced or strict")))
            })?,
            "request",
        ),
        None => (Strictness::parse(&decision.shield_mode).unwrap_or(Strictness::Balanced), "policy"),
    };
    let source = match (requested.enabled, source) {
        (None, "policy") if policy_off => "policy",
        (Some(false), _) => "request",
        (_, s) => s,
    };
    let mut planted = None;
    if enabled {
        let shield = p
            .adapters
            .detector(PROMPT_SHIELD)
            .ok_or_else(|| refuse(ChatError::access_denied("Prompt Shield is not loaded; the request was refused")))?;
        let shield_cfg = app.config_texts.plugin(&config, PROMPT_SHIELD);
        let (texts, origins) = screen::shield_texts(&p.normalized.messages, &fields, &p.params.hidden);
        let shield_cfg = screen::shield_config(&shield_cfg, &origins);
        let mut seed = [0u8; 16];
        rand::rng().fill_bytes(&mut seed);
        let (action, score, canary) =
            security::shield_input_and_canary(shield.as_ref(), mode, &shield_cfg, &texts, &hex::encode(seed), &who, guarded)?;
        if action != security::Action::Allow {
            guarded.verdict = "flag";
        }
        p.meta.prompt_shield_policy = Some(json!({
            "enabled": true, "mode": mode.as_str(), "source": source, "verdict": action.as_str(), "score": score,
        }));
        planted = canary;
    } else {
        p.meta.prompt_shield_policy = Some(json!({"enabled": false, "mode": null, "source": source}));
    }

    // PII and DLP, on what the caller sent: the canary instruction is the
    // host's own text, so it is planted after (a token that looked like a
    // secret must not get a request refused, and scanning it is wasted work).
    if let Some(detector) = p.adapters.detector(PII_DLP) {
        let cfg = app.config_texts.pii_dlp(&config, decision.pii_action, decision.dlp_action);
        let hidden = &p.params.hidden;
        if security::pii_dlp(detector.as_ref(), &decision, &cfg, &mut p.normalized.messages, &mut fields, hidden, &who, guarded)? {
            fields.write_back(&mut p.params.extra);
            p.normalized.extra_json = screen::fields_json(&p.params.extra);
        }
    } else if decision.pii_action != security::Action::Allow || decision.dlp_action != security::Action::Allow {
        return Err(refuse(ChatError::access_denied("the PII/DLP detector is not loaded; the request was refused")));
    }
    if let Some((token, instruction)) = planted {
        security::plant_canary(&mut p.normalized.messages, &instruction);
        guarded.canary = Some(token);
    }
    guarded.decision = Some(decision);
    Ok(())
}

/// `POST /api/policy/check`: the whole input pipeline (policy, Prompt Shield,
/// PII, DLP) on a chat request body, without calling a model. Records nothing.
#[utoipa::path(
    post, path = "/api/policy/check", tag = "operations", request_body = crate::api::schema::ChatRequest,
    responses(
        (status = 200, description = "The verdicts; `allowed: false` with `reason` when the request would be refused",
         body = crate::api::schema::PolicyCheck),
        (status = 400, description = "The body is not a valid chat request (`VALIDATION_ERROR`)", body = crate::api::error::NestedError),
        (status = 403, description = "A model, index or policy this key may not use (`INSUFFICIENT_PERMISSIONS`)",
         body = crate::api::error::NestedError),
    )
)]
pub async fn policy_check(
    axum::extract::State(app): axum::extract::State<AppState>,
    crate::auth::Authed(ctx): crate::auth::Authed,
    body: axum::body::Bytes,
) -> Result<axum::Json<serde_json::Value>, crate::api::error::AdminError> {
    use crate::api::error::AdminError;
    let cfg = app.config();
    let defaults =
        super::request::TimeoutDefaults { timeout_ms: cfg.chat.timeout_ms, first_token_timeout_ms: cfg.chat.first_token_timeout_ms };
    drop(cfg);
    let to_admin =
        |e: ChatError| AdminError::new(e.status, crate::api::error::code::VALIDATION_ERROR, format!("{}: {}", e.error, e.message));
    let params = super::request::parse(&body, defaults).map_err(to_admin)?;
    let mut p = super::handler::prepare(&app, &ctx, params, super::format::Format::Gatehouse, String::new()).map_err(|e| {
        if e.status == axum::http::StatusCode::FORBIDDEN {
            AdminError::new(e.status, crate::api::error::code::INSUFFICIENT_PERMISSIONS, e.message)
        } else {
            to_admin(e)
        }
    })?;
    let (allowed, verdicts, reason) = match guard_input(&app, &ctx, &mut p) {
        Ok(g) => (true, g.verdicts, None),
        Err(r) => (false, r.verdicts, Some(r.error.message)),
    };
    Ok(axum::Json(json!({
        "success": true,
        "allowed": allowed,
        "reason": reason,
        "policy": p.meta.policy_used,
        "policy_source": p.meta.policy_source,
        "verdicts": verdicts,
    })))
}
