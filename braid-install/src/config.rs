//! braid's conflist: the delegator wrapping the primary network by reference, and on a VM
//! runtime's node (`--vmtap`) vmtap after it.

use crate::options::Options;
use crate::primary::{Primary, POD_ANNOTATIONS};
use serde_json::{json, Map, Value};

/// The conflist for `primary`, as written (pretty JSON, newline-terminated). Its only inputs
/// are the primary's name, cniVersion and capabilities and the options, so it changes exactly
/// when one of those does: the delegator reads the primary's file itself at every ADD.
pub fn render(o: &Options, primary: &Primary) -> Vec<u8> {
    let mut caps = Map::new();
    for c in primary.capabilities.iter().map(String::as_str).chain([POD_ANNOTATIONS]) {
        caps.insert(c.to_string(), Value::Bool(true));
    }
    // vmtap reads results from 0.3.0 on (earlier ones have no `interfaces`): a list for an
    // older primary is written in 0.3.1, the version the delegator converts the primary's
    // result to (it runs the primary in the primary's own version either way).
    let old = !cni_types::version::greater_than_or_equal_to(&primary.cni_version, "0.3.0").unwrap_or(true);
    let version = if o.vmtap && old { "0.3.1" } else { primary.cni_version.as_str() };
    let mut list = json!({
        "cniVersion": version,
        "name": o.name,
        "plugins": [{
            "type": "delegator",
            "capabilities": caps,
            "confDir": o.primary_dir(),
            "stateDir": o.state_dir,
            "delegates": [{"network": primary.name}],
            "kubernetes": {
                "networksDir": o.networks_dir,
                "globalNamespaces": o.global_namespaces,
                "statusDir": o.status_dir,
                "podResourcesSocket": o.pod_resources_socket,
                "defaultNetworkNamespace": o.default_network_namespace,
                "defaultNetworkPodNamespace": o.default_network_pod_namespace,
                // Where the DRA driver (--dra) records prepared claims; the delegator reads
                // a pod's there at ADD (none: one failed open).
                "claimsDir": o.dra_claims_dir,
                // The node agent's record of the node's DRA devices (API mode), read by the
                // delegator's helper only for a pod with DRA devices and a network naming a resource.
                "draDevicesFile": o.dra_devices_file,
            }
        }]
    });
    if o.vmtap {
        // vmtap hands a VM every pod interface of the result it gets: the merged one, so that
        // the pod's other networks — also one the node agent adds to a running pod — are among
        // them. The primary's interface and IPs come first in it.
        list["plugins"][0]["result"] = json!("merged");
        let mut vmtap = json!({"type": "vmtap"});
        if let Some(dir) = &o.vmtap_dan_dir {
            vmtap["danDir"] = json!(dir);
        }
        if let Some(plugins) = list["plugins"].as_array_mut() {
            plugins.push(vmtap);
        }
    }
    if let Some(versions) = versions(version) {
        list["cniVersions"] = json!(versions);
    }
    let mut bytes = serde_json::to_vec_pretty(&list).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// `cniVersions` beside a primary's `cniVersion` below 1.1.0: its version and 1.1.0. libcni
/// 1.2 and later (containerd 2.x, CRI-O 1.30+) use the highest version of the list they know,
/// 1.1.0 — so they send braid STATUS (containerd polls it every 5 s: the delegator answers 50
/// while the primary network is missing) and GC; older libcni reads only `cniVersion` and runs
/// braid as before. The delegator runs the primary in the primary's own version either way.
/// `None` when the primary is 1.1.0 or later, or its version does not parse (a list entry that
/// does not parse would make libcni refuse the whole file).
fn versions(primary: &str) -> Option<[&str; 2]> {
    match cni_types::version::greater_than_or_equal_to(primary, "1.1.0") {
        Ok(false) => Some([primary, "1.1.0"]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn by_reference_with_the_capabilities_union_and_host_paths() {
        let o = Options::default();
        let p = Primary {
            path: PathBuf::from("/host/etc/cni/net.d/10-calico.conflist"),
            name: "k8s-pod-network".into(),
            cni_version: "0.3.1".into(),
            capabilities: ["portMappings".to_string(), "bandwidth".to_string()].into_iter().collect(),
        };
        let v: Value = serde_json::from_slice(&render(&o, &p)).unwrap();
        assert_eq!(v["cniVersion"], "0.3.1");
        assert_eq!(v["cniVersions"], json!(["0.3.1", "1.1.0"]));
        // libcni's selection (cni-types follows libcni 1.2): 1.1.0, where STATUS exists.
        let list = cni_types::NetConfList::parse(&render(&o, &p)).unwrap();
        assert_eq!(list.cni_version, "1.1.0");
        assert_eq!(v["name"], "braid");
        let d = &v["plugins"][0];
        assert_eq!(d["type"], "delegator");
        assert_eq!(d["delegates"], json!([{"network": "k8s-pod-network"}]));
        assert_eq!(d["confDir"], "/etc/cni/net.d");
        assert_eq!(
            d["capabilities"],
            json!({"bandwidth": true, "portMappings": true, "io.kubernetes.cri.pod-annotations": true})
        );
        assert_eq!(
            d["kubernetes"],
            json!({"networksDir": "/etc/cni/braid.d", "globalNamespaces": ["default"], "statusDir": "/run/braid/network-status",
                   "podResourcesSocket": "/var/lib/kubelet/pod-resources/kubelet.sock",
                   "defaultNetworkNamespace": "kube-system", "defaultNetworkPodNamespace": false,
                   "claimsDir": "/var/lib/braid/claims",
                   "draDevicesFile": "/var/lib/braid/dra-devices/devices.json"})
        );
    }

    #[test]
    fn vmtap_after_the_delegator_only_with_the_flag() {
        let p = Primary {
            path: PathBuf::from("/host/etc/cni/net.d/10-flannel.conflist"),
            name: "cbr0".into(),
            cni_version: "0.3.1".into(),
            capabilities: ["portMappings".to_string()].into_iter().collect(),
        };
        let plain: Value = serde_json::from_slice(&render(&Options::default(), &p)).unwrap();
        assert_eq!(plain["plugins"].as_array().unwrap().len(), 1);
        assert_eq!(plain["plugins"][0].get("result"), None, "the delegator's default (primary) result");

        let o = Options { vmtap: true, ..Options::default() };
        let v: Value = serde_json::from_slice(&render(&o, &p)).unwrap();
        assert_eq!(v["plugins"][1], json!({"type": "vmtap"}));
        assert_eq!(v["plugins"].as_array().unwrap().len(), 2);
        assert_eq!(v["plugins"][0]["result"], "merged");
        // Everything else of the delegator is as without the flag.
        let mut delegator = v["plugins"][0].clone();
        delegator.as_object_mut().unwrap().remove("result");
        assert_eq!(delegator, plain["plugins"][0]);
        assert_eq!((&v["cniVersion"], &v["cniVersions"]), (&plain["cniVersion"], &plain["cniVersions"]));
        // It parses as a conflist, and vmtap's keys are ones vmtap reads.
        let list = cni_types::NetConfList::parse(&render(&o, &p)).unwrap();
        assert_eq!(list.plugins.len(), 2);

        let o = Options { vmtap: true, vmtap_dan_dir: Some("/run/kata-containers/dans".into()), ..Options::default() };
        let v: Value = serde_json::from_slice(&render(&o, &p)).unwrap();
        assert_eq!(v["plugins"][1], json!({"type": "vmtap", "danDir": "/run/kata-containers/dans"}));

        // A primary older than vmtap's first version: the list is written in 0.3.1.
        let old = Primary { cni_version: "0.2.0".into(), ..p };
        let v: Value = serde_json::from_slice(&render(&o, &old)).unwrap();
        assert_eq!((&v["cniVersion"], &v["cniVersions"]), (&json!("0.3.1"), &json!(["0.3.1", "1.1.0"])));
        let v: Value = serde_json::from_slice(&render(&Options::default(), &old)).unwrap();
        assert_eq!(v["cniVersion"], "0.2.0");
    }

    #[test]
    fn cni_versions_only_below_1_1_0_and_only_when_the_version_parses() {
        assert_eq!(versions("1.0.0"), Some(["1.0.0", "1.1.0"]));
        assert_eq!(versions("1.1.0"), None);
        assert_eq!(versions("1.2.0"), None);
        assert_eq!(versions("one"), None);
    }
}
