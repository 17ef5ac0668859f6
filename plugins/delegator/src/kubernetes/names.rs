//! The Network Plumbing WG and CRI names the delegator reads (NPWG v1.3 §4.1; containerd's
//! `pod_annotations` capability, CRI-O's `io.kubernetes.cri.pod-annotations`).

/// The pod annotation that selects networks (NPWG §4.1).
pub const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";

/// The runtimeConfig key (capability) under which runtimes pass the pod's annotations.
pub const POD_ANNOTATIONS: &str = "io.kubernetes.cri.pod-annotations";

/// The top-level key of a definition that braid's node agent mirrored from a
/// NetworkAttachmentDefinition (`braid-install --kubernetes-api`, its `nad.rs` writes it): the
/// NAD's namespace and name. A NAD's `spec.config` keeps its own `name` (plugins key their
/// state by it, and Multus used it as the network name), so a definition with this key may
/// carry a `name` other than the selected one when the key names that very NAD.
pub const NAD_SOURCE: &str = "braid.io/networkAttachmentDefinition";

/// The annotation of a NetworkAttachmentDefinition naming the device-plugin resource that backs
/// it (Multus's and the SR-IOV network device plugin's convention, not NPWG's); also the
/// top-level key by which a ConfigMap definition names one.
pub const RESOURCE_NAME: &str = "k8s.v1.cni.cncf.io/resourceName";

/// The pod annotation that replaces the pod's primary (cluster) network with a network of its
/// own (Multus's, not NPWG's: `pkg/k8sclient/k8sclient.go` `defaultNetAnnot`).
pub const DEFAULT_NETWORK: &str = "v1.multus-cni.io/default-network";
