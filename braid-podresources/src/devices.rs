//! From the kubelet's answer to what the delegator hands out: each resource's device IDs over
//! all of the pod's containers, sorted. The kubelet returns a pod's devices in no fixed order
//! (its device manager keeps them in sets), and Multus sorts them (`types.SortDeviceIDs`,
//! multus-cni #1481) so that every reader of the same pod hands out the same ID to the same
//! selection; braid sorts byte-wise as Go's `sort.Strings` does, so both agree.

use crate::api::{ContainerDevices, PodResources};
use std::collections::BTreeMap;

/// Resource name → the pod's device IDs of it, sorted.
pub type Devices = BTreeMap<String, Vec<String>>;

/// The devices of `pod` (all containers merged, as Multus's `GetPodResourceMap` merges them).
pub fn of_pod(pod: &PodResources) -> Devices {
    let mut out = Devices::new();
    for c in &pod.containers {
        add(&mut out, &c.devices);
    }
    for ids in out.values_mut() {
        ids.sort();
    }
    out
}

/// The pod named `namespace/name` in a `List` answer (no pod: no devices).
pub fn of_listed(pods: &[PodResources], namespace: &str, name: &str) -> Devices {
    let mut out = Devices::new();
    for p in pods.iter().filter(|p| p.namespace == namespace && p.name == name) {
        for (r, ids) in of_pod(p) {
            out.entry(r).or_default().extend(ids);
        }
    }
    for ids in out.values_mut() {
        ids.sort();
    }
    out
}

fn add(out: &mut Devices, devices: &[ContainerDevices]) {
    for d in devices {
        out.entry(d.resource_name.clone()).or_default().extend(d.device_ids.iter().cloned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ContainerResources;

    fn dev(r: &str, ids: &[&str]) -> ContainerDevices {
        ContainerDevices { resource_name: r.into(), device_ids: ids.iter().map(|s| s.to_string()).collect() }
    }

    fn pod(ns: &str, name: &str, containers: Vec<Vec<ContainerDevices>>) -> PodResources {
        PodResources {
            name: name.into(),
            namespace: ns.into(),
            containers: containers
                .into_iter()
                .enumerate()
                .map(|(i, devices)| ContainerResources { name: format!("c{i}"), devices, dynamic_resources: vec![] })
                .collect(),
        }
    }

    #[test]
    fn containers_merge_and_ids_sort_as_go_sorts_strings() {
        let p = pod(
            "a",
            "p",
            vec![
                vec![dev("braid.test/vf", &["0000:00:1f.3", "0000:00:1f.1"]), dev("x/y", &["b"])],
                vec![dev("braid.test/vf", &["0000:00:0a.0"])],
            ],
        );
        let d = of_pod(&p);
        assert_eq!(d["braid.test/vf"], ["0000:00:0a.0", "0000:00:1f.1", "0000:00:1f.3"]);
        assert_eq!(d["x/y"], ["b"]);
        assert_eq!(d.len(), 2);
    }

    #[test]
    fn a_list_answer_yields_only_the_named_pod() {
        let pods = [
            pod("a", "p", vec![vec![dev("r/x", &["2"])]]),
            pod("b", "p", vec![vec![dev("r/x", &["1"])]]),
            pod("a", "q", vec![vec![dev("r/x", &["0"])]]),
        ];
        assert_eq!(of_listed(&pods, "a", "p")["r/x"], ["2"]);
        assert!(of_listed(&pods, "c", "p").is_empty());
    }
}
