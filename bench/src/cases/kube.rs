//! The node agent's API side (`braid-install --kubernetes-api`) on the real path: braid's agent
//! as its DaemonSet runs it on node1 of the run's real cluster ([`super::real_node`]), with
//! the token the kubelet gave it, publishing to the real kube-apiserver. From a network-status
//! file written into the node's status directory (as the delegator writes it: a temporary name,
//! then a rename, with the pod's UID) to the API server's completion of the agent's merge patch
//! of the pod (its audit log's `ResponseComplete` stage) — the agent's inotify wake-up, its
//! request over TLS, the API server's authentication, RBAC, the admission policy braid ships
//! and the etcd write. Both ends are clocks of this machine, read after the fact: no polling
//! delay is in the figure.
//!
//! This replaced a measurement against a kube-apiserver stand-in on loopback, which gave
//! braid's side alone: the figure now carries the API server's part too, as every operator's
//! does. The pods are `hostNetwork` pods bound to node1 (run by its kubelet, no CNI ADD), so the
//! files the bench writes are the only ones the agent publishes for them. Pod creation →
//! network-status with the sandbox's ADD included is the node case's (`scripts/bench.sh
//! --node`, braid beside Multus).

use super::real_node::{epoch, AuditTail};
use super::World;
use crate::stats::{Estimate, Sample, ALPHA};
use crate::verdict::{Limit, Verdict};
use braid_integration::cluster::{pod, Cluster};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The pods the files go round (each file replaces its pod's previous one).
const PODS: usize = 8;
/// The bench's namespace on the cluster.
const NS: &str = "bench-kube";
const NODE: &str = "node1";
/// Who braid's agent is to the API server.
const AGENT: &str = "system:serviceaccount:kube-system:braid";

/// The node's status directory (`/run/braid/network-status` in node1's mount namespace, a
/// tmpfs of its own), reached from here through its kubelet's root.
fn status_dir(c: &Cluster) -> Result<PathBuf, String> {
    let pid = std::fs::read_to_string(c.dir().join(format!("pids/kubelet-{NODE}"))).map_err(|e| e.to_string())?;
    Ok(PathBuf::from(format!("/proc/{}/root/run/braid/network-status", pid.trim())))
}

/// The agent's process on node1: `braid-install` in the node's network namespace.
fn agent_pid(c: &Cluster) -> Result<u32, String> {
    let ns = std::fs::metadata(c.dir().join(format!("ns/{NODE}.net"))).map_err(|e| e.to_string())?;
    use std::os::unix::fs::MetadataExt;
    for e in std::fs::read_dir("/proc").map_err(|e| e.to_string())?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let net = std::fs::metadata(format!("/proc/{pid}/ns/net"));
        if comm.trim() == "braid-install" && net.is_ok_and(|m| (m.dev(), m.ino()) == (ns.dev(), ns.ino())) {
            return Ok(pid);
        }
    }
    Err(format!("no braid-install process in {NODE}'s network namespace"))
}

/// The completion time of the agent's patch of `pod` received at `since` or later, once the
/// audit log shows it.
fn patched(audit: &mut AuditTail, pod: &str, since: f64) -> Option<f64> {
    audit.next_events().iter().find_map(|e| {
        let ours = e["stage"] == "ResponseComplete"
            && e["verb"] == "patch"
            && e["user"]["username"] == AGENT
            && e["objectRef"]["resource"] == "pods"
            && e["objectRef"]["namespace"] == NS
            && e["objectRef"]["name"] == pod
            && e["responseStatus"]["code"] == 200;
        let received = epoch(e["requestReceivedTimestamp"].as_str()?)?;
        (ours && received >= since).then(|| epoch(e["stageTimestamp"].as_str()?))?
    })
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// File written → the API server's patch done, median and p90; the agent's peak RSS.
pub fn status_published(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let c = w.real_node()?;
    let ns = c.namespace(NS);
    let mut uids = Vec::new();
    for p in 0..PODS {
        let name = format!("pod-{p}");
        let mut spec: Value = serde_json::from_str(&pod(&ns.name, &name, NODE, None)).map_err(|e| e.to_string())?;
        spec["spec"]["hostNetwork"] = json!(true);
        c.apply(&spec.to_string());
        uids.push(c.get(&["pod", &name, "-n", NS])["metadata"]["uid"].as_str().unwrap_or("").to_string());
    }
    let dir = status_dir(&c)?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut audit = AuditTail::at_end(c.dir())?;
    let mut s =
        Sample::new("node agent: network-status", "status file written → the API server's patch of the pod done", "ms");
    let reps = w.reps(200);
    for i in 0..reps + 10 {
        let (p, name) = (i % PODS, format!("pod-{}", i % PODS));
        let doc = json!([{"name": "cluster", "interface": "eth0", "ips": [format!("198.18.0.{}", i % 250 + 2)], "default": true, "dns": {}}]);
        let file = json!({"networkStatus": doc, "podUID": uids[p]});
        let tmp = dir.join(format!(".{NS}_{name}_c.json.tmp"));
        write(&tmp, &format!("{file}\n"))?;
        let written = SystemTime::now().duration_since(UNIX_EPOCH).map_err(|e| e.to_string())?.as_secs_f64();
        std::fs::rename(&tmp, dir.join(format!("{NS}_{name}_c.json"))).map_err(|e| e.to_string())?;
        let give_up = Instant::now() + Duration::from_secs(60);
        let done = loop {
            if let Some(t) = patched(&mut audit, &name, written) {
                break t;
            }
            if Instant::now() >= give_up {
                return Err(format!("the agent's patch of {NS}/{name} is not in the audit log after 60 s"));
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        // The first rounds warm the agent's connection up.
        if i >= 10 {
            s.push(Duration::from_secs_f64((done - written).max(0.0)));
        }
    }
    // The agent's peak memory after all that (its DaemonSet's limit is 32 MiB, the installer's).
    let pid = agent_pid(&c)?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| e.to_string())?;
    let hwm_kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or("no VmHWM in the agent's /proc status")?;
    // The bench's files go with its pods (the delegator's DEL would remove them).
    for p in 0..PODS {
        let _ = std::fs::remove_file(dir.join(format!("{NS}_pod-{p}_c.json")));
    }
    drop(ns);
    let mut rss = Sample::new("node agent: network-status", "peak RSS of braid-install --kubernetes-api", "MB");
    let mb = hwm_kb * 1024.0 / 1_000_000.0;
    rss.values.push(mb);
    // The median judged on its sign-test interval, as every timed budget; the p90 (a tail, no
    // interval) as measured, far from its limit.
    let v = Verdict::at_most(
        "network-status published: status file written → pod annotation set",
        Estimate::median(&s.values, ALPHA),
        Limit::Ms(10.0),
    )
    .and_at_most(Estimate::exact(s.p90()), Limit::Ms(50.0))
    .measured(format!(
        "{} median, {} p90 (real API server, node1's agent)",
        crate::verdict::ms(s.median()),
        crate::verdict::ms(s.p90())
    ));
    let m = Verdict::at_most(
        "node agent's peak RSS in API mode (its DaemonSet's memory limit is 32 MiB)",
        Estimate::exact(mb),
        Limit::Mb(24.0),
    )
    .measured(format!("{mb:.1} MB"));
    Ok((vec![s, rss], vec![v, m]))
}
