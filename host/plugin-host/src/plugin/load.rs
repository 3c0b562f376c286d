//! Loading a component: its world, the link check, the `info()` probe.

use super::*;

/// The world a component implements, from its versioned exports.
fn detect_kind(engine: &Engine, component: &Component) -> Result<Kind, String> {
    let ty = component.component_type();
    let mut found = None;
    let mut seen = Vec::new();
    for (name, _) in ty.exports(engine) {
        seen.push(name.to_owned());
        let Some(rest) = name.strip_prefix("gatehouse:plugin/") else { continue };
        let Some((iface, version)) = rest.split_once('@') else { continue };
        let kind = match iface {
            "provider-api" => Kind::Provider,
            "shield-api" => Kind::Shield,
            "policy-api" => Kind::Policy,
            "retriever-api" => Kind::Retriever,
            _ => continue,
        };
        if !version.starts_with("0.1.") {
            return Err(format!(
                "exports {name}, an incompatible version of the Gatehouse WIT (this host supports gatehouse:plugin@0.1.x)"
            ));
        }
        found = Some(kind);
    }
    found.ok_or_else(|| {
        format!(
            "implements no Gatehouse world (exports: {}); build it against wit/gatehouse.wit",
            if seen.is_empty() { "none".into() } else { seen.join(", ") }
        )
    })
}

/// Compile-checked pieces of a component, before its `info()` is called.
pub fn load(
    engine: &Engine,
    linkers: &Linkers,
    bytes: &[u8],
    source: Source,
    grants_for: impl Fn(&str) -> Arc<Grants>,
) -> Result<Plugin, String> {
    // Checked first so the error never quotes the bytes of a file that is not WebAssembly at all.
    if !bytes.starts_with(b"\0asm") {
        return Err("not a valid WebAssembly component: it does not start with the WebAssembly header (\\0asm)".into());
    }
    let component = Component::new(engine, bytes).map_err(|e| format!("not a valid WebAssembly component: {e:#}"))?;
    let kind = detect_kind(engine, &component)?;
    let link_err = |e: wasmtime::Error| format!("cannot be linked (it imports something the host does not grant): {e:#}");
    let pre = match kind {
        Kind::Provider => Pre::Provider(
            bindings::provider::ProviderPre::new(linkers.provider.instantiate_pre(&component).map_err(link_err)?)
                .map_err(|e| format!("does not match the provider world: {e:#}"))?,
        ),
        Kind::Shield => Pre::Shield(
            bindings::shield::ShieldPre::new(linkers.shield.instantiate_pre(&component).map_err(link_err)?)
                .map_err(|e| format!("does not match the shield world: {e:#}"))?,
        ),
        Kind::Policy => Pre::Policy(
            bindings::policy::PolicyPre::new(linkers.policy.instantiate_pre(&component).map_err(link_err)?)
                .map_err(|e| format!("does not match the policy world: {e:#}"))?,
        ),
        Kind::Retriever => Pre::Retriever(
            bindings::retriever::RetrieverPre::new(linkers.retriever.instantiate_pre(&component).map_err(link_err)?)
                .map_err(|e| format!("does not match the retriever world: {e:#}"))?,
        ),
    };
    let sha256 = crate::sha256_hex(bytes);
    // info() runs under default grants; the plugin's own grants apply once its name is known.
    let probe_grants = grants_for("");
    let mut plugin = Plugin {
        name: String::from("(loading)"),
        kind,
        version: String::new(),
        description: String::new(),
        sha256,
        size: bytes.len(),
        source,
        loaded_at: Utc::now(),
        stats: Stats::default(),
        engine: engine.clone(),
        pre,
        grants: ArcSwap::new(probe_grants),
        call_metric: None,
    };
    let (name, version, description, info_kind) = plugin.info().map_err(|e| format!("info() failed: {e}"))?;
    if info_kind != kind {
        return Err(format!("info() says it is a {} plugin but it implements the {} world", info_kind.as_str(), kind.as_str()));
    }
    if name.is_empty() || name.len() > 100 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.') {
        return Err(format!("info() gave an invalid name {name:?} (use letters, digits, - _ .)"));
    }
    plugin.grants = ArcSwap::new(grants_for(&name));
    crate::engine::note_code(&component, &name);
    plugin.call_metric = Some(crate::metrics::get().call_histogram(&name));
    plugin.name = name;
    plugin.version = version;
    plugin.description = description;
    Ok(plugin)
}

impl Plugin {
    /// Call `info()`: (name, version, description, kind).
    fn info(&self) -> Result<(String, String, String, Kind), PluginError> {
        macro_rules! info_of {
            ($pre:expr, $iface:ident, $world:ident) => {{
                let i = self.fresh_call(async |s| $pre.instantiate_async(s).await, async |s, i| i.$iface().call_info(s).await)?;
                use bindings::$world::gatehouse::plugin::types::PluginKind as K;
                let k = match i.kind {
                    K::Provider => Kind::Provider,
                    K::Shield => Kind::Shield,
                    K::Policy => Kind::Policy,
                    K::Retriever => Kind::Retriever,
                };
                (i.name, i.version, i.description, k)
            }};
        }
        Ok(match &self.pre {
            Pre::Provider(p) => info_of!(p, gatehouse_plugin_provider_api, provider),
            Pre::Shield(p) => info_of!(p, gatehouse_plugin_shield_api, shield),
            Pre::Policy(p) => info_of!(p, gatehouse_plugin_policy_api, policy),
            Pre::Retriever(p) => info_of!(p, gatehouse_plugin_retriever_api, retriever),
        })
    }
}
