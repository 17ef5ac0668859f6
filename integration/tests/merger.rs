//! The merger in a real chain: [bridge, merger{ptp}, tuning].
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::{require_root, unique, Harness};
use serde_json::{json, Value};

fn chain(h: &Harness, version: &str, delegates: Value) -> Value {
    json!({
        "cniVersion": version,
        "name": unique("mrg"),
        "plugins": [
            {"type": "bridge", "bridge": unique("br"), "ipam": h.host_local(60)},
            {"type": "merger", "stateDir": h.dir.path().join("state"), "timeout": 5, "delegates": delegates},
            {"type": "tuning", "mtu": 1400}
        ]
    })
}

fn leftovers(h: &Harness) -> Vec<String> {
    let mut left = h.reservations();
    left.extend(h.state_files());
    left
}

#[test]
fn bridge_merger_ptp_tuning() {
    if !require_root("bridge_merger_ptp_tuning") {
        return;
    }
    for version in ["1.0.0", "0.4.0"] {
        let h = Harness::new("mrg");
        let ctr = h.container("mrg");
        let list = chain(
            &h,
            version,
            json!([{"cniVersion": "0.4.0", "name": "side", "type": "ptp", "ipam": h.host_local(61)}]),
        );
        let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
        let result = h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD {version}: {e}"));
        assert_eq!(result.version(), version);
        let r = result.to_latest();
        let (eth0, net1) = (ctr.addresses("eth0"), ctr.addresses("net1"));
        assert_eq!((eth0.len(), net1.len()), (1, 1), "{version}");
        assert_eq!(r.ips[0].address.to_string(), eth0[0], "the cluster network's IP leads");
        assert_eq!(r.ips[1].address.to_string(), net1[0]);
        for (ip, name) in r.ips.iter().zip(["eth0", "net1"]) {
            let iface = &r.interfaces[ip.interface.unwrap() as usize];
            assert_eq!((iface.name.as_str(), iface.sandbox.as_str()), (name, rt.netns.as_str()), "{version}");
        }
        assert!(r.routes.iter().any(|x| x.dst.to_string() == "198.19.61.0/24"));
        assert_eq!(ctr.link("eth0").unwrap()["mtu"], 1400, "tuning after the merger ran on the merged result");
        // Upstream gap (containernetworking/plugins `pkg/ip/utils.go`, `ValidateExpectedInterfaceIPs`): Debian's bridge CHECK validates *every* IP of the final
        // result against CNI_IFNAME, so a merged result fails it on net1's address. Documented
        // in the merger README; the verifier is braid's answer.
        let e = h.check(&list, &rt).unwrap_err();
        assert!(
            e.to_string().contains(&format!("Failed to match addr {} on interface eth0", net1[0])),
            "{}",
            e.to_string()
        );
        h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL {version}: {e}"));
        assert!(ctr.link("eth0").is_none() && ctr.link("net1").is_none());
        assert!(leftovers(&h).is_empty(), "{version}: {:?}", h.dir.files());
        h.del(&list, &rt).unwrap_or_else(|e| panic!("second DEL {version}: {e}"));
    }
}

#[test]
fn merger_refusals_run_nothing() {
    if !require_root("merger_refusals_run_nothing") {
        return;
    }
    let h = Harness::new("mref");
    let ctr = h.container("mref");
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let log = h.dir.path().join("calls.log");
    let fault = json!({"type": "braid-fault", "log": log});
    // Not chained: no prevResult.
    let alone = json!({"cniVersion": "1.0.0", "name": unique("m"), "plugins": [
        {"type": "merger", "stateDir": h.dir.path().join("state"), "delegates": [fault]}
    ]});
    let e = h.add(&alone, &rt).unwrap_err();
    assert_eq!(e.cause().unwrap().code, 7);
    assert!(e.to_string().contains("must be called as a chained plugin"), "{e}");
    // A merge that 0.2.0 cannot express is refused before any delegate runs.
    let mut legacy = chain(&h, "0.2.0", json!([fault]));
    legacy["plugins"].as_array_mut().unwrap().pop();
    let e = h.add(&legacy, &rt).unwrap_err();
    assert!(e.to_string().contains("use cniVersion 0.3.0 or later"), "{e}");
    assert!(!log.exists(), "a delegate ran despite the refusal");
    h.del(&legacy, &rt).unwrap();
    assert!(leftovers(&h).is_empty(), "{:?}", h.dir.files());
}

