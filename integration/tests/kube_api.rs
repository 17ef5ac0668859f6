//! braid's node agent in its Kubernetes API mode (`braid-install --kubernetes-api`), run as a
//! process with the real client crates over real HTTP against `kube-standin`
//! (integration/apiserver): a stand-in for kube-apiserver that speaks its wire protocol (list
//! with resourceVersion, watch streams with bookmarks, `ERROR` 410 after compaction, merge
//! patches, events). No kube-apiserver can run where this suite runs, so this is what the API
//! side is tested against — not a real API server.
//!
//! The files and the pod objects are what the tests read; the waits are upper bounds for a
//! stuck agent, never measurements (the time from a status file to its annotation is measured
//! in scripts/bench.sh).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use braid_integration::agent::{wait_until, Agent, Dirs, HANG_GUARD};
use braid_integration::{require_root, unique, Harness, TempDir};
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

    fn definition(&self, rel: &str) -> Option<Value> {
        std::fs::read(self.dirs.networks.join(rel)).ok().map(|b| serde_json::from_slice(&b).unwrap())
    }

    /// Waits until the definition `rel` exists and `f` holds for it.
    fn wait_definition(&self, agent: &Agent, rel: &str, f: impl Fn(&Value) -> bool) -> Value {
        wait_until(&format!("definition {rel}"), || self.definition(rel).is_some_and(|v| f(&v)), || agent.log());
        self.definition(rel).unwrap()
    }

    fn wait_gone(&self, agent: &Agent, rel: &str) {
        wait_until(&format!("removal of {rel}"), || self.definition(rel).is_none(), || agent.log());
    }
}

fn ptp(name: Option<&str>, subnet: u8) -> String {
    let mut c = json!({"cniVersion": "1.0.0", "plugins": [{"type": "ptp", "ipam": {"type": "host-local", "subnet": format!("198.18.{subnet}.0/24")}}]});
    if let Some(n) = name {
        c["name"] = json!(n);
    }
    c.to_string()
}

