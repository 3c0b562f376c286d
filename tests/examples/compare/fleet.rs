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
///
/// `keys` = 0: every request with the bootstrap admin key, as the other rows
/// (one key is the fleet limiter's worst case: its requests take turns on
/// that key's window rows). `keys` > 0: that many API keys are created, and
/// nginx (in front of one host too) gives each request one of them at random
/// (`split_clients` on the request id), so the row measures the fleet rather
/// than one key's rows.
pub fn gatehouse_pg(bin: &Path, mock_port: u16, hosts: usize, keys: usize) -> anyhow::Result<Target> {
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
    let secrets = if keys > 0 { create_keys(started[0].1, keys)? } else { Vec::new() };
    let mut target = if hosts == 1 && keys == 0 {
        let (child, port, startup, dir) = started.pop().context("no host")?;
        let log = dir.path().join("gatehouse.log");
        Target::gatehouse_at("Gatehouse on PostgreSQL", port, startup, log, child, dir)
    } else {
        let ports: Vec<u16> = started.iter().map(|h| h.1).collect();
        let (nginx, port, _, nginx_dir) = targets::start_nginx_with_keys(&ports, &secrets)?;
        let startup = started.iter().map(|h| h.2).max().unwrap_or_default();
        let log = nginx_dir.path().join("error.log");
        let name = match keys {
            0 => format!("{hosts} hosts on PostgreSQL behind nginx"),
            k => format!("{hosts} host(s) on PostgreSQL behind nginx, {k} keys"),
        };
        let mut t = Target::gatehouse_at(&name, port, startup, log, nginx, nginx_dir);
        for (i, (child, _, _, dir)) in started.into_iter().enumerate() {
            t.add_process(&format!("host {}", i + 1), child, true);
            t.keep(dir);
        }
        t
    };
    let front = if hosts == 1 && keys == 0 { "host" } else { "nginx" };
    if let Some(pid) = target.pid {
        target.parts.insert(0, (front.to_owned(), pid));
    }
    target.parts.push(("PostgreSQL".to_owned(), postmaster));
    target.keep(pg);
    Ok(target)
}

/// `n` API keys (one user each) made through the first host's admin API;
/// their secrets. On a thread of its own: the driver's runtime does not allow
/// blocking calls, and the targets start synchronously.
fn create_keys(port: u16, n: usize) -> anyhow::Result<Vec<String>> {
    std::thread::spawn(move || create_keys_blocking(port, n)).join().map_err(|_| anyhow::anyhow!("creating the keys panicked"))?
}

fn create_keys_blocking(port: u16, n: usize) -> anyhow::Result<Vec<String>> {
    let client = reqwest::blocking::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let post = |path: &str, body: serde_json::Value| -> anyhow::Result<serde_json::Value> {
        let r = client.post(format!("{base}{path}")).bearer_auth(targets::GATEHOUSE_KEY).json(&body).send()?;
        let status = r.status();
        let v: serde_json::Value = r.json()?;
        anyhow::ensure!(status.is_success(), "POST {path}: HTTP {status}: {v}");
        Ok(v)
    };
    (0..n)
        .map(|i| {
            let user =
                post("/api/admin/users", serde_json::json!({"name": format!("bench {i}"), "email": format!("bench{i}@example.com")}))?;
            let user_id = user["data"]["id"].as_str().context("no user id")?.to_owned();
            let key = post("/api/admin/keys", serde_json::json!({"name": format!("bench {i}"), "userId": user_id}))?;
            Ok(key["data"]["key"].as_str().context("no key secret")?.to_owned())
        })
        .collect()
}
