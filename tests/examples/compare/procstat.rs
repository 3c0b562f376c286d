//! What `/proc` says about a process and its descendants (nginx's workers,
//! LiteLLM's children): CPU time, resident memory and its high-water mark.

use std::collections::HashMap;

/// The process and every descendant, by scanning `/proc/*/stat` for parents.
pub fn tree(root: u32) -> Vec<u32> {
    let mut parent: HashMap<u32, u32> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            if let Some(stat) = stat_fields(pid)
                && let Some(pp) = stat.get(1).and_then(|s| s.parse().ok())
            {
                parent.insert(pid, pp);
            }
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parent.iter().filter(|(_, pp)| **pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

/// Fields of `/proc/PID/stat` after the command name: [0] state, [1] ppid, ... [11] utime, [12] stime.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux in practice).
pub fn clk_tck() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100)
}

/// utime + stime of the whole tree, in clock ticks.
pub fn cpu_ticks(root: u32) -> u64 {
    tree(root)
        .into_iter()
        .filter_map(stat_fields)
        .map(|f| f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0))
        .sum()
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix(field)).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()))
        .unwrap_or(0)
}

/// Resident memory of the tree (sum of `VmRSS`), KiB.
pub fn rss_kib(root: u32) -> u64 {
    tree(root).into_iter().map(|p| status_kib(p, "VmRSS:")).sum()
}

/// Peak resident memory of the tree (sum of each process's `VmHWM`), KiB.
pub fn hwm_kib(root: u32) -> u64 {
    tree(root).into_iter().map(|p| status_kib(p, "VmHWM:")).sum()
}
