//! The node agent's API side (`braid-install --kubernetes-api`): from a network-status file
//! written (as the delegator writes it: a temporary name, then a rename) to the pod's
//! `k8s.v1.cni.cncf.io/network-status` annotation set on the API server — the agent's inotify
//! wake-up and its merge patch, over real HTTP with the real client crates.
//!
//! Why the stand-in (`kube-standin`, integration/apiserver, on loopback) and not the real API
//! server of `scripts/node.sh`: this budget is braid's side of the path alone, and a real
//! server cannot give that apart — every sample would carry its admission chain and etcd write,
//! whose time varies more than the agent's own — and it would bring a cluster up in every bench
//! run. The real path is measured on the real node by the node case (`scripts/bench.sh --node`:
//! pod creation → network-status on the pod, sandbox included; docs/bench/node.md), and
//! reported, not asserted, by `integration/tests/kube_node.rs`.

use super::World;
use crate::stats::{Estimate, Sample, ALPHA};
use crate::verdict::{Limit, Verdict};
use braid_integration::agent::{Agent, Dirs};
use kube_standin::StandIn;
use std::time::{Duration, Instant};

const ANNOTATION: &str = "k8s.v1.cni.cncf.io/network-status";
/// The pods the files go round (each file replaces its pod's previous one).
const PODS: usize = 8;

/// File written → annotation set, median and p90.
pub fn status_published(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let api = StandIn::start().map_err(|e| format!("kube-standin: {e}"))?;
    let base = w.dir.path().join("agent");
    let dirs = Dirs::under(&base);
    let kubeconfig = base.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).map_err(|e| e.to_string())?;
    for p in 0..PODS {
        api.create_pod("bench", &format!("pod-{p}"), "bench-node", &[]);
    }
    let mut agent = Agent::start(&dirs, &kubeconfig, "bench-node", &base.join("agent.log"), &[]);
    agent.wait_log("Kubernetes API mode", 1);
    let mut s = Sample::new("node agent: network-status", "status file written → pod annotation set", "ms");
    let reps = w.reps(200);
    for i in 0..reps + 10 {
        let pod = format!("pod-{}", i % PODS);
        let doc = format!(
            r#"[{{"name":"cluster","interface":"eth0","ips":["198.18.0.{}"],"default":true,"dns":{{}}}}]"#,
            i % 250 + 2
        );
        let tmp = dirs.status.join(format!(".bench_{pod}_c.json.tmp"));
        std::fs::write(&tmp, format!("{doc}\n")).map_err(|e| e.to_string())?;
        let t = Instant::now();
        std::fs::rename(&tmp, dirs.status.join(format!("bench_{pod}_c.json"))).map_err(|e| e.to_string())?;
        api.wait_until("the annotation", Duration::from_secs(60), |snap| {
            (snap.pod("bench", &pod)?["metadata"]["annotations"][ANNOTATION].as_str()? == doc).then_some(())
        });
        // The first rounds warm the agent's connection up.
        if i >= 10 {
            s.push(t.elapsed());
        }
    }
    // The agent's peak memory after all that (its DaemonSet's limit is 32 MiB, the installer's).
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.pid())).map_err(|e| e.to_string())?;
    let hwm_kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or("no VmHWM in the agent's /proc status")?;
    drop(agent);
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
        "{} median, {} p90 (kube-standin on loopback)",
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
