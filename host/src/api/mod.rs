//! HTTP surface: the route table, error formats, extractors.

pub mod admin;
pub mod discovery;
pub mod error;
pub mod health;
pub mod intake;
pub mod json;
pub mod lists;
pub mod openapi;
pub mod receipts;
pub mod request_id;
pub mod routes;
pub mod schema;
pub mod time;
