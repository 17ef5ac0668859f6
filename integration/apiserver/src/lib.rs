//! A stand-in for kube-apiserver, for tests: it speaks the API server's wire protocol for the
//! requests braid's node agent makes, over real HTTP, to the real client crates (kube-rs).
//!
//! No kube-apiserver can run where braid's suite runs, so the agent's API side is tested
//! against this, not against a real API server. What it serves, and what it does not, is
//! listed exactly in `integration/apiserver/README.md`. In short: NetworkAttachmentDefinitions
//! (list, get, watch), pods (list, get, watch, merge patch), events (create, list, get, watch,
//! merge patch; `v1` and `events.k8s.io/v1`), bearer-token authentication, one store with a
//! global resourceVersion, paging with continue tokens, watches with bookmarks and timeouts,
//! and compaction, after which old resourceVersions answer 410 as they do after etcd compacts.
//!
//! Every method here blocks, so plain `#[test]` functions drive it. The server runs on a
//! current-thread tokio runtime on its own thread; [`StandIn::stop`] drops that runtime, so
//! every connection and open watch ends mid-stream as if the API server had crashed, and
//! [`StandIn::restart`] serves the same store on the same port again.
//!
//! ```no_run
//! use kube_standin::StandIn;
//! use std::time::Duration;
//!
//! let api = StandIn::start()?;
//! api.write_kubeconfig(std::path::Path::new("/tmp/kubeconfig"))?;
//! api.create_nad("default", "macvlan", Some(r#"{"cniVersion":"1.0.0","type":"macvlan"}"#), &[]);
//! // … run the agent with KUBECONFIG=/tmp/kubeconfig …
//! let reason = api.wait_until("the agent's event", Duration::from_secs(60), |s| {
//!     s.events().first().map(|e| e["reason"].clone())
//! });
//! # Ok::<(), std::io::Error>(())
//! ```
// Test support: a misused helper (deleting what is not there) fails the test loudly.
#![allow(clippy::panic)]

mod event_rules;
mod list;
mod params;
mod patch;
mod resource;
mod select;
mod server;
mod status;
mod store;
mod time;
mod watch;

use resource::{Kind, View};
use serde_json::{json, Value};
use server::Server;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::{Shared, Store};

/// How a stand-in behaves where a test may want it otherwise.
#[derive(Debug, Clone)]
pub struct Options {
    /// How often an open watch that asked for bookmarks gets one. The apiserver sends one about
    /// every minute; the default here is one second, so that tests see them.
    pub bookmark_interval: Duration,
    /// The bearer token requests must carry; a random one when `None`.
    pub token: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options { bookmark_interval: Duration::from_secs(1), token: None }
    }
}

/// One request as the server received it (before authentication), for tests that check what
/// the client sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// `GET`, `PATCH`, …
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The raw query string (empty when there is none).
    pub query: String,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The `Accept` header, if any (`…;as=PartialObjectMetadata…` asks for metadata only).
    pub accept: Option<String>,
    /// The body, as text.
    pub body: String,
}

impl RecordedRequest {
    /// The first value of query parameter `key`, decoded.
    pub fn param(&self, key: &str) -> Option<String> {
        form_urlencoded::parse(self.query.as_bytes()).find(|(k, _)| k == key).map(|(_, v)| v.into_owned())
    }

    /// Whether this request opened a watch.
    pub fn is_watch(&self) -> bool {
        self.method == "GET" && matches!(self.param("watch").as_deref(), Some("true" | "1"))
    }
}

/// The store as [`StandIn::wait_until`] shows it, read under its lock. Objects are in their
/// stored form (events as `v1` Events).
pub struct Snapshot<'a> {
    store: &'a Store,
}

