//! The chat path: validate → limits → policy → shield → retrieval → model
//! chain (failover) → output checks → usage, receipt, events.

pub mod adapters;
pub mod admission;
pub mod attempt;
pub mod breaker;
pub mod chain;
pub mod config_texts;
pub mod cutoff;
pub mod deps;
pub mod format;
pub mod idempotency;
pub mod input;
pub mod openai;
pub mod pipeline;
pub mod policy_select;
pub mod providers;
pub mod request;
pub mod response;
pub mod retrieval;
pub mod screen;
pub mod security;
pub mod shield_mode;
pub mod sse;
pub mod stream;
pub mod transport;
pub mod types;
