//! The delegator in real namespaces with the reference plugins as delegates.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::{require_root, unique, Harness};
use serde_json::{json, Value};

fn delegator_list(h: &Harness, version: &str, mode: &str, delegates: Value) -> Value {
    json!({
        "cniVersion": version,
        "name": unique("multi"),
        "plugins": [{
            "type": "delegator",
            "stateDir": h.dir.path().join("state"),
            "result": mode,
            "timeout": 5,
            "delegates": delegates
        }]
    })
}

#[test]
fn bridge_and_ptp_merged_then_deleted() {
    if !require_root("bridge_and_ptp_merged_then_deleted") {
        return;
    }
    let h = Harness::new("dlg");
    let ctr = h.container("dlg");
    let list = delegator_list(
        &h,
        "1.1.0",
        "merged",
        json!([
            {"cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "bridge": unique("br"), "isGateway": true, "ipam": h.host_local(30)},
            {"cniVersion": "0.4.0", "name": "side", "type": "ptp", "ipam": h.host_local(31)}
        ]),
    );
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let r = h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD: {e}")).to_latest();
    // The kernel shows both attachments.
    let eth0 = ctr.addresses("eth0");
    let net1 = ctr.addresses("net1");
    assert_eq!(eth0.len(), 1);
    assert_eq!(net1.len(), 1);
    assert!(eth0[0].starts_with("198.18.30.") && net1[0].starts_with("198.18.31."));
    // Field by field: cluster IP first, each IP points at its own container interface.
    assert_eq!(r.ips.len(), 2);
    assert_eq!(r.ips[0].address.to_string(), eth0[0]);
    assert_eq!(r.ips[1].address.to_string(), net1[0]);
    for (ip, name) in r.ips.iter().zip(["eth0", "net1"]) {
        let iface = &r.interfaces[ip.interface.unwrap() as usize];
        assert_eq!(iface.name, name);
        assert_eq!(iface.sandbox, rt.netns);
    }
    assert!(r.routes.iter().any(|x| x.dst.to_string() == "198.19.30.0/24"));
    assert!(r.routes.iter().any(|x| x.dst.to_string() == "198.19.31.0/24"));
    assert_eq!(h.state_files().len(), 1);

    h.check(&list, &rt).unwrap_or_else(|e| panic!("CHECK: {e}"));
    h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL: {e}"));
    assert!(ctr.link("eth0").is_none() && ctr.link("net1").is_none());
    assert!(h.reservations().is_empty(), "{:?}", h.dir.files());
    assert!(h.state_files().is_empty(), "{:?}", h.dir.files());
    h.del(&list, &rt).unwrap_or_else(|e| panic!("second DEL: {e}"));
}

#[test]
fn failure_at_two_of_three_leaves_nothing_and_names_the_delegate() {
    if !require_root("failure_at_two_of_three_leaves_nothing_and_names_the_delegate") {
        return;
    }
    let h = Harness::new("rb");
    let ctr = h.container("rb");
    let list = delegator_list(
        &h,
        "1.0.0",
        "primary",
        json!([
            {"cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "bridge": unique("br"), "ipam": h.host_local(32)},
            {"cniVersion": "1.0.0", "name": "broken", "type": "braid-fault", "link": true,
             "fail": {"command": "ADD", "code": 7, "msg": "Invalid Configuration", "details": "injected"}},
            {"cniVersion": "0.4.0", "name": "side", "type": "ptp", "ipam": h.host_local(33)}
        ]),
    );
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let e = h.add(&list, &rt).unwrap_err();
    let cause = e.cause().unwrap();
    assert_eq!(cause.code, 7, "{e}");
    assert!(
        e.to_string().contains(
            "delegate 1 (network \"broken\", type \"braid-fault\", interface net1) failed: Invalid Configuration"
        ),
        "{}",
        e.to_string()
    );
    assert!(ctr.link("eth0").is_none(), "bridge attachment not rolled back");
    assert!(h.reservations().is_empty(), "{:?}", h.dir.files());
    assert!(h.state_files().is_empty(), "{:?}", h.dir.files());
    // The runtime's DEL after a failed ADD succeeds.
    h.del(&list, &rt).unwrap();
}

#[test]
fn plan_errors_run_nothing() {
    if !require_root("plan_errors_run_nothing") {
        return;
    }
    let h = Harness::new("plan");
    let ctr = h.container("plan");
    let log = h.dir.path().join("calls.log");
    let fault = json!({"type": "braid-fault", "log": log});
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    for (delegates, want) in [
        (json!([fault, {"network": fault, "ifname": "eth0"}]), "already used by another delegate"),
        (json!([fault, {"network": fault, "ifname": "bad/name"}]), "interface name \"bad/name\""),
        (json!([fault, {"type": "../bin/sh"}]), "must be a plugin name, not a path"),
    ] {
        let e = h.add(&delegator_list(&h, "1.1.0", "merged", delegates), &rt).unwrap_err();
        assert_eq!(e.cause().unwrap().code, 7, "{e}");
        assert!(e.to_string().contains(want), "{e}");
    }
    let e = h.add(&delegator_list(&h, "0.2.0", "merged", json!([fault, fault])), &rt).unwrap_err();
    assert!(e.to_string().contains("use cniVersion 0.3.0 or later"), "{e}");
    ctr.ip(&["link", "add", "net1", "type", "veth", "peer", "name", "net1peer"]);
    let named = json!([fault, {"network": fault, "ifname": "net1"}]);
    let e = h.add(&delegator_list(&h, "1.1.0", "merged", named), &rt).unwrap_err();
    assert_eq!(e.cause().unwrap().code, 7, "{e}");
    assert!(
        e.to_string().contains("delegates[1] (") && e.to_string().contains("interface net1 already exists"),
        "{}",
        e.to_string()
    );
    assert!(!log.exists(), "a delegate ran despite an invalid plan");
    // Without an explicit name, the taken net1 is skipped: the delegate gets net2.
    let r = h.add(&delegator_list(&h, "1.1.0", "merged", json!([fault, fault])), &rt).unwrap().to_latest();
    let names: Vec<&str> = r.interfaces.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["eth0", "net2"]);
}

fn bridge_ptp(h: &Harness, a: u8, b: u8) -> Value {
    json!([
        {"cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "bridge": unique("br"), "ipam": h.host_local(a)},
        {"cniVersion": "0.4.0", "name": "side", "type": "ptp", "ipam": h.host_local(b)}
    ])
}

#[test]
fn hung_delegate_is_killed_and_rolled_back() {
    if !require_root("hung_delegate_is_killed_and_rolled_back") {
        return;
    }
    let h = Harness::new("hang");
    let ctr = h.container("hang");
    let mut delegates = bridge_ptp(&h, 34, 35);
    delegates.as_array_mut().unwrap().push(json!({"type": "braid-fault", "sleepOn": "ADD", "sleepMs": 20000}));
    let mut list = delegator_list(&h, "1.1.0", "merged", delegates);
    list["plugins"][0]["timeout"] = json!(1);
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let e = h.add(&list, &rt).unwrap_err();
    assert!(e.to_string().contains("delegate 2") && e.to_string().contains("timed out after 1s"), "{e}");
    assert!(ctr.link("eth0").is_none() && ctr.link("net1").is_none());
    assert!(h.reservations().is_empty(), "{:?}", h.dir.files());
    assert!(h.state_files().is_empty(), "{:?}", h.dir.files());
}

#[test]
fn del_without_state_twice_after_netns_gone_and_with_truncated_state() {
    if !require_root("del_without_state_twice_after_netns_gone_and_with_truncated_state") {
        return;
    }
    let h = Harness::new("dels");
    // 1. DEL with no state at all (ADD never ran) succeeds.
    let ctr = h.container("dels");
    let list = delegator_list(&h, "1.0.0", "primary", bridge_ptp(&h, 36, 37));
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL without state: {e}"));

    // 2. Truncated state: DEL falls back to the configuration and releases IPAM.
    h.add(&list, &rt).unwrap();
    assert_eq!(h.reservations().len(), 2);
    let state = h.dir.path().join("state").join(format!("{}@eth0", rt.container_id));
    let bytes = std::fs::read(&state).unwrap();
    std::fs::write(&state, &bytes[..bytes.len() / 2]).unwrap();
    h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL with truncated state: {e}"));
    assert!(h.reservations().is_empty(), "{:?}", h.dir.files());
    assert!(ctr.link("eth0").is_none() && ctr.link("net1").is_none());

    // 3. DEL after the namespace was deleted, then DEL again.
    let ctr2 = h.container("gone");
    let rt2 = h.runtime(&ctr2, &unique("ctr"), "eth0");
    h.add(&list, &rt2).unwrap();
    drop(ctr2);
    h.del(&list, &rt2).unwrap_or_else(|e| panic!("DEL after netns deleted: {e}"));
    h.del(&list, &rt2).unwrap_or_else(|e| panic!("DEL twice: {e}"));
    assert!(h.reservations().is_empty(), "{:?}", h.dir.files());
    assert!(h.state_files().is_empty(), "{:?}", h.dir.files());
}

#[test]
fn sigkill_during_the_second_delegate_then_del_cleans_up() {
    if !require_root("sigkill_during_the_second_delegate_then_del_cleans_up") {
        return;
    }
    let h = Harness::new("kill");
    let ctr = h.container("kill");
    let mut delegates = bridge_ptp(&h, 38, 39);
    delegates[1] = json!({"type": "braid-fault", "sleepOn": "ADD", "sleepMs": 3000});
    let list = delegator_list(&h, "1.0.0", "primary", delegates);
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let state_dir = h.dir.path().join("state");
    // Killed once the bridge is attached and the fault plugin is sleeping.
    h.kill_during_add("delegator", &rt, &Harness::first_plugin_stdin(&list), move || {
        std::fs::read_dir(&state_dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|s| s.contains("\"phase\":\"added\"")))
    });
    assert_eq!(ctr.addresses("eth0").len(), 1, "the first delegate should have attached before the kill");
    h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL after crash: {e}"));
    assert!(ctr.link("eth0").is_none());
    assert!(h.reservations().is_empty(), "{:?}", h.dir.files());
    assert!(h.state_files().is_empty(), "{:?}", h.dir.files());
}

/// bridge (1.0.0), ptp (0.2.0) and macvlan on a veth master (0.4.0), under each delegator version.
#[test]
fn three_delegates_mixed_versions_under_each_delegator_version() {
    if !require_root("three_delegates_mixed_versions_under_each_delegator_version") {
        return;
    }
    for (n, version) in ["1.1.0", "1.0.0", "0.4.0"].iter().enumerate() {
        let h = Harness::new("mix");
        let ctr = h.container("mix");
        let master = unique("m");
        h.host.ip(&["link", "add", &master, "type", "veth", "peer", "name", &format!("{master}p")]);
        h.host.ip(&["link", "set", &master, "up"]);
        let base = 40 + 3 * n as u8;
        let delegates = json!([
            {"cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "bridge": unique("br"), "ipam": h.host_local(base)},
            {"cniVersion": "0.2.0", "name": "legacy", "type": "ptp", "ipam": h.host_local(base + 1)},
            {"cniVersion": "0.4.0", "name": "mac", "type": "macvlan", "master": master, "mode": "bridge", "ipam": h.host_local(base + 2)}
        ]);
        let list = delegator_list(&h, version, "merged", delegates);
        let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
        let result = h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD under {version}: {e}"));
        assert_eq!(result.version(), *version);
        let r = result.to_latest();
        for (i, ifname) in ["eth0", "net1", "net2"].iter().enumerate() {
            let kernel = ctr.addresses(ifname);
            assert_eq!(kernel.len(), 1, "{version}: {ifname} has {kernel:?}");
            assert_eq!(r.ips[i].address.to_string(), kernel[0], "{version}: IP {i}");
            let iface = &r.interfaces[r.ips[i].interface.unwrap() as usize];
            assert_eq!((iface.name.as_str(), iface.sandbox.as_str()), (*ifname, rt.netns.as_str()), "{version}");
        }
        assert_eq!(ctr.link("net2").unwrap()["linkinfo"]["info_kind"], "macvlan");
        // Every sandbox interface carries the kernel's MAC — also net1, which the merge made up
        // for the 0.2.0 delegate (podman refuses one without) — and under 1.1.0 its MTU.
        for iface in r.interfaces.iter().filter(|i| !i.sandbox.is_empty()) {
            let link = ctr.link(&iface.name).unwrap();
            assert_eq!(iface.mac, link["address"].as_str().unwrap(), "{version}: {}", iface.name);
            let mtu = if *version == "1.1.0" { link["mtu"].as_i64().unwrap() } else { 0 };
            assert_eq!(iface.mtu, mtu, "{version}: {}", iface.name);
        }
        h.check(&list, &rt).unwrap_or_else(|e| panic!("CHECK under {version}: {e}"));
        h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL under {version}: {e}"));
        for ifname in ["eth0", "net1", "net2"] {
            assert!(ctr.link(ifname).is_none(), "{version}: {ifname} left");
        }
        assert!(h.reservations().is_empty(), "{version}: {:?}", h.dir.files());
        assert!(h.state_files().is_empty(), "{version}: {:?}", h.dir.files());
    }
}

#[test]
fn named_and_conflist_delegates_dns_gc_status_and_parallel_containers() {
    if !require_root("named_and_conflist_delegates_dns_gc_status_and_parallel_containers") {
        return;
    }
    let h = Harness::new("named");
    let confdir = h.dir.path().join("net.d");
    std::fs::create_dir_all(&confdir).unwrap();
    let log = h.dir.path().join("fault.log");
    // A named network, found by name in confDir (an unrelated file sorts first).
    std::fs::write(
        confdir.join("00-other.conflist"),
        json!({"cniVersion": "1.0.0", "name": "other", "plugins": [{"type": "ptp"}]}).to_string(),
    )
    .unwrap();
    std::fs::write(
        confdir.join("10-side.conflist"),
        json!({"cniVersion": "0.4.0", "name": "side", "plugins": [
            {"type": "ptp", "ipam": h.host_local(51), "dns": {"nameservers": ["198.18.51.53"], "search": ["side.example"]}}
        ]})
        .to_string(),
    )
    .unwrap();
    let mut list = delegator_list(
        &h,
        "1.1.0",
        "merged",
        json!([
            {"cniVersion": "1.0.0", "name": "cluster", "plugins": [
                {"type": "bridge", "bridge": unique("br"), "ipam": h.host_local(50),
                 "dns": {"nameservers": ["198.18.50.53"], "domain": "cluster.example", "search": ["cluster.example"]}},
                {"type": "tuning", "mtu": 1400}
            ]},
            "side",
            {"cniVersion": "1.1.0", "name": "probe", "type": "braid-fault", "log": log}
        ]),
    );
    list["plugins"][0]["confDir"] = json!(confdir);

    // Several containers in parallel: state is per container, nothing is shared.
    let ctrs: Vec<_> = (0..3).map(|_| h.container("par")).collect();
    let rts: Vec<_> = ctrs.iter().map(|c| h.runtime(c, &unique("ctr"), "eth0")).collect();
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = rts.iter().map(|rt| s.spawn(|| h.add(&list, rt))).collect();
        handles.into_iter().map(|j| j.join().unwrap()).collect()
    });
    for (r, ctr) in results.iter().zip(&ctrs) {
        let r = r.as_ref().unwrap_or_else(|e| panic!("parallel ADD: {e}")).to_latest();
        assert_eq!(r.dns.nameservers, ["198.18.50.53", "198.18.51.53"]);
        assert_eq!(r.dns.search, ["cluster.example", "side.example"]);
        assert_eq!(r.dns.domain, "cluster.example");
        assert_eq!(ctr.link("eth0").unwrap()["mtu"], 1400, "tuning in the inline conflist ran");
        assert_eq!(ctr.addresses("net1").len(), 1, "the named network attached net1");
        assert!(ctr.link("net2").is_none(), "the probe creates no link");
    }
    assert_eq!(h.state_files().len(), 3);

    h.status(&list).unwrap_or_else(|e| panic!("STATUS: {e}"));
    // GC keeps container 0 only.
    let keep = [cni_types::config::GcAttachment { container_id: rts[0].container_id.clone(), ifname: "eth0".into() }];
    h.gc(&list, Some(&keep)).unwrap_or_else(|e| panic!("GC: {e}"));
    assert_eq!(h.state_files(), vec![format!("state/{}@eth0", rts[0].container_id)]);
    let calls: Vec<Value> =
        std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let gc = calls.iter().find(|c| c["command"] == "GC").expect("the 1.1.0 delegate got GC");
    let sent: Value = serde_json::from_str(gc["stdin"].as_str().unwrap()).unwrap();
    assert_eq!(sent["cni.dev/valid-attachments"][0]["containerID"], rts[0].container_id.as_str());
    assert!(calls.iter().any(|c| c["command"] == "STATUS"));

    // DEL everything in parallel; the configuration (not only state) covers the GC'd ones.
    std::thread::scope(|s| {
        for rt in &rts {
            let (h, list) = (&h, &list);
            s.spawn(move || h.del(list, rt).unwrap_or_else(|e| panic!("parallel DEL: {e}")));
        }
    });
    for ctr in &ctrs {
        assert!(ctr.link("eth0").is_none() && ctr.link("net1").is_none());
    }
    assert!(h.reservations().is_empty(), "{:?}", h.dir.files());
    assert!(h.state_files().is_empty(), "{:?}", h.dir.files());
}

