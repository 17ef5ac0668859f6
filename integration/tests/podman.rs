//! braid under a real runtime: Debian's podman 4.3 with its CNI backend, in the test's own host
//! namespace (see `braid_integration::podman`). Each container prints `ip -o addr` and exits;
//! the test then checks that podman's DEL left nothing: no host-local reservation, no braid
//! state, no libcni cache entry, no container.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::podman::{Podman, COMMANDS};
use braid_integration::runtime::{libcni_cache_entries, parse_ip_o_addr, require_root_and};
use braid_integration::unique;
use serde_json::{json, Value};

fn podman(test: &str, tag: &str) -> Option<Podman> {
    require_root_and(test, COMMANDS).then(|| Podman::new(tag))
}

/// A veth end in the host namespace, up, to be a macvlan master.
fn macvlan_master(p: &Podman) -> String {
    let master = unique("m");
    p.h.host.ip(&["link", "add", &master, "type", "veth", "peer", "name", &format!("{master}p")]);
    p.h.host.ip(&["link", "set", &master, "up"]);
    master
}

/// `[delegator{bridge 1.0.0, ptp 0.4.0, macvlan <mac_version>} merged, verifier]` on
/// 198.18.`base`…`base+2`.
fn delegator_network(p: &Podman, base: u8, mac_version: &str, state: &str) -> Value {
    let master = macvlan_master(p);
    json!({
        "cniVersion": "1.0.0",
        "name": unique("pdlg"),
        "plugins": [
            {"type": "delegator", "stateDir": p.h.dir.path().join(state), "result": "merged", "timeout": 10, "delegates": [
                {"cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "bridge": unique("br"), "isGateway": true, "ipam": p.h.host_local(base)},
                {"cniVersion": "0.4.0", "name": "side", "type": "ptp", "ipam": p.h.host_local(base + 1)},
                {"cniVersion": mac_version, "name": "mac", "type": "macvlan", "master": master, "mode": "bridge", "ipam": p.h.host_local(base + 2)}
            ]},
            {"type": "verifier"}
        ]
    })
}

/// `[bridge, merger{ptp}, verifier]` on 198.18.`base` and `base+1`; `ifname` for the ptp.
fn merger_network(p: &Podman, base: u8, state: &str, ifname: Option<&str>) -> Value {
    let ptp = json!({"cniVersion": "0.4.0", "name": "side2", "type": "ptp", "ipam": p.h.host_local(base + 1)});
    let delegate = match ifname {
        Some(i) => json!({"network": ptp, "ifname": i}),
        None => ptp,
    };
    json!({
        "cniVersion": "1.0.0",
        "name": unique("pmrg"),
        "plugins": [
            {"type": "bridge", "bridge": unique("br"), "isGateway": true, "ipam": p.h.host_local(base)},
            {"type": "merger", "stateDir": p.h.dir.path().join(state), "timeout": 10, "delegates": [delegate]},
            {"type": "verifier"}
        ]
    })
}

/// Runs a container on `networks`; its global addresses as (interface, address/len).
fn addresses(p: &Podman, networks: &[&str]) -> Vec<(String, String)> {
    let out =
        p.run(networks, &["ip", "-o", "addr"]).unwrap_or_else(|e| panic!("podman run --network {networks:?}: {e}"));
    parse_ip_o_addr(&out)
}

fn has(addrs: &[(String, String)], ifname: &str, prefix: &str) -> bool {
    addrs.iter().any(|(i, a)| i == ifname && a.starts_with(prefix))
}

/// What podman's teardown must not leave: reservations, braid state, cache entries, containers.
fn assert_nothing_left(p: &Podman) {
    let reservations = p.h.reservations();
    assert!(reservations.is_empty(), "IP reservations left: {reservations:?}");
    let state = p.h.state_files();
    assert!(state.is_empty(), "braid state left: {state:?}");
    let cache = libcni_cache_entries(p.networks());
    assert!(cache.is_empty(), "libcni cache entries left: {cache:?}");
    assert!(p.containers().is_empty(), "containers left: {:?}", p.containers());
}

#[test]
fn podman_delegator_merged_bridge_ptp_macvlan() {
    let Some(mut p) = podman("podman_delegator_merged_bridge_ptp_macvlan", "pda") else { return };
    // macvlan at 0.4.0: a result with a MAC (the 0.2.0 case is the ignored test below).
    let net = p.add_network(&delegator_network(&p, 100, "0.4.0", "state"));
    let a = addresses(&p, &[&net]);
    assert!(
        has(&a, "eth0", "198.18.100.") && has(&a, "net1", "198.18.101.") && has(&a, "net2", "198.18.102."),
        "{a:?}"
    );
    assert_eq!(a.len(), 3, "{a:?}");
    assert_nothing_left(&p);
}

#[test]
fn podman_delegator_merged_with_legacy_macvlan() {
    let Some(mut p) = podman("podman_delegator_merged_with_legacy_macvlan", "pdl") else { return };
    let net = p.add_network(&delegator_network(&p, 104, "0.2.0", "state"));
    let a = addresses(&p, &[&net]);
    assert!(
        has(&a, "eth0", "198.18.104.") && has(&a, "net1", "198.18.105.") && has(&a, "net2", "198.18.106."),
        "{a:?}"
    );
    assert_eq!(a.len(), 3, "{a:?}");
    assert_nothing_left(&p);
}

#[test]
fn podman_bridge_merger_ptp_verifier() {
    let Some(mut p) = podman("podman_bridge_merger_ptp_verifier", "pmg") else { return };
    let net = p.add_network(&merger_network(&p, 108, "state", None));
    let a = addresses(&p, &[&net]);
    assert!(has(&a, "eth0", "198.18.108.") && has(&a, "net1", "198.18.109."), "{a:?}");
    assert_eq!(a.len(), 2, "{a:?}");
    assert_nothing_left(&p);
}

#[test]
fn podman_two_braid_networks_on_one_container() {
    let Some(mut p) = podman("podman_two_braid_networks_on_one_container", "p2n") else { return };
    let a_net = p.add_network(&delegator_network(&p, 112, "0.4.0", "state-a"));
    let b_net = p.add_network(&merger_network(&p, 116, "state-b", None));
    let a = addresses(&p, &[&a_net, &b_net]);
    assert_two_networks(&a, None);
    assert_nothing_left(&p);
}

/// The same two networks with the merger's ptp on an interface of its own, which podman attaches
/// as eth0 and eth1 in either order: every attachment is there with its address.
#[test]
fn podman_two_braid_networks_with_distinct_interface_names() {
    let Some(mut p) = podman("podman_two_braid_networks_with_distinct_interface_names", "p2i") else { return };
    let a_net = p.add_network(&delegator_network(&p, 120, "0.4.0", "state-a"));
    let b_net = p.add_network(&merger_network(&p, 124, "state-b", Some("side0")));
    let a = addresses(&p, &[&a_net, &b_net]);
    assert_two_networks(&a, Some(("side0", 120, 124)));
    assert_nothing_left(&p);
}

/// Network A (delegator: bridge, ptp on net1, macvlan on net2) and network B (bridge, merger's
/// ptp) on eth0/eth1 in podman's order.
fn assert_two_networks(a: &[(String, String)], named: Option<(&str, u8, u8)>) {
    assert_eq!(a.len(), 5, "{a:?}");
    let (side, base_a, base_b) = named.unwrap_or(("net1", 112, 116));
    let eth = |subnet: u8| {
        a.iter()
            .find(|(i, x)| i.starts_with("eth") && x.starts_with(&format!("198.18.{subnet}.")))
            .map(|(i, _)| i.clone())
            .unwrap_or_else(|| panic!("no eth* in 198.18.{subnet}.0/24: {a:?}"))
    };
    let (ea, eb) = (eth(base_a), eth(base_b));
    assert_ne!(ea, eb, "{a:?}");
    if named.is_some() {
        assert!(has(a, "net1", &format!("198.18.{}.", base_a + 1)), "{a:?}");
        assert!(has(a, "net2", &format!("198.18.{}.", base_a + 2)), "{a:?}");
        assert!(has(a, side, &format!("198.18.{}.", base_b + 1)), "{a:?}");
        return;
    }
    // Names chosen by braid: whichever network podman attaches first takes the lowest net<N>;
    // three distinct names, each with its own delegate's address.
    let mut nets: Vec<&str> = a.iter().map(|(i, _)| i.as_str()).filter(|i| i.starts_with("net")).collect();
    nets.sort();
    assert_eq!(nets, ["net1", "net2", "net3"], "{a:?}");
    for subnet in [base_a + 1, base_a + 2, base_b + 1] {
        let on = a.iter().filter(|(i, x)| i.starts_with("net") && x.starts_with(&format!("198.18.{subnet}."))).count();
        assert_eq!(on, 1, "198.18.{subnet}.0/24: {a:?}");
    }
}
