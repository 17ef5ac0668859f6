//! The node's DRA devices record ([`braid_attach::dra_devices`]), kept from one watch of this
//! node's ResourceSlices (every driver's; field selector `spec.nodeName=<node>`): for each
//! device, Multus's two attributes `k8s.cni.cncf.io/resourceName` and
//! `k8s.cni.cncf.io/deviceID` when it carries them. The delegator's helper matches the pod's DRA
//! devices (the kubelet's PodResources answer) with it, so that a network whose NAD names such a
//! resource gets the device's ID — what Multus 4.3.1 asks the API server for on every ADD
//! (multus-cni `pkg/draclient/draclient.go`: GET each claim, LIST the node's slices of each
//! driver), here one watch per node and no request on the ADD path.
//!
//! Every driver's slices, braid's own included: the helper can then tell a device the agent has
//! not seen (yet) from one without the attributes (skipped, as Multus skips it) without knowing
//! the drivers' names. Only each pool's newest generation counts (the scheduler ignores a pool's
//! older slices too: they are being replaced). The record is written after the first full list
//! and after each change that changes it (the same record is not written again); until the
//! first list the one on disk stays (after a reboot, pods may start before it).

use super::Agent;
use crate::log_changed;
use braid_attach::dra_devices::{Device, NodeDevices, DEVICE_ID_ATTR, RESOURCE_NAME_ATTR};
use futures::StreamExt;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The node's record from its slices (by name): each (driver, pool) from its newest generation.
pub fn record(node: &str, slices: &BTreeMap<String, ResourceSlice>) -> NodeDevices {
    let mut newest: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for s in slices.values() {
        let g = newest.entry((s.spec.driver.as_str(), s.spec.pool.name.as_str())).or_insert(i64::MIN);
        *g = (*g).max(s.spec.pool.generation);
    }
    let mut out = NodeDevices { node: node.to_string(), ..NodeDevices::default() };
    for s in slices.values() {
        let (driver, pool) = (s.spec.driver.as_str(), s.spec.pool.name.as_str());
        if newest.get(&(driver, pool)) != Some(&s.spec.pool.generation) {
            continue;
        }
        let devices = out.devices.entry(driver.to_string()).or_default().entry(pool.to_string()).or_default();
        for d in s.spec.devices.iter().flatten() {
            let attr = |k: &str| d.attributes.as_ref().and_then(|a| a.get(k)).and_then(|a| a.string.clone());
            devices.insert(
                d.name.clone(),
                Device { resource_name: attr(RESOURCE_NAME_ATTR), device_id: attr(DEVICE_ID_ATTR) },
            );
        }
    }
    out
}

/// Watches the node's ResourceSlices until the process ends, keeping the record at `file`
/// (as the agent reaches it). The watcher lists, then watches; on `410 Gone` it lists again; on
/// any error it retries with kube-runtime's default backoff, the record untouched meanwhile.
pub async fn run(client: kube::Client, agent: Agent, file: PathBuf) {
    let api: Api<ResourceSlice> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("spec.nodeName={}", agent.node));
    let stream = watcher::watcher(api, config).default_backoff();
    futures::pin_mut!(stream);
    let (mut slices, mut listing) = (BTreeMap::<String, ResourceSlice>::new(), None::<BTreeMap<String, ResourceSlice>>);
    let (mut written, mut failing) = (None::<NodeDevices>, None::<String>);
    let name = |s: &ResourceSlice| s.metadata.name.clone().unwrap_or_default();
    while let Some(item) = stream.next().await {
        match item {
            Ok(Event::Init) => {
                listing = Some(BTreeMap::new());
                continue;
            }
            Ok(Event::InitApply(s)) => {
                if let Some(l) = listing.as_mut() {
                    l.insert(name(&s), s);
                }
                continue;
            }
            Ok(Event::InitDone) => slices = listing.take().unwrap_or_default(),
            Ok(Event::Apply(s)) => {
                slices.insert(name(&s), s);
            }
            Ok(Event::Delete(s)) => {
                slices.remove(&name(&s));
            }
            Err(e) => {
                log_changed(
                    &mut failing,
                    format!(
                        "DRA devices: ResourceSlices of node {}: {e}; retrying with backoff, {} stays as it is",
                        agent.node,
                        file.display()
                    ),
                );
                continue;
            }
        }
        failing = None;
        let now = record(&agent.node, &slices);
        if written.as_ref() == Some(&now) {
            continue;
        }
        match now.write(&file) {
            Ok(()) => {
                if written.is_none() {
                    let n: usize = now.devices.values().flat_map(|p| p.values()).map(BTreeMap::len).sum();
                    crate::log(&format!(
                        "DRA devices: {n} device(s) of node {}'s ResourceSlices into {}; watching",
                        agent.node,
                        file.display()
                    ));
                }
                written = Some(now);
            }
            Err(e) => crate::log(&format!("DRA devices: cannot write {}: {e}", file.display())),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1 as r;

    fn slice(name: &str, driver: &str, generation: i64, devices: &[(&str, Option<&str>)]) -> ResourceSlice {
        ResourceSlice {
            metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: r::ResourceSliceSpec {
                driver: driver.into(),
                node_name: Some("n1".into()),
                pool: r::ResourcePool { name: "n1".into(), generation, resource_slice_count: 1 },
                devices: Some(
                    devices
                        .iter()
                        .map(|(d, id)| r::Device {
                            name: d.to_string(),
                            attributes: id.map(|id| {
                                [(RESOURCE_NAME_ATTR, "braid.test/dravf"), (DEVICE_ID_ATTR, id), ("other", "x")]
                                    .into_iter()
                                    .map(|(k, v)| {
                                        (
                                            k.to_string(),
                                            r::DeviceAttribute { string: Some(v.into()), ..Default::default() },
                                        )
                                    })
                                    .collect()
                            }),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            },
        }
    }

    #[test]
    fn every_drivers_devices_of_each_pools_newest_generation_with_multus_attributes() {
        let mut s = BTreeMap::new();
        for x in [
            slice("a", "sriov.test", 2, &[("vf-0", Some("0000:00:1e.0"))]),
            slice("b", "sriov.test", 1, &[("old", Some("0000:00:1e.9"))]),
            slice("c", "gpu.test", 1, &[("g0", None)]),
        ] {
            s.insert(x.metadata.name.clone().unwrap(), x);
        }
        let n = record("n1", &s);
        assert_eq!(n.node, "n1");
        assert_eq!(
            n.get("sriov.test", "n1", "vf-0").and_then(Device::multus),
            Some(("braid.test/dravf", "0000:00:1e.0"))
        );
        assert_eq!(n.get("sriov.test", "n1", "old"), None, "an older generation of the pool");
        assert_eq!(n.get("gpu.test", "n1", "g0"), Some(&Device::default()), "listed without attributes");
    }
}
