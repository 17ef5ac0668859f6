//! The meta-plugins' memory on the node: the DaemonSet pod's cgroup and processes, and the
//! summed PSS of the plugin processes sampled during a burst.

use super::NODE;
use braid_integration::cluster::Cluster;
use braid_integration::metaplugin::Meta;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The memory cgroup (v1) of the meta-plugin's DaemonSet pod on the node, its container's
/// restart count and whether its last termination was an OOM kill.
pub(super) fn daemon_cgroup(c: &Cluster, meta: Meta) -> Option<(PathBuf, i64, bool)> {
    let sel = meta.pod_selector()?;
    let pods = c.get(&["pods", "-n", "kube-system", "-l", sel, "--field-selector", &format!("spec.nodeName={NODE}")]);
    let p = pods["items"].as_array()?.iter().find(|p| p["metadata"]["deletionTimestamp"].is_null())?;
    let uid = p["metadata"]["uid"].as_str()?.to_string();
    let restarts = p["status"]["containerStatuses"][0]["restartCount"].as_i64().unwrap_or(0);
    let oom = p["status"]["containerStatuses"][0]["lastState"]["terminated"]["reason"] == "OOMKilled";
    let base = Path::new("/sys/fs/cgroup/memory").join(node_cgroup(c));
    let out = std::process::Command::new("find")
        .arg(&base)
        .args(["-type", "d", "-name", &format!("pod{uid}")])
        .output()
        .ok()?;
    let dir = String::from_utf8_lossy(&out.stdout).lines().next()?.to_string();
    Some((PathBuf::from(dir), restarts, oom))
}

/// The processes of a cgroup and of the cgroups below it (the pod's containers).
pub(super) fn cgroup_pids(dir: &Path) -> Vec<u32> {
    let out = std::process::Command::new("find").arg(dir).args(["-name", "cgroup.procs"]).output();
    let mut pids = Vec::new();
    for f in String::from_utf8_lossy(&out.map(|o| o.stdout).unwrap_or_default()).lines() {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        pids.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// A `/proc/PID/status` number (`VmRSS:`, `VmHWM:` in kB; `PPid:`); 0 when the process is gone.
pub(super) fn status_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0)
}

/// node1's cgroup below each hierarchy (scripts/node.sh's `cgroup`).
fn node_cgroup(c: &Cluster) -> String {
    let b = c.dir().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let b: String = b.chars().map(|ch| if ch.is_ascii_alphanumeric() || ch == '-' { ch } else { '-' }).collect();
    format!("braid-{b}-node1")
}

/// Samples, for each of two groups of process names, the summed PSS of the processes of that
/// name in the node's network namespace every 20 ms until stopped; returns each group's peak in
/// MB. PSS divides each shared page among the processes mapping it, so the sum is what the
/// processes together hold — for every set-up alike (Multus's shims share their binary's pages
/// just as braid's delegators do).
pub(super) type Names = &'static [&'static str];
pub(super) fn sample_pss(
    net_ns: PathBuf,
    groups: [Names; 2],
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<[f64; 2]> {
    std::thread::spawn(move || {
        let ns = std::fs::metadata(&net_ns).map(|m| std::os::unix::fs::MetadataExt::ino(&m)).unwrap_or(0);
        let mut peak_kb = [0u64; 2];
        while !stop.load(Ordering::Relaxed) {
            let mut sum = [0u64; 2];
            if let Ok(dir) = std::fs::read_dir("/proc") {
                for e in dir.flatten() {
                    let p = e.path();
                    let Ok(comm) = std::fs::read_to_string(p.join("comm")) else { continue };
                    let Some(g) = groups.iter().position(|names| names.contains(&comm.trim())) else { continue };
                    let same = std::fs::metadata(p.join("ns/net")).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
                    if same.ok() != Some(ns) {
                        continue;
                    }
                    // A child between fork and exec still bears its parent's name and, cloned
                    // with CLONE_VM (Go's and posix_spawn's way), its parent's memory: counting
                    // it would count the parent twice.
                    let ppid = status_kb(e.file_name().to_string_lossy().parse().unwrap_or(0), "PPid:");
                    let parent = std::fs::read_to_string(format!("/proc/{ppid}/comm")).unwrap_or_default();
                    if parent.trim() == comm.trim() {
                        continue;
                    }
                    let rollup = std::fs::read_to_string(p.join("smaps_rollup")).unwrap_or_default();
                    sum[g] += rollup
                        .lines()
                        .find_map(|l| l.strip_prefix("Pss:"))
                        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                        .unwrap_or(0);
                }
            }
            for g in 0..2 {
                peak_kb[g] = peak_kb[g].max(sum[g]);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        peak_kb.map(|kb| kb as f64 / 1024.0)
    })
}
