//! The benchmarks, one file per family. Each measures braid beside its reference in one run,
//! interleaved, so the machine's drift hits both sides alike, and returns its samples and
//! budget verdicts ([`crate::verdict`]).
//!
//! * [`latency`]: one exec — VERSION, the exec floor, STATUS.
//! * [`attach`]: ADD+DEL through the delegator — beside its delegates called directly, in
//!   parallel; and braid's own work (networks selected by annotation, a merged result) with
//!   `braid-fault` delegates.
//! * [`chains`]: ADD and DEL of a conflist with and without a chained plugin (merger, vmtap).
//! * [`verifier`]: the verifier's CHECK as interfaces grow.
//! * [`merge`]: the merge of many results, in process.
//! * [`footprint`]: binary sizes and peak RSS.
//! * [`kube`]: the node agent's network-status, from file to pod annotation, on the real node.
//! * [`hotplug`]: a running pod's networks changed by its annotation, on the real node.
//! * [`devices`]: a network that names a device-plugin resource beside one that names none
//!   (the real kubelet's PodResources; no socket, no helper without one, under strace).
//! * [`real_node`]: the one-node cluster those two share.
//! * [`node`]: pod bursts on the real node, braid beside Multus thick and thin (run only when
//!   named: `--only node`).
//!
//! Here: where everything lives ([`World`]) and what the families share; how rounds are run
//! and budgets decided: [`rounds`].

pub mod attach;
pub mod chains;
pub mod devices;
pub mod footprint;
pub mod hotplug;
pub mod kube;
pub mod latency;
pub mod merge;
pub mod netns_entry;
pub mod node;
pub(crate) mod real_node;
pub(crate) mod rounds;
pub mod verifier;

use crate::run::Call;
use crate::stats::{Estimate, Sample};
use braid_integration::{Netns, TempDir};
use cni_types::version::Command;
use cni_types::Invocation;
use rounds::{Check, Plan};
use serde_json::{json, Value};
use std::path::PathBuf;

/// Where everything the benchmarks need lives.
pub struct World {
    /// braid's release binaries.
    pub bins: PathBuf,
    /// Debian's reference plugins.
    pub reference: PathBuf,
    /// The node's namespace (plugins run here; the machine's own is never touched).
    pub host: Netns,
    /// The pod's namespace.
    pub ctr: Netns,
    /// IPAM data, state, caches.
    pub dir: TempDir,
    /// Repetitions (scaled by `--quick`).
    pub scale: f64,
    /// The real-node cases' cluster, once one of them brought it up ([`World::real_node`]).
    pub real_node: std::sync::Mutex<Option<real_node::Node>>,
}

impl World {
    pub(crate) fn bin(&self, n: &str) -> PathBuf {
        self.bins.join(n)
    }

    pub(crate) fn reference(&self, n: &str) -> PathBuf {
        self.reference.join(n)
    }

    pub(crate) fn path_env(&self) -> String {
        format!("{}:{}", self.bins.display(), self.reference.display())
    }

    /// The run's one-node cluster of `scripts/node.sh` (braid installed), brought up on first
    /// use and down when the run ends; held for the caller alone.
    pub(crate) fn real_node(&self) -> Result<braid_integration::cluster::Cluster, String> {
        let mut node = self.real_node.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = match node.as_ref() {
            Some(n) => n.dir.clone(),
            None => {
                let n = real_node::Node::up(&self.bins, 1)?;
                let dir = n.dir.clone();
                *node = Some(n);
                dir
            }
        };
        Ok(braid_integration::cluster::Cluster::at(&dir))
    }

    pub(crate) fn reps(&self, n: usize) -> usize {
        ((n as f64 * self.scale).round() as usize).max(5)
    }

    /// [`Plan`] of `first` rounds (scaled by `--quick`) a look, at most `looks` looks.
    pub(crate) fn plan(&self, first: usize, looks: usize) -> Plan {
        Plan { first: self.reps(first), looks }
    }

