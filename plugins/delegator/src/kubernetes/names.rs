//! The Network Plumbing WG and CRI names the delegator reads (NPWG v1.3 §4.1; containerd's
//! `pod_annotations` capability, CRI-O's `io.kubernetes.cri.pod-annotations`).

/// The pod annotation that selects networks (NPWG §4.1).
pub const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";

/// The runtimeConfig key (capability) under which runtimes pass the pod's annotations.
pub const POD_ANNOTATIONS: &str = "io.kubernetes.cri.pod-annotations";
