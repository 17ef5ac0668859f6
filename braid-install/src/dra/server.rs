//! The kubelet-facing side of braid's DRA driver: two gRPC servers on unix sockets, as the
//! kubelet's plugin manager and DRA manager expect them (k8s.io/kubernetes v1.36.3
//! `pkg/kubelet/pluginmanager`, `pkg/kubelet/cm/dra/plugin`) and as the Go helper
//! k8s.io/dynamic-resource-allocation v0.36.3 `kubeletplugin` serves them:
//!
//! - the **registration socket** `<kubeletDir>/plugins_registry/<driver>-reg@braid.sock`, service
//!   `pluginregistration.Registration`. The kubelet's plugin watcher finds it by inotify (or by
//!   walking the directory when the kubelet starts, so a kubelet restart needs nothing from the
//!   driver), calls `GetInfo` (1 s deadline), validates the answer and calls
//!   `NotifyRegistrationStatus`. A failed registration is retried by the kubelet's reconciler
//!   from scratch, with backoff. Removing the socket deregisters the driver.
//! - the **DRA socket** `<kubeletDir>/plugins/<driver>/dra.sock`, service
//!   `k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin`, which the kubelet dials as
//!   `"unix:" + endpoint` (`dra_plugin_manager.go` `add`): `endpoint` is GetInfo's, so it must be
//!   the path *as the kubelet sees it* (the node's path, not the agent's `/host/...`). The
//!   kubelet keeps one connection open and counts the driver usable while it is connected; after
//!   30 s (`defaultWipingDelay`) without a connected, registered instance it deletes the node's
//!   ResourceSlices of the driver.
//!
//! **Why the registration socket's name has an `@`.** The v1.36.3 kubelet dials the
//! registration socket by its bare path (grpc-go `DialContext`,
//! `pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go` `dial`), so grpc-go
//! sends the path as `:authority`, percent-encoded (`encodeAuthority`: `/` becomes `%2F`, `@`
//! and `.` stay). The `http` crate under h2 takes a `%` only in an authority's userinfo
//! (`Authority::parse`), so h2 resets such a stream (`PROTOCOL_ERROR`, hyperium/h2 #442 and
//! #487, kubernetes #109081) before any Rust code sees it. With an `@` in the file name
//! (`<driver>-reg@braid.sock`) everything before it — the encoded directories — is userinfo
//! and `braid.sock` the host: a valid authority. The kubelet's plugin watcher takes any socket
//! file in the directory, whatever its name. The DRA socket is dialed as `unix:<path>`
//! (authority `localhost`) and needs nothing.
//!
//! gRPC here is tonic's server half (`tonic::server::Grpc` and prost's codec, no tonic
//! transport, no router) over hyper's HTTP/2 server connection, on the agent's current-thread
//! runtime.
//!
//! What the Go helper does and this module does the same way:
//! - a stale socket file is removed before `bind` (`endpoint.go` `listen`);
//! - the DRA socket is served before the registration socket exists (`draplugin.go` `Start`:
//!   "Run the node plugin gRPC server first to ensure that it is ready"), because the kubelet
//!   may call it right after registering;
//! - Prepare and Unprepare calls are serialized (`Serialize`, on by default), so that a
//!   [`Driver`] need not guard its claim records against a concurrent call;
//! - one claim's failure is that claim's `error`, never a failed RPC (`NodePrepareResources`);
//! - both sockets are removed on stop (`unixListener.Close`), so the kubelet deregisters.
//! - a socket deleted under a running server (someone wiping `plugins_registry`) is *not*
//!   re-created: the Go helper has no such check either. The kubelet deregisters the driver;
//!   an agent restart registers it again. (When the directory itself is deleted, the kubelet's
//!   inotify watch on it is gone until the kubelet restarts, so a re-created socket would not
//!   be seen anyway.)
//!
//! Where this differs: the socket files are mode 0600 (the kubelet connects as root; the Go
//! helper leaves the umask's mode), the plugin directory is created 0750 when missing, and on
//! stop a socket is removed only if it is still the one this server bound (same inode), so a
//! newer instance's socket at the same path is never unlinked.

