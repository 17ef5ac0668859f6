//! Baseline: the harness drives the real reference plugins through the cni-skel chain and checks
//! the kernel, before any braid plugin is involved.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::{require_root, unique, Harness};
use serde_json::{json, Value};

fn conflist(version: &str, name: &str, bridge: &str, subnet: u8, h: &Harness) -> Value {
    json!({
        "cniVersion": version,
        "name": name,
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": true,
                "ipam": {
                    "type": "host-local",
                    "dataDir": h.ipam_dir(),
                    "ranges": [[{"subnet": format!("198.18.{subnet}.0/24"), "gateway": format!("198.18.{subnet}.1")}]],
                    "routes": [{"dst": "0.0.0.0/0", "gw": format!("198.18.{subnet}.1")}]
                }
            },
            {"type": "tuning", "mtu": 1400, "sysctl": {"net.ipv4.conf.eth0.rp_filter": "2"}}
        ]
    })
}

fn lifecycle(version: &str, subnet: u8, check: bool) {
    let h = Harness::new("base");
    let ctr = h.container("base");
    let name = unique("net");
    let bridge = unique("br");
    let list = conflist(version, &name, &bridge, subnet, &h);
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");

    let result = h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD {version}: {e}"));
    assert_eq!(result.version(), version);
    let r = result.to_latest();
    let addr = r.ips[0].address.to_string();
    assert!(addr.starts_with(&format!("198.18.{subnet}.")), "{addr}");

    // The kernel, not the printed result, is the judge.
    assert_eq!(ctr.addresses("eth0"), vec![addr.clone()]);
    assert_eq!(ctr.link("eth0").unwrap()["mtu"], 1400);
    let routes = ctr.routes();
    assert!(
        routes.iter().any(|r| r["dst"] == "default" && r["gateway"] == format!("198.18.{subnet}.1")),
        "no default route: {routes:?}"
    );
    assert!(h.host.links().contains(&bridge), "bridge missing in host ns");
    let host_veths = h.host.links().into_iter().filter(|l| l.starts_with("veth")).count();
    assert_eq!(host_veths, 1);
    assert_eq!(h.reservations().len(), 1, "{:?}", h.dir.files());
    let cache = h.cache_dir().join("results").join(format!("{name}-{}-eth0", rt.container_id));
    assert!(cache.exists());

    if check {
        h.check(&list, &rt).unwrap_or_else(|e| panic!("CHECK {version}: {e}"));
    }

    h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL {version}: {e}"));
    assert!(ctr.link("eth0").is_none(), "eth0 left in the container");
    assert_eq!(h.host.links().into_iter().filter(|l| l.starts_with("veth")).count(), 0, "veth left on the host");
    assert!(h.reservations().is_empty(), "IP reservation left: {:?}", h.dir.files());
    assert!(!cache.exists(), "cache file left");
    // A repeated DEL succeeds.
    h.del(&list, &rt).unwrap_or_else(|e| panic!("second DEL {version}: {e}"));
}

#[test]
fn bridge_host_local_tuning_1_0_0() {
    if require_root("bridge_host_local_tuning_1_0_0") {
        lifecycle("1.0.0", 10, true);
    }
}

#[test]
fn bridge_host_local_tuning_0_4_0() {
    if require_root("bridge_host_local_tuning_0_4_0") {
        lifecycle("0.4.0", 11, true);
    }
}

#[test]
fn bridge_host_local_tuning_0_2_0() {
    if require_root("bridge_host_local_tuning_0_2_0") {
        lifecycle("0.2.0", 12, false);
    }
}

#[test]
fn status_and_gc_need_1_1_0_and_are_no_ops_below() {
    if !require_root("status_and_gc_need_1_1_0_and_are_no_ops_below") {
        return;
    }
    let h = Harness::new("stat");
    let list = conflist("1.0.0", &unique("net"), &unique("br"), 13, &h);
    h.status(&list).unwrap();
    h.gc(&list, Some(&[])).unwrap();
}

fn fault_plugin(extra: Value) -> Value {
    let mut p = json!({"type": "braid-fault"});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    p
}

#[test]
fn a_failing_plugin_in_the_chain_is_named_and_del_cleans_up() {
    if !require_root("a_failing_plugin_in_the_chain_is_named_and_del_cleans_up") {
        return;
    }
    let h = Harness::new("fail");
    let ctr = h.container("fail");
    let log = h.dir.path().join("calls.log");
    let mut list = conflist("1.0.0", &unique("net"), &unique("br"), 14, &h);
    list["plugins"][1] = fault_plugin(json!({
        "log": log,
        "fail": {"command": "ADD", "code": 7, "msg": "Invalid Configuration", "details": "injected"}
    }));
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let e = h.add(&list, &rt).unwrap_err();
    assert_eq!(e.to_string(), "plugin type=\"braid-fault\" failed (add): Invalid Configuration; injected");
    assert_eq!(e.cause().unwrap().code, 7);
    // The bridge attached before the failure; the runtime's DEL removes it.
    assert_eq!(ctr.addresses("eth0").len(), 1);
    h.del(&list, &rt).unwrap();
    assert!(ctr.link("eth0").is_none());
    assert!(h.reservations().is_empty(), "{:?}", h.dir.files());
    let calls: Vec<Value> =
        std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let commands: Vec<&str> = calls.iter().map(|c| c["command"].as_str().unwrap()).collect();
    assert_eq!(commands, ["ADD", "DEL"]);
    assert_eq!(calls[0]["env"]["CNI_IFNAME"], "eth0");
    assert_eq!(calls[0]["env"]["CNI_CONTAINERID"], rt.container_id.as_str());
}

