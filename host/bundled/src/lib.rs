//! The bundled plugin components, built by this crate's `build.rs` and
//! embedded as bytes: the `gatehouse` binary carries them and hands them to the
//! plugin runtime at start (`gatehouse_plugin_host::PluginRuntime::start`),
//! which takes them as data.
//!
//! A crate of its own so that only the binary waits for the guests' nested
//! build: the host library compiles beside it, and a change to a plugin
//! rebuilds this crate and relinks the binary, not the host.

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/bundled.rs"));
}

/// (crate name, component bytes) of every component built into this binary;
/// the type is `gatehouse_plugin_host::Bundled`.
pub static BUNDLED: &[(&str, &[u8])] = embedded::BUNDLED;

#[cfg(test)]
mod tests {
    use super::BUNDLED;

    /// The request path's bundled guests are built for
    /// `wasm32-unknown-unknown` (host/bundled/build.rs): their components import
    /// their world's interfaces only, no WASI, so an instance is one core
    /// module. The retrievers, which read files and clocks, keep WASI.
    #[test]
    fn the_request_paths_bundled_components_import_no_wasi() {
        let engine = wasmtime::Engine::default();
        let mut checked = 0;
        for (name, bytes) in BUNDLED {
            let component = wasmtime::component::Component::new(&engine, bytes).expect("a bundled component compiles");
            let imports: Vec<String> = component.component_type().imports(&engine).map(|(n, _)| n.to_owned()).collect();
            if name.starts_with("retriever-") {
                assert!(imports.iter().any(|i| i.starts_with("wasi:")), "{name} keeps WASI: {imports:?}");
                continue;
            }
            assert!(imports.iter().all(|i| i.starts_with("gatehouse:plugin/")), "{name} imports more than its world: {imports:?}");
            checked += 1;
        }
        assert!(checked >= 8, "providers, shields and policies are bundled ({checked})");
    }
}
