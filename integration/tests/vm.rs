//! A real VM on braid's merged result: `[delegator merged: bridge (eth0), ptp (net1), macvlan
//! (net2)], vmtap, verifier]`, then QEMU (TCG) booted inside the pod namespace with one virtio
//! NIC per VM interface of the result — taps, MACs, addresses and routes read from the result
//! as a VM runtime would (tc-redirect-tap's pairing rule). Inside the guest every NIC reaches
//! its own network: the bridge's gateway in the host namespace, ptp's host side, a macvlan
//! peer on the same master. Then DEL leaves no tap, qdisc, link, reservation or state.
//!
//! And NIC hot-plug as a VMM does it after braid's node agent changed a running pod's networks:
//! vmtap's converging ADD makes the new network's tap, QEMU takes it over QMP (`netdev_add`,
//! `device_add`) and the guest reaches the network through it; then the network goes (its pod
//! interface, then its tap while QEMU still holds it open) and QEMU lets go of the NIC
//! (`device_del`, `netdev_del`) with the guest's other NIC still working.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::vm::{guest_for, vm_nics, Vm, VmImage};
use braid_integration::{merged_results as merge, require_root, unique, Harness};
use cni_types::version::Command;
use serde_json::{json, Value};

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

#[test]
fn a_nic_hot_plugged_on_the_converged_tap_works_in_the_guest_and_unplugs_cleanly() {
    if !require_root("a_nic_hot_plugged_on_the_converged_tap_works_in_the_guest_and_unplugs_cleanly") {
        return;
    }
    let image = VmImage::prepare();
    let h = Harness::new("vmhp");
    let ctr = h.container("vmhp");
    let id = unique("vmctr");
    let ptp = |ifname: &str, subnet: u8| {
        let list = json!({"cniVersion": "1.0.0", "name": unique(ifname), "plugins": [{"type": "ptp", "ipam": h.host_local(subnet)}]});
        let rt = h.runtime(&ctr, &id, ifname);
        let result = h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD {ifname}: {e}")).to_value();
        (list, rt, result)
    };
    let (eth0_list, rt, eth0) = ptp("eth0", 93);
    let vmtap = |prev: &Value| -> Value {
        let conf = json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap", "prevResult": prev});
        let out = h
            .exec_plugin("vmtap", Command::Add, &rt, &serde_json::to_vec(&conf).unwrap())
            .unwrap_or_else(|e| panic!("vmtap ADD: {e}"));
        serde_json::from_slice(&out).unwrap()
    };
    let nics = |r: &Value| {
        let r = cni_types::AnyResult::from_bytes(r.to_string().as_bytes()).unwrap().to_latest();
        vm_nics(&r, &id, &rt.netns).unwrap_or_else(|e| panic!("{e}"))
    };
    let boot = nics(&vmtap(&eth0));
    assert_eq!(boot.len(), 1);
    let tap0 = ctr.link("tap0").unwrap()["ifindex"].clone();

    // The second network's pod interface, made before the boot so that the guest's script can
    // name its MAC and address (vmtap's VM interface carries both); its tap comes only after.
    let (net1_list, net1_rt, net1) = ptp("net1", 94);
    let pod = net1["interfaces"].as_array().unwrap().iter().find(|i| i["sandbox"] == rt.netns.as_str()).unwrap();
    let mac = pod["mac"].as_str().unwrap().to_ascii_lowercase();
    let addr = net1["ips"][0]["address"].as_str().unwrap().to_string();
    let gw = net1["ips"][0]["gateway"].as_str().unwrap().to_string();
    assert!(ctr.link("tap1").is_none());

    // The guest: eth0's NIC at boot; then it says it is ready, waits for a NIC with net1's MAC,
    // configures it and pings net1's gateway through it; then waits for that NIC to go, and
    // pings eth0's gateway again. (Each wait is bounded by the loop and by the hang guard.)
    let find = format!("grep -lx {mac} /sys/class/net/*/address");
    let hot_add = format!(
        "echo BRAID-READY; i=0; until {find} >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 3000 ] || exit 1; sleep 0.1; done; \
         d=$({find}); d=${{d%/address}}; d=${{d##*/}}; echo BRAID-HOTPLUGGED $d; ip addr add {addr} dev $d && ip link set $d up || exit 1; \
         for t in 1 2 3 4 5; do ping -c 1 -W 2 -I $d {gw} && exit 0; done; exit 1"
    );
    // Then, once that NIC is gone, the guest waits for the host to say it is done with QEMU —
    // a UDP datagram to a closed port of eth0's address (the guest's count of those goes up) —
    // so that QEMU is still running when the host takes the NIC's backend away.
    let echoes = "awk '/^Udp:/{if(!h){for(i=1;i<=NF;i++)if($i==\"NoPorts\")c=i;h=1}else print $c}' /proc/net/snmp";
    let hot_remove = format!(
        "i=0; while {find} >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 3000 ] || exit 1; sleep 0.1; done; echo BRAID-UNPLUGGED; \
         e=$({echoes}); i=0; while [ \"$({echoes})\" = \"$e\" ]; do i=$((i+1)); [ $i -lt 3000 ] || exit 1; sleep 0.1; done"
    );
    let gw0 = boot[0].gateways()[0].to_string();
    let guest = guest_for(&boot).ping(0, &gw0).shell(&hot_add).shell(&hot_remove).ping(0, &gw0);
    let vm = Vm::start(ctr.path(), image, &guest);
    vm.wait_for_console("BRAID-READY").unwrap_or_else(|e| panic!("{e}"));

    // The node agent's re-run: vmtap converges on [eth0, net1]. tap0, which QEMU holds open,
    // is untouched; tap1 is new, and the VM interface carries net1's MAC and address.
    let converged = nics(&vmtap(&merge(&[&eth0, &net1])));
    assert_eq!(converged.iter().map(|n| n.tap.as_str()).collect::<Vec<_>>(), ["tap0", "tap1"]);
    assert_eq!(converged[0], boot[0]);
    assert_eq!(
        (converged[1].mac.as_str(), converged[1].addresses.as_slice()),
        (mac.as_str(), [addr.clone()].as_slice())
    );
    assert_eq!(ctr.link("tap0").unwrap()["ifindex"], tap0);

    // What the VMM does (plugins/vmtap/README.md, "NIC hot-plug").
    let plugged = vm.qmp(
        &[
            json!({"execute": "netdev_add", "arguments": {"type": "tap", "id": "n1", "ifname": "tap1", "script": "no", "downscript": "no"}}),
            json!({"execute": "device_add", "arguments": {"driver": "virtio-net-pci", "id": "nic1", "netdev": "n1", "mac": mac, "romfile": ""}}),
        ],
        None,
    );
    plugged.unwrap_or_else(|e| panic!("hot-plug: {e}\n{}", vm.console()));
    vm.wait_for_console("BRAID-PROBE 1 ").unwrap_or_else(|e| panic!("{e}"));

    // The network goes: its pod interface (the delegator's detach), then vmtap's converging ADD
    // removes tap1 while QEMU still has it open; QEMU keeps running, and lets go of the NIC.
    h.del(&net1_list, &net1_rt).unwrap();
    let converged = nics(&vmtap(&eth0));
    assert_eq!(converged, boot);
    assert!(ctr.link("tap1").is_none(), "tap1 is left: {:?}", ctr.links());
    assert_eq!(ctr.link("tap0").unwrap()["ifindex"], tap0);
    let unplugged = vm.qmp(&[json!({"execute": "device_del", "arguments": {"id": "nic1"}})], Some("DEVICE_DELETED"));
    unplugged.unwrap_or_else(|e| panic!("device_del: {e}\n{}", vm.console()));
    vm.qmp(&[json!({"execute": "netdev_del", "arguments": {"id": "n1"}})], None)
        .unwrap_or_else(|e| panic!("netdev_del: {e}"));
    // The host's signal, through eth0's tap, which still works: the guest may finish.
    let guest_ip = boot[0].addresses[0].split('/').next().unwrap().to_string();
    let heard = (0..600).any(|_| {
        let sent = cni_skel::netns::run_in(&h.host.path(), || {
            let s = std::net::UdpSocket::bind("0.0.0.0:0")?;
            s.send_to(b"done", (guest_ip.as_str(), 9))
        });
        assert!(sent.is_ok_and(|r| r.is_ok()), "sending to the guest from the host namespace");
        std::thread::sleep(std::time::Duration::from_millis(100));
        vm.console().contains("BRAID-PROBE 2 ")
    });
    assert!(heard, "the guest never heard the host on eth0 after the hot-unplug:\n{}", vm.console());
    let run = vm.wait();
    run.assert_ok();
    eprintln!("{}", run.tail(30));
    let del = json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap"});
    h.exec_plugin("vmtap", Command::Del, &rt, &serde_json::to_vec(&del).unwrap()).unwrap();
    h.del(&eth0_list, &rt).unwrap();
    assert_eq!(ctr.links(), ["lo"]);
}
