//! The stand-in driven by the real client crates, as braid's node agent drives an API server:
//! kube-rs 5 (`Api`, the `watcher` with its default backoff, the event `Recorder`) over HTTP,
//! configured from the kubeconfig the stand-in writes.
//!
//! A watcher runs on a thread of its own (its own current-thread runtime, as in the agent) and
//! reports what it sees through a channel, so the test thread can change the store, stop the
//! server, and wait. Every wait has a generous upper bound that only stops a hung test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference, Pod};
use k8s_openapi::api::events::v1::Event as EventsV1;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::PartialObjectMeta;
use kube::runtime::events::{Event as RecorderEvent, EventType, Recorder};
use kube::runtime::watcher::{self, Event as Watched};
use kube::runtime::WatchStreamExt;
use kube::{Client, Config};
use kube_standin::{Options, StandIn};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// An upper bound for anything a test waits for; never reached when the code works.
const PATIENCE: Duration = Duration::from_secs(60);

fn options() -> Options {
    Options { bookmark_interval: Duration::from_millis(200), ..Options::default() }
}

/// A kubeconfig file for `api`, removed on drop.
struct KubeconfigFile(PathBuf);

impl KubeconfigFile {
    fn new(api: &StandIn) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!("kube-standin-test-{}-{}.yaml", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let path = std::env::temp_dir().join(name);
        api.write_kubeconfig(&path).unwrap();
        KubeconfigFile(path)
    }
}

impl Drop for KubeconfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A client configured as the agent would be: from the kubeconfig file.
async fn client(kubeconfig: &std::path::Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.unwrap();
    Client::try_from(config).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Runs `f` with a client of `api` on a runtime of its own.
fn with_client<T>(api: &StandIn, f: impl AsyncFnOnce(Client) -> T) -> T {
    let file = KubeconfigFile::new(api);
    runtime().block_on(async { f(client(&file.0).await).await })
}

fn nad_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("k8s.cni.cncf.io", "v1", "NetworkAttachmentDefinition");
    ApiResource::from_gvk_with_plural(&gvk, "network-attachment-definitions")
}

/// What a watcher yielded, with the object as JSON.
#[derive(Debug, Clone)]
enum Seen {
    Init,
    InitApply(String),
    InitDone,
    Apply(String, Value),
    Delete(String, Value),
    Error(String),
}

impl Seen {
    fn key(&self) -> Option<&str> {
        match self {
            Seen::InitApply(k) | Seen::Apply(k, _) | Seen::Delete(k, _) => Some(k),
            _ => None,
        }
    }
}

fn seen<K: serde::Serialize>(event: Result<Watched<K>, watcher::Error>) -> Seen {
    let named = |o: &K| {
        let v = serde_json::to_value(o).unwrap();
        let key =
            format!("{}/{}", v["metadata"]["namespace"].as_str().unwrap(), v["metadata"]["name"].as_str().unwrap());
        (key, v)
    };
    match event {
        Ok(Watched::Init) => Seen::Init,
        Ok(Watched::InitApply(o)) => Seen::InitApply(named(&o).0),
        Ok(Watched::InitDone) => Seen::InitDone,
        Ok(Watched::Apply(o)) => {
            let (k, v) = named(&o);
            Seen::Apply(k, v)
        }
        Ok(Watched::Delete(o)) => {
            let (k, v) = named(&o);
            Seen::Delete(k, v)
        }
        Err(e) => Seen::Error(format!("{e:?}")),
    }
}

/// A kube-runtime watcher (default backoff) on its own thread.
struct WatcherThread {
    rx: mpsc::Receiver<Seen>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    _kubeconfig: KubeconfigFile,
}

