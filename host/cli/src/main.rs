//! The `gatehouse` binary: parses the command line, starts the async runtime
//! and runs the server or an offline command of the `gatehouse` library with
//! the components of `gatehouse-bundled`, or one of the plugin authoring
//! commands ([`author`]).

mod author;

use clap::Parser;

use gatehouse::cli::{Cli, Command, PluginAction};
use gatehouse::config::{Config, LogFormat};

/// jemalloc instead of glibc's malloc: the request path allocates many small,
/// short-lived objects across threads, where glibc spent ~14 % of the server's
/// CPU (docs/benchmarks.md#allocator). A cargo feature, on in production
/// builds (`--features jemalloc`) and in the test suite.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve(c) => {
                let config = Config::load(c.config.as_deref())?;
                gatehouse::logging::init(config.log.format);
                gatehouse::server::run(config, c.config.clone(), gatehouse_bundled::BUNDLED).await.map(|()| 0)
            }
            // No log subscriber: these commands print what the author needs (a failed call's
            // error included) themselves, so the plugin host's warnings would say it twice.
            Command::Plugin { action } if !matches!(action, PluginAction::Publish { .. }) => author::run(action).await,
            other => {
                gatehouse::logging::init(LogFormat::Text);
                gatehouse::cli::run_offline(other, gatehouse_bundled::BUNDLED).await
            }
        }
    });
    match result {
        Ok(0) => std::process::ExitCode::SUCCESS,
        Ok(code) => std::process::ExitCode::from(code.clamp(1, 255) as u8),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
