//! What `NodePrepareResources` makes of one ResourceClaim: for each device braid's driver was
//! allocated, the network it stands for and the selection element the delegator attaches at the
//! pod's ADD — all decided here, from the claim the API server returned and the node's own
//! device table, so that the ADD reads only the node-local record ([`super`]'s design).
//!
//! Pure: no API request, no file. The checks are those of the kubelet plugin helper of
//! `k8s.io/dynamic-resource-allocation` (`kubeletplugin/draplugin.go`, `getResourceClaims`: the
//! claim allocated, its UID the one the kubelet named) and braid's own: the pool is this node's,
//! the device one of this node's networks, the network one the claim's namespace may use (the
//! annotation's rule: the pod's own namespace or a global one), the opaque parameters only keys
//! of a selection element.

use k8s_openapi::api::resource::v1::{DeviceAllocationConfiguration, ResourceClaim};
use serde_json::{Map, Value};

/// The selection keys a request's opaque parameters may set: every key of an NPWG selection
/// element (as the delegator's annotation parser takes them) except `name` and `namespace`,
/// which the allocated device decides. Values are checked by the delegator at ADD, as an
/// annotation's are.
pub const PARAMETER_KEYS: [&str; 9] = [
    "interface",
    "ips",
    "mac",
    "default-route",
    "cni-args",
    "portMappings",
    "bandwidth",
    "infiniband-guid",
    "deviceID",
];

/// The `kind` of braid's opaque parameters, when they name one (with `apiVersion`
/// `<driver>/v1alpha1`).
pub const PARAMETERS_KIND: &str = "NetworkAttachment";

/// What the node knows, for one plan.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// braid's driver name (`--dra-driver-name`).
    pub driver: &'a str,
    /// This node: the name of braid's pool on it.
    pub node: &'a str,
    /// The delegator's `globalNamespaces`: networks any namespace's pods may select.
    pub global_namespaces: &'a [String],
}

/// A network of this node, as a device of its slice names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    /// Its namespace.
    pub namespace: String,
    /// Its name in that namespace.
    pub name: String,
}

/// One device of the claim, planned.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// The allocation result's request (`req` or, from a prioritized list, `req/sub`).
    pub request: String,
    /// The pool (this node's name).
    pub pool: String,
    /// The device (one network of this node).
    pub device: String,
    /// Its share (consumable capacity: a network is shared by many claims).
    pub share_id: Option<String>,
    /// The selection element the delegator attaches.
    pub element: Map<String, Value>,
}

/// A claim planned: whom it is for and what it attaches.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The claim's namespace, name and UID.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
    /// The pods it is reserved for (`status.reservedFor`, resource `pods`): one record each.
    pub pods: Vec<String>,
    /// braid's devices of the claim, in allocation order.
    pub devices: Vec<Planned>,
}

