//! `POST /chat/completions`: idempotency → limits → the key's share of the
//! places in flight → validation → policy → model chain → usage, events and
//! idempotency record in one commit. (What comes before the body is read is
//! in `chat::admission`.)

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde_json::json;

use super::admission::Slot;
use super::chain::{self, ChainResult, Failover};

use super::attempt;
use super::attempt::Resolved;
use super::deps::ChatDeps;
use super::format::Format;
use super::idempotency::{self, Begin, HeldClaim};
use super::providers::{self, PluginSet};
use super::request::{self, ChatParams, TimeoutDefaults, ZERO_KNOWLEDGE};
use super::response::Meta;
use super::security::{Secured, Trail};
use super::stream;
use super::transport::Transport;
use super::types::{AttemptError, ChainEntry, NormalizedRequest, Usage};
use crate::auth::AuthContext;
use crate::auth::limit_reply::{limit_reached, rate_limit_error, with_limit_headers};
use crate::auth::limits::{BucketSet, effective};
use crate::error::{ChatError, text};
use crate::request_id;
use gatehouse_store::receipts::Receipt;
use gatehouse_store::records::{OutboxEvent, RequestOutcome, UsageDelta};

/// Everything a validated request carries down the pipeline.
pub struct Prepared {
    pub params: ChatParams,
    pub request_id: String,
    pub created: i64,
    pub bill_user: String,
    pub meta: Meta,
    pub normalized: NormalizedRequest,
    pub adapters: Arc<dyn PluginSet>,
    pub targets: Arc<providers::Targets>,
    pub format: Format,
    /// Hex SHA-256 of the request body, for the receipt.
    pub request_hash: String,
    /// Receipt id, announced in `metadata.smltp` before the answer exists.
    pub bundle_id: String,
    pub started_at: chrono::DateTime<Utc>,
    /// Which failures count against the shared breakers: by the operator's deadlines.
    pub counting: chain::Counting,
}

impl Prepared {
    /// The receipt of a completed answer (the store signs it when it commits it).
    pub fn receipt(&self, deps: &ChatDeps, ctx: &AuthContext, served_model: &str, answer: &str, verdict: &str) -> Receipt {
        Receipt {
            bundle_id: self.bundle_id.clone(),
            request_id: self.request_id.clone(),
            request_hash: self.request_hash.clone(),
            response_hash: gatehouse_store::receipts::sha256_hex(answer.as_bytes()),
            policy: self.meta.policy_used.clone(),
            policy_hash: self.meta.policy_hash.clone(),
            shield_verdict: verdict.to_owned(),
            requested_model: self.meta.requested_model.clone(),
            served_model: served_model.to_owned(),
            key_id: ctx.key.id.clone(),
            created_at: crate::time::iso(self.started_at),
            completed_at: crate::time::iso(Utc::now()),
            signing_key_id: deps.receipts.key_id().to_owned(),
        }
    }
}

/// A finished non-streaming reply and what it leaves to store.
pub(super) struct Reply {
    status: StatusCode,
    /// The JSON body, serialised.
    body: String,
    usage: Option<UsageDelta>,
    /// The request's events and audit records, committed with the answer.
    trail: Trail,
    receipt: Option<Receipt>,
    retry_after: Option<u64>,
}

impl Reply {
    pub(super) fn error(format: Format, e: ChatError, trail: Trail) -> Self {
        Reply { status: e.status, body: format.error_body(&e).to_string(), usage: None, trail, receipt: None, retry_after: e.retry_after }
    }
}

/// A body that could not be read: too large (413) or broken off.
pub fn body_error(rej: &BytesRejection, max: usize) -> ChatError {
    if rej.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ChatError::new(StatusCode::PAYLOAD_TOO_LARGE, text::PAYLOAD_TOO_LARGE, format!("the request body is larger than {max} bytes"))
    } else {
        ChatError::invalid_request(format!("the request body could not be read: {}", rej.body_text()))
    }
}

