//! Why a pod's network selection was refused: messages an operator reads in a kubelet event
//! (`FailedCreatePodSandBox`), naming the annotation (or the ResourceClaim), the element and the
//! problem. All are code 7 (`INVALID_NETWORK_CONFIG`) — but a claim record the file system would
//! not give, code 11 — and happen before the first delegate runs.

use super::names::{DEFAULT_NETWORK, NETWORKS};
use cni_types::error::{INVALID_NETWORK_CONFIG, TRY_AGAIN_LATER};
use cni_types::CniError;

/// A refused selection.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectionError {
    /// The `kubernetes` configuration block is wrong.
    #[error("kubernetes: {0}")]
    Config(String),
    /// The runtime's `io.kubernetes.cri.pod-annotations` is not an object of strings.
    #[error("runtimeConfig io.kubernetes.cri.pod-annotations must be an object of strings: {0}")]
    Annotations(String),
    /// The annotation is not a JSON list (or not JSON at all).
    #[error("pod annotation {NETWORKS}: not a list of network selection elements: {0}")]
    Malformed(String),
    /// The pod's namespace is needed but `CNI_ARGS` has no `K8S_POD_NAMESPACE`.
    #[error("pod annotation {NETWORKS}: the pod's namespace is unknown (no K8S_POD_NAMESPACE in CNI_ARGS)")]
    NoPodNamespace,
    /// One element is refused; `network` is its `namespace/name` once known.
    #[error("pod annotation {NETWORKS}, element {index}{}: {problem}", in_network(.network))]
    Element {
        /// Its index in the annotation (0-based).
        index: usize,
        /// `namespace/name`, once resolved.
        network: Option<String>,
        /// What is wrong.
        #[source]
        problem: Problem,
    },
    /// A network of one of the pod's ResourceClaims (its claim record's element) is refused;
    /// `claim` is the claim's `namespace/name`, `network` its `namespace/name` once known.
    #[error("resource claim {claim}, request {request}{}: {problem}", in_network(.network))]
    Claim {
        /// The claim.
        claim: String,
        /// The claim's request the network was allocated for.
        request: String,
        /// `namespace/name`, once resolved.
        network: Option<String>,
        /// What is wrong (boxed: every selection result carries this error's size).
        #[source]
        problem: Box<Problem>,
    },
    /// The pod's claim records cannot be read (`retry`: the file system refused, code 11; else
    /// a malformed record, code 7). The message names the file.
    #[error("pod {pod_uid}: {why}")]
    ClaimRecords {
        /// `K8S_POD_UID`.
        pod_uid: String,
        /// Why, naming the file.
        why: String,
        /// Whether trying again may help.
        retry: bool,
    },
    /// The pod's default network (`v1.multus-cni.io/default-network`) is refused; `network` is
    /// its `namespace/name` once known, `pod` the pod's `namespace/name`.
    #[error("pod annotation {DEFAULT_NETWORK} of pod {pod}{}: {problem}", in_network(.network))]
    DefaultNetwork {
        /// The pod.
        pod: String,
        /// `namespace/name`, once resolved.
        network: Option<String>,
        /// What is wrong (boxed: every selection result carries this error's size).
        #[source]
        problem: Box<Problem>,
    },
}

/// ` (network <namespace/name>)` once the element's network is known.
fn in_network(network: &Option<String>) -> String {
    network.as_ref().map_or_else(String::new, |n| format!(" (network {n})"))
}

