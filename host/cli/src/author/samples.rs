//! `gatehouse plugin test`: the built component, loaded by the plugin host
//! as the server loads it, decides every sample request of a JSON Lines file;
//! each decision is compared with the sample's expectation.
//!
//! A sample: `{"name": "…", "request": {chat request fields}, "config": {…},
//! "expect": {"allow": false, "reason": "a part of the reason", …}}`. The
//! request is what a client would send (`prompt` or `messages`, `model` or
//! `models`, `index`, `prompt_shield`); `config` is the policy's config from
//! the host config; `expect` names only the fields it checks: `allow`,
//! `reason` (a substring), `providers`, `indexes`, `pii`, `dlp`,
//! `restore_pii`, `shield`, `shield_may_disable`, `withhold_on_canary_leak`,
//! `log_prompts`.

use std::path::Path;
use std::time::Instant;

use gatehouse_plugin_host::plugin::policy_calls::{DataAction, Message, PolicyContext, PolicyDecision, Role};
use serde_json::{Value, json};

use super::Project;

pub fn run(project: &Project, samples: &Path) -> anyhow::Result<i32> {
    let wasm = project.built()?;
    let text = std::fs::read_to_string(samples).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", samples.display()))?;
    let plugin = gatehouse_plugin_host::PluginRuntime::load_file(&Default::default(), &wasm)?;
    println!("{}: serves as policy `{}` (version {})", wasm.display(), plugin.name, plugin.version);
    let (mut passed, mut failed) = (0, 0);
    let started = Instant::now();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = format!("{}:{}", samples.display(), i + 1);
        let sample: Value = serde_json::from_str(line).map_err(|e| anyhow::anyhow!("{at}: not JSON: {e}"))?;
        let name = sample["name"].as_str().map_or_else(|| format!("line {}", i + 1), str::to_owned);
        let ctx = context(&plugin.name, &sample).map_err(|e| anyhow::anyhow!("{at}: {e}"))?;
        match plugin.evaluate(&ctx) {
            Ok(decision) => {
                let diff = differences(&sample["expect"], &decision);
                if diff.is_empty() {
                    passed += 1;
                    println!("ok    {name}");
                } else {
                    failed += 1;
                    println!("FAIL  {name}  ({at})");
                    for d in diff {
                        println!("      {d}");
                    }
                }
            }
            Err(e) => {
                failed += 1;
                println!("FAIL  {name}  ({at})\n      the call failed: {e}");
            }
        }
    }
    let took = started.elapsed();
    println!(
        "{passed} passed, {failed} failed ({} samples in {:.0} ms, a fresh instance each)",
        passed + failed,
        took.as_secs_f64() * 1000.0
    );
    Ok(if failed == 0 && passed > 0 { 0 } else { 1 })
}

/// The policy context the host would give the sample's request.
pub fn context(policy: &str, sample: &Value) -> Result<PolicyContext, String> {
    let request = &sample["request"];
    let messages = match &request["messages"] {
        Value::Array(list) => list
            .iter()
            .map(|m| {
                let role = match m["role"].as_str() {
                    Some("system") => Role::System,
                    Some("user") => Role::User,
                    Some("assistant") => Role::Assistant,
                    Some("tool") => Role::Tool,
                    other => return Err(format!("unknown role {other:?}")),
                };
                Ok(Message { role, content: m["content"].as_str().unwrap_or_default().to_owned() })
            })
            .collect::<Result<Vec<_>, _>>()?,
        Value::Null => vec![Message { role: Role::User, content: request["prompt"].as_str().unwrap_or_default().to_owned() }],
        _ => return Err("request.messages is not a list".into()),
    };
    let models = match (&request["models"], &request["model"]) {
        (Value::Array(list), _) => list.iter().filter_map(|m| m.as_str().map(str::to_owned)).collect(),
        (_, Value::String(m)) => vec![m.clone()],
        _ => Vec::new(),
    };
    let config = match &sample["config"] {
        Value::Null => json!({}),
        c => c.clone(),
    };
    Ok(PolicyContext {
        policy_name: policy.to_owned(),
        key_id: "key_sample".into(),
        user_id: "user_sample".into(),
        group_id: None,
        models,
        index: request["index"].as_str().unwrap_or("Zero-Knowledge").to_owned(),
        messages,
        shield_disable_requested: request["prompt_shield"]["enabled"] == false,
        config_json: config.to_string(),
    })
}

