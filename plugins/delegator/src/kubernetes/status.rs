//! The pod's NPWG network-status document (`k8s.v1.cni.cncf.io/network-status`, §5): a JSON
//! list with one entry per sandbox interface of every attachment, written after ADD to
//! `<statusDir>/<K8S_POD_NAMESPACE>_<K8S_POD_NAME>_<CNI_CONTAINERID>.json` and removed by DEL.
//!
//! The file is `{"networkStatus": <the document>, "podUID": <K8S_POD_UID>}` ([`file()`]; `podUID`
//! only when the runtime passed it): the name of a pod is not its identity — a StatefulSet pod
//! deleted and created again on the same node has the same name and a new UID — and the node
//! agent publishes the document only to the pod with that UID (the API server refuses a patch
//! whose `metadata.uid` differs). Delegators before this wrote the bare list; the agent still
//! reads that form.
//!
//! With attachments of the pod's ResourceClaims ([`super::claims`]) the file has `claims`, one
//! entry per claim-backed attachment in attachment order — what the node agent needs to write
//! each claim's `status.devices` entry (KEP-4817: `driver`, `pool`, `device`, `shareID`, and
//! `networkData` from the network-status entries of `interface`):
//!
//! ```json
//! "claims": [{"namespace": "t", "name": "web-net-x7k2p", "uid": "…", "request": "net",
//!             "driver": "net.braid-cni.io", "pool": "node2", "device": "t-side-1a2b3c4d",
//!             "shareID": "…", "interface": "net2"}]
//! ```
//!
//! `shareID` only when the allocation has one; `interface` is the attachment's interface in the
//! pod (its network-status entries' `interface`). Absent when the pod has no claim-backed
//! attachment. The document itself lists them like any other selected network (`name` is the
//! network's `namespace/name`).
//!
//! Written atomically (a temporary file in the same directory, renamed over), mode 0644 in a
//! 0755 directory, and not fsynced ([`cni_runtime::files::replace_volatile`]): it describes a
//! live sandbox, which a reboot ends — the runtime then starts the pod's sandbox anew, and its
//! ADD writes a new document — and it lives under `/run`, a tmpfs on a node. Its two fsyncs were
//! 0.5–1 ms of every pod's ADD on a disk (`docs/bench/NOTES.md`, the delegator's fixed cost).
//! The document holds what the pod's annotation would show anyone who may read
//! the pod (names, IPs, MACs, DNS) and nothing secret, and a node agent that publishes it need
//! not run as root.

use super::claims::ClaimNetwork;
use super::default_route::Removed;
use super::{Pod, StatusNetwork};
use cni_netlink::links::Link;
use cni_types::result::AnyResult;
use cni_types::{CniError, CniResult};
use serde_json::{json, Map, Value};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// Where the document of this pod's sandbox lives; `None` when `CNI_ARGS` does not name the
/// pod (not a Kubernetes call), or names it with characters that do not belong in a file name.
pub fn path(dir: &Path, pod: &Pod, container_id: &str) -> Option<PathBuf> {
    let (ns, name) = (pod.namespace.as_deref()?, pod.name.as_deref()?);
    // Namespaces are DNS-1123 labels, pod names DNS-1123 subdomains, container IDs checked by
    // the dispatcher: anything else is refused rather than put into a path.
    let safe = |s: &str| {
        !s.is_empty()
            && s.len() <= 253
            && !s.starts_with('.')
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    };
    (safe(ns) && safe(name) && safe(container_id)).then(|| dir.join(format!("{ns}_{name}_{container_id}.json")))
}

/// Whether [`with_addresses`] needs the pod's links: some interface it lists has no MAC in its
/// result (or a result lists no interface in the pod, as 0.1.0/0.2.0 results never do).
pub fn needs_links(attachments: &[(&AnyResult, &str, &StatusNetwork)]) -> bool {
    attachments.iter().any(|(result, _, _)| {
        let r: CniResult = result.to_latest();
        let mut sandboxed = r.interfaces.iter().filter(|i| !i.sandbox.is_empty()).peekable();
        sandboxed.peek().is_none() || sandboxed.any(|i| i.mac.is_empty())
    })
}

