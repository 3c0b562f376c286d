//! Gatehouse on PostgreSQL: one host, and three hosts behind nginx, against
//! one throwaway PostgreSQL (`gatehouse_tests::TempPostgres`), each host with
//! the benchmark's full pipeline. Everything under test runs on core 1 — the
//! hosts, nginx and the database — so the rows compare what a request costs
//! in CPU, not how a fleet scales (two cores cannot show that).

use std::path::Path;
use std::process::Command;

use anyhow::Context;

use crate::procstat;
use crate::targets::{self, Target};

/// `hosts` Gatehouse processes sharing one new database; with more than one,
/// nginx balances over them and the row's address is nginx's. The row's CPU
/// is the sum over every process (nginx, each host, PostgreSQL's backends),
/// and each is also shown on its own.
pub fn gatehouse_pg(bin: &Path, mock_port: u16, hosts: usize) -> anyhow::Result<Target> {
    let pg = gatehouse_tests::TempPostgres::start();
    let url = pg.create_database("bench");
    let postmaster = pg.server_pid().context("PostgreSQL's postmaster.pid is unreadable")?;
    // Its backends are forked later and inherit the postmaster's affinity.
    for pid in procstat::tree(postmaster) {
        let _ = Command::new("taskset").args(["-a", "-p", "-c", "1", &pid.to_string()]).output();
    }
    let env = [("GATEHOUSE_DATABASE_URL", url.as_str())];
    let mut started = Vec::new();
    // The first host alone: it applies the migrations and the bootstrap key.
    for i in 0..hosts {
        let dir = tempfile::Builder::new().prefix("bench-gatehouse-pg-").tempdir()?;
        let port = targets::free_port()?;
        let conf = format!(
            "{}\n[store]\nbackend = \"postgres\"\nurl_env = \"GATEHOUSE_DATABASE_URL\"\n",
            targets::gatehouse_config(port, mock_port, &dir.path().join("data"), true)
        );
        let (child, startup) = targets::start_gatehouse(bin, dir.path(), &conf, &env).with_context(|| format!("host {}", i + 1))?;
        started.push((child, port, startup, dir));
    }
    let mut target = if hosts == 1 {
        let (child, port, startup, dir) = started.pop().context("no host")?;
        let log = dir.path().join("gatehouse.log");
        Target::gatehouse_at("Gatehouse on PostgreSQL", port, startup, log, child, dir)
    } else {
        let ports: Vec<u16> = started.iter().map(|h| h.1).collect();
        let (nginx, port, _, nginx_dir) = targets::start_nginx(&ports)?;
        let startup = started.iter().map(|h| h.2).max().unwrap_or_default();
        let log = nginx_dir.path().join("error.log");
        let mut t = Target::gatehouse_at(&format!("{hosts} hosts on PostgreSQL behind nginx"), port, startup, log, nginx, nginx_dir);
        for (i, (child, _, _, dir)) in started.into_iter().enumerate() {
            t.add_process(&format!("host {}", i + 1), child, true);
            t.keep(dir);
        }
        t
    };
    let front = if hosts == 1 { "host" } else { "nginx" };
    if let Some(pid) = target.pid {
        target.parts.insert(0, (front.to_owned(), pid));
    }
    target.parts.push(("PostgreSQL".to_owned(), postmaster));
    target.keep(pg);
    Ok(target)
}
