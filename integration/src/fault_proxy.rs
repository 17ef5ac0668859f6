//! The tests' own fault point in front of the real kube-apiserver of `scripts/node.sh`: a
//! TLS-terminating HTTP/1.1 reverse proxy, in node1's network namespace (where the API server
//! is reachable), which forwards every request to the API server untouched — the client's own
//! bearer token included, so the API server authenticates, authorizes and admits exactly as
//! for a direct request — except those a test names: those it answers `500` itself
//! ([`FaultProxy::fail`]), or accepts and leaves unanswered until the test releases them
//! ([`FaultProxy::hold`]). It records every request as it arrives (method, path, query,
//! Content-Type, body), so a test can count what the client sent.
//!
//! Why a proxy of the tests' own and not toxiproxy (the maintained fault proxy,
//! `github.com/Shopify/toxiproxy`): toxiproxy works on TCP streams, and the agent's requests
//! travel inside TLS, so it cannot tell one request from another — it can cut, delay or
//! throttle a whole connection, never answer `500` to one PATCH or hold the PATCH of one pod
//! while the others pass. Only something that terminates TLS sees requests. It is Rust (hyper's
//! HTTP/1.1 server and client, rustls with ring: the client crates' own stack, already built
//! for the agent) rather than a Go reverse proxy built into the machine's cache, so that a test
//! drives it in process — a fault set, a request held and released at a known point of the
//! test, with no control protocol between two programs.
//!
//! It serves the API server's own certificate (`pki/apiserver.crt`, whose names include
//! `127.0.0.1`) on `127.0.0.1` of node1's namespace, so the client verifies it against the
//! cluster's CA exactly as it verifies the API server; the proxy in turn verifies the API
//! server against that CA. Each client connection gets one connection to the API server of its
//! own, so a connection the client abandons (after its `--api-timeout`) is abandoned upstream
//! too, and [`FaultProxy::stop`] cuts everything at once, as an API server crash does.
//!
//! Every method blocks; plain `#[test]` functions drive it. The proxy runs on a current-thread
//! tokio runtime on a thread of its own, inside node1's network namespace; dropping the
//! [`FaultProxy`] stops it.

use crate::cluster::Cluster;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::collections::BTreeSet;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// Where the API server of `scripts/node.sh` listens (node1's namespace).
const API_SERVER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)), 6443);

/// One request as the proxy received it, before any fault: what the client sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// `GET`, `PATCH`, …
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The raw query string (empty when there is none).
    pub query: String,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The body, as text.
    pub body: String,
}

impl Recorded {
    /// Whether this is `method path`.
    pub fn is(&self, method: &str, path: &str) -> bool {
        self.method == method && self.path == path
    }
}

/// What a test asked for, and what came.
#[derive(Debug, Default)]
struct State {
    requests: Vec<Recorded>,
    /// `(method, path, how many more)`: answered `500` by the proxy, not forwarded.
    failing: Vec<(String, String, usize)>,
    held: BTreeSet<(String, String)>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled on every change of `state` (a request recorded, a fault set or spent).
    changed: Condvar,
    /// Wakes held requests when a hold is released.
    released: tokio::sync::Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What the proxy serves with and forwards to.
struct Setup {
    netns: PathBuf,
    accept: TlsAcceptor,
    connect: TlsConnector,
}

/// The running thread: its runtime ends (every connection with it) when `stop` is sent.
struct Server {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A fault proxy in front of the cluster's API server (see the module's documentation).
pub struct FaultProxy {
    shared: Arc<Shared>,
    setup: Arc<Setup>,
    dir: PathBuf,
    port: u16,
    server: Option<Server>,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy").field("port", &self.port).field("running", &self.server.is_some()).finish()
    }
}

fn other(what: impl std::fmt::Display) -> io::Error {
    io::Error::other(what.to_string())
}

impl FaultProxy {
    /// Starts a proxy for `cluster`'s API server on an ephemeral port of `127.0.0.1` in node1's
    /// network namespace.
    pub fn start(cluster: &Cluster) -> io::Result<FaultProxy> {
        let dir = cluster.dir().to_path_buf();
        let pki = dir.join("pki");
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let pem = |e: tokio_rustls::rustls::pki_types::pem::Error| other(format!("{}: {e}", pki.display()));
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(pki.join("apiserver.crt"))
            .map_err(pem)?
            .collect::<Result<_, _>>()
            .map_err(pem)?;
        let key = PrivateKeyDer::from_pem_file(pki.join("apiserver.key")).map_err(pem)?;
        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(other)?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(other)?;
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut roots = RootCertStore::empty();
        for ca in CertificateDer::pem_file_iter(pki.join("ca.crt")).map_err(pem)? {
            roots.add(ca.map_err(pem)?).map_err(other)?;
        }
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(other)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        let setup = Arc::new(Setup {
            netns: dir.join("ns/node1.net"),
            accept: TlsAcceptor::from(Arc::new(server)),
            connect: TlsConnector::from(Arc::new(client)),
        });
        let shared = Arc::new(Shared::default());
        let (server, port) = Server::spawn(&setup, &shared, 0)?;
        Ok(FaultProxy { shared, setup, dir, port, server: Some(server) })
    }

