//! vmtap in real namespaces with the reference plugins: the taps, qdiscs and filters it makes
//! (read back with iproute2's `tc`, not with vmtap's own code), its result, CHECK against a
//! tampered namespace, DEL with and without `prevResult`, and nothing else touched.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::{merged_results as merge, require_root, unique, Harness, Netns};
use cni_runtime::chain::RuntimeConf;
use cni_types::version::Command;
use serde_json::{json, Value};
use std::process::Command as Process;

/// `tc -j <args>` inside a namespace.
fn tc(ns: &Netns, args: &[&str]) -> Value {
    let out = Process::new("ip").args(["netns", "exec", ns.name(), "tc", "-j"]).args(args).output().unwrap();
    assert!(out.status.success(), "tc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(if text.trim().is_empty() { "[]" } else { &text }).unwrap()
}

/// `tc <line>` inside a namespace, for changes (the line split at spaces).
fn tc_do(ns: &Netns, line: &str) {
    let args: Vec<&str> = line.split_whitespace().collect();
    let out = Process::new("ip").args(["netns", "exec", ns.name(), "tc"]).args(&args).output().unwrap();
    assert!(out.status.success(), "tc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The devices the match-all filters on `dev`'s ingress redirect to (`mirred egress redirect`).
fn redirect_targets(ns: &Netns, dev: &str) -> Vec<String> {
    let filters = tc(ns, &["filter", "show", "dev", dev, "ingress"]);
    let mut out = Vec::new();
    for f in filters.as_array().unwrap() {
        for a in f["options"]["actions"].as_array().into_iter().flatten() {
            if a["kind"] == "mirred" && a["mirred_action"] == "redirect" && a["direction"] == "egress" {
                assert_eq!(f["protocol"], "all", "{f}");
                out.push(a["to_dev"].as_str().unwrap().to_string());
            }
        }
    }
    out
}

fn has_ingress(ns: &Netns, dev: &str) -> bool {
    tc(ns, &["qdisc", "show", "dev", dev]).as_array().unwrap().iter().any(|q| q["kind"] == "ingress")
}

struct Setup {
    h: Harness,
    ctr: Netns,
    rt: RuntimeConf,
    list: Value,
    master: String,
}

/// `[delegator merged {bridge (eth0), ptp (net1), macvlan (net2)}, vmtap, verifier]` at `version`.
fn merged(tag: &str, version: &str, vmtap: Value) -> Setup {
    let h = Harness::new(tag);
    let ctr = h.container(tag);
    let master = unique("m");
    h.host.ip(&["link", "add", &master, "type", "veth", "peer", "name", &format!("{master}p")]);
    h.host.ip(&["link", "set", &master, "up"]);
    let mut vmtap = vmtap;
    vmtap["type"] = json!("vmtap");
    let list = json!({
        "cniVersion": version,
        "name": unique("vmt"),
        "plugins": [
            {"type": "delegator", "stateDir": h.dir.path().join("state"), "result": "merged", "timeout": 10, "delegates": [
                {"cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "bridge": unique("br"), "isGateway": true, "ipam": h.host_local(80)},
                {"cniVersion": "0.4.0", "name": "side", "type": "ptp", "ipam": h.host_local(81)},
                {"cniVersion": "0.4.0", "name": "mac", "type": "macvlan", "master": master, "mode": "bridge", "ipam": h.host_local(82)}
            ]},
            vmtap,
            {"type": "verifier"}
        ]
    });
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    Setup { h, ctr, rt, list, master }
}

/// A pod with ptp's eth0 (host-local subnet `subnet`), added: the harness, the pod namespace,
/// the conflist, the runtime's call and the result, for vmtap's `prevResult`.
fn ptp_pod(tag: &str, subnet: u8) -> (Harness, Netns, Value, RuntimeConf, Value) {
    let h = Harness::new(tag);
    let ctr = h.container(tag);
    let list =
        json!({"cniVersion": "1.0.0", "name": unique(tag), "plugins": [{"type": "ptp", "ipam": h.host_local(subnet)}]});
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let prev = h.add(&list, &rt).unwrap().to_value();
    (h, ctr, list, rt, prev)
}

/// Tap-like links of the namespace, sorted.
fn taps(ns: &Netns) -> Vec<String> {
    let mut t: Vec<String> = ns.links().into_iter().filter(|l| l.starts_with("tap") || l.starts_with("vm-")).collect();
    t.sort();
    t
}

#[test]
fn every_interface_of_a_merged_result_gets_a_tap_joined_both_ways() {
    if !require_root("every_interface_of_a_merged_result_gets_a_tap_joined_both_ways") {
        return;
    }
    for version in ["1.1.0", "0.4.0"] {
        let s = merged("vmt", version, json!({}));
        let result = s.h.add(&s.list, &s.rt).unwrap_or_else(|e| panic!("ADD {version}: {e}"));
        assert_eq!(result.version(), version);
        let r = result.to_latest();
        // The tc-redirect-tap convention for each pod interface, in result order.
        let netns = s.rt.netns.as_str();
        let id = s.rt.container_id.as_str();
        for (k, pod) in ["eth0", "net1", "net2"].iter().enumerate() {
            let tap = format!("tap{k}");
            let pod_i = r.interfaces.iter().position(|i| i.name == *pod && i.sandbox == netns).unwrap();
            let tap_i = r.interfaces.iter().position(|i| i.name == tap && i.sandbox == netns).unwrap();
            let vm_i = r.interfaces.iter().position(|i| i.name == tap && i.sandbox == id).unwrap();
            assert_eq!(vm_i, tap_i + 1);
            // The VM interface carries the pod interface's MAC as the kernel has it; the tap its own.
            let pod_mac = s.ctr.link(pod).unwrap()["address"].as_str().unwrap().to_string();
            let tap_mac = s.ctr.link(&tap).unwrap()["address"].as_str().unwrap().to_string();
            assert_eq!(r.interfaces[vm_i].mac, pod_mac);
            assert_eq!(r.interfaces[tap_i].mac, tap_mac);
            // Every IP of the pod interface is copied to the VM interface.
            let ips = |i: usize| -> Vec<String> {
                r.ips.iter().filter(|ip| ip.interface == Some(i as i64)).map(|ip| ip.address.to_string()).collect()
            };
            assert!(!ips(pod_i).is_empty());
            assert_eq!(ips(pod_i), ips(vm_i), "{pod}");
            // In the kernel: a persistent tap with the pod interface's MTU, up, and the two redirects.
            let link = s.ctr.link(&tap).unwrap();
            assert_eq!(link["linkinfo"]["info_kind"], "tun", "{link}");
            assert_eq!(link["linkinfo"]["info_data"]["type"], "tap", "{link}");
            assert_eq!(link["mtu"], s.ctr.link(pod).unwrap()["mtu"]);
            assert!(link["flags"].as_array().unwrap().contains(&json!("UP")), "{link}");
            assert!(has_ingress(&s.ctr, pod) && has_ingress(&s.ctr, &tap));
            assert_eq!(redirect_targets(&s.ctr, pod), vec![tap.clone()]);
            assert_eq!(redirect_targets(&s.ctr, &tap), vec![pod.to_string()]);
        }
        assert_eq!(taps(&s.ctr), ["tap0", "tap1", "tap2"]);
        s.h.check(&s.list, &s.rt).unwrap_or_else(|e| panic!("CHECK {version}: {e}"));

        // vmtap alone first (the chain's DEL would remove the pod interfaces and their qdiscs with
        // them): its qdiscs and filters go, the pod interfaces stay.
        let conf = json!({"cniVersion": version, "name": "x", "type": "vmtap", "prevResult": result.to_value()});
        s.h.exec_plugin("vmtap", Command::Del, &s.rt, &serde_json::to_vec(&conf).unwrap()).unwrap();
        assert!(taps(&s.ctr).is_empty(), "{:?}", s.ctr.links());
        for pod in ["eth0", "net1", "net2"] {
            assert!(s.ctr.link(pod).is_some(), "{pod}");
            assert!(!has_ingress(&s.ctr, pod), "{pod} keeps vmtap's ingress qdisc");
        }
        s.h.del(&s.list, &s.rt).unwrap();
        assert_eq!(s.ctr.links(), ["lo"]);
        assert!(s.h.reservations().is_empty() && s.h.state_files().is_empty());
        s.h.del(&s.list, &s.rt).unwrap();
        let _ = s.master;
    }
}

#[test]
fn check_names_what_was_tampered_with() {
    if !require_root("check_names_what_was_tampered_with") {
        return;
    }
    let s = merged("vmtc", "1.0.0", json!({}));
    let r = s.h.add(&s.list, &s.rt).unwrap().to_value();
    s.h.check(&s.list, &s.rt).unwrap();
    // The tap's way back to net1 removed.
    tc_do(&s.ctr, "filter del dev tap1 ingress");
    let e = s.h.check(&s.list, &s.rt).unwrap_err().to_string();
    assert!(e.contains("no filter on tap1's ingress redirects every frame to net1"), "{e}");
    // vmtap's own CHECK, as the runtime calls it with the cached result: code 130, one detail each.
    let conf = json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap", "prevResult": r});
    match s.h.exec_plugin("vmtap", Command::Check, &s.rt, &serde_json::to_vec(&conf).unwrap()) {
        Err(cni_runtime::invoke::InvokeError::Plugin(e)) => {
            assert_eq!(e.code, 130, "{e:?}");
            assert_eq!(e.details, "no filter on tap1's ingress redirects every frame to net1");
        }
        other => panic!("{other:?}"),
    }
    // The verifier sees it too, through the tap's redirects.
    let conf = json!({"cniVersion": "1.0.0", "name": "x", "type": "verifier", "prevResult": r});
    match s.h.exec_plugin("verifier", Command::Check, &s.rt, &serde_json::to_vec(&conf).unwrap()) {
        Err(cni_runtime::invoke::InvokeError::Plugin(e)) => {
            assert_eq!(e.code, 120, "{e:?}");
            assert!(e.details.contains("no redirect tap1 -> net1"), "{e:?}");
        }
        other => panic!("{other:?}"),
    }
    // DEL still removes everything.
    s.h.del(&s.list, &s.rt).unwrap();
    assert_eq!(s.ctr.links(), ["lo"]);
}

#[test]
fn del_without_prev_result_finds_its_taps_and_touches_nothing_else() {
    if !require_root("del_without_prev_result_finds_its_taps_and_touches_nothing_else") {
        return;
    }
    let s = merged("vmtd", "1.0.0", json!({"interfaces": ["eth0", "net2"], "tapNames": {"net2": "vm-mac"}}));
    let r = s.h.add(&s.list, &s.rt).unwrap().to_latest();
    let names: Vec<&str> =
        r.interfaces.iter().filter(|i| i.sandbox == s.rt.container_id).map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["tap0", "vm-mac"]);
    assert_eq!(taps(&s.ctr), ["tap0", "vm-mac"]);
    assert!(!has_ingress(&s.ctr, "net1"), "net1 was not selected");

    // A second attachment in the same namespace (eth9, by ptp) whose interface already has an
    // ingress qdisc with somebody else's filter when vmtap joins it to a tap of its own.
    let ptp_only =
        json!({"cniVersion": "1.0.0", "name": "pre", "plugins": [{"type": "ptp", "ipam": s.h.host_local(83)}]});
    let other = s.h.runtime(&s.ctr, &s.rt.container_id, "eth9");
    let ptp_result = s.h.add(&ptp_only, &other).unwrap();
    tc_do(&s.ctr, "qdisc add dev eth9 ingress");
    tc_do(&s.ctr, "filter add dev eth9 ingress protocol ip prio 7 u32 match ip src 198.18.99.1/32");
    // (`tc` prints `parent` only while more than one filter chain exists: compare without it.)
    let filters_of_eth9 = || {
        let mut f = tc(&s.ctr, &["filter", "show", "dev", "eth9", "ingress"]);
        f.as_array_mut().unwrap().iter_mut().for_each(|o| drop(o.as_object_mut().unwrap().remove("parent")));
        f
    };
    let theirs = filters_of_eth9();
    let eth9 = |prev: Option<Value>| {
        let mut c = json!({"cniVersion": "1.0.0", "name": "pre", "type": "vmtap", "tapNames": {"eth9": "vm-9"}});
        if let Some(p) = prev {
            c["prevResult"] = p;
        }
        serde_json::to_vec(&c).unwrap()
    };
    s.h.exec_plugin("vmtap", Command::Add, &other, &eth9(Some(ptp_result.to_value()))).unwrap();
    assert_eq!(redirect_targets(&s.ctr, "eth9"), ["vm-9"]);

    // An unrelated tap of the same namespace (another VM's, unmarked) must survive every DEL.
    s.ctr.ip(&["tuntap", "add", "tap7", "mode", "tap"]);

    // DEL as podman sends it after a failed ADD: no prevResult, vmtap alone. Only this
    // attachment's taps go.
    let conf = json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap"});
    s.h.exec_plugin("vmtap", Command::Del, &s.rt, &serde_json::to_vec(&conf).unwrap()).unwrap();
    assert_eq!(taps(&s.ctr), ["tap7", "vm-9"]);
    assert!(!has_ingress(&s.ctr, "eth0"));
    assert!(!has_ingress(&s.ctr, "net2"));
    assert_eq!(redirect_targets(&s.ctr, "eth9"), ["vm-9"]);

    // The eth9 attachment's DEL: its tap and filter go; the qdisc it found and the filter of
    // somebody else's stay exactly as they were.
    s.h.exec_plugin("vmtap", Command::Del, &other, &eth9(None)).unwrap();
    assert_eq!(taps(&s.ctr), ["tap7"]);
    assert!(has_ingress(&s.ctr, "eth9"));
    assert_eq!(filters_of_eth9(), theirs);
    s.h.del(&s.list, &s.rt).unwrap();
    s.h.del(&ptp_only, &other).unwrap();
    // A namespace that is gone is success.
    let gone = RuntimeConf { netns: "/run/netns/braid-gone-vmtap".into(), ..s.rt.clone() };
    s.h.exec_plugin("vmtap", Command::Del, &gone, &serde_json::to_vec(&conf).unwrap()).unwrap();
}

#[test]
fn a_failure_part_way_removes_what_was_made() {
    if !require_root("a_failure_part_way_removes_what_was_made") {
        return;
    }
    // net2's tap name is taken by an existing link: ADD fails after tap0/tap1 would be planned,
    // before any is made; and a name taken only in the kernel (not in the result) fails during the work.
    let s = merged("vmtf", "1.0.0", json!({"tapNames": {"net2": "busy0"}}));
    s.ctr.ip(&["link", "add", "busy0", "type", "veth", "peer", "name", "busy1"]);
    let e = s.h.add(&s.list, &s.rt).unwrap_err().to_string();
    assert!(e.contains("cannot create tap busy0 for net2"), "{e}");
    assert!(taps(&s.ctr).is_empty());
    for pod in ["eth0", "net1", "net2"] {
        assert!(!s.ctr.links().contains(&pod.to_string()) || !has_ingress(&s.ctr, pod), "{pod}");
    }
    // The runtime's DEL after the failed ADD (libcni leaves that to the runtime).
    s.h.del(&s.list, &s.rt).unwrap();
    assert!(s.h.reservations().is_empty());
}

#[test]
fn a_failure_after_some_taps_are_made_rolls_them_back() {
    if !require_root("a_failure_after_some_taps_are_made_rolls_them_back") {
        return;
    }
    // prevResult lists ptp's eth0, then the pod's loopback: eth0's tap is made and joined, then
    // the kernel refuses lo's MTU (65536) for a tap (at most 65535) — a failure in the middle
    // of the work, after the first tap, its qdiscs and its redirects exist.
    let (h, ctr, list, rt, mut prev) = ptp_pod("vmtr", 87);
    let lo_mac = ctr.link("lo").unwrap()["address"].clone();
    prev["interfaces"].as_array_mut().unwrap().push(json!({"name": "lo", "mac": lo_mac, "sandbox": rt.netns}));
    let add =
        serde_json::to_vec(&json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap", "prevResult": prev})).unwrap();
    match h.exec_plugin("vmtap", Command::Add, &rt, &add) {
        Err(cni_runtime::invoke::InvokeError::Plugin(e)) => {
            assert_eq!(e.code, 999, "{e:?}");
            assert!(e.msg.contains("set link tap1"), "{e:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(taps(&ctr).is_empty(), "{:?}", ctr.links());
    assert!(!has_ingress(&ctr, "eth0"), "eth0 keeps the ingress qdisc vmtap added");
    assert!(redirect_targets(&ctr, "lo").is_empty());
    h.del(&list, &rt).unwrap();
    assert_eq!(ctr.links(), ["lo"]);
}

#[test]
fn an_unprivileged_owner_and_a_kata_dan_file() {
    if !require_root("an_unprivileged_owner_and_a_kata_dan_file") {
        return;
    }
    let s = merged("vmto", "1.1.0", json!({}));
    let dan = s.h.dir.path().join("dans");
    let mut list = s.list.clone();
    list["plugins"][1] = json!({"type": "vmtap", "owner": {"uid": 4242, "gid": 4343}, "danDir": dan});
    let r = s.h.add(&list, &s.rt).unwrap().to_latest();
    let link = s.ctr.link("tap0").unwrap();
    assert_eq!(link["linkinfo"]["info_data"]["user"], json!(4242), "{link}");
    assert_eq!(link["linkinfo"]["info_data"]["group"], json!(4343), "{link}");

    let file = dan.join(format!("{}.json", s.rt.container_id));
    let doc: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(doc["netns"], s.rt.netns.as_str());
    let devices = doc["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 3);
    for (k, d) in devices.iter().enumerate() {
        let pod = d["name"].as_str().unwrap();
        assert_eq!(d["device"], json!({"type": "host-tap", "tap_name": format!("tap{k}"), "queue_num": 1}));
        assert_eq!(d["guest_mac"], s.ctr.link(pod).unwrap()["address"]);
        assert_eq!(d["network_info"]["interface"]["mtu"], s.ctr.link(pod).unwrap()["mtu"]);
        let pod_i = r.interfaces.iter().position(|i| i.name == pod && i.sandbox == s.rt.netns).unwrap();
        let want: Vec<String> =
            r.ips.iter().filter(|ip| ip.interface == Some(pod_i as i64)).map(|ip| ip.address.to_string()).collect();
        assert_eq!(d["network_info"]["interface"]["ip_addresses"], json!(want));
    }
    // eth0 (the bridge) carries the default route as an empty `dest`.
    assert!(devices[0]["network_info"]["routes"].as_array().unwrap().iter().all(|r| r["gateway"] == "198.18.80.1"));
    s.h.check(&list, &s.rt).unwrap();
    s.h.del(&list, &s.rt).unwrap();
    assert!(!file.exists());
    assert!(taps(&s.ctr).is_empty());
}

#[test]
fn sigkill_at_any_moment_of_add_then_del_leaves_nothing() {
    if !require_root("sigkill_at_any_moment_of_add_then_del_leaves_nothing") {
        return;
    }
    // Three pod interfaces (ptp, ptp, ptp through the delegator), then vmtap's ADD alone, killed
    // after a delay that sweeps its whole run (a few milliseconds), each followed by vmtap's DEL
    // without prevResult (what a runtime sends after a failed ADD). Whatever the moment, nothing
    // of vmtap may be left, and a fresh ADD must then succeed.
    let h = Harness::new("vmtk");
    let ctr = h.container("vmtk");
    let list = json!({"cniVersion": "1.0.0", "name": unique("vmtk"), "plugins": [
        {"type": "delegator", "stateDir": h.dir.path().join("state"), "result": "merged", "delegates": [
            {"cniVersion": "1.0.0", "name": "a", "type": "ptp", "ipam": h.host_local(84)},
            {"cniVersion": "1.0.0", "name": "b", "type": "ptp", "ipam": h.host_local(85)},
            {"cniVersion": "1.0.0", "name": "c", "type": "ptp", "ipam": h.host_local(86)}
        ]}
    ]});
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let prev = h.add(&list, &rt).unwrap().to_value();
    let add =
        serde_json::to_vec(&json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap", "prevResult": prev})).unwrap();
    let del = serde_json::to_vec(&json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap"})).unwrap();
    let bin = braid_integration::build_dir().join("vmtap");
    let mut killed_mid_way = 0;
    for k in 0..40u64 {
        use std::io::Write;
        let mut child = Process::new(&bin)
            .env("CNI_COMMAND", "ADD")
            .env("CNI_CONTAINERID", &rt.container_id)
            .env("CNI_NETNS", &rt.netns)
            .env("CNI_IFNAME", "eth0")
            .env("CNI_PATH", "/nonexistent")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&add).unwrap();
        std::thread::sleep(std::time::Duration::from_micros(k * 150));
        let _ = child.kill();
        let status = child.wait().unwrap();
        if !status.success() && !taps(&ctr).is_empty() {
            killed_mid_way += 1;
        }
        h.exec_plugin("vmtap", Command::Del, &rt, &del).unwrap_or_else(|e| panic!("DEL after kill {k}: {e}"));
        assert!(taps(&ctr).is_empty(), "kill {k}: {:?}", ctr.links());
        for pod in ["eth0", "net1", "net2"] {
            assert!(!has_ingress(&ctr, pod), "kill {k}: {pod} keeps an ingress qdisc");
        }
    }
    eprintln!("{killed_mid_way} of 40 kills left a tap behind for DEL to remove");
    h.exec_plugin("vmtap", Command::Add, &rt, &add).unwrap();
    assert_eq!(taps(&ctr), ["tap0", "tap1", "tap2"]);
    h.exec_plugin("vmtap", Command::Del, &rt, &del).unwrap();
    h.del(&list, &rt).unwrap();
    assert_eq!(ctr.links(), ["lo"]);
}

/// A pod interface joined by ptp alone (`eth0`), and vmtap's configuration for it.
struct Lone {
    h: Harness,
    ctr: Netns,
    rt: RuntimeConf,
    list: Value,
    prev: Value,
}

fn lone(tag: &str, subnet: u8) -> Lone {
    lone_with(tag, subnet, json!({}))
}

/// [`lone`], ptp given `keys` besides its IPAM.
fn lone_with(tag: &str, subnet: u8, keys: Value) -> Lone {
    let h = Harness::new(tag);
    let ctr = h.container(tag);
    let mut ptp = json!({"type": "ptp", "ipam": h.host_local(subnet)});
    ptp.as_object_mut().unwrap().extend(keys.as_object().unwrap().clone());
    let list = json!({"cniVersion": "1.0.0", "name": unique(tag), "plugins": [ptp]});
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let prev = h.add(&list, &rt).unwrap().to_value();
    Lone { h, ctr, rt, list, prev }
}

impl Lone {
    /// vmtap's stdin: `keys` with `prevResult` (when given).
    fn conf(&self, keys: Value, prev: Option<&Value>) -> Vec<u8> {
        let mut c = json!({"cniVersion": "1.1.0", "name": "x", "type": "vmtap"});
        c.as_object_mut().unwrap().extend(keys.as_object().unwrap().clone());
        if let Some(p) = prev {
            c["prevResult"] = p.clone();
        }
        serde_json::to_vec(&c).unwrap()
    }

    fn vmtap(&self, command: Command, rt: &RuntimeConf, keys: Value, prev: Option<&Value>) -> Result<Vec<u8>, String> {
        self.h.exec_plugin("vmtap", command, rt, &self.conf(keys, prev)).map_err(|e| e.to_string())
    }

    /// vmtap's DEL without `prevResult`: it succeeds and no tap is left.
    fn del_leaves_no_tap(&self) {
        self.vmtap(Command::Del, &self.rt, json!({}), None).unwrap_or_else(|e| panic!("vmtap DEL: {e}"));
        assert!(taps(&self.ctr).is_empty(), "{:?}", self.ctr.links());
    }

    /// vmtap's DEL (again, where the test sent it: it finds nothing), then the pod network's:
    /// nothing is left in the pod namespace but its loopback.
    fn gone(self) {
        self.vmtap(Command::Del, &self.rt, json!({}), None).unwrap();
        self.h.del(&self.list, &self.rt).unwrap();
        assert_eq!(self.ctr.links(), ["lo"]);
    }

    /// Every qdisc of `dev` and every filter of its ingress and egress hooks, as `tc` prints them.
    fn tc_state(&self, dev: &str) -> Value {
        json!({
            "qdiscs": tc(&self.ctr, &["qdisc", "show", "dev", dev]),
            "ingress": tc(&self.ctr, &["filter", "show", "dev", dev, "ingress"]),
            "egress": tc(&self.ctr, &["filter", "show", "dev", dev, "egress"]),
        })
    }
}

#[test]
fn a_clsact_qdisc_already_there_is_used_and_left_as_found() {
    if !require_root("a_clsact_qdisc_already_there_is_used_and_left_as_found") {
        return;
    }
    // eBPF-based CNIs (Cilium, Calico's eBPF data plane) and tools put a clsact qdisc on the pod
    // interface, with filters of their own: vmtap must join the tap under it and leave it, and
    // their filters, as it found them.
    let l = lone("vmtcl", 88);
    tc_do(&l.ctr, "qdisc add dev eth0 clsact");
    for hook in ["ingress", "egress"] {
        tc_do(&l.ctr, &format!("filter add dev eth0 {hook} protocol ip prio 7 u32 match ip src 198.18.99.1/32"));
    }
    let before = l.tc_state("eth0");
    let out =
        l.vmtap(Command::Add, &l.rt, json!({}), Some(&l.prev)).unwrap_or_else(|e| panic!("ADD under clsact: {e}"));
    let result: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(redirect_targets(&l.ctr, "eth0"), ["tap0"]);
    assert_eq!(redirect_targets(&l.ctr, "tap0"), ["eth0"]);
    let qdiscs = tc(&l.ctr, &["qdisc", "show", "dev", "eth0"]);
    assert!(
        qdiscs.as_array().unwrap().iter().all(|q| q["kind"] != "ingress"),
        "vmtap added an ingress qdisc: {qdiscs}"
    );
    l.vmtap(Command::Check, &l.rt, json!({}), Some(&result)).unwrap_or_else(|e| panic!("vmtap CHECK: {e}"));
    let verifier = json!({"cniVersion": "1.1.0", "name": "x", "type": "verifier", "prevResult": result});
    l.h.exec_plugin("verifier", Command::Check, &l.rt, &serde_json::to_vec(&verifier).unwrap())
        .unwrap_or_else(|e| panic!("verifier CHECK: {e}"));
    l.del_leaves_no_tap();
    assert_eq!(l.tc_state("eth0"), before, "eth0's clsact qdisc and its filters are not as vmtap found them");
    l.gone();
}

/// vmtap made eth0's ingress qdisc. An operator then adds a filter in another tc chain of it
/// (same priority and protocol as vmtap's redirect), or replaces the qdisc by a clsact with
/// filters of their own: DEL takes vmtap's redirect and tap, and leaves the rest as it is.
#[test]
fn what_an_operator_put_on_the_pod_ingress_after_add_survives_del() {
    if !require_root("what_an_operator_put_on_the_pod_ingress_after_add_survives_del") {
        return;
    }
    for (tag, subnet, replace) in [("vmtch", 91, false), ("vmtrc", 90, true)] {
        let l = lone(tag, subnet);
        l.vmtap(Command::Add, &l.rt, json!({}), Some(&l.prev)).unwrap_or_else(|e| panic!("ADD: {e}"));
        assert!(has_ingress(&l.ctr, "eth0"));
        if replace {
            tc_do(&l.ctr, "qdisc del dev eth0 ingress");
            tc_do(&l.ctr, "qdisc add dev eth0 clsact");
            for hook in ["ingress", "egress"] {
                tc_do(
                    &l.ctr,
                    &format!("filter add dev eth0 {hook} protocol ip prio 7 u32 match ip src 198.18.99.1/32"),
                );
            }
        } else {
            let filters = tc(&l.ctr, &["filter", "show", "dev", "eth0", "ingress"]);
            let prio = filters.as_array().unwrap().iter().find_map(|f| f["pref"].as_u64()).unwrap();
            tc_do(&l.ctr, &format!("filter add dev eth0 ingress chain 5 protocol all prio {prio} u32 match u8 0 0"));
        }
        // What the operator put there, as tc lists it: the qdisc's kind and their filters.
        let theirs = || {
            let kinds: Vec<Value> = tc(&l.ctr, &["qdisc", "show", "dev", "eth0"])
                .as_array()
                .unwrap()
                .iter()
                .map(|q| q["kind"].clone())
                .collect();
            let hooks = if replace { ["ingress", "egress"].as_slice() } else { ["ingress"].as_slice() };
            let filters: Vec<Value> = hooks
                .iter()
                .map(|hook| {
                    let mut args = vec!["filter", "show", "dev", "eth0", hook];
                    args.extend(if replace { ["pref", "7"] } else { ["chain", "5"] });
                    tc(&l.ctr, &args)
                })
                .collect();
            (kinds, filters)
        };
        let mut before = theirs();
        // tc lists vmtap's redirect (its own u32 hash table) among a chain's filters: leave it
        // out, DEL is to remove it.
        let entries = |v: &Value| v.as_array().unwrap().clone();
        let redirect_table = before.1.iter().flat_map(entries).find_map(|f| {
            let to_tap = f["options"]["actions"].as_array()?.iter().any(|a| a["to_dev"] == "tap0");
            to_tap.then(|| format!("{}:", f["options"]["key_ht"].as_str().unwrap_or_default()))
        });
        if let Some(table) = redirect_table {
            for list in &mut before.1 {
                let kept: Vec<Value> = entries(list)
                    .into_iter()
                    .filter(|f| !f["options"]["fh"].as_str().is_some_and(|fh| fh.starts_with(&table)))
                    .collect();
                *list = Value::Array(kept);
            }
        }
        assert!(before.1.iter().all(|f| !f.as_array().unwrap().is_empty()), "their filters are not listed: {before:?}");
        l.del_leaves_no_tap();
        assert!(redirect_targets(&l.ctr, "eth0").is_empty(), "vmtap's redirect is left");
        assert_eq!(theirs(), before, "DEL touched what the operator put there (replaced: {replace})");
        l.gone();
    }
}

#[test]
fn two_attachments_on_one_pod_interface_leave_nothing_in_either_order() {
    if !require_root("two_attachments_on_one_pod_interface_leave_nothing_in_either_order") {
        return;
    }
    for first_made_first_deleted in [true, false] {
        let l = lone("vmt2a", 89);
        let before = l.tc_state("eth0");
        // Two attachments (CNI_IFNAME eth0 and eth9 of one container) join eth0 to a tap each:
        // the first adds eth0's ingress qdisc, the second finds it.
        let a = l.rt.clone();
        let b = RuntimeConf { ifname: "eth9".into(), ..l.rt.clone() };
        let keys = |tap: &str| json!({"tapNames": {"eth0": tap}});
        l.vmtap(Command::Add, &a, keys("vm-a"), Some(&l.prev)).unwrap();
        l.vmtap(Command::Add, &b, keys("vm-b"), Some(&l.prev)).unwrap();
        let mut targets = redirect_targets(&l.ctr, "eth0");
        targets.sort();
        assert_eq!(targets, ["vm-a", "vm-b"]);
        let order = if first_made_first_deleted { [&a, &b] } else { [&b, &a] };
        l.vmtap(Command::Del, order[0], json!({}), None).unwrap();
        assert!(has_ingress(&l.ctr, "eth0"), "the other attachment's filter lost its qdisc");
        assert_eq!(redirect_targets(&l.ctr, "eth0").len(), 1);
        l.vmtap(Command::Del, order[1], json!({}), None).unwrap();
        assert!(taps(&l.ctr).is_empty(), "{:?}", l.ctr.links());
        assert_eq!(
            l.tc_state("eth0"),
            before,
            "deleted {}: vmtap's ingress qdisc is left on eth0",
            if first_made_first_deleted { "in creation order" } else { "in reverse order" }
        );
        l.gone();
    }
}

/// The verifier's CHECK of a vmtap result: `Ok`, or the details of its mismatch (code 120).
fn verifier_check(h: &Harness, rt: &RuntimeConf, result: &Value) -> Result<(), String> {
    let conf = json!({"cniVersion": "1.1.0", "name": "x", "type": "verifier", "prevResult": result});
    match h.exec_plugin("verifier", Command::Check, rt, &serde_json::to_vec(&conf).unwrap()) {
        Ok(_) => Ok(()),
        Err(cni_runtime::invoke::InvokeError::Plugin(e)) if e.code == 120 => Err(e.details),
        Err(other) => panic!("verifier CHECK: {other}"),
    }
}

#[test]
fn the_verifier_counts_only_redirects_of_every_protocol() {
    if !require_root("the_verifier_counts_only_redirects_of_every_protocol") {
        return;
    }
    let l = lone("vmtvp", 90);
    let out = l.vmtap(Command::Add, &l.rt, json!({}), Some(&l.prev)).unwrap();
    let result: Value = serde_json::from_slice(&out).unwrap();
    verifier_check(&l.h, &l.rt, &result).unwrap();
    // tap0's way back replaced by one for IPv4 only: ARP and IPv6 from the VM never reach eth0.
    tc_do(&l.ctr, "filter del dev tap0 ingress");
    tc_do(&l.ctr, "filter add dev tap0 ingress protocol ip u32 match u8 0 0 action mirred egress redirect dev eth0");
    let details =
        verifier_check(&l.h, &l.rt, &result).expect_err("a redirect of IPv4 alone passed for one of every frame");
    assert!(details.contains("no redirect tap0 -> eth0"), "{details}");
    // vmtap's own CHECK says the same (one rule for both).
    let e = l.vmtap(Command::Check, &l.rt, json!({}), Some(&result)).unwrap_err();
    assert!(e.contains("no filter on tap0's ingress redirects every frame to eth0"), "{e}");
    l.gone();
}

#[test]
fn a_vlan_carrying_the_vm_mac_does_not_mislead_the_verifier() {
    if !require_root("a_vlan_carrying_the_vm_mac_does_not_mislead_the_verifier") {
        return;
    }
    // Links made before the pod's interface (lower ifindexes: listed first) and given the pod
    // interface's MAC afterwards — as a VLAN on the pod interface, or a macvtap, carries it: a
    // VLAN and a macvtap on a veth, each where the kernel has the link kind.
    let h = Harness::new("vmtvl");
    let ctr = h.container("vmtvl");
    ctr.ip(&["link", "add", "d0", "type", "veth", "peer", "name", "d1"]);
    let mut sharing = Vec::new();
    for (name, kind) in [("v5", &["vlan", "id", "5"][..]), ("mvt5", &["macvtap"][..])] {
        let made = Process::new("ip")
            .args(["-n", ctr.name(), "link", "add", "link", "d0", "name", name, "type"])
            .args(kind)
            .output()
            .unwrap();
        if made.status.success() {
            sharing.push(name);
        } else {
            let why = format!("no {} links ({})", kind[0], String::from_utf8_lossy(&made.stderr).trim());
            braid_integration::skip_for_kernel(
                "a_vlan_carrying_the_vm_mac_does_not_mislead_the_verifier, in part",
                &why,
            );
        }
    }
    if sharing.is_empty() {
        return;
    }
    let list =
        json!({"cniVersion": "1.0.0", "name": unique("vmtvl"), "plugins": [{"type": "ptp", "ipam": h.host_local(91)}]});
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let prev = h.add(&list, &rt).unwrap().to_value();
    let add = json!({"cniVersion": "1.1.0", "name": "x", "type": "vmtap", "prevResult": prev});
    let out = h.exec_plugin("vmtap", Command::Add, &rt, &serde_json::to_vec(&add).unwrap()).unwrap();
    let result: Value = serde_json::from_slice(&out).unwrap();
    let mac = ctr.link("eth0").unwrap()["address"].as_str().unwrap().to_string();
    let index = |n: &str| ctr.link(n).unwrap()["ifindex"].as_u64().unwrap();
    for name in &sharing {
        ctr.ip(&["link", "set", name, "address", &mac]);
        assert!(index(name) < index("eth0"), "{name} is not listed before eth0");
    }
    verifier_check(&h, &rt, &result)
        .unwrap_or_else(|d| panic!("links sharing the VM's MAC ({sharing:?}) failed the check: {d}"));
    let del = json!({"cniVersion": "1.1.0", "name": "x", "type": "vmtap"});
    h.exec_plugin("vmtap", Command::Del, &rt, &serde_json::to_vec(&del).unwrap()).unwrap();
    h.del(&list, &rt).unwrap();
    ctr.ip(&["link", "del", "d0"]);
    assert_eq!(ctr.links(), ["lo"]);
}

#[test]
fn the_mtu_reported_is_the_one_the_kernel_set() {
    if !require_root("the_mtu_reported_is_the_one_the_kernel_set") {
        return;
    }
    // ptp sets eth0's MTU to 1400 and, speaking 1.0.0, says nothing of it in its result.
    let l = lone_with("vmtmtu", 92, json!({"mtu": 1400}));
    assert_eq!(l.ctr.link("eth0").unwrap()["mtu"], 1400);
    let mtus = |out: &[u8]| -> Vec<(String, String, i64)> {
        let r: Value = serde_json::from_slice(out).unwrap();
        r["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["name"] == "tap0")
            .map(|i| {
                (
                    i["name"].as_str().unwrap().into(),
                    i["sandbox"].as_str().unwrap().into(),
                    i["mtu"].as_i64().unwrap_or(0),
                )
            })
            .collect()
    };
    let out = l.vmtap(Command::Add, &l.rt, json!({}), Some(&l.prev)).unwrap();
    assert_eq!(l.ctr.link("tap0").unwrap()["mtu"], 1400);
    let want =
        vec![("tap0".to_string(), l.rt.netns.clone(), 1400), ("tap0".to_string(), l.rt.container_id.clone(), 1400)];
    assert_eq!(mtus(&out), want, "the tap and the VM interface carry the MTU the kernel has");
    l.vmtap(Command::Del, &l.rt, json!({}), None).unwrap();
    // A prevResult that says 9000: the tap gets eth0's real MTU, and the result says so.
    let mut lying = l.prev.clone();
    let eth0 = lying["interfaces"].as_array_mut().unwrap().iter_mut().find(|i| i["name"] == "eth0").unwrap();
    eth0["mtu"] = json!(9000);
    let out = l.vmtap(Command::Add, &l.rt, json!({}), Some(&lying)).unwrap();
    assert_eq!(mtus(&out), want);
    l.gone();
}

#[test]
fn two_vmtaps_in_one_chain_name_their_taps_apart() {
    if !require_root("two_vmtaps_in_one_chain_name_their_taps_apart") {
        return;
    }
    // One VMM gets eth0, another net1 (each its own vmtap, say with its own owner).
    let mut s = merged("vmt2c", "1.1.0", json!({"interfaces": ["eth0"]}));
    let plugins = s.list["plugins"].as_array_mut().unwrap();
    plugins.insert(2, json!({"type": "vmtap", "interfaces": ["net1"]}));
    let r =
        s.h.add(&s.list, &s.rt)
            .unwrap_or_else(|e| panic!("ADD of [delegator, vmtap, vmtap, verifier]: {e}"))
            .to_latest();
    let vm: Vec<&str> =
        r.interfaces.iter().filter(|i| i.sandbox == s.rt.container_id).map(|i| i.name.as_str()).collect();
    assert_eq!(vm, ["tap0", "tap1"]);
    assert_eq!(redirect_targets(&s.ctr, "eth0"), ["tap0"]);
    assert_eq!(redirect_targets(&s.ctr, "net1"), ["tap1"]);
    s.h.check(&s.list, &s.rt).unwrap_or_else(|e| panic!("CHECK: {e}"));
    s.h.del(&s.list, &s.rt).unwrap();
    assert_eq!(s.ctr.links(), ["lo"]);

    // Both without keys: the second finds every pod interface handed to a VM already, and says so.
    let mut s = merged("vmt2d", "1.1.0", json!({}));
    s.list["plugins"].as_array_mut().unwrap().insert(2, json!({"type": "vmtap"}));
    let e = s.h.add(&s.list, &s.rt).unwrap_err().to_string();
    assert!(e.contains("every pod interface of prevResult is handed to a VM already"), "{e}");
    s.h.del(&s.list, &s.rt).unwrap();
    assert_eq!(s.ctr.links(), ["lo"]);
    assert!(s.h.reservations().is_empty());
}

#[test]
fn a_mark_of_255_bytes_is_kept_and_a_longer_one_refused_by_name() {
    if !require_root("a_mark_of_255_bytes_is_kept_and_a_longer_one_refused_by_name") {
        return;
    }
    // The mark is the tap's alias; the kernel keeps IFALIASZ − 1 = 255 bytes. A container ID
    // that makes the mark exactly 255 bytes works; one byte more is vmtap's own error.
    let (h, ctr, list, rt, prev) = ptp_pod("vmtm", 88);
    let add =
        serde_json::to_vec(&json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap", "prevResult": prev})).unwrap();
    let del = serde_json::to_vec(&json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap"})).unwrap();
    let frame = "vmtap container= ifname=eth0 pod=eth0 ingress=made".len();
    let id = |len: usize| -> String { (0..len).map(|i| char::from(b'a' + (i % 26) as u8)).collect() };
    let longest = RuntimeConf { container_id: id(255 - frame), ..rt.clone() };
    h.exec_plugin("vmtap", Command::Add, &longest, &add).unwrap_or_else(|e| panic!("a 255-byte mark: {e}"));
    let alias = ctr.link("tap0").unwrap()["ifalias"].as_str().unwrap().to_string();
    assert_eq!(alias, format!("vmtap container={} ifname=eth0 pod=eth0 ingress=made", longest.container_id));
    assert_eq!(alias.len(), 255);
    h.exec_plugin("vmtap", Command::Del, &longest, &del).unwrap();
    assert!(taps(&ctr).is_empty(), "{:?}", ctr.links());

    let too_long = RuntimeConf { container_id: id(256 - frame), ..rt.clone() };
    match h.exec_plugin("vmtap", Command::Add, &too_long, &add) {
        Err(cni_runtime::invoke::InvokeError::Plugin(e)) => {
            assert_eq!(e.code, 7, "{e:?}");
            assert!(e.msg.contains("cannot mark tap tap0 for eth0") && e.msg.contains("256 bytes"), "{e:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(taps(&ctr).is_empty(), "{:?}", ctr.links());
    assert!(!has_ingress(&ctr, "eth0"));
    h.del(&list, &rt).unwrap();
    assert_eq!(ctr.links(), ["lo"]);
}

/// Each tap and its pod interface as the kernel has them: ifindex, MAC, alias, MTU, up, and every qdisc
/// and ingress filter of both — what a converging ADD must leave exactly as it was.
fn wire_state(ns: &Netns, tap: &str, pod: &str) -> Value {
    let link = |dev: &str| {
        let l = ns.link(dev).unwrap();
        // Of the flags, UP alone: carrier (NO-CARRIER, LOWER_UP) settles asynchronously (the
        // kernel's linkwatch) and is none of vmtap's doing.
        let up = l["flags"].as_array().unwrap().contains(&json!("UP"));
        json!([l["ifindex"], l["address"], l["ifalias"], l["mtu"], up])
    };
    let hooks =
        |dev: &str| json!([tc(ns, &["qdisc", "show", "dev", dev]), tc(ns, &["filter", "show", "dev", dev, "ingress"])]);
    json!({"tap": [link(tap), hooks(tap)], "pod": [link(pod), hooks(pod)]})
}

/// The (VM interface name, VM MAC, tap MAC) of every pair of a vmtap result, in order.
fn pairs(result: &Value, rt: &RuntimeConf) -> Vec<(String, String, String)> {
    let ifaces = result["interfaces"].as_array().unwrap();
    ifaces
        .iter()
        .filter(|i| i["sandbox"] == rt.container_id.as_str())
        .map(|vm| {
            let name = vm["name"].as_str().unwrap().to_string();
            let tap = ifaces.iter().find(|t| t["name"] == name.as_str() && t["sandbox"] == rt.netns.as_str()).unwrap();
            (name, vm["mac"].as_str().unwrap().to_string(), tap["mac"].as_str().unwrap().to_string())
        })
        .collect()
}

/// One pod network of the pod, added by a reference plugin with its own `CNI_IFNAME`.
struct PodNet {
    list: Value,
    rt: RuntimeConf,
    result: Value,
}

fn pod_net(h: &Harness, ctr: &Netns, id: &str, ifname: &str, plugin: Value) -> PodNet {
    let list = json!({"cniVersion": "1.0.0", "name": unique(ifname), "plugins": [plugin]});
    let rt = h.runtime(ctr, id, ifname);
    let result = h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD {ifname}: {e}")).to_value();
    PodNet { list, rt, result }
}

#[test]
fn a_second_add_converges_on_the_networks_added_and_removed() {
    if !require_root("a_second_add_converges_on_the_networks_added_and_removed") {
        return;
    }
    let h = Harness::new("vmtcv");
    let ctr = h.container("vmtcv");
    let id = unique("ctr");
    let eth0 = pod_net(&h, &ctr, &id, "eth0", json!({"type": "ptp", "ipam": h.host_local(93)}));
    let net1 = pod_net(&h, &ctr, &id, "net1", json!({"type": "ptp", "ipam": h.host_local(94)}));
    // vmtap's attachment is the pod's (CNI_IFNAME eth0), whatever interfaces prevResult lists.
    let rt = eth0.rt.clone();
    let dan = h.dir.path().join("dans");
    let keys = json!({"danDir": dan});
    let vmtap = |prev: &Value| -> Result<Value, cni_runtime::invoke::InvokeError> {
        let mut c = json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap", "prevResult": prev});
        c.as_object_mut().unwrap().extend(keys.as_object().unwrap().clone());
        let out = h.exec_plugin("vmtap", Command::Add, &rt, &serde_json::to_vec(&c).unwrap())?;
        Ok(serde_json::from_slice(&out).unwrap())
    };
    let check = |result: &Value, verifier: bool| {
        let mut c = json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap", "prevResult": result});
        c.as_object_mut().unwrap().extend(keys.as_object().unwrap().clone());
        h.exec_plugin("vmtap", Command::Check, &rt, &serde_json::to_vec(&c).unwrap())
            .unwrap_or_else(|e| panic!("vmtap CHECK: {e}"));
        if verifier {
            verifier_check(&h, &rt, result).unwrap_or_else(|d| panic!("verifier CHECK: {d}"));
        }
    };
    let dan_taps = || -> Vec<(String, String)> {
        let doc: Value = serde_json::from_slice(&std::fs::read(dan.join(format!("{id}.json"))).unwrap()).unwrap();
        doc["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (d["name"].as_str().unwrap().into(), d["device"]["tap_name"].as_str().unwrap().into()))
            .collect()
    };
    let mac = |dev: &str| ctr.link(dev).unwrap()["address"].as_str().unwrap().to_string();
    let tap_mac = |dev: &str| mac(dev);

    // A first ADD with [eth0, net1].
    let first = vmtap(&merge(&[&eth0.result, &net1.result])).unwrap();
    let want = |list: &[(&str, &str)]| -> Vec<(String, String, String)> {
        list.iter().map(|(tap, pod)| (tap.to_string(), mac(pod), tap_mac(tap))).collect()
    };
    assert_eq!(pairs(&first, &rt), want(&[("tap0", "eth0"), ("tap1", "net1")]));
    let before = [wire_state(&ctr, "tap0", "eth0"), wire_state(&ctr, "tap1", "net1")];

    // net2 is added to the running pod (a bridge): only its tap is new; tap0 and tap1 — their
    // ifindex, MAC, mark, qdiscs and filters, and their pod interfaces' — are exactly as they were.
    let net2 =
        pod_net(&h, &ctr, &id, "net2", json!({"type": "bridge", "bridge": unique("br"), "ipam": h.host_local(95)}));
    let second = vmtap(&merge(&[&eth0.result, &net1.result, &net2.result])).unwrap();
    assert_eq!(pairs(&second, &rt), want(&[("tap0", "eth0"), ("tap1", "net1"), ("tap2", "net2")]));
    assert_eq!([wire_state(&ctr, "tap0", "eth0"), wire_state(&ctr, "tap1", "net1")], before);
    assert_eq!(redirect_targets(&ctr, "net2"), ["tap2"]);
    assert_eq!(redirect_targets(&ctr, "tap2"), ["net2"]);
    assert_eq!(taps(&ctr), ["tap0", "tap1", "tap2"]);
    // The result is what a fresh ADD of the same prevResult writes: the IPs of each pod
    // interface copied to its VM interface, every pair in result order.
    let vm_ips = |r: &Value, vm: &str| -> Vec<String> {
        let at =
            r["interfaces"].as_array().unwrap().iter().position(|i| i["name"] == vm && i["sandbox"] == id.as_str());
        r["ips"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|ip| ip["interface"].as_u64() == at.map(|a| a as u64))
            .map(|ip| ip["address"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(vm_ips(&second, "tap2"), ctr.addresses("net2"));
    assert_eq!(vm_ips(&second, "tap0"), vm_ips(&first, "tap0"));
    check(&second, true);
    assert_eq!(
        dan_taps(),
        [("eth0".into(), "tap0".into()), ("net1".into(), "tap1".into()), ("net2".into(), "tap2".into())]
    );
    // The same ADD again changes nothing.
    let again = vmtap(&merge(&[&eth0.result, &net1.result, &net2.result])).unwrap();
    assert_eq!(again, second);

    // net1 is removed from the pod (its link goes, and with it its qdisc and the filter to
    // tap1): its tap goes, with its own qdisc and filter; the others stay as they were.
    let kept = [wire_state(&ctr, "tap0", "eth0"), wire_state(&ctr, "tap2", "net2")];
    h.del(&net1.list, &net1.rt).unwrap();
    let third = vmtap(&merge(&[&eth0.result, &net2.result])).unwrap();
    assert_eq!(pairs(&third, &rt), want(&[("tap0", "eth0"), ("tap2", "net2")]));
    assert_eq!(taps(&ctr), ["tap0", "tap2"]);
    assert_eq!([wire_state(&ctr, "tap0", "eth0"), wire_state(&ctr, "tap2", "net2")], kept);
    check(&third, true);
    assert_eq!(dan_taps(), [("eth0".into(), "tap0".into()), ("net2".into(), "tap2".into())]);

    // net1 comes back under its old name: another link (another MAC, another ifindex), so a new
    // tap, under a name no tap of the attachment has (tap1 is free again: the one that had it
    // is gone).
    let net1 = pod_net(&h, &ctr, &id, "net1", json!({"type": "ptp", "ipam": h.host_local(94)}));
    let fourth = vmtap(&merge(&[&eth0.result, &net1.result, &net2.result])).unwrap();
    assert_eq!(pairs(&fourth, &rt), want(&[("tap0", "eth0"), ("tap1", "net1"), ("tap2", "net2")]));
    assert_eq!(redirect_targets(&ctr, "net1"), ["tap1"]);

    // eth0 dropped from prevResult while its link stays (a runtime that hands it to no VM any
    // more): its tap goes, and what vmtap put on eth0 (its ingress qdisc and redirect) with it.
    let fifth = vmtap(&merge(&[&net1.result, &net2.result])).unwrap();
    assert_eq!(pairs(&fifth, &rt), want(&[("tap1", "net1"), ("tap2", "net2")]));
    assert_eq!(taps(&ctr), ["tap1", "tap2"]);
    assert!(!has_ingress(&ctr, "eth0"), "eth0 keeps vmtap's ingress qdisc");
    assert!(redirect_targets(&ctr, "eth0").is_empty());
    // (vmtap's CHECK: the verifier would find eth0 in the namespace and not in the result.)
    check(&fifth, false);

    // DEL (without prevResult, as after a crash) removes everything, the DAN file too.
    let del = json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap", "danDir": dan});
    h.exec_plugin("vmtap", Command::Del, &rt, &serde_json::to_vec(&del).unwrap()).unwrap();
    assert!(taps(&ctr).is_empty(), "{:?}", ctr.links());
    for pod in ["eth0", "net1", "net2"] {
        assert!(!has_ingress(&ctr, pod), "{pod} keeps vmtap's ingress qdisc");
    }
    assert!(!dan.join(format!("{id}.json")).exists());
    for n in [&eth0, &net1, &net2] {
        h.del(&n.list, &n.rt).unwrap();
    }
    assert_eq!(ctr.links(), ["lo"]);
}

#[test]
fn a_failing_converge_leaves_the_earlier_taps_and_nothing_new() {
    if !require_root("a_failing_converge_leaves_the_earlier_taps_and_nothing_new") {
        return;
    }
    let h = Harness::new("vmtcf");
    let ctr = h.container("vmtcf");
    let id = unique("ctr");
    let eth0 = pod_net(&h, &ctr, &id, "eth0", json!({"type": "ptp", "ipam": h.host_local(96)}));
    let net1 = pod_net(&h, &ctr, &id, "net1", json!({"type": "ptp", "ipam": h.host_local(97)}));
    let rt = eth0.rt.clone();
    let vmtap = |keys: Value, prev: &Value| {
        let mut c = json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap", "prevResult": prev});
        c.as_object_mut().unwrap().extend(keys.as_object().unwrap().clone());
        h.exec_plugin("vmtap", Command::Add, &rt, &serde_json::to_vec(&c).unwrap())
    };
    vmtap(json!({}), &merge(&[&eth0.result, &net1.result])).unwrap();
    let before = [wire_state(&ctr, "tap0", "eth0"), wire_state(&ctr, "tap1", "net1")];
    let unchanged = |what: &str| {
        assert_eq!(taps(&ctr), ["tap0", "tap1"], "{what}");
        assert_eq!([wire_state(&ctr, "tap0", "eth0"), wire_state(&ctr, "tap1", "net1")], before, "{what}");
        assert!(!has_ingress(&ctr, "net2"), "{what}: net2 keeps an ingress qdisc");
    };
    let net2 = pod_net(&h, &ctr, &id, "net2", json!({"type": "ptp", "ipam": h.host_local(98)}));

    // tapNames gives net2 a name a link of the namespace has.
    ctr.ip(&["link", "add", "busy0", "type", "veth", "peer", "name", "busy1"]);
    let all = merge(&[&eth0.result, &net1.result, &net2.result]);
    match vmtap(json!({"tapNames": {"net2": "busy0"}}), &all) {
        Err(cni_runtime::invoke::InvokeError::Plugin(e)) => {
            assert_eq!(e.code, 7, "{e:?}");
            assert!(e.msg.contains("cannot create tap busy0 for net2"), "{e:?}");
        }
        other => panic!("{other:?}"),
    }
    unchanged("a tapNames collision");

    // A failure part-way: net2's tap is made and joined, then the kernel refuses the pod's
    // loopback MTU (65536) for lo's tap. net1 is left out of prevResult (its link stays): its
    // tap would go once the new ones were made, so it stays too.
    let mut failing = merge(&[&eth0.result, &net2.result]);
    let lo_mac = ctr.link("lo").unwrap()["address"].clone();
    failing["interfaces"].as_array_mut().unwrap().push(json!({"name": "lo", "mac": lo_mac, "sandbox": rt.netns}));
    match vmtap(json!({}), &failing) {
        Err(cni_runtime::invoke::InvokeError::Plugin(e)) => {
            assert_eq!(e.code, 999, "{e:?}");
            assert!(e.msg.contains("set link tap3"), "{e:?}");
        }
        other => panic!("{other:?}"),
    }
    unchanged("a failure after net2's tap was made");
    assert!(redirect_targets(&ctr, "net2").is_empty() && redirect_targets(&ctr, "lo").is_empty());

    // The converge then succeeds, and DEL removes everything.
    let out = vmtap(json!({}), &all).unwrap();
    let out: Value = serde_json::from_slice(&out).unwrap();
    let names: Vec<String> = pairs(&out, &rt).into_iter().map(|p| p.0).collect();
    assert_eq!(names, ["tap0", "tap1", "tap2"]);
    assert_eq!([wire_state(&ctr, "tap0", "eth0"), wire_state(&ctr, "tap1", "net1")], before);
    let del = json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap"});
    h.exec_plugin("vmtap", Command::Del, &rt, &serde_json::to_vec(&del).unwrap()).unwrap();
    assert!(taps(&ctr).is_empty(), "{:?}", ctr.links());
    ctr.ip(&["link", "del", "busy0"]);
    for n in [&eth0, &net1, &net2] {
        h.del(&n.list, &n.rt).unwrap();
    }
    assert_eq!(ctr.links(), ["lo"]);
}

#[test]
fn a_pod_interface_made_again_gets_a_new_tap_also_under_its_tap_names_name() {
    if !require_root("a_pod_interface_made_again_gets_a_new_tap_also_under_its_tap_names_name") {
        return;
    }
    // net1's tap is named by tapNames. net1 is removed and made again under its name (another
    // link): its old tap, joined to nothing now, goes first (the new one needs its name), and
    // the new tap is joined to the new link; eth0's tap is untouched.
    let h = Harness::new("vmtcn");
    let ctr = h.container("vmtcn");
    let id = unique("ctr");
    let eth0 = pod_net(&h, &ctr, &id, "eth0", json!({"type": "ptp", "ipam": h.host_local(99)}));
    let net1 = pod_net(&h, &ctr, &id, "net1", json!({"type": "ptp", "ipam": h.host_local(100)}));
    let rt = eth0.rt.clone();
    let vmtap = |prev: &Value| -> Value {
        let c = json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap", "tapNames": {"net1": "vm-n1"}, "prevResult": prev});
        let out = h.exec_plugin("vmtap", Command::Add, &rt, &serde_json::to_vec(&c).unwrap());
        serde_json::from_slice(&out.unwrap_or_else(|e| panic!("vmtap ADD: {e}"))).unwrap()
    };
    vmtap(&merge(&[&eth0.result, &net1.result]));
    let eth0_before = wire_state(&ctr, "tap0", "eth0");
    let old = ctr.link("vm-n1").unwrap()["ifindex"].clone();
    h.del(&net1.list, &net1.rt).unwrap();
    let net1 = pod_net(&h, &ctr, &id, "net1", json!({"type": "ptp", "ipam": h.host_local(100)}));
    let r = vmtap(&merge(&[&eth0.result, &net1.result]));
    let names: Vec<String> = pairs(&r, &rt).into_iter().map(|p| p.0).collect();
    assert_eq!(names, ["tap0", "vm-n1"]);
    assert_ne!(ctr.link("vm-n1").unwrap()["ifindex"], old, "the old tap was kept");
    assert_eq!(redirect_targets(&ctr, "net1"), ["vm-n1"]);
    assert_eq!(redirect_targets(&ctr, "vm-n1"), ["net1"]);
    assert_eq!(wire_state(&ctr, "tap0", "eth0"), eth0_before);
    let del = json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap"});
    h.exec_plugin("vmtap", Command::Del, &rt, &serde_json::to_vec(&del).unwrap()).unwrap();
    for n in [&eth0, &net1] {
        h.del(&n.list, &n.rt).unwrap();
    }
    assert_eq!(ctr.links(), ["lo"]);
}

#[test]
fn sigkill_at_any_moment_of_a_converging_add_then_add_again_converges() {
    if !require_root("sigkill_at_any_moment_of_a_converging_add_then_add_again_converges") {
        return;
    }
    // eth0 and net1 have their taps; a converging ADD that adds net2 and drops net1 is killed
    // after a delay that sweeps its run. Whatever the moment, the next ADD (what the node agent
    // sends when it retries) converges: eth0's tap untouched, net2 joined both ways to one tap,
    // net1's tap and everything vmtap put on net1 gone. Then back to [eth0, net1] for the next
    // round.
    let h = Harness::new("vmtck");
    let ctr = h.container("vmtck");
    let id = unique("ctr");
    let eth0 = pod_net(&h, &ctr, &id, "eth0", json!({"type": "ptp", "ipam": h.host_local(101)}));
    let net1 = pod_net(&h, &ctr, &id, "net1", json!({"type": "ptp", "ipam": h.host_local(102)}));
    let net2 = pod_net(&h, &ctr, &id, "net2", json!({"type": "ptp", "ipam": h.host_local(103)}));
    let rt = eth0.rt.clone();
    let conf = |prev: Value| {
        serde_json::to_vec(&json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap", "prevResult": prev})).unwrap()
    };
    let before = conf(merge(&[&eth0.result, &net1.result]));
    let after = conf(merge(&[&eth0.result, &net2.result]));
    h.exec_plugin("vmtap", Command::Add, &rt, &before).unwrap();
    let eth0_state = wire_state(&ctr, "tap0", "eth0");
    let bin = braid_integration::build_dir().join("vmtap");
    let mut killed_mid_way = 0;
    for k in 0..30u64 {
        use std::io::Write;
        let mut child = Process::new(&bin)
            .env("CNI_COMMAND", "ADD")
            .env("CNI_CONTAINERID", &rt.container_id)
            .env("CNI_NETNS", &rt.netns)
            .env("CNI_IFNAME", "eth0")
            .env("CNI_PATH", "/nonexistent")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&after).unwrap();
        std::thread::sleep(std::time::Duration::from_micros(k * 500));
        let _ = child.kill();
        let killed = !child.wait().unwrap().success();
        // Killed after it changed something, before it was done.
        if killed && (taps(&ctr) != ["tap0", "tap1"] || has_ingress(&ctr, "net2")) {
            killed_mid_way += 1;
        }
        let out =
            h.exec_plugin("vmtap", Command::Add, &rt, &after).unwrap_or_else(|e| panic!("ADD after kill {k}: {e}"));
        let r: Value = serde_json::from_slice(&out).unwrap();
        let got = pairs(&r, &rt);
        assert_eq!(got.len(), 2, "kill {k}: {got:?}");
        assert_eq!(got[0].0, "tap0", "kill {k}");
        let net2_tap = got[1].0.clone();
        assert_eq!(taps(&ctr), ["tap0".to_string(), net2_tap.clone()], "kill {k}");
        assert_eq!(wire_state(&ctr, "tap0", "eth0"), eth0_state, "kill {k}: eth0's tap was touched");
        assert_eq!(redirect_targets(&ctr, "net2"), std::slice::from_ref(&net2_tap), "kill {k}");
        assert_eq!(redirect_targets(&ctr, &net2_tap), ["net2"], "kill {k}");
        assert!(!has_ingress(&ctr, "net1"), "kill {k}: net1 keeps vmtap's ingress qdisc");
        // Back to [eth0, net1]: net2's tap goes, net1 gets one.
        h.exec_plugin("vmtap", Command::Add, &rt, &before).unwrap_or_else(|e| panic!("ADD back after kill {k}: {e}"));
        assert!(!has_ingress(&ctr, "net2"), "kill {k}: net2 keeps vmtap's ingress qdisc");
        assert_eq!(taps(&ctr).len(), 2, "kill {k}: {:?}", taps(&ctr));
    }
    eprintln!(
        "{killed_mid_way} of 30 converging ADDs were killed after they changed something and before they finished"
    );
    let del = json!({"cniVersion": "1.0.0", "name": "x", "type": "vmtap"});
    h.exec_plugin("vmtap", Command::Del, &rt, &serde_json::to_vec(&del).unwrap()).unwrap();
    assert!(taps(&ctr).is_empty(), "{:?}", ctr.links());
    for n in [&eth0, &net1, &net2] {
        h.del(&n.list, &n.rt).unwrap();
    }
    assert_eq!(ctr.links(), ["lo"]);
}