#[test]
fn merger_without_delegates_passes_prev_result_through() {
    if !require_root("merger_without_delegates_passes_prev_result_through") {
        return;
    }
    let h = Harness::new("mpass");
    let ctr = h.container("mpass");
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let list = json!({"cniVersion": "1.0.0", "name": unique("m"), "plugins": [
        {"type": "braid-fault", "result": {"cniVersion": "1.0.0", "ips": [{"address": "198.18.62.2/24"}]}},
        {"type": "merger", "stateDir": h.dir.path().join("state")}
    ]});
    let r = h.add(&list, &rt).unwrap().to_latest();
    // An IPAM-style result (no interfaces) gets an interface for its IP (normalised).
    assert_eq!(r.interfaces.len(), 1);
    assert_eq!(r.interfaces[0].name, "eth0");
    assert_eq!(r.ips[0].interface, Some(0));
    h.del(&list, &rt).unwrap();
}

#[test]
fn macvlan_and_legacy_ptp_then_a_failing_delegate_rolls_back() {
    if !require_root("macvlan_and_legacy_ptp_then_a_failing_delegate_rolls_back") {
        return;
    }
    let h = Harness::new("mmix");
    let ctr = h.container("mmix");
    let master = unique("m");
    h.host.ip(&["link", "add", &master, "type", "veth", "peer", "name", &format!("{master}p")]);
    h.host.ip(&["link", "set", &master, "up"]);
    let list = chain(
        &h,
        "1.0.0",
        json!([
            {"cniVersion": "0.4.0", "name": "mac", "type": "macvlan", "master": master, "mode": "bridge", "ipam": h.host_local(63)},
            {"cniVersion": "0.2.0", "name": "legacy", "type": "ptp", "ipam": h.host_local(64)}
        ]),
    );
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let r = h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD: {e}")).to_latest();
    for (i, name) in ["eth0", "net1", "net2"].iter().enumerate() {
        let kernel = ctr.addresses(name);
        assert_eq!(kernel.len(), 1, "{name}: {kernel:?}");
        assert_eq!(r.ips[i].address.to_string(), kernel[0]);
        let iface = &r.interfaces[r.ips[i].interface.unwrap() as usize];
        assert_eq!((iface.name.as_str(), iface.sandbox.as_str()), (*name, rt.netns.as_str()));
        if let Some(mac) = ctr.link(name).unwrap()["address"].as_str() {
            if !iface.mac.is_empty() {
                assert_eq!(cni_types::Mac::parse(&iface.mac).unwrap(), cni_types::Mac::parse(mac).unwrap(), "{name}");
            }
        }
    }
    h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL: {e}"));
    assert!(leftovers(&h).is_empty(), "{:?}", h.dir.files());

    // A failing merger delegate: its own delegates are rolled back, the chain's DEL succeeds.
    let failing = chain(
        &h,
        "1.0.0",
        json!([
            {"cniVersion": "0.4.0", "name": "side", "type": "ptp", "ipam": h.host_local(65)},
            {"type": "braid-fault", "fail": {"command": "ADD", "code": 11, "msg": "try again"}}
        ]),
    );
    let rt2 = h.runtime(&ctr, &unique("ctr"), "eth0");
    let e = h.add(&failing, &rt2).unwrap_err();
    assert_eq!(e.cause().unwrap().code, 11);
    assert!(e.to_string().contains("type=\"merger\"") && e.to_string().contains("delegate 1"), "{e}");
    assert!(ctr.link("net1").is_none(), "the merger's ptp attachment was not rolled back");
    h.del(&failing, &rt2).unwrap_or_else(|e| panic!("chain DEL after failed ADD: {e}"));
    assert!(ctr.link("eth0").is_none());
    assert!(leftovers(&h).is_empty(), "{:?}", h.dir.files());
}