/// Both chat routes: idempotency, limits, then the pipeline in `format`.
/// `slot` is the request's place under `chat.max_in_flight`: held to the end
/// of a JSON request, handed to a stream's pump.
pub async fn serve(deps: ChatDeps, ctx: AuthContext, slot: Slot, headers: HeaderMap, body: Bytes, format: Format) -> Response {
    let cfg = deps.config();
    let route = match format {
        Format::Gatehouse => idempotency::Route::Gatehouse,
        Format::OpenAi { .. } => idempotency::Route::OpenAi,
    };
    let claim = match idempotency::begin(&deps.store, &ctx.key.id, route, &headers, &body, cfg.chat.idempotency_ttl_secs).await {
        Ok(Begin::Replay(resp)) => return resp,
        Ok(Begin::Claimed(g)) => Some(g),
        Ok(Begin::None) => None,
        Err(e) => return format.error_response(e),
    };
    let limits = effective(cfg.limits.chat, &ctx.key.limits);
    let share = super::admission::key_share(&cfg.chat);
    let defaults = TimeoutDefaults { timeout_ms: cfg.chat.timeout_ms, first_token_timeout_ms: cfg.chat.first_token_timeout_ms };
    drop(cfg);
    // The limiter counts, then the key takes its place in flight. A key at
    // its share is refused uncounted, so its place is taken first and the
    // limiter only peeks when it is refused (a key over a rate limit too
    // gets that limit's 429, as the limiter comes first).
    let (slot, decision) = match slot.enter_key(share) {
        Ok(slot) => (slot, deps.limiter.check(BucketSet::Chat, &ctx.key.id, limits, Utc::now())),
        Err(slot) => {
            let decision = deps.limiter.peek(BucketSet::Chat, &ctx.key.id, limits, Utc::now());
            if decision.allowed {
                let load = deps.admission.key(&ctx.key.id);
                let holding = format!("{share} chat requests in flight");
                return super::admission::over_share(&deps, &ctx, &load, format, &holding, share, &decision, claim).await;
            }
            (slot, decision)
        }
    };
    if !decision.allowed {
        let (events, audit) = limit_reached(&ctx, &decision);
        let reply = Reply::error(format, rate_limit_error(&decision), Trail::of(events, audit));
        return with_limit_headers(finish(&deps, reply, claim).await, &decision);
    }
    let parsed = match format {
        Format::Gatehouse => request::parse(&body, defaults).map(|p| (p, Format::Gatehouse)),
        Format::OpenAi { .. } => super::openai::parse(&body, defaults),
    };
    let request_hash = gatehouse_store::receipts::sha256_hex(&body);
    let prepared = match parsed {
        Ok((params, format)) => prepare(&deps, &ctx, params, format, request_hash).await,
        Err(e) => Err(e),
    };
    let resp = match prepared {
        Err(e) => finish(&deps, Reply::error(format, e, Trail::default()), claim).await,
        Ok(mut p) => match guard_and_retrieve(&deps, &ctx, &mut p).await {
            Err(refusal) => finish(&deps, Reply::error(format, refusal.error, refusal.trail), claim).await,
            Ok(secured) if p.params.stream => stream::serve(deps.clone(), ctx.clone(), p, secured, claim, slot).await,
            Ok(secured) => {
                let reply = complete(&deps, &ctx, p, secured).await;
                finish(&deps, reply, claim).await
            }
        },
    };
    with_limit_headers(resp, &decision)
}

/// The input side of the security pipeline, then retrieval (with Prompt
/// Shield on the passages): everything before the model chain.
async fn guard_and_retrieve(deps: &ChatDeps, ctx: &AuthContext, p: &mut Prepared) -> Result<Secured, Box<super::security::Refusal>> {
    let mut secured = super::input::check_input(deps, ctx, p)?;
    match super::retrieval::augment(deps, ctx, p, &mut secured).await {
        Ok(()) => Ok(secured),
        Err(mut refusal) => {
            // What the input checks recorded is kept with the refusal.
            secured.trail.append(std::mem::take(&mut refusal.trail));
            refusal.trail = secured.trail;
            Err(refusal)
        }
    }
}

