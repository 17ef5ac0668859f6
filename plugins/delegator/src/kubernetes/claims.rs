//! Networks from the pod's ResourceClaims (Kubernetes DRA): braid's DRA driver, in the node
//! agent, writes a record per prepared claim and pod (`<claimsDir>/<podUID>/<claimUID>.json`,
//! [`braid_attach::claim_record`]) at `NodePrepareResources`, which the kubelet calls before the
//! pod's sandbox is created; ADD (and `delegator update`) reads the pod's records and attaches
//! their networks after the annotation's ([`super::select`]).
//!
//! Read only with `K8S_POD_UID` (the kubelet's pod UID, which containerd and CRI-O pass): a pod
//! without claims costs one failed `open(2)` of its directory.

use super::error::SelectionError;
use super::Pod;
use braid_attach::claim_record::{self, Claim, ClaimRecord};
use braid_attach::device_metadata;
use cni_types::error::CniError;
use serde_json::Value;
use std::path::Path;

/// What the status file's `claims` says of a claim-backed attachment (with its interface):
/// what the node agent needs to write the claim's `status.devices` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimNetwork {
    /// The claim.
    pub claim: Claim,
    /// The claim's request.
    pub request: String,
    /// The allocation's driver, pool and device.
    pub driver: String,
    /// See `driver`.
    pub pool: String,
    /// See `driver`.
    pub device: String,
    /// The allocation's `shareID`, when it has one.
    pub share_id: Option<String>,
    /// Its request's KEP-5304 metadata file, when the driver writes one.
    pub metadata: Option<String>,
}

/// Fills each claim-backed attachment's KEP-5304 metadata file with its interface's
/// `networkData` (`claims`: the attachments with their interfaces; `doc`: the network-status
/// document, for MACs; `addresses`: each interface's CIDR addresses), before the sandbox's
/// containers start ([`braid_attach::device_metadata`]). A file that cannot be filled fails
/// the ADD (code 5, naming the claim): the containers that mount it would find no interface.
pub fn fill_metadata(claims: &[(&ClaimNetwork, &str)], doc: &Value, addresses: &Value) -> Result<(), CniError> {
    let mut files: Vec<&str> = claims.iter().filter_map(|(c, _)| c.metadata.as_deref()).collect();
    files.sort_unstable();
    files.dedup();
    for file in files {
        let mut networks = Vec::new();
        let mut claim = None;
        for (c, ifname) in claims.iter().filter(|(c, _)| c.metadata.as_deref() == Some(file)) {
            let ips: Vec<String> = addresses[*ifname]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(str::to_string))
                .collect();
            let mac = doc
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| e["interface"].as_str() == Some(*ifname))
                .and_then(|e| e["mac"].as_str());
            networks.push((c.pool.as_str(), c.device.as_str(), device_metadata::network_data(ifname, &ips, mac)));
            claim = Some(&c.claim);
        }
        device_metadata::fill(Path::new(file), &networks).map_err(|e| {
            let c = claim.map(|c| format!("{}/{}", c.namespace, c.name)).unwrap_or_default();
            CniError::new(cni_types::error::IO_FAILURE, format!("claim {c}: {e}"))
        })?;
    }
    Ok(())
}

/// The pod's claim records, sorted by claim name; none without `K8S_POD_UID` or with one that is
/// no UID (no claim can be recorded for it).
pub fn read(dir: &Path, pod: &Pod) -> Result<Vec<ClaimRecord>, SelectionError> {
    let Some(uid) = pod.uid.as_deref().filter(|u| claim_record::valid_uid(u)) else {
        return Ok(Vec::new());
    };
    claim_record::read_pod(dir, uid).map_err(|e| SelectionError::ClaimRecords {
        pod_uid: uid.to_string(),
        retry: e.is_io(),
        why: e.to_string(),
    })
}

/// The selector's `claim` of a claim's request: `<claimUID>/<request>`.
pub fn key(claim: &Claim, request: &str) -> String {
    format!("{}/{request}", claim.uid)
}