use crate::dra::proto;
use futures::stream::{FuturesUnordered, StreamExt};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Mutex};
use tonic::body::BoxBody;
use tonic::codec::ProstCodec;
use tonic::server::{Grpc, UnaryService};
use tonic::Status;

/// What a [`Driver`] call answers: per claim UID, that claim's result.
pub type Results<'a, T> = Pin<Box<dyn Future<Output = HashMap<String, T>> + Send + 'a>>;

/// What braid's Prepare logic implements; the server calls it and wraps the map into the
/// response. Calls never overlap (the server serializes them, as the Go helper does by default).
///
/// Every claim of a call should have an entry, keyed by its `uid`: a claim the map lacks gets an
/// error entry from the server (the kubelet would otherwise fail the whole call with "skipped N
/// ResourceClaims"), and an entry for a UID that was not asked for is dropped (the kubelet fails
/// the whole call on an unknown UID). A claim's failure is its entry's `error`; there is no way
/// to fail the RPC, as there is no failure the kubelet treats differently: it retries either.
pub trait Driver: Send + Sync + 'static {
    /// `NodePrepareResources`: make the claims usable by the pods on this node. Called again
    /// for a claim already prepared (kubelet restart, retry): must be idempotent.
    fn prepare(&self, claims: Vec<proto::Claim>) -> Results<'_, proto::NodePrepareResourceResponse>;
    /// `NodeUnprepareResources`: undo Prepare. The claim may be gone from the API already, and
    /// may never have been prepared by this process: must be idempotent.
    fn unprepare(&self, claims: Vec<proto::Claim>) -> Results<'_, proto::NodeUnprepareResourceResponse>;
}

/// The registration socket of `driver`, as the node (the kubelet) sees it:
/// `<kubelet_dir>/plugins_registry/<driver>-reg@braid.sock` — the Go helper's
/// `<driver name>-reg.sock` (`draplugin.go`, `KubeletRegistryDir`) with the `@` the module doc
/// explains: without it no kubelet could register a driver served by h2.
pub fn registration_socket(kubelet_dir: &Path, driver: &str) -> PathBuf {
    kubelet_dir.join("plugins_registry").join(format!("{driver}-reg@braid.sock"))
}

/// The DRA socket of `driver`, as the node (the kubelet) sees it:
/// `<kubelet_dir>/plugins/<driver>/dra.sock` (`draplugin.go`: `KubeletPluginsDir`, `"dra.sock"`).
pub fn dra_socket(kubelet_dir: &Path, driver: &str) -> PathBuf {
    kubelet_dir.join("plugins").join(driver).join("dra.sock")
}

/// Where the two servers listen and what GetInfo says.
#[derive(Debug)]
pub struct Config {
    /// The driver name (GetInfo's `name`).
    pub driver_name: String,
    /// The registration socket as the agent reaches it (below its host root).
    pub registration_socket: PathBuf,
    /// The DRA socket as the agent reaches it (below its host root).
    pub dra_socket: PathBuf,
    /// The DRA socket as the kubelet reaches it (GetInfo's `endpoint`, a node path).
    pub dra_endpoint: PathBuf,
    registration: watch::Sender<Option<proto::RegistrationStatus>>,
}

impl Config {
    /// The sockets' paths: the agent's two, and the DRA socket's node path for GetInfo.
    pub fn new(
        driver_name: impl Into<String>,
        registration_socket: PathBuf,
        dra_socket: PathBuf,
        dra_endpoint: PathBuf,
    ) -> Config {
        Config {
            driver_name: driver_name.into(),
            registration_socket,
            dra_socket,
            dra_endpoint,
            registration: watch::channel(None).0,
        }
    }

    /// The kubelet's last `NotifyRegistrationStatus` (none before the first): for a readiness
    /// check, or a test.
    pub fn registration(&self) -> watch::Receiver<Option<proto::RegistrationStatus>> {
        self.registration.subscribe()
    }
}