impl WatcherThread {
    /// Runs the stream `make` builds from a client (a watcher with its default backoff).
    fn spawn<K, S>(api: &StandIn, make: impl FnOnce(Client) -> S + Send + 'static) -> Self
    where
        K: serde::Serialize + Send + 'static,
        S: futures_util::Stream<Item = Result<Watched<K>, watcher::Error>> + Send + 'static,
    {
        let kubeconfig = KubeconfigFile::new(api);
        let path = kubeconfig.0.clone();
        let (tx, rx) = mpsc::channel();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            runtime().block_on(async move {
                let mut stream = make(client(&path).await).boxed();
                loop {
                    tokio::select! {
                        event = stream.next() => {
                            let Some(event) = event else { return };
                            if tx.send(seen(event)).is_err() {
                                return;
                            }
                        }
                        _ = &mut stopped => return,
                    }
                }
            })
        });
        WatcherThread { rx, stop: Some(stop), thread: Some(thread), _kubeconfig: kubeconfig }
    }

    fn next(&self) -> Seen {
        self.rx.recv_timeout(PATIENCE).expect("the watcher yielded nothing")
    }

    /// Events up to and including the first for which `f` holds.
    fn until(&self, what: &str, mut f: impl FnMut(&Seen) -> bool) -> Vec<Seen> {
        let mut all = Vec::new();
        loop {
            let event = self.rx.recv_timeout(PATIENCE).unwrap_or_else(|_| panic!("no {what}; saw {all:#?}"));
            let done = f(&event);
            all.push(event);
            if done {
                return all;
            }
        }
    }

    /// The watcher's initial list: Init, InitApply of each key, InitDone.
    fn expect_init(&self, keys: &[&str]) {
        assert!(matches!(self.next(), Seen::Init));
        let mut got = Vec::new();
        loop {
            match self.next() {
                Seen::InitApply(k) => got.push(k),
                Seen::InitDone => break,
                other => panic!("during the initial list: {other:?}"),
            }
        }
        assert_eq!(got, keys);
    }
}

impl Drop for WatcherThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn nad_watcher(api: &StandIn, config: watcher::Config) -> WatcherThread {
    WatcherThread::spawn(api, move |client| {
        watcher::watcher(Api::<DynamicObject>::all_with(client, &nad_resource()), config).default_backoff()
    })
}

fn wait_for_watch(api: &StandIn, path: &str) {
    api.wait_until(&format!("a watch of {path}"), PATIENCE, |s| {
        s.watches().iter().any(|w| w.starts_with(path)).then_some(())
    });
}

const NADS: &str = "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions";

