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
//! **Device metadata** (`--dra-device-metadata`, KEP-5304): each request's metadata file and
//! the CDI spec that mounts it are written before the record, which names the file for the
//! delegator to fill in at ADD; the CDI device goes back to the kubelet on the request's first
//! device, and Unprepare removes both ([`braid_attach::device_metadata`]).
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
use braid_attach::device_metadata::{self as metadata, ClaimRef};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use std::collections::{BTreeMap, HashMap};

/// The annotation a claim made from a pod's template carries: the pod's name for it
/// (k8s.io/api resource/v1 `PodResourceClaimAnnotation`).
const POD_CLAIM_NAME: &str = "resource.kubernetes.io/pod-claim-name";

/// A claim prepared: its devices, and each base request's metadata CDI device, when written.
pub struct Prepared {
    /// braid's devices of the claim.
    pub devices: Vec<plan::Planned>,
    /// The CDI device ID of each base request's metadata.
    pub cdi: BTreeMap<String, String>,
}

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
    pub async fn prepare_one(&self, claim: &proto::Claim) -> Result<Prepared, String> {
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
        let files = self.write_metadata(&stored, &p, &inv)?;
        if let Err(e) = self.record(&p, &files) {
            // Nothing of a failed Prepare stays behind: the kubelet retries it from the start.
            if let Some(m) = &self.dra.metadata {
                let _ = metadata::remove_claim(&m.plugin_data_dir, &m.cdi_dir, &self.dra.driver, &claim_ref(&p, None));
            }
            return Err(e);
        }
        crate::log(&format!(
            "DRA: claim {}/{} prepared for pod {}: {}",
            p.namespace,
            p.name,
            p.pods.join(", "),
            p.devices.iter().map(|d| format!("{} ({})", d.device, d.request)).collect::<Vec<_>>().join(", ")
        ));
        let cdi = files.into_iter().map(|(request, (_, id))| (request, id)).collect();
        Ok(Prepared { devices: p.devices, cdi })
    }

    /// With `--dra-device-metadata`, each base request's metadata file (generation 1: the
    /// devices and their slice attributes, no `networkData` until the ADD) and its CDI spec;
    /// by base request, the file as the node sees it and the CDI device ID.
    fn write_metadata(
        &self,
        stored: &ResourceClaim,
        p: &Plan,
        inv: &super::inventory::Inventory,
    ) -> Result<BTreeMap<String, (String, String)>, String> {
        let Some(m) = &self.dra.metadata else { return Ok(BTreeMap::new()) };
        let pod_claim = stored.metadata.annotations.as_ref().and_then(|a| a.get(POD_CLAIM_NAME)).cloned();
        let c = claim_ref(p, pod_claim);
        let fail = |e: metadata::Error| format!("claim {}/{}: writing its device metadata: {e}", p.namespace, p.name);
        let mut by_request: BTreeMap<&str, Vec<&plan::Planned>> = BTreeMap::new();
        for d in &p.devices {
            by_request.entry(super::plan::base_request(&d.request)).or_default().push(d);
        }
        let mut out = BTreeMap::new();
        for (request, devices) in by_request {
            let devices = devices
                .iter()
                .map(|d| {
                    let attributes = super::inventory::find(&inv.devices, &d.device)
                        .and_then(|n| super::slices::device(n, self.dra.attachments).attributes)
                        .and_then(|a| serde_json::to_value(a).ok())
                        .unwrap_or_default();
                    metadata::device(&self.dra.driver, &d.pool, &d.device, attributes)
                })
                .collect();
            // The allocation's request, a prioritized list's subrequest included (the Go
            // helper's `requestRef`); the file is the base request's.
            let full = p
                .devices
                .iter()
                .find(|d| super::plan::base_request(&d.request) == request)
                .map_or(request, |d| d.request.as_str());
            let doc = metadata::document(&c, 1, full, devices);
            let file = metadata::file(&m.plugin_data_dir, &c.namespace, &c.name, request).map_err(fail)?;
            let on_node = metadata::file(&m.plugin_data_dir_on_node, &c.namespace, &c.name, request).map_err(fail)?;
            let spec_file = metadata::cdi_spec_file(&m.cdi_dir, &self.dra.driver, &c.uid, request).map_err(fail)?;
            let spec = metadata::cdi_spec(&self.dra.driver, &c, request, &on_node);
            metadata::prepare(&file, &doc, &spec_file, &spec).map_err(fail)?;
            out.insert(
                request.to_string(),
                (on_node.to_string_lossy().into_owned(), metadata::cdi_device_id(&self.dra.driver, &c.uid, request)),
            );
        }
        Ok(out)
    }

    /// The plan's record, once per pod the claim is reserved for; each network names its
    /// request's metadata file, when there is one.
    fn record(&self, p: &Plan, files: &BTreeMap<String, (String, String)>) -> Result<(), String> {
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
                    metadata: files.get(super::plan::base_request(&d.request)).map(|(f, _)| f.clone()),
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
        if let Some(m) = &self.dra.metadata {
            let c = ClaimRef {
                namespace: claim.namespace.clone(),
                name: claim.name.clone(),
                uid: claim.uid.clone(),
                pod_claim_name: None,
            };
            metadata::remove_claim(&m.plugin_data_dir, &m.cdi_dir, &self.dra.driver, &c)
                .map_err(|e| format!("claim {}/{}: removing its device metadata: {e}", claim.namespace, claim.name))?;
        }
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
                    Ok(Prepared { devices, mut cdi }) => proto::NodePrepareResourceResponse {
                        devices: devices
                            .into_iter()
                            .map(|d| proto::Device {
                                // The metadata's mount, on the request's first device (as
                                // the Go helper injects it).
                                cdi_device_ids: cdi.remove(super::plan::base_request(&d.request)).into_iter().collect(),
                                // The claim's request the device is for, without a
                                // prioritized list's subrequest (as dra-example-driver and
                                // the Go helper's `resourceclaim.BaseRequestRef`).
                                request_names: vec![super::plan::base_request(&d.request).to_string()],
                                pool_name: d.pool,
                                device_name: d.device,
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

/// The plan's claim as the metadata names it.
fn claim_ref(p: &Plan, pod_claim_name: Option<String>) -> ClaimRef {
    ClaimRef { namespace: p.namespace.clone(), name: p.name.clone(), uid: p.uid.clone(), pod_claim_name }
}