/// The document: for each attachment (its result, interface name and network) one entry per
/// interface of its result that lives in the pod namespace (one for `ifname` when its result
/// lists none, as 0.1.0/0.2.0 results never do), MACs missing from results filled from `links`.
#[cfg(test)]
pub fn document(attachments: &[(&AnyResult, &str, &StatusNetwork)], links: &[Link]) -> Value {
    with_addresses(attachments, links).0
}

/// The network-status document — for each attachment (its result, interface name and network)
/// one entry per interface of its result that lives in the pod namespace (one for `ifname` when
/// its result lists none, as 0.1.0/0.2.0 results never do), MACs missing from results filled
/// from `links` — and beside it each listed interface's addresses with their prefix lengths
/// (`{"net1": ["198.18.5.7/24"]}`; the document's `ips` have none): what the node agent's
/// `AddedInterface` Events say, as Multus's do ("Add net1 [198.18.5.7/24] from ns/name").
pub fn with_addresses(attachments: &[(&AnyResult, &str, &StatusNetwork)], links: &[Link]) -> (Value, Value) {
    let mut out = Vec::new();
    let mut addresses = Map::new();
    for (result, ifname, network) in attachments {
        let r: CniResult = result.to_latest();
        let mut sandboxed: Vec<(usize, &str, &str)> = r
            .interfaces
            .iter()
            .enumerate()
            .filter(|(_, i)| !i.sandbox.is_empty())
            .map(|(n, i)| (n, i.name.as_str(), i.mac.as_str()))
            .collect();
        if sandboxed.is_empty() {
            sandboxed.push((usize::MAX, ifname, ""));
        }
        // An IP without a valid index belongs to the attachment's own interface; one on a
        // host-side interface to none.
        let own = sandboxed.iter().position(|(_, name, _)| name == ifname).unwrap_or(0);
        let target = |ip: &cni_types::result::IpConfig| -> Option<usize> {
            match ip.interface.and_then(|i| usize::try_from(i).ok()).filter(|i| *i < r.interfaces.len()) {
                Some(i) => sandboxed.iter().position(|(n, _, _)| *n == i),
                None => Some(own),
            }
        };
        for (pos, (_, name, mac)) in sandboxed.iter().enumerate() {
            let ips: Vec<String> =
                r.ips.iter().filter(|ip| target(ip) == Some(pos)).map(|ip| ip.address.addr().to_string()).collect();
            let cidrs: Vec<String> =
                r.ips.iter().filter(|ip| target(ip) == Some(pos)).map(|ip| ip.address.to_string()).collect();
            addresses.insert(name.to_string(), cidrs.into());
            let mac = if mac.is_empty() {
                links.iter().find(|l| l.name == *name).map(Link::mac_string).unwrap_or_default()
            } else {
                mac.to_string()
            };
            let mut e = Map::new();
            e.insert("name".into(), network.name.clone().into());
            e.insert("interface".into(), name.to_string().into());
            if !ips.is_empty() {
                e.insert("ips".into(), ips.into());
            }
            if !mac.is_empty() {
                e.insert("mac".into(), mac.into());
            }
            e.insert("default".into(), network.default.into());
            // On every entry of the network, as Multus puts it (nad-client
            // `CreateNetworkStatuses`: one device, however many interfaces it shows).
            if let Some(info) = &network.device_info {
                e.insert("device-info".into(), info.clone());
            }
            if pos == own {
                if !r.dns.is_empty() {
                    let mut dns = Map::new();
                    if !r.dns.nameservers.is_empty() {
                        dns.insert("nameservers".into(), json!(r.dns.nameservers));
                    }
                    if !r.dns.domain.is_empty() {
                        dns.insert("domain".into(), json!(r.dns.domain));
                    }
                    if !r.dns.search.is_empty() {
                        dns.insert("search".into(), json!(r.dns.search));
                    }
                    if !r.dns.options.is_empty() {
                        dns.insert("options".into(), json!(r.dns.options));
                    }
                    e.insert("dns".into(), Value::Object(dns));
                }
                if let Some(gws) = &network.default_route {
                    let gws: Vec<String> = gws.iter().map(|g| g.to_string()).collect();
                    e.insert("default-route".into(), gws.into());
                }
            }
            out.push(Value::Object(e));
        }
    }
    (Value::Array(out), Value::Object(addresses))
}

