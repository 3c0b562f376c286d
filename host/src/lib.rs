//! Gatehouse: an AI inference gateway whose extension points are WebAssembly
//! components. See `ARCHITECTURE.md` for the shape; modules follow it top-down:
//! `api` calls `chat`, `auth`, `audit`; those call `plugins` and `store`.

pub mod api;
pub mod app;
pub mod audit;
pub mod auth;
pub mod bootstrap;
pub mod chat;
pub mod cli;
pub mod config;
pub mod error;
pub mod fuzzing;
pub mod logging;
pub mod metrics;
pub mod net;
pub mod receipts;
pub mod reload;
pub mod request_id;
pub mod server;
pub mod store;
pub mod time;
pub mod wasm;
pub mod webhooks;
