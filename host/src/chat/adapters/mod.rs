//! Chat's adapters of the plugin runtime: its traits over loaded plugins
//! ([`plugins`]) and the knowledge bases served by retriever plugins
//! ([`knowledge`]). The dependency points from chat to the runtime only.

pub mod knowledge;
pub mod plugins;
