//! The one folder a plugin may write: `[plugins.settings.<name>]
//! writable_cache = true` mounts `<plugins.plugin_cache_dir>/<name>/` read-write
//! at [`GUEST_PATH`]. A retriever keeps its passage vectors there, so a
//! restart or an unchanged document does not recompute them.
//!
//! The rules (docs/decisions/plugin-cache-folder.md):
//! - the host makes the folder (mode 0700); a plugin name that is not a
//!   plain file name, or a folder that is a link or not a folder, gets no
//!   grant (logged), so a component cannot point its grant elsewhere;
//! - no plugin can make a link (`symlink-at`, `link-at` are refused for
//!   every plugin: `plugin::write_guard`), and WASI's capability paths refuse
//!   `..` and absolute paths, so nothing the guest opens leads out of it;
//! - the folder's size (bytes of its files) and its entries (files and
//!   folders) are capped: the first write of a call measures the folder,
//!   every later byte the call adds (positional and stream writes, a file
//!   grown by `set-size` or by a write past its end) and every entry it
//!   creates is charged before it happens, and a charge past the cap fails
//!   the write (`insufficient-space`). The count is shared by every instance
//!   of the plugin; overwrites are charged as new bytes until the next
//!   measurement, so the count errs on the full side. The one way past the
//!   cap: a measurement taken while another instance of the same plugin has
//!   a write under way misses those bytes (at most that one write).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use wasmtime_wasi::p2::{DynOutputStream, OutputStream, Pollable, StreamError, StreamResult};

/// Where the folder appears inside the plugin.
pub const GUEST_PATH: &str = "/cache";
/// Most files and folders a cache folder may hold.
pub const MAX_ENTRIES: u64 = 1_000;
/// A walk stops after this many entries (a folder someone else filled): it is then full.
const WALK_LIMIT: u64 = 100_000;

/// A plugin's cache folder and what it holds (shared by all its instances).
pub struct CacheFolder {
    /// The folder on the host.
    pub host_path: PathBuf,
    /// Cap on the bytes of its files.
    pub limit_bytes: u64,
    usage: Mutex<Usage>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Usage {
    bytes: u64,
    entries: u64,
}

/// The same folder and cap is the same grant (a config reload that changes neither keeps it).
impl PartialEq for CacheFolder {
    fn eq(&self, other: &Self) -> bool {
        self.host_path == other.host_path && self.limit_bytes == other.limit_bytes
    }
}

impl std::fmt::Debug for CacheFolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheFolder").field("host_path", &self.host_path).field("limit_bytes", &self.limit_bytes).finish()
    }
}

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Full {
    pub message: String,
}

impl CacheFolder {
    /// Make (or reopen) `<root>/<plugin>` for `plugin`, capped at `limit_bytes`.
    pub fn prepare(root: &Path, plugin: &str, limit_bytes: u64) -> Result<Arc<CacheFolder>, String> {
        let plain = !plugin.is_empty() && !plugin.starts_with('.') && !plugin.contains(['/', '\\', '\0']);
        if !plain {
            return Err(format!("plugin name {plugin:?} is not a plain file name; no cache folder is granted"));
        }
        std::fs::create_dir_all(root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
        let path = root.join(plugin);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(_) => {
                return Err(format!("{} is not a folder (a link or a file); remove it to grant the cache folder", path.display()));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let mut b = std::fs::DirBuilder::new();
                #[cfg(unix)]
                std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
                b.create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            }
            Err(e) => return Err(format!("cannot look at {}: {e}", path.display())),
        }
        Ok(Arc::new(CacheFolder { host_path: path, limit_bytes, usage: Mutex::new(Usage::default()) }))
    }

    /// Measure the folder now: the count starts again from what is on disk.
    pub fn remeasure(&self) {
        let (bytes, entries) = measure(&self.host_path);
        *self.usage.lock().unwrap_or_else(|p| p.into_inner()) = Usage { bytes, entries };
    }

    /// Count `bytes` more bytes and `entries` more entries, or refuse if that passes a cap.
    pub fn charge(&self, bytes: u64, entries: u64) -> Result<(), Full> {
        let mut u = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        let b = u.bytes.saturating_add(bytes);
        let e = u.entries.saturating_add(entries);
        if b > self.limit_bytes {
            return Err(Full {
                message: format!(
                    "cache folder full: {b} bytes would pass its cap of {} (plugins.settings.<name>.cache_limit_mb)",
                    self.limit_bytes
                ),
            });
        }
        if e > MAX_ENTRIES {
            return Err(Full { message: format!("cache folder full: it may hold at most {MAX_ENTRIES} files and folders") });
        }
        *u = Usage { bytes: b, entries: e };
        Ok(())
    }