fn io(path: &Path, what: &str, e: std::io::Error) -> CniError {
    CniError::new(cni_types::error::IO_FAILURE, format!("network-status {}: {what}: {e}", path.display()))
}

/// What a status file records beside the document.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Record<'a> {
    /// `K8S_POD_UID`, when the runtime passed it: `podUID`.
    pub pod_uid: Option<&'a str>,
    /// `CNI_NETNS` and `CNI_IFNAME` of the sandbox's ADD: `sandbox`, what the node agent calls
    /// the delegator's update with when the pod's networks change (`braid-install --hotplug`).
    pub sandbox: Option<(&'a str, &'a str)>,
    /// The pod's `k8s.v1.cni.cncf.io/networks` as the attachment now carries it out:
    /// `networks` (absent when the pod has none).
    pub requested: Option<&'a str>,
    /// Set when an update failed part-way (`unsettled`: the annotation it tried and why it
    /// failed): the sandbox then carries out neither its old annotation nor the new one — the
    /// document lists what is attached — so `networks` is left out and the node agent tries
    /// again whatever the annotation says.
    pub unsettled: Option<(Option<&'a str>, &'a str)>,
    /// The default routes a network's `default-route` replaced (`defaultRouteReplaced`).
    pub replaced: Option<&'a Replaced>,
    /// The pod's default network that took the cluster network's place (`defaultNetwork`,
    /// `namespace/name`; [`super::default_network`]).
    pub default_network: Option<&'a str>,
    /// Each interface's addresses with prefix ([`with_addresses`]): `addresses`.
    pub addresses: Option<&'a Value>,
    /// The claim-backed attachments, each with its interface: `claims` (when any).
    pub claims: &'a [(&'a ClaimNetwork, &'a str)],
}

/// The default routes that the network on interface `by` took over with its `default-route`
/// (removed from the pod's other interfaces): what removing that network puts back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replaced {
    /// The interface of the network that took the default routes.
    pub by: String,
    /// The routes it replaced.
    pub routes: Vec<Removed>,
}

impl Replaced {
    fn to_json(&self) -> Value {
        let routes: Vec<Value> = self
            .routes
            .iter()
            .map(|r| {
                let mut o = Map::new();
                o.insert("interface".into(), r.ifname.clone().into());
                o.insert("dst".into(), r.dst.to_string().into());
                if let Some(gw) = r.gateway {
                    o.insert("gateway".into(), gw.to_string().into());
                }
                if r.metric != 0 {
                    o.insert("metric".into(), r.metric.into());
                }
                Value::Object(o)
            })
            .collect();
        json!({"by": self.by, "routes": routes})
    }

    fn from_json(v: &Value) -> Option<Replaced> {
        let routes = v.get("routes")?.as_array()?.iter().map(|r| {
            Some(Removed {
                ifname: r.get("interface")?.as_str()?.to_string(),
                dst: cni_types::IpNet::parse(r.get("dst")?.as_str()?).ok()?,
                gateway: match r.get("gateway") {
                    Some(g) => Some(g.as_str()?.parse().ok()?),
                    None => None,
                },
                metric: r.get("metric").and_then(Value::as_u64).and_then(|m| u32::try_from(m).ok()).unwrap_or(0),
            })
        });
        Some(Replaced { by: v.get("by")?.as_str()?.to_string(), routes: routes.collect::<Option<Vec<_>>>()? })
    }
}

