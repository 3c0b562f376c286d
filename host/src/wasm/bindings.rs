//! One `bindgen!` module per world of `wit/gatehouse.wit`.

/// The `provider` world.
pub mod provider {
    wasmtime::component::bindgen!({ world: "provider", path: "../wit" });
}

/// The `shield` world.
pub mod shield {
    wasmtime::component::bindgen!({ world: "shield", path: "../wit" });
}

/// The `policy` world.
pub mod policy {
    wasmtime::component::bindgen!({ world: "policy", path: "../wit" });
}

/// The `retriever` world.
pub mod retriever {
    wasmtime::component::bindgen!({ world: "retriever", path: "../wit" });
}
