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
//! enough for a busy machine. It runs on the run's one-node cluster of `scripts/node.sh`
//! ([`super::real_node`], shared with the `kube` case, which runs before it), whose braid it
//! switches to `deploy/kubernetes-hotplug`.

use super::real_node::{epoch, repo};
use super::World;
use crate::stats::{Estimate, Sample, ALPHA};
use crate::verdict::{Limit, Verdict};
use braid_integration::cluster::{pod, Cluster};
use serde_json::{json, Value};

/// The completion time of the first audit event after `mark` that `pick` accepts.
fn completed(c: &Cluster, mark: usize, pick: impl Fn(&Value) -> bool) -> Option<(usize, f64)> {
    c.audit().iter().enumerate().skip(mark).find_map(|(i, e)| {
        (e["stage"] == "ResponseComplete" && pick(e)).then(|| Some((i, epoch(e["stageTimestamp"].as_str()?)?)))?
    })
}

/// Edit → interface and edit → network-status, adding and removing a network.
pub fn hotplug(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let c = w.real_node()?;
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
