//! braid's node agent in its Kubernetes API mode (`braid-install --kubernetes-api`), run as a
//! process in node1's network namespace of the real cluster of `scripts/node.sh`, against its
//! real kube-apiserver through the tests' own fault point in front of it
//! (`braid_integration::fault_proxy`: a TLS-terminating proxy that answers `500` to the
//! requests a test names and holds one unanswered until the test releases it) — for what a
//! real API server cannot be made to do on cue. The agent holds a token of braid's
//! ServiceAccount bound to braid's own agent pod on node1, as the kubelet gives it, so RBAC and
//! the admission policy judge its requests as they judge the DaemonSet's. Every other API test
//! runs without a fault point (tests/kube_node.rs).
//!
//! The pods are the cluster's, bound to a node and run by its kubelet with `hostNetwork` (no CNI
//! ADD: braid's own agent on that node never publishes for them, so what appears on them is this
//! agent's). The files and the pod objects are what the tests read; the waits are upper bounds
//! for a stuck agent, never measurements (the time from a status file to its annotation is
//! measured in scripts/bench.sh). Without the cluster (`BRAID_NODE_DIR`) the tests print a
//! loud SKIPPED line, and fail under `BRAID_REQUIRE_ROOT_TESTS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use braid_integration::agent::{Agent, Dirs, HANG_GUARD};
use braid_integration::cluster::{pod, Cluster, Namespace, NETWORK_STATUS};
use braid_integration::fault_proxy::FaultProxy;
use braid_integration::TempDir;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

struct World<'c> {
    c: &'c Cluster,
    ns: Namespace<'c>,
    proxy: FaultProxy,
    dir: TempDir,
    dirs: Dirs,
    kubeconfig: PathBuf,
}

