//! The DRA driver's gRPC servers (`braid_install::dra::server`) called as the kubelet calls
//! them: a gRPC client (tonic) over the unix sockets, in a temporary directory laid out as the
//! agent sees the node (`<root>/host/var/lib/kubelet/...`). No root needed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_install::dra::proto::{self, Claim};
use braid_install::dra::server::{self, Config, Driver, Results, Server};
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::{Code, Status};

const DRIVER: &str = "net.braid-cni.io";

/// A temporary node root, removed on drop (also when the test fails).
struct Root(PathBuf);

impl Root {
    fn new(name: &str) -> Root {
        let root = std::env::temp_dir().join(format!("braid-dra-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        Root(root)
    }

    /// The agent's view of the kubelet dir (`--host-root` below the test's root).
    fn kubelet(&self) -> PathBuf {
        self.0.join("host/var/lib/kubelet")
    }

    fn config(&self) -> Config {
        Config::new(
            DRIVER,
            server::registration_socket(&self.kubelet(), DRIVER),
            server::dra_socket(&self.kubelet(), DRIVER),
            server::dra_socket(Path::new("/var/lib/kubelet"), DRIVER),
        )
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A Prepare logic that answers by the claim's name: `bad-*` fails, `lost` gets no entry, and
/// every answer carries one entry for a claim nobody asked for. It records what it was asked.
#[derive(Default)]
struct Fake {
    calls: Mutex<Vec<(&'static str, Vec<String>)>>,
}

impl Fake {
    fn record(&self, call: &'static str, claims: &[Claim]) {
        self.calls.lock().unwrap().push((call, claims.iter().map(|c| c.uid.clone()).collect()));
    }
}

impl Driver for Fake {
    fn prepare(&self, claims: Vec<Claim>) -> Results<'_, proto::NodePrepareResourceResponse> {
        self.record("prepare", &claims);
        Box::pin(async move {
            let mut out: HashMap<String, proto::NodePrepareResourceResponse> = claims
                .into_iter()
                .filter(|c| c.name != "lost")
                .map(|c| {
                    let r = if c.name.starts_with("bad") {
                        proto::NodePrepareResourceResponse {
                            devices: vec![],
                            error: format!("ResourceClaim {}/{}: not allocated", c.namespace, c.name),
                        }
                    } else {
                        proto::NodePrepareResourceResponse {
                            devices: vec![proto::Device {
                                request_names: vec!["net".into()],
                                pool_name: "node-a".into(),
                                device_name: "t-side-1a2b3c4d".into(),
                                cdi_device_ids: vec![],
                                share_id: Some(format!("share-{}", c.uid)),
                            }],
                            error: String::new(),
                        }
                    };
                    (c.uid, r)
                })
                .collect();
            out.insert("uid-stranger".into(), proto::NodePrepareResourceResponse::default());
            out
        })
    }

    fn unprepare(&self, claims: Vec<Claim>) -> Results<'_, proto::NodeUnprepareResourceResponse> {
        self.record("unprepare", &claims);
        Box::pin(async move {
            let mut out: HashMap<String, proto::NodeUnprepareResourceResponse> = claims
                .into_iter()
                .filter(|c| c.name != "lost")
                .map(|c| {
                    let error =
                        if c.name.starts_with("bad") { format!("cannot remove {}", c.name) } else { String::new() };
                    (c.uid, proto::NodeUnprepareResourceResponse { error })
                })
                .collect();
            out.insert("uid-stranger".into(), proto::NodeUnprepareResourceResponse::default());
            out
        })
    }
}

/// A client connection to a unix socket, as the kubelet's (`"unix:" + endpoint`).
async fn channel(path: &Path) -> Channel {
    let path = path.to_path_buf();
    // The URI is required and ignored: the connector dials the socket.
    Endpoint::from_static("http://[::1]:1")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?)) }
        }))
        .await
        .unwrap()
}

async fn unary<Req, Resp>(channel: &Channel, method: &'static str, req: Req) -> Result<Resp, Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.map_err(|e| Status::unavailable(e.to_string()))?;
    let codec = tonic::codec::ProstCodec::<Req, Resp>::default();
    grpc.unary(tonic::Request::new(req), PathAndQuery::from_static(method), codec).await.map(|r| r.into_inner())
}