/// What is wrong with one selection element.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Problem {
    /// An empty item in the text form (`a,,b`).
    #[error("empty network reference")]
    Empty,
    /// Not a JSON object.
    #[error("must be an object, not a JSON {0}")]
    NotAnObject(&'static str),
    /// No `name`.
    #[error("has no \"name\"")]
    MissingName,
    /// A key of the wrong JSON type.
    #[error("{key} must be {expected}, not {found}")]
    WrongType {
        /// The key.
        key: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What it is.
        found: String,
    },
    /// `name` or `namespace` is not a DNS-1123 label.
    #[error("{key} {value:?} is not a DNS-1123 label (lower-case letters, digits and '-', at most 63)")]
    NotALabel {
        /// The key.
        key: &'static str,
        /// Its value.
        value: String,
    },
    /// `interface`/`@ifname` is not a valid interface name.
    #[error("interface {value:?} is not a valid interface name: {why}")]
    BadInterface {
        /// The name asked for.
        value: String,
        /// Why not.
        why: String,
    },
    /// A request (`mac`, `ips`, `default-route`, …) with a bad value.
    #[error("{key} {value} must be {want}")]
    BadValue {
        /// The key.
        key: &'static str,
        /// Its value, as JSON.
        value: String,
        /// What it must be.
        want: &'static str,
    },
    /// A key the spec reserves (no `.`) that braid does not know.
    #[error("unknown key {0:?} (keys without a '.' are the spec's)")]
    UnknownKey(String),
    /// A key braid knows but does not support.
    #[error("{0:?} is not supported by braid")]
    Unsupported(String),
    /// A second element with `default-route`.
    #[error("default-route is already requested by element {first}: at most one element may carry it")]
    SecondDefaultRoute {
        /// The element that has it first.
        first: usize,
    },
    /// `default-route` of a claim's network when another network of the pod has it.
    #[error("default-route is already requested by {by}: at most one network of a pod may carry it")]
    DefaultRouteTaken {
        /// The network that has it first.
        by: String,
    },
    /// A namespace this pod may not select networks from.
    #[error(
        "namespace {namespace:?} is not allowed: a pod of namespace {pod:?} may select networks of its own namespace and of globalNamespaces {global:?} only"
    )]
    Namespace {
        /// The namespace asked for.
        namespace: String,
        /// The pod's.
        pod: String,
        /// `globalNamespaces`.
        global: Vec<String>,
    },
    /// No definition file.
    #[error("unknown network: no {looked_for}")]
    UnknownNetwork {
        /// The files looked for.
        looked_for: String,
    },
    /// A definition file that cannot be read or used.
    #[error("definition {path}: {why}")]
    BadDefinition {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// A request for a capability no plugin of the network declares.
    #[error("{key} requested, but no plugin of the network declares the capability {capability:?}")]
    NoCapability {
        /// The element's key.
        key: String,
        /// The runtimeConfig key / capability.
        capability: String,
    },
    /// A `cni-args` key the network's definition pins (`pinnedCniArgs`).
    #[error("cni-args {key:?} is pinned by the network's definition {path} (pinnedCniArgs): a pod may not set it")]
    PinnedCniArg {
        /// The key.
        key: String,
        /// The definition file.
        path: String,
    },
    /// A default-network annotation that is not exactly one network.
    #[error("must name exactly one network: {0}")]
    NotOne(String),
    /// The pod's namespace is unknown (no `K8S_POD_NAMESPACE` in `CNI_ARGS`).
    #[error("the pod's namespace is unknown (no K8S_POD_NAMESPACE in CNI_ARGS)")]
    NoPod,
    /// A namespace whose networks may not be this pod's primary.
    #[error(
        "a network of namespace {namespace:?} cannot be the default network of a pod of namespace {pod:?}: only networks of {allowed:?} may (defaultNetworkNamespace, and defaultNetworkPodNamespace when the operator allows the pod's own)"
    )]
    NotAPrimary {
        /// The namespace asked for.
        namespace: String,
        /// The pod's.
        pod: String,
        /// The namespaces it may take its primary from.
        allowed: Vec<String>,
    },
    /// A request the default network cannot take.
    #[error("{key}: {why}")]
    PrimaryKey {
        /// The element's key.
        key: &'static str,
        /// Why not.
        why: String,
    },
    /// An interface name another attachment of the pod already has.
    #[error("interface {ifname} is already used by {by}")]
    InterfaceTaken {
        /// The name.
        ifname: String,
        /// Who has it.
        by: String,
    },
}

impl From<SelectionError> for CniError {
    fn from(e: SelectionError) -> CniError {
        let code = match e {
            SelectionError::ClaimRecords { retry: true, .. } => TRY_AGAIN_LATER,
            _ => INVALID_NETWORK_CONFIG,
        };
        CniError::new(code, e.to_string())
    }
}
