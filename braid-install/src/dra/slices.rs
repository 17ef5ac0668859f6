//! This node's ResourceSlices (resource.k8s.io/v1): every network the node can attach
//! ([`super::inventory`]) as one device of the pool named after the node, for the driver
//! `--dra-driver-name` (`net.braid-cni.io`), so that the scheduler can allocate a pod's
//! ResourceClaim a network and place the pod on a node that has it.
//!
//! **The objects.** `spec.driver` the driver, `spec.nodeName` the node, `spec.pool` {name: the
//! node, generation, resourceSliceCount}; at most [`MAX_DEVICES`] devices each (the API's
//! `ResourceSliceMaxDevices`, k8s.io/api resource/v1 types.go; none of the "advanced" features
//! that lower it to 64 is used), named `<node>-<driver>`, then `<node>-<driver>-1`, `-2`…
//! ([`slice_name`]). Each device carries the string attributes `network` (`<namespace>/<name>`),
//! `namespace`, `name`, `type` (the first plugin's) and `resourceName` (when the network names
//! one) — unqualified, so in the driver's domain (`device.attributes["net.braid-cni.io"].network`
//! in a CEL selector); a value longer than the API's 64 characters (`network` of two long
//! labels) is left out, the others still select it.
//!
//! **Shared networks.** A network is not used up by a pod: each device has
//! `allowMultipleAllocations: true` and the consumable capacity `attachments` (value
//! `--dra-attachments`, 1024; requestPolicy default 1, validValues `["1"]`): KEP-5075, the
//! DRAConsumableCapacity feature gate, beta and on by default from Kubernetes 1.36. On 1.34 and
//! 1.35, where it is alpha and off, the API server silently drops both fields, and each network
//! becomes exclusive: one claim on the node at a time. The publisher sees that in the object
//! the API server returns and logs a loud warning (once per agent).
//!
//! **Ownership.** Each slice's ownerReference is this node's Node object (one GET at start), so
//! deleting the node deletes its slices (the garbage collector). At start the publisher lists
//! the slices of this node and driver (`fieldSelector spec.nodeName=<node>,spec.driver=<driver>`)
//! and adopts them: when they already are what it would write, nothing is written; otherwise
//! they are replaced (server-side apply, field manager = the driver), and any it no longer needs
//! is deleted.
//!
//! **Following the mirror.** The inventory is scanned again when networksDir, one of its
//! namespace directories or the CNI bin dir changes (inotify, 200 ms to settle) and on the
//! agent's periodic refresh (for lost events). A slice is written only when the devices
//! changed: then `pool.generation` is bumped and every slice of the pool is written with it
//! (the scheduler uses only a pool's newest generation, complete), then the slices no longer
//! needed are deleted. A node that offers no network has no slice. Failed requests are retried
//! with the agent's backoff ([`crate::api::retry`]: 1 s doubling to 5 min; a change of the
//! devices is tried at once), each bounded by `--api-timeout` and counted
//! ([`crate::api::call`]).

use super::config::Dra;
use super::inventory::{self, Device};
use crate::api::call::{call, Failure};
use crate::api::retry::Retries;
use crate::api::Agent;
use crate::log_changed;
use crate::metrics::Verb;
use futures::StreamExt;
use inotify::{Inotify, WatchMask};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1 as resource;
use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::time::Instant;

/// At most this many devices in one slice (`ResourceSliceMaxDevices`).
pub const MAX_DEVICES: usize = 128;
/// The devices' consumable capacity: how many claims may share the network at once.
pub const CAPACITY: &str = "attachments";
/// A string attribute's longest value (`DeviceAttributeMaxValueLength`).
pub const MAX_ATTRIBUTE_VALUE: usize = 64;
/// An object name's longest (a DNS subdomain).
const MAX_NAME: usize = 253;
/// The resource's name in `braid_install_api_requests_total`.
const RESOURCE: &str = "resourceslices";
/// How long a burst of file changes (a mirror pass, a plugin install) may take before the
/// inventory is scanned.
const SETTLE: Duration = Duration::from_millis(200);