    /// Give back a charge whose operation failed.
    pub fn release(&self, bytes: u64, entries: u64) {
        let mut u = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        u.bytes = u.bytes.saturating_sub(bytes);
        u.entries = u.entries.saturating_sub(entries);
    }

    /// (bytes, entries) as counted now.
    pub fn usage(&self) -> (u64, u64) {
        let u = *self.usage.lock().unwrap_or_else(|p| p.into_inner());
        (u.bytes, u.entries)
    }
}

/// (bytes of the files, entries) under `dir`, links not followed (a link
/// counts as an entry of no bytes). A folder too big to walk counts as full.
pub fn measure(dir: &Path) -> (u64, u64) {
    let (mut bytes, mut entries) = (0u64, 0u64);
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let Ok(list) = std::fs::read_dir(&d) else { continue };
        for entry in list.flatten() {
            entries += 1;
            if entries > WALK_LIMIT {
                return (u64::MAX, u64::MAX);
            }
            let Ok(m) = std::fs::symlink_metadata(entry.path()) else { continue };
            if m.file_type().is_dir() {
                pending.push(entry.path());
            } else if m.file_type().is_file() {
                bytes = bytes.saturating_add(m.len());
            }
        }
    }
    (bytes, entries)
}

/// The error a refused stream write reports to the guest: "no space left on
/// device", which WASI turns into its `insufficient-space` error code (as a
/// refused positional write or file creation reports it).
pub fn full_error(full: &Full) -> io::Error {
    tracing::debug!("{}", full.message);
    #[cfg(unix)]
    {
        io::Error::from_raw_os_error(libc::ENOSPC)
    }
    #[cfg(not(unix))]
    {
        io::Error::new(io::ErrorKind::StorageFull, full.message.clone())
    }
}

/// A file's output stream whose every byte is charged to the cache folder
/// before it is handed on.
pub struct ChargedStream {
    pub inner: DynOutputStream,
    pub folder: Arc<CacheFolder>,
}