    /// `https://127.0.0.1:PORT`: reachable from node1's network namespace only.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The network namespace the proxy (and so its client) is in.
    pub fn netns(&self) -> &Path {
        &self.setup.netns
    }

    /// Writes a kubeconfig for a client of this proxy: its URL, the cluster's CA, `token`.
    pub fn write_kubeconfig(&self, path: &Path, token: &str) -> io::Result<()> {
        let q = |s: &str| serde_json::Value::String(s.to_string()).to_string();
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: braid-fault-proxy\n  cluster:\n    server: {}\n    certificate-authority: {}\n\
             users:\n- name: user\n  user:\n    token: {}\n\
             contexts:\n- name: braid-fault-proxy\n  context:\n    cluster: braid-fault-proxy\n    user: user\n\
             current-context: braid-fault-proxy\n",
            q(&self.url()),
            q(&self.dir.join("pki/ca.crt").display().to_string()),
            q(token),
        );
        std::fs::write(path, text)
    }

    /// The next `times` requests `method path` are answered `500 InternalError` (a `Status`
    /// object, as the API server writes one) by the proxy and never reach the API server.
    pub fn fail(&self, method: &str, path: &str, times: usize) {
        self.shared.lock().failing.push((method.to_string(), path.to_string(), times));
        self.shared.changed.notify_all();
    }

    /// How many of the `500`s [`fail`](Self::fail) asked for are still to come.
    pub fn failures_left(&self) -> usize {
        self.shared.lock().failing.iter().map(|f| f.2).sum()
    }

    /// From now on every request `method path` is recorded as it arrives and left unanswered
    /// (an API server that accepts a request and never answers) until [`release`](Self::release).
    pub fn hold(&self, method: &str, path: &str) {
        self.shared.lock().held.insert((method.to_string(), path.to_string()));
    }

    /// Ends a [`hold`](Self::hold): the requests held are forwarded now (as if they arrived
    /// now), and every later one at once.
    pub fn release(&self, method: &str, path: &str) {
        self.shared.lock().held.remove(&(method.to_string(), path.to_string()));
        self.shared.released.notify_waiters();
    }

    /// Every request so far, in the order received.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.lock().requests.clone()
    }

    /// How many requests `method path` came so far.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.shared.lock().requests.iter().filter(|r| r.is(method, path)).count()
    }

    /// Waits until `f` holds of the requests so far; panics naming `what` after `guard` (a
    /// stuck client, never a measurement).
    pub fn wait_until(&self, what: &str, guard: Duration, f: impl Fn(&[Recorded]) -> bool) {
        let give_up = Instant::now() + guard;
        let mut state = self.shared.lock();
        while !f(&state.requests) {
            let left = give_up.saturating_duration_since(Instant::now());
            if left.is_zero() {
                #[allow(clippy::panic)]
                {
                    panic!("{what} did not happen (stuck); requests: {:#?}", state.requests);
                }
            }
            state = self.shared.changed.wait_timeout(state, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Stops the proxy as an API server crash does: the listener closes (connections refused)
    /// and every open connection and watch is cut; what was recorded is kept.
    pub fn stop(&mut self) {
        self.server = None;
    }

    /// Serves on the same port again.
    pub fn restart(&mut self) -> io::Result<()> {
        let (server, _) = Server::spawn(&self.setup, &self.shared, self.port)?;
        self.server = Some(server);
        Ok(())
    }
}

impl Server {
    /// The proxy's thread, in node1's namespace, listening on `port` (0: any); once it listens.
    fn spawn(setup: &Arc<Setup>, shared: &Arc<Shared>, port: u16) -> io::Result<(Server, u16)> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<u16>>();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (setup, shared) = (setup.clone(), shared.clone());
        let thread = std::thread::Builder::new().name("fault-proxy".into()).spawn(move || {
            let netns = setup.netns.clone();
            let ready = ready_tx.clone();
            let entered = cni_skel::netns::run_in(&netns, move || serve(setup, shared, port, ready, stop_rx));
            if let Err(e) = entered {
                let _ = ready_tx.send(Err(other(e)));
            }
        })?;
        let port = ready_rx.recv().map_err(|_| other("the fault proxy's thread ended before listening"))??;
        Ok((Server { stop: Some(stop_tx), thread: Some(thread) }, port))
    }
}

/// The proxy's life on its thread: listen, say so, serve until told to stop. The runtime is
/// dropped on return, and every connection task with it.
fn serve(
    setup: Arc<Setup>,
    shared: Arc<Shared>,
    port: u16,
    ready: std::sync::mpsc::Sender<io::Result<u16>>,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    rt.block_on(async move {
        let listener = match bind(port) {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let _ = ready.send(listener.local_addr().map(|a| a.port()));
        let accept = async {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { continue };
                let (setup, shared) = (setup.clone(), shared.clone());
                tokio::spawn(connection(setup, shared, tcp));
            }
        };
        tokio::select! {
            _ = accept => {}
            _ = stop => {}
        }
    });
}

fn bind(port: u16) -> io::Result<tokio::net::TcpListener> {
    // std's bind sets SO_REUSEADDR: a restart binds the same port while old connections linger.
    let l = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port))?;
    l.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(l)
}

