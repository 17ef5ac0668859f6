//! A minimal CRI client (`runtime.v1.RuntimeService`) that stands in for the kubelet:
//! RunPodSandbox, PodSandboxStatus, StopPodSandbox, RemovePodSandbox, ListPodSandbox and Status,
//! over a unix socket with tonic.
//!
//! The messages are written by hand with prost's derive (no protoc): only the fields the tests
//! use, with the field numbers of kubernetes/cri-api's `pkg/apis/runtime/v1/api.proto`. prost
//! skips the fields it does not know in a response.
//!
//! Behind the crate's `cri` feature (tonic, prost and tokio), which the containerd tests, the
//! demo's `braid-crictl` example and the bench's soak turn on: no build of the plugins ever
//! sees them.
#![allow(clippy::panic, clippy::expect_used, clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint, Uri};

/// `PodSandboxMetadata`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxMetadata {
    /// Pod name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Pod UID.
    #[prost(string, tag = "2")]
    pub uid: String,
    /// Pod namespace.
    #[prost(string, tag = "3")]
    pub namespace: String,
    /// Attempt.
    #[prost(uint32, tag = "4")]
    pub attempt: u32,
}

/// `PodSandboxConfig` (metadata, hostname, labels, annotations).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxConfig {
    /// Metadata.
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<PodSandboxMetadata>,
    /// Hostname.
    #[prost(string, tag = "2")]
    pub hostname: String,
    /// Labels.
    #[prost(map = "string, string", tag = "6")]
    pub labels: HashMap<String, String>,
    /// Annotations.
    #[prost(map = "string, string", tag = "7")]
    pub annotations: HashMap<String, String>,
}

/// `RunPodSandboxRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RunPodSandboxRequest {
    /// Config.
    #[prost(message, optional, tag = "1")]
    pub config: Option<PodSandboxConfig>,
    /// Runtime handler.
    #[prost(string, tag = "2")]
    pub runtime_handler: String,
}

/// `RunPodSandboxResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RunPodSandboxResponse {
    /// The sandbox ID.
    #[prost(string, tag = "1")]
    pub pod_sandbox_id: String,
}

/// `StopPodSandboxRequest` and `RemovePodSandboxRequest` (same shape).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxIdRequest {
    /// The sandbox ID.
    #[prost(string, tag = "1")]
    pub pod_sandbox_id: String,
}

/// `ListPodSandboxRequest` (no filter: every sandbox).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodSandboxRequest {}

/// `PodSandbox` (the fields the tests use).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandbox {
    /// The sandbox ID.
    #[prost(string, tag = "1")]
    pub id: String,
    /// Its metadata.
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<PodSandboxMetadata>,
    /// `SANDBOX_READY` = 0, `SANDBOX_NOTREADY` = 1.
    #[prost(int32, tag = "3")]
    pub state: i32,
}

/// `ListPodSandboxResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodSandboxResponse {
    /// The sandboxes.
    #[prost(message, repeated, tag = "1")]
    pub items: Vec<PodSandbox>,
}

/// `StopPodSandboxResponse` and `RemovePodSandboxResponse` (empty).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Empty {}

/// `PodSandboxStatusRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxStatusRequest {
    /// The sandbox ID.
    #[prost(string, tag = "1")]
    pub pod_sandbox_id: String,
    /// Verbose (fills `info`).
    #[prost(bool, tag = "2")]
    pub verbose: bool,
}

/// `PodIP`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodIp {
    /// The address.
    #[prost(string, tag = "1")]
    pub ip: String,
}

/// `PodSandboxNetworkStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxNetworkStatus {
    /// The pod IP.
    #[prost(string, tag = "1")]
    pub ip: String,
    /// Further pod IPs.
    #[prost(message, repeated, tag = "2")]
    pub additional_ips: Vec<PodIp>,
}

/// `PodSandboxStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxStatus {
    /// The sandbox ID.
    #[prost(string, tag = "1")]
    pub id: String,
    /// Metadata.
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<PodSandboxMetadata>,
    /// `PodSandboxState`: 0 ready, 1 not ready.
    #[prost(int32, tag = "3")]
    pub state: i32,
    /// Network status.
    #[prost(message, optional, tag = "5")]
    pub network: Option<PodSandboxNetworkStatus>,
    /// Annotations.
    #[prost(map = "string, string", tag = "8")]
    pub annotations: HashMap<String, String>,
}

