//! braid on a real Kubernetes: the cluster of `scripts/node.sh` (kube-apiserver with
//! `Node,RBAC`, NodeRestriction and ValidatingAdmissionPolicy; kube-controller-manager;
//! kube-scheduler; per node containerd 2.x, a kubelet and kube-proxy), braid installed with
//! `kubectl apply -k deploy/kubernetes`, its DaemonSet's pods started by the kubelets with their
//! projected tokens. Each test does what an operator does with `kubectl` and reads what they
//! would read: pods, their annotations, `kubectl exec … ip`, the nodes' files.
//!
//! Waits are upper bounds for a stuck cluster, never measurements; the one figure reported
//! (creation to network-status) is printed, not asserted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use braid_integration::cluster::{pod, Cluster, Defer, NETWORK_STATUS};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Instant;

/// A NAD with this `spec.config` (`None`: the empty config that names a file).
fn nad(ns: &str, name: &str, config: Option<&Value>) -> String {
    let spec = match config {
        Some(c) => json!({"config": c.to_string()}),
        None => json!({}),
    };
    json!({
        "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name, "namespace": ns}, "spec": spec
    })
    .to_string()
}

/// A bridge network of its own (no gateway) with host-local addresses from `198.18.<net>.0/24`.
fn bridge(name: &str, bridge: &str, net: u8) -> Value {
    json!({
        "cniVersion": "1.0.0", "name": name,
        "plugins": [{"type": "bridge", "bridge": bridge, "isGateway": false, "ipMasq": false,
                     "ipam": {"type": "host-local", "ranges": [[{"subnet": format!("198.18.{net}.0/24")}]]}}]
    })
}

fn wait_status(c: &Cluster, ns: &str, name: &str, node: &str) -> Value {
    let mut found = None;
    c.wait(
        &format!("network-status of {ns}/{name}"),
        || {
            found = c.network_status(ns, name);
            found.is_some()
        },
        || c.agent_log(node),
    );
    found.unwrap()
}

/// The pod's interfaces as `ip` inside it shows them: name → (MAC, IPv4 addresses with prefix).
///
/// Waits for the pod to be Running first: its network-status is published once its sandbox has
/// networking, which can be before its container has started, and `kubectl exec` into a container
/// not started yet fails ("unable to upgrade connection: container not found").
fn interfaces_inside(c: &Cluster, ns: &str, name: &str) -> BTreeMap<String, (String, Vec<String>)> {
    c.wait_running(ns, name);
    let link = c.ok(&["exec", "-n", ns, name, "--", "ip", "-o", "link"]);
    let addr = c.ok(&["exec", "-n", ns, name, "--", "ip", "-o", "-4", "addr"]);
    let mut m = BTreeMap::new();
    for l in link.lines() {
        let mut w = l.split_whitespace();
        let Some(ifname) = w.nth(1).map(|n| n.trim_end_matches(':').split('@').next().unwrap_or("").to_string()) else {
            continue;
        };
        if ifname == "lo" {
            continue;
        }
        let mac = l.split("link/ether ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap_or("").to_string();
        m.insert(ifname, (mac, Vec::new()));
    }
    for l in addr.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if let (Some(ifname), Some(a)) = (w.get(1), w.get(3)) {
            if let Some(e) = m.get_mut(*ifname) {
                e.1.push(a.to_string());
            }
        }
    }
    m
}

/// Each entry of the network-status is what is inside the pod: the same interface, MAC and
/// addresses; returns the entries' names by interface.
fn status_matches_pod(st: &Value, inside: &BTreeMap<String, (String, Vec<String>)>) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for e in st.as_array().unwrap() {
        let ifname = e["interface"].as_str().unwrap_or_else(|| panic!("entry without interface: {st}"));
        let (mac, addrs) =
            inside.get(ifname).unwrap_or_else(|| panic!("{ifname} of {st} is not in the pod: {inside:?}"));
        assert_eq!(e["mac"].as_str(), Some(mac.as_str()), "MAC of {ifname}: {st} vs {inside:?}");
        let ips: Vec<&str> = e["ips"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        for ip in &ips {
            assert!(
                addrs.iter().any(|a| a.split('/').next() == Some(*ip)),
                "{ip} of {ifname} not in the pod: {inside:?}"
            );
        }
        assert!(!ips.is_empty(), "no IPs for {ifname}: {st}");
        names.insert(ifname.to_string(), e["name"].as_str().unwrap().to_string());
    }
    names
}

#[test]
fn nads_of_two_namespaces_and_the_configmap_give_pods_their_networks_and_network_status() {
    let Some(c) = Cluster::lock("nads_of_two_namespaces_and_the_configmap_give_pods_their_networks_and_network_status")
    else {
        return;
    };
    let _ns = c.namespace("braid-nets");
    // A NAD with its config in the pod's namespace; one in `default` (a global namespace) whose
    // empty spec.config names a file in Multus's conf dir on every node, as Multus users have.
    c.apply(&nad("braid-nets", "net-a", Some(&bridge("net-a", "br-net-a", 110))));
    let file = bridge("net-file", "br-net-file", 111);
    for n in 1..=c.nodes() {
        c.write_on(&format!("node{n}"), "/etc/cni/multus/net.d/net-file.conflist", &file.to_string());
    }
    c.apply(&nad("default", "net-file", None));
    let _cleanup = Defer(|| {
        let _ = c.kubectl(&["delete", "net-attach-def", "net-file", "-n", "default", "--ignore-not-found"]);
    });
    // Mirrored on every node (the agents list and watch NADs).
    for n in 1..=c.nodes() {
        wait_mirrored(&c, &format!("node{n}"), "braid-nets/net-a");
        wait_mirrored(&c, &format!("node{n}"), "default/net-file");
    }

    // Short form (NAD of the pod's namespace, namespace/name of the empty-config NAD) and JSON
    // form (the ConfigMap's `isolated`, the NAD again).
    let pods = [
        ("short", "net-a, default/net-file", ["braid-nets/net-a", "default/net-file"]),
        (
            "json",
            r#"[{"name": "isolated", "namespace": "default"}, {"name": "net-a"}]"#,
            ["default/isolated", "braid-nets/net-a"],
        ),
    ];
    // Reported (past libtest's capture, so that scripts/test.sh's output shows it), not asserted:
    // from `kubectl apply` returning to the annotation seen, polled every 250 ms.
    for (name, networks, _) in &pods {
        let started = Instant::now();
        c.apply(&pod("braid-nets", name, "node1", Some(networks)));
        wait_status(&c, "braid-nets", name, "node1");
        report(&format!(
            "pod braid-nets/{name}: network-status on the pod object {:?} after kubectl apply returned",
            started.elapsed()
        ));
    }
    for (name, _, expected) in &pods {
        c.wait_running("braid-nets", name);
        let st = c.network_status("braid-nets", name).unwrap();
        let inside = interfaces_inside(&c, "braid-nets", name);
        assert_eq!(inside.keys().cloned().collect::<Vec<_>>(), ["eth0", "net1", "net2"], "{name}: {inside:?}");
        let names = status_matches_pod(&st, &inside);
        assert_eq!(names.get("net1").map(String::as_str), Some(expected[0]), "{st}");
        assert_eq!(names.get("net2").map(String::as_str), Some(expected[1]), "{st}");
        let default: Vec<&Value> = st.as_array().unwrap().iter().filter(|e| e["default"] == true).collect();
        assert_eq!(default.len(), 1, "one default entry: {st}");
        assert_eq!(default[0]["interface"], "eth0", "{st}");
    }
}

/// A line for the reader of the suite's output, past libtest's capture.
fn report(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "REPORT {line}");
}

#[test]
fn the_shipped_rbac_and_admission_policy_are_enforced_by_the_api_server() {
    let Some(c) = Cluster::lock("the_shipped_rbac_and_admission_policy_are_enforced_by_the_api_server") else {
        return;
    };
    assert!(c.nodes() >= 2, "this test needs two nodes (scripts/node.sh up 2)");
    // The API server type-checked the policy against the pod schema: no warning.
    let policy = || c.get(&["validatingadmissionpolicy", "braid-node-agent"]);
    c.wait(
        "the policy's type check",
        || {
            let p = policy();
            p["status"]["observedGeneration"] == p["metadata"]["generation"]
        },
        || policy().to_string(),
    );
    let policy = policy();
    assert_eq!(policy["status"]["typeChecking"], json!({}), "type-checking warnings: {}", policy["status"]);

    let ns = c.namespace("braid-policy");
    c.apply(&pod("braid-policy", "on-1", "node1", None));
    c.apply(&pod("braid-policy", "on-2", "node2", None));
    let token = c.agent_token("node1");
    let patch = |pod: &str, p: Value| {
        c.as_token(&token, &["patch", "pod", pod, "-n", &ns.name, "--type=merge", "-p", &p.to_string()])
    };

    // Set, change, remove: the one annotation, on its own node's pod.
    for (what, value) in [("set", json!("[]")), ("change", json!("[{\"name\":\"x\"}]")), ("remove", Value::Null)] {
        let (ok, said) = patch("on-1", json!({"metadata": {"annotations": {NETWORK_STATUS: value}}}));
        assert!(ok, "the agent's own token may {what} network-status on its node's pod: {said}");
    }
    // A pod no scheduler can bind (its nodeSelector matches no node): not bound to any node.
    let mut unbound: Value = serde_json::from_str(&pod(&ns.name, "unbound", "node1", None)).unwrap();
    unbound["spec"].as_object_mut().unwrap().remove("nodeName");
    unbound["spec"]["nodeSelector"] = json!({"braid.io/no-such-node": "true"});
    c.apply(&unbound.to_string());
    for (what, pod, p, words) in [
        (
            "an unbound pod",
            "unbound",
            json!({"metadata": {"annotations": {NETWORK_STATUS: "[]"}}}),
            "is not bound to a node",
        ),
        ("a finalizer", "on-1", json!({"metadata": {"finalizers": ["braid.io/x"]}}), "not metadata.finalizers"),
        ("a label", "on-1", json!({"metadata": {"labels": {"x": "y"}}}), "not metadata.labels"),
        ("another annotation", "on-1", json!({"metadata": {"annotations": {"x": "y"}}}), "not x"),
        ("the spec", "on-1", json!({"spec": {"activeDeadlineSeconds": 100000}}), "not its spec"),
        (
            "a pod of another node",
            "on-2",
            json!({"metadata": {"annotations": {NETWORK_STATUS: "[]"}}}),
            "may change only pods bound to that node",
        ),
    ] {
        let (ok, said) = patch(pod, p);
        assert!(!ok, "{what} was admitted: {said}");
        assert!(
            said.contains("ValidatingAdmissionPolicy 'braid-node-agent'") && said.contains(words),
            "{what}: {said}"
        );
    }
    // A token of the same ServiceAccount that names no node (not bound to a pod).
    let unbound = c.ok(&["create", "token", "braid", "-n", "kube-system"]).trim().to_string();
    let (ok, said) = c.as_token(
        &unbound,
        &[
            "patch",
            "pod",
            "on-1",
            "-n",
            &ns.name,
            "--type=merge",
            "-p",
            &json!({"metadata": {"annotations": {NETWORK_STATUS: "[]"}}}).to_string(),
        ],
    );
    assert!(!ok && said.contains("this request's credentials name no node"), "{said}");
    // The policy holds braid's ServiceAccount only: the admin still labels the pod.
    c.ok(&["label", "pod", "on-1", "-n", &ns.name, "braid.io/labelled=yes"]);

    // RBAC: exactly the documented grants.
    let list = c.ok(&["auth", "can-i", "--list", "--as=system:serviceaccount:kube-system:braid"]);
    let grants: Vec<String> =
        list.lines().skip(1).map(grant).filter(|l| !l.starts_with("selfsubject") && !l.is_empty()).collect();
    let expected = [
        "events [] [] [create]",
        "network-attachment-definitions.k8s.cni.cncf.io [] [] [get list watch]",
        "pods [] [] [get patch]",
        "resourceslices.resource.k8s.io [] [] [list watch]",
    ];
    let ours: Vec<&String> = grants.iter().filter(|g| !is_everyones(g)).collect();
    assert_eq!(ours, expected.iter().map(|s| s.to_string()).collect::<Vec<_>>().iter().collect::<Vec<_>>(), "{list}");
}

