//! braid under a real Kubernetes runtime: Debian's containerd 1.6 through CRI, the test acting as
//! the kubelet (RunPodSandbox, PodSandboxStatus, StopPodSandbox, RemovePodSandbox). One daemon per
//! test in the test's own host namespace (see `braid_integration::containerd`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::containerd::{Containerd, COMMANDS};
use braid_integration::runtime::{addresses_in, libcni_cache_entries, require_root_and};
use braid_integration::{unique, Harness};
use serde_json::{json, Value};

fn start(test: &str, tag: &str, networks: impl FnOnce(&Harness) -> Vec<Value>, max: usize) -> Option<Containerd> {
    require_root_and(test, COMMANDS).then(|| Containerd::start(tag, networks, max))
}

/// `[delegator{bridge 1.0.0, ptp 0.4.0, macvlan 0.2.0} merged, verifier]` on 198.18.`base`…`base+2`;
/// `side_ifname` names the ptp's interface (default: the delegator's net1).
fn delegator_network(h: &Harness, base: u8, state: &str, side_ifname: Option<&str>) -> Value {
    let master = unique("m");
    h.host.ip(&["link", "add", &master, "type", "veth", "peer", "name", &format!("{master}p")]);
    h.host.ip(&["link", "set", &master, "up"]);
    let ptp =
        json!({"cniVersion": "0.4.0", "name": format!("side{base}"), "type": "ptp", "ipam": h.host_local(base + 1)});
    let mac = json!({"cniVersion": "0.2.0", "name": format!("mac{base}"), "type": "macvlan", "master": master, "mode": "bridge", "ipam": h.host_local(base + 2)});
    let (ptp, mac) = match side_ifname {
        Some(i) => (json!({"network": ptp, "ifname": i}), json!({"network": mac, "ifname": format!("{i}m")})),
        None => (ptp, mac),
    };
    json!({
        "cniVersion": "1.0.0",
        "name": unique("cdlg"),
        "plugins": [
            {"type": "delegator", "stateDir": h.dir.path().join(state), "result": "merged", "timeout": 10, "delegates": [
                {"cniVersion": "1.0.0", "name": format!("cluster{base}"), "type": "bridge", "bridge": unique("br"), "isGateway": true, "ipam": h.host_local(base)},
                ptp, mac
            ]},
            {"type": "verifier"}
        ]
    })
}

fn has(addrs: &[(String, String)], ifname: &str, prefix: &str) -> bool {
    addrs.iter().any(|(i, a)| i == ifname && a.starts_with(prefix))
}

/// Nothing of the pods left: reservations, braid state, libcni cache, pod namespaces, shims.
fn assert_nothing_left(c: &Containerd) {
    let reservations = c.h.reservations();
    assert!(reservations.is_empty(), "IP reservations left: {reservations:?}");
    let state = c.h.state_files();
    assert!(state.is_empty(), "braid state left: {state:?}\n{}", c.log());
    let cache = libcni_cache_entries(c.networks());
    assert!(cache.is_empty(), "libcni cache entries left: {cache:?}");
    assert!(c.pod_namespaces().is_empty(), "pod namespaces left: {:?}", c.pod_namespaces());
    assert!(c.shim_sockets_left().is_empty(), "shim sockets left: {:?}", c.shim_sockets_left());
}

#[test]
fn containerd_plain_bridge_pod() {
    let nets = |h: &Harness| {
        vec![json!({
            "cniVersion": "1.0.0",
            "name": unique("cbr"),
            "plugins": [{"type": "bridge", "bridge": unique("br"), "isGateway": true, "ipam": h.host_local(130)}]
        })]
    };
    let Some(mut c) = start("containerd_plain_bridge_pod", "cpb", nets, 1) else { return };
    let id = c.run_pod("plain", &[]).unwrap_or_else(|e| panic!("RunPodSandbox: {e}\n{}", c.log()));
    let ips = c.pod_ips(&id);
    assert_eq!(ips.len(), 1, "{ips:?}");
    assert!(ips[0].starts_with("198.18.130."), "{ips:?}");
    let a = addresses_in(&c.pod_netns(&id));
    assert_eq!(a, vec![("eth0".to_string(), format!("{}/24", ips[0]))]);
    c.stop_and_remove(&id);
    assert_nothing_left(&c);
}

