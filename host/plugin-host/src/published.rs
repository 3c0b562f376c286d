//! The plugin registry's layer of the runtime: the versions published to the
//! store and active there. Precedence by name: a watched-folder file (this
//! host only) > the active published version > bundled.
//!
//! The host reads the registry (on start and on every change announced) and
//! hands the active set here ([`PluginRuntime::sync_published`]); this module
//! loads the versions it has not loaded yet, with the same checks as a file
//! drop, and swaps the snapshot. A version that fails here keeps whatever
//! served before (the previous version, or the bundled one) and is not
//! tried again until another version is active.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Kind, Plugin, PluginAction, PluginEvent, PluginRuntime, PluginSummary, Registry, Source, folder};

/// One name's active version in the registry; `bytes` only where
/// [`PluginRuntime::wanted`] asked for them.
#[derive(Debug, Clone)]
pub struct ActiveVersion {
    pub name: String,
    pub version: u32,
    pub sha256: String,
    pub bytes: Option<Vec<u8>>,
}

/// The published layer's state.
#[derive(Default)]
pub(crate) struct Published {
    /// What serves from the registry: name → plugin.
    pub serving: BTreeMap<String, Arc<Plugin>>,
    /// Active versions this host refused: name → (version, why).
    pub refused: BTreeMap<String, (u32, String)>,
}

impl PluginRuntime {
    /// Of the registry's active versions (name, version, sha256), those whose
    /// bytes this host needs: not loaded yet, and not already refused.
    pub fn wanted(&self, active: &[(String, u32, String)]) -> Vec<String> {
        let published = self.published.lock().unwrap_or_else(|p| p.into_inner());
        active
            .iter()
            .filter(|(name, version, sha)| {
                let loaded = published
                    .serving
                    .get(name)
                    .is_some_and(|p| p.sha256 == *sha && matches!(p.source, Source::Published { version: v } if v == *version));
                let refused = published.refused.get(name).is_some_and(|(v, _)| v == version);
                !loaded && !refused
            })
            .map(|(name, _, _)| name.clone())
            .collect()
    }

    /// Why a component may not be published under its name, by the same
    /// rules a watched-folder file meets: a bundled plugin's name only with
    /// the same kind, a built-in security policy's only when
    /// `plugins.allow_policy_overrides` lists it.
    pub fn publish_refusal(&self, name: &str, kind: Kind) -> Option<String> {
        let rules = self.rules();
        if let Some(k) = rules.bundled.get(name).filter(|k| **k != kind) {
            return Some(format!(
                "{name} is the name of the bundled {} plugin, and this is a {} plugin; publish it under another name",
                k.as_str(),
                kind.as_str()
            ));
        }
        let builtin_policy = folder::BUILTIN_POLICIES.contains(&name) || rules.bundled.get(name).is_some_and(|k| *k == Kind::Policy);
        if builtin_policy && !rules.allow_policy_overrides.iter().any(|a| a == name) {
            return Some(format!("{name} is a built-in security policy; it is replaced only when plugins.allow_policy_overrides lists it"));
        }
        None
    }

    /// Check a component offered for publication, as a file drop is checked:
    /// size (`plugins.max_component_mb`), a Gatehouse world, `info()` (which
    /// instantiates it: the trial instantiation), and the naming rules.
    /// Blocking (compiles). Returns what it declares.
    pub fn check_upload(&self, bytes: &[u8]) -> Result<PluginSummary, String> {
        let max = self.loader.config.load().max_component_bytes();
        if bytes.len() as u64 > max {
            return Err(format!("{} bytes, over plugins.max_component_mb ({max} bytes)", bytes.len()));
        }
        let plugin = self.loader.load(bytes, Source::Published { version: 0 })?;
        if let Some(why) = self.publish_refusal(&plugin.name, plugin.kind) {
            return Err(why);
        }
        Ok(plugin.summary())
    }

    /// Load a published version beside the snapshot, never into it: the same
    /// engine (so the same compiled-code cache), the same checks as
    /// [`PluginRuntime::check_upload`] and the same grants and limits as any
    /// plugin of that name, but the plugin is the caller's alone. A shadow
    /// version of a policy is loaded this way, so it runs under the limits
    /// the operator configured and a name's shadow never takes the serving
    /// version's place. A config reload regrants it like the snapshot's
    /// plugins for as long as the caller keeps it. Blocking (compiles).
    pub fn load_detached(&self, name: &str, version: u32, bytes: &[u8]) -> Result<Arc<Plugin>, String> {
        let max = self.loader.config.load().max_component_bytes();
        if bytes.len() as u64 > max {
            return Err(format!("{} bytes, over plugins.max_component_mb ({max} bytes)", bytes.len()));
        }
        let p = self.loader.load(bytes, Source::Published { version })?;
        if p.name != name {
            return Err(format!("declares {}, but was published as {name}", p.name));
        }
        if let Some(why) = self.publish_refusal(&p.name, p.kind) {
            return Err(why);
        }
        let p = Arc::new(p);
        let mut detached = self.detached.lock().unwrap_or_else(|p| p.into_inner());
        detached.retain(|w| w.strong_count() > 0);
        detached.push(Arc::downgrade(&p));
        Ok(p)
    }

    /// The detached versions still held by someone.
    pub(crate) fn detached(&self) -> Vec<Arc<Plugin>> {
        let mut detached = self.detached.lock().unwrap_or_else(|p| p.into_inner());
        detached.retain(|w| w.strong_count() > 0);
        detached.iter().filter_map(std::sync::Weak::upgrade).collect()
    }

