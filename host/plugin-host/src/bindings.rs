//! One `bindgen!` module per world of `wit/gatehouse.wit`. Exports are
//! called with wasmtime's async entry points (driven by `plugin::drive`), so a
//! call runs on the calling thread with no thread hand-off; host imports are
//! plain functions.

/// The `provider` world.
pub mod provider {
    wasmtime::component::bindgen!({ world: "provider", path: "../../wit", exports: { default: async } });
}

/// The `shield` world.
pub mod shield {
    wasmtime::component::bindgen!({ world: "shield", path: "../../wit", exports: { default: async } });
}

/// The `policy` world.
pub mod policy {
    wasmtime::component::bindgen!({ world: "policy", path: "../../wit", exports: { default: async } });
}

/// The `retriever` world.
pub mod retriever {
    wasmtime::component::bindgen!({ world: "retriever", path: "../../wit", exports: { default: async } });
}