#[test]
fn containerd_delegator_merged_bridge_ptp_macvlan() {
    let nets = |h: &Harness| vec![delegator_network(h, 132, "state", None)];
    let Some(mut c) = start("containerd_delegator_merged_bridge_ptp_macvlan", "cdm", nets, 1) else { return };
    let id = c
        .run_pod("merged", &[("braid.example/test", "merged")])
        .unwrap_or_else(|e| panic!("RunPodSandbox: {e}\n{}", c.log()));
    // The pod IP is the cluster network's (eth0), not a secondary attachment's.
    let ips = c.pod_ips(&id);
    assert_eq!(ips.len(), 1, "{ips:?}");
    assert!(ips[0].starts_with("198.18.132."), "{ips:?}");
    let a = addresses_in(&c.pod_netns(&id));
    assert!(has(&a, "eth0", &ips[0]), "{a:?}");
    assert!(has(&a, "net1", "198.18.133.") && has(&a, "net2", "198.18.134."), "{a:?}");
    assert_eq!(a.len(), 3, "{a:?}");
    c.stop_and_remove(&id);
    assert_nothing_left(&c);
}

/// Two braid networks, set up concurrently by containerd as eth0 and eth1.
fn two_networks(test: &str, tag: &str, side_ifname: Option<&str>) {
    let nets = |h: &Harness| {
        vec![delegator_network(h, 136, "state-a", None), delegator_network(h, 140, "state-b", side_ifname)]
    };
    let Some(mut c) = start(test, tag, nets, 2) else { return };
    let id = c.run_pod("two", &[]).unwrap_or_else(|e| panic!("RunPodSandbox: {e}\n{}", c.log()));
    let ips = c.pod_ips(&id);
    assert_eq!(ips.len(), 1, "{ips:?}");
    assert!(ips[0].starts_with("198.18.136."), "the pod IP comes from eth0: {ips:?}");
    let a = addresses_in(&c.pod_netns(&id));
    assert!(has(&a, "eth0", "198.18.136.") && has(&a, "eth1", "198.18.140."), "{a:?}");
    match side_ifname {
        Some(i) => {
            assert!(has(&a, "net1", "198.18.137.") && has(&a, "net2", "198.18.138."), "{a:?}");
            assert!(has(&a, i, "198.18.141.") && has(&a, &format!("{i}m"), "198.18.142."), "{a:?}");
        }
        // Set up at once, the networks choose their net<N> in whichever order they win the
        // pod namespace's lock: four distinct names, each with its own delegate's address.
        None => {
            let mut names: Vec<&str> = a.iter().map(|(n, _)| n.as_str()).collect();
            names.sort();
            assert_eq!(names, ["eth0", "eth1", "net1", "net2", "net3", "net4"], "{a:?}");
            for subnet in ["198.18.137.", "198.18.138.", "198.18.141.", "198.18.142."] {
                assert_eq!(
                    a.iter().filter(|(n, ip)| n.starts_with("net") && ip.starts_with(subnet)).count(),
                    1,
                    "{a:?}"
                );
            }
        }
    }
    assert_eq!(a.len(), 6, "{a:?}");
    c.stop_and_remove(&id);
    assert_nothing_left(&c);
}

#[test]
fn containerd_two_braid_networks_concurrently() {
    two_networks("containerd_two_braid_networks_concurrently", "c2n", None);
}

/// The same with the second network's delegates on interfaces of their own.
#[test]
fn containerd_two_braid_networks_with_distinct_interface_names() {
    two_networks("containerd_two_braid_networks_with_distinct_interface_names", "c2i", Some("side"));
}

