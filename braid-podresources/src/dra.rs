//! The pod's devices from other DRA drivers, for networks that name a resource: what Multus
//! 4.3.1 does through the API server on every ADD (multus-cni `pkg/draclient/draclient.go`: GET
//! each of the pod's ResourceClaims, LIST the node's ResourceSlices of each driver, keep the
//! devices whose attributes `k8s.cni.cncf.io/resourceName` and `k8s.cni.cncf.io/deviceID` are
//! set, the first to be matched with the NAD's `k8s.v1.cni.cncf.io/resourceName`), done here
//! with no API request: the kubelet's PodResources answer lists the pod's allocated devices by
//! (driver, pool, device), and the node agent keeps those devices' two attributes in the node's
//! DRA devices record ([`braid_attach::dra_devices`]), from its one watch of the node's
//! ResourceSlices. A device with both attributes adds its ID to the resource's IDs, merged with
//! the device plugins' and sorted (as Multus merges both into one `resourceMap` and sorts it);
//! one without them (a GPU) is skipped, as Multus skips it. The record is read only when the
//! pod has DRA devices at all.

use crate::api::PodResources;
use crate::devices::Devices;
use braid_attach::dra_devices::NodeDevices;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;

/// One device of one of the pod's claims (the kubelet lists a claim under each container that
/// names it: each device once here).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClaimDevice {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// The allocation's driver, pool and device.
    pub driver: String,
    /// Pool.
    pub pool: String,
    /// Device.
    pub device: String,
}

/// The DRA devices of the pods in `pods` named `namespace/name` (`Get`'s one, or `List`'s).
pub fn of_pods<'a>(pods: impl IntoIterator<Item = &'a PodResources>, namespace: &str, name: &str) -> Vec<ClaimDevice> {
    let mut out = BTreeSet::new();
    for p in pods.into_iter().filter(|p| p.namespace == namespace && p.name == name) {
        for r in p.containers.iter().flat_map(|c| &c.dynamic_resources) {
            for d in &r.claim_resources {
                out.insert(ClaimDevice {
                    claim: format!("{}/{}", r.claim_namespace, r.claim_name),
                    driver: d.driver_name.clone(),
                    pool: d.pool_name.clone(),
                    device: d.device_name.clone(),
                });
            }
        }
    }
    out.into_iter().collect()
}

/// What [`resolve`] found: each of the pod's DRA devices as the answer's `dra` lists it, and
/// why some could not be looked up (the record missing, or without the device).
#[derive(Debug, Default, PartialEq)]
pub struct Resolved {
    /// `[{"claim", "driver", "pool", "device", "resourceName"?, "deviceID"?}]`.
    pub listed: Vec<Value>,
    /// Why one or more were not looked up (the answer's `draUnresolved`).
    pub unresolved: Option<String>,
}