    /// Bring the published layer in line with the registry's active set:
    /// load what changed (versions listed with their bytes), drop names no
    /// longer published, swap the snapshot, then report each change as a
    /// file drop is reported (loaded, reloaded, failed, removed). Blocking.
    pub fn sync_published(&self, active: Vec<ActiveVersion>) {
        let mut events = Vec::new();
        let mut loaded: BTreeMap<String, Result<Arc<Plugin>, String>> = BTreeMap::new();
        // Compile outside the locks: requests keep the current snapshot meanwhile.
        for a in &active {
            let Some(bytes) = &a.bytes else { continue };
            let result = match self.loader.load(bytes, Source::Published { version: a.version }) {
                Ok(p) if p.name != a.name => Err(format!("declares {}, but was published as {}", p.name, a.name)),
                Ok(p) => match self.publish_refusal(&p.name, p.kind) {
                    Some(why) => Err(why),
                    None => Ok(Arc::new(p)),
                },
                Err(e) => Err(e),
            };
            loaded.insert(a.name.clone(), result);
        }
        let folder = self.folder.lock().unwrap_or_else(|p| p.into_inner());
        let mut published = self.published.lock().unwrap_or_else(|p| p.into_inner());
        let mut serving = BTreeMap::new();
        for a in &active {
            let old = published.serving.get(&a.name).cloned();
            match loaded.remove(&a.name) {
                Some(Ok(p)) => {
                    published.refused.remove(&a.name);
                    let (action, message) = match (&old, self.bundled.contains_key(&a.name)) {
                        (Some(o), _) => (
                            PluginAction::Reloaded,
                            format!("{} version {} from the plugin registry replaces version {}", a.name, a.version, published_version(o)),
                        ),
                        (None, true) => (
                            PluginAction::Reloaded,
                            format!("{} version {} from the plugin registry overrides the bundled one", a.name, a.version),
                        ),
                        (None, false) => (PluginAction::Loaded, format!("{} version {} from the plugin registry", a.name, a.version)),
                    };
                    events.push(event(action, &p, a.version, format!("{message} (version {})", folder::shown_text(&p.version))));
                    serving.insert(a.name.clone(), p);
                }
                Some(Err(why)) => {
                    let keeps = match &old {
                        Some(o) => format!("; version {} serves on", published_version(o)),
                        None if self.bundled.contains_key(&a.name) => format!("; the bundled {} serves on", a.name),
                        None => String::new(),
                    };
                    events.push(PluginEvent {
                        action: PluginAction::Failed,
                        plugin: a.name.clone(),
                        kind: None,
                        sha256: Some(a.sha256.clone()),
                        source: format!("registry version {}", a.version),
                        message: format!("version {} from the plugin registry not loaded: {}{keeps}", a.version, folder::shown_text(&why)),
                    });
                    published.refused.insert(a.name.clone(), (a.version, why));
                    if let Some(o) = old {
                        serving.insert(a.name.clone(), o);
                    }
                }
                None => {
                    if let Some(o) = old {
                        serving.insert(a.name.clone(), o);
                    }
                }
            }
        }
        for (name, old) in &published.serving {
            if !serving.contains_key(name) {
                let fallback = if self.bundled.contains_key(name) { format!("; the bundled {name} serves again") } else { String::new() };
                let message = format!("{name} is no longer published{fallback}");
                events.push(event(PluginAction::Removed, old, published_version(old), message));
            }
        }
        published.refused.retain(|name, _| active.iter().any(|a| &a.name == name));
        let changed = serving.len() != published.serving.len()
            || serving.iter().any(|(n, p)| published.serving.get(n).is_none_or(|o| !Arc::ptr_eq(o, p)));
        published.serving = serving;
        if changed {
            self.current.store(Arc::new(self.merged(&folder, &published)));
        }
        drop(published);
        drop(folder);
        for e in events {
            self.events.event(e);
        }
    }

    /// The snapshot's plugins: bundled, then published, then the folder's files, each overriding the one before by name.
    pub(crate) fn merged(&self, folder: &folder::Folder<Plugin>, published: &Published) -> Registry {
        let mut plugins = self.bundled.clone();
        for (name, p) in &published.serving {
            plugins.insert(name.clone(), p.clone());
        }
        for (name, (_, p)) in folder.served() {
            plugins.insert(name.clone(), p.clone());
        }
        Registry { plugins }
    }

    /// For the listing: the published version a name's file hides, and why an active version was refused here.
    pub(crate) fn published_notes(&self, s: &mut PluginSummary) {
        let published = self.published.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(s.source, Source::File(_)) {
            s.hides_published = published.serving.get(&s.name).map(|p| published_version(p));
        }
        s.registry_error = published.refused.get(&s.name).map(|(v, why)| format!("version {v}: {why}"));
    }
}

fn published_version(p: &Plugin) -> u32 {
    match p.source {
        Source::Published { version } => version,
        _ => 0,
    }
}

fn event(action: PluginAction, p: &Plugin, version: u32, message: String) -> PluginEvent {
    PluginEvent {
        action,
        plugin: p.name.clone(),
        kind: Some(p.kind),
        sha256: Some(p.sha256.clone()),
        source: format!("registry version {version}"),
        message,
    }
}