/// `PodSandboxStatusResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxStatusResponse {
    /// Status.
    #[prost(message, optional, tag = "1")]
    pub status: Option<PodSandboxStatus>,
    /// Verbose information (containerd: `info` → JSON with the runtime spec).
    #[prost(map = "string, string", tag = "2")]
    pub info: HashMap<String, String>,
}

/// `StatusRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusRequest {
    /// Verbose (fills `info`; containerd reports its CNI configuration there).
    #[prost(bool, tag = "1")]
    pub verbose: bool,
}

/// `RuntimeCondition`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RuntimeCondition {
    /// `RuntimeReady` or `NetworkReady`.
    #[prost(string, tag = "1")]
    pub r#type: String,
    /// Whether it holds.
    #[prost(bool, tag = "2")]
    pub status: bool,
    /// Reason.
    #[prost(string, tag = "3")]
    pub reason: String,
    /// Message.
    #[prost(string, tag = "4")]
    pub message: String,
}

/// `RuntimeStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RuntimeStatus {
    /// Conditions.
    #[prost(message, repeated, tag = "1")]
    pub conditions: Vec<RuntimeCondition>,
}

/// `StatusResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusResponse {
    /// Status.
    #[prost(message, optional, tag = "1")]
    pub status: Option<RuntimeStatus>,
    /// Verbose information.
    #[prost(map = "string, string", tag = "2")]
    pub info: HashMap<String, String>,
}

impl PodSandboxConfig {
    /// A pod `namespace/name` with these annotations, as the kubelet asks for it: a fresh UID
    /// (`uid<pid>x<n>`, see [`crate::unique`]; a sweep finds this process's pods by it), no
    /// labels, attempt 0.
    pub fn pod(namespace: &str, name: &str, annotations: &[(&str, &str)]) -> PodSandboxConfig {
        PodSandboxConfig {
            metadata: Some(PodSandboxMetadata {
                name: name.into(),
                uid: crate::unique("uid"),
                namespace: namespace.into(),
                attempt: 0,
            }),
            hostname: name.into(),
            labels: HashMap::new(),
            annotations: annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }
}

impl PodSandboxStatusResponse {
    /// The pod IP and the additional ones, in the runtime's order.
    pub fn ips(&self) -> Vec<String> {
        let Some(net) = self.status.as_ref().and_then(|s| s.network.as_ref()) else { return Vec::new() };
        std::iter::once(&net.ip)
            .chain(net.additional_ips.iter().map(|p| &p.ip))
            .filter(|i| !i.is_empty())
            .cloned()
            .collect()
    }

    /// The pod's network namespace: containerd's verbose `info` holds the sandbox's runtime
    /// spec, whose network namespace entry names the path. `None` when it does not.
    pub fn netns(&self) -> Option<PathBuf> {
        let info: serde_json::Value = serde_json::from_str(self.info.get("info")?).ok()?;
        info["runtimeSpec"]["linux"]["namespaces"]
            .as_array()?
            .iter()
            .find(|n| n["type"] == "network")
            .and_then(|n| n["path"].as_str())
            .map(PathBuf::from)
    }
}

impl StatusResponse {
    /// The runtime reports the condition `NetworkReady`.
    pub fn network_ready(&self) -> bool {
        self.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.r#type == "NetworkReady" && c.status))
    }

    /// The CNI configuration the runtime reports (containerd: verbose `info.cniconfig`, JSON),
    /// as text: what a test shows when a network never loads.
    pub fn cni_config(&self) -> &str {
        self.info.get("cniconfig").map_or("", String::as_str)
    }