impl<'c> World<'c> {
    fn new(c: &'c Cluster, tag: &str) -> World<'c> {
        assert!(c.nodes() >= 2, "these tests need two nodes (scripts/node.sh up 2)");
        let ns = c.namespace(tag);
        let proxy = FaultProxy::start(c).unwrap();
        let dir = TempDir::new(tag);
        let dirs = Dirs::under(dir.path());
        let kubeconfig = dir.path().join("kubeconfig");
        proxy.write_kubeconfig(&kubeconfig, &agent_token(c, "node1")).unwrap();
        World { c, ns, proxy, dir, dirs, kubeconfig }
    }

    /// The agent of node1, through the proxy.
    fn agent(&self, extra: &[&str]) -> Agent {
        Agent::start(
            self.proxy.netns(),
            &self.dirs,
            &self.kubeconfig,
            "node1",
            &self.dir.path().join("agent.log"),
            extra,
        )
    }

    /// A `hostNetwork` pod of the test's namespace on `node`, with these annotations; its object.
    fn pod(&self, name: &str, node: &str, annotations: &[(&str, &str)]) -> Value {
        let mut p: Value = serde_json::from_str(&pod(&self.ns.name, name, node, None)).unwrap();
        p["spec"]["hostNetwork"] = json!(true);
        for (k, v) in annotations {
            p["metadata"]["annotations"][k] = json!(v);
        }
        self.c.apply(&p.to_string());
        self.c.get(&["pod", name, "-n", &self.ns.name])
    }

    /// The pod's network-status annotation as the API server has it.
    fn annotation(&self, name: &str) -> Option<String> {
        let p = self.c.get(&["pod", name, "-n", &self.ns.name]);
        p["metadata"]["annotations"][NETWORK_STATUS].as_str().map(str::to_string)
    }

    fn wait_annotation(&self, name: &str, doc: &str, agent: &Agent) {
        self.c.wait(
            &format!("{}/{name}'s network-status {doc}", self.ns.name),
            || self.annotation(name).as_deref() == Some(doc),
            || agent.log(),
        );
    }

    fn path(&self, name: &str) -> String {
        format!("/api/v1/namespaces/{}/pods/{name}", self.ns.name)
    }

    fn write_status(&self, pod: &str, cid: &str, doc: &str) {
        write_status(&self.dirs.status, &self.ns.name, pod, cid, doc);
    }

    /// As the delegator writes it when the runtime passes K8S_POD_UID.
    fn write_status_of(&self, pod: &Value, cid: &str, doc: &str) {
        let file =
            json!({"networkStatus": serde_json::from_str::<Value>(doc).unwrap(), "podUID": pod["metadata"]["uid"]});
        self.write_status(pod["metadata"]["name"].as_str().unwrap(), cid, &file.to_string());
    }
}

/// A token of braid's ServiceAccount bound to braid's agent pod on `node` — what the kubelet
/// requests for the DaemonSet's projected volume, so it names that node and its pod.
fn agent_token(c: &Cluster, node: &str) -> String {
    let (name, uid) = c.agent_pod(node);
    let bound =
        ["--bound-object-kind=Pod", &format!("--bound-object-name={name}"), &format!("--bound-object-uid={uid}")];
    let mut args = vec!["create", "token", "braid", "-n", "kube-system"];
    args.extend_from_slice(&bound);
    c.ok(&args).trim().to_string()
}

fn status_doc(i: u8) -> String {
    json!([{"name": "cluster", "interface": "eth0", "ips": [format!("198.18.{i}.2")], "mac": "02:00:00:00:00:01", "default": true, "dns": {}}]).to_string()
}

fn write_status(dir: &Path, ns: &str, pod: &str, cid: &str, doc: &str) {
    // As the delegator writes it: a temporary name, then a rename.
    let tmp = dir.join(format!(".{ns}_{pod}_{cid}.json.tmp1"));
    std::fs::write(&tmp, format!("{doc}\n")).unwrap();
    std::fs::rename(&tmp, dir.join(format!("{ns}_{pod}_{cid}.json"))).unwrap();
}

/// Files of a delegator before the UID was recorded (a bare list): the pod is read first, as
/// before, and the patch carries the UID it saw. Then `500`s on cue — to a pod's GET, to a
/// pod's PATCH — and the API server unreachable: each retried with backoff until it passes.
///
/// Why the fault point: a real API server does not answer `500` to chosen requests on cue.
#[test]
fn network_status_is_published_on_this_nodes_pods_only_retried_and_again_after_a_restart() {
    let Some(c) =
        Cluster::lock("network_status_is_published_on_this_nodes_pods_only_retried_and_again_after_a_restart")
    else {
        return;
    };
    let mut w = World::new(&c, "braid-kapi-status");
    let ns = w.ns.name.clone();
    let mine = w.pod("mine", "node1", &[("keep", "me")]);
    w.pod("elsewhere", "node2", &[]);
    // A file before the agent starts, one for a pod on another node, one for a pod that is gone.
    w.write_status("mine", "c1", &status_doc(1));
    w.write_status("elsewhere", "c2", &status_doc(2));
    w.write_status("ghost", "c3", &status_doc(3));
    let mut agent = w.agent(&[]);
    w.wait_annotation("mine", &status_doc(1), &agent);
    agent.wait_log(&format!("{ns}/elsewhere: not published, the pod is bound to node \"node2\""), 1);
    agent.wait_log(&format!("{ns}/ghost: the pod is gone"), 1);
    // A merge patch of that one annotation: the others stay.
    assert_eq!(c.get(&["pod", "mine", "-n", &ns])["metadata"]["annotations"]["keep"], "me");
    let pod_patches = |w: &World| -> Vec<_> {
        let prefix = format!("/api/v1/namespaces/{ns}/pods/");
        w.proxy.requests().into_iter().filter(|r| r.method == "PATCH" && r.path.starts_with(&prefix)).collect()
    };
    let patches = pod_patches(&w);
    assert_eq!(patches.len(), 1, "{patches:?}");
    assert_eq!(patches[0].path, w.path("mine"));
    assert_eq!(patches[0].content_type.as_deref(), Some("application/merge-patch+json"));
    assert_eq!(
        serde_json::from_str::<Value>(&patches[0].body).unwrap(),
        json!({"metadata": {"uid": mine["metadata"]["uid"], "annotations": {NETWORK_STATUS: status_doc(1)}}})
    );
    assert!(w.annotation("elsewhere").is_none());

    // A new sandbox's file (written by the delegator on the pod's next ADD): the newest wins.
    w.write_status("mine", "c4", &status_doc(4));
    w.wait_annotation("mine", &status_doc(4), &agent);

    // The API server answers 500 to a pod's first three GETs (a file without UID), and to
    // another pod's first two PATCHes (a file with it): each retried until it passes.
    w.pod("later", "node1", &[]);
    let again = w.pod("again", "node1", &[]);
    w.proxy.fail("GET", &w.path("later"), 3);
    w.proxy.fail("PATCH", &w.path("again"), 2);
    w.write_status("later", "c5", &status_doc(5));
    w.write_status_of(&again, "c6", &status_doc(6));
    w.wait_annotation("later", &status_doc(5), &agent);
    w.wait_annotation("again", &status_doc(6), &agent);
    assert_eq!(w.proxy.failures_left(), 0);
    assert_eq!(w.proxy.count("GET", &w.path("later")), 4, "three 500s, then the GET that passed");
    assert_eq!(w.proxy.count("PATCH", &w.path("again")), 3, "two 500s, then the PATCH that passed");
    let log = agent.log();
    for what in [format!("reading pod {ns}/later"), format!("patching pod {ns}/again")] {
        assert!(
            log.contains(&format!("network-status: {what}: ")) && log.contains("the tests' fault point answered 500"),
            "{what}: {log}"
        );
    }

    // The API server cannot be reached when a file appears: retried with backoff until it is back.
    w.proxy.stop();
    let down = w.pod("down", "node1", &[]);
    w.write_status_of(&down, "c7", &status_doc(7));
    agent.wait_log(&format!("network-status: patching pod {ns}/down: "), 1);
    w.proxy.restart().unwrap();
    w.wait_annotation("down", &status_doc(7), &agent);

    // The agent restarts after someone cleared an annotation: every file is published again.
    assert!(agent.stop().success());
    c.ok(&["annotate", "pod", "mine", "-n", &ns, &format!("{NETWORK_STATUS}-")]);
    assert_eq!(w.annotation("mine"), None);
    let agent = w.agent(&[]);
    w.wait_annotation("mine", &status_doc(4), &agent);
    // Never a patch of the pod on the other node.
    assert!(pod_patches(&w).iter().all(|r| r.path != w.path("elsewhere")), "{:?}", pod_patches(&w));
    drop(agent);
}

/// One pod whose PATCH the API server accepts and never answers: every other pod is published
/// meanwhile, the stuck request is abandoned after --api-timeout and retried, and the pod is
/// published once the API server answers.
///
/// Why the fault point: a real API server cannot be told to accept one request and never
/// answer it.
#[test]
fn a_pod_whose_patch_is_never_answered_holds_up_no_other() {
    let Some(c) = Cluster::lock("a_pod_whose_patch_is_never_answered_holds_up_no_other") else {
        return;
    };
    let w = World::new(&c, "braid-kapi-slow");
    let slow = w.pod("slow", "node1", &[]);
    let fast = w.pod("fast", "node1", &[]);
    let slow_path = w.path("slow");
    w.proxy.hold("PATCH", &slow_path);
    let mut agent = w.agent(&["--api-timeout", "1"]);
    agent.wait_log("first full list mirrored", 1);
    w.write_status_of(&slow, "c1", &status_doc(1));
    w.proxy.wait_until("slow's PATCH (held)", HANG_GUARD, |r| r.iter().any(|r| r.is("PATCH", &slow_path)));
    w.write_status_of(&fast, "c2", &status_doc(2));
    w.wait_annotation("fast", &status_doc(2), &agent);
    assert_eq!(w.annotation("slow"), None);
    // Abandoned and retried, still held.
    w.proxy.wait_until("slow's retry", HANG_GUARD, |r| r.iter().filter(|r| r.is("PATCH", &slow_path)).count() >= 2);
    agent.wait_log("no answer within 1 s (--api-timeout)", 1);
    assert_eq!(w.annotation("slow"), None);
    w.proxy.release("PATCH", &slow_path);
    w.wait_annotation("slow", &status_doc(1), &agent);
}
