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

use super::config::Dra;
use super::plan::{self, Context, Network, Plan};
use super::proto;
use super::server::{Driver, Results};
use crate::api::call::call;
use crate::api::Agent;
use crate::metrics::Verb;
use braid_attach::claim_record::{self, Claim, ClaimRecord, Network as RecordedNetwork};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use std::collections::HashMap;

/// What Prepare and Unprepare need.
#[derive(Clone)]
pub struct Preparer {
    /// The API client.
    pub client: kube::Client,
    /// The agent (node, networksDir, timeouts, metrics).
    pub agent: Agent,
    /// The driver's settings.
    pub dra: Dra,
    /// The networks offered since the agent started (shared with the slice publisher), to
    /// name the network of a device that left the node.
    pub seen: super::inventory::Seen,
}

impl Preparer {
    /// Prepares one claim the kubelet named: its devices, or the error the kubelet reports on
    /// the pod (the server logs each).
    pub async fn prepare_one(&self, claim: &proto::Claim) -> Result<Vec<plan::Planned>, String> {
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &claim.namespace);
        let stored = call(&self.agent, Verb::get, "resourceclaims", api.get(&claim.name))
            .await
            .map_err(|f| format!("claim {}/{}: reading it from the API server: {f}", claim.namespace, claim.name))?;
        let inv = super::inventory::inventory(&self.agent.networks, &self.dra.cni_bin_dir);
        self.seen.remember(&inv.devices);
        let ctx = Context {
            driver: &self.dra.driver,
            node: &self.agent.node,
            global_namespaces: &self.dra.global_namespaces,
        };
        let network_of = |device: &str| {
            super::inventory::find(&inv.devices, device)
                .map(|d| Network { namespace: d.namespace.clone(), name: d.net_name.clone() })
                .ok_or_else(|| super::inventory::missing(&inv, &self.seen, &self.agent.networks, device))
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
        Ok(p.devices)
    }

    /// The plan's record, once per pod the claim is reserved for.
    fn record(&self, p: &Plan) -> Result<(), String> {
        let record = ClaimRecord {
            claim: Claim { namespace: p.namespace.clone(), name: p.name.clone(), uid: p.uid.clone() },
            networks: p
                .devices
                .iter()
                .map(|d| RecordedNetwork {
                    request: d.request.clone(),
                    driver: self.dra.driver.clone(),
                    pool: d.pool.clone(),
                    device: d.device.clone(),
                    share_id: d.share_id.clone(),
                    element: d.element.clone(),
                })
                .collect(),
        };
        for pod in &p.pods {
            claim_record::write(&self.dra.claims_dir, pod, &record).map_err(|e| {
                format!("claim {}/{}: recording it for pod {pod} on the node: {e}", p.namespace, p.name)
            })?;
        }
        Ok(())
    }

    /// Unprepares one claim: its records removed (the sandbox's DEL, not this, releases the
    /// attachment: braid-attach's state has everything the DEL needs).
    pub fn unprepare_one(&self, claim: &proto::Claim) -> Result<(), String> {
        claim_record::remove_claim(&self.dra.claims_dir, &claim.uid)
            .map_err(|e| format!("claim {}/{}: removing its records: {e}", claim.namespace, claim.name))?;
        crate::log(&format!("DRA: claim {}/{} unprepared", claim.namespace, claim.name));
        Ok(())
    }
}

/// The kubelet's calls, one claim after the other (the server serves one call at a time; a
/// pod has a handful of claims, each one GET).
impl Driver for Preparer {
    fn prepare(&self, claims: Vec<proto::Claim>) -> Results<'_, proto::NodePrepareResourceResponse> {
        Box::pin(async move {
            let mut out = HashMap::new();
            for c in &claims {
                let answer = match self.prepare_one(c).await {
                    Ok(devices) => proto::NodePrepareResourceResponse {
                        devices: devices
                            .into_iter()
                            .map(|d| proto::Device {
                                // The claim's request the device is for, without a
                                // prioritized list's subrequest (as dra-example-driver and
                                // the Go helper's `resourceclaim.BaseRequestRef`).
                                request_names: vec![super::plan::base_request(&d.request).to_string()],
                                pool_name: d.pool,
                                device_name: d.device,
                                cdi_device_ids: Vec::new(),
                                share_id: d.share_id,
                            })
                            .collect(),
                        error: String::new(),
                    },
                    Err(e) => proto::NodePrepareResourceResponse { devices: Vec::new(), error: e },
                };
                out.insert(c.uid.clone(), answer);
            }
            out
        })
    }

    fn unprepare(&self, claims: Vec<proto::Claim>) -> Results<'_, proto::NodeUnprepareResourceResponse> {
        Box::pin(async move {
            claims
                .iter()
                .map(|c| {
                    let error = self.unprepare_one(c).err().unwrap_or_default();
                    (c.uid.clone(), proto::NodeUnprepareResourceResponse { error })
                })
                .collect()
        })
    }
}
