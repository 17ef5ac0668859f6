//! A claim-backed attachment reported on its ResourceClaim (KEP-4817): once the delegator's ADD
//! wrote the pod's network-status file, each of its `claims` entries becomes the claim's
//! `status.devices[]` entry for that device — a `Ready` condition and `networkData`
//! (`interfaceName`, `ips` in CIDR form, `hardwareAddress`) — so that `kubectl get
//! resourceclaim -o yaml` shows the interface, as it does for dranet's devices.
//!
//! Written with server-side apply on the claim's `status` subresource, field manager = braid's
//! driver name, forced: `status.devices` is a map list keyed by driver, pool, device and shareID
//! (k8s.io/api resource/v1 `ResourceClaimStatus.Devices`), so braid's apply owns only its own
//! entries and never touches another driver's. The apply carries `metadata.uid`: a claim deleted
//! and created again under the same name refuses it (422, the UID is immutable), as the pod's
//! patch does ([`super::status`]). On Kubernetes 1.36 the API server authorizes the change per
//! driver (`resourceclaims/driver`, verb `associated-node:patch`, the driver's name: a
//! node-bound token may write only claims allocated to its node; `pkg/registry/resource/utils.go`
//! `AuthorizedForDeviceStatus`); braid's admission policy narrows the rest
//! (`deploy/kubernetes-dra`).
//!
//! Off the ADD path: the agent sends it after the pod's network-status patch, from the same file.

use super::added::Added;
use serde_json::{json, Value};

/// A claim-backed attachment as the delegator's status file records it (`claims[]`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct ClaimEntry {
    /// The claim's namespace (the pod's).
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// The claim's UID.
    pub uid: String,
    /// The allocation result's request.
    pub request: String,
    /// The driver (braid's).
    pub driver: String,
    /// The pool (the node).
    pub pool: String,
    /// The device (the network).
    pub device: String,
    /// The share of the device.
    #[serde(rename = "shareID", default)]
    pub share_id: Option<String>,
    /// The attachment's interface in the pod.
    pub interface: String,
}

/// The condition type braid sets (dranet's and the KEP's name for a device in use).
pub const READY: &str = "Ready";

/// One claim's apply: its entries of `claims`, each with the network-status entry of its
/// interface (`doc`: the NPWG document) and the interface's CIDR addresses (`interfaces`).
/// `now` is the conditions' `lastTransitionTime` (RFC 3339).
pub fn apply(claim: &[&ClaimEntry], doc: &Value, interfaces: &[Added], now: &str) -> Option<Value> {
    let first = claim.first()?;
    let devices: Vec<Value> = claim
        .iter()
        .map(|c| {
            let entry = doc
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| e.get("interface").and_then(Value::as_str) == Some(c.interface.as_str()));
            let ips: Vec<String> = interfaces
                .iter()
                .find(|a| a.interface == c.interface)
                .map(|a| a.addresses.clone())
                .unwrap_or_default();
            // The same `networkData` the delegator writes into the claim's device metadata.
            let mac = entry.and_then(|e| e.get("mac")).and_then(Value::as_str);
            let network = braid_attach::device_metadata::network_data(&c.interface, &ips, mac);
            let mut d = json!({
                "driver": c.driver,
                "pool": c.pool,
                "device": c.device,
                "conditions": [{
                    "type": READY,
                    "status": "True",
                    "reason": "NetworkAttached",
                    "message": format!("{} attached in the pod as {} (request {})",
                        entry.and_then(|e| e.get("name")).and_then(Value::as_str).unwrap_or(&c.device), c.interface, c.request),
                    "lastTransitionTime": now,
                }],
                "networkData": network,
            });
            if let Some(s) = &c.share_id {
                d["shareID"] = s.clone().into();
            }
            d
        })
        .collect();
    Some(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": first.namespace, "name": first.name, "uid": first.uid},
        "status": {"devices": devices},
    }))
}

/// The file's entries grouped by claim (UID), in file order.
pub fn by_claim(entries: &[ClaimEntry]) -> Vec<Vec<&ClaimEntry>> {
    let mut out: Vec<Vec<&ClaimEntry>> = Vec::new();
    for e in entries {
        match out.iter_mut().find(|g| g[0].uid == e.uid) {
            Some(g) => g.push(e),
            None => out.push(vec![e]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(uid: &str, request: &str, ifname: &str) -> ClaimEntry {
        ClaimEntry {
            namespace: "tenant".into(),
            name: format!("claim-{uid}"),
            uid: uid.into(),
            request: request.into(),
            driver: "net.braid-cni.io".into(),
            pool: "node2".into(),
            device: "tenant-side-1a2b3c4d".into(),
            share_id: Some(format!("share-{request}")),
            interface: ifname.into(),
        }
    }

    #[test]
    fn each_claim_gets_its_devices_with_the_interfaces_addresses_and_mac() {
        let entries = [entry("u1", "net", "net1"), entry("u2", "a", "net2"), entry("u1", "b", "side0")];
        let groups = by_claim(&entries);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].iter().map(|e| e.request.as_str()).collect::<Vec<_>>(), ["net", "b"]);
        let doc = json!([
            {"name": "cbr0", "interface": "eth0", "ips": ["198.18.0.5"], "mac": "02:00:00:00:00:05", "default": true},
            {"name": "tenant/side", "interface": "net1", "ips": ["198.18.9.5"], "mac": "02:00:00:00:09:05"},
            {"name": "tenant/side", "interface": "side0", "ips": ["198.18.9.6"]}
        ]);
        let interfaces = [
            Added {
                interface: "net1".into(),
                network: "tenant/side".into(),
                addresses: vec!["198.18.9.5/24".into(), "2001:db8::5/64".into()],
            },
            Added { interface: "side0".into(), network: "tenant/side".into(), addresses: vec!["198.18.9.6/24".into()] },
        ];
        let a = apply(&groups[0], &doc, &interfaces, "2026-12-07T12:00:00Z").unwrap();
        assert_eq!(a["metadata"], json!({"namespace": "tenant", "name": "claim-u1", "uid": "u1"}));
        let devices = a["status"]["devices"].as_array().unwrap();
        assert_eq!(devices.len(), 2);
        assert_eq!(
            devices[0]["networkData"],
            json!({"interfaceName": "net1", "ips": ["198.18.9.5/24", "2001:db8::5/64"], "hardwareAddress": "02:00:00:00:09:05"})
        );
        assert_eq!(devices[0]["shareID"], "share-net");
        assert_eq!(devices[0]["conditions"][0]["type"], READY);
        assert_eq!(devices[0]["conditions"][0]["status"], "True");
        assert!(devices[0]["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .contains("tenant/side attached in the pod as net1"));
        // No MAC in the document: no hardwareAddress rather than an empty one (the API server
        // validates it as a MAC when present).
        assert_eq!(devices[1]["networkData"], json!({"interfaceName": "side0", "ips": ["198.18.9.6/24"]}));
        assert!(apply(&[], &doc, &interfaces, "t").is_none());
    }
}
