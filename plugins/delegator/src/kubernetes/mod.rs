//! Per-pod networks on Kubernetes, from the pod's own annotations, with no API server: the
//! runtime (containerd ≥ 1.5, CRI-O ≥ 1.29) hands every pod annotation to a plugin that
//! declares the capability `io.kubernetes.cri.pod-annotations`; the networks that
//! `k8s.v1.cni.cncf.io/networks` selects are read from node-local files
//! (`<networksDir>/<namespace>/<name>.conflist`), appended after the configured delegates, and
//! the pod's NPWG network-status is written to `statusDir`; the networks of the pod's
//! ResourceClaims (braid's DRA driver's records, [`claims`]) follow the annotation's. See the
//! README's Kubernetes section.
//!
//! * [`annotation`]: the annotation's two forms, validated.
//! * [`claims`]: the networks of the pod's ResourceClaims, from the node's claim records.
//! * [`resolve`]: an element's definition file, turned into a delegate.
//! * [`status`]: the network-status document, written atomically, removed on DEL.
//! * [`default_route`]: a selection's `default-route`, carried out in the pod namespace.
//! * [`default_network`]: `v1.multus-cni.io/default-network`, the pod's primary replaced.
//! * [`devices`]: a network backed by the kubelet's devices gets the pod's device ID.
//! * [`error`]: why a selection is refused (code 7, before anything runs).
//! * [`names`]: the annotation's and the capability's names.

pub mod annotation;
pub mod claims;
pub mod default_network;
pub mod default_route;
pub mod devices;
pub mod error;
pub mod names;
pub mod resolve;
pub mod status;

use braid_attach::Delegate;
use cni_types::validate::is_dns_label;
use cni_types::NetConf;
use error::{Problem, SelectionError};
use names::{NETWORKS, POD_ANNOTATIONS};
use serde_json::Value;
use std::net::IpAddr;
use std::path::PathBuf;

/// The `kubernetes` block: its presence turns selection on.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `networksDir`: where definitions live, one directory per namespace.
    pub networks_dir: PathBuf,
    /// `globalNamespaces`: namespaces whose networks every pod may select.
    pub global_namespaces: Vec<String>,
    /// `statusDir`: where the pods' network-status documents are written.
    pub status_dir: PathBuf,
    /// `claimsDir`: the node's claim records ([`claims`]).
    pub claims_dir: PathBuf,
    /// `podResourcesSocket`, `podResourcesTimeout`, `draDevicesFile`: where a network that
    /// names a resource asks the kubelet for the pod's devices, and the node's DRA devices
    /// record other DRA drivers' devices are matched with ([`devices`]).
    pub kubelet: devices::Kubelet,
    /// `defaultNetworkNamespace`: where a bare `v1.multus-cni.io/default-network` name
    /// resolves, and whose networks any pod may take as its primary ([`default_network`]).
    pub default_network_namespace: String,
    /// `defaultNetworkPodNamespace`: a pod may also take a network of its own namespace as
    /// its primary (off: see [`default_network`] for why).
    pub default_network_pod_namespace: bool,
}

