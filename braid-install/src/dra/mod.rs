//! The DRA driver (`--dra`, API mode only; issue 46): braid's networks offered to pods through
//! Kubernetes Dynamic Resource Allocation (resource.k8s.io/v1) as well as through the
//! `k8s.v1.cni.cncf.io/networks` annotation. Each network this node can attach is one device
//! of the node's ResourceSlice ([`inventory`], [`slices`]); the kubelet asks the driver over
//! gRPC to prepare a pod's claims ([`server`], [`proto`]); each claim is planned ([`plan`]) and
//! recorded on the node ([`prepare`]), and the delegator attaches what the records hold.
//!
//! - [`config`]: the driver's settings, resolved once from the options;
//! - [`inventory`]: the networks this node can attach, as devices;
//! - [`slices`]: the node's ResourceSlices, following the networks;
//! - [`proto`]: the kubelet's DRA v1 and plugin-registration gRPC messages;
//! - [`server`]: the registration and DRA gRPC servers on the kubelet's unix sockets;
//! - [`plan`]: what a ResourceClaim allocated to braid's driver attaches (pure);
//! - [`prepare`]: Prepare and Unprepare, reading the claim and writing its records.

pub mod config;
pub mod inventory;
pub mod plan;
pub mod prepare;
pub mod proto;
pub mod server;
pub mod slices;
