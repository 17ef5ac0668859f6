//! The DRA driver (`--dra`, API mode only; issue 46): braid's networks offered to pods through
//! Kubernetes Dynamic Resource Allocation (resource.k8s.io/v1) as well as through the
//! `k8s.v1.cni.cncf.io/networks` annotation. Each network this node can attach is one device
//! of the node's ResourceSlice ([`inventory`], [`slices`]); the kubelet asks the driver over
//! gRPC to prepare a pod's claims, and the delegator attaches what the prepared claims record.

pub mod config;
pub mod inventory;
pub mod slices;
