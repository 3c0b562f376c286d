//! Gatehouse: an AI inference gateway whose extension points are WebAssembly
//! components. `ARCHITECTURE.md` draws the shape; the layers, from the top:
//! entry (`server`, `cli`, …) → `api` → `app` → `chat`, `webhooks` → `auth` →
//! the foundation (`error`, `time`, `config`, `metrics`, …), over the two
//! crates `gatehouse-plugin-host` and `gatehouse-store`. `host/tests/layers.rs`
//! keeps it so. The `gatehouse` binary is `host/cli` (package `gatehouse-cli`),
//! which passes in the bundled components of `host/bundled`.

pub mod api;
pub mod app;
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
pub mod plugin_audit;
pub mod plugin_registry;
pub mod reload;
pub mod request_id;
pub mod server;
pub mod shutdown;
pub mod time;
pub mod webhooks;