/// Two delegator networks set up at once in one pod (as go-cni does for `max_conf_num > 1`,
/// on eth0 and eth1): each chooses its `net<N>` under the namespace's lock, so all differ.
#[test]
fn concurrent_networks_in_one_pod_get_distinct_names() {
    if !require_root("concurrent_networks_in_one_pod_get_distinct_names") {
        return;
    }
    let h = Harness::new("conc");
    let ctr = h.container("conc");
    let id = unique("ctr");
    let lists: Vec<Value> = (0..2u8)
        .map(|k| {
            let d = json!([
                {"cniVersion": "1.0.0", "name": "a", "type": "ptp", "ipam": h.host_local(150 + 3 * k)},
                {"cniVersion": "1.0.0", "name": "b", "type": "ptp", "ipam": h.host_local(151 + 3 * k)},
                {"cniVersion": "1.0.0", "name": "c", "type": "ptp", "ipam": h.host_local(152 + 3 * k)}
            ]);
            delegator_list(&h, "1.0.0", "merged", d)
        })
        .collect();
    let rts = [h.runtime(&ctr, &id, "eth0"), h.runtime(&ctr, &id, "eth1")];
    let results: Vec<_> = std::thread::scope(|s| {
        let (h, lists, rts) = (&h, &lists, &rts);
        let handles: Vec<_> = (0..2).map(|k| s.spawn(move || h.add(&lists[k], &rts[k]))).collect();
        handles.into_iter().map(|j| j.join().unwrap().unwrap().to_latest()).collect()
    });
    let mut names: Vec<String> = results
        .iter()
        .flat_map(|r| r.interfaces.iter().filter(|i| !i.sandbox.is_empty()).map(|i| i.name.clone()))
        .collect();
    names.sort();
    assert_eq!(names, ["eth0", "eth1", "net1", "net2", "net3", "net4"]);
    for n in &names {
        assert_eq!(ctr.addresses(n).len(), 1, "{n}");
    }
    for k in 0..2 {
        h.del(&lists[k], &rts[k]).unwrap();
    }
    assert_eq!(ctr.links(), ["lo"]);
    assert!(h.reservations().is_empty() && h.state_files().is_empty(), "{:?}", h.dir.files());
}

