//! Helpers shared by the store's integration tests.

#[allow(dead_code, reason = "each test file uses part of the harness")]
pub mod pg;
