//! Gatehouse: an AI inference gateway whose extension points are WebAssembly
//! components. See `DESIGN.md` for the shape; modules follow it top-down:
//! `api` calls `chat`, `auth`, `audit`; those call `plugins` and `store`.

pub mod api;
pub mod app;
pub mod auth;
pub mod bootstrap;
pub mod bundled;
pub mod chat;
pub mod cli;
pub mod config;
pub mod fuzzing;
pub mod logging;
pub mod metrics;
pub mod plugin_audit;
pub mod reload;
pub mod server;
pub mod webhooks;

// The store crate under the paths the host has always used (`crate::store`,
// `crate::audit`, `crate::receipts`).
pub use gatehouse_store as store;
pub use gatehouse_store::{audit, receipts};

// The plugin runtime crate under the path the host has always used (`crate::wasm`).
pub use gatehouse_plugin_host as wasm;