impl Config {
    /// `kubernetes` of the delegator's configuration; `None` when absent or `null`.
    pub fn parse(conf: &NetConf) -> Result<Option<Config>, SelectionError> {
        let o = match conf.get("kubernetes") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Object(o)) => o,
            Some(v) => return Err(SelectionError::Config(format!("must be an object, not {v}"))),
        };
        let path = |key: &str, default: &str| match o.get(key) {
            None | Some(Value::Null) => Ok(PathBuf::from(default)),
            Some(Value::String(s)) if !s.is_empty() => Ok(PathBuf::from(s)),
            Some(v) => Err(SelectionError::Config(format!("{key} must be a non-empty path, not {v}"))),
        };
        let global_namespaces = match o.get("globalNamespaces") {
            None | Some(Value::Null) => vec!["default".to_string()],
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| match v.as_str() {
                    Some(s) if is_dns_label(s) => Ok(s.to_string()),
                    _ => Err(SelectionError::Config(format!(
                        "globalNamespaces must be a list of namespace names (DNS-1123 labels); {v} is not one"
                    ))),
                })
                .collect::<Result<_, _>>()?,
            Some(v) => {
                return Err(SelectionError::Config(format!("globalNamespaces must be a list of namespaces, not {v}")))
            }
        };
        const KNOWN: [&str; 9] = [
            "networksDir",
            "globalNamespaces",
            "statusDir",
            "claimsDir",
            "podResourcesSocket",
            "podResourcesTimeout",
            "draDevicesFile",
            "defaultNetworkNamespace",
            "defaultNetworkPodNamespace",
        ];
        if let Some(k) = o.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(SelectionError::Config(format!("unknown key {k:?} (known: {})", KNOWN.join(", "))));
        }
        let timeout = match o.get("podResourcesTimeout") {
            None | Some(Value::Null) => devices::DEFAULT_TIMEOUT,
            Some(v) => match v.as_f64().filter(|t| *t > 0.0 && *t <= 600.0) {
                Some(t) => std::time::Duration::from_secs_f64(t),
                None => {
                    return Err(SelectionError::Config(format!(
                        "podResourcesTimeout must be a number of seconds above 0 and at most 600, not {v}"
                    )))
                }
            },
        };
        let default_network_namespace = match o.get("defaultNetworkNamespace") {
            None | Some(Value::Null) => default_network::DEFAULT_NAMESPACE.to_string(),
            Some(Value::String(s)) if is_dns_label(s) => s.clone(),
            Some(v) => {
                return Err(SelectionError::Config(format!(
                    "defaultNetworkNamespace must be a namespace name (a DNS-1123 label), not {v}"
                )))
            }
        };
        let default_network_pod_namespace = match o.get("defaultNetworkPodNamespace") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(v) => {
                return Err(SelectionError::Config(format!(
                    "defaultNetworkPodNamespace must be true or false, not {v}"
                )))
            }
        };
        Ok(Some(Config {
            networks_dir: path("networksDir", "/etc/cni/braid.d")?,
            global_namespaces,
            status_dir: path("statusDir", "/run/braid/network-status")?,
            claims_dir: path("claimsDir", braid_attach::claim_record::DEFAULT_DIR)?,
            kubelet: devices::Kubelet {
                socket: path("podResourcesSocket", devices::DEFAULT_SOCKET)?,
                timeout,
                dra_devices: path("draDevicesFile", braid_attach::dra_devices::DEFAULT_FILE)?,
            },
            default_network_namespace,
            default_network_pod_namespace,
        }))
    }
}

/// The pod as `CNI_ARGS` names it (last pair wins, as in Go's `LoadArgs`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Pod {
    /// `K8S_POD_NAMESPACE`.
    pub namespace: Option<String>,
    /// `K8S_POD_NAME`.
    pub name: Option<String>,
    /// `K8S_POD_UID` (containerd and CRI-O pass it): which pod of that name, recorded in the
    /// network-status file so the node agent publishes it to that pod and no later one.
    pub uid: Option<String>,
}

impl Pod {
    /// From `CNI_ARGS`, read leniently ([`cni_types::args::pairs`]): the args are the
    /// runtime's, and DEL must find the pod even in args Go's `LoadArgs` would refuse.
    pub fn from_args(args: &str) -> Pod {
        let mut pod = Pod::default();
        for pair in cni_types::args::pairs(args) {
            match pair {
                ("K8S_POD_NAMESPACE", v) if !v.is_empty() => pod.namespace = Some(v.to_string()),
                ("K8S_POD_NAME", v) if !v.is_empty() => pod.name = Some(v.to_string()),
                ("K8S_POD_UID", v) if !v.is_empty() => pod.uid = Some(v.to_string()),
                _ => {}
            }
        }
        pod
    }
}

/// The network of one attachment as the network-status document names it (NPWG §5: its
/// entries' `name`, `default` and `default-route`; the rest comes from the result).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusNetwork {
    /// `name`: the cluster network's (and other configured delegates') network name; a
    /// selected one's `namespace/name`.
    pub name: String,
    /// `default`: the cluster network (the first configured delegate).
    pub default: bool,
    /// The gateways of `default-route`, when its element asked for it.
    pub default_route: Option<Vec<IpAddr>>,
    /// `device-info` (NPWG device-info spec), for a network given a device: what its
    /// device-info file held after the ADD ([`devices::device_info`]).
    pub device_info: Option<Value>,
    /// The ResourceClaim request the attachment is for: the status file's `claims`.
    pub claim: Option<claims::ClaimNetwork>,
}

