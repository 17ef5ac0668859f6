//! Network hot-plug on the real node (`braid-install --hotplug`, `deploy/kubernetes-hotplug`):
//! a running pod's `k8s.v1.cni.cncf.io/networks` annotation edited with `kubectl annotate`, a
//! network added and then removed again, round after round, and for each edit:
//!
//! * **edit → interface**: from the API server's completion of the edit (its audit log's
//!   `stageTimestamp`) to the delegator's status file rewritten on the node (its mtime: the
//!   update writes it once the interface is attached, or detached, and the state recorded);
//! * **edit → network-status**: to the API server's completion of the agent's patch of the pod.
//!
//! Both ends are clocks of this machine (the API server, the node's files), read after the fact:
//! no polling delay is in the figures. There is nothing to interleave it with — Multus writes
//! network-status once, at ADD, and changes no running pod without a second controller — so the
//! figures are judged against fixed limits, about ten times what the first runs measured here
//! (10 ms and 24 ms to attach and publish, 23 ms and 38 ms to detach and publish): 100 ms to the
//! interface, 200 ms to network-status — prompt for a VMM waiting to hot-plug a NIC, and loose
//! enough for a busy machine. A one-node cluster of `scripts/node.sh` is brought up for it and
//! removed after.

use super::World;
use crate::stats::{Estimate, Sample, ALPHA};
use crate::verdict::{Limit, Verdict};
use braid_integration::cluster::{pod, Cluster};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository (scripts/, deploy/), as built.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A cluster of `scripts/node.sh`, down (and its directory removed) on drop.
struct Node {
    dir: PathBuf,
}

impl Node {
    fn up(w: &World, nodes: usize) -> Result<Node, String> {
        let base = Path::new("/var/lib/braid");
        std::fs::create_dir_all(base).map_err(|e| e.to_string())?;
        let dir = base.join(format!("bench-node.{}", std::process::id()));
        let node = Node { dir };
        let out = Command::new("bash")
            .arg(repo().join("scripts/node.sh"))
            .args(["up", &nodes.to_string()])
            .env("BRAID_NODE_DIR", &node.dir)
            .env("BRAID_RELEASE_DIR", &w.bins)
            .output()
            .map_err(|e| format!("scripts/node.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!("scripts/node.sh up {nodes}: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(node)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo().join("scripts/node.sh"))
            .arg("down")
            .env("BRAID_NODE_DIR", &self.dir)
            .output();
    }
}

/// Seconds since the epoch of an RFC 3339 UTC time as the API server's audit log writes it
/// (`2026-12-06T05:53:16.123456Z`).
fn epoch(t: &str) -> Option<f64> {
    let (date, time) = t.strip_suffix('Z')?.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>());
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let mut hms = time.split(':');
    let (h, min) = (hms.next()?.parse::<f64>().ok()?, hms.next()?.parse::<f64>().ok()?);
    let s = hms.next()?.parse::<f64>().ok()?;
    // Days from the civil date (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days as f64 * 86_400.0 + h * 3600.0 + min * 60.0 + s)
}

/// The completion time of the first audit event after `mark` that `pick` accepts.
fn completed(c: &Cluster, mark: usize, pick: impl Fn(&Value) -> bool) -> Option<(usize, f64)> {
    c.audit().iter().enumerate().skip(mark).find_map(|(i, e)| {
        (e["stage"] == "ResponseComplete" && pick(e)).then(|| Some((i, epoch(e["stageTimestamp"].as_str()?)?)))?
    })
}