    /// That CNI configuration holds a network `name` (`Networks[].Config.Name`).
    pub fn network_loaded(&self, name: &str) -> bool {
        serde_json::from_str::<serde_json::Value>(self.cni_config()).is_ok_and(|v| {
            v["Networks"].as_array().into_iter().flatten().any(|n| n["Config"]["Name"].as_str() == Some(name))
        })
    }
}

/// A failed CRI call: the gRPC status code and message.
#[derive(Debug, Clone)]
pub struct CriError {
    /// The gRPC code.
    pub code: tonic::Code,
    /// The message (containerd's error text).
    pub message: String,
}

impl CriError {
    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for CriError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

/// A CRI client on a unix socket; each call blocks on a current-thread runtime of its own.
pub struct Cri {
    rt: tokio::runtime::Runtime,
    channel: Channel,
    timeout: Duration,
}

impl std::fmt::Debug for Cri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cri").finish_non_exhaustive()
    }
}

impl Cri {
    /// Connects to the socket (which must exist).
    pub fn connect(socket: &Path, timeout: Duration) -> Result<Cri, String> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        let path: PathBuf = socket.to_path_buf();
        let channel = rt
            .block_on(async move {
                // The URI is required and ignored: the connector dials the socket.
                Endpoint::try_from("http://[::1]:1")?
                    .connect_timeout(timeout)
                    .connect_with_connector(tower::service_fn(move |_: Uri| {
                        let path = path.clone();
                        async move {
                            let s = tokio::net::UnixStream::connect(path).await?;
                            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
                        }
                    }))
                    .await
            })
            .map_err(|e| format!("connecting to {}: {e}", socket.display()))?;
        Ok(Cri { rt, channel, timeout })
    }

    fn unary<Req, Resp>(&self, method: &'static str, req: Req) -> Result<Resp, CriError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        let path = PathAndQuery::from_static(method);
        let timeout = self.timeout;
        self.rt.block_on(async move {
            let call = async {
                grpc.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
                let codec = tonic::codec::ProstCodec::<Req, Resp>::default();
                grpc.unary(tonic::Request::new(req), path, codec).await.map(tonic::Response::into_inner)
            };
            match tokio::time::timeout(timeout, call).await {
                Ok(r) => r.map_err(|s| CriError { code: s.code(), message: s.message().to_string() }),
                Err(_) => Err(CriError {
                    code: tonic::Code::DeadlineExceeded,
                    message: format!("{method}: no answer in {timeout:?}"),
                }),
            }
        })
    }

    /// RunPodSandbox: the sandbox ID.
    pub fn run_pod_sandbox(&self, config: PodSandboxConfig) -> Result<String, CriError> {
        let req = RunPodSandboxRequest { config: Some(config), runtime_handler: String::new() };
        let resp: RunPodSandboxResponse = self.unary("/runtime.v1.RuntimeService/RunPodSandbox", req)?;
        Ok(resp.pod_sandbox_id)
    }

    /// PodSandboxStatus (verbose: with containerd's `info`).
    pub fn pod_sandbox_status(&self, id: &str) -> Result<PodSandboxStatusResponse, CriError> {
        let req = PodSandboxStatusRequest { pod_sandbox_id: id.to_string(), verbose: true };
        self.unary("/runtime.v1.RuntimeService/PodSandboxStatus", req)
    }

    /// StopPodSandbox.
    pub fn stop_pod_sandbox(&self, id: &str) -> Result<(), CriError> {
        let _: Empty =
            self.unary("/runtime.v1.RuntimeService/StopPodSandbox", PodSandboxIdRequest { pod_sandbox_id: id.into() })?;
        Ok(())
    }

    /// RemovePodSandbox.
    pub fn remove_pod_sandbox(&self, id: &str) -> Result<(), CriError> {
        let _: Empty = self
            .unary("/runtime.v1.RuntimeService/RemovePodSandbox", PodSandboxIdRequest { pod_sandbox_id: id.into() })?;
        Ok(())
    }

    /// ListPodSandbox: every sandbox the runtime knows.
    pub fn list_pod_sandboxes(&self) -> Result<Vec<PodSandbox>, CriError> {
        let resp: ListPodSandboxResponse =
            self.unary("/runtime.v1.RuntimeService/ListPodSandbox", ListPodSandboxRequest {})?;
        Ok(resp.items)
    }

    /// Status (verbose).
    pub fn status(&self) -> Result<StatusResponse, CriError> {
        self.unary("/runtime.v1.RuntimeService/Status", StatusRequest { verbose: true })
    }
}