/// A runtime that sends `CNI_ARGS` without `IgnoreUnknown=1` (crictl-style clients, scripts):
/// Debian's bridge refuses the keys it does not know, but through the delegator it gets
/// `IgnoreUnknown=1` on ADD, CHECK and DEL.
#[test]
fn delegates_get_ignore_unknown_when_the_runtime_leaves_it_out() {
    if !require_root("delegates_get_ignore_unknown_when_the_runtime_leaves_it_out") {
        return;
    }
    let h = Harness::new("ign");
    let ctr = h.container("ign");
    let bridge = json!({"cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "bridge": unique("br"), "ipam": h.host_local(160)});
    let mut rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    rt.args = "K8S_POD_NAME=pod;K8S_POD_NAMESPACE=ns".into();
    // The control: bridge itself refuses these args.
    let direct = json!({"cniVersion": "1.0.0", "name": "direct", "plugins": [bridge]});
    let e = h.add(&direct, &rt).unwrap_err();
    assert!(e.to_string().contains("unknown args"), "{e}");
    let list = delegator_list(&h, "1.0.0", "primary", json!([bridge]));
    h.add(&list, &rt).unwrap();
    assert_eq!(ctr.addresses("eth0").len(), 1);
    h.check(&list, &rt).unwrap();
    h.del(&list, &rt).unwrap();
    assert!(ctr.link("eth0").is_none());
    assert!(h.reservations().is_empty() && h.state_files().is_empty(), "{:?}", h.dir.files());
}

/// A delegate that is itself a braid network (a conflist with the merger): the nested plugin
/// does not wait for the pod namespace's lock its caller holds for it, and names stay distinct.
/// Networks that refer back to themselves, directly or through another, are refused at once.
/// A single braid plugin as the first delegate is started ahead of the outer delegator's
/// naming lock, and must still know it holds that lock for it: the inner delegator names its
/// own interface without waiting for the lock (it would wait until its deadline, the outer one
/// holding the lock until the inner one returns) — and around the `net1` the outer one chose
/// for its own second delegate, which does not exist yet when the inner one runs.
#[test]
fn a_braid_plugin_started_ahead_as_the_first_delegate_inherits_the_namespace_lock() {
    if !require_root("a_braid_plugin_started_ahead_as_the_first_delegate_inherits_the_namespace_lock") {
        return;
    }
    let h = Harness::new("nestahead");
    let ctr = h.container("nestahead");
    let inner = json!({"cniVersion": "1.0.0", "name": "inner", "type": "delegator", "deadline": 6,
                       "stateDir": h.dir.path().join("istate"), "delegates": [
        {"cniVersion": "1.0.0", "name": "c", "type": "ptp", "ipam": h.host_local(173)},
        {"cniVersion": "1.0.0", "name": "s", "type": "ptp", "ipam": h.host_local(174)}
    ]});
    let outer = json!({"cniVersion": "1.0.0", "name": "o", "type": "ptp", "ipam": h.host_local(175)});
    let list = delegator_list(&h, "1.0.0", "merged", json!([inner, outer]));
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD: {e}"));
    let mut links = ctr.links();
    links.sort();
    assert_eq!(links, ["eth0", "lo", "net1", "net2"]);
    h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL: {e}"));
    assert_eq!(ctr.links(), ["lo"]);
    assert!(h.reservations().is_empty(), "{:?}", h.dir.files());
}

#[test]
fn nested_braid_networks_work_and_cycles_are_refused_at_once() {
    if !require_root("nested_braid_networks_work_and_cycles_are_refused_at_once") {
        return;
    }
    let h = Harness::new("nest");
    let ctr = h.container("nest");
    let confdir = h.dir.path().join("net.d");
    std::fs::create_dir_all(&confdir).unwrap();
    let write = |file: &str, v: Value| std::fs::write(confdir.join(file), v.to_string()).unwrap();
    write(
        "10-inner.conflist",
        json!({"cniVersion": "1.0.0", "name": "inner", "plugins": [
            {"type": "ptp", "ipam": h.host_local(170)},
            {"type": "merger", "stateDir": h.dir.path().join("mstate"), "delegates": [{"type": "ptp", "ipam": h.host_local(171)}]}
        ]}),
    );
    let mut list = delegator_list(
        &h,
        "1.0.0",
        "merged",
        json!([{"cniVersion": "1.0.0", "name": "cluster", "type": "ptp", "ipam": h.host_local(172)}, "inner"]),
    );
    list["plugins"][0]["confDir"] = json!(confdir);
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    // A nested plugin that waited for the lock its caller holds would fail at its deadline.
    let r = h.add(&list, &rt).unwrap_or_else(|e| panic!("nested ADD: {e}")).to_latest();
    let mut names: Vec<&str> = r.interfaces.iter().filter(|i| !i.sandbox.is_empty()).map(|i| i.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["eth0", "net1", "net2"], "{r:?}");
    h.del(&list, &rt).unwrap();
    assert_eq!(ctr.links(), ["lo"]);

    // A delegator naming its own network; and two networks naming each other.
    let state = h.dir.path().join("state");
    write(
        "20-selfish.conflist",
        json!({"cniVersion": "1.0.0", "name": "selfish", "plugins": [{"type": "delegator", "confDir": confdir, "stateDir": state, "delegates": ["selfish"]}]}),
    );
    write(
        "30-ping.conflist",
        json!({"cniVersion": "1.0.0", "name": "ping", "plugins": [{"type": "delegator", "confDir": confdir, "stateDir": state, "delegates": ["pong"]}]}),
    );
    write(
        "31-pong.conflist",
        json!({"cniVersion": "1.0.0", "name": "pong", "plugins": [{"type": "delegator", "confDir": confdir, "stateDir": state, "delegates": ["ping"]}]}),
    );
    for (file, want) in [("20-selfish.conflist", "is this network itself"), ("30-ping.conflist", "refers back")] {
        let list: Value = serde_json::from_slice(&std::fs::read(confdir.join(file)).unwrap()).unwrap();
        let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
        // Refused by the rule (code 7, naming it), not ended by a timeout or the deadline.
        let e = h.add(&list, &rt).unwrap_err();
        assert_eq!(e.cause().map(|c| c.code), Some(7), "{file}: {e}");
        assert!(e.to_string().contains(want), "{file}: {e}");
        h.del(&list, &rt).unwrap_or_else(|e| panic!("{file}: DEL after a refused ADD: {e}"));
    }
    assert_eq!(ctr.links(), ["lo"]);
    assert!(h.reservations().is_empty(), "{:?}", h.dir.files());
    assert!(h.state_files().is_empty(), "{:?}", h.state_files());
}

/// A 0.2.0 delegate whose result has routes and DNS but no IPs, under a 0.2.0 delegator: Go
/// hands such a result on within its family unchanged (`types020.Result.GetAsVersion`), and so
/// does braid. A result that really cannot be printed in the configuration's version rolls the
/// delegates back instead of leaving the pod half-attached.
#[test]
fn legacy_results_pass_within_their_family_and_unprintable_ones_roll_back() {
    if !require_root("legacy_results_pass_within_their_family_and_unprintable_ones_roll_back") {
        return;
    }
    let h = Harness::new("leg");
    let ctr = h.container("leg");
    let routes_only = json!({"cniVersion": "0.2.0", "ip4": null, "dns": {"nameservers": ["198.18.0.53"]}});
    let fault =
        json!({"cniVersion": "0.2.0", "name": "legacy", "type": "braid-fault", "link": true, "result": routes_only});
    let list = delegator_list(&h, "0.2.0", "primary", json!([fault]));
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let r = h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD: {e}"));
    assert_eq!(r.version(), "0.2.0");
    assert_eq!(r.to_latest().dns.nameservers, ["198.18.0.53"]);
    h.del(&list, &rt).unwrap();

    // 1.0.0 delegate without IPs, 0.2.0 configuration: cannot be printed; nothing is left.
    let no_ips = json!({"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": rt.netns}]});
    let fault = json!({"cniVersion": "1.0.0", "name": "modern", "type": "braid-fault", "link": true, "result": no_ips});
    let list = delegator_list(&h, "0.2.0", "primary", json!([fault]));
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let e = h.add(&list, &rt).unwrap_err();
    assert!(e.to_string().contains("cannot express the result in cniVersion 0.2.0"), "{e}");
    assert!(ctr.link("eth0").is_none(), "the delegate's link was rolled back");
    assert!(h.state_files().is_empty(), "{:?}", h.dir.files());
}