/// The merger killed at any moment of its ADD (its delegate is slow), then DEL as libcni sends
/// it: nothing is left right after DEL, nor once an orphaned delegate would have finished.
#[test]
fn sigkill_of_the_merger_at_any_moment_then_del_leaves_nothing() {
    if !require_root("sigkill_of_the_merger_at_any_moment_then_del_leaves_nothing") {
        return;
    }
    let h = Harness::new("mkl");
    let ctr = h.container("mkl");
    let slow = json!({"cniVersion": "1.0.0", "name": "slow", "type": "braid-fault", "link": true, "sleepOn": "ADD", "sleepMs": 300,
        "result": {"cniVersion": "1.0.0", "interfaces": [{"name": "net1"}]}});
    let prev = json!({"cniVersion": "1.0.0", "interfaces": [{"name": "eth0"}], "ips": [{"address": "198.18.176.2/24", "interface": 0}]});
    let conf = json!({"cniVersion": "1.0.0", "name": "mnet", "type": "merger", "stateDir": h.dir.path().join("state"),
        "delegates": [slow], "prevResult": prev});
    let stdin = serde_json::to_vec(&conf).unwrap();
    for round in 0..20u64 {
        let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
        let after = std::time::Duration::from_millis((round * 89) % 400);
        let started = std::time::Instant::now();
        h.kill_during_add("merger", &rt, &stdin, move || started.elapsed() >= after);
        h.exec_plugin("merger", cni_types::version::Command::Del, &rt, &stdin)
            .unwrap_or_else(|e| panic!("round {round}: DEL after SIGKILL at {after:?}: {e}"));
        let check = |when: &str| {
            assert_eq!(ctr.links(), ["lo"], "round {round} (kill at {after:?}), {when}");
            let state = h.state_files();
            assert!(state.is_empty(), "round {round}, {when}: {state:?}");
        };
        check("right after DEL");
        std::thread::sleep(std::time::Duration::from_millis(350));
        check("after an orphan would have finished");
    }
}

/// `"parallel": true` in the merger: its delegates attach at once (they meet: each ADD waits
/// until both run), the merged result is the sequential one (same ranges in a fresh harness, so
/// the same addresses), and DEL leaves nothing.
#[test]
fn parallel_merger_attaches_at_once_with_the_sequential_result() {
    if !require_root("parallel_merger_attaches_at_once_with_the_sequential_result") {
        return;
    }
    let linking = |name: &str| json!({"cniVersion": "1.0.0", "name": name, "type": "braid-fault", "link": true, "result": {"cniVersion": "1.0.0"}});
    let mut shapes = Vec::new();
    for parallel in [false, true] {
        let h = Harness::new(if parallel { "mpp" } else { "mps" });
        let ctr = h.container("mp");
        let meeting = h.meeting("add", 2);
        let (s1, s2) = if parallel {
            (meeting.join(linking("s1"), "ADD"), meeting.join(linking("s2"), "ADD"))
        } else {
            (linking("s1"), linking("s2"))
        };
        let mut list = chain(
            &h,
            "1.0.0",
            json!([{"cniVersion": "1.0.0", "name": "side", "type": "ptp", "ipam": h.host_local(62)}, s1, s2]),
        );
        list["plugins"][1]["parallel"] = json!(parallel);
        let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
        let r = h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD (parallel {parallel}): {e}")).to_latest();
        if parallel {
            assert_eq!(meeting.outcome(), (2, 0), "(met, alone): the parallel merger's ADDs did not run at once");
        }
        // What must not differ: the addresses, their interfaces, the routes, the DNS.
        let ips: Vec<(String, Option<String>)> = r
            .ips
            .iter()
            .map(|ip| (ip.address.to_string(), ip.interface.map(|i| r.interfaces[i as usize].name.clone())))
            .collect();
        let names: Vec<String> =
            r.interfaces.iter().filter(|i| !i.sandbox.is_empty()).map(|i| i.name.clone()).collect();
        let routes: Vec<String> = r.routes.iter().map(|x| x.dst.to_string()).collect();
        shapes.push((ips, names, routes));
        h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL (parallel {parallel}): {e}"));
        assert_eq!(ctr.links(), ["lo"]);
        assert!(leftovers(&h).is_empty(), "{:?}", h.dir.files());
    }
    assert_eq!(shapes[0], shapes[1]);
}
