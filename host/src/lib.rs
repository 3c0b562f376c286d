//! Gatehouse: an AI inference gateway whose extension points are WebAssembly
//! components. See `DESIGN.md` for the shape; modules follow it top-down:
//! `api` calls `chat`, `auth`, `audit`; those call `plugins` and `store`.

pub mod api;
pub mod app;
pub mod auth;
pub mod bootstrap;
pub mod chat;
pub mod cli;
pub mod config;
pub mod fuzzing;
pub mod logging;
pub mod metrics;
pub mod reload;
pub mod server;
pub mod wasm;
pub mod webhooks;

// The store crate under the paths the host has always used (`crate::store`,
// `crate::audit`, `crate::receipts`).
pub use gatehouse_store as store;
pub use gatehouse_store::{audit, receipts};