/// A conflist whose delegator's second delegate fails its ADD.
fn failing_network(h: &Harness, failing: Value) -> Vec<Value> {
    let mut failing = failing;
    if failing.get("ipam").is_some() {
        // host-local's reservations in the test's directory, never in /var/lib/cni/networks.
        failing["ipam"]["dataDir"] = json!(h.ipam_dir());
    }
    vec![json!({
        "cniVersion": "1.0.0",
        "name": unique("cfail"),
        "plugins": [
            {"type": "delegator", "stateDir": h.dir.path().join("state"), "result": "merged", "timeout": 10, "delegates": [
                {"cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "bridge": unique("br"), "ipam": h.host_local(144)},
                failing
            ]},
            {"type": "verifier"}
        ]
    })]
}

fn failing_delegate(test: &str, tag: &str, failing: Value, want: &str) {
    let Some(mut c) = start(test, tag, |h| failing_network(h, failing), 1) else { return };
    let e = c.run_pod("failing", &[]).expect_err("RunPodSandbox succeeded with a failing delegate");
    assert!(e.message().contains(want), "{e}");
    assert_nothing_left(&c);
}

#[test]
fn containerd_failing_delegate_fails_the_pod_and_leaves_nothing() {
    let fault = json!({"cniVersion": "1.0.0", "name": "broken", "type": "braid-fault", "link": true,
        "fail": {"command": "ADD", "code": 7, "msg": "Invalid Configuration", "details": "injected by the test"}});
    failing_delegate(
        "containerd_failing_delegate_fails_the_pod_and_leaves_nothing",
        "cfd",
        fault,
        "injected by the test",
    );
}

#[test]
fn containerd_macvlan_with_a_bad_mode_fails_the_pod_and_leaves_nothing() {
    let macvlan = json!({"cniVersion": "1.0.0", "name": "mac", "type": "macvlan", "master": "lo", "mode": "braid-bogus",
        "ipam": {"type": "host-local", "ranges": [[{"subnet": "198.18.145.0/24"}]]}});
    failing_delegate(
        "containerd_macvlan_with_a_bad_mode_fails_the_pod_and_leaves_nothing",
        "cfb",
        macvlan,
        "braid-bogus",
    );
}

#[test]
fn containerd_macvlan_with_a_missing_master_fails_the_pod_and_leaves_nothing() {
    let macvlan = json!({"cniVersion": "1.0.0", "name": "mac", "type": "macvlan", "master": "braidnomaster",
        "ipam": {"type": "host-local", "ranges": [[{"subnet": "198.18.145.0/24"}]]}});
    failing_delegate(
        "containerd_macvlan_with_a_missing_master_fails_the_pod_and_leaves_nothing",
        "cfn",
        macvlan,
        "Link not found",
    );
}

#[test]
fn containerd_missing_delegate_binary_fails_the_pod_and_leaves_nothing() {
    let missing = json!({"cniVersion": "1.0.0", "name": "gone", "type": "braid-no-such-plugin"});
    failing_delegate(
        "containerd_missing_delegate_binary_fails_the_pod_and_leaves_nothing",
        "cfm",
        missing,
        "braid-no-such-plugin",
    );
}

// ---- Kubernetes: per-pod networks from the pod's annotations (issue 14) ----

use braid_integration::node::NETWORKS_ANNOTATION as NETWORKS;

/// The delegator with selection on: the cluster bridge (default route via 198.18.148.1) as
/// eth0, and in its networksDir `default/glob` (bridge + tuning with the `mac` capability,
/// 198.18.150/24), `braid-test/loc` (198.18.151/24), `braid-test/fixed` (static IPAM with the
/// `ips` capability), `braid-test/third` (198.18.153/24) and `other-ns/secret`.
fn kubernetes_network(h: &Harness) -> Vec<Value> {
    let dir = h.dir.path().join("braid.d");
    let put = |rel: &str, v: Value| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, v.to_string()).unwrap();
    };
    let bridge =
        |subnet: u8| json!({"type": "bridge", "bridge": unique("br"), "isGateway": true, "ipam": h.host_local(subnet)});
    put(
        "default/glob.conflist",
        json!({"cniVersion": "1.0.0", "name": "glob", "plugins": [bridge(150), {"type": "tuning", "capabilities": {"mac": true}}]}),
    );
    put("braid-test/loc.conflist", json!({"cniVersion": "1.0.0", "name": "loc", "plugins": [bridge(151)]}));
    put(
        "braid-test/fixed.conflist",
        json!({"cniVersion": "1.0.0", "name": "fixed", "plugins": [
            {"type": "bridge", "bridge": unique("br"), "capabilities": {"ips": true}, "ipam": {"type": "static"}}]}),
    );
    put(
        "braid-test/third.conf",
        json!({"cniVersion": "1.0.0", "type": "bridge", "bridge": unique("br"), "ipam": h.host_local(153)}),
    );
    put("other-ns/secret.conflist", json!({"cniVersion": "1.0.0", "name": "secret", "plugins": [bridge(154)]}));
    let mut cluster_ipam = h.host_local(148);
    cluster_ipam["routes"] = json!([{"dst": "0.0.0.0/0"}]);
    vec![json!({
        "cniVersion": "1.0.0",
        "name": unique("ck8s"),
        "plugins": [{
            "type": "delegator", "stateDir": h.dir.path().join("state"), "timeout": 10,
            "capabilities": {"io.kubernetes.cri.pod-annotations": true, "portMappings": true},
            "delegates": [{"cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "bridge": unique("br"), "isGateway": true, "ipam": cluster_ipam}],
            "kubernetes": {"networksDir": dir, "globalNamespaces": ["default"], "statusDir": h.dir.path().join("status")}
        }]
    })]
}

fn k8s_start(test: &str, tag: &str) -> Option<Containerd> {
    start(test, tag, kubernetes_network, 1)
}

fn ip_json_in(netns: &std::path::Path, args: &[&str]) -> Value {
    let out = std::process::Command::new("nsenter")
        .arg(format!("--net={}", netns.display()))
        .args(["ip", "-j"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(if text.trim().is_empty() { "[]" } else { &text }).unwrap()
}

/// `(dev, gateway)` of the pod's IPv4 default routes.
fn default_routes(netns: &std::path::Path) -> Vec<(String, String)> {
    let v = ip_json_in(netns, &["route", "show", "default"]);
    v.as_array()
        .into_iter()
        .flatten()
        .map(|r| (r["dev"].as_str().unwrap_or("").to_string(), r["gateway"].as_str().unwrap_or("").to_string()))
        .collect()
}

fn mac_of(netns: &std::path::Path, ifname: &str) -> String {
    ip_json_in(netns, &["link", "show", "dev", ifname])[0]["address"].as_str().unwrap_or_default().to_string()
}

/// The pod's network-status document (exactly one in statusDir).
fn status_document(c: &Containerd, id: &str) -> Value {
    let dir = c.h.dir.path().join("status");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("braid-test_") && name.ends_with(&format!("_{id}.json")), "{name}");
    let file: Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    // containerd passes K8S_POD_UID: the file records it beside the document.
    assert!(file["podUID"].as_str().is_some_and(|u| !u.is_empty()), "{file}");
    file["networkStatus"].clone()
}

/// Every status entry agrees with the kernel: the interface exists with that MAC and those IPs.
fn assert_status_matches_kernel(doc: &Value, netns: &std::path::Path) {
    let addrs = addresses_in(netns);
    for e in doc.as_array().unwrap() {
        let ifname = e["interface"].as_str().unwrap();
        assert_eq!(e["mac"].as_str().unwrap(), mac_of(netns, ifname), "{e}");
        for ip in e["ips"].as_array().unwrap() {
            assert!(has(&addrs, ifname, &format!("{}/", ip.as_str().unwrap())), "{e} vs {addrs:?}");
        }
    }
}

fn assert_nothing_left_k8s(c: &Containerd) {
    assert_nothing_left(c);
    let status: Vec<_> = c.h.dir.files().into_iter().filter(|f| f.starts_with("status/")).collect();
    assert!(status.is_empty(), "network-status left: {status:?}");
}

#[test]
fn containerd_kubernetes_text_annotation_selects_networks() {
    let Some(mut c) = k8s_start("containerd_kubernetes_text_annotation_selects_networks", "ckt") else { return };
    let id = c
        .run_pod("web", &[(NETWORKS, " default/glob, loc ,third@side0")])
        .unwrap_or_else(|e| panic!("RunPodSandbox: {e}\n{}", c.log()));
    let ips = c.pod_ips(&id);
    assert!(ips.len() == 1 && ips[0].starts_with("198.18.148."), "the pod IP is the cluster network's: {ips:?}");
    let netns = c.pod_netns(&id);
    let a = addresses_in(&netns);
    assert!(has(&a, "eth0", "198.18.148."), "{a:?}");
    assert!(
        has(&a, "net1", "198.18.150.") && has(&a, "net2", "198.18.151.") && has(&a, "side0", "198.18.153."),
        "{a:?}"
    );
    assert_eq!(a.len(), 4, "{a:?}");
    let doc = status_document(&c, &id);
    let entries: Vec<(&str, &str, bool)> = doc
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["interface"].as_str().unwrap(), e["default"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        entries,
        [
            ("cluster", "eth0", true),
            ("default/glob", "net1", false),
            ("braid-test/loc", "net2", false),
            ("braid-test/third", "side0", false)
        ]
    );
    assert_status_matches_kernel(&doc, &netns);
    assert_eq!(default_routes(&netns), [("eth0".to_string(), "198.18.148.1".to_string())]);
    c.stop_and_remove(&id);
    assert_nothing_left_k8s(&c);
}

#[test]
fn containerd_kubernetes_json_annotation_mac_ips_and_default_route() {
    let Some(mut c) = k8s_start("containerd_kubernetes_json_annotation_mac_ips_and_default_route", "ckj") else {
        return;
    };
    let annotation = json!([
        {"name": "glob", "namespace": "default", "mac": "02:42:c6:12:96:0a", "default-route": ["198.18.150.1"]},
        {"name": "fixed", "ips": ["198.18.152.77/24"]}
    ])
    .to_string();
    let id = c.run_pod("db", &[(NETWORKS, &annotation)]).unwrap_or_else(|e| panic!("RunPodSandbox: {e}\n{}", c.log()));
    let netns = c.pod_netns(&id);
    let a = addresses_in(&netns);
    assert!(has(&a, "net1", "198.18.150.") && has(&a, "net2", "198.18.152.77/24"), "{a:?}");
    assert_eq!(mac_of(&netns, "net1"), "02:42:c6:12:96:0a");
    // The default route moved to net1: in the kernel and in the result containerd keeps.
    assert_eq!(default_routes(&netns), [("net1".to_string(), "198.18.150.1".to_string())]);
    let s = c.cri().pod_sandbox_status(&id).unwrap();
    let info: Value = s.info.get("info").and_then(|i| serde_json::from_str(i).ok()).unwrap_or(Value::Null);
    let routes: Vec<(String, String)> = info["cniResult"]["Routes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["dst"] == "0.0.0.0/0")
        .map(|r| (r["dst"].as_str().unwrap_or("").to_string(), r["gw"].as_str().unwrap_or("").to_string()))
        .collect();
    assert_eq!(routes, [("0.0.0.0/0".to_string(), "198.18.150.1".to_string())], "{info}");
    let doc = status_document(&c, &id);
    assert_status_matches_kernel(&doc, &netns);
    assert_eq!(doc[1]["default-route"], json!(["198.18.150.1"]), "{doc}");
    assert_eq!(doc[1]["mac"], "02:42:c6:12:96:0a", "{doc}");
    assert_eq!(doc[2]["ips"], json!(["198.18.152.77"]), "{doc}");
    assert!(doc[0].get("default-route").is_none() && doc[0]["default"] == true, "{doc}");
    c.stop_and_remove(&id);
    assert_nothing_left_k8s(&c);
}

#[test]
fn containerd_kubernetes_refused_selections_leave_nothing() {
    let Some(mut c) = k8s_start("containerd_kubernetes_refused_selections_leave_nothing", "ckr") else { return };
    for (value, want) in [
        ("loc,other-ns/secret", "element 1 (network other-ns/secret): namespace \"other-ns\" is not allowed"),
        ("nosuch", "element 0 (network braid-test/nosuch): unknown network"),
    ] {
        let e = c.run_pod("refused", &[(NETWORKS, value)]).expect_err("RunPodSandbox succeeded");
        assert!(e.message().contains(want), "{value}: {e}");
        assert_nothing_left_k8s(&c);
    }
}
