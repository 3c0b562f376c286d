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

/// Hand the pages freed during start-up back to the system once the server
/// answers. Start-up builds and drops a lot (compiling or loading every
/// plugin, the OpenAPI document, the config), and jemalloc keeps freed pages
/// for `dirty_decay_ms` (10 s) before returning them; an idle host would hold
/// ~8 MiB of that garbage. Under load the allocator reuses pages as before:
/// this runs once, never on the request path.
#[cfg(feature = "jemalloc")]
fn return_startup_garbage() {
    // `MALLCTL_ARENAS_ALL`: every arena.
    const PURGE_ALL: &[u8] = b"arena.4096.purge\0";
    // SAFETY: `arena.<i>.purge` is a void control: it reads and writes no
    // value, so it is called with null pointers and zero length, as jemalloc's
    // manual requires; the name is a NUL-terminated byte string.
    #[allow(unsafe_code)]
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(PURGE_ALL.as_ptr().cast(), std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), 0)
    };
    if rc != 0 {
        eprintln!("warning: returning start-up memory to the system failed (jemalloc error {rc})");
    }
    trim_c_heap();
}

#[cfg(not(feature = "jemalloc"))]
fn return_startup_garbage() {
    trim_c_heap();
}

/// The C code linked in allocates from glibc's malloc whatever the global
/// allocator: wasmtime's compiled-code cache decompresses every cached plugin
/// with zstd at start-up, and glibc keeps the ~2.5 MiB it freed in its heap
/// for good (its automatic trim only gives back the top of the heap). One
/// `malloc_trim` after start-up returns those pages.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_c_heap() {
    // SAFETY: `malloc_trim` only walks glibc's own arenas under their locks
    // and returns the free pages it finds; it takes no pointer and is
    // thread-safe.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_c_heap() {}

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
                gatehouse::server::run_then(config, c.config.clone(), gatehouse_bundled::BUNDLED, return_startup_garbage).await.map(|()| 0)
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
