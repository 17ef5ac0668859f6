//! The kubelet's PodResources v1 messages braid reads, written by hand with prost's derive (no
//! protoc): the field numbers of `k8s.io/kubelet/pkg/apis/podresources/v1/api.proto`
//! (k8s.io/kubelet v0.36.3). Only the fields braid uses; prost skips the others (CPU IDs,
//! memory, CDI devices, topology) in a response.

/// `GetPodResourcesRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetPodResourcesRequest {
    /// `pod_name`.
    #[prost(string, tag = "1")]
    pub pod_name: String,
    /// `pod_namespace`.
    #[prost(string, tag = "2")]
    pub pod_namespace: String,
}

/// `GetPodResourcesResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetPodResourcesResponse {
    /// `pod_resources`.
    #[prost(message, optional, tag = "1")]
    pub pod_resources: Option<PodResources>,
}

/// `ListPodResourcesRequest` (empty).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesRequest {}

/// `ListPodResourcesResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesResponse {
    /// `pod_resources`: every pod the kubelet runs.
    #[prost(message, repeated, tag = "1")]
    pub pod_resources: Vec<PodResources>,
}

/// `AllocatableResourcesRequest` (empty).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AllocatableResourcesRequest {}

/// `AllocatableResourcesResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AllocatableResourcesResponse {
    /// `devices`: what the node's device plugins offer, allocated or not.
    #[prost(message, repeated, tag = "1")]
    pub devices: Vec<ContainerDevices>,
}

/// `PodResources`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodResources {
    /// `name`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `namespace`.
    #[prost(string, tag = "2")]
    pub namespace: String,
    /// `containers`.
    #[prost(message, repeated, tag = "3")]
    pub containers: Vec<ContainerResources>,
}

/// `ContainerResources`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerResources {
    /// `name`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `devices`.
    #[prost(message, repeated, tag = "2")]
    pub devices: Vec<ContainerDevices>,
    /// `dynamic_resources`: the container's ResourceClaims' devices (DRA; KEP-3695), only
    /// those of claims the container names in `resources.claims`.
    #[prost(message, repeated, tag = "5")]
    pub dynamic_resources: Vec<DynamicResource>,
}

/// `DynamicResource`: one claim (field 1, `class_name`, was removed in 1.31).
#[derive(Clone, PartialEq, prost::Message)]
pub struct DynamicResource {
    /// `claim_name`.
    #[prost(string, tag = "2")]
    pub claim_name: String,
    /// `claim_namespace`.
    #[prost(string, tag = "3")]
    pub claim_namespace: String,
    /// `claim_resources`: its allocated devices.
    #[prost(message, repeated, tag = "4")]
    pub claim_resources: Vec<ClaimResource>,
}

/// `ClaimResource`: a device by its (driver, pool, device) triplet.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ClaimResource {
    /// `driver_name`.
    #[prost(string, tag = "2")]
    pub driver_name: String,
    /// `pool_name`.
    #[prost(string, tag = "3")]
    pub pool_name: String,
    /// `device_name`.
    #[prost(string, tag = "4")]
    pub device_name: String,
    /// `share_id` (a shared device's allocation, DRAConsumableCapacity).
    #[prost(string, optional, tag = "5")]
    pub share_id: Option<String>,
}

/// `ContainerDevices`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerDevices {
    /// `resource_name` (`vendor/name`).
    #[prost(string, tag = "1")]
    pub resource_name: String,
    /// `device_ids`: the device plugin's IDs (the SR-IOV plugin's are PCI addresses).
    #[prost(string, repeated, tag = "2")]
    pub device_ids: Vec<String>,
}

/// The service's methods.
pub const GET: &str = "/v1.PodResourcesLister/Get";
/// `List`: every pod's resources (what Multus calls, and the fallback where `Get` is missing).
pub const LIST: &str = "/v1.PodResourcesLister/List";
/// `GetAllocatableResources`.
pub const ALLOCATABLE: &str = "/v1.PodResourcesLister/GetAllocatableResources";
