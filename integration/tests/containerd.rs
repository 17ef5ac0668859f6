//! braid under a real Kubernetes runtime: Debian's containerd 1.6 through CRI, the test acting as
//! the kubelet (RunPodSandbox, PodSandboxStatus, StopPodSandbox, RemovePodSandbox). One daemon per
//! test in the test's own host namespace (see `integration/src/containerd.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "../src/containerd.rs"]
mod containerd;
#[path = "../src/cri.rs"]
mod cri;

use braid_integration::runtime::{addresses_in, libcni_cache_entries, require_root_and};
use braid_integration::{unique, Harness};
use containerd::{Containerd, COMMANDS};
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
    let files = c.h.dir.files();
    let reservations: Vec<_> = files.iter().filter(|f| f.starts_with("ipam/") && f.contains("198.18.")).collect();
    assert!(reservations.is_empty(), "IP reservations left: {reservations:?}");
    let state: Vec<_> = files
        .iter()
        .filter(|f| f.starts_with("state") && !f.split('/').nth(1).is_some_and(|s| s.starts_with("cache")))
        .collect();
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