/// The name of slice `index` of `node`'s pool: `<node>-<driver>`, `<node>-<driver>-<index>`
/// beyond the first. A DNS subdomain (node names are, and so is the driver's); when a node's
/// name is so long that the whole would pass 253 characters, the node part is cut and the
/// FNV-1a 32 hash of the whole node name added, so that two long node names never meet.
pub fn slice_name(node: &str, driver: &str, index: usize) -> String {
    let suffix = if index == 0 { format!("-{driver}") } else { format!("-{driver}-{index}") };
    if node.len() + suffix.len() <= MAX_NAME {
        return format!("{node}{suffix}");
    }
    let hash = format!("-{:08x}", inventory::fnv1a32(node.as_bytes()));
    let keep = MAX_NAME.saturating_sub(suffix.len() + hash.len());
    let cut: String = node.chars().take(keep).collect();
    format!("{}{hash}{suffix}", cut.trim_end_matches(['-', '.']))
}

/// The slice device of network `d`.
pub fn device(d: &Device, attachments: u64) -> resource::Device {
    let mut attributes = BTreeMap::new();
    let mut string = |key: &str, value: &str| {
        if value.len() <= MAX_ATTRIBUTE_VALUE {
            attributes.insert(
                key.to_string(),
                resource::DeviceAttribute { string: Some(value.to_string()), ..Default::default() },
            );
        }
    };
    string("network", &d.network);
    string("namespace", &d.namespace);
    string("name", &d.net_name);
    string("type", &d.plugin_type);
    if let Some(r) = &d.resource_name {
        string("resourceName", r);
    }
    let one = Quantity("1".into());
    let capacity = resource::DeviceCapacity {
        value: Quantity(attachments.to_string()),
        request_policy: Some(resource::CapacityRequestPolicy {
            default: Some(one.clone()),
            valid_values: Some(vec![one]),
            valid_range: None,
        }),
    };
    resource::Device {
        name: d.name.clone(),
        allow_multiple_allocations: Some(true),
        attributes: Some(attributes),
        capacity: Some(BTreeMap::from([(CAPACITY.to_string(), capacity)])),
        ..Default::default()
    }
}

/// The pool's slices as they should be, by name: the devices in inventory order, at most
/// [`MAX_DEVICES`] a slice; none when there is no device.
pub fn desired(node: &str, dra: &Dra, devices: &[Device]) -> BTreeMap<String, Vec<resource::Device>> {
    devices
        .chunks(MAX_DEVICES)
        .enumerate()
        .map(|(i, chunk)| {
            (slice_name(node, &dra.driver, i), chunk.iter().map(|d| device(d, dra.attachments)).collect())
        })
        .collect()
}

/// The ownerReference to this node's Node object.
pub fn owner(node: &Node) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node.metadata.name.clone().unwrap_or_default(),
        uid: node.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

/// The ResourceSlice object of slice `name` with these devices.
pub fn slice(
    node: &str,
    driver: &str,
    name: &str,
    devices: Vec<resource::Device>,
    generation: i64,
    count: usize,
    owner: &OwnerReference,
) -> ResourceSlice {
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            owner_references: Some(vec![owner.clone()]),
            ..Default::default()
        },
        spec: resource::ResourceSliceSpec {
            driver: driver.to_string(),
            node_name: Some(node.to_string()),
            pool: resource::ResourcePool {
                name: node.to_string(),
                generation,
                resource_slice_count: i64::try_from(count).unwrap_or(i64::MAX),
            },
            devices: Some(devices),
            ..Default::default()
        },
    }
}

/// What the publisher last wrote (or found at start) of this node's pool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pool {
    /// The highest `pool.generation` written or found.
    pub generation: i64,
    /// The slices that may exist, by name, with the devices they hold.
    pub slices: BTreeMap<String, Vec<resource::Device>>,
    /// Whether they are exactly what this publisher writes (one generation, its count, its
    /// names, owned by the node): if not, the next plan writes them all again.
    pub consistent: bool,
}

/// The writes that bring the pool to the devices.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The pool's new generation.
    pub generation: i64,
    /// The slices to apply (all of the pool's: each carries the generation).
    pub write: Vec<ResourceSlice>,
    /// The slices to delete, after the writes.
    pub delete: Vec<String>,
    /// What the pool is once all of it succeeded.
    desired: BTreeMap<String, Vec<resource::Device>>,
}

