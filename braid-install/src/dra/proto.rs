//! The kubelet's DRA and plugin-registration gRPC messages, written by hand with prost's derive
//! (no protoc, no build.rs, as `braid-podresources/src/api.rs` does for PodResources). Field
//! numbers, names and packages are those of k8s.io/kubelet v0.36.3:
//!
//! - `pkg/apis/dra/v1/api.proto`: package `k8s.io.kubelet.pkg.apis.dra.v1`, service `DRAPlugin`
//!   (NodePrepareResources, NodeUnprepareResources) — every message and field of it;
//! - `pkg/apis/pluginregistration/v1/api.proto`: package `pluginregistration` (sic: "This should
//!   have been v1."), service `Registration` (GetInfo, NotifyRegistrationStatus).
//!
//! The method paths are the generated Go code's `*_FullMethodName` constants
//! (`api_grpc.pb.go` of each package).

use std::collections::HashMap;

/// The DRA service's full name, the proto's `package` + `service`.
pub const DRA_SERVICE: &str = "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin";
/// `DRAPlugin_NodePrepareResources_FullMethodName`.
pub const NODE_PREPARE_RESOURCES: &str = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources";
/// `DRAPlugin_NodeUnprepareResources_FullMethodName`.
pub const NODE_UNPREPARE_RESOURCES: &str = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources";
/// What a driver lists in `PluginInfo.supported_versions` for the v1 DRA service:
/// `DRAPluginService = "v1.DRAPlugin"` (k8s.io/kubelet `pkg/apis/dra/v1/types.go`), the first of
/// the kubelet's `servicesSupportedByKubelet` (`pkg/kubelet/cm/dra/plugin/dra_plugin.go`).
pub const DRA_PLUGIN_SERVICE_V1: &str = "v1.DRAPlugin";

/// The registration service's full name.
pub const REGISTRATION_SERVICE: &str = "pluginregistration.Registration";
/// `Registration_GetInfo_FullMethodName`.
pub const GET_INFO: &str = "/pluginregistration.Registration/GetInfo";
/// `Registration_NotifyRegistrationStatus_FullMethodName`.
pub const NOTIFY_REGISTRATION_STATUS: &str = "/pluginregistration.Registration/NotifyRegistrationStatus";
/// `PluginInfo.type` of a DRA driver: `DRAPlugin = "DRAPlugin"` (k8s.io/kubelet
/// `pkg/apis/pluginregistration/v1/constants.go`), the key of the kubelet's DRA handler.
pub const DRA_PLUGIN_TYPE: &str = "DRAPlugin";

// --- k8s.io/kubelet/pkg/apis/dra/v1/api.proto ---

/// `NodePrepareResourcesRequest`: the claims to prepare.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodePrepareResourcesRequest {
    /// `claims = 1`.
    #[prost(message, repeated, tag = "1")]
    pub claims: Vec<Claim>,
}

/// `NodePrepareResourcesResponse`: per claim UID, what was done or attempted. Every claim of
/// the request must have an entry: the kubelet fails the call ("skipped N ResourceClaims") and
/// calls again for the missing ones otherwise.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodePrepareResourcesResponse {
    /// `map<string, NodePrepareResourceResponse> claims = 1`, keyed by claim UID.
    #[prost(map = "string, message", tag = "1")]
    pub claims: HashMap<String, NodePrepareResourceResponse>,
}

/// `NodePrepareResourceResponse`: one claim's result.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodePrepareResourceResponse {
    /// `devices = 1`: what the kubelet makes available through the container runtime (CDI).
    #[prost(message, repeated, tag = "1")]
    pub devices: Vec<Device>,
    /// `error = 2`: non-empty when preparing this claim failed; `devices` are then ignored.
    #[prost(string, tag = "2")]
    pub error: String,
}

/// `Device`: one prepared device of a claim.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Device {
    /// `request_names = 1`: the claim's requests this device belongs to (empty: all).
    #[prost(string, repeated, tag = "1")]
    pub request_names: Vec<String>,
    /// `pool_name = 2`.
    #[prost(string, tag = "2")]
    pub pool_name: String,
    /// `device_name = 3`.
    #[prost(string, tag = "3")]
    pub device_name: String,
    /// `cdi_device_ids = 4`: none is valid (braid's devices are networks, not device nodes).
    #[prost(string, repeated, tag = "4")]
    pub cdi_device_ids: Vec<String>,
    /// `optional string share_id = 5`: the allocation's shareID (consumable capacity).
    #[prost(string, optional, tag = "5")]
    pub share_id: Option<String>,
}