/// One line of `kubectl auth can-i --list`, its blanks collapsed and its verbs sorted: the
/// verbs come in the order the authorizer meets the rules granting them, which the API server
/// does not fix when two roles grant one resource (CI saw `get patch list watch` where this
/// machine saw `list watch get patch`).
fn grant(line: &str) -> String {
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.trim_end().strip_suffix(']').and_then(|l| l.rsplit_once('[')) {
        Some((head, verbs)) => {
            let mut verbs: Vec<&str> = verbs.split_whitespace().collect();
            verbs.sort_unstable();
            format!("{} [{}]", words(head), verbs.join(" "))
        }
        None => words(line),
    }
}

/// Grants every authenticated user has (system:basic-user, system:discovery,
/// system:public-info-viewer): not braid's.
fn is_everyones(grant: &str) -> bool {
    grant.starts_with('[') || grant.starts_with("selfsubject")
}

#[test]
fn deleting_pods_leaves_no_interface_reservation_state_or_status_file() {
    let Some(c) = Cluster::lock("deleting_pods_leaves_no_interface_reservation_state_or_status_file") else {
        return;
    };
    // Host-side veths on node1 (bridges stay: the bridge plugin leaves them). Ours are those
    // that appear with our pods: another test's pods may still be going meanwhile.
    let veths = || -> std::collections::BTreeSet<String> {
        String::from_utf8_lossy(&c.on_node("node1", "ip", &["-o", "link"]).stdout)
            .lines()
            .filter_map(|l| l.split(": ").nth(1)?.split('@').next().map(str::to_string))
            .filter(|n| n.starts_with("veth"))
            .collect()
    };
    let before = veths();
    let ns = c.namespace("braid-del");
    for i in 0..3 {
        let name = format!("p{i}");
        c.apply(&pod("braid-del", &name, "node1", Some("default/isolated")));
    }
    for i in 0..3 {
        wait_status(&c, "braid-del", &format!("p{i}"), "node1");
    }
    let reserved = |c: &Cluster| {
        c.files_on("node1", "/var/lib/cni/networks/isolated").into_iter().filter(|f| f.starts_with("198.")).count()
    };
    assert_eq!(reserved(&c), 3);
    let ours: Vec<String> = veths().difference(&before).cloned().collect();
    assert_eq!(ours.len(), 6, "two veths a pod (eth0, net1): {ours:?}");
    // The pods' sandboxes (their IDs end the status files' names).
    let sandboxes: Vec<String> = (0..3)
        .flat_map(|i| status_files(&c, "node1", "braid-del", &format!("p{i}")))
        .map(|f| f.trim_end_matches(".json").rsplit('_').next().unwrap().to_string())
        .collect();
    assert_eq!(sandboxes.len(), 3, "{sandboxes:?}");
    // The namespace is gone once its pods' objects are; the kubelet stops their sandboxes on
    // its own schedule: wait until containerd says each one's CNI DEL returned, then look for
    // anything left.
    drop(ns);
    let torn_down = |id: &String| {
        c.log_all("containerd-node1").contains(&format!("TearDown network for sandbox \\\"{id}\\\" successfully"))
    };
    c.wait("the runtime's DEL of the three pods", || sandboxes.iter().all(torn_down), || c.log("containerd-node1"));
    let left_veths: Vec<String> = veths().intersection(&ours.iter().cloned().collect()).cloned().collect();
    assert_eq!(left_veths, Vec::<String>::new(), "veths left on node1");
    let left = |dir: &str| c.files_on("node1", dir).into_iter().filter(|f| f.contains("braid-del")).collect::<Vec<_>>();
    assert_eq!(left("/run/braid/network-status"), Vec::<String>::new());
    assert!(c.files_on("node1", "/var/lib/cni/braid").iter().all(|f| !f.contains("braid-del")));
    assert_eq!(
        c.files_on("node1", "/var/lib/cni/networks/isolated").iter().filter(|f| f.starts_with("198.")).count(),
        0
    );
}

/// braid-fault (integration/src/bin) on every node's CNI bin dir, for the networks that must
/// hold a pod's ADD at a known point.
fn install_fault_plugin(c: &Cluster) {
    let fault = braid_integration::build_dir().join("braid-fault");
    for n in 1..=c.nodes() {
        let out = c.on_node(&format!("node{n}"), "cp", &[fault.to_str().unwrap(), "/opt/cni/bin/braid-fault"]);
        assert!(out.status.success(), "installing braid-fault on node{n}: {out:?}");
    }
}

/// A network `ns/gated` whose ADD first waits while a gate file exists on node1 (logging the
/// call), then attaches a bridge from `198.18.<net>.0/24`: a pod that selects it is held
/// mid-ADD, at a known point, until the test opens the gate. Mirrored on node1 when made; its
/// files on node1 removed on drop.
struct Gate<'c> {
    c: &'c Cluster,
    gate: String,
    calls: String,
}

impl<'c> Gate<'c> {
    fn new(c: &'c Cluster, ns: &str, net: u8) -> Gate<'c> {
        install_fault_plugin(c);
        let g = Gate { c, gate: format!("/run/{ns}.gate"), calls: format!("/run/{ns}.calls") };
        let mut list = bridge("gated", &format!("br-gated{net}"), net);
        let fault = json!({"type": "braid-fault", "sleepOn": "ADD", "hangWhile": g.gate, "log": g.calls});
        list["plugins"].as_array_mut().unwrap().insert(0, fault);
        c.apply(&nad(ns, "gated", Some(&list)));
        wait_mirrored(c, "node1", &format!("{ns}/gated"));
        g
    }

    /// The next ADD waits at the gate (the call log starts anew).
    fn close(&self) {
        self.c.write_on("node1", &self.gate, "");
        let _ = self.c.on_node("node1", "rm", &["-f", &self.calls]);
    }

    fn open(&self) {
        let _ = self.c.on_node("node1", "rm", &["-f", &self.gate]);
    }

    /// Waits until an ADD is at the gate.
    fn wait_reached(&self, what: &str) {
        self.c.wait(
            what,
            || self.c.read_on("node1", &self.calls).is_some_and(|l| l.contains("\"ADD\"")),
            || self.c.log("kubelet-node1"),
        );
    }
}

impl Drop for Gate<'_> {
    fn drop(&mut self) {
        let _ = self.c.on_node("node1", "rm", &["-f", &self.gate, &self.calls]);
    }
}

/// Waits until braid's agent on `node` has mirrored the network `ns/name`.
fn wait_mirrored(c: &Cluster, node: &str, network: &str) {
    c.wait(
        &format!("{network} mirrored on {node}"),
        || c.files_on(node, "/etc/cni/braid.d").contains(&format!("{network}.conflist")),
        || c.agent_log(node),
    );
}

/// The delegator's status files of a pod on a node (`<ns>_<pod>_<sandbox>.json`).
fn status_files(c: &Cluster, node: &str, ns: &str, pod: &str) -> Vec<String> {
    c.files_on(node, "/run/braid/network-status")
        .into_iter()
        .filter(|f| f.starts_with(&format!("{ns}_{pod}_")))
        .collect()
}

#[test]
fn with_the_api_server_stopped_pods_start_from_the_node_mirror_and_get_their_status_once_it_is_back() {
    let Some(c) = Cluster::lock(
        "with_the_api_server_stopped_pods_start_from_the_node_mirror_and_get_their_status_once_it_is_back",
    ) else {
        return;
    };
    let ns = c.namespace("braid-apidown");
    let gate = Gate::new(&c, &ns.name, 112);
    gate.close();
    c.apply(&pod(&ns.name, "starting", "node1", Some("gated")));
    // The pod's ADD is under way (held at the gate) when the API server goes.
    gate.wait_reached("the pod's ADD at the gate");
    c.node_sh(&["stop", "kube-apiserver"]);
    let _back = Defer(|| {
        c.node_sh(&["start", "kube-apiserver"]);
    });
    gate.open();
    // The ADD completes with no API server: its networks come from the node's mirror.
    c.wait(
        "the pod's ADD to finish without the API server",
        || !status_files(&c, "node1", &ns.name, "starting").is_empty(),
        || c.log("containerd-node1"),
    );
    let file = status_files(&c, "node1", &ns.name, "starting").remove(0);
    let doc: Value =
        serde_json::from_str(&c.read_on("node1", &format!("/run/braid/network-status/{file}")).unwrap()).unwrap();
    assert!(doc.to_string().contains(&format!("{}/gated", ns.name)), "{doc}");
    c.node_sh(&["start", "kube-apiserver"]);
    c.wait(
        "the API server back",
        || c.kubectl(&["get", "--raw", "/readyz"]).status.success(),
        || c.log("kube-apiserver"),
    );
    let st = wait_status(&c, &ns.name, "starting", "node1");
    // The file: {"networkStatus": [...], "podUID": "..."} (the delegator's document and the
    // pod it was made for); the annotation is the document, on that pod.
    assert_eq!(st, doc["networkStatus"], "the published status is the node's document");
    assert_eq!(doc["podUID"], c.get(&["pod", "starting", "-n", &ns.name])["metadata"]["uid"]);
    c.wait_running(&ns.name, "starting");
}