impl Pool {
    /// The pool as the start-up list found it: the slices of this node and driver (another
    /// agent's, an earlier version's).
    pub fn adopt(node: &str, dra: &Dra, found: &[ResourceSlice], owner: &OwnerReference) -> Pool {
        let generation = found.iter().map(|s| s.spec.pool.generation).max().unwrap_or(0);
        let names: BTreeSet<String> = found.iter().filter_map(|s| s.metadata.name.clone()).collect();
        let ours: BTreeSet<String> = (0..found.len()).map(|i| slice_name(node, &dra.driver, i)).collect();
        let consistent = names == ours
            && found.iter().all(|s| {
                s.spec.pool.name == node
                    && s.spec.pool.generation == generation
                    && usize::try_from(s.spec.pool.resource_slice_count).ok() == Some(found.len())
                    && s.spec.node_name.as_deref() == Some(node)
                    && s.metadata.owner_references.as_deref() == Some(std::slice::from_ref(owner))
            });
        let slices = found
            .iter()
            .filter_map(|s| Some((s.metadata.name.clone()?, s.spec.devices.clone().unwrap_or_default())))
            .collect();
        Pool { generation, slices, consistent }
    }

    /// What to write for `devices`; `None` when the pool holds them already.
    pub fn plan(&self, node: &str, dra: &Dra, devices: &[Device], owner: &OwnerReference) -> Option<Plan> {
        let desired = desired(node, dra, devices);
        if self.consistent && self.slices == desired {
            return None;
        }
        let generation = self.generation.saturating_add(1);
        let write = desired
            .iter()
            .map(|(name, devs)| slice(node, &dra.driver, name, devs.clone(), generation, desired.len(), owner))
            .collect();
        let delete = self.slices.keys().filter(|n| !desired.contains_key(*n)).cloned().collect();
        Some(Plan { generation, write, delete, desired })
    }

    /// Every request of `plan` succeeded.
    pub fn published(&mut self, plan: Plan) {
        *self = Pool { generation: plan.generation, slices: plan.desired, consistent: true };
    }

    /// Some request of `plan` failed: what it wrote may exist, at its generation, and the
    /// next plan writes everything again under a newer one.
    pub fn failed(&mut self, plan: &Plan) {
        self.generation = self.generation.max(plan.generation);
        for name in plan.desired.keys() {
            self.slices.entry(name.clone()).or_default();
        }
        self.consistent = false;
    }
}

/// Whether the API server kept the devices shareable: `false` when it dropped
/// `allowMultipleAllocations` (DRAConsumableCapacity off).
pub fn kept_shared(returned: &ResourceSlice) -> bool {
    returned.spec.devices.iter().flatten().all(|d| d.allow_multiple_allocations == Some(true))
}

/// The warning for a cluster without consumable capacity.
fn exclusive_warning(name: &str) -> String {
    format!(
        "WARNING: DRA: the API server dropped allowMultipleAllocations and the capacity {CAPACITY:?} from ResourceSlice {name}: \
         its DRAConsumableCapacity feature gate is off (the default of Kubernetes 1.34 and 1.35; on from 1.36). \
         Each network is then EXCLUSIVE: on this node only one ResourceClaim at a time can be allocated it. \
         Turn the gate on (kube-apiserver, kube-scheduler, kubelet) for networks that pods share"
    )
}

/// The publisher's state across attempts.
struct Publisher {
    node: String,
    dra: Dra,
    owner: Option<OwnerReference>,
    pool: Option<Pool>,
    retries: Retries,
    failing: Option<String>,
    skipped: BTreeMap<String, String>,
    warned: bool,
}