#[test]
fn watcher_sees_nad_changes_in_two_namespaces() {
    let api = StandIn::start_with(options()).unwrap();
    api.create_nad("red", "a", Some(r#"{"cniVersion":"1.0.0","type":"bridge"}"#), &[]);
    let w = nad_watcher(&api, watcher::Config::default());
    w.expect_init(&["red/a"]);

    api.create_nad(
        "blue",
        "b",
        Some(r#"{"cniVersion":"1.0.0","type":"macvlan"}"#),
        &[("k8s.v1.cni.cncf.io/resourceName", "x/y")],
    );
    let Seen::Apply(key, b) = w.next() else { panic!("no Apply for blue/b") };
    assert_eq!(key, "blue/b");
    assert_eq!(b["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"], "x/y");
    assert_eq!(b["spec"]["config"], r#"{"cniVersion":"1.0.0","type":"macvlan"}"#);

    api.replace_nad("red", "a", Some("not json"), &[]);
    let Seen::Apply(key, a) = w.next() else { panic!("no Apply for red/a") };
    assert_eq!(key, "red/a");
    assert_eq!(a["spec"]["config"], "not json");
    assert_eq!(a["metadata"]["generation"], 2);

    api.delete_nad("blue", "b");
    let Seen::Delete(key, gone) = w.next() else { panic!("no Delete for blue/b") };
    assert_eq!(key, "blue/b");
    // A deleted object carries the deletion's resourceVersion, the newest there is.
    assert_eq!(gone["metadata"]["resourceVersion"], api.resource_version().to_string());

    // What the watcher sent: a paged list, then a watch from the list's resourceVersion.
    let requests = api.requests();
    let list = requests.iter().find(|r| r.path == NADS && !r.is_watch()).unwrap();
    assert_eq!(list.param("limit").as_deref(), Some("500"));
    let watch = requests.iter().find(|r| r.path == NADS && r.is_watch()).unwrap();
    assert_eq!(watch.param("allowWatchBookmarks").as_deref(), Some("true"));
    assert!(watch.param("resourceVersion").is_some());
    assert!(watch.param("timeoutSeconds").is_some());
}

#[test]
fn bookmarks_then_the_watch_ends_at_its_timeout() {
    let api = StandIn::start_with(options()).unwrap();
    api.create_nad("red", "a", None, &[]);
    let rv = api.resource_version();
    let events = with_client(&api, async |client| {
        let nads: Api<DynamicObject> = Api::namespaced_with(client, "red", &nad_resource());
        let stream = nads.watch(&WatchParams::default().timeout(1), "0").await.unwrap();
        // The stream ends by itself: the server closes it after timeoutSeconds.
        stream.map(|e| e.unwrap()).collect::<Vec<_>>().await
    });
    let Some(WatchEvent::Added(first)) = events.first() else { panic!("{events:?}") };
    assert_eq!(first.metadata.name.as_deref(), Some("a"));
    assert!(first.metadata.uid.is_some() && first.metadata.creation_timestamp.is_some());
    let bookmarks: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            WatchEvent::Bookmark(b) => Some(b),
            _ => None,
        })
        .collect();
    // At least the one sent as the watch times out.
    assert!(!bookmarks.is_empty(), "{events:?}");
    for b in bookmarks {
        assert_eq!(b.types.kind, "NetworkAttachmentDefinition");
        assert_eq!(b.types.api_version, "k8s.cni.cncf.io/v1");
        assert_eq!(b.metadata.resource_version, rv.to_string());
    }
    assert_eq!(
        events.len(),
        events.iter().filter(|e| matches!(e, WatchEvent::Added(_) | WatchEvent::Bookmark(_))).count()
    );
}

#[test]
fn after_compaction_the_watcher_relists_and_recovers() {
    let api = StandIn::start_with(options()).unwrap();
    api.create_nad("red", "a", None, &[]);
    let old_rv = api.resource_version();
    let w = nad_watcher(&api, watcher::Config::default());
    w.expect_init(&["red/a"]);
    wait_for_watch(&api, NADS);
    api.create_nad("blue", "b", None, &[]);
    assert_eq!(w.next().key(), Some("blue/b"));

    api.compact();
    // The open watch ends with a 410; the watcher says so and lists again.
    let Seen::Error(error) = w.next() else { panic!("no error after compaction") };
    assert!(error.contains("410") && error.contains("too old resource version"), "{error}");
    w.expect_init(&["blue/b", "red/a"]);
    api.create_nad("red", "c", None, &[]);
    let Seen::Apply(key, _) = w.next() else { panic!("no Apply after the relist") };
    assert_eq!(key, "red/c");

    // A watch from a compacted resourceVersion: HTTP 200, one ERROR event (410 Expired), the end.
    // A list at such a resourceVersion exactly: HTTP 410.
    let (events, list_err) = with_client(&api, async |client| {
        let nads: Api<DynamicObject> = Api::all_with(client, &nad_resource());
        let stream = nads.watch(&WatchParams::default(), &old_rv.to_string()).await.unwrap();
        let events: Vec<_> = stream.collect().await;
        let lp = ListParams::default().at(&old_rv.to_string()).matching(kube::api::VersionMatch::Exact);
        (events, nads.list(&lp).await.unwrap_err())
    });
    assert_eq!(events.len(), 1, "{events:?}");
    let Ok(WatchEvent::Error(status)) = &events[0] else { panic!("{events:?}") };
    assert_eq!(status.code, 410);
    assert_eq!(status.reason, "Expired");
    let compacted_at = api.resource_version() - 1;
    assert_eq!(status.message, format!("too old resource version: {old_rv} ({compacted_at})"));
    let kube::Error::Api(status) = list_err else { panic!("{list_err:?}") };
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    assert_eq!(status.message, "The resourceVersion for the provided list is too old.");
}

#[test]
fn the_watcher_recovers_when_the_server_restarts() {
    let mut api = StandIn::start_with(options()).unwrap();
    api.create_nad("red", "a", None, &[]);
    let w = nad_watcher(&api, watcher::Config::default());
    w.expect_init(&["red/a"]);
    wait_for_watch(&api, NADS);

    api.stop();
    // Changed while the server is down: the resumed watch replays it.
    api.create_nad("blue", "b", None, &[]);
    api.replace_nad("red", "a", Some("{}"), &[]);
    api.restart().unwrap();

    let seen = w.until("the change made while stopped", |e| matches!(e, Seen::Apply(k, _) if k == "red/a"));
    let applied: Vec<_> = seen.iter().filter(|e| matches!(e, Seen::Apply(..))).filter_map(Seen::key).collect();
    assert_eq!(applied, ["blue/b", "red/a"], "{seen:#?}");
    // It resumed: no relist.
    assert!(!seen.iter().any(|e| matches!(e, Seen::Init)), "{seen:#?}");
    api.delete_nad("blue", "b");
    assert!(matches!(w.next(), Seen::Delete(k, _) if k == "blue/b"));
}

#[test]
fn paging_with_a_small_limit_is_one_consistent_snapshot() {
    let api = StandIn::start_with(options()).unwrap();
    for (ns, name) in [("red", "a"), ("blue", "c"), ("red", "b"), ("blue", "d"), ("green", "e")] {
        api.create_nad(ns, name, None, &[]);
    }
    let rv = api.resource_version();
    let pages = with_client(&api, async |client| {
        let nads: Api<DynamicObject> = Api::all_with(client, &nad_resource());
        let mut pages = Vec::new();
        let mut lp = ListParams::default().limit(2);
        loop {
            let page = nads.list(&lp).await.unwrap();
            if pages.is_empty() {
                // A change after the first page is not in the later ones.
                api.create_nad("aaa", "new", None, &[]);
                api.delete_nad("green", "e");
            }
            let names: Vec<String> = page
                .items
                .iter()
                .map(|o| {
                    format!("{}/{}", o.metadata.namespace.as_deref().unwrap(), o.metadata.name.as_deref().unwrap())
                })
                .collect();
            let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
            pages.push((names, page.metadata.resource_version.clone(), page.metadata.remaining_item_count));
            match next {
                Some(token) => lp = ListParams::default().limit(2).continue_token(&token),
                None => break,
            }
        }
        pages
    });
    let names: Vec<Vec<String>> = pages.iter().map(|p| p.0.clone()).collect();
    assert_eq!(names, [vec!["blue/c", "blue/d"], vec!["green/e", "red/a"], vec!["red/b"]]);
    assert!(pages.iter().all(|p| p.1 == Some(rv.to_string())), "{pages:?}");
    assert_eq!(pages.iter().map(|p| p.2).collect::<Vec<_>>(), [Some(3), Some(1), None]);

    // The watcher pages too, with the same result.
    let w = nad_watcher(&api, watcher::Config::default().page_size(2));
    w.expect_init(&["aaa/new", "blue/c", "blue/d", "red/a", "red/b"]);
    let pages = api
        .requests()
        .iter()
        .filter(|r| r.path == NADS && !r.is_watch() && r.param("limit").as_deref() == Some("2"))
        .count();
    assert_eq!(pages, 3 + 3);
}

#[test]
fn a_continue_token_from_before_compaction_is_gone() {
    let api = StandIn::start_with(options()).unwrap();
    for name in ["a", "b", "c"] {
        api.create_nad("red", name, None, &[]);
    }
    let err = with_client(&api, async |client| {
        let nads: Api<DynamicObject> = Api::namespaced_with(client, "red", &nad_resource());
        let page = nads.list(&ListParams::default().limit(1)).await.unwrap();
        // Compaction at the token's own resourceVersion keeps that snapshot (etcd keeps the
        // revision it compacts at); one write later, it is gone.
        api.compact();
        let token = page.metadata.continue_.clone().unwrap();
        nads.list(&ListParams::default().limit(1).continue_token(&token)).await.unwrap();
        api.create_nad("red", "d", None, &[]);
        api.compact();
        let token = page.metadata.continue_.unwrap();
        nads.list(&ListParams::default().limit(1).continue_token(&token)).await.unwrap_err()
    });
    let kube::Error::Api(status) = err else { panic!("{err:?}") };
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    assert!(status.message.starts_with("The provided continue parameter is too old"), "{}", status.message);
}

#[test]
fn streaming_list_watcher_gets_initial_events_then_changes() {
    let api = StandIn::start_with(options()).unwrap();
    api.create_nad("red", "a", None, &[]);
    let w = nad_watcher(&api, watcher::Config::default().streaming_lists());
    w.expect_init(&["red/a"]);
    api.create_nad("red", "b", None, &[]);
    assert_eq!(w.next().key(), Some("red/b"));
    let requests = api.requests();
    let watch = requests.iter().find(|r| r.is_watch()).unwrap();
    assert_eq!(watch.param("sendInitialEvents").as_deref(), Some("true"));
    assert_eq!(watch.param("resourceVersionMatch").as_deref(), Some("NotOlderThan"));
    assert!(!requests.iter().any(|r| r.path == NADS && !r.is_watch()), "no list: {requests:#?}");
}

#[test]
fn a_node_pod_watcher_sees_only_its_nodes_pods() {
    let api = StandIn::start_with(options()).unwrap();
    api.create_pod("red", "here", "node-a", &[]);
    api.create_pod("red", "there", "node-b", &[]);
    let w = WatcherThread::spawn(&api, |client| {
        watcher::watcher(Api::<Pod>::all(client), watcher::Config::default().fields("spec.nodeName=node-a"))
            .default_backoff()
    });
    w.expect_init(&["red/here"]);
    api.create_pod("blue", "there-too", "node-b", &[]);
    api.create_pod("blue", "here-too", "node-a", &[]);
    let Seen::Apply(key, pod) = w.next() else { panic!() };
    assert_eq!(key, "blue/here-too");
    assert_eq!(pod["spec"]["nodeName"], "node-a");
    api.delete_pod("blue", "there-too");
    api.delete_pod("red", "here");
    assert!(matches!(w.next(), Seen::Delete(k, _) if k == "red/here"));
    // A field the pod registry does not index is refused, as by the apiserver.
    let err = with_client(&api, async |client| {
        Api::<Pod>::all(client).list(&ListParams::default().fields("spec.hostname=x")).await.unwrap_err()
    });
    let kube::Error::Api(status) = err else { panic!("{err:?}") };
    assert_eq!((status.code, status.message.as_str()), (400, "field label not supported: spec.hostname"));
}

const STATUS: &str = "k8s.v1.cni.cncf.io/network-status";

#[test]
fn metadata_only_watches_gets_and_patches() {
    let api = StandIn::start_with(options()).unwrap();
    api.create_pod("red", "p", "node-a", &[("keep", "me")]);
    let w = WatcherThread::spawn(&api, |client| {
        let config = watcher::Config::default().fields("spec.nodeName=node-a");
        watcher::watcher(Api::<PartialObjectMeta<Pod>>::all(client), config).default_backoff()
    });
    w.expect_init(&["red/p"]);
    let (got, patched) = with_client(&api, async |client| {
        let pods: Api<Pod> = Api::namespaced(client, "red");
        let patch = json!({ "metadata": { "annotations": { STATUS: "[]" } } });
        let patched = pods.patch_metadata("p", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        (pods.get_metadata("p").await.unwrap(), patched)
    });
    assert_eq!(got.metadata.annotations.as_ref().unwrap().get("keep").map(String::as_str), Some("me"));
    assert_eq!(patched.metadata.annotations.as_ref().unwrap().get(STATUS).map(String::as_str), Some("[]"));
    let Seen::Apply(key, object) = w.next() else { panic!() };
    assert_eq!(key, "red/p");
    assert_eq!(object["metadata"]["annotations"][STATUS], "[]");
    // Metadata only: no spec or status came over the wire.
    assert!(object.get("spec").is_none(), "{object}");
    let requests = api.requests();
    let watch = requests.iter().find(|r| r.is_watch()).unwrap();
    assert!(watch.accept.as_deref().unwrap().contains("as=PartialObjectMetadata"), "{watch:?}");
}

#[test]
fn merge_patch_sets_one_annotation_and_leaves_the_others() {
    let api = StandIn::start_with(options()).unwrap();
    let before = api.create_pod("red", "p", "node-a", &[("k8s.v1.cni.cncf.io/networks", "macvlan"), ("keep", "me")]);
    let status = r#"[{"name":"red/macvlan","interface":"net1","ips":["198.18.0.5"]}]"#;
    let (patched, deleted, strategic) = with_client(&api, async |client| {
        let pods: Api<Pod> = Api::namespaced(client, "red");
        let patch = json!({ "metadata": { "annotations": { STATUS: status } } });
        let patched = pods.patch("p", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        let delete = json!({ "metadata": { "annotations": { "keep": null } } });
        let deleted = pods.patch("p", &PatchParams::default(), &Patch::Merge(&delete)).await.unwrap();
        let again = json!({ "metadata": { "annotations": { "keep": "again" } } });
        let strategic = pods.patch("p", &PatchParams::default(), &Patch::Strategic(&again)).await.unwrap();
        (patched, deleted, strategic)
    });
    let annotations = patched.metadata.annotations.unwrap();
    assert_eq!(annotations.get(STATUS).map(String::as_str), Some(status));
    assert_eq!(annotations.get("keep").map(String::as_str), Some("me"));
    assert_eq!(annotations.get("k8s.v1.cni.cncf.io/networks").map(String::as_str), Some("macvlan"));
    assert!(!deleted.metadata.annotations.unwrap().contains_key("keep"));
    assert_eq!(strategic.metadata.annotations.unwrap().get("keep").map(String::as_str), Some("again"));
    let stored = api.pod("red", "p").unwrap();
    assert_eq!(stored["metadata"]["annotations"][STATUS], status);
    assert_eq!(stored["metadata"]["uid"], before["metadata"]["uid"]);
    assert_eq!(stored["spec"], before["spec"]);
    assert_eq!(stored["metadata"]["resourceVersion"], api.resource_version().to_string());
    let patches: Vec<_> = api.requests().into_iter().filter(|r| r.method == "PATCH").collect();
    assert_eq!(patches[0].path, "/api/v1/namespaces/red/pods/p");
    assert_eq!(patches[0].content_type.as_deref(), Some("application/merge-patch+json"));
    assert_eq!(patches[2].content_type.as_deref(), Some("application/strategic-merge-patch+json"));
}

#[test]
fn patch_errors_are_status_objects() {
    let api = StandIn::start_with(options()).unwrap();
    api.create_pod("red", "p", "node-a", &[]);
    let (missing, stale, json_patch) = with_client(&api, async |client| {
        let pods: Api<Pod> = Api::namespaced(client, "red");
        let patch = json!({ "metadata": { "annotations": { STATUS: "[]" } } });
        let missing = pods.patch("x", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap_err();
        let stale = json!({ "metadata": { "resourceVersion": "1", "annotations": { STATUS: "[]" } } });
        let stale = pods.patch("p", &PatchParams::default(), &Patch::Merge(&stale)).await.unwrap_err();
        let json_patch = pods.patch("p", &PatchParams::default(), &Patch::Apply(&patch)).await.unwrap_err();
        (missing, stale, json_patch)
    });
    let codes: Vec<u16> = [missing, stale, json_patch]
        .into_iter()
        .map(|e| match e {
            kube::Error::Api(s) => s.code,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(codes, [404, 409, 415]);
    // The exact body of a 404, byte for byte what the apiserver sends (in key order).
    let (code, body) = common::raw(&api, "GET", "/api/v1/namespaces/red/pods/x", Some(api.token()), &[], "");
    assert_eq!(code, 404);
    let want = json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"x\" not found","reason":"NotFound","details":{"name":"x","kind":"pods"},"code":404});
    assert_eq!(body, want);
}

#[test]
fn events_created_through_either_group_are_stored_and_readable() {
    let api = StandIn::start_with(options()).unwrap();
    let pod = api.create_pod("red", "p", "node-a", &[]);
    let (core_get, conflict) = with_client(&api, async |client| {
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some("red".into()),
            name: Some("p".into()),
            uid: pod["metadata"]["uid"].as_str().map(String::from),
            ..ObjectReference::default()
        };
        let core: Api<CoreEvent> = Api::namespaced(client.clone(), "red");
        let event = CoreEvent {
            metadata: kube::api::ObjectMeta { name: Some("p.1".into()), ..Default::default() },
            involved_object: reference.clone(),
            reason: Some("BadNetwork".into()),
            message: Some("spec.config is not JSON".into()),
            type_: Some("Warning".into()),
            ..CoreEvent::default()
        };
        let created = core.create(&PostParams::default(), &event).await.unwrap();
        assert_eq!(created.metadata.namespace.as_deref(), Some("red"));
        assert!(created.metadata.uid.is_some() && created.metadata.resource_version.is_some());
        let conflict = core.create(&PostParams::default(), &event).await.unwrap_err();

        // kube-runtime's Recorder: events.k8s.io/v1, created, then patched as a series.
        let recorder = Recorder::new(client.clone(), "braid-install".into());
        let note = RecorderEvent {
            type_: EventType::Warning,
            reason: "NetworkStatus".into(),
            note: Some("written".into()),
            action: "Patch".into(),
            secondary: None,
        };
        recorder.publish(&note, &reference).await.unwrap();
        recorder.publish(&note, &reference).await.unwrap();

        // Patched last, still listed first by events(): creation order.
        let label = json!({ "metadata": { "labels": { "seen": "yes" } } });
        core.patch("p.1", &PatchParams::default(), &Patch::Merge(&label)).await.unwrap();

        let v1: Api<EventsV1> = Api::namespaced(client, "red");
        let core_as_v1 = v1.get("p.1").await.unwrap();
        assert_eq!(core_as_v1.note.as_deref(), Some("spec.config is not JSON"));
        (core.get("p.1").await.unwrap(), conflict)
    });
    assert_eq!(core_get.message.as_deref(), Some("spec.config is not JSON"));
    let kube::Error::Api(status) = conflict else { panic!("{conflict:?}") };
    assert_eq!((status.code, status.reason.as_str()), (409, "AlreadyExists"));

    let events = api.events();
    assert_eq!(events.len(), 2, "{events:#?}");
    assert_eq!(events[0]["involvedObject"]["name"], "p");
    assert_eq!(events[0]["reason"], "BadNetwork");
    assert_eq!(events[0]["metadata"]["labels"]["seen"], "yes");
    // The recorder's event, in the stored (v1) form, after its second publish.
    assert_eq!(events[1]["message"], "written");
    assert_eq!(events[1]["reportingComponent"], "braid-install");
    assert_eq!(events[1]["involvedObject"]["uid"], pod["metadata"]["uid"]);
    assert_eq!(events[1]["series"]["count"], 2);
    let methods: Vec<(String, String)> = api
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/apis/events.k8s.io") && r.method != "GET")
        .map(|r| (r.method, r.content_type.unwrap_or_default()))
        .collect();
    assert_eq!(methods[0].0, "POST");
    assert_eq!(methods[1], ("PATCH".to_string(), "application/merge-patch+json".to_string()));
}

#[test]
fn requests_without_the_token_get_401() {
    let api = StandIn::start_with(options()).unwrap();
    api.create_nad("red", "a", None, &[]);
    let want = json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401});
    for token in [None, Some("wrong")] {
        let (head, body) = common::raw(&api, "GET", NADS, token, &[], "");
        assert_eq!((head, body), (401, want.clone()));
    }
    let (code, list) = common::raw(&api, "GET", NADS, Some(api.token()), &[], "");
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "NetworkAttachmentDefinitionList");
    assert_eq!(list["items"][0]["kind"], "NetworkAttachmentDefinition");

    // And through kube, with a kubeconfig carrying another token.
    let other = StandIn::start_with(options()).unwrap();
    let file = KubeconfigFile::new(&other);
    let err = runtime().block_on(async {
        let kubeconfig = Kubeconfig::read_from(&file.0).unwrap();
        let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.unwrap();
        config.cluster_url = api.url().parse().unwrap();
        let nads: Api<DynamicObject> = Api::all_with(Client::try_from(config).unwrap(), &nad_resource());
        nads.list(&ListParams::default()).await.unwrap_err()
    });
    let kube::Error::Api(status) = err else { panic!("{err:?}") };
    assert_eq!((status.code, status.reason.as_str()), (401, "Unauthorized"));
}

#[test]
fn an_object_leaving_a_watched_selector_is_deleted_from_the_watch() {
    let api = StandIn::start_with(options()).unwrap();
    let nad = |tier: &str| {
        json!({
            "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": {"namespace": "red", "name": "a", "labels": {"tier": tier}},
            "spec": {"config": "{}"},
        })
    };
    api.put_object(nad("front"));
    let from = api.resource_version();
    api.put_object(nad("back"));
    let left = api.resource_version();
    api.put_object(nad("front"));
    // Replayed from the history: leaving the selector is a DELETED (at the change's
    // resourceVersion), coming back an ADDED.
    let events = with_client(&api, async |client| {
        let nads: Api<DynamicObject> = Api::namespaced_with(client, "red", &nad_resource());
        let wp = WatchParams::default().labels("tier=front").timeout(1).disable_bookmarks();
        let stream = nads.watch(&wp, &from.to_string()).await.unwrap();
        stream.map(|e| e.unwrap()).collect::<Vec<_>>().await
    });
    let [WatchEvent::Deleted(gone), WatchEvent::Added(back)] = events.as_slice() else { panic!("{events:?}") };
    assert_eq!(gone.metadata.resource_version, Some(left.to_string()));
    assert_eq!(gone.metadata.labels.as_ref().unwrap()["tier"], "front");
    assert_eq!(back.metadata.resource_version, Some(api.resource_version().to_string()));
}
