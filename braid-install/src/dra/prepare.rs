//! `NodePrepareResources` and `NodeUnprepareResources`: the kubelet names the claims of a pod
//! it is about to start (or has stopped); braid reads each claim once from the API server,
//! plans it ([`super::plan`]) against this node's networks ([`super::inventory`]) and records
//! the result node-locally ([`braid_attach::claim_record`]), where the delegator's ADD of the
//! pod's sandbox finds it without any API request.
//!
//! **What it costs.** One GET per claim per Prepare (as the Go kubelet plugin helper,
//! `k8s.io/dynamic-resource-allocation/kubeletplugin`, does: the kubelet passes only the
//! claim's namespace, name and UID); Unprepare sends none. The kubelet prepares a pod's claims
//! before it asks the runtime for the sandbox (`pkg/kubelet/kubelet.go` SyncPod →
//! `PrepareDynamicResources`), so the record is there before the ADD.
//!
//! **Why on disk, durably.** The kubelet checkpoints which claims it prepared
//! (`/var/lib/kubelet/dra_manager_state`) and does not prepare them again after a node reboot;
//! the pod's new sandbox's ADD still needs the record. So it lives under `/var/lib` (not
//! `/run`) and is written with fsync; Prepare is off the ADD path, so the fsyncs cost no pod
//! start anything.
//!
//! **Errors.** A claim braid cannot prepare gets its error string in the response (never a
//! failed RPC for the others), which the kubelet reports on the pod
//! (`FailedPrepareDynamicResources`) and retries with backoff: an API server that did not
//! answer, a network not (yet) mirrored, are mended by that retry.

use super::plan::{self, Context, Network, Plan};
use crate::api::call::call;
use crate::api::Agent;
use crate::metrics::Verb;
use braid_attach::claim_record::{self, ClaimRecord, ClaimRef, NetworkRecord};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use std::path::PathBuf;

/// What Prepare and Unprepare need.
#[derive(Clone)]
pub struct Preparer {
    /// The API client.
    pub client: kube::Client,
    /// The agent (node, timeouts, metrics).
    pub agent: Agent,
    /// braid's driver name.
    pub driver: String,
    /// Where records go (as the agent reaches it).
    pub claims_dir: PathBuf,
    /// networksDir, as the agent reaches it.
    pub networks_dir: PathBuf,
    /// The node's CNI bin dir, as the agent reaches it.
    pub cni_bin_dir: PathBuf,
    /// The delegator's `globalNamespaces`.
    pub global_namespaces: Vec<String>,
}

/// One claim the kubelet named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
}

/// One device prepared, as the response names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// The request.
    pub request: String,
    /// The pool.
    pub pool: String,
    /// The device.
    pub device: String,
    /// Its share.
    pub share_id: Option<String>,
}

impl Preparer {
    /// Prepares one claim: its devices, or the error the kubelet reports on the pod.
    pub async fn prepare(&self, claim: &Named) -> Result<Vec<Prepared>, String> {
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &claim.namespace);
        let stored = call(&self.agent, Verb::get, "resourceclaims", api.get(&claim.name))
            .await
            .map_err(|f| format!("claim {}/{}: reading it from the API server: {f}", claim.namespace, claim.name))?;
        let devices = super::inventory::scan(&self.networks_dir, &self.cni_bin_dir);
        let ctx = Context { driver: &self.driver, node: &self.agent.node, global_namespaces: &self.global_namespaces };
        let network_of = |device: &str| {
            super::inventory::find(&devices, device)
                .map(|d| Network { namespace: d.namespace.clone(), name: d.net_name.clone() })
        };
        let p = plan::plan(&stored, &claim.uid, &ctx, network_of).map_err(|e| e.to_string())?;
        self.record(&p)?;
        crate::log(&format!(
            "DRA: claim {}/{} prepared for pod {}: {}",
            p.namespace,
            p.name,
            p.pods.join(", "),
            p.devices.iter().map(|d| format!("{} ({})", d.device, d.request)).collect::<Vec<_>>().join(", ")
        ));
        Ok(p.devices
            .into_iter()
            .map(|d| Prepared { request: d.request, pool: d.pool, device: d.device, share_id: d.share_id })
            .collect())
    }

    /// The plan's record, once per pod the claim is reserved for.
    fn record(&self, p: &Plan) -> Result<(), String> {
        let record = ClaimRecord {
            claim: ClaimRef { namespace: p.namespace.clone(), name: p.name.clone(), uid: p.uid.clone() },
            networks: p
                .devices
                .iter()
                .map(|d| NetworkRecord {
                    request: d.request.clone(),
                    driver: self.driver.clone(),
                    pool: d.pool.clone(),
                    device: d.device.clone(),
                    share_id: d.share_id.clone(),
                    element: d.element.clone(),
                })
                .collect(),
        };
        for pod in &p.pods {
            claim_record::write(&self.claims_dir, pod, &record).map_err(|e| {
                format!("claim {}/{}: recording it for pod {pod} on the node: {e}", p.namespace, p.name)
            })?;
        }
        Ok(())
    }

    /// Unprepares one claim: its records removed (the sandbox's DEL, not this, releases the
    /// attachment: braid-attach's state has everything the DEL needs).
    pub fn unprepare(&self, claim: &Named) -> Result<(), String> {
        claim_record::remove_claim(&self.claims_dir, &claim.uid)
            .map_err(|e| format!("claim {}/{}: removing its records: {e}", claim.namespace, claim.name))?;
        crate::log(&format!("DRA: claim {}/{} unprepared", claim.namespace, claim.name));
        Ok(())
    }
}