/// Edit → interface and edit → network-status, adding and removing a network.
pub fn hotplug(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let node = Node::up(w, 1)?;
    let c = Cluster::at(&node.dir);
    c.ok(&["apply", "-k", &repo().join("deploy/kubernetes-hotplug").display().to_string()]);
    c.ok(&["rollout", "status", "daemonset/braid-install", "-n", "kube-system", "--timeout=240s"]);
    let ns = c.namespace("bench-hot");
    for (name, net) in [("red", 131), ("blue", 132)] {
        let config = json!({"cniVersion": "1.0.0", "name": name, "plugins": [{"type": "bridge", "bridge": format!("br-{name}"),
            "ipam": {"type": "host-local", "ranges": [[{"subnet": format!("198.18.{net}.0/24")}]]}}]});
        let nad = json!({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": name, "namespace": ns.name}, "spec": {"config": config.to_string()}});
        c.apply(&nad.to_string());
        c.wait(
            &format!("{name} mirrored"),
            || c.files_on("node1", "/etc/cni/braid.d/bench-hot").contains(&format!("{name}.conflist")),
            || c.agent_log("node1"),
        );
    }
    c.apply(&pod(&ns.name, "vm", "node1", Some("red")));
    let status_of = || {
        c.get(&["pod", "vm", "-n", &ns.name])["metadata"]["annotations"]["k8s.v1.cni.cncf.io/network-status"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    c.wait("the pod's network-status", || status_of().contains("bench-hot/red"), || c.agent_log("node1"));
    let file = || {
        let files = c.files_on("node1", "/run/braid/network-status");
        files.into_iter().find(|f| f.starts_with("bench-hot_vm_")).map(|f| format!("/run/braid/network-status/{f}"))
    };
    let mtime = |path: &str| -> Option<f64> {
        let out = c.on_node("node1", "stat", &["-c", "%.9Y", path]);
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    let mut iface = [
        Sample::new("hot-plug", "kubectl annotate → interface attached (status file written)", "ms"),
        Sample::new("hot-plug", "kubectl annotate → interface detached (status file written)", "ms"),
    ];
    let mut status = [
        Sample::new("hot-plug", "kubectl annotate → network-status on the pod, network added", "ms"),
        Sample::new("hot-plug", "kubectl annotate → network-status on the pod, network removed", "ms"),
    ];
    let rounds = w.reps(30);
    for round in 0..rounds + 1 {
        for (k, (networks, shows)) in [("red,blue", true), ("red", false)].into_iter().enumerate() {
            let mark = c.audit().len();
            c.ok(&[
                "annotate",
                "pod",
                "vm",
                "-n",
                &ns.name,
                "--overwrite",
                &format!("k8s.v1.cni.cncf.io/networks={networks}"),
            ]);
            c.wait(
                &format!("network-status after {networks}"),
                || status_of().contains("bench-hot/blue") == shows,
                || c.agent_log("node1"),
            );
            let by = |e: &Value, user_part: &str| {
                e["verb"] == "patch"
                    && e["objectRef"]["name"] == "vm"
                    && e["objectRef"]["namespace"] == ns.name.as_str()
                    && e["user"]["username"].as_str().is_some_and(|u| u.contains(user_part))
            };
            let (i, edited) = completed(&c, mark, |e| by(e, "admin")).ok_or("the edit is not in the audit log")?;
            let (_, published) =
                completed(&c, i + 1, |e| by(e, "serviceaccount:kube-system:braid")).ok_or("no patch by the agent")?;
            let written = file().and_then(|f| mtime(&f)).ok_or("no status file on the node")?;
            // The first round warms the agent's connection and the node's caches up.
            if round > 0 {
                iface[k].push(std::time::Duration::from_secs_f64((written - edited).max(0.0)));
                status[k].push(std::time::Duration::from_secs_f64((published - edited).max(0.0)));
            }
        }
    }
    drop(ns);
    drop(c);
    drop(node);
    let mut verdicts = Vec::new();
    for (s, what, limit) in [
        (&iface[0], "hot-plug: kubectl annotate → added network's interface attached (median)", 100.0),
        (&iface[1], "hot-plug: kubectl annotate → removed network's interface detached (median)", 100.0),
        (&status[0], "hot-plug: kubectl annotate → network-status with the added network (median)", 200.0),
        (&status[1], "hot-plug: kubectl annotate → network-status without the removed network (median)", 200.0),
    ] {
        verdicts.push(Verdict::at_most(what, Estimate::median(&s.values, ALPHA), Limit::Ms(limit)).measured(format!(
            "{} median, {} p90 (real node, {} rounds)",
            crate::verdict::ms(s.median()),
            crate::verdict::ms(s.p90()),
            s.values.len()
        )));
    }
    let mut samples: Vec<Sample> = iface.into_iter().collect();
    samples.extend(status);
    Ok((samples, verdicts))
}

#[cfg(test)]
mod tests {
    use super::epoch;

    #[test]
    fn audit_times_read_as_epoch_seconds() {
        assert_eq!(epoch("1970-01-01T00:00:00.000000Z"), Some(0.0));
        assert_eq!(epoch("2000-03-01T00:00:01.5Z"), Some(951_868_801.5));
        let a = epoch("2026-12-06T05:53:16.123456Z").unwrap();
        let b = epoch("2026-12-06T05:53:17.000000Z").unwrap();
        assert!((b - a - 0.876544).abs() < 1e-6, "{}", b - a);
        assert_eq!(epoch("not a time"), None);
    }
}
