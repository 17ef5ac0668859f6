//! `braid-podresources SOCKET NAMESPACE NAME TIMEOUT_MS [--dra-devices FILE] [RESOURCE...]`: the devices the kubelet
//! allocated to one pod, read from its PodResources API (v1) over its pod-resources socket, and
//! printed as one JSON object for the delegator, which runs this only for an ADD whose networks
//! name a resource (`k8s.v1.cni.cncf.io/resourceName`). See README.md for the protocol.
//!
//! `Get` for the pod (GA in Kubernetes 1.36; KEP-3695); where the kubelet has no `Get` (before
//! 1.27, or with `KubeletPodResourcesGet` off) `List`, which Multus calls, filtered to the pod.
//! When one of the `RESOURCE`s has no device of the pod, `GetAllocatableResources` too: it
//! tells a resource no device plugin of this node offers from one the pod did not request.
//! Every call is bounded by TIMEOUT_MS in all (connection included): a kubelet that is
//! restarting or stopped must fail the ADD with a retryable error, not hang it.
//!
//! With `--dra-devices FILE` the pod's devices of other DRA drivers count too ([`dra`]): those
//! the node's DRA devices record `FILE` gives Multus's two attributes.

mod api;
mod devices;
mod dra;

use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint, Uri};

/// The largest answer read: Multus's (`defaultPodResourcesMaxSize`, 16 MiB), since `List`
/// carries every pod of the node.
const MAX_MESSAGE: usize = 16 << 20;

/// Why no answer: `kind` tells the delegator which CNI code to give.
struct Failure {
    /// `unavailable` (no socket, nobody listening, the kubelet refused the call),
    /// `timeout` (no answer in time), `usage` (bad arguments).
    kind: &'static str,
    msg: String,
}

fn fail(kind: &'static str, msg: impl Into<String>) -> Failure {
    Failure { kind, msg: msg.into() }
}

struct Args {
    /// `--dra-devices`: the node's DRA devices record.
    dra_devices: Option<PathBuf>,
    socket: PathBuf,
    namespace: String,
    name: String,
    timeout: Duration,
    resources: Vec<String>,
}

fn args() -> Result<Args, Failure> {
    let mut a = std::env::args().skip(1).peekable();
    let usage = || {
        fail("usage", "usage: braid-podresources SOCKET NAMESPACE NAME TIMEOUT_MS [--dra-devices FILE] [RESOURCE...]")
    };
    let socket = PathBuf::from(a.next().ok_or_else(usage)?);
    let namespace = a.next().ok_or_else(usage)?;
    let name = a.next().ok_or_else(usage)?;
    let ms: u64 = a.next().and_then(|t| t.parse().ok()).filter(|t| *t > 0).ok_or_else(usage)?;
    // After the positionals (no resource name starts with "--"): a helper older than the
    // option takes it for two resources, asks GetAllocatableResources once more, and works.
    let dra_devices = match a.next_if_eq("--dra-devices") {
        Some(_) => Some(PathBuf::from(a.next().ok_or_else(usage)?)),
        None => None,
    };
    Ok(Args { dra_devices, socket, namespace, name, timeout: Duration::from_millis(ms), resources: a.collect() })
}

fn main() {
    let out = match args().and_then(|a| run(&a)) {
        Ok(v) => (v, 0),
        Err(f) => (json!({"kind": f.kind, "msg": f.msg}), 1),
    };
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", out.0);
    let _ = stdout.flush();
    std::process::exit(out.1);
}

fn run(a: &Args) -> Result<Value, Failure> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail("unavailable", format!("cannot start: {e}")))?;
    let shown = a.socket.display().to_string();
    rt.block_on(async {
        match tokio::time::timeout(a.timeout, lookup(a)).await {
            Ok(r) => r,
            Err(_) => Err(fail(
                "timeout",
                format!("the kubelet did not answer on {shown} within {} ms", a.timeout.as_millis()),
            )),
        }
    })
}

async fn lookup(a: &Args) -> Result<Value, Failure> {
    let shown = a.socket.display().to_string();
    // Checked first: "no such socket" says more than a connection error (the kubelet is not
    // running here, or the socket path is not the kubelet's).
    if let Err(e) = std::fs::metadata(&a.socket) {
        return Err(fail("unavailable", format!("the kubelet's pod-resources socket {shown}: {e}")));
    }
    let path = a.socket.clone();
    // The URI is required and ignored: the connector dials the socket.
    let channel = Endpoint::from_static("http://[::1]:1")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                let s = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
            }
        }))
        .await
        .map_err(|e| fail("unavailable", format!("connecting to the kubelet's pod-resources socket {shown}: {e}")))?;
    let get = api::GetPodResourcesRequest { pod_name: a.name.clone(), pod_namespace: a.namespace.clone() };
    let (mut devices, claimed, via) = match unary::<_, api::GetPodResourcesResponse>(&channel, api::GET, get).await {
        Ok(r) => (
            r.pod_resources.as_ref().map(devices::of_pod).unwrap_or_default(),
            dra::of_pods(r.pod_resources.as_ref(), &a.namespace, &a.name),
            "Get",
        ),
        Err(s) if no_get(&s) => {
            let r: api::ListPodResourcesResponse =
                unary(&channel, api::LIST, api::ListPodResourcesRequest {}).await.map_err(|s| refused("List", &s))?;
            (
                devices::of_listed(&r.pod_resources, &a.namespace, &a.name),
                dra::of_pods(&r.pod_resources, &a.namespace, &a.name),
                "List",
            )
        }
        Err(s) => return Err(refused("Get", &s)),
    };
    let resolved = match &a.dra_devices {
        Some(record) => dra::resolve(&claimed, record, &mut devices),
        None => dra::Resolved::default(),
    };
    let mut out = json!({"via": via, "devices": devices});
    if !resolved.listed.is_empty() {
        out["dra"] = json!(resolved.listed);
    }
    if let Some(why) = resolved.unresolved {
        out["draUnresolved"] = json!(why);
    }
    if a.resources.iter().any(|r| devices.get(r).is_none_or(Vec::is_empty)) {
        // Only to name the mistake well: without it the refusal still stands.
        if let Ok(r) = unary::<_, api::AllocatableResourcesResponse>(
            &channel,
            api::ALLOCATABLE,
            api::AllocatableResourcesRequest {},
        )
        .await
        {
            let mut names: Vec<String> = r.devices.into_iter().map(|d| d.resource_name).collect();
            names.sort();
            names.dedup();
            out["allocatable"] = json!(names);
        }
    }
    Ok(out)
}

/// The kubelet has no `Get`: a kubelet before 1.27 answers Unimplemented; 1.27–1.35 with the
/// `KubeletPodResourcesGet` gate off answer "PodResources API Get method disabled".
fn no_get(s: &tonic::Status) -> bool {
    s.code() == tonic::Code::Unimplemented || s.message().contains("Get method disabled")
}

fn refused(method: &str, s: &tonic::Status) -> Failure {
    fail("unavailable", format!("the kubelet's PodResources {method} failed: {:?}: {}", s.code(), s.message()))
}

async fn unary<Req, Resp>(channel: &Channel, method: &'static str, req: Req) -> Result<Resp, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(channel.clone()).max_decoding_message_size(MAX_MESSAGE);
    grpc.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let codec = tonic::codec::ProstCodec::<Req, Resp>::default();
    grpc.unary(tonic::Request::new(req), PathAndQuery::from_static(method), codec)
        .await
        .map(tonic::Response::into_inner)
}
