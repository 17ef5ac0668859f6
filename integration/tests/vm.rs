//! A real VM on braid's merged result: `[delegator merged: bridge (eth0), ptp (net1), macvlan
//! (net2)], vmtap, verifier]`, then QEMU (TCG) booted inside the pod namespace with one virtio
//! NIC per VM interface of the result — taps, MACs, addresses and routes read from the result
//! as a VM runtime would (tc-redirect-tap's pairing rule). Inside the guest every NIC reaches
//! its own network: the bridge's gateway in the host namespace, ptp's host side, a macvlan
//! peer on the same master. Then DEL leaves no tap, qdisc, link, reservation or state.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::vm::{guest_for, vm_nics, Vm, VmImage};
use braid_integration::{require_root, unique, Harness};
use serde_json::json;

#[test]
fn a_vm_reaches_every_network_of_a_merged_result() {
    if !require_root("a_vm_reaches_every_network_of_a_merged_result") {
        return;
    }
    let image = VmImage::prepare();
    let h = Harness::new("vm");
    let ctr = h.container("vm");
    // The macvlan master and, on it, a peer holding the macvlan network's gateway address.
    let master = unique("m");
    let peer = unique("mp");
    h.host.ip(&["link", "add", &master, "type", "veth", "peer", "name", &format!("{master}p")]);
    h.host.ip(&["link", "set", &master, "up"]);
    h.host.ip(&["link", "set", &format!("{master}p"), "up"]);
    h.host.ip(&["link", "add", &peer, "link", &master, "type", "macvlan", "mode", "bridge"]);
    h.host.ip(&["addr", "add", "198.18.92.1/24", "dev", &peer]);
    h.host.ip(&["link", "set", &peer, "up"]);
    let bridge = unique("br");
    let list = json!({
        "cniVersion": "1.1.0",
        "name": unique("vmnet"),
        "plugins": [
            {"type": "delegator", "stateDir": h.dir.path().join("state"), "result": "merged", "timeout": 20, "delegates": [
                {"cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "bridge": bridge, "isGateway": true, "ipam": h.host_local(90)},
                {"cniVersion": "1.0.0", "name": "side", "type": "ptp", "ipam": h.host_local(91)},
                {"cniVersion": "1.0.0", "name": "mac", "type": "macvlan", "master": master, "mode": "bridge", "ipam": h.host_local(92)}
            ]},
            {"type": "vmtap"},
            {"type": "verifier"}
        ]
    });
    let id = unique("vmctr");
    let rt = h.runtime(&ctr, &id, "eth0");
    let result = h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD: {e}")).to_latest();
    let nics = vm_nics(&result, &id, &rt.netns).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(nics.iter().map(|n| n.tap.as_str()).collect::<Vec<_>>(), ["tap0", "tap1", "tap2"]);

    // The guest as a runtime derives it (braid_integration::vm::guest_for): each NIC with its
    // result's addresses; the first network's gateway is the default route, every NIC gets the
    // routes that leave by it; one ping per network, from that network's NIC, to the host side
    // of it.
    let mut guest = guest_for(&nics);
    let targets = ["198.18.90.1", "198.18.91.1", "198.18.92.1"];
    for (k, t) in targets.iter().enumerate() {
        assert_eq!(nics[k].gateways(), [*t], "the result names {t} as NIC {k}'s gateway");
        guest = guest.ping(k, t);
    }
    let run = Vm::boot(ctr.path(), image, &guest);
    run.assert_ok();
    for (k, t) in targets.iter().enumerate() {
        assert!(run.probe_ok(k), "NIC {k} cannot reach {t}:\n{}", run.tail(60));
    }
    eprintln!("{}", run.tail(40));
    // The pod network saw the guest's frames: the pod interfaces' MACs were the guest's.
    h.check(&list, &rt).unwrap_or_else(|e| panic!("CHECK: {e}"));

    h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL: {e}"));
    assert_eq!(ctr.links(), ["lo"]);
    assert!(h.reservations().is_empty(), "{:?}", h.reservations());
    assert!(h.state_files().is_empty(), "{:?}", h.state_files());
    h.del(&list, &rt).unwrap();
}