/// Validate and resolve everything that does not call a model.
pub async fn prepare(
    deps: &ChatDeps,
    ctx: &AuthContext,
    mut params: ChatParams,
    format: Format,
    request_hash: String,
) -> Result<Prepared, ChatError> {
    let cfg = deps.config();

    let bill_user = match &params.user_id {
        None => ctx.key.user_id.clone(),
        Some(uid) => {
            if !ctx.is_admin() {
                return Err(ChatError::access_denied("`user_id` (billing another user) needs an admin API key"));
            }
            if deps.store.get_user(uid).await?.is_none() {
                return Err(ChatError::invalid_request(format!("`user_id`: no user `{uid}` exists")));
            }
            uid.clone()
        }
    };

    let targets = deps.targets.load_full();
    for e in &params.chain {
        if !targets.contains_key(e.model.provider()) {
            let mut known: Vec<&str> = targets.keys().map(String::as_str).collect();
            known.sort_unstable();
            return Err(ChatError::new(
                StatusCode::BAD_REQUEST,
                text::UNKNOWN_MODEL,
                format!("model `{}`: no provider `{}` is configured (configured: {})", e.model, e.model.provider(), known.join(", ")),
            ));
        }
        if !providers::model_permitted(&ctx.key.allowed_models, &e.model) {
            return Err(ChatError::access_denied(format!("this API key may not use model `{}`", e.model)));
        }
    }

    if params.index != ZERO_KNOWLEDGE {
        if !cfg.indexes.contains_key(&params.index) {
            return Err(ChatError::new(
                StatusCode::BAD_REQUEST,
                text::UNKNOWN_INDEX,
                format!("no knowledge base `{}`; send \"{ZERO_KNOWLEDGE}\" for no retrieval", params.index),
            ));
        }
        if let Some(allowed) = &ctx.key.allowed_indexes
            && !allowed.iter().any(|i| i == &params.index)
        {
            return Err(ChatError::access_denied(format!("this API key may not use knowledge base `{}`", params.index)));
        }
    }

    let adapters = deps.adapters.snapshot();
    let (policy, source) = select_policy(deps, adapters.as_ref(), ctx, &params).await?;

    let request_id = request_id::current().unwrap_or_else(|| request_id::RequestId::new().0);
    // Time-ordered (UUIDv7): receipts are appended at the right edge of their B-tree
    // instead of dirtying a random leaf page per request.
    let bundle_id = format!("rcpt_{}", uuid::Uuid::now_v7().simple());
    let meta = Meta {
        conversation_id: params.conversation_id.clone().unwrap_or_else(|| format!("conv-{}", uuid::Uuid::new_v4().simple())),
        index_used: params.index.clone(),
        policy_used: policy,
        policy_source: source,
        policy_hash: None,
        prompt_shield_policy: None,
        served_model: String::new(),
        requested_model: params.chain.first().map(|e| e.model.to_string()).unwrap_or_default(),
        failover: None,
        smltp: Some(json!({"bundle_id": bundle_id, "receipt_url": format!("/api/receipts/{bundle_id}")})),
        rag_enabled: false,
        documents_retrieved: 0,
        sources: Vec::new(),
        documents_removed: Vec::new(),
    };
    let normalized = NormalizedRequest {
        // Moved, not copied: the pipeline reads (and redacts) the normalized request only.
        messages: std::mem::take(&mut params.messages),
        temperature: params.temperature,
        max_tokens: params.max_tokens,
        stream: params.stream,
        stop: std::mem::take(&mut params.stop),
        // Serialised here, once; the map stays for screening (serialised again only if a string in it is redacted).
        extra_json: super::screen::fields_json(&params.extra),
    };
    let counting = chain::Counting {
        timeout: std::time::Duration::from_millis(cfg.chat.timeout_ms),
        first_token_timeout: std::time::Duration::from_millis(cfg.chat.first_token_timeout_ms),
        stream: params.stream,
    };
    Ok(Prepared {
        counting,
        params,
        request_id,
        created: Utc::now().timestamp(),
        bill_user,
        meta,
        normalized,
        adapters,
        targets,
        format,
        request_hash,
        bundle_id,
        started_at: Utc::now(),
    })
}

