//! The chat path's traits ([`ProviderAdapter`], [`PolicyEngine`],
//! [`Detector`]) over loaded plugins, and the snapshot a request keeps: chat
//! adapts the plugin runtime, which knows nothing of chat.

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::chat::attempt::{AttemptCalls, ProviderAdapter};
use crate::chat::providers::{PluginSet, PluginSource};
use crate::chat::security::{self, Action, Detector, PolicyDecision, PolicyEngine, PolicyInput, Stage, Strictness, Verdict};
use crate::chat::sse::SseEvent;
use crate::chat::types::{AttemptError, Completion, HttpRequestDesc, NormalizedRequest, Role, StreamPiece, Trigger, UpstreamTarget, Usage};
use crate::config::Config;
use gatehouse_plugin_host::plugin::{PluginError, ProviderSession, policy_calls as pc, provider_calls as pv, shield_calls as sc};
use gatehouse_plugin_host::{Kind, Plugin, PluginRuntime, Registry};

/// Hands out snapshots of the runtime's registry.
pub struct RuntimeAdapters {
    pub runtime: Arc<PluginRuntime>,
    pub config: Arc<ArcSwap<Config>>,
}

impl PluginSource for RuntimeAdapters {
    fn snapshot(&self) -> Arc<dyn PluginSet> {
        Arc::new(Snapshot { registry: self.runtime.snapshot(), config: self.config.load_full() })
    }
}

struct Snapshot {
    registry: Arc<Registry>,
    config: Arc<Config>,
}

impl PluginSet for Snapshot {
    fn provider(&self, plugin: &str) -> Option<Arc<dyn ProviderAdapter>> {
        self.registry.of_kind(plugin, Kind::Provider).map(|p| Arc::new(ProviderPlugin(p)) as Arc<dyn ProviderAdapter>)
    }

    fn policy(&self, name: &str) -> Option<Arc<dyn PolicyEngine>> {
        self.registry.of_kind(name, Kind::Policy).map(|p| {
            let cfg = self.config.plugins.plugin_config(name).to_string();
            let hash = gatehouse_store::receipts::sha256_hex(format!("{}\n{cfg}", p.sha256).as_bytes());
            Arc::new(PolicyPlugin { plugin: p, hash }) as Arc<dyn PolicyEngine>
        })
    }

    fn has_policy(&self, name: &str) -> bool {
        self.registry.of_kind(name, Kind::Policy).is_some()
    }

    fn detector(&self, name: &str) -> Option<Arc<dyn Detector>> {
        self.registry.of_kind(name, Kind::Shield).map(|p| Arc::new(ShieldPlugin(p)) as Arc<dyn Detector>)
    }

    fn policy_names(&self) -> Vec<String> {
        self.registry.names_of(Kind::Policy)
    }
}

fn fault(e: PluginError) -> AttemptError {
    AttemptError::new(Trigger::ServerError, format!("provider adapter fault: {e}"))
}

fn provider_error(e: pv::ProviderError) -> AttemptError {
    let trigger = match e.class {
        pv::ErrorClass::Timeout => Trigger::Timeout,
        pv::ErrorClass::ServerError => Trigger::ServerError,
        pv::ErrorClass::RateLimit => Trigger::RateLimit,
        pv::ErrorClass::ClientError => Trigger::ClientError,
    };
    AttemptError::new(trigger, e.message)
}

fn usage(u: pv::Usage) -> Usage {
    Usage { prompt_tokens: u.prompt_tokens as u64, completion_tokens: u.completion_tokens as u64 }
}

fn upstream(t: &UpstreamTarget) -> pv::Upstream {
    pv::Upstream { base_url: t.base_url.clone(), api_key: t.api_key.clone(), config_json: t.config_json.clone() }
}

/// A provider-world plugin.
pub struct ProviderPlugin(pub Arc<Plugin>);

