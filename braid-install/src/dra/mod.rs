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

/// The driver's two loops, for the API side to run ([`crate::api::start`]): the node's
/// ResourceSlices ([`slices`]) and the kubelet's sockets ([`server`], answered by [`prepare`]),
/// which end — the registration socket removed, so the kubelet deregisters the driver at once —
/// when the agent stops.
pub fn tasks(dra: config::Dra) -> crate::api::Tasks {
    Box::new(move |client: kube::Client, agent: crate::api::Agent, stop: tokio::sync::watch::Receiver<bool>| {
        Box::pin(async move {
            let config = server::Config::new(
                dra.driver.clone(),
                dra.registration_socket(),
                dra.plugin_socket(),
                dra.plugin_endpoint(),
            );
            let seen = inventory::Seen::default();
            let preparer = prepare::Preparer {
                client: client.clone(),
                agent: agent.clone(),
                dra: dra.clone(),
                seen: seen.clone(),
            };
            let sockets = async {
                if let Err(e) = server::serve(config, std::sync::Arc::new(preparer), stop).await {
                    crate::log(&format!("DRA: the driver's sockets cannot be served: {e}"));
                }
            };
            // The publisher runs until the process ends; the sockets' end is the stop.
            futures::pin_mut!(sockets);
            let slices = slices::run(client, agent, dra, seen);
            futures::pin_mut!(slices);
            futures::future::select(sockets, slices).await;
        })
    })
}
