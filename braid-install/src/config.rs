//! braid's conflist: the delegator wrapping the primary network by reference.

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
    let mut list = json!({
        "cniVersion": primary.cni_version,
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
            }
        }]
    });
    if let Some(versions) = versions(&primary.cni_version) {
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
            json!({"networksDir": "/etc/cni/braid.d", "globalNamespaces": ["default"], "statusDir": "/run/braid/network-status"})
        );
    }

    #[test]
    fn cni_versions_only_below_1_1_0_and_only_when_the_version_parses() {
        assert_eq!(versions("1.0.0"), Some(["1.0.0", "1.1.0"]));
        assert_eq!(versions("1.1.0"), None);
        assert_eq!(versions("1.2.0"), None);
        assert_eq!(versions("one"), None);
    }
}
