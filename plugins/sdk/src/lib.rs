//! Guest SDK for Gatehouse plugins.
//!
//! Each plugin kind (world) has a module generated from `wit/gatehouse.wit`,
//! a prelude and an export macro. A security policy, for example, is:
//!
//! ```
//! use gatehouse_sdk::policy::prelude::*;
//!
//! struct NoSecrets;
//!
//! impl Guest for NoSecrets {
//!     fn info() -> PluginInfo {
//!         plugin_info("no-secrets", "0.1.0", "refuses requests about the launch")
//!     }
//!
//!     fn evaluate(ctx: PolicyContext) -> PolicyDecision {
//!         if ctx.mentions_any(["launch date"]) {
//!             return deny("no-secrets: the launch date is not discussed here");
//!         }
//!         allow().pii(DataAction::Redact).restore_pii(true)
//!     }
//! }
//!
//! export_policy!(NoSecrets);
//! # let d = NoSecrets::evaluate(gatehouse_sdk::policy::testing::context("the LAUNCH DATE?"));
//! # assert!(!d.allow);
//! ```
//!
//! Guest crates use `crate-type = ["cdylib", "rlib"]` and build with
//! `cargo build --target wasm32-wasip2 --release`; the export macros only
//! emit the component exports in wasm builds. A guest that needs no WASI may
//! instead be built for `wasm32-unknown-unknown` and made a component with
//! `wit-component` (the bundled request-path plugins are: `host/bundled/build.rs`);
//! there this crate also sets the allocator (`heap.rs`).
//!
//! Plugins also compile natively, so their logic is unit-tested with plain
//! `cargo test`; calls to host imports (logging) are only valid inside a
//! component.

// The only unsafe code of the guest side: the allocator hands raw memory to
// `talc`. Each block carries its SAFETY argument; everything else in the SDK
// and the plugins stays under the workspace's `unsafe_code = "deny"`.
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
#[allow(unsafe_code)]
mod heap;

/// Bindings of the `provider` world, the helpers every provider adapter
/// needs ([`provider::errors`]) and their test helpers ([`provider::testing`]).
/// A provider starts with `use gatehouse_sdk::provider::prelude::*;`.
pub mod provider {
    wit_bindgen::generate!({
        world: "provider",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_provider",
        default_bindings_module: "gatehouse_sdk::provider",
    });

    pub mod errors;
    pub mod testing;

    pub use exports::gatehouse::plugin::provider_api::{
        ChatRequest, Completion, ErrorClass, Guest, ProviderError, StreamEvent, StreamOutput, Upstream, Usage,
    };
    pub use gatehouse::plugin::types::{Header, HttpRequest, Message, PluginInfo, PluginKind, Role};

    /// This plugin's [`PluginInfo`], of kind provider.
    pub fn plugin_info(name: &str, version: &str, description: &str) -> PluginInfo {
        PluginInfo { name: name.into(), version: version.into(), kind: PluginKind::Provider, description: description.into() }
    }

    /// What a provider adapter uses: `use gatehouse_sdk::provider::prelude::*;`.
    pub mod prelude {
        pub use super::errors::{adapter_fault, bad_request, class_of_status, malformed, scrub};
        pub use super::{
            ChatRequest, Completion, ErrorClass, Guest, Header, HttpRequest, Message, PluginInfo, PluginKind, ProviderError, Role,
            StreamEvent, StreamOutput, Upstream, Usage, plugin_info,
        };
        pub use crate::export_provider;
    }
}

/// Bindings of the `shield` world. A shield starts with
/// `use gatehouse_sdk::shield::prelude::*;`.
pub mod shield {
    wit_bindgen::generate!({
        world: "shield",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_shield",
        default_bindings_module: "gatehouse_sdk::shield",
    });

    pub use exports::gatehouse::plugin::shield_api::{Action, Canary, Guest, InspectRequest, Redaction, Stage, Strictness, Verdict};
    pub use gatehouse::plugin::types::{Message, PluginInfo, PluginKind, Role};

    /// This plugin's [`PluginInfo`], of kind shield.
    pub fn plugin_info(name: &str, version: &str, description: &str) -> PluginInfo {
        PluginInfo { name: name.into(), version: version.into(), kind: PluginKind::Shield, description: description.into() }
    }

    /// What a shield (Prompt Shield, PII, DLP) uses: `use gatehouse_sdk::shield::prelude::*;`.
    pub mod prelude {
        pub use super::{
            Action, Canary, Guest, InspectRequest, Message, PluginInfo, PluginKind, Redaction, Role, Stage, Strictness, Verdict,
            plugin_info,
        };
        pub use crate::export_shield;
    }
}

/// Bindings of the `policy` world, the decision builders ([`policy::allow`],
/// [`policy::deny`]), the built-in policies' [`policy::Profile`] and test
/// helpers ([`policy::testing`]). A policy starts with
/// `use gatehouse_sdk::policy::prelude::*;`.
pub mod policy {
    wit_bindgen::generate!({
        world: "policy",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_policy",
        default_bindings_module: "gatehouse_sdk::policy",
        // So a policy's tests can compare whole decisions.
        additional_derives: [PartialEq],
    });

    mod context;
    mod decision;
    mod profile;
    pub mod testing;

    pub use decision::{ShieldMode, allow, deny};
    pub use exports::gatehouse::plugin::policy_api::{DataAction, Guest, PolicyContext, PolicyDecision};
    pub use gatehouse::plugin::types::{Message, PluginInfo, PluginKind, Role};
    pub use profile::Profile;

    /// This plugin's [`PluginInfo`], of kind policy.
    pub fn plugin_info(name: &str, version: &str, description: &str) -> PluginInfo {
        PluginInfo { name: name.into(), version: version.into(), kind: PluginKind::Policy, description: description.into() }
    }

    /// What a policy uses: `use gatehouse_sdk::policy::prelude::*;`.
    pub mod prelude {
        pub use super::{
            DataAction, Guest, Message, PluginInfo, PluginKind, PolicyContext, PolicyDecision, Profile, Role, ShieldMode, allow, deny,
            plugin_info,
        };
        pub use crate::{builtin_policy, export_policy};
    }
}

/// Bindings of the `retriever` world. A retriever starts with
/// `use gatehouse_sdk::retriever::prelude::*;`.
pub mod retriever {
    wit_bindgen::generate!({
        world: "retriever",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_retriever",
        default_bindings_module: "gatehouse_sdk::retriever",
    });

    pub use exports::gatehouse::plugin::retriever_api::{Document, Guest, RetrieveRequest};
    pub use gatehouse::plugin::types::{Header, HttpRequest, HttpResponse, PluginInfo, PluginKind};

    /// This plugin's [`PluginInfo`], of kind retriever.
    pub fn plugin_info(name: &str, version: &str, description: &str) -> PluginInfo {
        PluginInfo { name: name.into(), version: version.into(), kind: PluginKind::Retriever, description: description.into() }
    }

    /// What a retriever uses: `use gatehouse_sdk::retriever::prelude::*;`.
    pub mod prelude {
        pub use super::{Document, Guest, Header, HttpRequest, HttpResponse, PluginInfo, PluginKind, RetrieveRequest, plugin_info};
        pub use crate::export_retriever;
    }
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
