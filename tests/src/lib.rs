//! Black-box test support: start the real `gatehouse` binary on a free port
//! with a temporary data dir, talk to it over loopback HTTP, kill and restart it.

pub mod kill_loop;
pub mod mock_upstream;
pub mod plugins;
pub mod procfs;
pub mod raw_http;
pub mod server;
pub mod soak;
pub mod sse;
pub mod webdriver;
pub mod windows;

pub use gatehouse_pg_harness::TempPostgres;
pub use server::{Server, ServerBuilder};