#[test]
fn fault_plugin_links_are_real_and_removed_on_del() {
    if !require_root("fault_plugin_links_are_real_and_removed_on_del") {
        return;
    }
    let h = Harness::new("link");
    let ctr = h.container("link");
    let list = json!({
        "cniVersion": "1.0.0",
        "name": unique("net"),
        "plugins": [fault_plugin(json!({
            "link": true,
            "result": {"cniVersion": "0.2.0", "ip4": {"ip": "198.18.15.2/24"}}
        }))]
    });
    let rt = h.runtime(&ctr, &unique("ctr"), "net1");
    let r = h.add(&list, &rt).unwrap();
    assert_eq!(r.version(), "0.2.0", "the canned result is printed in its own version");
    assert!(ctr.link("net1").is_some() && ctr.link("net1p").is_some());
    h.del(&list, &rt).unwrap();
    assert!(ctr.link("net1").is_none() && ctr.link("net1p").is_none());
}

#[test]
fn hung_garbage_and_lying_plugins() {
    if !require_root("hung_garbage_and_lying_plugins") {
        return;
    }
    let mut h = Harness::new("odd");
    h.timeout = std::time::Duration::from_millis(500);
    let ctr = h.container("odd");
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let one = |p: Value| json!({"cniVersion": "1.0.0", "name": unique("net"), "plugins": [fault_plugin(p)]});

    // The plugin sleeps 30 s: the timeout, not the plugin, ends it (its message says which).
    let e = h.add(&one(json!({"sleepOn": "ADD", "sleepMs": 30000})), &rt).unwrap_err();
    assert!(e.to_string().starts_with("plugin type=\"braid-fault\" failed (add): "), "{e}");
    assert!(e.to_string().ends_with("timed out after 500ms"), "{e}");

    let e = h.add(&one(json!({"garbageOn": "ADD"})), &rt).unwrap_err();
    assert!(e.to_string().contains("failed to unmarshal raw result"), "{e}");
    let e = h.add(&one(json!({"garbageOn": "ADD", "garbageExit": 1})), &rt).unwrap_err();
    assert!(e.to_string().contains("netplugin failed but error parsing its diagnostic message"), "{e}");
    let e = h.add(&one(json!({"abortOn": "ADD"})), &rt).unwrap_err();
    assert!(e.to_string().contains("netplugin failed"), "{e}");

    // An error object with exit status 0 is, as in libcni, read as a (useless) result.
    let r = h.add(&one(json!({"errorExitZeroOn": "ADD"})), &rt).unwrap();
    assert!(r.to_latest().ips.is_empty());

    // Any plugin binary can be run directly too.
    let out = h.exec_plugin("bridge", cni_types::version::Command::Version, &rt, b"{}").unwrap();
    let info = cni_types::version::VersionInfo::decode(&out).unwrap();
    assert!(info.supported_versions.contains(&"1.0.0".to_string()));
}

/// A namespace a killed process left (its pid no longer running) is deleted by the next harness
/// process; one whose process lives, and one outside the harness's pattern, stay.
#[test]
fn namespaces_of_dead_processes_are_removed_and_no_others() {
    if !require_root("namespaces_of_dead_processes_are_removed_and_no_others") {
        return;
    }
    // pid_max itself is never a pid (pids are below it): a process that is certainly gone.
    let dead: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().parse().unwrap();
    let gone = format!("braid-zz{dead}x0");
    let alive = format!("braid-zz{}x4000000", std::process::id());
    let foreign = format!("zz{dead}x0");
    let ip =
        |args: &[&str]| assert!(std::process::Command::new("ip").args(args).status().unwrap().success(), "ip {args:?}");
    for n in [&gone, &alive, &foreign] {
        ip(&["netns", "add", n]);
    }
    let removed = braid_integration::stale_netns::remove_dead_owners();
    let exists = |n: &str| std::path::Path::new("/run/netns").join(n).exists();
    let (gone_left, alive_left, foreign_left) = (exists(&gone), exists(&alive), exists(&foreign));
    for n in [&alive, &foreign] {
        let _ = std::process::Command::new("ip").args(["netns", "delete", n]).status();
    }
    if gone_left {
        let _ = std::process::Command::new("ip").args(["netns", "delete", &gone]).status();
    }
    assert!(removed.contains(&gone), "{removed:?}");
    assert!(!gone_left);
    assert!(alive_left && foreign_left, "the living process's and the foreign namespace stay");
    assert!(!removed.contains(&alive) && !removed.contains(&foreign), "{removed:?}");
}
