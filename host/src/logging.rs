//! Structured logs with `tracing`; levels from `RUST_LOG` (default `info`).
//!
//! `RUST_LOG` takes a level (`debug`) and per-target levels
//! (`info,gatehouse=debug,hyper=warn`): `tracing_subscriber`'s `Targets`,
//! not its `EnvFilter`, whose span and field filters would bring a regular
//! expression engine into the first build for a syntax nobody here uses
//! (docs/decisions/build-profiles.md).

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::LogFormat;

pub fn init(format: LogFormat) {
    let (filter, refused) = filter(std::env::var("RUST_LOG").ok().as_deref());
    let registry = tracing_subscriber::registry().with(filter);
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => registry.with(layer).try_init(),
        LogFormat::Json => registry.with(layer.json()).try_init(),
    };
    if let Some(reason) = refused {
        tracing::warn!(%reason, "RUST_LOG is not understood; logging at info");
    }
}

/// The filter `RUST_LOG` asks for, or `info` and the reason it was refused.
fn filter(spec: Option<&str>) -> (Targets, Option<String>) {
    let default = || Targets::new().with_default(LevelFilter::INFO);
    match spec.map(str::trim).filter(|s| !s.is_empty()) {
        None => (default(), None),
        Some(spec) => match spec.parse::<Targets>() {
            Ok(targets) => (targets, None),
            Err(e) => (default(), Some(e.to_string())),
        },
    }
}

#[cfg(test)]
mod tests {
    use tracing::Level;

    use super::*;

    #[test]
    fn rust_log_sets_a_level_and_per_target_levels() {
        let (f, refused) = filter(Some("warn,gatehouse=debug"));
        assert!(refused.is_none());
        assert!(f.would_enable("gatehouse::chat", &Level::DEBUG));
        assert!(!f.would_enable("hyper::proto", &Level::INFO));
        assert!(f.would_enable("hyper::proto", &Level::WARN));
    }

    #[test]
    fn without_rust_log_or_with_one_not_understood_the_level_is_info() {
        for spec in [None, Some(""), Some("gatehouse=loud")] {
            let (f, refused) = filter(spec);
            assert!(f.would_enable("gatehouse", &Level::INFO), "{spec:?}");
            assert!(!f.would_enable("gatehouse", &Level::DEBUG), "{spec:?}");
            assert_eq!(refused.is_some(), spec == Some("gatehouse=loud"), "{spec:?}");
        }
    }
}