/// Why the servers could not start.
#[derive(Debug, thiserror::Error)]
pub enum DraError {
    /// A socket's directory could not be created.
    #[error("DRA: cannot create {}: {source}", .path.display())]
    Dir {
        /// The directory (as the agent reaches it).
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A socket could not be bound (or its stale file removed, or its mode set).
    #[error("DRA: cannot listen on {}: {source}", .path.display())]
    Listen {
        /// The socket (as the agent reaches it).
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Which socket a connection came in on: each serves its own service only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Socket {
    Registration,
    Dra,
}

impl Socket {
    fn name(self) -> &'static str {
        match self {
            Socket::Registration => "registration",
            Socket::Dra => "DRA",
        }
    }
}

/// A bound socket: its listener and the inode it created (removed on stop only if unchanged).
#[derive(Debug)]
struct Bound {
    listener: std::os::unix::net::UnixListener,
    path: PathBuf,
    inode: (u64, u64),
}

impl Bound {
    fn listen(path: &Path, dir_mode: u32) -> Result<Bound, DraError> {
        let err = |source| DraError::Listen { path: path.to_path_buf(), source };
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(dir_mode)
                .create(dir)
                .map_err(|source| DraError::Dir { path: dir.to_path_buf(), source })?;
        }
        // A previous instance's socket (or anything else at the path): bind would fail on it.
        match std::fs::remove_file(path) {
            Ok(()) => crate::log(&format!("DRA: removed the stale {}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(err(e)),
        }
        let listener = std::os::unix::net::UnixListener::bind(path).map_err(err)?;
        let bound = (|| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
            listener.set_nonblocking(true)?;
            let m = std::fs::metadata(path)?;
            Ok((m.dev(), m.ino()))
        })();
        match bound {
            Ok(inode) => Ok(Bound { listener, path: path.to_path_buf(), inode }),
            Err(e) => {
                let _ = std::fs::remove_file(path);
                Err(err(e))
            }
        }
    }

    /// Unlinks the socket unless something else has replaced it since.
    fn remove(&self) {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if (m.dev(), m.ino()) == self.inode => {
                if let Err(e) = std::fs::remove_file(&self.path) {
                    crate::log(&format!("DRA: cannot remove {}: {e}", self.path.display()));
                }
            }
            Ok(_) => crate::log(&format!("DRA: {} is another instance's now; left in place", self.path.display())),
            Err(_) => crate::log(&format!("DRA: {} was removed while serving", self.path.display())),
        }
    }
}

/// What every call shares.
struct State<D> {
    driver: Arc<D>,
    info: proto::PluginInfo,
    serial: Mutex<()>,
    registration: watch::Sender<Option<proto::RegistrationStatus>>,
}

/// A claim result type: success or its error text.
trait ClaimResult {
    fn error(&self) -> &str;
    fn failed(error: String) -> Self;
}

impl ClaimResult for proto::NodePrepareResourceResponse {
    fn error(&self) -> &str {
        &self.error
    }
    fn failed(error: String) -> Self {
        proto::NodePrepareResourceResponse { devices: Vec::new(), error }
    }
}

impl ClaimResult for proto::NodeUnprepareResourceResponse {
    fn error(&self) -> &str {
        &self.error
    }
    fn failed(error: String) -> Self {
        proto::NodeUnprepareResourceResponse { error }
    }
}

/// One entry per claim asked for: the driver's, or an error where it gave none; entries for
/// UIDs not asked for are dropped. Logs one line per call.
fn complete<T: ClaimResult>(
    call: &str,
    driver: &str,
    claims: &[proto::Claim],
    mut results: HashMap<String, T>,
) -> HashMap<String, T> {
    let mut out = HashMap::with_capacity(claims.len());
    let mut said = Vec::with_capacity(claims.len());
    for c in claims {
        let r = results.remove(&c.uid).unwrap_or_else(|| {
            T::failed(format!("{driver}: no result for ResourceClaim {}/{} ({})", c.namespace, c.name, c.uid))
        });
        match r.error() {
            "" => said.push(format!("{}/{} ({}) ok", c.namespace, c.name, c.uid)),
            e => said.push(format!("{}/{} ({}) failed: {e}", c.namespace, c.name, c.uid)),
        }
        out.insert(c.uid.clone(), r);
    }
    let mut extra: Vec<_> = results.into_keys().collect();
    extra.sort();
    if !extra.is_empty() {
        said.push(format!("dropped results for claim UIDs not asked for: {}", extra.join(", ")));
    }
    crate::log(&format!("DRA: {call}: {}", said.join("; ")));
    out
}

/// The line a registration status is logged with.
pub fn registration_message(driver: &str, status: &proto::RegistrationStatus) -> String {
    if status.plugin_registered {
        format!("DRA: the kubelet registered driver {driver}")
    } else {
        format!(
            "DRA: THE KUBELET REFUSED TO REGISTER DRIVER {driver}: {} — no pod on this node can use its claims until \
             it does (the kubelet retries registration with backoff)",
            if status.error.is_empty() { "(no reason given)" } else { &status.error }
        )
    }
}

impl<D: Driver> State<D> {
    async fn prepare(&self, claims: Vec<proto::Claim>) -> proto::NodePrepareResourcesResponse {
        if claims.is_empty() {
            return proto::NodePrepareResourcesResponse::default();
        }
        let _one_at_a_time = self.serial.lock().await;
        let results = self.driver.prepare(claims.clone()).await;
        proto::NodePrepareResourcesResponse {
            claims: complete("NodePrepareResources", &self.info.name, &claims, results),
        }
    }