fn action(a: DataAction) -> &'static str {
    match a {
        DataAction::Allow => "allow",
        DataAction::Flag => "flag",
        DataAction::Redact => "redact",
        DataAction::Block => "block",
    }
}

/// A decision in the sample format's field names.
pub fn as_json(d: &PolicyDecision) -> Value {
    json!({
        "allow": d.allow,
        "reason": d.reason,
        "providers": d.allowed_providers,
        "indexes": d.allowed_indexes,
        "pii": action(d.pii_action),
        "dlp": action(d.dlp_action),
        "restore_pii": d.restore_pii,
        "shield": d.shield_mode,
        "shield_may_disable": d.shield_may_disable,
        "withhold_on_canary_leak": d.withhold_on_canary_leak,
        "log_prompts": d.log_prompts,
    })
}

/// One line per expected field the decision does not match: `field: expected X, got Y`.
fn differences(expect: &Value, decision: &PolicyDecision) -> Vec<String> {
    let got = as_json(decision);
    let Some(expect) = expect.as_object() else {
        return vec!["the sample has no \"expect\" object".into()];
    };
    let mut out = Vec::new();
    for (field, want) in expect {
        let have = &got[field.as_str()];
        let matches = match (field.as_str(), want, have) {
            ("reason", Value::String(part), Value::String(reason)) => reason.contains(part.as_str()),
            _ if got.get(field).is_none() => {
                out.push(format!("{field}: not a decision field"));
                continue;
            }
            _ => want == have,
        };
        if !matches {
            let how = if field == "reason" { "expected to contain" } else { "expected" };
            out.push(format!("{field}: {how} {want}, got {have}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision() -> PolicyDecision {
        PolicyDecision {
            allow: false,
            reason: Some("acme: model echo/large is not approved".into()),
            allowed_providers: None,
            allowed_indexes: None,
            pii_action: DataAction::Block,
            dlp_action: DataAction::Block,
            restore_pii: false,
            shield_mode: "strict".into(),
            shield_may_disable: false,
            withhold_on_canary_leak: true,
            log_prompts: false,
        }
    }

    #[test]
    fn only_the_expected_fields_are_compared_and_reason_is_a_substring() {
        assert!(differences(&json!({"allow": false, "reason": "not approved", "pii": "block"}), &decision()).is_empty());
        let diff = differences(&json!({"allow": true, "shield": "balanced", "reason": "denied term"}), &decision());
        assert_eq!(
            diff,
            [
                "allow: expected true, got false",
                "reason: expected to contain \"denied term\", got \"acme: model echo/large is not approved\"",
                "shield: expected \"balanced\", got \"strict\"",
            ]
        );
        assert_eq!(differences(&json!({"colour": 1}), &decision()), ["colour: not a decision field"]);
    }

    #[test]
    fn a_request_becomes_the_context_the_host_would_give() {
        let sample = json!({"request": {"prompt": "hi", "model": "echo/default", "prompt_shield": {"enabled": false}}, "config": {"deny_terms": ["x"]}});
        let ctx = context("acme", &sample).expect("context");
        assert_eq!(ctx.models, ["echo/default"]);
        assert_eq!(ctx.messages.len(), 1);
        assert!(ctx.shield_disable_requested);
        assert_eq!(ctx.index, "Zero-Knowledge");
        assert_eq!(ctx.config_json, r#"{"deny_terms":["x"]}"#);
        let chat = json!({"request": {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], "models": ["a/b", "c/d"]}});
        let ctx = context("acme", &chat).expect("context");
        assert_eq!((ctx.messages.len(), ctx.models.len(), ctx.config_json.as_str()), (2, 2, "{}"));
        assert!(context("acme", &json!({"request": {"messages": [{"role": "robot", "content": "x"}]}})).is_err());
    }
}