/// `CNI_NETNS` naming a regular file or a namespace of another type is refused with code 4
/// before any delegate runs.
#[test]
fn a_netns_that_is_not_a_network_namespace_is_refused_before_anything_runs() {
    if !require_root("a_netns_that_is_not_a_network_namespace_is_refused_before_anything_runs") {
        return;
    }
    let h = Harness::new("nsk");
    let ctr = h.container("nsk");
    let log = h.dir.path().join("calls.log");
    let list = delegator_list(&h, "1.0.0", "primary", json!([{"type": "braid-fault", "log": log}]));
    let file = h.dir.path().join("not-a-netns");
    std::fs::write(&file, b"").unwrap();
    for path in [file.display().to_string(), "/proc/self/ns/pid".to_string()] {
        let mut rt = h.runtime(&ctr, &unique("ctr"), "eth0");
        rt.netns = path.clone();
        let e = h.add(&list, &rt).unwrap_err();
        assert_eq!(e.cause().map(|c| c.code), Some(4), "{path}: {e}");
        assert!(!log.exists(), "{path}: a delegate ran");
        assert!(h.state_files().is_empty(), "{path}: {:?}", h.dir.files());
    }
}

/// SIGKILL of the delegator at any moment of an ADD whose second delegate is slow, then DEL:
/// once DEL returns nothing is left — also not later, when a delegate the killed delegator had
/// started would have finished on its own (it is ended by DEL first).
#[test]
fn sigkill_at_any_moment_then_del_leaves_nothing_even_later() {
    if !require_root("sigkill_at_any_moment_then_del_leaves_nothing_even_later") {
        return;
    }
    let h = Harness::new("kl");
    let ctr = h.container("kl");
    let slow = json!({"cniVersion": "1.0.0", "name": "slow", "type": "braid-fault", "link": true, "sleepOn": "ADD", "sleepMs": 300,
        "result": {"cniVersion": "1.0.0", "interfaces": [{"name": "net1"}]}});
    let fast = json!({"cniVersion": "1.0.0", "name": "fast", "type": "ptp", "ipam": h.host_local(175)});
    let list = delegator_list(&h, "1.0.0", "merged", json!([fast, slow]));
    let stdin = Harness::first_plugin_stdin(&list);
    for round in 0..20u64 {
        let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
        // Spread the kills over the whole ADD (~0–450 ms), deterministically.
        let after = std::time::Duration::from_millis((round * 97) % 450);
        let started = std::time::Instant::now();
        h.kill_during_add("delegator", &rt, &stdin, move || started.elapsed() >= after);
        h.del(&list, &rt).unwrap_or_else(|e| panic!("round {round}: DEL after SIGKILL at {after:?}: {e}"));
        let check = |when: &str| {
            assert_eq!(ctr.links(), ["lo"], "round {round} (kill at {after:?}), {when}");
            assert!(h.reservations().is_empty(), "round {round}, {when}: {:?}", h.dir.files());
            assert!(h.state_files().is_empty(), "round {round}, {when}: {:?}", h.dir.files());
        };
        check("right after DEL");
        // Longer than the slow delegate's sleep: an orphan would have attached by now.
        std::thread::sleep(std::time::Duration::from_millis(350));
        check("after an orphan would have finished");
    }
}