/// What the annotation and the pod's claims select: the delegates to append and how the status
/// names them.
#[derive(Debug, Default)]
pub struct Selection {
    /// The selected networks' delegates: the annotation's in its order, then the claims'.
    pub delegates: Vec<Delegate>,
    /// Their network-status names, in the same order.
    pub networks: Vec<StatusNetwork>,
    /// The device-plugin resource each one's definition names ([`devices`]), in the same order.
    pub resources: Vec<Option<String>>,
    /// When the runtime passed no annotations: the line to log at info.
    pub info: Option<String>,
    /// The annotation's value as the runtime passed it (`None`: absent), recorded in the
    /// network-status file: the node agent updates the pod's networks when the pod's
    /// annotation no longer reads so.
    pub requested: Option<String>,
}

/// The selector an update recognises a selected network's attachment by
/// ([`braid_attach::Delegate::selector`]): the selection element with its namespace resolved —
/// an attachment is kept while an element asks for exactly this, and replaced when an element
/// changes (another interface name, other `ips`, …). The definition's content is not part of
/// it: a NAD changed under a running pod never re-plumbs it (as at ADD: definitions are read
/// when a network is attached). A claim's network has `claim` ([`claims::key`]): no annotation
/// element ever asks for its attachment, which an update keeps while the claim's record is there.
pub fn selector(network: &str, e: &annotation::Element, claim: Option<&str>) -> String {
    let mut o = serde_json::Map::new();
    o.insert("network".into(), network.into());
    if let Some(c) = claim {
        o.insert("claim".into(), c.into());
    }
    if let Some(i) = &e.interface {
        o.insert("interface".into(), i.clone().into());
    }
    if !e.runtime.is_empty() {
        o.insert("runtimeConfig".into(), Value::Object(e.runtime.clone()));
    }
    if let Some(a) = &e.cni_args {
        o.insert("cni-args".into(), Value::Object(a.clone()));
    }
    if let Some(gws) = &e.default_route {
        o.insert("default-route".into(), gws.iter().map(|g| Value::from(g.to_string())).collect());
    }
    Value::Object(o).to_string()
}

/// How the network-status document names the attachment of a [`selector`].
pub fn status_network(selector: &str) -> StatusNetwork {
    let v: Value = serde_json::from_str(selector).unwrap_or_default();
    let default_route = v
        .get("default-route")
        .and_then(Value::as_array)
        .map(|gws| gws.iter().filter_map(|g| g.as_str()?.parse().ok()).collect());
    StatusNetwork {
        name: v.get("network").and_then(Value::as_str).unwrap_or_default().to_string(),
        default: false,
        default_route,
        device_info: None,
        claim: None,
    }
}

/// The annotation's elements, its value (`None`: absent) and, when the runtime passed no
/// annotations, the line to log.
type Annotated = (Vec<annotation::Element>, Option<String>, Option<String>);

/// The pod's `k8s.v1.cni.cncf.io/networks` from the runtime's annotations.
fn annotated(conf: &NetConf) -> Result<Annotated, SelectionError> {
    let annotations = match conf.runtime_config_raw().and_then(|rc| rc.get(POD_ANNOTATIONS)) {
        None | Some(Value::Null) => {
            let info = format!(
                "runtimeConfig has no {POD_ANNOTATIONS} (a runtime older than containerd 1.5 or CRI-O 1.29, podman, or the capability is not declared on this plugin): no annotation networks"
            );
            return Ok((Vec::new(), None, Some(info)));
        }
        Some(Value::Object(a)) => a,
        Some(v) => return Err(SelectionError::Annotations(format!("got {v}"))),
    };
    match annotations.get(NETWORKS) {
        None | Some(Value::Null) => Ok((Vec::new(), None, None)),
        Some(Value::String(s)) => Ok((annotation::parse(s)?, Some(s.clone()), None)),
        Some(v) => Err(SelectionError::Annotations(format!("{NETWORKS} is {v}"))),
    }
}