/// `NodeUnprepareResourcesRequest`: the claims to unprepare.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeUnprepareResourcesRequest {
    /// `claims = 1`.
    #[prost(message, repeated, tag = "1")]
    pub claims: Vec<Claim>,
}

/// `NodeUnprepareResourcesResponse`: per claim UID; the same rules as for Prepare.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeUnprepareResourcesResponse {
    /// `map<string, NodeUnprepareResourceResponse> claims = 1`, keyed by claim UID.
    #[prost(map = "string, message", tag = "1")]
    pub claims: HashMap<String, NodeUnprepareResourceResponse>,
}

/// `NodeUnprepareResourceResponse`: one claim's result.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeUnprepareResourceResponse {
    /// `error = 1`: non-empty when unpreparing this claim failed.
    #[prost(string, tag = "1")]
    pub error: String,
}

/// `Claim`: the kubelet names a claim only; the driver GETs it.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Message)]
pub struct Claim {
    /// `namespace = 1`.
    #[prost(string, tag = "1")]
    pub namespace: String,
    /// `uid = 2`.
    #[prost(string, tag = "2")]
    pub uid: String,
    /// `name = 3`.
    #[prost(string, tag = "3")]
    pub name: String,
}

// --- k8s.io/kubelet/pkg/apis/pluginregistration/v1/api.proto ---

/// `PluginInfo`: what GetInfo answers.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PluginInfo {
    /// `type = 1`: [`DRA_PLUGIN_TYPE`].
    #[prost(string, tag = "1")]
    pub r#type: String,
    /// `name = 2`: the driver name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// `endpoint = 3`: the DRA service socket, as the kubelet opens it (a node path).
    #[prost(string, tag = "3")]
    pub endpoint: String,
    /// `supported_versions = 4`: for DRA, the gRPC services offered ([`DRA_PLUGIN_SERVICE_V1`]).
    #[prost(string, repeated, tag = "4")]
    pub supported_versions: Vec<String>,
}

/// `RegistrationStatus`: the kubelet's verdict on the registration.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RegistrationStatus {
    /// `plugin_registered = 1`.
    #[prost(bool, tag = "1")]
    pub plugin_registered: bool,
    /// `error = 2`: why not.
    #[prost(string, tag = "2")]
    pub error: String,
}

/// `RegistrationStatusResponse` (empty).
#[derive(Clone, PartialEq, prost::Message)]
pub struct RegistrationStatusResponse {}

/// `InfoRequest` (empty).
#[derive(Clone, PartialEq, prost::Message)]
pub struct InfoRequest {}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// The wire bytes of fields whose numbers and types matter most, built by hand from the
    /// proto (tag = number << 3 | wire type): a wrong tag in a derive changes them.
    #[test]
    fn field_numbers_are_the_protos() {
        let d = Device {
            request_names: vec!["r".into()],
            pool_name: "p".into(),
            device_name: "d".into(),
            cdi_device_ids: vec!["c".into()],
            share_id: Some("s".into()),
        };
        assert_eq!(d.encode_to_vec(), b"\x0a\x01r\x12\x01p\x1a\x01d\x22\x01c\x2a\x01s");
        // optional: an empty share_id is sent (presence), none is not.
        let none = Device { share_id: None, ..Device::default() };
        assert_eq!(none.encode_to_vec(), b"");
        let empty = Device { share_id: Some(String::new()), ..Device::default() };
        assert_eq!(empty.encode_to_vec(), b"\x2a\x00");

        let c = Claim { namespace: "n".into(), uid: "u".into(), name: "m".into() };
        assert_eq!(c.encode_to_vec(), b"\x0a\x01n\x12\x01u\x1a\x01m");
        let r = NodePrepareResourceResponse { devices: vec![], error: "e".into() };
        assert_eq!(r.encode_to_vec(), b"\x12\x01e");
        let u = NodeUnprepareResourceResponse { error: "e".into() };
        assert_eq!(u.encode_to_vec(), b"\x0a\x01e");
        // map<string, message> = 1: entries with key = 1, value = 2.
        let m = NodeUnprepareResourcesResponse { claims: [("k".to_string(), u)].into() };
        assert_eq!(m.encode_to_vec(), b"\x0a\x08\x0a\x01k\x12\x03\x0a\x01e");

        let i = PluginInfo {
            r#type: "t".into(),
            name: "n".into(),
            endpoint: "e".into(),
            supported_versions: vec!["v".into()],
        };
        assert_eq!(i.encode_to_vec(), b"\x0a\x01t\x12\x01n\x1a\x01e\x22\x01v");
        let s = RegistrationStatus { plugin_registered: true, error: "x".into() };
        assert_eq!(s.encode_to_vec(), b"\x08\x01\x12\x01x");
    }
}