impl Snapshot<'_> {
    /// The store's newest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.store.rv()
    }

    /// A NetworkAttachmentDefinition.
    pub fn nad(&self, ns: &str, name: &str) -> Option<&Value> {
        self.store.get(Kind::Nad, ns, name)
    }

    /// Every NetworkAttachmentDefinition, by namespace, then name.
    pub fn nads(&self) -> Vec<&Value> {
        self.store.all(Kind::Nad).collect()
    }

    /// A pod.
    pub fn pod(&self, ns: &str, name: &str) -> Option<&Value> {
        self.store.get(Kind::Pod, ns, name)
    }

    /// Every pod, by namespace, then name.
    pub fn pods(&self) -> Vec<&Value> {
        self.store.all(Kind::Pod).collect()
    }

    /// Every event, as a `v1` Event (`involvedObject`, `message`, `count`…), whichever group
    /// it was created through, in the order they were created.
    pub fn events(&self) -> Vec<&Value> {
        self.store.by_creation(Kind::Event)
    }

    /// Every request so far, in the order received.
    pub fn requests(&self) -> &[RecordedRequest] {
        &self.store.requests
    }

    /// The open watches, as the `path?query` that opened each.
    pub fn watches(&self) -> Vec<String> {
        self.store.watches()
    }
}

/// A running (or stopped) API stand-in on 127.0.0.1. Dropping it stops the server thread.
pub struct StandIn {
    shared: Arc<Shared>,
    port: u16,
    server: Option<Server>,
}

impl StandIn {
    /// Starts a stand-in on an ephemeral port of 127.0.0.1 with the default [`Options`].
    pub fn start() -> io::Result<StandIn> {
        Self::start_with(Options::default())
    }

    /// Starts a stand-in with `options`.
    pub fn start_with(options: Options) -> io::Result<StandIn> {
        let token = options.token.unwrap_or_else(|| {
            let mut state = store::seed();
            format!("{:016x}{:016x}", store::next_random(&mut state), store::next_random(&mut state))
        });
        let shared = Arc::new(Shared::new(token, options.bookmark_interval));
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let port = listener.local_addr()?.port();
        let server = Server::spawn(listener, shared.clone())?;
        Ok(StandIn { shared, port, server: Some(server) })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The bearer token every request must carry.
    pub fn token(&self) -> &str {
        &self.shared.token
    }

    /// Writes a kubeconfig for this stand-in: one cluster (the plain-HTTP URL), one user (the
    /// token), one context, made current, with namespace `default` — what
    /// `kube::Config::infer()` reads from `KUBECONFIG`.
    pub fn write_kubeconfig(&self, path: &Path) -> io::Result<()> {
        let q = |s: &str| Value::String(s.to_string()).to_string();
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kube-standin\n  cluster:\n    server: {}\n\
             users:\n- name: kube-standin\n  user:\n    token: {}\n\
             contexts:\n- name: kube-standin\n  context:\n    cluster: kube-standin\n    user: kube-standin\n    namespace: default\n\
             current-context: kube-standin\npreferences: {{}}\n",
            q(&self.url()),
            q(self.token()),
        );
        std::fs::write(path, text)
    }

    /// Stops serving abruptly, as a crashed API server: the listener closes (connections are
    /// refused) and every open connection and watch stream is cut mid-way. The store is kept.
    pub fn stop(&mut self) {
        if let Some(mut server) = self.server.take() {
            server.stop();
        }
    }