/// Publishes this node's slices until the process ends.
pub async fn run(client: kube::Client, agent: Agent, dra: Dra, seen: inventory::Seen) {
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client);
    let mut p = Publisher {
        node: agent.node.clone(),
        dra,
        owner: None,
        pool: None,
        retries: Retries::default(),
        failing: None,
        skipped: BTreeMap::new(),
        warned: false,
    };
    let inotify = Inotify::init();
    let mut buffer = [0u8; 4096];
    let mut events = match inotify.and_then(|i| i.into_event_stream(&mut buffer[..])) {
        Ok(s) => Some(s),
        Err(e) => {
            crate::log(&format!(
                "DRA: cannot watch the networks and the CNI bin dir ({e}); scanning them every {} s instead",
                agent.refresh.as_secs()
            ));
            None
        }
    };
    // This node's slices of the driver, watched: the kubelet deletes every slice of its node
    // when it starts (`pkg/kubelet/cm/dra/plugin` wipes them; seen on the real node: a kubelet
    // restart left node2 with none), and anyone may delete or edit one. A slice deleted, or one
    // of another generation than the publisher wrote, sends it back to a fresh list of what
    // exists, then to writing what is missing — as the Go helper's resourceslice controller
    // does from its informer. After a watch gap the relist does the same.
    let own = watcher::Config::default().fields(&format!("spec.nodeName={},spec.driver={}", p.node, p.dra.driver));
    let watched = watcher::watcher(slices.clone(), own).default_backoff();
    futures::pin_mut!(watched);
    let mut first_list = true;
    let mut refresh = tokio::time::interval(agent.refresh);
    refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is at once: the start-up scan.
    let mut scan_at: Option<Instant> = None;
    crate::log(&format!(
        "DRA: driver {}: publishing node {}'s networks (from {}, plugins in {}) as ResourceSlice devices",
        p.dra.driver,
        p.node,
        agent.networks.display(),
        p.dra.cni_bin_dir.display()
    ));
    loop {
        let retry_at = p.retries.next();
        tokio::select! {
            Some(_) = async { match events.as_mut() { Some(s) => s.next().await, None => std::future::pending().await } } => {
                scan_at.get_or_insert_with(|| Instant::now() + SETTLE);
                continue;
            }
            Some(item) = watched.next() => {
                let stale = match item {
                    Ok(Event::Delete(o)) => {
                        crate::log(&format!(
                            "DRA: ResourceSlice {} was deleted (by the kubelet at its start, or by hand); writing the pool again",
                            o.metadata.name.as_deref().unwrap_or_default()
                        ));
                        true
                    }
                    Ok(Event::Apply(o)) => p.pool.as_ref().is_some_and(|pool| o.spec.pool.generation != pool.generation),
                    Ok(Event::InitDone) => {
                        agent.metrics.api(Verb::list, RESOURCE, "ok");
                        !std::mem::replace(&mut first_list, false)
                    }
                    Ok(_) => false,
                    Err(_) => false,
                };
                if stale {
                    p.pool = None;
                    scan_at.get_or_insert_with(|| Instant::now() + SETTLE);
                }
                continue;
            }
            _ = refresh.tick() => {}
            _ = sleep_until(scan_at), if scan_at.is_some() => {}
            _ = sleep_until(retry_at), if retry_at.is_some() => {}
        }
        scan_at = None;
        if let Some(s) = events.as_ref() {
            watch(&mut s.watches(), &agent, &p.dra);
        }
        let inv = inventory::inventory(&agent.networks, &p.dra.cni_bin_dir);
        seen.remember(&inv.devices);
        p.log_skipped(&inv.skipped);
        p.sync(&agent, &nodes, &slices, &inv.devices).await;
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Watches networksDir, each namespace directory in it and the bin dir (adding a watch that
/// exists is a no-op; a directory that does not exist yet is watched at a later scan).
fn watch(w: &mut inotify::Watches, agent: &Agent, dra: &Dra) {
    let mask = WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_TO
        | WatchMask::MOVED_FROM
        | WatchMask::CLOSE_WRITE
        | WatchMask::ATTRIB;
    let _ = w.add(&agent.networks, mask);
    let _ = w.add(&dra.cni_bin_dir, mask);
    for ns in inventory::subdirectories(&agent.networks) {
        let _ = w.add(agent.networks.join(ns), mask);
    }
}

impl Publisher {
    /// Logs each network newly not offered, or not offered for another reason now.
    fn log_skipped(&mut self, skipped: &BTreeMap<String, String>) {
        for (net, why) in skipped {
            if self.skipped.get(net) != Some(why) {
                crate::log(&format!("DRA: network {net} is not offered on node {}: {why}", self.node));
            }
        }
        self.skipped = skipped.clone();
    }

    /// One attempt to bring the slices to `devices`; a failure waits for its backoff.
    async fn sync(&mut self, agent: &Agent, nodes: &Api<Node>, slices: &Api<ResourceSlice>, devices: &[Device]) {
        let key: Option<String> = Some(devices.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(","));
        let now = Instant::now();
        if !self.retries.due(&self.node, &key, now) {
            return;
        }
        match self.attempt(agent, nodes, slices, devices).await {
            Ok(()) => {
                if self.failing.take().is_some() {
                    crate::log("DRA: the ResourceSlices are published again");
                }
                self.retries.forget(&self.node);
            }
            Err(why) => {
                let node = self.node.clone();
                self.retries.failed(&node, key, &why, Instant::now());
                log_changed(&mut self.failing, format!("DRA: {why}; retrying with backoff"));
            }
        }
    }

    async fn attempt(
        &mut self,
        agent: &Agent,
        nodes: &Api<Node>,
        slices: &Api<ResourceSlice>,
        devices: &[Device],
    ) -> Result<(), String> {
        let owner = match &self.owner {
            Some(o) => o.clone(),
            None => {
                let n = call(agent, Verb::get, "nodes", nodes.get(&self.node))
                    .await
                    .map_err(|e| format!("cannot read Node {} (the slices' owner): {e}", self.node))?;
                let o = owner(&n);
                self.owner = Some(o.clone());
                o
            }
        };
        if self.pool.is_none() {
            let lp =
                ListParams::default().fields(&format!("spec.nodeName={},spec.driver={}", self.node, self.dra.driver));
            let found = call(agent, Verb::list, RESOURCE, slices.list(&lp))
                .await
                .map_err(|e| format!("cannot list this node's ResourceSlices: {e}"))?;
            let pool = Pool::adopt(&self.node, &self.dra, &found.items, &owner);
            if !found.items.is_empty() {
                crate::log(&format!(
                    "DRA: found {} ResourceSlice(s) of node {} at pool generation {}: {}",
                    found.items.len(),
                    self.node,
                    pool.generation,
                    if pool.consistent { "adopted" } else { "to be replaced" }
                ));
            }
            self.pool = Some(pool);
        }
        let pool = self.pool.as_mut().unwrap_or_else(|| unreachable!("set above"));
        let Some(plan) = pool.plan(&self.node, &self.dra, devices, &owner) else { return Ok(()) };
        let result = apply(agent, slices, &self.dra.driver, &plan).await;
        match result {
            Ok(returned) => {
                let names: Vec<String> = plan.write.iter().filter_map(|s| s.metadata.name.clone()).collect();
                crate::log(&format!(
                    "DRA: pool {} at generation {}: {} network(s) in {} ResourceSlice(s){}{}",
                    self.node,
                    plan.generation,
                    devices.len(),
                    names.len(),
                    if names.is_empty() { String::new() } else { format!(" ({})", names.join(", ")) },
                    if plan.delete.is_empty() {
                        String::new()
                    } else {
                        format!("; deleted {}", plan.delete.join(", "))
                    }
                ));
                if let Some(s) = returned.iter().find(|s| !kept_shared(s)) {
                    if !self.warned {
                        self.warned = true;
                        crate::log(&exclusive_warning(s.metadata.name.as_deref().unwrap_or_default()));
                    }
                }
                pool.published(plan);
                Ok(())
            }
            Err(why) => {
                pool.failed(&plan);
                Err(why)
            }
        }
    }
}

/// Applies `plan`'s slices, then deletes what it drops; the objects the API server returned.
async fn apply(
    agent: &Agent,
    slices: &Api<ResourceSlice>,
    driver: &str,
    plan: &Plan,
) -> Result<Vec<ResourceSlice>, String> {
    let pp = PatchParams::apply(driver).force();
    let mut returned = Vec::new();
    for s in &plan.write {
        let name = s.metadata.name.clone().unwrap_or_default();
        let got = call(agent, Verb::patch, RESOURCE, slices.patch(&name, &pp, &Patch::Apply(s)))
            .await
            .map_err(|e| format!("cannot write ResourceSlice {name}: {e}"))?;
        returned.push(got);
    }
    for name in &plan.delete {
        match call(agent, Verb::delete, RESOURCE, slices.delete(name, &DeleteParams::default())).await {
            Ok(_) => {}
            Err(e @ Failure::Api(_)) if e.code() == Some(404) => {}
            Err(e) => return Err(format!("cannot delete ResourceSlice {name}: {e}")),
        }
    }
    Ok(returned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;
    use inventory::device_name;
    use serde_json::json;

    fn dra() -> Dra {
        Dra::new(&Options { dra: true, kubernetes_api: true, ..Options::default() }).unwrap()
    }

    fn net(ns: &str, name: &str) -> Device {
        Device {
            name: device_name(ns, name),
            network: format!("{ns}/{name}"),
            namespace: ns.into(),
            net_name: name.into(),
            plugin_type: "macvlan".into(),
            resource_name: None,
        }
    }

    fn nets(n: usize) -> Vec<Device> {
        (0..n).map(|i| net("t", &format!("n{i:03}"))).collect()
    }

    fn node_owner() -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: "node1".into(),
            uid: "uid-1".into(),
            controller: Some(true),
            block_owner_deletion: None,
        }
    }

    #[test]
    fn the_slice_is_what_the_api_takes() {
        let mut d = net("tenant-a", "side");
        d.resource_name = Some("intel.com/sriov_a".into());
        let devs = desired("node1", &dra(), &[d.clone()]);
        let (name, devices) = devs.into_iter().next().unwrap();
        let s = slice("node1", "net.braid-cni.io", &name, devices, 3, 1, &node_owner());
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {
                    "name": "node1-net.braid-cni.io",
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node1", "uid": "uid-1", "controller": true}]
                },
                "spec": {
                    "driver": "net.braid-cni.io",
                    "nodeName": "node1",
                    "pool": {"name": "node1", "generation": 3, "resourceSliceCount": 1},
                    "devices": [{
                        "name": d.name,
                        "allowMultipleAllocations": true,
                        "attributes": {
                            "name": {"string": "side"},
                            "namespace": {"string": "tenant-a"},
                            "network": {"string": "tenant-a/side"},
                            "resourceName": {"string": "intel.com/sriov_a"},
                            "type": {"string": "macvlan"}
                        },
                        "capacity": {"attachments": {"value": "1024", "requestPolicy": {"default": "1", "validValues": ["1"]}}}
                    }]
                }
            })
        );
        // No resourceName key without one.
        let plain = device(&net("t", "x"), 5);
        assert!(!plain.attributes.as_ref().unwrap().contains_key("resourceName"));
        assert_eq!(plain.capacity.unwrap()[CAPACITY].value, Quantity("5".into()));
    }

    /// Values over the API's 64 characters are left out; the device is still offered.
    #[test]
    fn an_attribute_too_long_for_the_api_is_left_out() {
        let d = net(&"n".repeat(40), &"m".repeat(40));
        let a = device(&d, 1).attributes.unwrap();
        assert!(!a.contains_key("network"));
        assert_eq!(a["namespace"].string.as_deref(), Some("n".repeat(40).as_str()));
        assert!(a.values().all(|v| v.string.as_ref().unwrap().len() <= MAX_ATTRIBUTE_VALUE));
    }

    #[test]
    fn slice_names_are_dns_subdomains() {
        assert_eq!(slice_name("node1", "net.braid-cni.io", 0), "node1-net.braid-cni.io");
        assert_eq!(slice_name("node1", "net.braid-cni.io", 2), "node1-net.braid-cni.io-2");
        let subdomain = |s: &str| s.len() <= MAX_NAME && s.split('.').all(cni_types::validate::is_dns_label);
        let long = format!("{}.{}.{}.{}", "a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(61));
        assert_eq!(long.len(), 253);
        for i in [0, 1, 17] {
            let n = slice_name(&long, "net.braid-cni.io", i);
            assert!(subdomain(&n), "{n} ({})", n.len());
        }
        let other = format!("{}e", &long[..252]);
        assert_ne!(slice_name(&long, "net.braid-cni.io", 0), slice_name(&other, "net.braid-cni.io", 0));
    }

    #[test]
    fn devices_are_chunked_at_128_a_slice() {
        let d = dra();
        assert!(desired("node1", &d, &[]).is_empty(), "no network, no slice");
        let one = desired("node1", &d, &nets(MAX_DEVICES));
        assert_eq!(one.keys().collect::<Vec<_>>(), ["node1-net.braid-cni.io"]);
        let three = desired("node1", &d, &nets(2 * MAX_DEVICES + 1));
        let sizes: Vec<(&str, usize)> = three.iter().map(|(n, v)| (n.as_str(), v.len())).collect();
        assert_eq!(
            sizes,
            [("node1-net.braid-cni.io", 128), ("node1-net.braid-cni.io-1", 128), ("node1-net.braid-cni.io-2", 1)]
        );
        // In inventory order: the first slice has the first 128.
        assert_eq!(three["node1-net.braid-cni.io-1"][0].name, device_name("t", "n128"));
        let plan = Pool { consistent: true, ..Pool::default() }.plan("node1", &d, &nets(200), &node_owner()).unwrap();
        assert!(plan.write.iter().all(|s| s.spec.pool.resource_slice_count == 2 && s.spec.pool.generation == 1));
    }

    #[test]
    fn the_generation_is_bumped_only_when_the_devices_change() {
        let (d, o) = (dra(), node_owner());
        // A fresh node: nothing found, nothing offered, nothing written.
        let mut pool = Pool::adopt("node1", &d, &[], &o);
        assert!(pool.plan("node1", &d, &[], &o).is_none());
        let plan = pool.plan("node1", &d, &nets(2), &o).unwrap();
        assert_eq!((plan.generation, plan.write.len(), plan.delete.len()), (1, 1, 0));
        pool.published(plan);
        assert!(pool.plan("node1", &d, &nets(2), &o).is_none(), "unchanged: no write");
        // A network added: generation 2, the one slice written again.
        let plan = pool.plan("node1", &d, &nets(3), &o).unwrap();
        assert_eq!(plan.generation, 2);
        pool.published(plan);
        // Past 128: both slices at generation 3.
        let plan = pool.plan("node1", &d, &nets(130), &o).unwrap();
        assert_eq!(plan.write.iter().map(|s| s.spec.pool.generation).collect::<Vec<_>>(), [3, 3]);
        pool.published(plan);
        // Back under: one slice written, the second deleted.
        let plan = pool.plan("node1", &d, &nets(3), &o).unwrap();
        assert_eq!((plan.generation, plan.write.len()), (4, 1));
        assert_eq!(plan.delete, ["node1-net.braid-cni.io-1"]);
        // It failed part-way: the next attempt writes again under a newer generation and
        // still deletes what may exist.
        pool.failed(&plan);
        let again = pool.plan("node1", &d, &nets(3), &o).unwrap();
        assert_eq!(again.generation, 5);
        assert_eq!(again.delete, ["node1-net.braid-cni.io-1"]);
        pool.published(again);
        // Nothing offered any more: every slice deleted.
        let plan = pool.plan("node1", &d, &[], &o).unwrap();
        assert!(plan.write.is_empty());
        assert_eq!(plan.delete, ["node1-net.braid-cni.io"]);
    }

    #[test]
    fn a_previous_agents_slices_are_adopted_or_replaced() {
        let (d, o) = (dra(), node_owner());
        let current = Pool::adopt("node1", &d, &[], &o).plan("node1", &d, &nets(2), &o).unwrap();
        // As the API server returns them: adopted, nothing to write.
        let pool = Pool::adopt("node1", &d, &current.write, &o);
        assert!(pool.consistent && pool.generation == 1);
        assert!(pool.plan("node1", &d, &nets(2), &o).is_none());
        // Another node object's (the node was deleted and made again): replaced.
        let other = OwnerReference { uid: "uid-0".into(), ..o.clone() };
        let pool = Pool::adopt("node1", &d, &current.write, &other);
        assert_eq!(pool.plan("node1", &d, &nets(2), &o).unwrap().generation, 2);
        // A slice of a name this publisher does not write (an older layout): written anew,
        // the stray one deleted.
        let mut stray = current.write[0].clone();
        stray.metadata.name = Some("node1-old".into());
        let pool = Pool::adopt("node1", &d, &[stray], &o);
        let plan = pool.plan("node1", &d, &nets(2), &o).unwrap();
        assert_eq!(plan.delete, ["node1-old"]);
        assert_eq!(plan.write[0].metadata.name.as_deref(), Some("node1-net.braid-cni.io"));
        // An API server without consumable capacity dropped the fields: noticed.
        assert!(kept_shared(&current.write[0]));
        let mut dropped = current.write[0].clone();
        for dev in dropped.spec.devices.iter_mut().flatten() {
            dev.allow_multiple_allocations = None;
        }
        assert!(!kept_shared(&dropped));
        assert!(exclusive_warning("x").contains("DRAConsumableCapacity"));
    }
}
