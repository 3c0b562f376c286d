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
//! emit the component exports in wasm builds. A guest that needs no WASI may
//! instead be built for `wasm32-unknown-unknown` and made a component with
//! `wit-component` (the bundled request-path plugins are: `host/build.rs`);
//! there this crate also sets the allocator (`heap.rs`).
//!
//! Plugins also compile natively, so their logic is unit-tested with plain
//! `cargo test`; calls to host imports (logging) are only valid inside a
//! component.

#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
mod heap;

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

/// Helpers for reading JSON in guests.
pub mod json {
    use std::fmt;
    use std::marker::PhantomData;

    use serde::de::value::MapAccessDeserializer;
    use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

    /// `T` read from a JSON object only. A derived `Deserialize` also reads a
    /// struct from an array, positionally (`[5, 7]` as `{"a": 5, "b": 7}`);
    /// a typed reading that must give up on any shape but the expected one
    /// (and leave it to a `serde_json::Value` reading) wraps its structs in this.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Obj<T>(pub T);

    impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct ObjVisitor<T>(PhantomData<T>);
            impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjVisitor<T> {
                type Value = Obj<T>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                    T::deserialize(MapAccessDeserializer::new(map)).map(Obj)
                }
            }
            d.deserialize_map(ObjVisitor(PhantomData))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::Obj;

        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Pair {
            a: u32,
            b: Option<u32>,
        }

        #[test]
        fn objects_only() {
            let p: Obj<Pair> = serde_json::from_str(r#"{"b":7,"a":5,"c":[1]}"#).expect("object");
            assert_eq!(p.0, Pair { a: 5, b: Some(7) });
            // A plain derive reads the array positionally; Obj refuses it.
            assert_eq!(serde_json::from_str::<Pair>("[5,7]").expect("positional"), Pair { a: 5, b: Some(7) });
            for not_object in ["[5,7]", "5", "\"x\"", "null"] {
                assert!(serde_json::from_str::<Obj<Pair>>(not_object).is_err(), "{not_object}");
            }
            assert_eq!(serde_json::from_str::<Option<Obj<Pair>>>("null").expect("null"), None);
        }
    }
}
