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
    let list = json!({
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
    let mut bytes = serde_json::to_vec_pretty(&list).unwrap_or_default();
    bytes.push(b'\n');
    bytes
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
}