#[test]
fn nads_of_two_namespaces_are_mirrored_changed_and_removed_and_a_broken_one_is_named_in_an_event() {
    let w = World::new("kapi-nads");
    w.api.create_nad("team-a", "side", Some(&ptp(None, 1)), &[]);
    w.api.create_nad(
        "team-b",
        "storage",
        Some(&ptp(Some("storage-net"), 2)),
        &[("k8s.v1.cni.cncf.io/resourceName", "intel.com/sriov_a")],
    );
    w.api.create_nad(
        "team-b",
        "broken",
        Some(r#"{"cniVersion":"1.0.0","name":"broken","plugins":[{"type":"ptp"}"#),
        &[],
    );
    let mut agent = w.agent("node-a");
    agent.wait_log("first full list mirrored", 1);
    // Both namespaces; a missing name is the NAD's, a present one kept; resourceName kept.
    let side = w.definition("team-a/side.conflist").unwrap();
    assert_eq!((&side["name"], &side["plugins"][0]["type"]), (&json!("side"), &json!("ptp")));
    let storage = w.definition("team-b/storage.conflist").unwrap();
    assert_eq!(storage["name"], "storage-net");
    let src = &storage["braid.io/networkAttachmentDefinition"];
    assert_eq!(
        (&src["namespace"], &src["name"], &src["k8s.v1.cni.cncf.io/resourceName"]),
        (&json!("team-b"), &json!("storage"), &json!("intel.com/sriov_a"))
    );
    // The broken one: not mirrored, an Event on it and a log line name the error.
    assert!(w.definition("team-b/broken.conflist").is_none());
    let ev = w.api.wait_until("the Event on team-b/broken", HANG_GUARD, |s| {
        s.events().into_iter().find(|e| e["involvedObject"]["name"] == "broken").cloned()
    });
    assert_eq!(
        (&ev["type"], &ev["reason"], &ev["involvedObject"]["kind"], &ev["metadata"]["namespace"]),
        (&json!("Warning"), &json!("InvalidConfig"), &json!("NetworkAttachmentDefinition"), &json!("team-b"))
    );
    let msg = ev["message"].as_str().unwrap();
    assert!(msg.contains("node-a") && msg.contains("spec.config is not JSON"), "{msg}");
    assert!(agent.log().contains("NetworkAttachmentDefinition team-b/broken (resourceVersion"), "{}", agent.log());
    // Changed, then fixed, then deleted — each seen in the files.
    w.api.replace_nad("team-a", "side", Some(&ptp(None, 3)), &[]);
    w.wait_definition(&agent, "team-a/side.conflist", |v| v["plugins"][0]["ipam"]["subnet"] == "198.18.3.0/24");
    w.api.replace_nad("team-b", "broken", Some(&ptp(None, 4)), &[]);
    w.wait_definition(&agent, "team-b/broken.conflist", |v| v["name"] == "broken");
    w.api.delete_nad("team-a", "side");
    w.wait_gone(&agent, "team-a/side.conflist");
    assert!(!w.dirs.networks.join("team-a").exists(), "the namespace's empty directory stays");
    // One Event for the one broken version: a relist does not report it again.
    assert_eq!(w.api.events().len(), 1, "{:?}", w.api.events());
    // The agent's API side is its own: the pods were never touched.
    assert!(w.api.requests().iter().all(|r| r.method != "PATCH"));
}

/// One Event per broken NAD version for the whole cluster: two nodes' agents, and one of them
/// restarted, create one Event (its name derived from the NAD's uid, resourceVersion and reason;
/// the others' 409 AlreadyExists means "already reported"); a new broken version gets one more.
#[test]
fn a_broken_nad_version_gets_one_event_for_the_whole_cluster() {
    let w = World::new("kapi-one-event");
    let nad = w.api.create_nad("team-b", "broken", Some("{"), &[]);
    let event_posts =
        |api: &StandIn| api.requests().iter().filter(|r| r.method == "POST" && r.path.ends_with("/events")).count();
    let mut a = w.agent("node-a");
    let b_dirs = Dirs::under(&w.dir.path().join("node-b"));
    let mut b = Agent::start(&b_dirs, &w.kubeconfig, "node-b", &w.dir.path().join("b.log"), &[]);
    a.wait_log("first full list mirrored", 1);
    b.wait_log("first full list mirrored", 1);
    w.api.wait_until("both nodes' Event POSTs", HANG_GUARD, |s| {
        (s.requests().iter().filter(|r| r.method == "POST" && r.path.ends_with("/events")).count() >= 2).then_some(())
    });
    let events = w.api.events();
    assert_eq!(events.len(), 1, "{events:?}");
    let (uid, rv) = (nad["metadata"]["uid"].as_str().unwrap(), nad["metadata"]["resourceVersion"].as_str().unwrap());
    assert_eq!(events[0]["metadata"]["name"], format!("broken.{uid}.{rv}.invalidconfig"));
    let msg = events[0]["message"].as_str().unwrap();
    assert!(msg.contains("every node refuses this version alike") && msg.contains("spec.config is not JSON"), "{msg}");
    // The other node was told 409 and took it as reported.
    let told = format!("{}{}", a.log(), b.log());
    assert!(told.contains("its Event exists already"), "{told}");
    // A restart: one more POST, no second Event.
    assert!(a.stop().success());
    let mut a = w.agent("node-a");
    a.wait_log("first full list mirrored", 2);
    w.api.wait_until("the restarted agent's POST", HANG_GUARD, |s| {
        (s.requests().iter().filter(|r| r.method == "POST" && r.path.ends_with("/events")).count() >= 3).then_some(())
    });
    assert_eq!(w.api.events().len(), 1, "{:?}", w.api.events());
    // A new broken version: its own Event, once.
    w.api.replace_nad("team-b", "broken", Some("[]"), &[]);
    w.api.wait_until("the new version's POSTs", HANG_GUARD, |s| {
        (s.requests().iter().filter(|r| r.method == "POST" && r.path.ends_with("/events")).count() >= 5).then_some(())
    });
    assert_eq!(w.api.events().len(), 2, "{:?}", w.api.events());
    assert_eq!(event_posts(&w.api), 5);
}

#[test]
fn a_410_relist_and_an_api_server_restart_mid_watch_keep_the_mirror_current() {
    let mut w = World::new("kapi-relist");
    w.api.create_nad("team-a", "one", Some(&ptp(None, 1)), &[]);
    let mut agent = w.agent("node-a");
    agent.wait_log("first full list mirrored", 1);
    let lists = |api: &StandIn| {
        api.requests()
            .iter()
            .filter(|r| r.method == "GET" && !r.is_watch() && r.path.ends_with("network-attachment-definitions"))
            .count()
    };
    let before = lists(&w.api);
    // etcd compacted: the open watch gets ERROR 410 and the watcher lists again. A NAD created
    // meanwhile appears, and one deleted meanwhile goes at the end of the relist.
    w.api.create_nad("team-a", "two", Some(&ptp(None, 2)), &[]);
    w.wait_definition(&agent, "team-a/two.conflist", |_| true);
    w.api.compact();
    w.api.wait_until("a relist after 410", HANG_GUARD, |s| {
        (s.requests()
            .iter()
            .filter(|r| r.method == "GET" && !r.is_watch() && r.path.ends_with("network-attachment-definitions"))
            .count()
            > before)
            .then_some(())
    });
    w.api.create_nad("team-b", "three", Some(&ptp(None, 3)), &[]);
    w.wait_definition(&agent, "team-b/three.conflist", |_| true);
    assert!(lists(&w.api) > before);

    // The API server dies mid-watch: the mirror keeps everything, a change made while it is
    // down arrives once it is back.
    w.api.stop();
    agent.wait_log("retrying with backoff, the mirrored definitions stay as they are", 1);
    for rel in ["team-a/one.conflist", "team-a/two.conflist", "team-b/three.conflist"] {
        assert!(w.definition(rel).is_some(), "{rel} removed while the API server was down");
    }
    w.api.replace_nad("team-a", "one", Some(&ptp(None, 9)), &[]);
    w.api.delete_nad("team-a", "two");
    w.api.restart().unwrap();
    w.wait_definition(&agent, "team-a/one.conflist", |v| v["plugins"][0]["ipam"]["subnet"] == "198.18.9.0/24");
    w.wait_gone(&agent, "team-a/two.conflist");
    assert!(w.definition("team-b/three.conflist").is_some());
    agent.wait_log("the API server answers again", 1);
}

#[test]
fn a_restarted_agent_removes_stale_definitions_only_after_its_first_full_list() {
    let mut w = World::new("kapi-restart");
    w.api.create_nad("team-a", "kept", Some(&ptp(None, 1)), &[]);
    w.api.create_nad("team-a", "gone", Some(&ptp(None, 2)), &[]);
    let mut agent = w.agent("node-a");
    agent.wait_log("first full list mirrored", 1);
    assert!(agent.stop().success());
    // While the agent is away: one NAD deleted; a file put there by hand stays whatever happens.
    w.api.delete_nad("team-a", "gone");
    std::fs::write(w.dirs.networks.join("team-a/by-hand.conflist"), ptp(Some("by-hand"), 5)).unwrap();
    // It comes back while the API server is down: nothing is removed before a full list.
    w.api.stop();
    let mut agent = w.agent("node-a");
    agent.wait_log("retrying with backoff, the mirrored definitions stay as they are", 1);
    assert!(w.definition("team-a/gone.conflist").is_some(), "removed before a full list:\n{}", agent.log());
    w.api.restart().unwrap();
    // (One log for both runs: the second run's line is the second.)
    agent.wait_log("first full list mirrored", 2);
    assert!(w.definition("team-a/gone.conflist").is_none(), "{}", agent.log());
    assert!(w.definition("team-a/kept.conflist").is_some());
    assert!(w.definition("team-a/by-hand.conflist").is_some());
    assert!(agent.log().contains("no NetworkAttachmentDefinition backs it any more"), "{}", agent.log());
}

#[test]
fn a_nad_wins_over_the_configmap_for_the_same_network() {
    let w = World::new("kapi-cm");
    let cm = w.dir.path().join("configmap");
    std::fs::create_dir_all(&cm).unwrap();
    std::fs::write(cm.join("team-a.both.conflist"), ptp(Some("both"), 7)).unwrap();
    std::fs::write(cm.join("team-a.cm-only.conflist"), ptp(Some("cm-only"), 8)).unwrap();
    w.api.create_nad("team-a", "both", Some(&ptp(None, 1)), &[]);
    let cm_flag = cm.display().to_string();
    let mut agent = w.agent_with("node-a", &["--networks-configmap", &cm_flag]);
    agent.wait_log("first full list mirrored", 1);
    w.wait_definition(&agent, "team-a/both.conflist", |v| v["plugins"][0]["ipam"]["subnet"] == "198.18.1.0/24");
    w.wait_definition(&agent, "team-a/cm-only.conflist", |_| true);
    agent.wait_log(
        "ConfigMap key team-a.both.conflist not used: the NetworkAttachmentDefinition team-a/both defines that network",
        1,
    );
    // The NAD goes: the ConfigMap's definition takes its place.
    w.api.delete_nad("team-a", "both");
    w.wait_definition(&agent, "team-a/both.conflist", |v| v["plugins"][0]["ipam"]["subnet"] == "198.18.7.0/24");
}

/// The start-up race: after a restart the NAD mirror's record is loaded before either mirror
/// writes, so the ConfigMap mirror's first pass never overwrites a file a NAD owns — even
/// when no NAD list ever arrives (the API server down), which leaves only the record to say.
/// (Before, the record was read on the API thread while the main loop's first pass ran: a race
/// that the ConfigMap won when it came first.)
#[test]
fn the_configmaps_first_pass_after_a_restart_leaves_the_nad_owned_files_alone() {
    let mut w = World::new("kapi-startup");
    let nad_made = ptp(None, 1);
    std::fs::create_dir_all(w.dirs.networks.join("team-a")).unwrap();
    std::fs::write(w.dirs.networks.join("team-a/both.conflist"), &nad_made).unwrap();
    std::fs::write(w.dirs.networks.join(".braid-install-nads.json"), r#"["team-a/both.conflist"]"#).unwrap();
    let cm = w.dir.path().join("configmap");
    std::fs::create_dir_all(&cm).unwrap();
    std::fs::write(cm.join("team-a.both.conflist"), ptp(Some("both"), 7)).unwrap();
    std::fs::write(cm.join("team-a.cm-only.conflist"), ptp(Some("cm-only"), 8)).unwrap();
    w.api.stop();
    let cm_flag = cm.display().to_string();
    let mut agent = w.agent_with("node-a", &["--networks-configmap", &cm_flag]);
    // The first pass is done once it wrote the other key.
    agent.wait_log("(ConfigMap key team-a.cm-only.conflist)", 1);
    agent.wait_log("ConfigMap key team-a.both.conflist not used", 1);
    assert_eq!(
        std::fs::read_to_string(w.dirs.networks.join("team-a/both.conflist")).unwrap(),
        nad_made,
        "{}",
        agent.log()
    );
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

/// Requests about pods (any verb) the stand-in saw.
fn pod_requests(api: &StandIn) -> Vec<String> {
    api.requests()
        .into_iter()
        .filter(|r| r.path.contains("/pods"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

/// A free port on 127.0.0.1 for --metrics-addr.
fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// `GET path` on the agent's --metrics-addr: (status code, body); `None` while it does not answer.
fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split(' ').nth(1)?.parse().ok()?;
    Some((code, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()))
}

/// One metric's value as the agent exposes it.
fn metric(addr: &str, name: &str) -> Option<f64> {
    let (_, body) = http_get(addr, "/metrics")?;
    body.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

fn annotation(api: &StandIn, ns: &str, pod: &str) -> Option<String> {
    api.pod(ns, pod).and_then(|p| p["metadata"]["annotations"][STATUS].as_str().map(str::to_string))
}

/// Files of a delegator before the UID was recorded (a bare list): the pod is read first, as
/// before, and the patch carries the UID it saw.
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

/// Requests in proportion to change: at rest — several rescans of the status directory later —
/// the agent sends no request about pods at all; a pod start costs one PATCH (no GET); a pod
/// that is gone is logged once per file, not at every rescan. Pod identity: after the pod is
/// recreated under its name, the old sandbox's file is refused by the API server (the patch's
/// `metadata.uid` differs) and never lands on the new pod. Readiness and metrics on
/// --metrics-addr.
#[test]
fn no_requests_at_rest_one_patch_per_pod_start_and_never_the_old_pods_status_on_a_new_pod() {
    let w = World::new("kapi-rest");
    let web = w.api.create_pod("default", "web-0", "node-a", &[]);
    write_status_of(&w.dirs.status, "default", "web-0", "c1", &status_doc(1), &uid_of(&web));
    write_status_of(&w.dirs.status, "default", "ghost", "c0", &status_doc(9), "0000-gone");
    let addr = free_addr();
    let flags = ["--status-rescan", "1", "--metrics-addr", &addr];
    let mut agent = w.agent_with("node-a", &flags);
    wait_until("web-0's annotation", || annotation(&w.api, "default", "web-0") == Some(status_doc(1)), || agent.log());
    agent.wait_log("default/ghost: the pod is gone", 1);
    agent.wait_log("first full list mirrored", 1);
    wait_until("/readyz 200", || http_get(&addr, "/readyz").is_some_and(|(c, _)| c == 200), || agent.log());
    // At rest: three rescans, not one request about a pod.
    let before = pod_requests(&w.api);
    assert_eq!(before.iter().filter(|r| r.starts_with("GET")).count(), 0, "{before:?}");
    let rescans = metric(&addr, "braid_install_status_rescans_total").unwrap();
    wait_until(
        "three more rescans",
        || metric(&addr, "braid_install_status_rescans_total").is_some_and(|n| n >= rescans + 3.0),
        || agent.log(),
    );
    assert_eq!(pod_requests(&w.api), before, "requests at rest");
    assert_eq!(agent.log().matches("default/ghost: the pod is gone").count(), 1, "{}", agent.log());
    // A pod starts: one PATCH.
    let web1 = w.api.create_pod("default", "web-1", "node-a", &[]);
    write_status_of(&w.dirs.status, "default", "web-1", "c2", &status_doc(2), &uid_of(&web1));
    wait_until("web-1's annotation", || annotation(&w.api, "default", "web-1") == Some(status_doc(2)), || agent.log());
    let new: Vec<String> = pod_requests(&w.api).into_iter().skip(before.len()).collect();
    assert_eq!(new, ["PATCH /api/v1/namespaces/default/pods/web-1"]);
    let published = metric(&addr, "braid_install_status_files_total{outcome=\"published\"}").unwrap();
    assert_eq!(published, 2.0);
    assert!(metric(&addr, "braid_install_status_publish_seconds_count").unwrap() >= 2.0);
    // web-0 is deleted and created again (a StatefulSet pod force-deleted): same name, new UID.
    assert!(agent.stop().success());
    w.api.delete_pod("default", "web-0");
    let web_again = w.api.create_pod("default", "web-0", "node-a", &[]);
    assert_ne!(uid_of(&web_again), uid_of(&web));
    let mut agent = w.agent_with("node-a", &flags);
    agent.wait_log("default/web-0: not published from", 1);
    assert!(agent.log().contains("the pod of that name is another pod now"), "{}", agent.log());
    assert_eq!(annotation(&w.api, "default", "web-0"), None, "the old sandbox's status landed on the new pod");
    // Its own sandbox's file is published.
    write_status_of(&w.dirs.status, "default", "web-0", "c3", &status_doc(3), &uid_of(&web_again));
    wait_until(
        "the new web-0's annotation",
        || annotation(&w.api, "default", "web-0") == Some(status_doc(3)),
        || agent.log(),
    );
}

/// One pod whose PATCH the API server accepts and never answers: every other pod is published
/// meanwhile, the stuck request is abandoned after --api-timeout and retried, and the pod is
/// published once the API server answers.
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

#[test]
fn without_node_name_or_credentials_the_agent_says_so_and_exits_7() {
    let w = World::new("kapi-bad");
    let bin = braid_integration::build_dir().join("braid-install");
    let s = |p: &Path| p.display().to_string();
    let run = |env: &[(&str, String)]| {
        let mut c = std::process::Command::new(&bin);
        c.args(["--kubernetes-api", "--host-root", "/", "--skip-binaries"])
            .args(["--cni-conf-dir", &s(&w.dirs.conf), "--networks-dir", &s(&w.dirs.networks)])
            .args(["--status-dir", &s(&w.dirs.status), "--state-dir", &s(&w.dirs.state)])
            .env_remove("NODE_NAME")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("HOME", w.dir.path());
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let out = run(&[("KUBECONFIG", s(&w.kubeconfig))]);
    assert_eq!(out.status.code(), Some(7));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("NODE_NAME is not set"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&[("NODE_NAME", "node-a".into()), ("KUBECONFIG", s(&w.dir.path().join("nope")))]);
    assert_eq!(out.status.code(), Some(7));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no Kubernetes API credentials"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The whole path on a node: a network that exists only as a NetworkAttachmentDefinition, a
/// real delegator ADD (namespaces, Debian's reference plugins) selecting it from the pod's
/// annotation, and its network-status on the pod object — while the ADD itself, traced with
/// strace, opens no socket but netlink (no connection of any kind: the agent does the API's
/// work off the pod-start path).
#[test]
fn a_network_that_exists_only_as_a_nad_attaches_through_a_real_add_and_its_status_reaches_the_pod() {
    if !require_root("a_network_that_exists_only_as_a_nad_attaches_through_a_real_add_and_its_status_reaches_the_pod") {
        return;
    }
    let w = World::new("kapi-add");
    let mut h = Harness::new("kapiadd");
    // The delegator, traced: a wrapper first on CNI_PATH execs the real one under strace -f
    // (its delegates included).
    let trace = w.dir.path().join("delegator.trace");
    let wrap = cni_runtime::testing::ScriptDir::new(&unique("kapiwrap")).unwrap();
    wrap.script(
        "delegator",
        &format!(
            "exec strace -f -qq -e trace=socket,connect -o {} {} \"$@\"",
            trace.display(),
            braid_integration::build_dir().join("delegator").display()
        ),
    )
    .unwrap();
    h.paths.insert(0, wrap.path.clone());

    let ipam = h.host_local(61);
    let nad_config =
        json!({"cniVersion": "1.0.0", "name": "side-network", "plugins": [{"type": "ptp", "ipam": ipam}]}).to_string();
    w.api.create_nad("team-a", "side", Some(&nad_config), &[]);
    let pod = unique("web");
    let pod_object = w.api.create_pod("team-a", &pod, "node-a", &[("k8s.v1.cni.cncf.io/networks", "side")]);
    let mut agent = w.agent("node-a");
    agent.wait_log("first full list mirrored", 1);
    assert!(w.definition("team-a/side.conflist").is_some());

    let cluster =
        json!({"cniVersion": "1.0.0", "name": unique("cl"), "plugins": [{"type": "ptp", "ipam": h.host_local(60)}]});
    let braid = json!({"cniVersion": "1.0.0", "name": unique("braid"), "plugins": [{
        "type": "delegator", "stateDir": h.dir.path().join("state"),
        "capabilities": {"io.kubernetes.cri.pod-annotations": true},
        "delegates": [cluster],
        "kubernetes": {"networksDir": w.dirs.networks, "statusDir": w.dirs.status, "globalNamespaces": []}
    }]});
    let ctr = h.container("kapiadd");
    let mut rt = h.runtime(&ctr, &unique("sandbox"), "eth0");
    rt.args = format!(
        "IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;K8S_POD_NAME={pod};K8S_POD_INFRA_CONTAINER_ID={};K8S_POD_UID={}",
        rt.container_id,
        uid_of(&pod_object)
    );
    rt.capability_args.insert(
        "io.kubernetes.cri.pod-annotations".into(),
        json!({"k8s.v1.cni.cncf.io/networks": "side", "kubernetes.io/config.source": "api"}),
    );
    let r = h.add(&braid, &rt).unwrap_or_else(|e| panic!("ADD: {e}\n{}", agent.log())).to_latest();
    let mut links = ctr.links();
    links.sort();
    assert_eq!(links, ["eth0", "lo", "net1"], "{r:?}");
    assert!(ctr.addresses("net1").iter().any(|a| a.starts_with("198.18.61.")), "{:?}", ctr.addresses("net1"));

    // The status file the delegator wrote (its document and the pod's UID), the document
    // published on the pod object byte for byte.
    let file = w.dirs.status.join(format!("team-a_{pod}_{}.json", rt.container_id));
    let written = std::fs::read_to_string(&file).unwrap();
    let prefix = "{\"networkStatus\":";
    let suffix = format!(",\"podUID\":\"{}\"}}\n", uid_of(&pod_object));
    let doc = written
        .strip_prefix(prefix)
        .and_then(|r| r.strip_suffix(&suffix))
        .unwrap_or_else(|| panic!("{written}"))
        .to_string();
    wait_until("the pod's network-status", || annotation(&w.api, "team-a", &pod) == Some(doc.clone()), || agent.log());
    let status: Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(status[1]["name"], "team-a/side", "{status}");
    assert_eq!(status[1]["interface"], "net1");

    // What the ADD did on sockets: netlink only (to the kernel) — no inet, inet6 or unix socket,
    // no connection anywhere else.
    let calls = std::fs::read_to_string(&trace).unwrap();
    assert!(calls.contains("socket(AF_NETLINK"), "the trace saw the ADD's netlink sockets:\n{calls}");
    let other: Vec<&str> = calls
        .lines()
        .filter(|l| {
            (l.contains("socket(") && !l.contains("socket(AF_NETLINK"))
                || (l.contains("connect(") && !l.contains("{sa_family=AF_NETLINK"))
        })
        .collect();
    assert!(other.is_empty(), "the ADD opened a connection:\n{}", other.join("\n"));

    h.del(&braid, &rt).unwrap_or_else(|e| panic!("DEL: {e}"));
    assert_eq!(ctr.links(), ["lo"]);
    assert!(!file.exists());
    assert!(h.reservations().is_empty(), "{:?}", h.reservations());
}