/// The networks the pod's annotation selects, then those of its ResourceClaims' records
/// ([`claims`]: by claim name, each record's networks in order), validated and resolved alike;
/// `configured` are the configured delegates (their fixed interface names are taken). Nothing
/// runs here.
pub fn select(k: &Config, conf: &NetConf, args: &str, configured: &[Delegate]) -> Result<Selection, SelectionError> {
    let (elements, requested, info) = annotated(conf)?;
    let pod = Pod::from_args(args);
    let records = claims::read(&k.claims_dir, &pod)?;
    let mut out = Selection { requested, info: info.filter(|_| records.is_empty()), ..Selection::default() };
    if elements.is_empty() && records.is_empty() {
        return Ok(out);
    }
    let pod_ns = pod.namespace.ok_or(SelectionError::NoPodNamespace)?;
    let mut taken: Vec<(String, String)> = configured
        .iter()
        .enumerate()
        .filter(|(_, d)| !d.auto_ifname)
        .map(|(i, d)| (d.ifname.clone(), format!("configured delegate {i} (network {:?})", d.name())))
        .collect();
    let mut autos = configured.iter().filter(|d| d.auto_ifname).count();
    // Who asked for `default-route` first (the annotation's parser allows one among its own).
    let mut default_route: Option<String> = None;
    let mut all: Vec<_> = elements.into_iter().enumerate().map(|(index, e)| (Ok(e), None, index)).collect();
    for r in &records {
        all.extend(r.networks.iter().map(|n| (annotation::element(&n.element), Some((r, n)), 0)));
    }
    for (e, from, index) in all {
        let fail = |network: Option<&String>, problem| match from {
            None => SelectionError::Element { index, network: network.cloned(), problem },
            Some((r, n)) => SelectionError::Claim {
                claim: format!("{}/{}", r.claim.namespace, r.claim.name),
                request: n.request.clone(),
                network: network.cloned(),
                problem: Box::new(problem),
            },
        };
        let e = e.map_err(|p| fail(None, p))?;
        let namespace = e.namespace.clone().unwrap_or_else(|| pod_ns.clone());
        let network = format!("{namespace}/{}", e.name);
        let fail = |problem| fail(Some(&network), problem);
        let who = || match from {
            None => format!("element {index} (network {network})"),
            Some((r, n)) => format!(
                "resource claim {}/{} request {} (network {network})",
                r.claim.namespace, r.claim.name, n.request
            ),
        };
        if namespace != pod_ns && !k.global_namespaces.contains(&namespace) {
            return Err(fail(Problem::Namespace {
                namespace: namespace.clone(),
                pod: pod_ns.clone(),
                global: k.global_namespaces.clone(),
            }));
        }
        if e.default_route.is_some() {
            if let (Some(by), Some(_)) = (&default_route, from) {
                return Err(fail(Problem::DefaultRouteTaken { by: by.clone() }));
            }
            default_route.get_or_insert_with(who);
        }
        let (ifname, auto) = match &e.interface {
            Some(i) => {
                if let Some((_, by)) = taken.iter().find(|(t, _)| t == i) {
                    return Err(fail(Problem::InterfaceTaken { ifname: i.clone(), by: by.clone() }));
                }
                taken.push((i.clone(), who()));
                (i.clone(), false)
            }
            None => {
                autos += 1;
                (format!("net{autos}"), true)
            }
        };
        let (mut d, resource) =
            resolve::delegate(&k.networks_dir, &namespace, &e, conf.version(), ifname, auto).map_err(&fail)?;
        let claim = from.map(|(r, n)| claims::ClaimNetwork {
            claim: r.claim.clone(),
            request: n.request.clone(),
            driver: n.driver.clone(),
            pool: n.pool.clone(),
            device: n.device.clone(),
            share_id: n.share_id.clone(),
            metadata: n.metadata.clone(),
        });
        d.selector = Some(selector(&network, &e, claim.as_ref().map(|c| claims::key(&c.claim, &c.request)).as_deref()));
        out.delegates.push(d);
        out.resources.push(resource);
        out.networks.push(StatusNetwork {
            name: network,
            default: false,
            default_route: e.default_route.clone(),
            device_info: None,
            claim,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