/// The policy of the request (`chat::policy_select`): the group is read only
/// when the request and the key's own default leave it open.
async fn select_policy(
    deps: &ChatDeps,
    adapters: &dyn PluginSet,
    ctx: &AuthContext,
    params: &ChatParams,
) -> Result<(String, &'static str), ChatError> {
    let cfg = deps.config();
    let group_default = async || match ctx.key.group_id.as_deref() {
        Some(g) => Ok(deps.store.get_group(g).await?.and_then(|g| g.default_policy)),
        None => Ok(None),
    };
    let published = deps.tenants.policies();
    super::policy_select::select(adapters, &published, &ctx.key, params.policy.as_deref(), group_default, &cfg.policies.default).await
}

/// The `api:model_failover` events of a chain.
pub fn failover_events(ctx: &AuthContext, bill_user: &str, failovers: &[Failover]) -> Vec<OutboxEvent> {
    failovers
        .iter()
        .map(|f| {
            OutboxEvent::new(
                "api:model_failover",
                json!({
                    "failedModel": f.failed_model,
                    "reason": f.reason,
                    "nextModel": f.next_model,
                    "latencyMs": f.latency_ms,
                    "userId": bill_user,
                    "apiKeyId": ctx.key.id,
                }),
            )
        })
        .collect()
}

/// 429 or 502 with every attempt.
pub fn exhausted_error(attempts: &[chain::Attempt], all_rate_limited: bool) -> ChatError {
    let status = if all_rate_limited { StatusCode::TOO_MANY_REQUESTS } else { StatusCode::BAD_GATEWAY };
    let n = attempts.len();
    ChatError::new(
        status,
        text::ALL_MODELS_FAILED,
        format!("all {n} attempt(s) of the model chain failed; see `attempts` for each model's reason"),
    )
    .with("attempts", json!(attempts))
}

/// Chain entries the policy keeps from receiving the data are skipped (reason `policy`).
pub fn policy_skip(secured: &Secured, entry: &ChainEntry) -> Option<&'static str> {
    let allowed = secured.decision.as_ref()?.allowed_providers.as_ref()?;
    (!allowed.iter().any(|p| p == entry.model.provider())).then_some("policy")
}

/// Which latency the serving attempt reports: the whole answer (JSON) or the
/// first token (streams).
#[derive(Debug, Clone, Copy)]
pub(super) enum Latency {
    Answer,
    FirstToken,
}

/// What a served chain hands the tail that answers.
pub(super) struct Served<T> {
    pub value: T,
    /// Failover events first, then what the input checks recorded.
    pub trail: Trail,
}

/// The model chain of a secured request, shared by the JSON and the
/// streaming tails: entries the policy keeps the data from are skipped, each
/// attempt is `attempt` on the resolved provider; a served chain fills the
/// metadata (served model, failover) and records the serving latency; an
/// exhausted one is the reply to commit (before any byte, so JSON in both).
pub(super) async fn run_chain<T, A>(
    deps: &ChatDeps,
    ctx: &AuthContext,
    p: &mut Prepared,
    secured: &mut Secured,
    latency: Latency,
    attempt: A,
) -> Result<Served<T>, Reply>
where
    A: AsyncFn(&Transport, &Resolved, &ChainEntry, &NormalizedRequest) -> Result<T, AttemptError>,
{
    let result = chain::run(
        &p.params.chain,
        &p.params.on,
        &deps.breakers,
        p.counting,
        |e| policy_skip(secured, e),
        |_, entry| {
            let resolved = providers::resolve(&p.targets, p.adapters.as_ref(), &entry.model);
            let (transport, normalized, attempt) = (&deps.transport, &p.normalized, &attempt);
            async move { attempt(transport, &resolved?, entry, normalized).await }
        },
    )
    .await;
    match result {
        ChainResult::Served { value, index, attempts, failovers } => {
            let served = p.params.chain[index].model.to_string();
            if let Some(a) = attempts.last() {
                let m = crate::metrics::get();
                let histogram = match latency {
                    Latency::Answer => &m.upstream_latency,
                    Latency::FirstToken => &m.time_to_first_token,
                };
                histogram.get_or_create(&m.model_label(&served)).observe(a.latency_ms as f64 / 1000.0);
            }
            p.meta.served_model = served;
            if p.params.multi_model() {
                p.meta.failover = Some(attempts);
            }
            Ok(Served { value, trail: trail_after(ctx, &p.bill_user, &failovers, secured) })
        }
        ChainResult::Exhausted { attempts, failovers, all_rate_limited } => {
            let trail = trail_after(ctx, &p.bill_user, &failovers, secured);
            Err(Reply::error(p.format, exhausted_error(&attempts, all_rate_limited), trail))
        }
    }
}

