//! HTTP surface: the route table, every handler, the extractors.

pub mod admin;
pub mod audit_logs;
pub mod chat;
pub mod console;
pub mod discovery;
pub mod group_list;
pub mod health;
pub mod intake;
pub mod json;
pub mod list_params;
pub mod metrics;
pub mod middleware;
pub mod openapi;
pub mod receipts;
pub mod routes;
pub mod schema;
pub mod webhooks;
