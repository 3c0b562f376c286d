//! HTTP surface: the route table, every handler, the extractors.

pub mod admin;
pub mod chat;
pub mod discovery;
pub mod health;
pub mod intake;
pub mod json;
pub mod lists;
pub mod metrics;
pub mod middleware;
pub mod openapi;
pub mod receipts;
pub mod routes;
pub mod schema;
pub mod webhooks;