#[test]
fn a_watch_resumed_after_an_etcd_compaction_answers_410_and_the_agent_relists_what_changed_meanwhile() {
    let Some(c) = Cluster::lock(
        "a_watch_resumed_after_an_etcd_compaction_answers_410_and_the_agent_relists_what_changed_meanwhile",
    ) else {
        return;
    };
    assert!(c.nodes() >= 2, "needs two nodes");
    let ns = c.namespace("braid-compact");
    c.apply(&nad(&ns.name, "old", Some(&bridge("old", "br-old", 113))));
    let has =
        |node: &str, name: &str| c.files_on(node, "/etc/cni/braid.d").contains(&format!("{}/{name}.conflist", ns.name));
    c.wait("old mirrored on node2", || has("node2", "old"), || c.agent_log("node2"));
    // node2 loses the API server (its agent's watch breaks); meanwhile a NAD is deleted and
    // one created, etcd is compacted past both, and the API server restarts (its watch cache
    // starts at the compacted revision): node2's agent resumes its watch from a revision that
    // no longer exists.
    // Both ways: an established watch would still receive what the server sends.
    let rules: [[&str; 9]; 2] = [
        ["OUTPUT", "-d", "198.18.0.1", "-p", "tcp", "--dport", "6443", "-j", "DROP"],
        ["INPUT", "-s", "198.18.0.1", "-p", "tcp", "--sport", "6443", "-j", "DROP"],
    ];
    let iptables = |op: &str| {
        rules.iter().all(|r| {
            let mut a = vec![op];
            a.extend_from_slice(r);
            c.on_node("node2", "iptables", &a).status.success()
        })
    };
    assert!(iptables("-I"), "cutting node2 off the API server");
    let _uncut = Defer(|| {
        iptables("-D");
    });
    c.ok(&["delete", "net-attach-def", "old", "-n", &ns.name]);
    c.apply(&nad(&ns.name, "new", Some(&bridge("new", "br-new", 114))));
    c.wait("the change mirrored on node1", || has("node1", "new") && !has("node1", "old"), || c.agent_log("node1"));
    // A pod starting on node1 (held mid-ADD) through the compaction and the restart.
    let gate = Gate::new(&c, &ns.name, 124);
    gate.close();
    c.apply(&pod(&ns.name, "starting", "node1", Some("gated")));
    gate.wait_reached("the pod's ADD at the gate");
    c.node_sh(&["compact"]);
    c.node_sh(&["restart", "kube-apiserver"]);
    c.wait(
        "the API server back",
        || c.kubectl(&["get", "--raw", "/readyz"]).status.success(),
        || c.log("kube-apiserver"),
    );
    gate.open();
    let st = wait_status(&c, &ns.name, "starting", "node1");
    status_matches_pod(&st, &interfaces_inside(&c, &ns.name, "starting"));
    assert!(has("node2", "old") && !has("node2", "new"), "node2 saw the change while cut off");
    let mark = c.agent_requests().len();
    assert!(iptables("-D"), "node2 back");
    c.wait("node2's mirror current again", || has("node2", "new") && !has("node2", "old"), || c.agent_log("node2"));
    // What the API server answered node2's agent once it could reach it: its watch resumed
    // from the revision it had (a watch answers 410 inside its stream: the audit log shows it
    // complete at once), then a list.
    let node2_nads = || -> Vec<Value> {
        c.agent_requests()
            .into_iter()
            .skip(mark)
            .filter(|e| {
                e["objectRef"]["resource"] == "network-attachment-definitions" && e["stage"] == "ResponseComplete"
            })
            .filter(|e| e["user"]["extra"]["authentication.kubernetes.io/node-name"][0] == "node2")
            .collect()
    };
    c.wait(
        "node2's watch and list in the audit log",
        || node2_nads().iter().any(|e| e["verb"] == "list"),
        || format!("{:#?}", node2_nads()),
    );
    let reqs = node2_nads();
    let resumed = reqs
        .iter()
        .position(|e| e["verb"] == "watch")
        .unwrap_or_else(|| panic!("no watch of node2's agent: {reqs:#?}"));
    let uri = reqs[resumed]["requestURI"].as_str().unwrap();
    let rv = uri.split("resourceVersion=").nth(1).unwrap().split('&').next().unwrap();
    // ... which is 410 Gone now (the same request, as the admin) ...
    let answer = c.ok(&[
        "get",
        "--raw",
        &format!(
            "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions?watch=true&resourceVersion={rv}&timeoutSeconds=5"
        ),
    ]);
    assert!(answer.contains("\"code\":410"), "a watch from revision {rv}: {answer}");
    // ... and then it listed again.
    assert!(reqs[resumed..].iter().any(|e| e["verb"] == "list"), "no relist after the 410: {reqs:#?}");
}