impl ProviderAdapter for ProviderPlugin {
    fn attempt(&self) -> Result<Box<dyn AttemptCalls>, AttemptError> {
        Ok(Box::new(ProviderAttempt(self.0.provider_session().map_err(fault)?)))
    }
}

/// One attempt's calls, on one provider instance while a session slot is free.
struct ProviderAttempt(ProviderSession);

impl AttemptCalls for ProviderAttempt {
    fn build_request(&mut self, up: &UpstreamTarget, model: &str, req: &NormalizedRequest) -> Result<HttpRequestDesc, AttemptError> {
        let request = pv::ChatRequest {
            model: model.to_owned(),
            messages: req
                .messages
                .iter()
                .map(|m| pv::Message {
                    role: match m.role {
                        Role::System => pv::Role::System,
                        Role::User => pv::Role::User,
                        Role::Assistant => pv::Role::Assistant,
                        Role::Tool => pv::Role::Tool,
                    },
                    content: m.content.clone(),
                })
                .collect(),
            temperature: req.temperature,
            max_tokens: req.max_tokens,
            stream: req.stream,
            stop: req.stop.clone(),
            extra_json: req.extra_json.clone(),
        };
        let http = self.0.build_request(&upstream(up), &request).map_err(fault)?.map_err(provider_error)?;
        Ok(HttpRequestDesc {
            method: http.method,
            url: http.url,
            headers: http.headers.into_iter().map(|h| (h.name, h.value)).collect(),
            body: http.body,
        })
    }

    fn parse_response(&mut self, up: &UpstreamTarget, status: u16, body: &str) -> Result<Completion, AttemptError> {
        let c = self.0.parse_response(&upstream(up), status, body).map_err(fault)?.map_err(provider_error)?;
        Ok(Completion { content: c.content, finish_reason: c.finish_reason, usage: c.usage.map(usage) })
    }

    fn parse_stream_event(&mut self, up: &UpstreamTarget, state: &str, event: &SseEvent) -> Result<StreamPiece, AttemptError> {
        let ev = pv::StreamEvent { event: event.event.clone(), data: event.data.clone() };
        let o = self.0.parse_stream_event(&upstream(up), state, &ev).map_err(fault)?.map_err(provider_error)?;
        Ok(StreamPiece { content: o.content, finish_reason: o.finish_reason, usage: o.usage.map(usage), done: o.done, state: o.state })
    }
}

/// A policy-world plugin with its hash.
pub struct PolicyPlugin {
    plugin: Arc<Plugin>,
    hash: String,
}

impl PolicyPlugin {
    /// A policy plugin held outside the snapshot (a shadow version, loaded
    /// detached from the serving runtime: `chat::security::tenant`).
    pub fn new(plugin: Arc<Plugin>, hash: String) -> PolicyPlugin {
        PolicyPlugin { plugin, hash }
    }
}

fn data_action(a: pc::DataAction) -> Action {
    match a {
        pc::DataAction::Allow => Action::Allow,
        pc::DataAction::Flag => Action::Flag,
        pc::DataAction::Redact => Action::Redact,
        pc::DataAction::Block => Action::Block,
    }
}