/// The request's trail once the chain has run: its failover events first,
/// then what the input checks recorded.
fn trail_after(ctx: &AuthContext, bill_user: &str, failovers: &[Failover], secured: &mut Secured) -> Trail {
    let mut trail = Trail::of(failover_events(ctx, bill_user, failovers), Vec::new());
    trail.append(std::mem::take(&mut secured.trail));
    trail
}

async fn complete(deps: &ChatDeps, ctx: &AuthContext, mut p: Prepared, mut secured: Secured) -> Reply {
    let Served { value, mut trail } = match run_chain(deps, ctx, &mut p, &mut secured, Latency::Answer, attempt::complete).await {
        Ok(served) => served,
        Err(reply) => return reply,
    };
    let format = p.format;
    let served = p.meta.served_model.clone();
    let prompt_text: String = p.normalized.messages.iter().map(|m| m.content.as_str()).collect();
    let usage: Usage = attempt::settle_usage(value.usage, &prompt_text, &value.content);
    let usage_delta = UsageDelta {
        user_id: p.bill_user.clone(),
        key_id: ctx.key.id.clone(),
        group_id: ctx.key.group_id.clone(),
        model: served.clone(),
        request_id: p.request_id.clone(),
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
    };
    let (content, leaked) = secured.scan_output(&value.content);
    if leaked {
        let withhold = secured.decision.as_ref().is_some_and(|d| d.withhold_on_canary_leak);
        let (ev, au) = secured.canary_leak(&super::input::subject(ctx, &p), withhold);
        trail.events.push(ev);
        trail.audit.push(au);
        if withhold {
            let mut reply = Reply::error(
                format,
                ChatError::access_denied("output withheld: the answer leaked the system context (canary token)"),
                trail,
            );
            reply.usage = Some(usage_delta);
            return reply;
        }
    }
    let body = format.completion_body(&p.request_id, p.created, &content, &value.finish_reason, usage, &p.meta);
    let verdict = if leaked { "canary_leaked" } else { secured.verdict };
    let receipt = p.receipt(deps, ctx, &served, &content, verdict);
    Reply { status: StatusCode::OK, body, usage: Some(usage_delta), trail, receipt: Some(receipt), retry_after: None }
}

/// Commit what the request produced, then answer. The commit comes first: an
/// acknowledged answer is billed and its idempotency record is durable.
pub(super) async fn finish(deps: &ChatDeps, reply: Reply, claim: Option<HeldClaim>) -> Response {
    let body_text = reply.body;
    let idem = claim.as_ref().map(|g| g.outcome(reply.status, "application/json", body_text.clone()));
    let Trail { events, audit, .. } = reply.trail;
    if reply.usage.is_some() || !events.is_empty() || !audit.is_empty() || idem.is_some() || reply.receipt.is_some() {
        let outcome = RequestOutcome { usage: reply.usage, events, audit, receipt: reply.receipt, idempotency: idem };
        if let Err(e) = deps.store.finish_request(outcome).await {
            tracing::error!(error = %e, "recording a chat request failed");
            return ChatError::from(e).into_response();
        }
    }
    drop(claim);
    let mut resp = (reply.status, [(header::CONTENT_TYPE, "application/json")], body_text).into_response();
    if let Some(secs) = reply.retry_after {
        resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}