/// Why a claim cannot be prepared: the text the kubelet puts into the pod's
/// `FailedPrepareDynamicResources` Event, so each names the claim and what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The claim of that name has another UID: it was deleted and created again.
    #[error("claim {claim}: its UID is {found}, the kubelet asked for {wanted} (replaced?)")]
    Replaced {
        /// `namespace/name`.
        claim: String,
        /// The stored claim's UID.
        found: String,
        /// The kubelet's.
        wanted: String,
    },
    /// Not allocated (yet): the scheduler allocates before the kubelet prepares.
    #[error("claim {claim} is not allocated")]
    NotAllocated {
        /// `namespace/name`.
        claim: String,
    },
    /// Reserved for no pod: there is no sandbox to attach to.
    #[error("claim {claim} is reserved for no pod (status.reservedFor)")]
    NoPod {
        /// `namespace/name`.
        claim: String,
    },
    /// A device of braid's driver in another node's pool.
    #[error("claim {claim}, request {request}: device {device} is of pool {pool:?}, not of this node {node:?}")]
    OtherPool {
        /// `namespace/name`.
        claim: String,
        /// The request.
        request: String,
        /// The device.
        device: String,
        /// Its pool.
        pool: String,
        /// This node.
        node: String,
    },
    /// The device is none of this node's networks (any more): the network left the node
    /// between the scheduler's allocation and the kubelet's Prepare (its definition removed,
    /// its plugin uninstalled). Nothing is recorded; the kubelet retries with backoff and
    /// prepares the claim once the network is back.
    #[error("claim {claim}, request {request}: {} is not attachable on node {node} any more: {}; nothing was prepared, the kubelet retries", missing.subject(device), missing.why)]
    NoNetwork {
        /// `namespace/name`.
        claim: String,
        /// The allocation result's request.
        request: String,
        /// The device.
        device: String,
        /// This node.
        node: String,
        /// The network, when the node still knows it, and why it is not attachable (boxed:
        /// every plan result carries this enum).
        missing: Box<Missing>,
    },
    /// The network is of a namespace the claim's may not use.
    #[error("claim {claim}, request {request}: network {network} may be used only by pods of namespace {namespace:?} or of a global namespace ({global})", global = .global.join(", "))]
    Namespace {
        /// `namespace/name`.
        claim: String,
        /// The request.
        request: String,
        /// `namespace/name` of the network.
        network: String,
        /// Its namespace.
        namespace: String,
        /// The global namespaces.
        global: Vec<String>,
    },
    /// Opaque parameters braid cannot take.
    #[error("claim {claim}, {source_name} parameters for {requests}: {why}")]
    Parameters {
        /// `namespace/name`.
        claim: String,
        /// `FromClass` or `FromClaim`.
        source_name: String,
        /// The requests they apply to (`all requests` when they name none).
        requests: String,
        /// What is wrong.
        why: String,
    },
}

/// `namespace/name` of the claim.
fn claim_name(c: &ResourceClaim) -> String {
    format!(
        "{}/{}",
        c.metadata.namespace.as_deref().unwrap_or_default(),
        c.metadata.name.as_deref().unwrap_or_default()
    )
}

/// A request reference without its subrequest (`req/sub` → `req`), as the Go helper's
/// `resourceclaim.BaseRequestRef`.
pub fn base_request(request: &str) -> &str {
    request.split_once('/').map_or(request, |(base, _)| base)
}

/// Whether a configuration entry applies to `request` (no `requests`: to all; else a listed
/// name equal to the request or to its base, as `k8s.io/dynamic-resource-allocation`'s
/// `resourceclaim` matching does).
fn applies(c: &DeviceAllocationConfiguration, request: &str) -> bool {
    match &c.requests {
        None => true,
        Some(rs) if rs.is_empty() => true,
        Some(rs) => rs.iter().any(|r| r == request || r == base_request(request)),
    }
}

/// The selection keys of one opaque configuration, checked.
fn parameters(
    claim: &str,
    driver: &str,
    c: &DeviceAllocationConfiguration,
) -> Result<Option<Map<String, Value>>, PlanError> {
    let Some(o) = c.opaque.as_ref().filter(|o| o.driver == driver) else {
        return Ok(None);
    };
    let fail = |why: String| PlanError::Parameters {
        claim: claim.to_string(),
        source_name: c.source.clone(),
        requests: match &c.requests {
            Some(rs) if !rs.is_empty() => format!("request {}", rs.join(", ")),
            _ => "all requests".into(),
        },
        why,
    };
    let Value::Object(mut map) = o.parameters.0.clone() else {
        return Err(fail(format!("must be a JSON object of selection keys, not {}", o.parameters.0)));
    };
    let api_version = format!("{driver}/v1alpha1");
    match map.remove("apiVersion") {
        None => {}
        Some(Value::String(v)) if v == api_version => {}
        Some(v) => return Err(fail(format!("apiVersion must be {api_version:?} when given, not {v}"))),
    }
    match map.remove("kind") {
        None => {}
        Some(Value::String(k)) if k == PARAMETERS_KIND => {}
        Some(v) => return Err(fail(format!("kind must be {PARAMETERS_KIND:?} when given, not {v}"))),
    }
    if let Some(k) = map.keys().find(|k| !PARAMETER_KEYS.contains(&k.as_str())) {
        let why = if k == "name" || k == "namespace" {
            format!("{k:?} is not a parameter: the allocated device decides the network (select it with the request's CEL selector)")
        } else {
            format!("unknown key {k:?} (known: {})", PARAMETER_KEYS.join(", "))
        };
        return Err(fail(why));
    }
    Ok(Some(map))
}

