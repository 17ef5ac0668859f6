//! Why a pod's network selection was refused: messages an operator reads in a kubelet event
//! (`FailedCreatePodSandBox`), naming the annotation, the element and the problem. All are
//! code 7 (`INVALID_NETWORK_CONFIG`) and happen before the first delegate runs.

use super::names::NETWORKS;
use cni_types::error::INVALID_NETWORK_CONFIG;
use cni_types::CniError;
use std::fmt;

/// A refused selection.
#[derive(Debug, Clone, PartialEq)]
pub enum SelectionError {
    /// The `kubernetes` configuration block is wrong.
    Config(String),
    /// The runtime's `io.kubernetes.cri.pod-annotations` is not an object of strings.
    Annotations(String),
    /// The annotation is not a JSON list (or not JSON at all).
    Malformed(String),
    /// The pod's namespace is needed but `CNI_ARGS` has no `K8S_POD_NAMESPACE`.
    NoPodNamespace,
    /// One element is refused; `network` is its `namespace/name` once known.
    Element {
        /// Its index in the annotation (0-based).
        index: usize,
        /// `namespace/name`, once resolved.
        network: Option<String>,
        /// What is wrong.
        problem: Problem,
    },
}

/// What is wrong with one selection element.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// An empty item in the text form (`a,,b`).
    Empty,
    /// Not a JSON object.
    NotAnObject(&'static str),
    /// No `name`.
    MissingName,
    /// A key of the wrong JSON type.
    WrongType {
        /// The key.
        key: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What it is.
        found: String,
    },
    /// `name` or `namespace` is not a DNS-1123 label.
    NotALabel {
        /// The key.
        key: &'static str,
        /// Its value.
        value: String,
    },
    /// `interface`/`@ifname` is not a valid interface name.
    BadInterface {
        /// The name asked for.
        value: String,
        /// Why not.
        why: String,
    },
    /// A request (`mac`, `ips`, `default-route`, …) with a bad value.
    BadValue {
        /// The key.
        key: &'static str,
        /// Its value, as JSON.
        value: String,
        /// What it must be.
        want: &'static str,
    },
    /// A key the spec reserves (no `.`) that braid does not know.
    UnknownKey(String),
    /// A key braid knows but does not support.
    Unsupported(String),
    /// A second element with `default-route`.
    SecondDefaultRoute {
        /// The element that has it first.
        first: usize,
    },
    /// A namespace this pod may not select networks from.
    Namespace {
        /// The namespace asked for.
        namespace: String,
        /// The pod's.
        pod: String,
        /// `globalNamespaces`.
        global: Vec<String>,
    },
    /// No definition file.
    UnknownNetwork {
        /// The files looked for.
        looked_for: String,
    },
    /// A definition file that cannot be read or used.
    BadDefinition {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// A request for a capability no plugin of the network declares.
    NoCapability {
        /// The element's key.
        key: String,
        /// The runtimeConfig key / capability.
        capability: String,
    },
    /// A `cni-args` key the network's definition pins (`pinnedCniArgs`).
    PinnedCniArg {
        /// The key.
        key: String,
        /// The definition file.
        path: String,
    },
    /// An interface name another attachment of the pod already has.
    InterfaceTaken {
        /// The name.
        ifname: String,
        /// Who has it.
        by: String,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Empty => f.write_str("empty network reference"),
            Problem::NotAnObject(t) => write!(f, "must be an object, not a JSON {t}"),
            Problem::MissingName => f.write_str("has no \"name\""),
            Problem::WrongType { key, expected, found } => write!(f, "{key} must be {expected}, not {found}"),
            Problem::NotALabel { key, value } => {
                write!(f, "{key} {value:?} is not a DNS-1123 label (lower-case letters, digits and '-', at most 63)")
            }
            Problem::BadInterface { value, why } => write!(f, "interface {value:?} is not a valid interface name: {why}"),
            Problem::BadValue { key, value, want } => write!(f, "{key} {value} must be {want}"),
            Problem::UnknownKey(k) => write!(f, "unknown key {k:?} (keys without a '.' are the spec's)"),
            Problem::Unsupported(k) => write!(f, "{k:?} is not supported by braid"),
            Problem::SecondDefaultRoute { first } => {
                write!(f, "default-route is already requested by element {first}: at most one element may carry it")
            }
            Problem::Namespace { namespace, pod, global } => write!(
                f,
                "namespace {namespace:?} is not allowed: a pod of namespace {pod:?} may select networks of its own namespace and of globalNamespaces {global:?} only"
            ),
            Problem::UnknownNetwork { looked_for } => write!(f, "unknown network: no {looked_for}"),
            Problem::BadDefinition { path, why } => write!(f, "definition {path}: {why}"),
            Problem::NoCapability { key, capability } => write!(
                f,
                "{key} requested, but no plugin of the network declares the capability {capability:?}"
            ),
            Problem::PinnedCniArg { key, path } => write!(
                f,
                "cni-args {key:?} is pinned by the network's definition {path} (pinnedCniArgs): a pod may not set it"
            ),
            Problem::InterfaceTaken { ifname, by } => write!(f, "interface {ifname} is already used by {by}"),
        }
    }
}

impl fmt::Display for SelectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelectionError::Config(m) => write!(f, "kubernetes: {m}"),
            SelectionError::Annotations(m) => {
                write!(f, "runtimeConfig io.kubernetes.cri.pod-annotations must be an object of strings: {m}")
            }
            SelectionError::Malformed(m) => {
                write!(f, "pod annotation {NETWORKS}: not a list of network selection elements: {m}")
            }
            SelectionError::NoPodNamespace => write!(
                f,
                "pod annotation {NETWORKS}: the pod's namespace is unknown (no K8S_POD_NAMESPACE in CNI_ARGS)"
            ),
            SelectionError::Element { index, network: Some(n), problem } => {
                write!(f, "pod annotation {NETWORKS}, element {index} (network {n}): {problem}")
            }
            SelectionError::Element { index, network: None, problem } => {
                write!(f, "pod annotation {NETWORKS}, element {index}: {problem}")
            }
        }
    }
}

impl std::error::Error for SelectionError {}

impl From<SelectionError> for CniError {
    fn from(e: SelectionError) -> CniError {
        CniError::new(INVALID_NETWORK_CONFIG, e.to_string())
    }
}