    async fn unprepare(&self, claims: Vec<proto::Claim>) -> proto::NodeUnprepareResourcesResponse {
        if claims.is_empty() {
            return proto::NodeUnprepareResourcesResponse::default();
        }
        let _one_at_a_time = self.serial.lock().await;
        let results = self.driver.unprepare(claims.clone()).await;
        proto::NodeUnprepareResourcesResponse {
            claims: complete("NodeUnprepareResources", &self.info.name, &claims, results),
        }
    }

    fn notified(&self, status: proto::RegistrationStatus) {
        crate::log(&registration_message(&self.info.name, &status));
        self.registration.send_replace(Some(status));
    }
}

/// A unary method from an async function of its request message (what tonic-build generates
/// a struct per method for).
struct Unary<F>(F);

impl<Req, Resp, F, Fut> UnaryService<Req> for Unary<F>
where
    F: FnMut(Req) -> Fut,
    Fut: Future<Output = Resp> + Send + 'static,
{
    type Response = Resp;
    type Future = Pin<Box<dyn Future<Output = Result<tonic::Response<Resp>, Status>> + Send>>;

    fn call(&mut self, request: tonic::Request<Req>) -> Self::Future {
        let answer = (self.0)(request.into_inner());
        Box::pin(async move { Ok(tonic::Response::new(answer.await)) })
    }
}

/// One request, by its path; a method of the other socket's service is `UNIMPLEMENTED`.
async fn route<D: Driver>(
    state: Arc<State<D>>,
    socket: Socket,
    req: hyper::Request<Incoming>,
) -> hyper::Response<BoxBody> {
    match (socket, req.uri().path()) {
        (Socket::Registration, proto::GET_INFO) => {
            let info = state.info.clone();
            let codec = ProstCodec::<proto::PluginInfo, proto::InfoRequest>::default();
            Grpc::new(codec).unary(Unary(move |_| std::future::ready(info.clone())), req).await
        }
        (Socket::Registration, proto::NOTIFY_REGISTRATION_STATUS) => {
            let codec = ProstCodec::<proto::RegistrationStatusResponse, proto::RegistrationStatus>::default();
            let method = move |status| {
                state.notified(status);
                std::future::ready(proto::RegistrationStatusResponse {})
            };
            Grpc::new(codec).unary(Unary(method), req).await
        }
        (Socket::Dra, proto::NODE_PREPARE_RESOURCES) => {
            let codec =
                ProstCodec::<proto::NodePrepareResourcesResponse, proto::NodePrepareResourcesRequest>::default();
            let method = move |r: proto::NodePrepareResourcesRequest| {
                let state = state.clone();
                async move { state.prepare(r.claims).await }
            };
            Grpc::new(codec).unary(Unary(method), req).await
        }
        (Socket::Dra, proto::NODE_UNPREPARE_RESOURCES) => {
            let codec =
                ProstCodec::<proto::NodeUnprepareResourcesResponse, proto::NodeUnprepareResourcesRequest>::default();
            let method = move |r: proto::NodeUnprepareResourcesRequest| {
                let state = state.clone();
                async move { state.unprepare(r.claims).await }
            };
            Grpc::new(codec).unary(Unary(method), req).await
        }
        (socket, path) => {
            Status::unimplemented(format!("{path} is not served on the {} socket of braid's DRA driver", socket.name()))
                .into_http()
        }
    }
}

/// Resolves once `stop` is true, or its sender is gone (nobody can stop the server any more:
/// the agent is going away).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// One HTTP/2 connection until it ends or `stop`; then a graceful shutdown (GOAWAY; the calls
/// running finish and answer).
async fn connection<D: Driver>(
    stream: tokio::net::UnixStream,
    state: Arc<State<D>>,
    socket: Socket,
    mut stop: watch::Receiver<bool>,
) {
    let service = hyper::service::service_fn(move |req| {
        let state = state.clone();
        async move { Ok::<_, Infallible>(route(state, socket, req).await) }
    });
    let conn =
        hyper::server::conn::http2::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        // A kubelet that closes or resets its connection is no news.
        _ = conn.as_mut() => return,
        _ = stopped(&mut stop) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// The two sockets, bound: [`Server::bind`] returns once both exist (and the kubelet may
/// already be connecting); [`Server::run`] answers.
pub struct Server<D> {
    state: Arc<State<D>>,
    dra: Bound,
    registration: Bound,
}

impl<D: Driver> Server<D> {
    /// Binds the DRA socket, then the registration socket (the kubelet finds that one and calls
    /// the other at once). Needs no runtime.
    pub fn bind(config: Config, driver: Arc<D>) -> Result<Server<D>, DraError> {
        let info = proto::PluginInfo {
            r#type: proto::DRA_PLUGIN_TYPE.into(),
            name: config.driver_name.clone(),
            endpoint: config.dra_endpoint.display().to_string(),
            supported_versions: vec![proto::DRA_PLUGIN_SERVICE_V1.into()],
        };
        let dra = Bound::listen(&config.dra_socket, 0o750)?;
        // The kubelet's plugin watcher creates plugins_registry 0755 itself (`pluginwatcher`
        // `init`); created here only when the kubelet has not started yet.
        let registration = match Bound::listen(&config.registration_socket, 0o755) {
            Ok(r) => r,
            Err(e) => {
                dra.remove();
                return Err(e);
            }
        };
        let state = Arc::new(State { driver, info, serial: Mutex::new(()), registration: config.registration });
        Ok(Server { state, dra, registration })
    }

    /// Serves until `stop` is true (or its sender is dropped); then removes the registration
    /// socket (the kubelet deregisters the driver) and the DRA socket, lets the calls running
    /// answer, and returns. Dropping the future instead cuts them off.
    pub async fn run(self, mut stop: watch::Receiver<bool>) -> Result<(), DraError> {
        let Server { state, dra, registration } = self;
        let listen = |b: &Bound| {
            let l = b.listener.try_clone().and_then(tokio::net::UnixListener::from_std);
            l.map_err(|source| DraError::Listen { path: b.path.clone(), source })
        };
        let result = match (listen(&dra), listen(&registration)) {
            (Ok(d), Ok(r)) => {
                crate::log(&format!(
                    "DRA: driver {} serving {} (kubelet endpoint {}) and registration {}",
                    state.info.name,
                    dra.path.display(),
                    state.info.endpoint,
                    registration.path.display()
                ));
                accept(&state, d, r, &mut stop).await
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        registration.remove();
        drop(registration);
        dra.remove();
        drop(dra);
        let mut connections = result?;
        while connections.next().await.is_some() {}
        crate::log(&format!("DRA: driver {} stopped", state.info.name));
        Ok(())
    }
}

type Connections = FuturesUnordered<Pin<Box<dyn Future<Output = ()> + Send>>>;

/// Accepts on both sockets until `stop`; the connections still open then.
async fn accept<D: Driver>(
    state: &Arc<State<D>>,
    dra: tokio::net::UnixListener,
    registration: tokio::net::UnixListener,
    stop: &mut watch::Receiver<bool>,
) -> Result<Connections, DraError> {
    let mut connections = Connections::new();
    loop {
        let (accepted, socket) = tokio::select! {
            _ = stopped(stop) => return Ok(connections),
            a = dra.accept() => (a, Socket::Dra),
            a = registration.accept() => (a, Socket::Registration),
            Some(()) = connections.next(), if !connections.is_empty() => continue,
        };
        match accepted {
            Ok((stream, _)) => connections.push(Box::pin(connection(stream, state.clone(), socket, stop.clone()))),
            Err(e) => {
                // Out of file descriptors and the like: try again shortly.
                crate::log(&format!("DRA: accept on the {} socket: {e}", socket.name()));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Binds both sockets and serves until `stop` ([`Server::bind`], then [`Server::run`]).
pub async fn serve<D: Driver>(config: Config, driver: Arc<D>, stop: watch::Receiver<bool>) -> Result<(), DraError> {
    Server::bind(config, driver)?.run(stop).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// grpc-go's `encodeAuthority` (clientconn.go, v1.79.3): what the kubelet's registration
    /// dial sends as `:authority` for a bare socket path.
    fn grpc_go_authority(endpoint: &str) -> String {
        let keep = |c: u8| {
            c.is_ascii_alphanumeric()
                || matches!(c, b'-' | b'_' | b'.' | b'~')
                || matches!(c, b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=')
                || matches!(c, b':' | b'[' | b']' | b'@')
        };
        endpoint.bytes().map(|c| if keep(c) { (c as char).to_string() } else { format!("%{c:02X}") }).collect()
    }

    /// What h2 checks before it hands a request on (`server.rs`: `Authority::from_maybe_shared`,
    /// else `PROTOCOL_ERROR`).
    fn h2_takes(authority: &str) -> bool {
        authority.parse::<tonic::codegen::http::uri::Authority>().is_ok()
    }

    #[test]
    fn the_kubelets_authority_for_the_registration_socket_is_one_h2_takes() {
        let sock = registration_socket(Path::new("/var/lib/kubelet"), "net.braid-cni.io");
        assert_eq!(sock, Path::new("/var/lib/kubelet/plugins_registry/net.braid-cni.io-reg@braid.sock"));
        let authority = grpc_go_authority(sock.to_str().unwrap_or_default());
        assert_eq!(authority, "%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2Fnet.braid-cni.io-reg@braid.sock");
        assert!(h2_takes(&authority), "{authority}");
        // The Go helper's name, `<driver>-reg.sock`: refused, the failure this name avoids.
        let plain = grpc_go_authority("/var/lib/kubelet/plugins_registry/net.braid-cni.io-reg.sock");
        assert!(!h2_takes(&plain), "{plain}");
        // A kubelet with another root dir, and the longest driver name: still taken.
        let long = format!("{}.example.com", "d".repeat(50));
        let sock = registration_socket(Path::new("/srv/k8s/kubelet-root"), &long);
        assert!(h2_takes(&grpc_go_authority(sock.to_str().unwrap_or_default())));
    }
}