    /// A call of `plugin` against the pod namespace.
    pub(crate) fn call(&self, plugin: PathBuf, command: Command, id: &str, ifname: &str, stdin: &Value) -> Call {
        Call {
            plugin,
            req: Invocation {
                command,
                container_id: id.to_string(),
                netns: self.ctr.path().display().to_string(),
                ifname: ifname.to_string(),
                args: "IgnoreUnknown=1;K8S_POD_NAME=bench".to_string(),
                path: self.path_env(),
            },
            stdin: serde_json::to_vec(stdin).unwrap_or_default(),
        }
    }

    /// Runs `work` on a thread inside the node's namespace (children inherit it).
    pub(crate) fn in_host<T: Send>(&self, work: impl FnOnce() -> T + Send) -> Result<T, String> {
        cni_skel::netns::run_in(&self.host.path(), work).map_err(|e| e.to_string())
    }

    pub(crate) fn ipam(&self, subnet: u8) -> Value {
        json!({"type": "host-local", "dataDir": self.dir.path().join("ipam"),
               "ranges": [[{"subnet": format!("198.18.{subnet}.0/24"), "gateway": format!("198.18.{subnet}.1")}]]})
    }
}

/// `calls`, one mode each, in interleaved rounds ([`rounds::compare`]): call `j`'s durations go
/// to `samples[j]`, and `checks` read them by that index.
pub(crate) fn interleaved(
    calls: &[Call],
    plan: Plan,
    samples: &mut [Sample],
    checks: &[Check],
) -> Result<Vec<Estimate>, String> {
    let layout: Vec<Vec<usize>> = (0..calls.len()).map(|j| vec![j]).collect();
    rounds::compare(plan, samples, &layout, checks, |j, _| Ok(vec![calls[j].run()?.0]))
}

/// Empty samples of one group, in milliseconds, by name.
pub(crate) fn timings(group: &'static str, names: &[&str]) -> Vec<Sample> {
    names.iter().map(|n| Sample::new(group, *n, "ms")).collect()
}

/// The pairs `a[i]` and `b[i]` (each pair measured back to back) combined by `f`: a drift of
/// the machine moves both of a pair alike.
pub(crate) fn paired(
    a: &Sample,
    b: &Sample,
    group: &'static str,
    name: &str,
    unit: &'static str,
    f: fn(f64, f64) -> f64,
) -> Sample {
    let mut s = Sample::new(group, name, unit);
    s.values = a.values.iter().zip(&b.values).map(|(x, y)| f(*x, *y)).collect();
    s
}

/// A pod namespace with `n` veth pairs `c<i>`/`p<i>`, each `c<i>` with an address and a routed
/// destination, and the 1.1 result that claims exactly that.
pub(crate) fn interfaces_ns(n: usize) -> Result<(Netns, Value), String> {
    let ns = Netns::new("bv");
    let mut batch = String::new();
    let mut interfaces = Vec::new();
    let (mut ips, mut routes) = (Vec::new(), Vec::new());
    for i in 0..n {
        let mac = format!("02:00:00:00:{:02x}:01", i);
        batch.push_str(&format!("link add c{i} address {mac} type veth peer name p{i}\n"));
        batch.push_str(&format!("link set c{i} up\nlink set p{i} up\n"));
        batch.push_str(&format!("addr add 198.18.{i}.2/24 dev c{i}\n"));
        batch.push_str(&format!("route add 198.19.{i}.0/24 via 198.18.{i}.1 dev c{i}\n"));
        interfaces.push(json!({"name": format!("c{i}"), "mac": mac, "sandbox": ns.path(), "mtu": 1500}));
        ips.push(json!({"address": format!("198.18.{i}.2/24"), "gateway": format!("198.18.{i}.1"), "interface": i}));
        routes.push(json!({"dst": format!("198.19.{i}.0/24"), "gw": format!("198.18.{i}.1")}));
    }
    let path = std::env::temp_dir().join(format!("braid-bench-{}-{n}.batch", std::process::id()));
    std::fs::write(&path, batch).map_err(|e| e.to_string())?;
    let out = std::process::Command::new("ip")
        .args(["-n", ns.name(), "-batch"])
        .arg(&path)
        .output()
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&path);
    if !out.status.success() {
        return Err(format!("setting up {n} interfaces: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let result = json!({"cniVersion": "1.1.0", "interfaces": interfaces, "ips": ips, "routes": routes});
    Ok((ns, result))
}