#[wasmtime_wasi::async_trait]
impl Pollable for ChargedStream {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for ChargedStream {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        if let Err(full) = self.folder.charge(bytes.len() as u64, 0) {
            return Err(StreamError::LastOperationFailed(wasmtime::Error::from(full_error(&full))));
        }
        let n = bytes.len() as u64;
        let r = self.inner.write(bytes);
        if r.is_err() {
            self.folder.release(n, 0);
        }
        r
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.inner.check_write()
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_is_made_under_the_root_and_only_for_a_plain_name() {
        let root = tempfile::tempdir().expect("tmp");
        let f = CacheFolder::prepare(root.path(), "retriever-local", 1024).expect("granted");
        assert_eq!(f.host_path, root.path().join("retriever-local"));
        assert!(f.host_path.is_dir());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&f.host_path).expect("stat").permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "only the server's user can read the cache");
        }
        // Reopened as it is (a restart): what it holds stays.
        std::fs::write(f.host_path.join("kb.vec"), b"1234").expect("write");
        let again = CacheFolder::prepare(root.path(), "retriever-local", 1024).expect("granted");
        again.remeasure();
        assert_eq!(again.usage(), (4, 1));
        for bad in ["", ".", "..", ".hidden", "a/b", "../escape", "a\\b"] {
            let err = CacheFolder::prepare(root.path(), bad, 1024).expect_err(bad);
            assert!(err.contains("not a plain file name"), "{bad}: {err}");
        }
        assert!(!root.path().parent().expect("parent").join("escape").exists());
    }

    #[cfg(unix)]
    #[test]
    fn a_link_in_place_of_the_folder_gets_no_grant() {
        let root = tempfile::tempdir().expect("tmp");
        let elsewhere = tempfile::tempdir().expect("tmp");
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join("retriever-local")).expect("symlink");
        let err = CacheFolder::prepare(root.path(), "retriever-local", 1024).expect_err("a link");
        assert!(err.contains("not a folder"), "{err}");
        std::fs::write(root.path().join("plain-file"), b"x").expect("write");
        assert!(CacheFolder::prepare(root.path(), "plain-file", 1024).is_err());
    }

    #[test]
    fn writes_past_the_cap_are_refused_and_a_measurement_gives_back_what_was_freed() {
        let root = tempfile::tempdir().expect("tmp");
        let f = CacheFolder::prepare(root.path(), "p", 100).expect("granted");
        f.remeasure();
        assert_eq!(f.usage(), (0, 0));
        f.charge(60, 1).expect("fits");
        f.charge(40, 0).expect("exactly the cap");
        let full = f.charge(1, 0).expect_err("one byte past the cap");
        assert!(full.message.contains("cap of 100"), "{}", full.message);
        assert_eq!(f.usage(), (100, 1), "a refused charge counts nothing");
        // A failed operation gives its charge back.
        f.release(40, 0);
        f.charge(40, 0).expect("room again");
        // What is on disk is what counts after a measurement (the guest removed its files).
        std::fs::write(f.host_path.join("a"), [0u8; 30]).expect("write");
        std::fs::create_dir(f.host_path.join("sub")).expect("mkdir");
        std::fs::write(f.host_path.join("sub/b"), [0u8; 20]).expect("write");
        f.remeasure();
        assert_eq!(f.usage(), (50, 3));
        assert!(f.charge(51, 0).is_err() && f.charge(50, 0).is_ok());
    }

    #[test]
    fn entries_are_capped_too() {
        let root = tempfile::tempdir().expect("tmp");
        let f = CacheFolder::prepare(root.path(), "p", u64::MAX).expect("granted");
        f.remeasure();
        f.charge(0, MAX_ENTRIES).expect("up to the cap");
        assert!(f.charge(0, 1).expect_err("one more").message.contains("files and folders"));
    }

    #[cfg(unix)]
    #[test]
    fn a_link_in_the_folder_is_not_followed_when_measuring() {
        let root = tempfile::tempdir().expect("tmp");
        let outside = tempfile::tempdir().expect("tmp");
        std::fs::write(outside.path().join("big"), vec![0u8; 10_000]).expect("write");
        let f = CacheFolder::prepare(root.path(), "p", 1000).expect("granted");
        std::os::unix::fs::symlink(outside.path(), f.host_path.join("link")).expect("symlink");
        assert_eq!(measure(&f.host_path), (0, 1));
    }

    /// An output stream that keeps what it is given.
    struct Sink(Arc<Mutex<Vec<u8>>>);

    #[wasmtime_wasi::async_trait]
    impl Pollable for Sink {
        async fn ready(&mut self) {}
    }

    #[wasmtime_wasi::async_trait]
    impl OutputStream for Sink {
        fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
            self.0.lock().expect("lock").extend_from_slice(&bytes);
            Ok(())
        }
        fn flush(&mut self) -> StreamResult<()> {
            Ok(())
        }
        fn check_write(&mut self) -> StreamResult<usize> {
            Ok(4096)
        }
    }

    #[test]
    fn a_charged_stream_stops_at_the_cap_and_hands_nothing_on_past_it() {
        let root = tempfile::tempdir().expect("tmp");
        let f = CacheFolder::prepare(root.path(), "p", 10).expect("granted");
        f.remeasure();
        let got = Arc::new(Mutex::new(Vec::new()));
        let mut s = ChargedStream { inner: Box::new(Sink(got.clone())), folder: f.clone() };
        s.write(bytes::Bytes::from_static(b"12345678")).expect("fits");
        match s.write(bytes::Bytes::from_static(b"abc")) {
            Err(StreamError::LastOperationFailed(e)) => {
                let io = e.downcast_ref::<io::Error>().expect("an I/O error the guest can read");
                #[cfg(unix)]
                assert_eq!(io.raw_os_error(), Some(libc::ENOSPC));
                #[cfg(not(unix))]
                let _ = io;
            }
            Err(other) => panic!("not a write error: {other:?}"),
            Ok(()) => panic!("a write past the cap went through"),
        }
        // Zeroes go through `write` too.
        assert!(s.write_zeroes(3).is_err());
        s.write_zeroes(2).expect("exactly the cap");
        assert_eq!(got.lock().expect("lock").len(), 10);
        assert_eq!(f.usage(), (10, 0));
    }
}