impl PolicyEngine for PolicyPlugin {
    fn evaluate(&self, input: &PolicyInput<'_>) -> Result<PolicyDecision, String> {
        let ctx = pc::PolicyContext {
            policy_name: input.policy_name.to_owned(),
            key_id: input.key_id.to_owned(),
            user_id: input.user_id.to_owned(),
            group_id: input.group_id.map(str::to_owned),
            models: input.models.clone(),
            index: input.index.to_owned(),
            messages: input
                .messages
                .iter()
                .map(|m| pc::Message {
                    role: match m.role {
                        Role::System => pc::Role::System,
                        Role::User => pc::Role::User,
                        Role::Assistant => pc::Role::Assistant,
                        Role::Tool => pc::Role::Tool,
                    },
                    content: m.content.clone(),
                })
                .chain(input.extra_texts.iter().map(|t| pc::Message { role: pc::Role::Tool, content: t.clone() }))
                .collect(),
            shield_disable_requested: input.shield_disable_requested,
            config_json: input.config_json.to_owned(),
        };
        let d = self.plugin.evaluate(&ctx).map_err(|e| e.to_string())?;
        Ok(PolicyDecision {
            allow: d.allow,
            reason: d.reason,
            allowed_providers: d.allowed_providers,
            allowed_indexes: d.allowed_indexes,
            pii_action: data_action(d.pii_action),
            dlp_action: data_action(d.dlp_action),
            restore_pii: d.restore_pii,
            shield_mode: d.shield_mode,
            shield_may_disable: d.shield_may_disable,
            withhold_on_canary_leak: d.withhold_on_canary_leak,
            log_prompts: d.log_prompts,
        })
    }

    fn hash(&self) -> String {
        self.hash.clone()
    }
}

/// A shield-world plugin.
pub struct ShieldPlugin(pub Arc<Plugin>);

impl ShieldPlugin {
    fn request(stage: Stage, strictness: Strictness, config_json: &str, texts: &[String]) -> sc::InspectRequest {
        sc::InspectRequest {
            stage: match stage {
                Stage::Input => sc::Stage::Input,
                Stage::Retrieved => sc::Stage::Retrieved,
                Stage::Output => sc::Stage::Output,
            },
            strictness: match strictness {
                Strictness::Monitor => sc::Strictness::Monitor,
                Strictness::Balanced => sc::Strictness::Balanced,
                Strictness::Strict => sc::Strictness::Strict,
            },
            config_json: config_json.to_owned(),
            texts: texts.to_vec(),
        }
    }

    /// The plugin's verdicts in the host's terms: exactly one per text.
    fn verdicts(&self, verdicts: Vec<sc::Verdict>, texts: usize) -> Result<Vec<Verdict>, String> {
        if verdicts.len() != texts {
            return Err(format!("plugin {} returned {} verdicts for {texts} texts", self.0.name, verdicts.len()));
        }
        Ok(verdicts
            .into_iter()
            .map(|v| Verdict {
                action: match v.action {
                    sc::Action::Allow => Action::Allow,
                    sc::Action::Flag => Action::Flag,
                    sc::Action::Redact => Action::Redact,
                    sc::Action::Block => Action::Block,
                },
                score: v.score,
                reasons: v.reasons,
                redactions: v
                    .redactions
                    .into_iter()
                    .map(|r| security::Redaction { start: r.start as usize, end: r.end as usize, kind: r.kind, replacement: r.replacement })
                    .collect(),
            })
            .collect())
    }
}

impl Detector for ShieldPlugin {
    fn inspect(&self, stage: Stage, strictness: Strictness, config_json: &str, texts: &[String]) -> Result<Vec<Verdict>, String> {
        let verdicts = self.0.inspect(&Self::request(stage, strictness, config_json, texts)).map_err(|e| e.to_string())?;
        self.verdicts(verdicts, texts.len())
    }

    fn make_canary(&self, seed: &str) -> Result<Option<(String, String)>, String> {
        Ok(self.0.make_canary(seed).map_err(|e| e.to_string())?.map(|c| (c.token, c.instruction)))
    }

    fn inspect_then_canary(
        &self,
        stage: Stage,
        strictness: Strictness,
        config_json: &str,
        texts: &[String],
        seed: &str,
    ) -> security::InspectAndCanary {
        let req = Self::request(stage, strictness, config_json, texts);
        let (verdicts, canary) = self.0.inspect_then_canary(&req, seed).map_err(|e| e.to_string())?;
        let canary = canary.map(|c| c.map(|c| (c.token, c.instruction))).map_err(|e| e.to_string());
        Ok((self.verdicts(verdicts, texts.len())?, canary))
    }
}
