//! braid on a containerd node as its DaemonSet leaves it, for the tests and the bench that play
//! the kubelet there: a bridge primary (cluster) network, the example ConfigMap
//! (`deploy/kubernetes/base/networks-configmap.json`) and `braid-install --once` run on the node's
//! directories; then pods annotated with the example's networks, and what braid wrote for them.
//!
//! Shared by `tests/soak.rs`, `tests/install.rs` (which installs with the image instead, and
//! takes the primary, the storage master and the example networks from here) and the bench's
//! soak. Behind the crate's `cri` feature, as [`crate::containerd`].
#![allow(clippy::panic)]

use crate::containerd::Containerd;
use crate::runtime::run_ok;
use crate::Harness;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The pod annotation braid's delegator reads the selected networks from (the Network Plumbing
/// WG's).
pub const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";

/// The example ConfigMap's two networks as a pod in any namespace selects them (`default` is a
/// global namespace of the installed braid).
pub const EXAMPLE_SELECTION: &str = "default/isolated, default/storage";

/// The interfaces of a pod on the primary and both example networks, sorted.
pub const EXAMPLE_INTERFACES: [&str; 3] = ["eth0", "net1", "net2"];

/// The example "storage" network's macvlan master and its veth peer, made in the node's
/// namespace only (the example names `eth1`).
pub const STORAGE_MASTER: (&str, &str) = ("eth1", "eth1p");

/// The example "isolated" network's bridge: on the node once a pod used that network.
pub const ISOLATED_BRIDGE: &str = "braid-iso0";

/// The example ConfigMap, beside this crate.
const CONFIGMAP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/kubernetes/base/networks-configmap.json");

/// The node's primary network as a node has it: bridge `bridge` (the gateway) on
/// 198.18.`subnet`.0/24, its reservations in the harness's directory, and tuning with the `mac`
/// capability after it.
pub fn bridge_primary(h: &Harness, name: &str, bridge: &str, subnet: u8) -> Value {
    json!({"cniVersion": "1.0.0", "name": name, "plugins": [
        {"type": "bridge", "bridge": bridge, "isGateway": true, "ipam": h.host_local(subnet)},
        {"type": "tuning", "capabilities": {"mac": true}}]})
}

/// Makes the [`STORAGE_MASTER`] veth in the node's namespace, the master up.
pub fn add_storage_master(h: &Harness) {
    let (master, peer) = STORAGE_MASTER;
    h.host.ip(&["link", "add", master, "type", "veth", "peer", "name", peer]);
    h.host.ip(&["link", "set", master, "up"]);
}

/// The example ConfigMap's keys and conflists, with host-local's reservations moved into
/// `ipam_dir` (never `/var/lib/cni/networks`); nothing else changes.
pub fn example_networks(ipam_dir: &Path) -> Vec<(String, String)> {
    let text = std::fs::read(CONFIGMAP).unwrap_or_else(|e| panic!("{CONFIGMAP}: {e}"));
    let cm: Value = serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{CONFIGMAP}: {e}"));
    let data = cm["data"].as_object().unwrap_or_else(|| panic!("{CONFIGMAP}: no data"));
    data.iter()
        .map(|(k, text)| {
            let mut v: Value = serde_json::from_str(text.as_str().unwrap_or_default())
                .unwrap_or_else(|e| panic!("{CONFIGMAP}: {k}: {e}"));
            for p in v["plugins"].as_array_mut().into_iter().flatten() {
                if p.get("ipam").is_some() {
                    p["ipam"]["dataDir"] = json!(ipam_dir);
                }
            }
            (k.clone(), serde_json::to_string_pretty(&v).unwrap_or_default())
        })
        .collect()
}

/// braid's directories on a node [`install_braid`] set up, below the harness's directory.
#[derive(Debug, Clone)]
pub struct Braid {
    /// The name of braid's conflist (`00-braid.conflist`), as CRI reports it loaded.
    pub name: String,
    /// The mirrored network definitions (`--networks-dir`).
    pub networks_dir: PathBuf,
    /// The delegator's state (`--state-dir`).
    pub state_dir: PathBuf,
    /// The pods' network-status documents (`--status-dir`).
    pub status_dir: PathBuf,
}

/// Installs braid on `c` as the DaemonSet does, with the binaries in `bins` (`braid-install` and
/// the plugins it copies): the [`STORAGE_MASTER`], the [`example_networks`] as a ConfigMap
/// directory, then `braid-install --once` into the daemon's CNI directories with braid's
/// conflist named `name`; returns once CRI reports that network loaded.
pub fn install_braid(c: &mut Containerd, bins: &Path, name: &str) -> Braid {
    add_storage_master(&c.h);
    let d = c.h.dir.path().to_path_buf();
    let cm = d.join("cm");
    std::fs::create_dir_all(&cm).unwrap_or_else(|e| panic!("{}: {e}", cm.display()));
    for (k, v) in example_networks(&c.h.ipam_dir()) {
        std::fs::write(cm.join(&k), v).unwrap_or_else(|e| panic!("{k}: {e}"));
    }
    let braid = Braid {
        name: name.to_string(),
        networks_dir: d.join("braid.d"),
        state_dir: d.join("state"),
        status_dir: d.join("status"),
    };
    let installer = bins.join("braid-install");
    assert!(
        installer.exists(),
        "{} is missing: build the binaries first (cargo build --workspace --bins)",
        installer.display()
    );
    let s = |p: &Path| p.display().to_string();
    run_ok(Command::new(installer).args([
        "--once",
        "--host-root",
        "/",
        "--source-dir",
        &s(bins),
        "--cni-bin-dir",
        &s(&c.bin_dir()),
        "--cni-conf-dir",
        &s(&c.net_dir()),
        "--networks-dir",
        &s(&braid.networks_dir),
        "--state-dir",
        &s(&braid.state_dir),
        "--status-dir",
        &s(&braid.status_dir),
        "--name",
        name,
        "--networks-configmap",
        &s(&cm),
        "--global-namespaces",
        "default",
    ]));
    c.wait_network_loaded(name);
    braid
}

/// The interfaces the network-status document of sandbox `id` names, sorted; none when there is
/// no document (braid writes it after the delegator's ADD, as `<ns>_<pod>_<id>.json`).
pub fn status_interfaces(status_dir: &Path, id: &str) -> Vec<String> {
    let doc = std::fs::read_dir(status_dir)
        .into_iter()
        .flatten()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(&format!("_{id}.json")))
        .and_then(|e| std::fs::read(e.path()).ok())
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .unwrap_or(Value::Null);
    // `{"networkStatus": [...], "podUID": ...}` (a delegator before K8S_POD_UID was recorded
    // wrote the bare list).
    let list = if doc.is_object() { &doc["networkStatus"] } else { &doc };
    let mut v: Vec<String> =
        list.as_array().into_iter().flatten().filter_map(|e| e["interface"].as_str().map(str::to_string)).collect();
    v.sort();
    v
}
