//! Guest SDK for Gatehouse plugins.
//!
//! Each plugin kind has a module generated from `wit/gatehouse.wit` and an
//! export macro. A provider adapter, for example, is:
//!
//! ```ignore
//! use gatehouse_sdk::provider::exports::gatehouse::plugin::provider_api as api;
//! struct MyProvider;
//! impl api::Guest for MyProvider { /* ... */ }
//! gatehouse_sdk::export_provider!(MyProvider);
//! ```
//!
//! Guest crates use `crate-type = ["cdylib", "rlib"]` and build with
//! `cargo build --target wasm32-wasip2 --release`; the export macros only
//! emit the component exports in wasm builds.
//!
//! Plugins also compile natively, so their logic is unit-tested with plain
//! `cargo test`; calls to host imports (logging) are only valid inside a
//! component.

/// Bindings of the `provider` world.
pub mod provider {
    wit_bindgen::generate!({
        world: "provider",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_provider",
        default_bindings_module: "gatehouse_sdk::provider",
    });
}

/// Bindings of the `shield` world.
pub mod shield {
    wit_bindgen::generate!({
        world: "shield",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_shield",
        default_bindings_module: "gatehouse_sdk::shield",
    });
}

/// Bindings of the `policy` world.
pub mod policy {
    wit_bindgen::generate!({
        world: "policy",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_policy",
        default_bindings_module: "gatehouse_sdk::policy",
    });
}

/// Bindings of the `retriever` world.
pub mod retriever {
    wit_bindgen::generate!({
        world: "retriever",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_retriever",
        default_bindings_module: "gatehouse_sdk::retriever",
    });
}

/// Export a provider adapter: `gatehouse_sdk::export_provider!(MyProvider);`.
/// The component exports exist only in wasm builds, so the crate also links
/// natively for its tests; natively the macro keeps the implementation "used".
#[macro_export]
macro_rules! export_provider {
    ($t:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::provider::export_provider!($t);
        #[cfg(not(target_arch = "wasm32"))]
        #[doc(hidden)]
        pub fn __gatehouse_native_exports() {
            use $crate::provider::exports::gatehouse::plugin::provider_api::Guest as _G;
            let _ = (<$t as _G>::info, <$t as _G>::build_request, <$t as _G>::parse_response, <$t as _G>::parse_stream_event);
        }
    };
}

/// Export a shield (Prompt Shield, PII, DLP) component.
#[macro_export]
macro_rules! export_shield {
    ($t:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::shield::export_shield!($t);
        #[cfg(not(target_arch = "wasm32"))]
        #[doc(hidden)]
        pub fn __gatehouse_native_exports() {
            use $crate::shield::exports::gatehouse::plugin::shield_api::Guest as _G;
            let _ = (<$t as _G>::info, <$t as _G>::inspect, <$t as _G>::make_canary);
        }
    };
}

/// Export a security policy component.
#[macro_export]
macro_rules! export_policy {
    ($t:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::policy::export_policy!($t);
        #[cfg(not(target_arch = "wasm32"))]
        #[doc(hidden)]
        pub fn __gatehouse_native_exports() {
            use $crate::policy::exports::gatehouse::plugin::policy_api::Guest as _G;
            let _ = (<$t as _G>::info, <$t as _G>::evaluate);
        }
    };
}

/// Export a retriever component.
#[macro_export]
macro_rules! export_retriever {
    ($t:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::retriever::export_retriever!($t);
        #[cfg(not(target_arch = "wasm32"))]
        #[doc(hidden)]
        pub fn __gatehouse_native_exports() {
            use $crate::retriever::exports::gatehouse::plugin::retriever_api::Guest as _G;
            let _ = (<$t as _G>::info, <$t as _G>::retrieve);
        }
    };
}
