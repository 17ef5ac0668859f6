//! braid's node agent in its Kubernetes API mode (`braid-install --kubernetes-api`), run as a
//! process with the real client crates over real HTTP against `kube-standin`
//! (integration/apiserver), for what a real kube-apiserver cannot be made to do on cue. Every
//! other API test runs on the real cluster of `scripts/node.sh` (tests/kube_node.rs); each test
//! here says why it needs the stand-in.
//!
//! The files and the pod objects are what the tests read; the waits are upper bounds for a
//! stuck agent, never measurements (the time from a status file to its annotation is measured
//! in scripts/bench.sh).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use braid_integration::agent::{wait_until, Agent, Dirs, HANG_GUARD};
use braid_integration::TempDir;
use kube_standin::StandIn;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const STATUS: &str = "k8s.v1.cni.cncf.io/network-status";

struct World {
    api: StandIn,
    dir: TempDir,
    dirs: Dirs,
    kubeconfig: PathBuf,
}

impl World {
    fn new(tag: &str) -> World {
        let api = StandIn::start().unwrap();
        let dir = TempDir::new(tag);
        let dirs = Dirs::under(dir.path());
        let kubeconfig = dir.path().join("kubeconfig");
        api.write_kubeconfig(&kubeconfig).unwrap();
        World { api, dir, dirs, kubeconfig }
    }

    fn agent(&self, node: &str) -> Agent {
        self.agent_with(node, &[])
    }

    fn agent_with(&self, node: &str, extra: &[&str]) -> Agent {
        Agent::start(&self.dirs, &self.kubeconfig, node, &self.dir.path().join("agent.log"), extra)
    }
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

/// As the delegator writes it when the runtime passes K8S_POD_UID.
fn write_status_of(dir: &Path, ns: &str, pod: &str, cid: &str, doc: &str, uid: &str) {
    let file = json!({"networkStatus": serde_json::from_str::<Value>(doc).unwrap(), "podUID": uid});
    write_status(dir, ns, pod, cid, &file.to_string());
}

fn uid_of(pod: &Value) -> String {
    pod["metadata"]["uid"].as_str().unwrap().to_string()
}

fn annotation(api: &StandIn, ns: &str, pod: &str) -> Option<String> {
    api.pod(ns, pod).and_then(|p| p["metadata"]["annotations"][STATUS].as_str().map(str::to_string))
}

/// Files of a delegator before the UID was recorded (a bare list): the pod is read first, as
/// before, and the patch carries the UID it saw.
///
/// Why the stand-in: the retries are shown by answering `500` to chosen requests, which a real
/// API server does not do on cue; and a bare-list file is what only an older delegator writes.
#[test]
fn network_status_is_published_on_this_nodes_pods_only_retried_and_again_after_a_restart() {
    let mut w = World::new("kapi-status");
    let mine = w.api.create_pod("default", "mine", "node-a", &[("keep", "me")]);
    w.api.create_pod("default", "elsewhere", "node-b", &[]);
    // A file before the agent starts, one for a pod on another node, one for a pod that is gone.
    write_status(&w.dirs.status, "default", "mine", "c1", &status_doc(1));
    write_status(&w.dirs.status, "default", "elsewhere", "c2", &status_doc(2));
    write_status(&w.dirs.status, "default", "ghost", "c3", &status_doc(3));
    let mut agent = w.agent("node-a");
    wait_until("mine's annotation", || annotation(&w.api, "default", "mine") == Some(status_doc(1)), || agent.log());
    agent.wait_log("default/elsewhere: not published, the pod is bound to node \"node-b\"", 1);
    agent.wait_log("default/ghost: the pod is gone", 1);
    // A merge patch of that one annotation: the others stay.
    assert_eq!(w.api.pod("default", "mine").unwrap()["metadata"]["annotations"]["keep"], "me");
    let patches: Vec<_> = w.api.requests().into_iter().filter(|r| r.method == "PATCH").collect();
    assert_eq!(patches.len(), 1, "{patches:?}");
    assert_eq!(patches[0].path, "/api/v1/namespaces/default/pods/mine");
    assert_eq!(patches[0].content_type.as_deref(), Some("application/merge-patch+json"));
    assert_eq!(
        serde_json::from_str::<Value>(&patches[0].body).unwrap(),
        json!({"metadata": {"uid": mine["metadata"]["uid"], "annotations": {STATUS: status_doc(1)}}})
    );
    assert!(annotation(&w.api, "default", "elsewhere").is_none());

    // A new sandbox's file (written by the delegator on the pod's next ADD): the newest wins.
    write_status(&w.dirs.status, "default", "mine", "c4", &status_doc(4));
    wait_until("the newer document", || annotation(&w.api, "default", "mine") == Some(status_doc(4)), || agent.log());

    // The API server is down when a file appears: retried with backoff until it is back.
    w.api.stop();
    w.api.create_pod("default", "later", "node-a", &[]);
    write_status(&w.dirs.status, "default", "later", "c5", &status_doc(5));
    agent.wait_log("network-status: reading pod default/later", 1);
    w.api.restart().unwrap();
    wait_until("later's annotation", || annotation(&w.api, "default", "later") == Some(status_doc(5)), || agent.log());

    // The agent restarts after someone cleared an annotation: every file is published again.
    assert!(agent.stop().success());
    w.api.put_object(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "default", "name": "mine", "annotations": {"keep": "me"}}, "spec": {"nodeName": "node-a"}}));
    let agent = w.agent("node-a");
    wait_until(
        "mine's annotation again",
        || annotation(&w.api, "default", "mine") == Some(status_doc(4)),
        || agent.log(),
    );
    // Never a patch of the pod on the other node.
    assert!(w.api.requests().iter().all(|r| !(r.method == "PATCH" && r.path.ends_with("/elsewhere"))));
}

