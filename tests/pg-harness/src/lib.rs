//! A throwaway PostgreSQL for tests: `initdb` into a temporary
//! directory, `postgres` on a free loopback port, stopped and removed on drop.
//! Used by the store's conformance, fleet and TLS tests and by the black-box
//! fleet tests; a crate of its own so that both can (the store cannot depend
//! on the black-box tests' crate).
//!
//! The server binaries come from the machine's PostgreSQL packages (`.ci/run`
//! installs Debian's `postgresql` when they are missing): `initdb` and
//! `pg_ctl` on `PATH`, else the newest `/usr/lib/postgresql/<version>/bin`.
//! `initdb` refuses to run as root, and CI runs as root: then every server
//! command runs as `nobody` (through `runuser`), which owns the directory.
//! Connections are trusted from loopback only; the cluster holds nothing but
//! test data and lives as long as the test.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A running PostgreSQL cluster owned by a test.
pub struct TempPostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_nobody: bool,
    /// Server options beyond the harness's own.
    options: String,
}

impl TempPostgres {
    /// Create a cluster and start it; panics with the server's log when it
    /// cannot (a test that needs PostgreSQL cannot go on without it).
    pub fn start() -> TempPostgres {
        Self::start_with(|_| String::new())
    }

    /// [`TempPostgres::start`] with more server options, written by `extra`
    /// given the cluster's directory (e.g. TLS files placed there).
    pub fn start_with(extra: impl Fn(&Path) -> String) -> TempPostgres {
        let bin = server_bin_dir().unwrap_or_else(|| {
            panic!("PostgreSQL's initdb was not found on PATH or under /usr/lib/postgresql/*/bin: install the `postgresql` package (.ci/run does)")
        });
        let dir = tempfile::Builder::new().prefix("gatehouse-pg-").tempdir().expect("temp dir");
        let as_nobody = is_root();
        if as_nobody {
            // `nobody` must reach the directory: the temp root is world-traversable, the cluster's own folder is its.
            chown_nobody(dir.path());
        }
        let options = extra(dir.path());
        let mut pg = TempPostgres { dir, bin, port: 0, as_nobody, options };
        let data = pg.data_dir();
        let out = pg
            .command("initdb")
            .args(["--auth=trust", "--encoding=UTF8", "--locale=C", "--username=postgres", "-D"])
            .arg(&data)
            .output()
            .expect("run initdb");
        assert!(out.status.success(), "initdb failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        // A few tries: the free port is found by binding and releasing it.
        let mut last = String::new();
        for _ in 0..5 {
            pg.port = free_port();
            if pg.pg_ctl_start() {
                return pg;
            }
            last = pg.log();
        }
        panic!("PostgreSQL did not start; log:\n{last}");
    }

    /// The cluster's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A connection URL for a database of this cluster (`postgres` exists from the start).
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Create a database and return its URL: one per test keeps tests apart on one cluster.
    pub fn create_database(&self, name: &str) -> String {
        let out = self.psql("postgres", &format!("CREATE DATABASE \"{name}\""));
        assert!(out.status.success(), "CREATE DATABASE {name}: {}", String::from_utf8_lossy(&out.stderr));
        self.url(name)
    }

    /// Run one SQL command with `psql` (for tests that inspect or tamper with rows).
    pub fn psql(&self, database: &str, sql: &str) -> std::process::Output {
        self.command("psql")
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U", "postgres", "-p"])
            .arg(self.port.to_string())
            .args(["-d", database, "-c", sql])
            .output()
            .expect("run psql")
    }

    /// Stop the server (fast shutdown: sessions are ended, committed data kept).
    pub fn stop(&self) {
        let _ = self.command("pg_ctl").args(["stop", "-m", "fast", "-w", "-t", "30", "-D"]).arg(self.data_dir()).output();
    }

    /// Start it again on the same port, after [`TempPostgres::stop`].
    pub fn restart(&mut self) {
        assert!(self.pg_ctl_start(), "PostgreSQL did not start again; log:\n{}", self.log());
    }

    /// The server's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    /// The postmaster's process id (the first line of `postmaster.pid`), while
    /// the server runs: benchmarks add its tree's CPU time to the fleet's.
    pub fn server_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.data_dir().join("postmaster.pid")).ok()?.lines().next()?.trim().parse().ok()
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn pg_ctl_start(&self) -> bool {
        let opts = format!(
            "-c listen_addresses=127.0.0.1 -c port={} -c unix_socket_directories='{}' -c fsync=on -c max_connections=200 {}",
            self.port,
            self.dir.path().display(),
            self.options
        );
        let status = self
            .command("pg_ctl")
            .args(["start", "-w", "-t", "60", "-D"])
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.dir.path().join("postgres.log"))
            .arg("-o")
            .arg(opts)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run pg_ctl");
        if !status.success() {
            return false;
        }
        // `pg_ctl -w` waits for the socket; a first query proves it answers.
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.psql("postgres", "SELECT 1").status.success() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// A server program, run as `nobody` when this process is root.
    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        let program = if path.is_file() { path } else { PathBuf::from(program) };
        if self.as_nobody {
            let mut c = Command::new("runuser");
            c.args(["-u", "nobody", "--"]).arg(program);
            c.current_dir(self.dir.path());
            c
        } else {
            let mut c = Command::new(program);
            c.current_dir(self.dir.path());
            c
        }
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Where `initdb` and `pg_ctl` live.
fn server_bin_dir() -> Option<PathBuf> {
    if let Some(paths) = std::env::var_os("PATH") {
        for p in std::env::split_paths(&paths) {
            if p.join("initdb").is_file() && p.join("pg_ctl").is_file() {
                return Some(p);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin): &(u32, PathBuf)| bin.join("initdb").is_file())
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

/// Give a file or directory to the server's user when the server runs as `nobody`.
pub fn give_to_server(path: &Path) {
    if is_root() {
        chown_nobody(path);
    }
}

fn chown_nobody(dir: &Path) {
    let status = Command::new("chown").args(["nobody:nogroup"]).arg(dir).status().expect("run chown");
    assert!(status.success(), "chown nobody {}", dir.display());
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

#[cfg(test)]
mod tests {
    use super::TempPostgres;

    /// The harness itself: a cluster starts, answers, keeps a committed row
    /// across a restart on the same port, and is gone with its directory.
    #[test]
    fn a_throwaway_cluster_starts_keeps_committed_rows_across_a_restart_and_cleans_up() {
        let mut pg = TempPostgres::start();
        let url = pg.create_database("harness");
        assert!(url.ends_with("/harness") && url.contains(&pg.port().to_string()), "{url}");
        assert!(pg.psql("harness", "CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')").status.success());
        pg.stop();
        assert!(!pg.psql("harness", "SELECT 1").status.success(), "stopped means refused");
        pg.restart();
        let out = pg.psql("harness", "SELECT v FROM t");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "kept");
        let dir = pg.dir.path().to_path_buf();
        drop(pg);
        assert!(!dir.exists(), "the cluster's directory is removed");
    }
}
