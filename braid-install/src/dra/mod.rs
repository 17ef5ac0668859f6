//! braid's DRA driver (issue 46, `--dra`): networks offered as devices of the driver
//! `net.braid-cni.io` to ResourceClaims, prepared on the node for the delegator to attach.
//!
//! - [`proto`]: the kubelet's DRA v1 and plugin-registration gRPC messages;
//! - [`server`]: the registration and DRA gRPC servers on the kubelet's unix sockets, calling a
//!   [`server::Driver`];
//! - [`plan`]: what a ResourceClaim allocated to braid's driver attaches (pure).

pub mod plan;
pub mod proto;
pub mod server;