/// The delegator's own setns(2) calls in one traced run (`strace -f` of it and everything it
/// started): those of its process and its threads, not of the plugins it ran (a process that
/// called execve is a plugin, and so is every thread or process it made).
fn own_setns(trace: &str) -> Vec<String> {
    let Some(me) = trace.split_whitespace().next() else { return Vec::new() };
    let (mut parent, mut execed, mut setns) = (std::collections::HashMap::new(), Vec::new(), Vec::new());
    for (pid, call) in trace.lines().filter_map(|l| l.split_once(' ').map(|(p, rest)| (p.trim(), rest.trim()))) {
        if call.contains("clone") || call.contains("fork") {
            if let Some(child) = call.rsplit("= ").next().filter(|c| c.chars().all(|d| d.is_ascii_digit())) {
                parent.insert(child.to_string(), pid.to_string());
            }
        }
        if call.starts_with("execve(") && pid != me {
            execed.push(pid.to_string());
        }
        if call.starts_with("setns(") {
            setns.push((pid.to_string(), call.to_string()));
        }
    }
    let ours = |start: &str| {
        let mut pid = start.to_string();
        loop {
            if execed.contains(&pid) {
                return false;
            }
            if pid == me {
                return true;
            }
            match parent.get(&pid) {
                Some(p) => pid = String::clone(p),
                None => return false,
            }
        }
    };
    setns.into_iter().filter(|(pid, _)| ours(pid)).map(|(_, call)| call).collect()
}