/// Adds the IDs of `found` that carry Multus's two attributes to `devices` (then sorted again)
/// from the record at `record`.
pub fn resolve(found: &[ClaimDevice], record: &Path, devices: &mut Devices) -> Resolved {
    let mut out = Resolved::default();
    if found.is_empty() {
        return out;
    }
    let nodes = NodeDevices::read(record);
    let mut unknown = Vec::new();
    for d in found {
        let mut entry = json!({"claim": d.claim, "driver": d.driver, "pool": d.pool, "device": d.device});
        match &nodes {
            Ok(n) => match n.get(&d.driver, &d.pool, &d.device) {
                Some(attrs) => {
                    if let Some((r, id)) = attrs.multus() {
                        devices.entry(r.to_string()).or_default().push(id.to_string());
                        entry["resourceName"] = json!(r);
                        entry["deviceID"] = json!(id);
                    }
                }
                None => unknown.push(format!("{}/{}/{} (claim {})", d.driver, d.pool, d.device, d.claim)),
            },
            Err(_) => unknown.push(format!("{}/{}/{} (claim {})", d.driver, d.pool, d.device, d.claim)),
        }
        out.listed.push(entry);
    }
    for ids in devices.values_mut() {
        ids.sort();
    }
    out.unresolved = match nodes {
        Err(e) => Some(format!(
            "the node's DRA devices record cannot be read ({e}; the node agent writes it in --kubernetes-api mode), so the attributes of the pod's DRA devices {} are not known",
            unknown.join(", ")
        )),
        Ok(n) if !unknown.is_empty() => Some(format!(
            "the pod's DRA devices {} are not in the node's DRA devices record {} (node {}'s ResourceSlices as the node agent last saw them)",
            unknown.join(", "),
            record.display(),
            n.node
        )),
        Ok(_) => None,
    };
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::api::{ClaimResource, ContainerResources, DynamicResource};
    use braid_attach::dra_devices::Device;

    fn claim(ns: &str, name: &str, devices: &[(&str, &str)]) -> DynamicResource {
        DynamicResource {
            claim_name: name.into(),
            claim_namespace: ns.into(),
            claim_resources: devices
                .iter()
                .map(|(driver, device)| ClaimResource {
                    driver_name: driver.to_string(),
                    pool_name: "n1".into(),
                    device_name: device.to_string(),
                    share_id: None,
                })
                .collect(),
        }
    }

    fn pod(containers: Vec<Vec<DynamicResource>>) -> PodResources {
        PodResources {
            name: "p".into(),
            namespace: "a".into(),
            containers: containers
                .into_iter()
                .map(|dynamic_resources| ContainerResources { name: "c".into(), devices: vec![], dynamic_resources })
                .collect(),
        }
    }

    struct Dir(std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn devices_with_multus_attributes_join_the_resources_ids_sorted_and_others_are_skipped_or_unresolved() {
        // One claim named by two containers: its devices once.
        let c = claim("a", "vfs", &[("sriov.test", "vf-2"), ("sriov.test", "vf-1"), ("gpu.test", "g0")]);
        let p = pod(vec![vec![c.clone()], vec![c, claim("a", "late", &[("sriov.test", "vf-9")])]]);
        let found = of_pods([&p], "a", "p");
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(of_pods([&p], "b", "p").is_empty());

        let dir = Dir(std::env::temp_dir().join(format!("braid-podresources-dra-{}", std::process::id())));
        let record = dir.0.join("dra-devices.json");
        let mut devices = Devices::new();
        devices.insert("braid.test/dravf".into(), vec!["0000:00:1f.0".into()]);
        let r = resolve(&found, &record, &mut devices);
        assert!(r.unresolved.as_deref().unwrap().contains("cannot be read"), "{r:?}");
        assert_eq!(devices["braid.test/dravf"], ["0000:00:1f.0"]);

        let mut n = NodeDevices { node: "n1".into(), ..NodeDevices::default() };
        let pool = n.devices.entry("sriov.test".into()).or_default().entry("n1".into()).or_default();
        for (dev, id) in [("vf-1", "0000:00:1e.1"), ("vf-2", "0000:00:1e.0")] {
            pool.insert(
                dev.into(),
                Device { resource_name: Some("braid.test/dravf".into()), device_id: Some(id.into()) },
            );
        }
        n.devices
            .entry("gpu.test".into())
            .or_default()
            .entry("n1".into())
            .or_default()
            .insert("g0".into(), Device::default());
        n.write(&record).unwrap();
        let r = resolve(&found, &record, &mut devices);
        assert_eq!(devices["braid.test/dravf"], ["0000:00:1e.0", "0000:00:1e.1", "0000:00:1f.0"]);
        let u = r.unresolved.unwrap();
        assert!(u.contains("sriov.test/n1/vf-9 (claim a/late)") && !u.contains("g0") && u.contains("node n1"), "{u}");
        let g = r.listed.iter().find(|e| e["device"] == "g0").unwrap();
        assert!(g.get("resourceName").is_none(), "{g}");
        let v = r.listed.iter().find(|e| e["device"] == "vf-1").unwrap();
        assert_eq!(v["deviceID"], "0000:00:1e.1");

        // No DRA device: the record is not even read.
        let mut d = Devices::new();
        assert_eq!(resolve(&[], Path::new("/nonexistent"), &mut d), Resolved::default());
    }
}