type Upstream = Arc<tokio::sync::Mutex<Option<SendRequest<Full<Bytes>>>>>;
type Body = Either<Incoming, Full<Bytes>>;

/// One client connection: TLS, then HTTP/1.1, each request through [`request`] on this
/// connection's own upstream connection.
async fn connection(setup: Arc<Setup>, shared: Arc<Shared>, tcp: tokio::net::TcpStream) {
    let Ok(tls) = setup.accept.accept(tcp).await else { return };
    let upstream: Upstream = Arc::new(tokio::sync::Mutex::new(None));
    let service = hyper::service::service_fn(move |req| {
        let (setup, shared, upstream) = (setup.clone(), shared.clone(), upstream.clone());
        async move { Ok::<_, std::convert::Infallible>(request(&setup, &shared, &upstream, req).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
}

/// A `Status` answer of the proxy's own (kube-apiserver's error shape: what the client parses).
fn status(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16()
    });
    let mut r = Response::new(Either::Right(Full::new(Bytes::from(body.to_string()))));
    *r.status_mut() = code;
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    r
}

/// Headers of one hop (RFC 9110 §7.6.1), not forwarded.
const HOP: [&str; 5] = ["connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection"];

async fn request(setup: &Setup, shared: &Shared, upstream: &Upstream, req: Request<Incoming>) -> Response<Body> {
    let (mut parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return status(StatusCode::BAD_REQUEST, "BadRequest", &format!("fault proxy: reading the body: {e}")),
    };
    let (method, path) = (parts.method.to_string(), parts.uri.path().to_string());
    let fault = {
        let mut state = shared.lock();
        state.requests.push(Recorded {
            method: method.clone(),
            path: path.clone(),
            query: parts.uri.query().unwrap_or("").to_string(),
            content_type: parts
                .headers
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            body: String::from_utf8_lossy(&body).into_owned(),
        });
        let fault = state.failing.iter_mut().find(|f| f.0 == method && f.1 == path && f.2 > 0);
        fault.map(|f| f.2 -= 1).is_some()
    };
    shared.changed.notify_all();
    if fault {
        return status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            "the tests' fault point answered 500 (FaultProxy::fail)",
        );
    }
    loop {
        // Registered before the check: a release between the two still wakes it.
        let released = shared.released.notified();
        if !shared.lock().held.contains(&(method.clone(), path.clone())) {
            break;
        }
        released.await;
    }
    for h in HOP {
        parts.headers.remove(h);
    }
    let mut sender = upstream.lock().await;
    for attempt in 0..2 {
        if sender.as_ref().is_none_or(SendRequest::is_closed) {
            match connect(setup).await {
                Ok(s) => *sender = Some(s),
                Err(e) => return status(StatusCode::BAD_GATEWAY, "ServiceUnavailable", &format!("fault proxy: {e}")),
            }
        }
        let Some(s) = sender.as_mut() else { continue };
        if s.ready().await.is_err() {
            *sender = None;
            continue;
        }
        let forwarded = Request::from_parts(parts.clone(), Full::new(body.clone()));
        match s.send_request(forwarded).await {
            Ok(mut response) => {
                for h in HOP {
                    response.headers_mut().remove(h);
                }
                return response.map(Either::Left);
            }
            // The API server closed a kept-alive connection as this went out: once more on a new one.
            Err(e) if attempt == 0 && e.is_canceled() => *sender = None,
            Err(e) => return status(StatusCode::BAD_GATEWAY, "ServiceUnavailable", &format!("fault proxy: {e}")),
        }
    }
    status(StatusCode::BAD_GATEWAY, "ServiceUnavailable", "fault proxy: the API server's connection kept closing")
}

/// A connection to the API server, verified against the cluster's CA.
async fn connect(setup: &Setup) -> Result<SendRequest<Full<Bytes>>, String> {
    let tcp =
        tokio::net::TcpStream::connect(API_SERVER).await.map_err(|e| format!("connecting to {API_SERVER}: {e}"))?;
    let name = ServerName::IpAddress(API_SERVER.ip().into());
    let tls = setup.connect.connect(name, tcp).await.map_err(|e| format!("TLS with {API_SERVER}: {e}"))?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}