/// Why a device is none of this node's networks: the network's `namespace/name` when the node
/// still knows it, and the reason ([`PlanError::NoNetwork`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// `namespace/name`, when known.
    pub network: Option<String>,
    /// Why.
    pub why: String,
}

impl Missing {
    /// What the message names: the network and its device, or the device alone.
    fn subject(&self, device: &str) -> String {
        match &self.network {
            Some(n) => format!("network {n} (device {device})"),
            None => format!("device {device}"),
        }
    }
}

/// The plan for `claim`, which the kubelet asked for as `wanted_uid`; `network_of` maps a
/// device name of this node's slice to its network, or says why it has none.
pub fn plan(
    claim: &ResourceClaim,
    wanted_uid: &str,
    ctx: &Context<'_>,
    network_of: impl Fn(&str) -> Result<Network, Missing>,
) -> Result<Plan, PlanError> {
    let name = claim_name(claim);
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    if uid != wanted_uid {
        return Err(PlanError::Replaced { claim: name, found: uid, wanted: wanted_uid.to_string() });
    }
    let status = claim.status.as_ref();
    let Some(allocation) = status.and_then(|s| s.allocation.as_ref()) else {
        return Err(PlanError::NotAllocated { claim: name });
    };
    let pods: Vec<String> = status
        .and_then(|s| s.reserved_for.as_ref())
        .into_iter()
        .flatten()
        .filter(|r| r.resource == "pods" && r.api_group.as_deref().unwrap_or_default().is_empty())
        .map(|r| r.uid.clone())
        .collect();
    if pods.is_empty() {
        return Err(PlanError::NoPod { claim: name });
    }
    let results = allocation.devices.as_ref().and_then(|d| d.results.as_ref()).into_iter().flatten();
    let configs: Vec<&DeviceAllocationConfiguration> =
        allocation.devices.as_ref().and_then(|d| d.config.as_ref()).into_iter().flatten().collect();
    let claim_ns = claim.metadata.namespace.clone().unwrap_or_default();
    let mut devices = Vec::new();
    for r in results.filter(|r| r.driver == ctx.driver) {
        if r.pool != ctx.node {
            return Err(PlanError::OtherPool {
                claim: name,
                request: r.request.clone(),
                device: r.device.clone(),
                pool: r.pool.clone(),
                node: ctx.node.to_string(),
            });
        }
        let network = match network_of(&r.device) {
            Ok(n) => n,
            Err(missing) => {
                return Err(PlanError::NoNetwork {
                    claim: name,
                    request: r.request.clone(),
                    device: r.device.clone(),
                    node: ctx.node.to_string(),
                    missing: Box::new(missing),
                })
            }
        };
        if network.namespace != claim_ns && !ctx.global_namespaces.contains(&network.namespace) {
            return Err(PlanError::Namespace {
                claim: name,
                request: r.request.clone(),
                network: format!("{}/{}", network.namespace, network.name),
                namespace: claim_ns,
                global: ctx.global_namespaces.to_vec(),
            });
        }
        // The class's configuration first, the claim's over it (the order the API server
        // keeps, and the DRA convention: the claim's own settings win).
        let mut element = Map::new();
        for source in ["FromClass", "FromClaim"] {
            for c in configs.iter().filter(|c| c.source == source && applies(c, &r.request)) {
                if let Some(p) = parameters(&name, ctx.driver, c)? {
                    element.extend(p);
                }
            }
        }
        element.insert("name".into(), network.name.clone().into());
        element.insert("namespace".into(), network.namespace.clone().into());
        devices.push(Planned {
            request: r.request.clone(),
            pool: r.pool.clone(),
            device: r.device.clone(),
            share_id: r.share_id.clone(),
            element,
        });
    }
    Ok(Plan { namespace: claim_ns, name: claim.metadata.name.clone().unwrap_or_default(), uid, pods, devices })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DRIVER: &str = "net.braid-cni.io";

    fn ctx() -> (Vec<String>, &'static str) {
        (vec!["default".to_string()], "node2")
    }

    fn claim(v: Value) -> ResourceClaim {
        serde_json::from_value(v).unwrap()
    }

    fn allocated(results: Value, config: Value) -> ResourceClaim {
        claim(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"namespace": "tenant", "name": "web-net-x7k2p", "uid": "c-1"},
            "spec": {"devices": {"requests": [{"name": "net", "exactly": {"deviceClassName": DRIVER}}]}},
            "status": {
                "allocation": {"devices": {"results": results, "config": config}},
                "reservedFor": [{"resource": "pods", "name": "web", "uid": "p-1"}]
            }
        }))
    }

    fn networks(device: &str) -> Result<Network, Missing> {
        match device {
            "tenant-side-1" => Ok(Network { namespace: "tenant".into(), name: "side".into() }),
            "default-shared-2" => Ok(Network { namespace: "default".into(), name: "shared".into() }),
            "other-secret-3" => Ok(Network { namespace: "other".into(), name: "secret".into() }),
            "tenant-left-4" => {
                Err(Missing { network: Some("tenant/left".into()), why: "its plugin \"x\" is not installed".into() })
            }
            _ => Err(Missing { network: None, why: "no network of this node has that device name".into() }),
        }
    }

    fn result(device: &str) -> Value {
        json!({"request": "net", "driver": DRIVER, "pool": "node2", "device": device, "shareID": "s-1"})
    }

    fn run(c: &ResourceClaim) -> Result<Plan, PlanError> {
        let (global, node) = ctx();
        plan(c, "c-1", &Context { driver: DRIVER, node, global_namespaces: &global }, networks)
    }

    #[test]
    fn a_claim_of_a_network_of_its_namespace_with_the_claims_parameters_over_the_classs() {
        let c = allocated(
            json!([result("tenant-side-1"), {"request": "gpu", "driver": "gpu.example.com", "pool": "node2", "device": "gpu0"}]),
            json!([
                {"source": "FromClass", "opaque": {"driver": DRIVER, "parameters": {"interface": "side0", "mac": "02:00:00:00:00:01"}}},
                {"source": "FromClaim", "requests": ["net"], "opaque": {"driver": DRIVER, "parameters": {
                    "apiVersion": "net.braid-cni.io/v1alpha1", "kind": "NetworkAttachment",
                    "interface": "side1", "ips": ["198.18.9.5/24"]}}},
                {"source": "FromClaim", "requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": {"interface": "never"}}},
                {"source": "FromClaim", "opaque": {"driver": "gpu.example.com", "parameters": {"anything": 1}}}
            ]),
        );
        let p = run(&c).unwrap();
        assert_eq!((p.namespace.as_str(), p.name.as_str(), p.uid.as_str()), ("tenant", "web-net-x7k2p", "c-1"));
        assert_eq!(p.pods, ["p-1"]);
        assert_eq!(p.devices.len(), 1, "the other driver's device is not braid's");
        let d = &p.devices[0];
        assert_eq!((d.request.as_str(), d.pool.as_str(), d.device.as_str()), ("net", "node2", "tenant-side-1"));
        assert_eq!(d.share_id.as_deref(), Some("s-1"));
        assert_eq!(
            Value::Object(d.element.clone()),
            json!({"name": "side", "namespace": "tenant", "interface": "side1", "mac": "02:00:00:00:00:01", "ips": ["198.18.9.5/24"]})
        );
    }

    #[test]
    fn a_global_network_is_allowed_another_tenants_is_not() {
        assert_eq!(run(&allocated(json!([result("default-shared-2")]), json!([]))).unwrap().devices.len(), 1);
        let e = run(&allocated(json!([result("other-secret-3")]), json!([]))).unwrap_err();
        assert!(matches!(e, PlanError::Namespace { .. }), "{e}");
        let text = e.to_string();
        assert!(
            text.contains("tenant/web-net-x7k2p") && text.contains("other/secret") && text.contains("\"tenant\""),
            "{text}"
        );
    }

    #[test]
    fn refusals_name_the_claim_and_what_to_change() {
        let replaced = {
            let (global, node) = ctx();
            plan(
                &allocated(json!([result("tenant-side-1")]), json!([])),
                "c-0",
                &Context { driver: DRIVER, node, global_namespaces: &global },
                networks,
            )
            .unwrap_err()
        };
        assert!(matches!(replaced, PlanError::Replaced { .. }), "{replaced}");
        let mut c = allocated(json!([result("tenant-side-1")]), json!([]));
        c.status.as_mut().unwrap().allocation = None;
        assert!(matches!(run(&c).unwrap_err(), PlanError::NotAllocated { .. }));
        let mut c = allocated(json!([result("tenant-side-1")]), json!([]));
        c.status.as_mut().unwrap().reserved_for = None;
        assert!(matches!(run(&c).unwrap_err(), PlanError::NoPod { .. }));
        let e = run(&allocated(
            json!([{"request": "net", "driver": DRIVER, "pool": "node1", "device": "tenant-side-1"}]),
            json!([]),
        ))
        .unwrap_err();
        assert!(matches!(e, PlanError::OtherPool { .. }) && e.to_string().contains("node1"), "{e}");
        let e = run(&allocated(json!([result("gone-9")]), json!([]))).unwrap_err();
        assert!(matches!(e, PlanError::NoNetwork { .. }) && e.to_string().contains("device gone-9"), "{e}");
        let e = run(&allocated(json!([result("tenant-left-4")]), json!([]))).unwrap_err().to_string();
        assert!(
            e.contains("claim tenant/web-net-x7k2p, request net: network tenant/left (device tenant-left-4) is not attachable on node node2 any more: its plugin"),
            "{e}"
        );
        for (params, says) in [
            (json!({"name": "other"}), "the allocated device decides"),
            (json!({"interfaces": "x"}), "unknown key \"interfaces\""),
            (json!(["interface"]), "must be a JSON object"),
            (json!({"kind": "Other"}), "kind must be"),
            (json!({"apiVersion": "v1"}), "apiVersion must be"),
        ] {
            let e = run(&allocated(
                json!([result("tenant-side-1")]),
                json!([{"source": "FromClaim", "requests": ["net"], "opaque": {"driver": DRIVER, "parameters": params}}]),
            ))
            .unwrap_err();
            let text = e.to_string();
            assert!(
                matches!(e, PlanError::Parameters { .. }) && text.contains(says) && text.contains("request net"),
                "{text}"
            );
        }
    }

    #[test]
    fn a_prioritized_lists_subrequest_takes_its_requests_parameters() {
        assert_eq!(base_request("net/fast"), "net");
        let c = allocated(
            json!([{"request": "net/fast", "driver": DRIVER, "pool": "node2", "device": "tenant-side-1"}]),
            json!([{"source": "FromClaim", "requests": ["net"], "opaque": {"driver": DRIVER, "parameters": {"interface": "fast0"}}}]),
        );
        let p = run(&c).unwrap();
        assert_eq!(p.devices[0].element.get("interface"), Some(&json!("fast0")));
        assert_eq!(p.devices[0].request, "net/fast");
    }
}