fn claim(name: &str) -> Claim {
    Claim { namespace: "t".into(), uid: format!("uid-{name}"), name: name.into() }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Serves `config` with `driver` on this (current-thread) runtime until the returned sender says
/// stop; the sockets exist when this returns.
fn start(config: Config, driver: Arc<Fake>) -> (tokio::sync::watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    let server = Server::bind(config, driver).unwrap();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(async move { server.run(stop_rx).await.unwrap() });
    (stop, task)
}

#[tokio::test]
async fn get_info_names_the_driver_and_the_dra_socket_as_the_kubelet_sees_it() {
    let root = Root::new("info");
    let config = root.config();
    let (reg, dra) = (config.registration_socket.clone(), config.dra_socket.clone());
    let (stop, task) = start(config, Arc::default());
    let info: proto::PluginInfo = unary(&channel(&reg).await, proto::GET_INFO, proto::InfoRequest {}).await.unwrap();
    assert_eq!(
        info,
        proto::PluginInfo {
            r#type: "DRAPlugin".into(),
            name: DRIVER.into(),
            // The node's path, not the agent's <root>/host/...: the kubelet dials it.
            endpoint: "/var/lib/kubelet/plugins/net.braid-cni.io/dra.sock".into(),
            supported_versions: vec!["v1.DRAPlugin".into()],
        }
    );
    assert_eq!(reg, root.kubelet().join("plugins_registry/net.braid-cni.io-reg@braid.sock"));
    assert_eq!(dra, root.kubelet().join("plugins/net.braid-cni.io/dra.sock"));
    assert_eq!((mode(&reg), mode(&dra)), (0o600, 0o600));
    assert_eq!(mode(dra.parent().unwrap()), 0o750);
    stop.send(true).unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn one_claims_failure_is_its_own_entry_and_the_others_are_prepared() {
    let root = Root::new("prepare");
    let fake = Arc::new(Fake::default());
    let config = root.config();
    let dra = config.dra_socket.clone();
    let (stop, task) = start(config, fake.clone());
    let ch = channel(&dra).await;

    let claims = vec![claim("web-net"), claim("bad-net"), claim("lost")];
    let req = proto::NodePrepareResourcesRequest { claims: claims.clone() };
    let resp: proto::NodePrepareResourcesResponse = unary(&ch, proto::NODE_PREPARE_RESOURCES, req).await.unwrap();
    // One entry per claim asked for; the stranger's entry is dropped.
    let mut uids: Vec<_> = resp.claims.keys().cloned().collect();
    uids.sort();
    assert_eq!(uids, ["uid-bad-net", "uid-lost", "uid-web-net"]);
    let ok = &resp.claims["uid-web-net"];
    assert_eq!(ok.error, "");
    assert_eq!(ok.devices.len(), 1);
    assert_eq!(ok.devices[0].share_id.as_deref(), Some("share-uid-web-net"));
    assert_eq!(ok.devices[0].device_name, "t-side-1a2b3c4d");
    assert_eq!(resp.claims["uid-bad-net"].error, "ResourceClaim t/bad-net: not allocated");
    let lost = &resp.claims["uid-lost"].error;
    assert!(lost.contains("no result") && lost.contains("t/lost") && lost.contains(DRIVER), "{lost}");

    let req = proto::NodeUnprepareResourcesRequest { claims: claims.clone() };
    let resp: proto::NodeUnprepareResourcesResponse = unary(&ch, proto::NODE_UNPREPARE_RESOURCES, req).await.unwrap();
    let mut uids: Vec<_> = resp.claims.keys().cloned().collect();
    uids.sort();
    assert_eq!(uids, ["uid-bad-net", "uid-lost", "uid-web-net"]);
    assert_eq!(resp.claims["uid-web-net"].error, "");
    assert_eq!(resp.claims["uid-bad-net"].error, "cannot remove bad-net");
    assert!(resp.claims["uid-lost"].error.contains("no result"));

    // The driver saw each call once, with every claim, in order.
    let all: Vec<String> = claims.iter().map(|c| c.uid.clone()).collect();
    assert_eq!(*fake.calls.lock().unwrap(), [("prepare", all.clone()), ("unprepare", all)]);

    // An empty call does not reach the driver.
    let resp: proto::NodePrepareResourcesResponse =
        unary(&ch, proto::NODE_PREPARE_RESOURCES, proto::NodePrepareResourcesRequest::default()).await.unwrap();
    assert!(resp.claims.is_empty());
    assert_eq!(fake.calls.lock().unwrap().len(), 2);
    stop.send(true).unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn a_refused_registration_is_answered_recorded_and_logged() {
    let root = Root::new("notify");
    let config = root.config();
    let reg = config.registration_socket.clone();
    let mut registration = config.registration();
    let (stop, task) = start(config, Arc::default());
    assert_eq!(*registration.borrow_and_update(), None);
    let refused = proto::RegistrationStatus {
        plugin_registered: false,
        error: "RegisterPlugin error -- plugin validation failed".into(),
    };
    let _: proto::RegistrationStatusResponse =
        unary(&channel(&reg).await, proto::NOTIFY_REGISTRATION_STATUS, refused.clone()).await.unwrap();
    assert!(registration.has_changed().unwrap());
    assert_eq!(*registration.borrow_and_update(), Some(refused.clone()));
    // The line the server logged for it.
    let line = server::registration_message(DRIVER, &refused);
    assert!(line.contains("REFUSED") && line.contains(DRIVER) && line.contains("plugin validation failed"), "{line}");
    let ok = proto::RegistrationStatus { plugin_registered: true, error: String::new() };
    assert!(!server::registration_message(DRIVER, &ok).contains("REFUSED"));
    stop.send(true).unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn each_socket_serves_its_own_service_only() {
    let root = Root::new("unimplemented");
    let config = root.config();
    let (reg, dra) = (config.registration_socket.clone(), config.dra_socket.clone());
    let (stop, task) = start(config, Arc::default());
    let r: Result<proto::PluginInfo, _> = unary(&channel(&dra).await, proto::GET_INFO, proto::InfoRequest {}).await;
    assert_eq!(r.unwrap_err().code(), Code::Unimplemented);
    let req = proto::NodePrepareResourcesRequest { claims: vec![claim("web-net")] };
    let r: Result<proto::NodePrepareResourcesResponse, _> =
        unary(&channel(&reg).await, proto::NODE_PREPARE_RESOURCES, req).await;
    assert_eq!(r.unwrap_err().code(), Code::Unimplemented);
    stop.send(true).unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn a_stale_socket_is_replaced() {
    let root = Root::new("stale");
    let config = root.config();
    let (reg, dra) = (config.registration_socket.clone(), config.dra_socket.clone());
    // A previous instance's sockets, left behind (nothing listens on them any more).
    for s in [&reg, &dra] {
        std::fs::create_dir_all(s.parent().unwrap()).unwrap();
        drop(std::os::unix::net::UnixListener::bind(s).unwrap());
        assert!(std::os::unix::net::UnixStream::connect(s).is_err());
    }
    let (stop, task) = start(config, Arc::default());
    let info: proto::PluginInfo = unary(&channel(&reg).await, proto::GET_INFO, proto::InfoRequest {}).await.unwrap();
    assert_eq!(info.name, DRIVER);
    let resp: proto::NodeUnprepareResourcesResponse = unary(
        &channel(&dra).await,
        proto::NODE_UNPREPARE_RESOURCES,
        proto::NodeUnprepareResourcesRequest { claims: vec![claim("web-net")] },
    )
    .await
    .unwrap();
    assert_eq!(resp.claims["uid-web-net"].error, "");
    stop.send(true).unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn stop_removes_the_sockets_so_the_kubelet_deregisters() {
    let root = Root::new("stop");
    let config = root.config();
    let (reg, dra) = (config.registration_socket.clone(), config.dra_socket.clone());
    let (stop, task) = start(config, Arc::default());
    // A connection open at stop, as the kubelet's always is: shut down, not waited for forever.
    let ch = channel(&dra).await;
    let _: proto::NodeUnprepareResourcesResponse =
        unary(&ch, proto::NODE_UNPREPARE_RESOURCES, proto::NodeUnprepareResourcesRequest::default()).await.unwrap();
    assert!(reg.exists() && dra.exists());
    stop.send(true).unwrap();
    task.await.unwrap();
    assert!(!reg.exists(), "{} left after stop", reg.display());
    assert!(!dra.exists(), "{} left after stop", dra.display());
}

#[tokio::test]
async fn stop_leaves_a_newer_instances_socket_in_place() {
    let root = Root::new("newer");
    let config = root.config();
    let reg = config.registration_socket.clone();
    let (stop, task) = start(config, Arc::default());
    // Another instance took the path over (removed this one's socket, bound its own).
    std::fs::remove_file(&reg).unwrap();
    let newer = std::os::unix::net::UnixListener::bind(&reg).unwrap();
    stop.send(true).unwrap();
    task.await.unwrap();
    assert!(reg.exists(), "stop removed the newer instance's {}", reg.display());
    assert!(std::os::unix::net::UnixStream::connect(&reg).is_ok());
    drop(newer);
}

#[tokio::test]
async fn a_dropped_stop_sender_stops_the_server() {
    let root = Root::new("dropped");
    let config = root.config();
    let reg = config.registration_socket.clone();
    let (stop, task) = start(config, Arc::default());
    drop(stop);
    task.await.unwrap();
    assert!(!reg.exists());
}