/// One pod whose PATCH the API server accepts and never answers: every other pod is published
/// meanwhile, the stuck request is abandoned after --api-timeout and retried, and the pod is
/// published once the API server answers.
///
/// Why the stand-in: a real API server cannot be told to accept one request and never answer it.
#[test]
fn a_pod_whose_patch_is_never_answered_holds_up_no_other() {
    let w = World::new("kapi-slow");
    let slow = w.api.create_pod("default", "slow", "node-a", &[]);
    let fast = w.api.create_pod("default", "fast", "node-a", &[]);
    let slow_path = "/api/v1/namespaces/default/pods/slow";
    w.api.hold("PATCH", slow_path);
    let mut agent = w.agent_with("node-a", &["--api-timeout", "1"]);
    agent.wait_log("first full list mirrored", 1);
    let slow_patches =
        |api: &StandIn| api.requests().iter().filter(|r| r.method == "PATCH" && r.path == slow_path).count();
    write_status_of(&w.dirs.status, "default", "slow", "c1", &status_doc(1), &uid_of(&slow));
    w.api.wait_until("slow's PATCH (held)", HANG_GUARD, |s| {
        s.requests().iter().any(|r| r.method == "PATCH" && r.path == slow_path).then_some(())
    });
    write_status_of(&w.dirs.status, "default", "fast", "c2", &status_doc(2), &uid_of(&fast));
    wait_until("fast's annotation", || annotation(&w.api, "default", "fast") == Some(status_doc(2)), || agent.log());
    assert_eq!(annotation(&w.api, "default", "slow"), None);
    // Abandoned and retried, still held.
    wait_until("slow's retry", || slow_patches(&w.api) >= 2, || agent.log());
    assert!(agent.log().contains("no answer within 1 s (--api-timeout)"), "{}", agent.log());
    w.api.release("PATCH", slow_path);
    wait_until("slow's annotation", || annotation(&w.api, "default", "slow") == Some(status_doc(1)), || agent.log());
}