/// braid as installed (the primary by reference, a networks directory, network-status), a pod
/// selecting nothing and one selecting a network: the delegator enters the pod namespace once
/// per ADD — one setns into it and one back, on its own thread (no thread made for it) — and
/// DEL, which reads nothing there, never.
#[test]
fn an_add_as_installed_enters_the_pod_namespace_once_and_del_never() {
    if !require_root("an_add_as_installed_enters_the_pod_namespace_once_and_del_never") {
        return;
    }
    if std::process::Command::new("strace").arg("-V").output().is_err() {
        panic!("strace is missing (scripts/test.sh installs it)");
    }
    let mut h = Harness::new("dsn");
    let confdir = h.dir.path().join("net.d");
    let nets = h.dir.path().join("braid.d/default");
    std::fs::create_dir_all(&confdir).unwrap();
    std::fs::create_dir_all(&nets).unwrap();
    let conf =
        |name: &str, plugin: Value| json!({"cniVersion": "1.0.0", "name": name, "plugins": [plugin]}).to_string();
    let br = unique("br");
    std::fs::write(
        confdir.join("10-cluster.conflist"),
        conf("cluster", json!({"type": "bridge", "bridge": br, "isGateway": true, "ipam": h.host_local(36)})),
    )
    .unwrap();
    std::fs::write(nets.join("side.conflist"), conf("side", json!({"type": "ptp", "ipam": h.host_local(37)}))).unwrap();
    // The delegator, traced: a wrapper of its name first in CNI_PATH.
    let wrap = h.dir.path().join("traced");
    std::fs::create_dir_all(&wrap).unwrap();
    let script = format!(
        "#!/bin/sh\nexec strace -f -qq -o {}/trace.$CNI_COMMAND -e trace=setns,execve,clone,clone3,fork,vfork {} \"$@\"\n",
        h.dir.path().display(),
        braid_integration::build_dir().join("delegator").display()
    );
    let bin = wrap.join("delegator");
    std::fs::write(&bin, script).unwrap();
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    h.paths.insert(0, wrap);
    let list = json!({"cniVersion": "1.0.0", "name": unique("braid"), "plugins": [{
        "type": "delegator",
        "capabilities": {"io.kubernetes.cri.pod-annotations": true},
        "confDir": confdir,
        "stateDir": h.dir.path().join("state"),
        "delegates": [{"network": "cluster"}],
        "kubernetes": {"networksDir": h.dir.path().join("braid.d"), "globalNamespaces": ["default"],
                       "statusDir": h.dir.path().join("status")}
    }]});
    for networks in ["", "side"] {
        let ctr = h.container("dsn");
        let mut rt = h.runtime(&ctr, &unique("ctr"), "eth0");
        rt.args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p".to_string();
        rt.capability_args = json!({"io.kubernetes.cri.pod-annotations": {"k8s.v1.cni.cncf.io/networks": networks}})
            .as_object()
            .unwrap()
            .clone();
        let r = h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD ({networks:?}): {e}")).to_latest();
        assert!(r.interfaces.iter().any(|i| i.name == "eth0"));
        if networks == "side" {
            assert!(ctr.links().contains(&"net1".to_string()), "{:?}", ctr.links());
        }
        let add = own_setns(&std::fs::read_to_string(h.dir.path().join("trace.ADD")).unwrap());
        assert_eq!(add.len(), 2, "ADD ({networks:?}): into the pod namespace and back: {add:?}");
        h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL: {e}"));
        let del = own_setns(&std::fs::read_to_string(h.dir.path().join("trace.DEL")).unwrap());
        assert_eq!(del, Vec::<String>::new(), "DEL ({networks:?})");
    }
}
