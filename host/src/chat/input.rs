//! Runs the input side of the security pipeline on a prepared request:
//! policy → Prompt Shield on the input (and a canary made) → PII/DLP → the
//! canary planted.

use rand::RngCore;
use serde_json::json;

use super::deps::ChatDeps;
use super::pipeline::Prepared;
use super::request::PromptShieldOption;
use super::request::ZERO_KNOWLEDGE;
use super::screen::{self, FieldTexts};
use super::security::{self, PII_DLP, PROMPT_SHIELD, PolicyDecision, PolicyInput, Refusal, Secured, Subject, policy_refusal};
use super::shield_mode::{self, ShieldSetting};
use crate::auth::AuthContext;
use crate::error::ChatError;

fn refuse(error: ChatError) -> Box<Refusal> {
    Box::new(Refusal::new(error))
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
pub fn check_input(deps: &ChatDeps, ctx: &AuthContext, p: &mut Prepared) -> Result<Secured, Box<Refusal>> {
    let mut guarded = Secured { verdict: "allow", ..Default::default() };
    let mut at = ("policy", None);
    match run(deps, ctx, p, &mut guarded, &mut at) {
        Ok(()) => Ok(guarded),
        Err(mut refusal) => {
            // Verdicts so far come first; the refusing stage may have pushed its own already.
            let mut all = std::mem::take(&mut guarded.trail.verdicts);
            all.append(&mut refusal.trail.verdicts);
            // A stage that failed rather than judged (a plugin fault, a detector
            // not loaded) is still named: every refusal lists its stage.
            if all.last().is_none_or(|v| v["action"] != "block") {
                let (stage, plugin) = (at.0, at.1.unwrap_or(p.meta.policy_used.as_str()));
                all.push(json!({"stage": stage, "plugin": plugin, "action": "block", "score": 0.0, "reasons": [refusal.error.message]}));
            }
            refusal.trail.verdicts = all;
            Err(refusal)
        }
    }
}

/// The stages in order; `at` names the one running (stage, plugin; no plugin: the policy).
fn run(
    deps: &ChatDeps,
    ctx: &AuthContext,
    p: &mut Prepared,
    guarded: &mut Secured,
    at: &mut (&'static str, Option<&'static str>),
) -> Result<(), Box<Refusal>> {
    let who = subject(ctx, p);
    let policy_name = p.meta.policy_used.clone();
    let config = deps.config();
    // A group's policy runs layered on its base (the group's, else the server
    // default); a shadow version runs beside it.
    let engine = deps
        .tenants
        .engine(p.adapters.as_ref(), &policy_name, &config.policies.default)
        .map_err(|why| refuse(ChatError::access_denied(why)))?;

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
    let requested = p.params.prompt_shield.clone().unwrap_or_default();
    let policy_config = deps.config_texts.policy(&config, &policy_name);
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
    // What the policy constrains beyond its own allow: a refusal here is the
    // policy stage's, with its verdict and audit record like a plugin deny.
    let setting = constraints(p, &decision, &requested, &who)?;
    guarded.trail.verdicts.push(json!({
        "stage": "policy", "plugin": policy_name, "action": "allow", "score": 0.0, "reasons": decision.reason.iter().collect::<Vec<_>>(),
    }));

    // Prompt Shield on the input, as strict as `setting` says.
    let (enabled, mode, source) = (setting.enabled, setting.mode, setting.source);
    let mut planted = None;
    *at = ("input", Some(PROMPT_SHIELD));
    if enabled {
        let shield = p
            .adapters
            .detector(PROMPT_SHIELD)
            .ok_or_else(|| refuse(ChatError::access_denied("Prompt Shield is not loaded; the request was refused")))?;
        let shield_cfg = deps.config_texts.plugin(&config, PROMPT_SHIELD);
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
    *at = ("input", Some(PII_DLP));
    if let Some(detector) = p.adapters.detector(PII_DLP) {
        let cfg = deps.config_texts.pii_dlp(&config, decision.pii_action, decision.dlp_action);
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

/// The policy's constraints on this request: knowledge base, providers, and
/// how strict Prompt Shield runs. `Err` is the refusal's reason.
fn constraints(
    p: &Prepared,
    decision: &PolicyDecision,
    requested: &PromptShieldOption,
    who: &Subject,
) -> Result<ShieldSetting, Box<Refusal>> {
    let policy = &who.policy;
    if p.params.index != ZERO_KNOWLEDGE
        && let Some(allowed) = &decision.allowed_indexes
        && !allowed.contains(&p.params.index)
    {
        return Err(policy_refusal(who, format!("policy {policy} does not allow knowledge base {}", p.params.index)));
    }
    // An empty chain (a policy check without a model) sends nothing anywhere.
    if let Some(providers) = &decision.allowed_providers
        && !p.params.chain.is_empty()
        && !p.params.chain.iter().any(|e| providers.iter().any(|a| a == e.model.provider()))
    {
        return Err(policy_refusal(who, format!("policy {policy} allows none of the providers in the model chain")));
    }
    shield_mode::resolve(requested, decision, policy).map_err(|r| match r {
        shield_mode::Refused::Invalid(m) => refuse(ChatError::invalid_request(m)),
        shield_mode::Refused::Lowered(m) => policy_refusal(who, m),
    })
}

/// `POST /api/policy/check` after its limits: the whole input pipeline (policy,
/// Prompt Shield, PII, DLP) on a chat request body, without calling a model,
/// so `model` and `index` are optional (checked when given). Its refusals are
/// audited (marked `dryRun`), but fire no webhook events and leave no usage or receipt.
pub async fn dry_run(
    deps: &ChatDeps,
    ctx: &AuthContext,
    body: &[u8],
    defaults: super::request::TimeoutDefaults,
) -> Result<serde_json::Value, crate::error::AdminError> {
    use crate::error::{AdminError, code};
    let to_admin = |e: ChatError| {
        if e.status == axum::http::StatusCode::FORBIDDEN {
            AdminError::new(e.status, code::INSUFFICIENT_PERMISSIONS, e.message)
        } else {
            AdminError::new(e.status, code::VALIDATION_ERROR, format!("{}: {}", e.error, e.message))
        }
    };
    let params = super::request::parse_check(body, defaults).map_err(to_admin)?;
    let mut p = super::pipeline::prepare(deps, ctx, params, super::format::Format::Gatehouse, String::new()).await.map_err(to_admin)?;
    let (allowed, verdicts, reason) = match check_input(deps, ctx, &mut p) {
        Ok(g) => (true, g.trail.verdicts, None),
        Err(r) => {
            let mut audit = r.trail.audit;
            for a in &mut audit {
                a.metadata["dryRun"] = json!(true);
                a.metadata["route"] = json!("/api/policy/check");
            }
            if !audit.is_empty() {
                deps.store.append_audit(audit).await.map_err(|e| {
                    tracing::error!(error = %e, "recording a policy check's refusal failed");
                    AdminError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, code::INTERNAL_ERROR, "the check could not be recorded")
                })?;
            }
            (false, r.trail.verdicts, Some(r.error.message))
        }
    };
    Ok(json!({
        "success": true,
        "allowed": allowed,
        "reason": reason,
        "policy": p.meta.policy_used,
        "policy_source": p.meta.policy_source,
        "verdicts": verdicts,
    }))
}
