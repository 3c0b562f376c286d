//! The linkers of the four worlds, built once per engine.

use super::*;

/// wasmtime's error as an anyhow error.
fn wt(e: wasmtime::Error) -> anyhow::Error {
    anyhow::anyhow!("{e:#}")
}

/// Linkers for the four worlds, built once per engine.
pub struct Linkers {
    pub(super) provider: wasmtime::component::Linker<CallState>,
    pub(super) shield: wasmtime::component::Linker<CallState>,
    pub(super) policy: wasmtime::component::Linker<CallState>,
    pub(super) retriever: wasmtime::component::Linker<CallState>,
}

impl Linkers {
    pub fn new(engine: &Engine) -> anyhow::Result<Self> {
        use wasmtime::component::{HasSelf, Linker};
        let base = || -> anyhow::Result<Linker<CallState>> {
            let mut l = Linker::new(engine);
            wasmtime_wasi::p2::add_to_linker_async(&mut l).map_err(wt)?;
            super::write_guard::add(&mut l).map_err(wt)?;
            Ok(l)
        };
        let mut provider = base()?;
        bindings::provider::Provider::add_to_linker::<CallState, HasSelf<CallState>>(&mut provider, |s| s).map_err(wt)?;
        let mut shield = base()?;
        bindings::shield::Shield::add_to_linker::<CallState, HasSelf<CallState>>(&mut shield, |s| s).map_err(wt)?;
        let mut policy = base()?;
        bindings::policy::Policy::add_to_linker::<CallState, HasSelf<CallState>>(&mut policy, |s| s).map_err(wt)?;
        let mut retriever = base()?;
        bindings::retriever::Retriever::add_to_linker::<CallState, HasSelf<CallState>>(&mut retriever, |s| s).map_err(wt)?;
        Ok(Linkers { provider, shield, policy, retriever })
    }
}