/// The file's content: `{"networkStatus": <doc>, "podUID": …, "sandbox": {"netns": …,
/// "ifname": …}, "networks": …, …, "claims": […]}`, each but the first only when known (see
/// the module for `claims`).
pub fn file(doc: Value, record: Record) -> Value {
    let mut o = Map::new();
    o.insert("networkStatus".into(), doc);
    if let Some(uid) = record.pod_uid {
        o.insert("podUID".into(), uid.into());
    }
    if let Some((netns, ifname)) = record.sandbox {
        o.insert("sandbox".into(), json!({"netns": netns, "ifname": ifname}));
    }
    match record.unsettled {
        None => {
            if let Some(n) = record.requested {
                o.insert("networks".into(), n.into());
            }
        }
        Some((tried, why)) => {
            o.insert("unsettled".into(), json!({"networks": tried, "error": why}));
        }
    }
    if let Some(r) = record.replaced.filter(|r| !r.routes.is_empty()) {
        o.insert("defaultRouteReplaced".into(), r.to_json());
    }
    if let Some(n) = record.default_network {
        o.insert("defaultNetwork".into(), n.into());
    }
    if let Some(a) = record.addresses {
        o.insert("addresses".into(), a.clone());
    }
    if !record.claims.is_empty() {
        let claims = record.claims.iter().map(|(c, ifname)| {
            let mut e = Map::new();
            for (k, v) in [
                ("namespace", &c.claim.namespace),
                ("name", &c.claim.name),
                ("uid", &c.claim.uid),
                ("request", &c.request),
                ("driver", &c.driver),
                ("pool", &c.pool),
                ("device", &c.device),
            ] {
                e.insert(k.into(), v.as_str().into());
            }
            if let Some(id) = &c.share_id {
                e.insert("shareID".into(), id.as_str().into());
            }
            e.insert("interface".into(), (*ifname).into());
            Value::Object(e)
        });
        o.insert("claims".into(), claims.collect());
    }
    Value::Object(o)
}

/// Writes `doc` ([`file()`]) to `path` atomically, not durably (0644; the directory is created 0755).
pub fn write(path: &Path, doc: &Value) -> Result<(), CniError> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::DirBuilder::new().recursive(true).mode(0o755).create(dir).map_err(|e| io(dir, "creating", e))?;
    let mut bytes = serde_json::to_vec(doc).unwrap_or_default();
    bytes.push(b'\n');
    // Exactly 0644 whatever the umask: the file is meant to be world-readable.
    cni_runtime::files::replace_volatile(path, &bytes, 0o644).map_err(|e| io(path, "writing", e.source))
}

/// What a status file records beside the document, as an update needs it before it changes
/// anything: the annotation carried out (`None` also when the file is unsettled or unreadable),
/// whether it is unsettled, and the default routes replaced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recorded {
    /// `networks`.
    pub requested: Option<String>,
    /// Whether `unsettled` is set.
    pub unsettled: bool,
    /// `defaultRouteReplaced`.
    pub replaced: Option<Replaced>,
    /// `defaultNetwork`.
    pub default_network: Option<String>,
}

/// Reads [`Recorded`] from the status file at `path` (all empty when it cannot be read).
pub fn recorded(path: &Path) -> Recorded {
    let Some(v) = cni_runtime::files::read_regular(path, 1 << 20, cni_runtime::files::Links::Refuse)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    else {
        return Recorded::default();
    };
    Recorded {
        requested: v.get("networks").and_then(Value::as_str).map(str::to_string),
        unsettled: v.get("unsettled").is_some(),
        replaced: v.get("defaultRouteReplaced").and_then(Replaced::from_json),
        default_network: v.get("defaultNetwork").and_then(Value::as_str).map(str::to_string),
    }
}

/// Removes the document (absent is fine).
pub fn remove(path: &Path) -> Result<(), CniError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(path, "removing", e)),
    }
}