#[test]
fn the_agent_killed_the_kubelet_restarted_and_containerd_restarted_lose_nothing() {
    let Some(c) = Cluster::lock("the_agent_killed_the_kubelet_restarted_and_containerd_restarted_lose_nothing") else {
        return;
    };
    let ns = c.namespace("braid-restarts");
    let gate = Gate::new(&c, &ns.name, 115);
    c.apply(&pod(&ns.name, "running", "node1", Some("gated")));
    let running = wait_status(&c, &ns.name, "running", "node1");
    let inside = interfaces_inside(&c, &ns.name, "running");

    for (what, part) in
        [("the agent", None), ("the kubelet", Some("kubelet-node1")), ("containerd", Some("containerd-node1"))]
    {
        // A pod starting (held mid-ADD) while the part goes away and comes back.
        let name = format!("during-{}", part.unwrap_or("agent").split('-').next().unwrap());
        gate.close();
        c.apply(&pod(&ns.name, &name, "node1", Some("gated")));
        gate.wait_reached(&format!("{name}'s ADD at the gate"));
        match part {
            None => kill_agent(&c),
            Some(p) => {
                c.node_sh(&["restart", p]);
            }
        }
        gate.open();
        let st = wait_status(&c, &ns.name, &name, "node1");
        let inside_new = interfaces_inside(&c, &ns.name, &name);
        assert_eq!(inside_new.keys().cloned().collect::<Vec<_>>(), ["eth0", "net1"], "{what}: {inside_new:?}");
        status_matches_pod(&st, &inside_new);
        // The pod that ran all along keeps its interfaces and its status.
        assert_eq!(interfaces_inside(&c, &ns.name, "running"), inside, "after {what}");
        assert_eq!(c.network_status(&ns.name, "running").as_ref(), Some(&running), "after {what}");
        c.wait(
            "node1 Ready",
            || {
                c.get(&["node", "node1"])["status"]["conditions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x["type"] == "Ready" && x["status"] == "True")
            },
            || c.log("kubelet-node1"),
        );
    }
}

/// The Warning events of a pod, their messages joined.
fn pod_warnings(c: &Cluster, ns: &str, pod: &str) -> String {
    let ev = c.get(&["events", "-n", ns, "--field-selector", &format!("involvedObject.name={pod},type=Warning")]);
    ev["items"].as_array().unwrap().iter().filter_map(|e| e["message"].as_str()).collect::<Vec<_>>().join("\n")
}

#[test]
fn a_nad_changed_or_deleted_under_running_pods_changes_only_later_pods_and_their_del_still_releases_all() {
    let Some(c) = Cluster::lock(
        "a_nad_changed_or_deleted_under_running_pods_changes_only_later_pods_and_their_del_still_releases_all",
    ) else {
        return;
    };
    let ns = c.namespace("braid-nadlife");
    let mirrored = |f: &dyn Fn(&Value) -> bool| {
        c.wait(
            "the NAD's file on node1",
            || {
                c.read_on("node1", &format!("/etc/cni/braid.d/{}/net.conflist", ns.name))
                    .is_some_and(|t| f(&serde_json::from_str(&t).unwrap()))
            },
            || c.agent_log("node1"),
        );
    };
    c.apply(&nad(&ns.name, "net", Some(&bridge("net", "br-life", 116))));
    mirrored(&|v| v.to_string().contains("198.18.116.0/24"));
    c.apply(&pod(&ns.name, "before", "node1", Some("net")));
    c.wait_running(&ns.name, "before");
    let before = interfaces_inside(&c, &ns.name, "before");
    assert!(before["net1"].1.iter().any(|a| a.starts_with("198.18.116.")), "{before:?}");

    // Changed: the running pod keeps what it has; a new pod gets the new definition.
    c.apply(&nad(&ns.name, "net", Some(&bridge("net", "br-life", 117))));
    mirrored(&|v| v.to_string().contains("198.18.117.0/24"));
    c.apply(&pod(&ns.name, "after", "node1", Some("net")));
    c.wait_running(&ns.name, "after");
    assert!(interfaces_inside(&c, &ns.name, "after")["net1"].1.iter().any(|a| a.starts_with("198.18.117.")));
    assert_eq!(interfaces_inside(&c, &ns.name, "before"), before, "the running pod was touched");

    // Deleted: its file goes; a pod selecting it does not start, and says which network.
    c.ok(&["delete", "net-attach-def", "net", "-n", &ns.name]);
    c.wait(
        "the NAD's file removed on node1",
        || c.read_on("node1", &format!("/etc/cni/braid.d/{}/net.conflist", ns.name)).is_none(),
        || c.agent_log("node1"),
    );
    c.apply(&pod(&ns.name, "orphan", "node1", Some("net")));
    c.wait(
        "the orphan's sandbox failure",
        || {
            pod_warnings(&c, &ns.name, "orphan").contains("FailedCreatePodSandBox")
                || pod_warnings(&c, &ns.name, "orphan").contains(&format!("{}/net", ns.name))
        },
        || pod_warnings(&c, &ns.name, "orphan"),
    );
    let said = pod_warnings(&c, &ns.name, "orphan");
    assert!(said.contains(&format!("{}/net", ns.name)), "the event names the network: {said}");
    assert_eq!(c.get(&["pod", "orphan", "-n", &ns.name])["status"]["phase"], "Pending");
    // The running pods still have their interfaces, and their DEL (from braid's recorded
    // state, not the deleted NAD) releases every address of both versions.
    assert_eq!(interfaces_inside(&c, &ns.name, "before"), before);
    c.ok(&["delete", "pod", "before", "after", "orphan", "-n", &ns.name, "--wait=true"]);
    c.wait(
        "both pods' addresses released",
        || c.files_on("node1", "/var/lib/cni/networks/net").iter().all(|f| !f.starts_with("198.")),
        || format!("{:?}", c.files_on("node1", "/var/lib/cni/networks/net")),
    );
}

#[test]
fn with_two_nodes_each_agent_publishes_only_its_own_pods_and_mirrors_every_nad() {
    let Some(c) = Cluster::lock("with_two_nodes_each_agent_publishes_only_its_own_pods_and_mirrors_every_nad") else {
        return;
    };
    assert!(c.nodes() >= 2, "needs two nodes");
    let ns = c.namespace("braid-two");
    let mark = c.agent_requests().len();
    c.apply(&nad(&ns.name, "shared", Some(&bridge("shared", "br-shared", 118))));
    for n in 1..=2 {
        wait_mirrored(&c, &format!("node{n}"), &format!("{}/shared", ns.name));
    }
    for n in 1..=2 {
        c.apply(&pod(&ns.name, &format!("on-{n}"), &format!("node{n}"), Some("shared")));
    }
    for n in 1..=2 {
        let name = format!("on-{n}");
        let st = wait_status(&c, &ns.name, &name, &format!("node{n}"));
        c.wait_running(&ns.name, &name);
        status_matches_pod(&st, &interfaces_inside(&c, &ns.name, &name));
        // The pod's attachment came from its own node: the status file is on that node only.
        assert_eq!(status_files(&c, &format!("node{n}"), &ns.name, &name).len(), 1);
        assert_eq!(status_files(&c, &format!("node{}", 3 - n), &ns.name, &name).len(), 0);
    }
    // Every patch of a pod by braid's agents came from the agent of the pod's node (the token's
    // node name) — none was refused.
    let patches: Vec<Value> = c
        .agent_requests()
        .into_iter()
        .skip(mark)
        .filter(|e| {
            e["verb"] == "patch"
                && e["objectRef"]["resource"] == "pods"
                && e["objectRef"]["namespace"] == ns.name.as_str()
        })
        .filter(|e| e["stage"] == "ResponseComplete")
        .collect();
    for n in 1..=2 {
        let mine: Vec<&Value> =
            patches.iter().filter(|e| e["objectRef"]["name"] == format!("on-{n}").as_str()).collect();
        assert!(!mine.is_empty(), "no patch of on-{n}: {patches:#?}");
        for e in mine {
            assert_eq!(
                e["user"]["extra"]["authentication.kubernetes.io/node-name"][0],
                format!("node{n}").as_str(),
                "{e:#}"
            );
            assert_eq!(e["responseStatus"]["code"], 200, "{e:#}");
        }
    }
}

/// A metric of braid's agent on a node (`/metrics` on 127.0.0.1:9464 there), summed over labels.
fn agent_metric(c: &Cluster, node: &str, name: &str) -> f64 {
    let out = c.on_node(node, "curl", &["-sf", "http://127.0.0.1:9464/metrics"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn the_agent_sends_one_patch_and_an_event_per_interface_per_pod_start_and_no_request_at_rest() {
    let Some(c) =
        Cluster::lock("the_agent_sends_one_patch_and_an_event_per_interface_per_pod_start_and_no_request_at_rest")
    else {
        return;
    };
    // A short safety-net period (--status-rescan 2), so that several pass in the test; the
    // DaemonSet as shipped afterwards.
    let ds = c.get(&["daemonset", "braid-install", "-n", "kube-system"]);
    let args = ds["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    let set_args = |a: &Value| {
        let patch = json!([{"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": a}]);
        c.ok(&["patch", "daemonset", "braid-install", "-n", "kube-system", "--type=json", "-p", &patch.to_string()]);
        c.ok(&["rollout", "status", "daemonset/braid-install", "-n", "kube-system", "--timeout=240s"]);
    };
    let mut short = args.clone();
    short.as_array_mut().unwrap().extend([json!("--status-rescan"), json!("2")]);
    set_args(&short);
    let _restore = Defer(|| set_args(&args));

    let ns = c.namespace("braid-count");
    let mark = c.agent_requests().len();
    for i in 0..3 {
        c.apply(&pod(&ns.name, &format!("p{i}"), "node1", Some("default/isolated")));
    }
    for i in 0..3 {
        wait_status(&c, &ns.name, &format!("p{i}"), "node1");
    }
    // Let the rescans run over the published files, then count.
    let rescans = agent_metric(&c, "node1", "braid_install_status_rescans_total");
    c.wait(
        "two rescans",
        || agent_metric(&c, "node1", "braid_install_status_rescans_total") >= rescans + 2.0,
        || c.agent_log("node1"),
    );
    // (Only this test's pods: a restarted agent also publishes what else is on the node once.)
    // Per pod start: the network-status patch, then one AddedInterface Event per interface
    // (eth0 and net1 here), sent after it; nothing else (3 pods may interleave: counted).
    let ours = format!(" in {}", ns.name);
    let mut started: Vec<String> = c.requests_of("node1", mark).into_iter().filter(|r| r.ends_with(&ours)).collect();
    started.sort();
    let mut want = vec![format!("create events{ours}"); 6];
    want.extend(vec![format!("patch pods{ours}"); 3]);
    assert_eq!(started, want, "per pod start: one patch and an Event per interface, nothing else");
    report(&format!("requests of node1's agent for 3 pod starts: {:?}", c.requests_of("node1", mark)));

    // At rest: five more rescan periods with 3 published pods — no request at all.
    let rest = c.agent_requests().len();
    let rescans = agent_metric(&c, "node1", "braid_install_status_rescans_total");
    c.wait(
        "five rescans at rest",
        || agent_metric(&c, "node1", "braid_install_status_rescans_total") >= rescans + 5.0,
        || c.agent_log("node1"),
    );
    let at_rest: Vec<String> =
        c.requests_of("node1", rest).into_iter().filter(|r| r != "watch network-attachment-definitions").collect();
    assert_eq!(at_rest, Vec::<String>::new(), "node1's agent at rest");
}

/// Cuts node1's agent (and only it: the one client there that reaches the API server through
/// the kubernetes Service's address; the kubelet and kubectl use the server's own) off the API
/// server, both ways, until the guard drops.
fn cut_agent_off(c: &Cluster) -> Defer<impl FnMut() + '_> {
    let rules: [[&str; 7]; 2] = [
        ["OUTPUT", "-m", "conntrack", "--ctorigdst", "198.18.200.1", "-j", "DROP"],
        ["INPUT", "-m", "conntrack", "--ctorigdst", "198.18.200.1", "-j", "DROP"],
    ];
    let iptables = move |op: &str| {
        rules.iter().all(|r| {
            let mut a = vec![op];
            a.extend_from_slice(r);
            c.on_node("node1", "iptables", &a).status.success()
        })
    };
    assert!(iptables("-I"), "cutting node1's agent off");
    Defer(move || {
        iptables("-D");
    })
}

#[test]
fn a_pod_recreated_under_the_same_name_never_gets_the_old_sandbox_status() {
    let Some(c) = Cluster::lock("a_pod_recreated_under_the_same_name_never_gets_the_old_sandbox_status") else {
        return;
    };
    let ns = c.namespace("braid-recreate");
    // The review's case: the agent's patch of a pod's status is late (here: node1's agent
    // cannot reach the API server), and meanwhile the pod is force-deleted and recreated under
    // the same name on the same node, its old sandbox still there (node1's kubelet stopped).
    let cut = cut_agent_off(&c);
    c.apply(&pod(&ns.name, "db-0", "node1", Some("default/isolated")));
    c.wait("db-0's ADD", || status_files(&c, "node1", &ns.name, "db-0").len() == 1, || c.log("kubelet-node1"));
    let old_uid = c.get(&["pod", "db-0", "-n", &ns.name])["metadata"]["uid"].as_str().unwrap().to_string();
    c.node_sh(&["stop", "kubelet-node1"]);
    let _kubelet = Defer(|| {
        c.node_sh(&["start", "kubelet-node1"]);
    });
    c.ok(&["delete", "pod", "db-0", "-n", &ns.name, "--grace-period=0", "--force"]);
    c.apply(&pod(&ns.name, "db-0", "node1", Some("default/isolated")));
    let new_uid = c.get(&["pod", "db-0", "-n", &ns.name])["metadata"]["uid"].as_str().unwrap().to_string();
    assert_ne!(old_uid, new_uid);
    let mark = c.agent_requests().len();
    drop(cut);
    // The agent's late patch names the old pod's UID: the API server refuses it (422 Invalid:
    // metadata.uid is immutable), and the new pod gets nothing of the old sandbox.
    let refused = || {
        c.agent_requests().into_iter().skip(mark).any(|e| {
            e["verb"] == "patch"
                && e["objectRef"]["name"] == "db-0"
                && e["stage"] == "ResponseComplete"
                && e["responseStatus"]["code"] == 422
        })
    };
    c.wait("the API server refusing the late patch", refused, || format!("{:#?}", c.requests_of("node1", mark)));
    assert_eq!(c.network_status(&ns.name, "db-0"), None, "the new pod got the old sandbox's status");
    // Once the kubelet is back the old sandbox goes, the new one comes: its own status.
    c.node_sh(&["start", "kubelet-node1"]);
    let new = wait_status(&c, &ns.name, "db-0", "node1");
    c.wait_running(&ns.name, "db-0");
    status_matches_pod(&new, &interfaces_inside(&c, &ns.name, "db-0"));
    c.wait(
        "only the new sandbox's file",
        || status_files(&c, "node1", &ns.name, "db-0").len() == 1,
        || c.log("kubelet-node1"),
    );
}

/// A labelled series of braid's agent on a node (`name{labels}`), if it is there.
fn agent_series(c: &Cluster, node: &str, series: &str) -> Option<f64> {
    let out = c.on_node(node, "curl", &["-sf", "http://127.0.0.1:9464/metrics"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[test]
fn a_broken_nad_gets_one_event_for_the_cluster_and_tenant_nads_never_mirror_node_files() {
    let Some(c) = Cluster::lock("a_broken_nad_gets_one_event_for_the_cluster_and_tenant_nads_never_mirror_node_files")
    else {
        return;
    };
    assert!(c.nodes() >= 2, "needs two nodes");
    let ns = c.namespace("braid-tenant");
    let refused =
        |n: usize| agent_series(&c, &format!("node{n}"), "braid_install_nads{state=\"refused\"}").unwrap_or(0.0);
    let before = [refused(1), refused(2)];
    // A NAD whose config is not JSON; and tenant NADs with an empty spec.config named after
    // the node's primary network (`cluster`, in /etc/cni/net.d) and after braid's own file.
    let broken = json!({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
                        "metadata": {"name": "broken", "namespace": ns.name}, "spec": {"config": "{not json"}});
    c.apply(&broken.to_string());
    c.apply(&nad(&ns.name, "cluster", None));
    c.apply(&nad(&ns.name, "braid", None));
    for n in 1..=2 {
        c.wait(
            &format!("node{n}'s agent refusing the three"),
            || refused(n) >= before[n - 1] + 3.0,
            || c.agent_log(&format!("node{n}")),
        );
    }
    for n in 1..=2 {
        let files = c.files_on(&format!("node{n}"), &format!("/etc/cni/braid.d/{}", ns.name));
        assert_eq!(files, Vec::<String>::new(), "node{n} mirrored a refused NAD");
    }
    // Two agents refused each NAD version: one Event each for the whole cluster.
    let events = c.get(&["events", "-n", &ns.name, "--field-selector", "reason=InvalidConfig"]);
    let mut by_nad: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in events["items"].as_array().unwrap() {
        by_nad
            .entry(e["involvedObject"]["name"].as_str().unwrap().to_string())
            .or_default()
            .push(e["message"].as_str().unwrap_or("").to_string());
    }
    assert_eq!(by_nad.keys().cloned().collect::<Vec<_>>(), ["braid", "broken", "cluster"], "{events:#}");
    for (nad, messages) in &by_nad {
        assert_eq!(messages.len(), 1, "{nad}: {messages:?}");
        assert_eq!(
            c.get(&["events", "-n", &ns.name, "--field-selector", &format!("involvedObject.name={nad}")])["items"][0]
                ["count"],
            1
        );
    }
    let events_of = |nad: &str| {
        let sel = format!("involvedObject.name={nad},reason=InvalidConfig");
        c.get(&["events", "-n", &ns.name, "--field-selector", &sel])["items"].as_array().unwrap().len()
    };
    // A restarted agent reports nothing again; a new broken version gets one Event more, for
    // both agents.
    kill_agent(&c);
    c.wait(
        "the restarted agent's first list",
        || agent_series(&c, "node1", "braid_install_ready") == Some(1.0),
        || c.agent_log("node1"),
    );
    assert_eq!(events_of("broken"), 1, "reported again after a restart");
    let before = [refused(1), refused(2)];
    let mut broken2 = broken.clone();
    broken2["spec"]["config"] = json!("{still not json");
    c.apply(&broken2.to_string());
    c.wait("one Event for the new version", || events_of("broken") == 2, || c.agent_log("node1"));
    let log_of = |n: usize| c.agent_log(&format!("node{n}"));
    for n in 1..=2 {
        c.wait(
            &format!("node{n}'s agent refusing the new version"),
            || log_of(n).matches("broken").count() >= 2,
            || log_of(n),
        );
    }
    assert_eq!(events_of("broken"), 2, "{:?}", before);
}

/// SIGKILLs braid's agent on node1 (only node1's: the one in its network namespace, as its
/// kubelet is) and waits until the kubelet has started it again.
fn kill_agent(c: &Cluster) {
    let (pod_name, _) = c.agent_pod("node1");
    let restarts = || {
        c.get(&["pod", &pod_name, "-n", "kube-system"])["status"]["containerStatuses"][0]["restartCount"]
            .as_u64()
            .unwrap_or(0)
    };
    let r0 = restarts();
    let kubelet = std::fs::read_to_string(c.dir().join("pids/kubelet-node1")).unwrap();
    let out = c.on_node("node1", "pkill", &["-KILL", "-x", "braid-install", "--ns", kubelet.trim(), "--nslist", "net"]);
    assert!(out.status.success(), "no braid-install process on node1: {out:?}");
    c.wait("the kubelet restarting the agent", || restarts() > r0, || c.log("kubelet-node1"));
}

#[test]
fn a_nad_wins_over_the_configmap_and_an_agent_restarted_without_the_api_keeps_every_file_until_its_first_list() {
    let Some(c) = Cluster::lock(
        "a_nad_wins_over_the_configmap_and_an_agent_restarted_without_the_api_keeps_every_file_until_its_first_list",
    ) else {
        return;
    };
    let ns = c.namespace("braid-restart");
    let file = |rel: &str| {
        c.read_on("node1", &format!("/etc/cni/braid.d/{rel}")).map(|t| serde_json::from_str::<Value>(&t).unwrap())
    };
    let subnet = |v: &Value| v["plugins"][0]["ipam"]["ranges"][0][0]["subnet"].as_str().map(str::to_string);
    let wait_subnet = |rel: &str, want: Option<&str>| {
        c.wait(
            &format!("{rel} with subnet {want:?}"),
            || file(rel).map(|v| subnet(&v)) == want.map(|w| Some(w.to_string())),
            || c.agent_log("node1"),
        );
    };
    // The ConfigMap defines default/isolated (198.18.100.0/24); a NAD of the same name wins.
    wait_subnet("default/isolated.conflist", Some("198.18.100.0/24"));
    c.apply(&nad("default", "isolated", Some(&bridge("isolated", "braid-iso0", 119))));
    let _nad = Defer(|| {
        let _ = c.kubectl(&["delete", "net-attach-def", "isolated", "-n", "default", "--ignore-not-found"]);
    });
    wait_subnet("default/isolated.conflist", Some("198.18.119.0/24"));
    c.apply(&nad(&ns.name, "kept", Some(&bridge("kept", "br-kept", 121))));
    c.apply(&nad(&ns.name, "gone", Some(&bridge("gone", "br-gone", 122))));
    wait_subnet(&format!("{}/gone.conflist", ns.name), Some("198.18.122.0/24"));
    let by_hand = format!("/etc/cni/braid.d/{}/by-hand.conflist", ns.name);
    c.write_on("node1", &by_hand, &bridge("by-hand", "br-hand", 123).to_string());

    // node1's agent cut off the API server; meanwhile a NAD goes; the agent is killed and
    // comes back without the API: its first pass (ConfigMap included) changes nothing.
    let cut = cut_agent_off(&c);
    c.ok(&["delete", "net-attach-def", "gone", "-n", &ns.name]);
    kill_agent(&c);
    let passes = |c: &Cluster| agent_series(c, "node1", "braid_install_ready").is_some();
    c.wait("the restarted agent serving its metrics", || passes(&c), || c.agent_log("node1"));
    assert_eq!(agent_series(&c, "node1", "braid_install_ready"), Some(0.0), "ready before its first NAD list");
    assert_eq!(
        file("default/isolated.conflist").and_then(|v| subnet(&v)).as_deref(),
        Some("198.18.119.0/24"),
        "the ConfigMap's first pass overwrote the NAD's file"
    );
    assert!(file(&format!("{}/gone.conflist", ns.name)).is_some(), "removed before a full list");
    // Back: the first full list removes what no NAD backs, never the file put there by hand.
    drop(cut);
    wait_subnet(&format!("{}/gone.conflist", ns.name), None);
    assert!(file(&format!("{}/kept.conflist", ns.name)).is_some());
    assert!(c.read_on("node1", &by_hand).is_some(), "a file put there by hand was removed");
    c.wait("ready", || agent_series(&c, "node1", "braid_install_ready") == Some(1.0), || c.agent_log("node1"));
    // The NAD goes: the ConfigMap's definition takes its place again.
    c.ok(&["delete", "net-attach-def", "isolated", "-n", "default"]);
    wait_subnet("default/isolated.conflist", Some("198.18.100.0/24"));
    let _ = c.on_node("node1", "rm", &["-f", &by_hand]);
}

/// The sandbox (container ID) whose status file `ns/pod` has on node1.
fn sandbox_of(c: &Cluster, ns: &str, pod: &str) -> String {
    let files = status_files(c, "node1", ns, pod);
    files[0].trim_end_matches(".json").rsplit('_').next().unwrap().to_string()
}

/// Waits for containerd's CNI DEL of `sandbox` on node1, then checks that nothing of it is
/// left: no reservation of `nets`, no state file.
fn assert_torn_down(c: &Cluster, sandbox: &str, nets: &[&str]) {
    c.wait(
        "the runtime's DEL of the pod",
        || {
            c.log_all("containerd-node1")
                .contains(&format!("TearDown network for sandbox \\\"{sandbox}\\\" successfully"))
        },
        || c.log("containerd-node1"),
    );
    for net in nets {
        let left: Vec<String> = c
            .files_on("node1", &format!("/var/lib/cni/networks/{net}"))
            .into_iter()
            .filter(|f| f.starts_with("198."))
            .collect();
        assert_eq!(left, Vec::<String>::new(), "{net} reservations left");
    }
    assert!(c.files_on("node1", "/var/lib/cni/braid").iter().all(|f| !f.contains(sandbox)));
}

/// Sets the pod's networks annotation (`kubectl annotate … --overwrite`).
fn annotate(c: &Cluster, ns: &str, pod: &str, networks: &str) {
    c.ok(&["annotate", "pod", pod, "-n", ns, "--overwrite", &format!("k8s.v1.cni.cncf.io/networks={networks}")]);
}

/// Waits until the pod's network-status names exactly these networks by interface, and checks it
/// against what `ip` shows inside the pod; returns the interfaces inside.
fn wait_networks(c: &Cluster, ns: &str, pod: &str, want: &[(&str, &str)]) -> BTreeMap<String, (String, Vec<String>)> {
    let want = wait_status_networks(c, ns, pod, want);
    let inside = interfaces_inside(c, ns, pod);
    let st = c.network_status(ns, pod).unwrap();
    assert_eq!(status_matches_pod(&st, &inside), want);
    assert_eq!(inside.keys().cloned().collect::<Vec<_>>(), want.keys().cloned().collect::<Vec<_>>(), "{inside:?}");
    inside
}

/// Waits until the pod's network-status names exactly these networks by interface — only that:
/// while a failed update is being retried, what is inside the pod changes under each retry.
fn wait_status_networks(c: &Cluster, ns: &str, pod: &str, want: &[(&str, &str)]) -> BTreeMap<String, String> {
    let want: BTreeMap<String, String> = want.iter().map(|(i, n)| (i.to_string(), n.to_string())).collect();
    let names = |st: &Value| -> BTreeMap<String, String> {
        st.as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        (
                            e["interface"].as_str().unwrap_or("").to_string(),
                            e["name"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    c.wait(
        &format!("network-status of {ns}/{pod} = {want:?}"),
        || c.network_status(ns, pod).is_some_and(|st| names(&st) == want),
        || format!("{:?}\n{}", c.network_status(ns, pod), c.agent_log("node1")),
    );
    want
}

#[test]
fn networks_added_removed_and_changed_on_a_running_pod_follow_its_annotation() {
    let Some(c) = Cluster::lock("networks_added_removed_and_changed_on_a_running_pod_follow_its_annotation") else {
        return;
    };
    let _layout = c.hotplug_layout();
    let ns = c.namespace("braid-hot");
    // What the layout grants: reading pods besides the API layout's grants, and the admission
    // policy still holds the agent's token (from its new pod) to the network-status annotation.
    let list = c.ok(&["auth", "can-i", "--list", "--as=system:serviceaccount:kube-system:braid"]);
    let pods: Vec<&str> = list.lines().filter(|l| l.starts_with("pods ")).collect();
    let pods: Vec<String> = pods.iter().map(|l| grant(l)).collect();
    assert_eq!(pods, ["pods [] [] [get list patch watch]"], "{list}");
    c.apply(&pod("braid-hot", "other", "node1", None));
    c.wait_running("braid-hot", "other");
    let label = json!({"metadata": {"labels": {"x": "y"}}}).to_string();
    let (ok, said) = c
        .as_token(&c.agent_token("node1"), &["patch", "pod", "other", "-n", "braid-hot", "--type=merge", "-p", &label]);
    assert!(!ok && said.contains("ValidatingAdmissionPolicy 'braid-node-agent'"), "{said}");
    c.apply(&nad("braid-hot", "red", Some(&bridge("red", "br-red", 81))));
    c.apply(&nad("braid-hot", "blue", Some(&bridge("blue", "br-blue", 82))));
    wait_mirrored(&c, "node1", "braid-hot/red");
    wait_mirrored(&c, "node1", "braid-hot/blue");
    c.apply(&pod("braid-hot", "vm", "node1", Some("red")));
    wait_status(&c, "braid-hot", "vm", "node1");
    let start = wait_networks(&c, "braid-hot", "vm", &[("eth0", "cluster"), ("net1", "braid-hot/red")]);

    // Added: net2 appears, net1 and eth0 are untouched (same MAC and addresses).
    let mark = c.agent_requests().len();
    let edited = Instant::now();
    annotate(&c, "braid-hot", "vm", "red,blue");
    let added = wait_networks(
        &c,
        "braid-hot",
        "vm",
        &[("eth0", "cluster"), ("net1", "braid-hot/red"), ("net2", "braid-hot/blue")],
    );
    report(&format!("annotation edit to network-status with the added network: {:.2?}", edited.elapsed()));
    assert_eq!(added["eth0"], start["eth0"]);
    assert_eq!(added["net1"], start["net1"]);
    assert!(added["net2"].1.iter().all(|a| a.starts_with("198.18.82.")), "{added:?}");
    assert_eq!(c.files_on("node1", "/var/lib/cni/networks/blue").iter().filter(|f| f.starts_with("198.")).count(), 1);
    // The added interface gets its AddedInterface Event (after the patch); eth0 and net1,
    // announced at the pod's start, get none again.
    let net2 = added["net2"].1[0].clone();
    let announced = || -> Vec<String> {
        let ev =
            c.get(&["events", "-n", "braid-hot", "--field-selector", "involvedObject.name=vm,reason=AddedInterface"]);
        ev["items"].as_array().unwrap().iter().filter_map(|e| e["message"].as_str().map(str::to_string)).collect()
    };
    let want = format!("Add net2 [{net2}] from braid-hot/blue");
    c.wait("the AddedInterface Event of net2", || announced().contains(&want), || c.agent_log("node1"));
    assert_eq!(announced().len(), 3, "eth0 and net1 at the start, net2 now: {:?}", announced());
    // What the hot-plug cost in API requests: the one network-status patch, as a pod start, and
    // the Event of the one interface it added.
    let ours: Vec<String> = c.requests_of("node1", mark).into_iter().filter(|r| r.ends_with(" in braid-hot")).collect();
    assert_eq!(ours, ["patch pods in braid-hot", "create events in braid-hot"], "node1's agent for one hot-plug");

    // Removed: net1 goes, its address is released; the others stay as they were.
    annotate(&c, "braid-hot", "vm", "blue");
    let removed = wait_networks(&c, "braid-hot", "vm", &[("eth0", "cluster"), ("net2", "braid-hot/blue")]);
    assert_eq!(removed["net2"], added["net2"]);
    assert_eq!(c.files_on("node1", "/var/lib/cni/networks/red").iter().filter(|f| f.starts_with("198.")).count(), 0);

    // Changed: the same network asked on another interface is detached and attached again there.
    annotate(&c, "braid-hot", "vm", "blue@blue0");
    wait_networks(&c, "braid-hot", "vm", &[("eth0", "cluster"), ("blue0", "braid-hot/blue")]);

    // A network that cannot be attached: an Event names it, and nothing changes.
    annotate(&c, "braid-hot", "vm", "blue@blue0,absent");
    c.wait(
        "the NetworkUpdateFailed event",
        || pod_warnings(&c, "braid-hot", "vm").contains("braid-hot/absent"),
        || c.agent_log("node1"),
    );
    let warnings = pod_warnings(&c, "braid-hot", "vm");
    assert!(warnings.contains("could not be carried out on node node1"), "{warnings}");
    wait_networks(&c, "braid-hot", "vm", &[("eth0", "cluster"), ("blue0", "braid-hot/blue")]);

    // Everything selected removed, then the pod deleted: nothing of it is left on the node.
    annotate(&c, "braid-hot", "vm", "red");
    wait_networks(&c, "braid-hot", "vm", &[("eth0", "cluster"), ("net1", "braid-hot/red")]);
    let sandbox = sandbox_of(&c, "braid-hot", "vm");
    drop(ns);
    assert_torn_down(&c, &sandbox, &["red", "blue"]);
    assert!(c.files_on("node1", "/run/braid/network-status").iter().all(|f| !f.contains("braid-hot")));
}

#[test]
fn a_hot_plug_survives_the_agent_killed_the_api_cut_off_and_the_pods_deletion() {
    let Some(c) = Cluster::lock("a_hot_plug_survives_the_agent_killed_the_api_cut_off_and_the_pods_deletion") else {
        return;
    };
    let _layout = c.hotplug_layout();
    let ns = c.namespace("braid-hot2");
    c.apply(&nad("braid-hot2", "red", Some(&bridge("red", "br-red2", 83))));
    c.apply(&nad("braid-hot2", "blue", Some(&bridge("blue", "br-blue2", 84))));
    wait_mirrored(&c, "node1", "braid-hot2/red");
    wait_mirrored(&c, "node1", "braid-hot2/blue");
    c.apply(&pod("braid-hot2", "a", "node1", None));
    wait_status(&c, "braid-hot2", "a", "node1");

    // Edited while node1's agent cannot reach the API server: carried out once it can.
    {
        let _cut = cut_agent_off(&c);
        annotate(&c, "braid-hot2", "a", "red");
    }
    wait_networks(&c, "braid-hot2", "a", &[("eth0", "cluster"), ("net1", "braid-hot2/red")]);

    // Edited while the agent is down (SIGKILLed; the kubelet restarts it): carried out after.
    kill_agent(&c);
    annotate(&c, "braid-hot2", "a", "red,blue");
    wait_networks(
        &c,
        "braid-hot2",
        "a",
        &[("eth0", "cluster"), ("net1", "braid-hot2/red"), ("net2", "braid-hot2/blue")],
    );

    // The agent killed mid-change: its update held inside a network's ADD (at a gate), the agent
    // SIGKILLed (the kubelet restarts it), the gate opened — the pod ends as its annotation asks,
    // whether the killed update finished or the restarted agent's took over.
    let gate = Gate::new(&c, "braid-hot2", 85);
    gate.close();
    annotate(&c, "braid-hot2", "a", "red,blue,gated");
    gate.wait_reached("the update held in the gated network's ADD");
    kill_agent(&c);
    gate.open();
    wait_networks(
        &c,
        "braid-hot2",
        "a",
        &[("eth0", "cluster"), ("net1", "braid-hot2/red"), ("net2", "braid-hot2/blue"), ("net3", "braid-hot2/gated")],
    );

    // Edited and deleted at once: whichever of the update and the pod's DEL comes first, nothing
    // of either network is left.
    let sandbox = sandbox_of(&c, "braid-hot2", "a");
    annotate(&c, "braid-hot2", "a", "blue");
    c.ok(&["delete", "pod", "a", "-n", "braid-hot2", "--wait=false"]);
    // The update and the DEL take the same locks: the DEL, last, removed what either made.
    assert_torn_down(&c, &sandbox, &["red", "blue", "gated"]);
    drop(gate);
    drop(ns);
}

/// The pod's default routes as `ip` inside it shows them: "dev via" per route.
fn default_routes_inside(c: &Cluster, ns: &str, pod: &str) -> Vec<String> {
    let out = c.ok(&["exec", "-n", ns, pod, "--", "ip", "-4", "route", "show", "default"]);
    let mut v: Vec<String> = out
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let after = |k: &str| w.iter().position(|x| *x == k).and_then(|i| w.get(i + 1)).copied().unwrap_or("");
            format!("{} {}", after("dev"), after("via"))
        })
        .collect();
    v.sort();
    v
}

/// What a user meets after a failed edit: `kubectl annotate` swaps red for blue and a network
/// whose ADD fails (code 11). Red is removed, blue rolled back, the Event names the failure —
/// and reverting the annotation brings red back (the sandbox's file says the update failed
/// part-way, so the revert is not taken for done). Then the network that took the default
/// route (`default-route`) is removed: the cluster network's default route is back inside the pod.
#[test]
fn a_failed_edit_reverted_brings_back_what_it_removed_and_a_removed_default_route_network_restores_the_route() {
    let Some(c) = Cluster::lock(
        "a_failed_edit_reverted_brings_back_what_it_removed_and_a_removed_default_route_network_restores_the_route",
    ) else {
        return;
    };
    let _layout = c.hotplug_layout();
    install_fault_plugin(&c);
    let ns = c.namespace("braid-hot3");
    c.apply(&nad("braid-hot3", "red", Some(&bridge("red", "br-red3", 86))));
    c.apply(&nad("braid-hot3", "blue", Some(&bridge("blue", "br-blue3", 87))));
    let failing = json!({"cniVersion": "1.0.0", "name": "failing", "plugins": [
        {"type": "braid-fault", "fail": {"command": "ADD", "code": 11, "msg": "no room on this node"}}
    ]});
    c.apply(&nad("braid-hot3", "failing", Some(&failing)));
    for n in ["red", "blue", "failing"] {
        wait_mirrored(&c, "node1", &format!("braid-hot3/{n}"));
    }
    c.apply(&pod("braid-hot3", "p", "node1", Some("red")));
    wait_status(&c, "braid-hot3", "p", "node1");
    wait_networks(&c, "braid-hot3", "p", &[("eth0", "cluster"), ("net1", "braid-hot3/red")]);
    let cluster_route = default_routes_inside(&c, "braid-hot3", "p");
    assert!(cluster_route.len() == 1 && cluster_route[0].starts_with("eth0 "), "{cluster_route:?}");

    annotate(&c, "braid-hot3", "p", "blue,failing");
    c.wait(
        "the NetworkUpdateFailed event",
        || pod_warnings(&c, "braid-hot3", "p").contains("no room on this node"),
        || c.agent_log("node1"),
    );
    // network-status shows what stays attached: red removed. The agent retries the failed
    // update with backoff (1 s, 2 s, …), each retry attaching blue and rolling it back, so what
    // is inside the pod is compared only once the pod's annotation settles again.
    wait_status_networks(&c, "braid-hot3", "p", &[("eth0", "cluster")]);
    // Reverted: red is back, and every retry's blue was rolled back (its address released).
    annotate(&c, "braid-hot3", "p", "red");
    wait_networks(&c, "braid-hot3", "p", &[("eth0", "cluster"), ("net1", "braid-hot3/red")]);
    assert_eq!(c.files_on("node1", "/var/lib/cni/networks/blue").iter().filter(|f| f.starts_with("198.")).count(), 0);

    // red takes the default route, then is removed: the cluster network's route comes back.
    annotate(&c, "braid-hot3", "p", r#"[{"name": "red", "default-route": ["198.18.86.1"]}]"#);
    // The route is set inside the ADD; network-status is published after the update ends, by
    // the agent's own loop: wait for both, never assume the second follows the first at once.
    let routed =
        |st: &Value| st.as_array().is_some_and(|a| a.iter().any(|e| e["default-route"] == json!(["198.18.86.1"])));
    c.wait(
        "the default route via red, inside the pod and in network-status",
        || {
            default_routes_inside(&c, "braid-hot3", "p") == ["net1 198.18.86.1"]
                && c.network_status("braid-hot3", "p").is_some_and(|st| routed(&st))
        },
        || format!("{:?}\n{}", c.network_status("braid-hot3", "p"), c.agent_log("node1")),
    );
    annotate(&c, "braid-hot3", "p", "");
    wait_networks(&c, "braid-hot3", "p", &[("eth0", "cluster")]);
    assert_eq!(default_routes_inside(&c, "braid-hot3", "p"), cluster_route, "the replaced route is back");
    let st = c.network_status("braid-hot3", "p").unwrap();
    assert!(st.as_array().unwrap().iter().all(|e| e.get("default-route").is_none()), "{st}");
    let sandbox = sandbox_of(&c, "braid-hot3", "p");
    drop(ns);
    assert_torn_down(&c, &sandbox, &["red", "blue"]);
}

/// The agent stopped (its pod deleted: the kubelet's SIGTERM, as a rollout does) while an
/// update is inside a network's ADD: the agent waits for it instead of exiting — which would
/// have the runc shim kill the update and its delegate mid-call — and the pod ends as its
/// annotation asks, the delegate called once (no ADD cut off and redone), one address held.
#[test]
fn an_agent_stopped_mid_update_lets_the_update_finish_and_nothing_is_cut_off() {
    let Some(c) = Cluster::lock("an_agent_stopped_mid_update_lets_the_update_finish_and_nothing_is_cut_off") else {
        return;
    };
    let _layout = c.hotplug_layout();
    let ns = c.namespace("braid-hot4");
    c.apply(&nad("braid-hot4", "red", Some(&bridge("red", "br-red4", 88))));
    wait_mirrored(&c, "node1", "braid-hot4/red");
    c.apply(&pod("braid-hot4", "s", "node1", None));
    wait_status(&c, "braid-hot4", "s", "node1");
    let gate = Gate::new(&c, "braid-hot4", 89);
    gate.close();
    annotate(&c, "braid-hot4", "s", "red,gated");
    gate.wait_reached("the update held in the gated network's ADD");
    let (agent, _) = c.agent_pod("node1");
    c.ok(&["delete", "pod", &agent, "-n", "kube-system", "--wait=false"]);
    c.wait(
        "the stopping agent waiting for its update",
        || {
            let out = c.kubectl(&["logs", "-n", "kube-system", &agent, "--tail=40"]);
            String::from_utf8_lossy(&out.stdout).contains("waiting for 1 running update(s) to finish")
        },
        || c.agent_log("node1"),
    );
    gate.open();
    wait_networks(
        &c,
        "braid-hot4",
        "s",
        &[("eth0", "cluster"), ("net1", "braid-hot4/red"), ("net2", "braid-hot4/gated")],
    );
    let calls = c.read_on("node1", &gate.calls).unwrap_or_default();
    let commands: Vec<&str> =
        calls.lines().filter_map(|l| l.split("\"command\":\"").nth(1)?.split('"').next()).collect();
    assert_eq!(commands, ["ADD"], "the gated network's delegate called once, never cut off: {calls}");
    let held = |net: &str| {
        c.files_on("node1", &format!("/var/lib/cni/networks/{net}")).iter().filter(|f| f.starts_with("198.")).count()
    };
    assert_eq!((held("red"), held("gated")), (1, 1));
    let sandbox = sandbox_of(&c, "braid-hot4", "s");
    drop(gate);
    drop(ns);
    assert_torn_down(&c, &sandbox, &["red", "gated"]);
}

/// Tenants' pods on the node carrying large annotations (200 KiB each) and environment values
/// (1 MiB each): the hot-plug agent, restarted, lists them all at once — it watches metadata
/// only and keeps one annotation per pod, so it stays within its memory limit (64 MiB) instead
/// of being OOM-killed into a crash loop, and an ordinary pod started afterwards gets its
/// network-status.
#[test]
fn an_annotation_flood_on_the_nodes_pods_does_not_take_the_restarted_hot_plug_agent_down() {
    let Some(c) =
        Cluster::lock("an_annotation_flood_on_the_nodes_pods_does_not_take_the_restarted_hot_plug_agent_down")
    else {
        return;
    };
    let _layout = c.hotplug_layout();
    let ns = c.namespace("braid-flood");
    const PODS: usize = 40;
    let fill = "x".repeat(200 * 1024);
    let env = "y".repeat(1024 * 1024);
    for i in 0..PODS {
        let mut p: Value = serde_json::from_str(&pod("braid-flood", &format!("f{i}"), "node1", None)).unwrap();
        p["metadata"]["annotations"]["flood.example.com/fill"] = json!(fill);
        p["spec"]["containers"][0]["env"] = json!([{"name": "FILL", "value": env}]);
        // `create`, not `apply`: apply would copy the whole object into an annotation.
        let out = c.kubectl_in(&["create", "-f", "-"], Some(&p.to_string()));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let (agent, _) = c.agent_pod("node1");
    let restarts = || {
        c.get(&["pod", &agent, "-n", "kube-system"])["status"]["containerStatuses"][0]["restartCount"]
            .as_u64()
            .unwrap_or(0)
    };
    let r0 = restarts();
    kill_agent(&c);
    c.apply(&pod("braid-flood", "plain", "node1", None));
    wait_status(&c, "braid-flood", "plain", "node1");
    let st = c.get(&["pod", &agent, "-n", "kube-system"]);
    let cs = &st["status"]["containerStatuses"][0];
    assert_eq!(restarts(), r0 + 1, "restarted once (the kill), never by itself: {cs}");
    assert_eq!(cs["ready"], true, "{cs}");
    assert!(c.agent_log("node1").contains("watching the pods of node node1"), "{}", c.agent_log("node1"));

    // A relist of the same pods: node1's agent cut off the API server while the cluster goes
    // on writing (the kubelets' leases), etcd compacted past its last revision and the API
    // server restarted, so that its resumed watch answers 410 Gone and it lists the node's
    // pods again — all 40, at once, as at its start.
    let mark = c.agent_requests().len();
    {
        let _cut = cut_agent_off(&c);
        c.apply(&pod("braid-flood", "elsewhere", "node2", None));
        c.node_sh(&["compact"]);
        c.node_sh(&["restart", "kube-apiserver"]);
        c.wait(
            "the API server back",
            || c.kubectl(&["get", "--raw", "/readyz"]).status.success(),
            || c.log("kube-apiserver"),
        );
    }
    // The agent's pod watch may have outlived the cut half-open: the old API server's FIN was
    // dropped, and once its orphaned socket gave up, nothing tells node1 the connection is dead
    // (a watch sends nothing). The agent's read timeout ends such a connection (300 s,
    // `kube::Config::read_timeout`, braid-install/src/api/mod.rs `client`), then the watcher
    // resumes from its old resourceVersion and gets 410 Gone: the bound covers that timeout
    // and the watcher's backoff. (Seen on a fresh machine's run: the NAD watch relisted at
    // once, the pod watch not within the 240 s guard.)
    c.wait_up_to(
        std::time::Duration::from_secs(360),
        "node1's agent listing the node's pods again",
        || c.requests_of("node1", mark).iter().any(|r| r == "list pods"),
        || format!("{:?}\n{}", c.requests_of("node1", mark), c.agent_log("node1")),
    );
    c.apply(&pod("braid-flood", "plain2", "node1", None));
    wait_status(&c, "braid-flood", "plain2", "node1");
    let st = c.get(&["pod", &agent, "-n", "kube-system"]);
    let cs = &st["status"]["containerStatuses"][0];
    assert_eq!(restarts(), r0 + 1, "the relist restarted nothing: {cs}");
    assert_eq!(cs["ready"], true, "{cs}");
    drop(ns);
}

/// A static pod (a manifest in node1's `staticPodPath`): its sandbox's ADD carries the kubelet's
/// hash of the manifest as `K8S_POD_UID`, not the mirror pod's UID, and the agent publishes its
/// network-status on the mirror pod all the same — one patch, guarded by the mirror pod's
/// `kubernetes.io/config.mirror` — never logging it as recreated; removing the manifest
/// releases everything.
#[test]
fn a_static_pod_gets_its_network_status_on_its_mirror_pod_and_removing_its_manifest_releases_all() {
    let Some(c) =
        Cluster::lock("a_static_pod_gets_its_network_status_on_its_mirror_pod_and_removing_its_manifest_releases_all")
    else {
        return;
    };
    let ns = c.namespace("braid-static");
    let mut p: Value = serde_json::from_str(&pod(&ns.name, "web", "node1", Some("default/isolated"))).unwrap();
    // The kubelet binds a static pod to its own node.
    p["spec"].as_object_mut().unwrap().remove("nodeName");
    let manifest = c.dir().join("node1/manifests/braid-static-web.json");
    let mark = c.agent_requests().len();
    std::fs::write(&manifest, p.to_string()).unwrap();
    let mut manifest_guard = Defer(|| {
        let _ = std::fs::remove_file(&manifest);
    });
    let mirror = "web-node1";
    let st = wait_status(&c, &ns.name, mirror, "node1");
    let m = c.get(&["pod", mirror, "-n", &ns.name]);
    let hash = m["metadata"]["annotations"]["kubernetes.io/config.mirror"].as_str().unwrap_or_else(|| panic!("{m}"));
    assert_eq!(hash.len(), 32, "the kubelet's hash: {m}");
    assert_ne!(m["metadata"]["uid"].as_str(), Some(hash), "the mirror pod's UID is the API server's: {m}");
    let names = status_matches_pod(&st, &interfaces_inside(&c, &ns.name, mirror));
    assert_eq!(names.get("net1").map(String::as_str), Some("default/isolated"), "{st}");
    assert!(names.contains_key("eth0"), "{st}");
    let file = &status_files(&c, "node1", &ns.name, mirror)[0];
    let recorded: Value =
        serde_json::from_str(&c.read_on("node1", &format!("/run/braid/network-status/{file}")).unwrap()).unwrap();
    assert_eq!(recorded["podUID"].as_str(), Some(hash), "the sandbox's K8S_POD_UID: {recorded}");
    let ours = format!(" pods in {}", ns.name);
    let sent: Vec<String> = c.requests_of("node1", mark).into_iter().filter(|r| r.contains(&ours)).collect();
    assert_eq!(sent, vec![format!("patch{ours}")], "one patch for the static pod");
    let log = c.agent_log("node1");
    let of = format!("network-status of pod {}/{mirror}: ", ns.name);
    assert!(log.contains(&format!("{of}published")) && !log.contains(&format!("{of}not published")), "{log}");

    let sandbox = sandbox_of(&c, &ns.name, mirror);
    std::fs::remove_file(&manifest).unwrap();
    assert_torn_down(&c, &sandbox, &["isolated"]);
    c.wait(
        "the mirror pod gone",
        || !c.kubectl(&["get", "pod", mirror, "-n", &ns.name]).status.success(),
        || c.log("kubelet-node1"),
    );
    assert_eq!(status_files(&c, "node1", &ns.name, mirror), Vec::<String>::new(), "status file left");
    (manifest_guard.0)();
}

/// The files of `net`'s host-local reservations on `node` held by `sandbox`.
fn reservations_of(c: &Cluster, node: &str, net: &str, sandbox: &str) -> Vec<String> {
    let dir = format!("/var/lib/cni/networks/{net}");
    c.files_on(node, &dir)
        .into_iter()
        .filter(|f| f.starts_with("198."))
        .filter(|f| c.read_on(node, &format!("{dir}/{f}")).is_some_and(|r| r.starts_with(sandbox)))
        .collect()
}

/// node2 runs CRI-O (scripts/node.sh): a pod there gets its selected network from the
/// annotation CRI-O passes (runtimeConfig, to the default network only), a network hot-plugged
/// by editing it, and its network-status; CRI-O's CNI GC at its start-up — with the sandboxes it
/// keeps as the valid attachments — releases an attachment CRI-O does not know (one made by
/// hand with the node's delegator) and nothing of the live pod; the pod's deletion releases all.
#[test]
fn on_cri_o_annotations_hot_plug_and_the_start_up_gc_keep_the_live_pod_and_release_the_stale() {
    let Some(c) =
        Cluster::lock("on_cri_o_annotations_hot_plug_and_the_start_up_gc_keep_the_live_pod_and_release_the_stale")
    else {
        return;
    };
    assert!(c.nodes() >= 2, "needs two nodes");
    assert!(
        c.dir().join("pids/crio-node2").exists() || c.log_all("crio-node2").contains("crio"),
        "node2 is not on CRI-O"
    );
    let _layout = c.hotplug_layout();
    let ns = c.namespace("braid-crio");
    c.apply(&nad(&ns.name, "red", Some(&bridge("red", "br-red-c", 115))));
    c.apply(&nad(&ns.name, "blue", Some(&bridge("blue", "br-blue-c", 116))));
    wait_mirrored(&c, "node2", &format!("{}/red", ns.name));
    wait_mirrored(&c, "node2", &format!("{}/blue", ns.name));
    c.apply(&pod(&ns.name, "p", "node2", Some("red")));
    let red = format!("{}/red", ns.name);
    let blue = format!("{}/blue", ns.name);
    wait_networks(&c, &ns.name, "p", &[("eth0", "cluster"), ("net1", &red)]);
    annotate(&c, &ns.name, "p", "red,blue");
    let before = wait_networks(&c, &ns.name, "p", &[("eth0", "cluster"), ("net1", &red), ("net2", &blue)]);
    let files = status_files(&c, "node2", &ns.name, "p");
    let live = files[0].trim_end_matches(".json").rsplit('_').next().unwrap().to_string();
    assert_eq!(reservations_of(&c, "node2", "red", &live).len(), 1);

    // An attachment CRI-O does not know: the node's delegator run by hand in a namespace of
    // node2's own, with braid's conflist as CRI-O would send it.
    let stale = "5ca1ab1e".repeat(8);
    let list: Value = serde_json::from_str(&c.read_on("node2", "/etc/cni/net.d/00-braid.conflist").unwrap()).unwrap();
    let mut conf = list["plugins"][0].clone();
    conf["name"] = list["name"].clone();
    conf["cniVersion"] = list["cniVersion"].clone();
    c.write_on("node2", "/tmp/braid-stale.json", &conf.to_string());
    assert!(c.on_node("node2", "ip", &["netns", "add", "braid-stale"]).status.success());
    let _netns = Defer(|| {
        c.on_node("node2", "ip", &["netns", "del", "braid-stale"]);
    });
    let add = c.on_node(
        "node2",
        "sh",
        &["-c", &format!(
            "CNI_COMMAND=ADD CNI_CONTAINERID={stale} CNI_NETNS=/run/netns/braid-stale CNI_IFNAME=eth0 CNI_PATH=/opt/cni/bin \
             CNI_ARGS='IgnoreUnknown=1;K8S_POD_NAMESPACE={};K8S_POD_NAME=gone;K8S_POD_INFRA_CONTAINER_ID={stale}' \
             /opt/cni/bin/delegator < /tmp/braid-stale.json",
            ns.name
        )],
    );
    assert!(add.status.success(), "{}{}", String::from_utf8_lossy(&add.stdout), String::from_utf8_lossy(&add.stderr));
    assert_eq!(reservations_of(&c, "node2", "cluster", &stale).len(), 1, "the stale attachment's address");
    let state = || c.files_on("node2", "/var/lib/cni/braid").into_iter().filter(|f| f.contains(&stale)).count();
    assert!(state() > 0, "the stale attachment's state");

    // CRI-O restarted: its start-up GC.
    c.node_sh(&["restart", "crio-node2"]);
    c.wait(
        "CRI-O's start-up GC releasing the stale attachment",
        || state() == 0 && reservations_of(&c, "node2", "cluster", &stale).is_empty(),
        || c.log("crio-node2"),
    );
    c.wait(
        "CRI-O serving the pod again",
        || c.kubectl(&["exec", "-n", &ns.name, "p", "--", "ls", "/"]).status.success(),
        || c.log("crio-node2"),
    );
    assert_eq!(reservations_of(&c, "node2", "cluster", &live).len(), 1, "the live pod's cluster address kept");
    assert_eq!(reservations_of(&c, "node2", "red", &live).len(), 1, "the live pod's red address kept");
    assert_eq!(reservations_of(&c, "node2", "blue", &live).len(), 1, "the live pod's blue address kept");
    assert_eq!(interfaces_inside(&c, &ns.name, "p"), before, "the live pod's interfaces untouched");
    assert!(c.files_on("node2", "/var/lib/cni/braid").iter().any(|f| f.contains(&live)), "the live pod's state kept");

    c.ok(&["delete", "pod", "p", "-n", &ns.name, "--wait=true", "--timeout=120s"]);
    c.wait(
        "the pod's DEL on CRI-O",
        || ["cluster", "red", "blue"].iter().all(|n| reservations_of(&c, "node2", n, &live).is_empty()),
        || c.log("crio-node2"),
    );
    assert!(!c.files_on("node2", "/var/lib/cni/braid").iter().any(|f| f.contains(&live)), "state left");
}