    /// Serves the same store on the same port again (stopping first if still running).
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop();
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, self.port)))?;
        self.server = Some(Server::spawn(listener, self.shared.clone())?);
        Ok(())
    }

    fn nad_object(ns: &str, name: &str, config: Option<&str>, annotations: &[(&str, &str)]) -> Value {
        let mut nad = json!({
            "apiVersion": View::Nad.api_version(),
            "kind": View::Nad.object_kind(),
            "metadata": { "name": name, "namespace": ns },
            "spec": {},
        });
        set_annotations(&mut nad, annotations);
        if let Some(config) = config {
            nad["spec"]["config"] = json!(config);
        }
        nad
    }

    /// Creates a NetworkAttachmentDefinition with `spec.config` (none: `spec` is `{}`) and the
    /// annotations given; returns it as stored. Panics if it exists.
    pub fn create_nad(&self, ns: &str, name: &str, config: Option<&str>, annotations: &[(&str, &str)]) -> Value {
        self.create(Kind::Nad, Self::nad_object(ns, name, config, annotations))
    }

    /// Replaces a NetworkAttachmentDefinition's `spec.config` and annotations (a new
    /// `generation` if the spec changed); returns it as stored. Panics if it does not exist.
    pub fn replace_nad(&self, ns: &str, name: &str, config: Option<&str>, annotations: &[(&str, &str)]) -> Value {
        self.replace(Kind::Nad, Self::nad_object(ns, name, config, annotations))
    }

    /// Deletes a NetworkAttachmentDefinition. Panics if it does not exist.
    pub fn delete_nad(&self, ns: &str, name: &str) {
        self.delete(Kind::Nad, ns, name);
    }

    /// A NetworkAttachmentDefinition as stored.
    pub fn nad(&self, ns: &str, name: &str) -> Option<Value> {
        self.shared.lock().get(Kind::Nad, ns, name).cloned()
    }

    /// Creates a running pod scheduled to `node_name`, with the annotations given; returns it
    /// as stored. Panics if it exists.
    pub fn create_pod(&self, ns: &str, name: &str, node_name: &str, annotations: &[(&str, &str)]) -> Value {
        let mut pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": { "name": name, "namespace": ns },
            "spec": {
                "nodeName": node_name,
                "containers": [{ "name": "main", "image": "registry.k8s.io/pause:3.10" }],
                "restartPolicy": "Always",
                "schedulerName": "default-scheduler",
                "serviceAccountName": "default",
            },
            "status": { "phase": "Running" },
        });
        set_annotations(&mut pod, annotations);
        self.create(Kind::Pod, pod)
    }

    /// Deletes a pod (at once, as after its graceful deletion completed). Panics if it does
    /// not exist.
    pub fn delete_pod(&self, ns: &str, name: &str) {
        self.delete(Kind::Pod, ns, name);
    }

    /// A pod as stored.
    pub fn pod(&self, ns: &str, name: &str) -> Option<Value> {
        self.shared.lock().get(Kind::Pod, ns, name).cloned()
    }

    /// Creates or replaces any object the stand-in serves, given whole (`apiVersion`, `kind`,
    /// `metadata.namespace`, `metadata.name`, and labels or fields the other helpers do not set).
    /// Server-owned metadata (uid, resourceVersion, creationTimestamp, generation) is set here.
    /// Panics for a kind the stand-in does not serve, or a NetworkAttachmentDefinition the
    /// CRD's schema would refuse (`spec.config` not a string).
    pub fn put_object(&self, object: Value) -> Value {
        let kind = match (object["apiVersion"].as_str(), object["kind"].as_str()) {
            (Some("k8s.cni.cncf.io/v1"), Some("NetworkAttachmentDefinition")) => Kind::Nad,
            (Some("v1"), Some("Pod")) => Kind::Pod,
            (Some("v1"), Some("Event")) => Kind::Event,
            (api_version, kind) => panic!("kube-standin serves no {api_version:?} {kind:?}"),
        };
        let (ns, name) = store::key_of(&object);
        if ns.is_empty() || name.is_empty() {
            panic!("put_object needs metadata.namespace and metadata.name: {object}");
        }
        if kind == Kind::Nad && object.pointer("/spec/config").is_some_and(|c| !c.is_string()) {
            panic!("the NetworkAttachmentDefinition CRD makes spec.config a string: {object}");
        }
        if self.shared.lock().get(kind, &ns, &name).is_some() {
            self.replace(kind, object)
        } else {
            self.create(kind, object)
        }
    }

    fn create(&self, kind: Kind, object: Value) -> Value {
        let created = self.shared.write(|store| store.create(kind, object));
        created.unwrap_or_else(|object| panic!("{} already exists", describe(&object)))
    }

    fn replace(&self, kind: Kind, mut object: Value) -> Value {
        let (ns, name) = store::key_of(&object);
        self.shared.write(|store| {
            let Some(current) = store.get(kind, &ns, &name) else {
                panic!("{} does not exist", describe(&object));
            };
            for field in ["uid", "creationTimestamp", "generation"] {
                if let Some(value) = current["metadata"].get(field) {
                    object["metadata"][field] = value.clone();
                }
            }
            store.update(kind, object)
        })
    }

    fn delete(&self, kind: Kind, ns: &str, name: &str) {
        if self.shared.write(|store| store.delete(kind, ns, name)).is_none() {
            panic!("no {kind:?} {ns}/{name} to delete");
        }
    }

    /// From now on, every request `method path` (`"PATCH"`, `"/api/v1/namespaces/ns/pods/x"`)
    /// is recorded as it arrives and then held unanswered, as by an API server that accepts a
    /// request and never answers, until [`StandIn::release`]. A client that gives up and drops
    /// the connection leaves it held.
    pub fn hold(&self, method: &str, path: &str) {
        self.shared.hold(method, path);
    }

    /// Answers the held requests `method path` (each as if it had arrived now), and every later
    /// one at once.
    pub fn release(&self, method: &str, path: &str) {
        self.shared.release(method, path);
    }

    /// Every event, as `v1` Events (see [`Snapshot::events`]).
    pub fn events(&self) -> Vec<Value> {
        let store = self.shared.lock();
        Snapshot { store: &store }.events().into_iter().cloned().collect()
    }

    /// Compacts, as etcd does: every resourceVersion up to now becomes too old. Every open
    /// watch gets an `ERROR` event with a 410 `Status` (reason `Expired`, "too old resource
    /// version: X (Y)") and ends; a later watch from an older resourceVersion gets the same,
    /// and a list at an exact older resourceVersion, or a continue token from before, a 410.
    pub fn compact(&self) {
        self.shared.write(Store::compact);
    }

    /// The store's newest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().rv()
    }

    /// Every request so far, in the order received.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// Waits until `f` finds what it looks for in the store, woken by every change of the
    /// store (objects, requests, watches opened or closed), and returns it. Panics naming
    /// `what` after `timeout` — an upper bound for a test that would otherwise hang, never a
    /// measure of speed.
    pub fn wait_until<T>(&self, what: &str, timeout: Duration, mut f: impl FnMut(&Snapshot<'_>) -> Option<T>) -> T {
        let deadline = Instant::now() + timeout;
        let mut store = self.shared.lock();
        loop {
            if let Some(found) = f(&Snapshot { store: &store }) {
                return found;
            }
            let now = Instant::now();
            if now >= deadline {
                let requests: Vec<String> = store
                    .requests
                    .iter()
                    .rev()
                    .take(10)
                    .map(|r| format!("{} {}?{}", r.method, r.path, r.query))
                    .collect();
                panic!(
                    "timed out after {timeout:?} waiting for {what}; the last requests, newest first: {requests:#?}"
                );
            }
            store = self.shared.wait_timeout(store, deadline - now);
        }
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop();
    }
}

fn set_annotations(object: &mut Value, annotations: &[(&str, &str)]) {
    if !annotations.is_empty() {
        let map: serde_json::Map<String, Value> =
            annotations.iter().map(|(k, v)| ((*k).to_string(), Value::String((*v).to_string()))).collect();
        object["metadata"]["annotations"] = Value::Object(map);
    }
}

fn describe(object: &Value) -> String {
    let (ns, name) = store::key_of(object);
    format!("{} {ns}/{name}", object["kind"].as_str().unwrap_or("object"))
}
