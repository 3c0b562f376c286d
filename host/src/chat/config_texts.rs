//! The JSON config texts the input pipeline hands its plugins (a policy's
//! config with the host's `confidential_providers`, Prompt Shield's, PII/DLP's
//! with the policy's actions), made once per config snapshot instead of per
//! request: each was a copy of a `serde_json::Value` tree, an insert and a
//! serialisation on every request.
//!
//! The cache belongs to one snapshot: a lookup with another (after a reload)
//! starts it afresh, so a text never outlives the config it came from.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::security::{Action, PII_DLP, json_text};
use crate::config::Config;

/// Config texts by plugin, for the current config snapshot.
#[derive(Default)]
pub struct ConfigTexts {
    built: Mutex<Option<Built>>,
}

struct Built {
    /// The snapshot the texts were made from (held, so its address is not reused).
    config: Arc<Config>,
    policies: HashMap<String, Arc<str>>,
    plugins: HashMap<&'static str, Arc<str>>,
    pii_dlp: HashMap<(Action, Action), Arc<str>>,
}

impl ConfigTexts {
    /// Policy `name`'s config, plus `confidential_providers`: the providers
    /// marked `confidential = true`, sorted.
    pub fn policy(&self, config: &Arc<Config>, name: &str) -> Arc<str> {
        self.with(config, |b| {
            if let Some(t) = b.policies.get(name) {
                return t.clone();
            }
            let mut value = config.plugins.plugin_config(name);
            let mut confidential: Vec<&String> = config.providers.iter().filter(|(_, pc)| pc.confidential).map(|(n, _)| n).collect();
            confidential.sort();
            value["confidential_providers"] = json!(confidential);
            let text: Arc<str> = json_text(&value).into();
            b.policies.insert(name.to_owned(), text.clone());
            text
        })
    }

    /// The config of plugin `name` as written (`{}` when it has none).
    pub fn plugin(&self, config: &Arc<Config>, name: &'static str) -> Arc<str> {
        self.with(config, |b| {
            b.plugins
                .entry(name)
                .or_insert_with(|| config.plugins.plugin_config_ref(name).map_or_else(|| "{}".to_owned(), json_text).into())
                .clone()
        })
    }

    /// PII/DLP's (`pii-dlp`) config with the policy's actions in `pii` and `dlp` (they
    /// override the same keys of the config).
    pub fn pii_dlp(&self, config: &Arc<Config>, pii: Action, dlp: Action) -> Arc<str> {
        self.with(config, |b| {
            b.pii_dlp
                .entry((pii, dlp))
                .or_insert_with(|| {
                    let mut value = config.plugins.plugin_config_ref(PII_DLP).cloned().unwrap_or_else(|| Value::Object(Default::default()));
                    value["pii"] = json!(pii.as_str());
                    value["dlp"] = json!(dlp.as_str());
                    json_text(&value).into()
                })
                .clone()
        })
    }

    fn with(&self, config: &Arc<Config>, f: impl FnOnce(&mut Built) -> Arc<str>) -> Arc<str> {
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        let current = match &mut *built {
            Some(b) if Arc::ptr_eq(&b.config, config) => b,
            stale => {
                stale.insert(Built { config: config.clone(), policies: HashMap::new(), plugins: HashMap::new(), pii_dlp: HashMap::new() })
            }
        };
        f(current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml: &str) -> Arc<Config> {
        use figment::Figment;
        use figment::providers::{Format, Toml};
        Arc::new(Figment::from(Toml::string(toml)).extract().expect("config"))
    }

    #[test]
    fn texts_are_made_once_per_snapshot_and_afresh_for_the_next() {
        let texts = ConfigTexts::default();
        let a = config(
            "[providers.b]\nplugin = \"provider-echo\"\nbase_url = \"echo://x\"\nconfidential = true\n\
             [providers.a]\nplugin = \"provider-echo\"\nbase_url = \"echo://x\"\nconfidential = true\n\
             [providers.c]\nplugin = \"provider-echo\"\nbase_url = \"echo://x\"\n\
             [plugins.settings.internal.config]\ndeny_terms = [\"falcon\"]\n\
             [plugins.settings.pii-dlp.config]\npii = \"allow\"\nmin_score = 0.5\n",
        );
        let p = texts.policy(&a, "internal");
        let v: Value = serde_json::from_str(&p).expect("json");
        assert_eq!(v, json!({"deny_terms": ["falcon"], "confidential_providers": ["a", "b"]}));
        assert!(Arc::ptr_eq(&p, &texts.policy(&a, "internal")), "served from the cache");
        assert_eq!(&*texts.policy(&a, "public"), r#"{"confidential_providers":["a","b"]}"#);

        assert_eq!(&*texts.plugin(&a, "prompt-shield"), "{}");
        let pii = texts.pii_dlp(&a, Action::Redact, Action::Block);
        let v: Value = serde_json::from_str(&pii).expect("json");
        assert_eq!(v, json!({"pii": "redact", "dlp": "block", "min_score": 0.5}), "the policy's actions win");
        let flag = texts.pii_dlp(&a, Action::Flag, Action::Block);
        assert!(flag.contains(r#""pii":"flag""#), "{flag}");

        // A reload: a new snapshot, new texts (the default providers: `echo`, confidential).
        let b = config("[plugins.settings.internal.config]\ndeny_terms = [\"eagle\"]\n");
        let v: Value = serde_json::from_str(&texts.policy(&b, "internal")).expect("json");
        assert_eq!(v, json!({"deny_terms": ["eagle"], "confidential_providers": ["echo"]}));
        let v: Value = serde_json::from_str(&texts.pii_dlp(&b, Action::Redact, Action::Block)).expect("json");
        assert_eq!(v, json!({"pii": "redact", "dlp": "block"}));
    }
}
