//! `delegator update` (network hot-plug) in real namespaces with the reference plugins: what the
//! node agent runs when a running pod's networks annotation changes, driven here directly with
//! the sandbox's ADD environment, so that every case — added, removed, changed, refused,
//! failed, killed part-way — is checked against the kernel, host-local and the state. The real
//! node's tests (`kube_node.rs`) drive the same through `kubectl annotate`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::agent::wait_until;
use braid_integration::{build_dir, require_root, unique, Harness, Netns};
use cni_runtime::chain::RuntimeConf;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;

/// One pod's world: the harness, its networks dir (`braid-hot/<name>.conflist`), its status
/// dir, braid's conflist on disk, the pod namespace and its runtime parameters.
struct Pod {
    h: Harness,
    ctr: Netns,
    list: Value,
    list_path: PathBuf,
    rt: RuntimeConf,
}

impl Pod {
    fn new(tag: &str) -> Pod {
        let h = Harness::new(tag);
        let ctr = h.container(tag);
        let nets = h.dir.path().join("networks/braid-hot");
        std::fs::create_dir_all(&nets).unwrap();
        for (name, subnet) in [("red", 91u8), ("blue", 92), ("green", 93)] {
            let def = json!({"cniVersion": "1.0.0", "name": name, "plugins": [
                {"type": "ptp", "ipam": h.host_local(subnet)}
            ]});
            std::fs::write(nets.join(format!("{name}.conflist")), def.to_string()).unwrap();
        }
        let fault = json!({"cniVersion": "1.0.0", "name": "fault", "plugins": [
            {"type": "braid-fault", "fail": {"command": "ADD", "code": 11, "msg": "no room on this node"}}
        ]});
        std::fs::write(nets.join("fault.conflist"), fault.to_string()).unwrap();
        let slow = json!({"cniVersion": "1.0.0", "name": "slow", "plugins": [
            {"type": "braid-fault", "link": true, "sleepOn": "ADD", "sleepMs": 4000}
        ]});
        std::fs::write(nets.join("slow.conflist"), slow.to_string()).unwrap();
        // A network whose DEL fails while `stuck-del` exists (a delegate that cannot release).
        let stuck = json!({"cniVersion": "1.0.0", "name": "stuck", "plugins": [
            {"type": "braid-fault", "link": true, "failWhile": h.dir.path().join("stuck-del"),
             "fail": {"command": "DEL", "code": 11, "msg": "device busy"}}
        ]});
        std::fs::write(nets.join("stuck.conflist"), stuck.to_string()).unwrap();
        let list = json!({
            "cniVersion": "1.0.0",
            "name": unique("braid"),
            "plugins": [{
                "type": "delegator",
                "capabilities": {"io.kubernetes.cri.pod-annotations": true},
                "stateDir": h.dir.path().join("state"),
                "result": "merged",
                "timeout": 10,
                "delegates": [{"cniVersion": "1.0.0", "name": "cluster", "type": "bridge",
                               "bridge": unique("br"), "isGateway": true, "ipam": h.host_local(90)}],
                "kubernetes": {"networksDir": h.dir.path().join("networks"), "statusDir": h.dir.path().join("status"),
                               "claimsDir": h.dir.path().join("claims")}
            }]
        });
        let list_path = h.dir.path().join("00-braid.conflist");
        std::fs::write(&list_path, list.to_string()).unwrap();
        let mut rt = h.runtime(&ctr, &unique("sandbox"), "eth0");
        rt.args = format!("IgnoreUnknown=1;K8S_POD_NAMESPACE=braid-hot;K8S_POD_NAME=vm;K8S_POD_INFRA_CONTAINER_ID={};K8S_POD_UID=uid-1", rt.container_id);
        Pod { h, ctr, list, list_path, rt }
    }

    fn annotations(networks: &str) -> Value {
        json!({"io.kubernetes.cri.pod-annotations": {"k8s.v1.cni.cncf.io/networks": networks}})
    }

    /// The runtime's ADD with this annotation.
    fn add(&mut self, networks: &str) {
        self.rt.capability_args = Pod::annotations(networks).as_object().unwrap().clone();
        self.h.add(&self.list, &self.rt).unwrap_or_else(|e| panic!("ADD: {e}"));
    }

    /// `delegator update --conflist <braid's conflist>` with the sandbox's environment, as the
    /// agent runs it: exit code and stdout.
    fn update(&self, networks: &str) -> (i32, Value) {
        let out = self.run_update(networks, |child| child.wait_with_output().unwrap());
        let v = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("update printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
        (out.status.code().unwrap_or(-1), v)
    }

    /// Starts the update of `networks` in the host namespace, its stdin written, and hands the
    /// process to `then`.
    fn run_update<T: Send>(&self, networks: &str, then: impl FnOnce(std::process::Child) -> T + Send) -> T {
        let bin = build_dir().join("delegator");
        let path = cni_types::invocation::join_path(&self.h.paths);
        let (rt, list_path) = (self.rt.clone(), self.list_path.clone());
        let caps = Pod::annotations(networks).to_string();
        cni_skel::netns::run_in(&self.h.host.path(), move || {
            use std::io::Write;
            let mut child = Command::new(&bin)
                .args(["update", "--conflist"])
                .arg(&list_path)
                .env_clear()
                .env("CNI_CONTAINERID", &rt.container_id)
                .env("CNI_NETNS", &rt.netns)
                .env("CNI_IFNAME", &rt.ifname)
                .env("CNI_ARGS", &rt.args)
                .env("CNI_PATH", &path)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(caps.as_bytes()).unwrap();
            then(child)
        })
        .unwrap()
    }

    fn status_file(&self) -> Value {
        let path = self.h.dir.path().join(format!("status/braid-hot_vm_{}.json", self.rt.container_id));
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
    }

    /// The pod's interfaces and their kernel index.
    fn links(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self
            .ctr
            .ip_json(&["link"])
            .as_array()
            .unwrap()
            .iter()
            .map(|l| (l["ifname"].as_str().unwrap().to_string(), l["ifindex"].as_u64().unwrap()))
            .filter(|(n, _)| n != "lo")
            .collect();
        v.sort();
        v
    }

    fn reserved(&self, subnet: u8) -> usize {
        self.h.reservations().iter().filter(|r| r.contains(&format!("198.18.{subnet}."))).count()
    }

    fn del(&self) {
        self.h.del(&self.list, &self.rt).unwrap_or_else(|e| panic!("DEL: {e}"));
        assert_eq!(self.links(), Vec::<(String, u64)>::new(), "links left in the pod");
        assert!(self.h.reservations().is_empty(), "{:?}", self.h.dir.files());
        assert!(self.h.state_files().is_empty(), "{:?}", self.h.dir.files());
        assert!(!self.h.dir.path().join("status").read_dir().unwrap().any(|e| e.is_ok()), "status file left");
    }
}

/// The pod's (`K8S_POD_UID=uid-1`) record of ResourceClaim `braid-hot/web-net` (UID
/// `claim-1`), as braid's DRA driver writes it at NodePrepareResources: green on `side0` and
/// blue on a name braid chooses.
fn claim_record(p: &Pod) -> braid_attach::claim_record::ClaimRecord {
    use braid_attach::claim_record::{Claim, ClaimRecord, Network};
    let net = |request: &str, element: Value| Network {
        request: request.into(),
        driver: "net.braid-cni.io".into(),
        pool: "node1".into(),
        device: format!("braid-hot-{request}-1a2b3c4d"),
        share_id: Some(format!("share-{request}")),
        element: element.as_object().unwrap().clone(),
        metadata: None,
    };
    let record = ClaimRecord {
        claim: Claim { namespace: "braid-hot".into(), name: "web-net".into(), uid: "claim-1".into() },
        networks: vec![
            net("side", json!({"name": "green", "interface": "side0"})),
            net("more", json!({"name": "blue"})),
        ],
    };
    braid_attach::claim_record::write(&p.h.dir.path().join("claims"), "uid-1", &record).unwrap();
    record
}

fn names(links: &[(String, u64)]) -> Vec<&str> {
    links.iter().map(|(n, _)| n.as_str()).collect()
}

fn status_names(st: &Value) -> Vec<(String, String)> {
    st["networkStatus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["interface"].as_str().unwrap().to_string(), e["name"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn added_removed_and_changed_networks_touch_nothing_else_and_del_removes_them_all() {
    if !require_root("added_removed_and_changed_networks_touch_nothing_else_and_del_removes_them_all") {
        return;
    }
    let mut p = Pod::new("hpa");
    p.add("red");
    let start = p.links();
    assert_eq!(names(&start), ["eth0", "net1"]);
    let st = p.status_file();
    assert_eq!(st["networks"], "red");
    assert_eq!(st["sandbox"], json!({"netns": p.rt.netns, "ifname": "eth0"}));
    assert_eq!(st["podUID"], "uid-1");

    // Added: net2, nothing else touched (the same kernel interfaces).
    let (code, r) = p.update("red,blue");
    assert_eq!(code, 0, "{r}");
    let added = p.links();
    assert_eq!(names(&added), ["eth0", "net1", "net2"]);
    assert_eq!(&added[..2], &start[..]);
    let ifs: Vec<&str> = r["interfaces"].as_array().unwrap().iter().filter_map(|i| i["name"].as_str()).collect();
    assert!(ifs.contains(&"net2") && ifs.contains(&"net1") && ifs.contains(&"eth0"), "{r}");
    assert_eq!(r["ips"].as_array().unwrap().len(), 3, "the merged result names every attachment: {r}");
    assert_eq!((p.reserved(91), p.reserved(92)), (1, 1));
    let st = p.status_file();
    assert_eq!(st["networks"], "red,blue");
    assert_eq!(
        status_names(&st),
        [
            ("eth0".into(), "cluster".into()),
            ("net1".into(), "braid-hot/red".into()),
            ("net2".into(), "braid-hot/blue".into())
        ]
    );

    // The same again: nothing to do, nothing touched.
    assert_eq!(p.update("red,blue").0, 0);
    assert_eq!(p.links(), added);

    // Removed: net1 goes and its address is released; net2 stays as it was.
    let (code, r) = p.update("blue");
    assert_eq!(code, 0, "{r}");
    let removed = p.links();
    assert_eq!(names(&removed), ["eth0", "net2"]);
    assert_eq!(removed[1], added[2]);
    assert_eq!((p.reserved(91), p.reserved(92)), (0, 1));

    // Changed: blue asked on another interface — detached, attached there; a freed name is free.
    let (code, r) = p.update("blue@blue0,green");
    assert_eq!(code, 0, "{r}");
    assert_eq!(names(&p.links()), ["blue0", "eth0", "net1"]);
    assert_eq!((p.reserved(92), p.reserved(93)), (1, 1));
    assert_eq!(
        status_names(&p.status_file()),
        [
            ("eth0".into(), "cluster".into()),
            ("blue0".into(), "braid-hot/blue".into()),
            ("net1".into(), "braid-hot/green".into())
        ]
    );

    // Nothing selected any more: only the cluster network is left.
    assert_eq!(p.update("").0, 0);
    assert_eq!(names(&p.links()), ["eth0"]);
    assert_eq!(p.status_file()["networks"], "");
    assert_eq!(p.reserved(92) + p.reserved(93), 0);
    p.add_back_and_del();
}

impl Pod {
    /// Some networks again, then the pod's DEL: everything the updates made goes with it.
    fn add_back_and_del(&self) {
        assert_eq!(self.update("red,blue,green").0, 0);
        assert_eq!(names(&self.links()), ["eth0", "net1", "net2", "net3"]);
        self.del();
    }
}

#[test]
fn a_refused_or_failing_network_changes_nothing_and_names_the_network() {
    if !require_root("a_refused_or_failing_network_changes_nothing_and_names_the_network") {
        return;
    }
    let mut p = Pod::new("hpf");
    p.add("red");
    let before = p.links();

    // Refused before anything runs (code 7): an unknown network.
    let (code, e) = p.update("red,absent");
    assert_eq!(code, 1);
    assert_eq!(e["code"], 7, "{e}");
    assert!(e["msg"].as_str().unwrap().contains("braid-hot/absent"), "{e}");
    assert_eq!(p.links(), before);

    // A delegate that fails: blue (before it) and the failing one rolled back, red kept.
    let (code, e) = p.update("red,blue,fault");
    assert_eq!(code, 1);
    assert_eq!(e["code"], 11, "the delegate's code: {e}");
    let msg = e["msg"].as_str().unwrap();
    assert!(msg.contains("\"fault\"") && msg.contains("no room on this node"), "{e}");
    assert_eq!(p.links(), before);
    assert_eq!((p.reserved(91), p.reserved(92)), (1, 0));
    // The file still says what the sandbox carries out.
    assert_eq!(p.status_file()["networks"], "red");

    // A sandbox that is not attached (its DEL came first) is refused and nothing is made.
    let mut gone = Pod::new("hpg");
    gone.rt.container_id = unique("never");
    let (code, e) = gone.update("red");
    assert_eq!(code, 1);
    assert!(e["msg"].as_str().unwrap().contains(braid_attach::update::NOT_ATTACHED), "{e}");
    // The agent tells a sandbox deleted first by these words: no Event for a pod going away.
    assert_eq!(braid_install::api::hotplug::NOT_ATTACHED, braid_attach::update::NOT_ATTACHED);
    assert_eq!(gone.links(), Vec::<(String, u64)>::new());
    p.del();
}

#[test]
fn a_removed_network_whose_del_fails_stays_attached_and_recorded_and_nothing_is_added() {
    if !require_root("a_removed_network_whose_del_fails_stays_attached_and_recorded_and_nothing_is_added") {
        return;
    }
    let mut p = Pod::new("hpx");
    p.add("red,stuck");
    let before = p.links();
    assert_eq!(names(&before), ["eth0", "net1", "net2", "net2p"]);
    let stuck = p.h.dir.path().join("stuck-del");
    std::fs::write(&stuck, "").unwrap();

    // stuck's DEL fails: the update fails naming it and its delegate's words; the network
    // stays attached and recorded, and blue — which it was also asked for — is not added.
    let (code, e) = p.update("red,blue");
    assert_eq!(code, 1);
    assert_eq!(e["code"], 11, "the delegate's code: {e}");
    let msg = e["msg"].as_str().unwrap();
    assert!(msg.contains("\"stuck\"") && msg.contains("device busy"), "{e}");
    assert_eq!(p.links(), before);
    assert_eq!((p.reserved(91), p.reserved(92)), (1, 0));
    assert_eq!(p.status_file()["networks"], "red,stuck");

    // Once the delegate can release, the same update goes through.
    std::fs::remove_file(&stuck).unwrap();
    let (code, r) = p.update("red,blue");
    assert_eq!(code, 0, "{r}");
    let after = p.links();
    assert_eq!(names(&after), ["eth0", "net1", "net2"]);
    assert_eq!(after[..2], before[..2], "eth0 and net1 untouched");
    assert_eq!((p.reserved(91), p.reserved(92)), (1, 1));
    assert_eq!(p.status_file()["networks"], "red,blue");
    p.del();
}

#[test]
fn an_update_killed_part_way_is_finished_by_the_next_one_or_undone_by_del() {
    if !require_root("an_update_killed_part_way_is_finished_by_the_next_one_or_undone_by_del") {
        return;
    }
    for then_update in [true, false] {
        let mut p = Pod::new(if then_update { "hpk" } else { "hpd" });
        p.add("red");
        let state: PathBuf = p.h.dir.path().join("state");
        // Killed while the second added network (a real veth, 4 s asleep) is attaching: blue
        // is in, slow half made.
        kill_update(&p, "red,blue,slow", move || {
            std::fs::read_dir(&state).into_iter().flatten().flatten().any(|e| {
                std::fs::read_to_string(e.path()).is_ok_and(|s| s.contains("\"index\":3,\"phase\":\"running\""))
            })
        });
        if then_update {
            let (code, r) = p.update("red,green");
            assert_eq!(code, 0, "{r}");
            assert_eq!(names(&p.links()), ["eth0", "net1", "net2"]);
            assert_eq!((p.reserved(91), p.reserved(92), p.reserved(93)), (1, 0, 1));
        }
        p.del();
    }
}

/// Runs the update of `networks` and SIGKILLs it once `until` holds (polled, at most 10 s).
fn kill_update(p: &Pod, networks: &str, until: impl Fn() -> bool + Send) {
    p.run_update(networks, move |mut child| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !until() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(until(), "the update never reached the moment to kill it");
        let _ = child.kill();
        let _ = child.wait();
    });
}

#[test]
fn with_vmtap_in_the_conflist_an_added_network_becomes_a_new_tap_and_vm_interface() {
    if !require_root("with_vmtap_in_the_conflist_an_added_network_becomes_a_new_tap_and_vm_interface") {
        return;
    }
    let mut p = Pod::new("hpv");
    // braid-install --vmtap's conflist: the delegator (merged result), then vmtap.
    p.then(json!({"type": "vmtap"}));
    p.add("red");
    let taps = |links: &[(String, u64)]| -> Vec<(String, u64)> {
        links.iter().filter(|(n, _)| n.starts_with("tap")).cloned().collect()
    };
    let before = taps(&p.links());
    assert_eq!(names(&before), ["tap0", "tap1"]);

    let (code, r) = p.update("red,blue");
    assert_eq!(code, 0, "{r}");
    let after = taps(&p.links());
    assert_eq!(&after[..2], &before[..], "the running VM's taps are untouched");
    assert_eq!(names(&after), ["tap0", "tap1", "tap2"]);
    // The result a VMM reads (tc-redirect-tap's convention): net2's tap in the pod namespace, and
    // a VM interface of the tap's name with net2's MAC, to which a copy of net2's address points.
    let ifs = r["interfaces"].as_array().unwrap();
    let net2 = ifs.iter().find(|i| i["name"] == "net2").unwrap_or_else(|| panic!("{r}"));
    assert!(ifs.iter().any(|i| i["name"] == "tap2" && i["sandbox"] == p.rt.netns.as_str()), "{r}");
    let vm = ifs
        .iter()
        .position(|i| i["name"] == "tap2" && i["sandbox"] == p.rt.container_id.as_str() && i["mac"] == net2["mac"])
        .unwrap_or_else(|| panic!("no VM interface for net2: {r}"));
    assert!(
        r["ips"]
            .as_array()
            .unwrap()
            .iter()
            .any(|ip| ip["interface"] == vm && ip["address"].as_str().unwrap().starts_with("198.18.92.")),
        "{r}"
    );

    // Removed: its tap goes with it; the others stay.
    let (code, r) = p.update("red");
    assert_eq!(code, 0, "{r}");
    assert_eq!(taps(&p.links()), before);
    p.del();
}

impl Pod {
    /// The pod's main-table default routes: (interface, gateway).
    fn default_routes(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = ["-4", "-6"]
            .iter()
            .flat_map(|f| self.ctr.ip_json(&[f, "route", "show", "default"]).as_array().cloned().unwrap_or_default())
            .map(|r| (r["dev"].as_str().unwrap_or("").to_string(), r["gateway"].as_str().unwrap_or("").to_string()))
            .collect();
        v.sort();
        v
    }

    /// `plugin` after the delegator in braid's conflist (vmtap: `braid-install --vmtap`'s
    /// conflist, the delegator's merged result handed on; or a later plugin that fails).
    fn then(&mut self, plugin: Value) {
        self.list["plugins"].as_array_mut().unwrap().push(plugin);
        std::fs::write(&self.list_path, self.list.to_string()).unwrap();
    }

    /// The cluster network's IPAM gives the pod a default route via its bridge (198.18.90.1),
    /// as a node's cluster network does.
    fn with_cluster_default_route(&mut self) {
        let ipam = &mut self.list["plugins"][0]["delegates"][0]["ipam"];
        ipam["routes"].as_array_mut().unwrap().push(json!({"dst": "0.0.0.0/0"}));
        std::fs::write(&self.list_path, self.list.to_string()).unwrap();
    }
}

/// What a user meets: an edit that swaps a network for two, one of which fails. The removal is
/// done, the additions rolled back — and the file must not claim the old annotation, or
/// reverting the edit would look done and the removed network would never come back.
/// A VM's interfaces for the claim's networks (issue 46, item 6): with vmtap after the delegator
/// (the merged result, `braid-install --vmtap`), each claim-backed interface gets its tap and VM
/// interface like an annotation-selected one, and keeps them across an update of the annotation.
#[test]
fn with_vmtap_a_claims_networks_get_their_taps_and_vm_interfaces_and_keep_them_across_updates() {
    if !require_root("with_vmtap_a_claims_networks_get_their_taps_and_vm_interfaces_and_keep_them_across_updates") {
        return;
    }
    let mut p = Pod::new("hpw");
    p.then(json!({"type": "vmtap"}));
    claim_record(&p);
    p.rt.capability_args = Pod::annotations("red").as_object().unwrap().clone();
    let r = p.h.add(&p.list, &p.rt).unwrap_or_else(|e| panic!("ADD: {e}")).to_value();
    let ifs = r["interfaces"].as_array().unwrap();
    // eth0, red's net1, the claim's side0 and net2: a tap each in the pod, and a VM interface of
    // the tap's name with the pod interface's MAC.
    for pod_if in ["eth0", "net1", "side0", "net2"] {
        let i = ifs.iter().find(|i| i["name"] == pod_if).unwrap_or_else(|| panic!("no {pod_if}: {r}"));
        let vm = ifs
            .iter()
            .position(|v| v["sandbox"] == p.rt.container_id.as_str() && v["mac"] == i["mac"])
            .unwrap_or_else(|| panic!("no VM interface for {pod_if}: {r}"));
        let tap = ifs[vm]["name"].as_str().unwrap();
        assert!(ifs.iter().any(|t| t["name"] == tap && t["sandbox"] == p.rt.netns.as_str()), "{tap} in the pod: {r}");
    }
    // The claim's side0 address is the VM's too (its copy points at the VM interface).
    let side0 = ifs.iter().find(|i| i["name"] == "side0").unwrap();
    let vm = ifs.iter().position(|v| v["sandbox"] == p.rt.container_id.as_str() && v["mac"] == side0["mac"]).unwrap();
    assert!(
        r["ips"]
            .as_array()
            .unwrap()
            .iter()
            .any(|ip| ip["interface"] == vm && ip["address"].as_str().unwrap().starts_with("198.18.93.")),
        "{r}"
    );
    let taps = |links: &[(String, u64)]| -> Vec<(String, u64)> {
        links.iter().filter(|(n, _)| n.starts_with("tap")).cloned().collect()
    };
    let before = taps(&p.links());
    assert_eq!(names(&before), ["tap0", "tap1", "tap2", "tap3"]);
    // The annotation emptied: red's tap goes, the claim's stay as they were.
    let (code, r) = p.update("");
    assert_eq!(code, 0, "{r}");
    let after = taps(&p.links());
    assert_eq!(after.len(), 3, "{after:?}");
    assert!(after.iter().all(|t| before.contains(t)), "the claim's and eth0's taps untouched: {after:?} {before:?}");
    p.del();
    assert_eq!(taps(&p.links()), Vec::<(String, u64)>::new());
}

#[test]
fn a_failed_edit_leaves_the_sandbox_unsettled_and_reverting_it_brings_the_removed_network_back() {
    if !require_root("a_failed_edit_leaves_the_sandbox_unsettled_and_reverting_it_brings_the_removed_network_back") {
        return;
    }
    let mut p = Pod::new("hpu");
    p.add("red");
    let (code, e) = p.update("blue,fault");
    assert_eq!((code, &e["code"]), (1, &json!(11)), "{e}");
    assert_eq!(names(&p.links()), ["eth0"], "red removed, blue rolled back");
    assert_eq!((p.reserved(91), p.reserved(92)), (0, 0));
    let st = p.status_file();
    assert!(st.get("networks").is_none(), "the file claims an annotation the sandbox does not carry out: {st}");
    assert_eq!(st["unsettled"]["networks"], "blue,fault", "{st}");
    assert!(st["unsettled"]["error"].as_str().unwrap().contains("no room on this node"), "{st}");
    assert_eq!(status_names(&st), [("eth0".into(), "cluster".into())], "the document lists what is attached");
    // The revert: red back, the file settled again.
    let (code, r) = p.update("red");
    assert_eq!(code, 0, "{r}");
    assert_eq!(names(&p.links()), ["eth0", "net1"]);
    assert_eq!(p.reserved(91), 1);
    let st = p.status_file();
    assert_eq!((&st["networks"], st.get("unsettled")), (&json!("red"), None), "{st}");
    p.del();
}

/// A `default-route` that cannot be set (an unreachable gateway) fails the update after the
/// network's ADD: that network is rolled back as a failed ADD would be — no interface, no
/// reservation — and the pod keeps the default route it had.
#[test]
fn an_added_network_whose_default_route_fails_is_rolled_back_and_the_old_route_stays() {
    if !require_root("an_added_network_whose_default_route_fails_is_rolled_back_and_the_old_route_stays") {
        return;
    }
    let mut p = Pod::new("hpr");
    p.with_cluster_default_route();
    p.add("red");
    let before = p.links();
    assert_eq!(p.default_routes(), [("eth0".to_string(), "198.18.90.1".to_string())]);
    let (code, e) = p.update(r#"[{"name": "red"}, {"name": "blue", "default-route": ["198.18.250.1"]}]"#);
    assert_eq!(code, 1, "{e}");
    assert!(e["msg"].as_str().unwrap().contains("default-route of braid-hot/blue"), "{e}");
    assert_eq!(p.links(), before, "blue rolled back");
    assert_eq!(p.reserved(92), 0, "blue's address released");
    assert_eq!(p.default_routes(), [("eth0".to_string(), "198.18.90.1".to_string())]);
    assert_eq!(p.status_file()["networks"], "red", "nothing changed: the file still says so");
    p.del();
}

/// Removing the network that took the default route puts the routes it replaced back; so does
/// changing it (its new gateway takes them again), and network-status follows.
#[test]
fn removing_or_changing_the_default_route_network_restores_the_routes_it_replaced() {
    if !require_root("removing_or_changing_the_default_route_network_restores_the_routes_it_replaced") {
        return;
    }
    let mut p = Pod::new("hpdr");
    p.with_cluster_default_route();
    p.add(r#"[{"name": "red", "default-route": ["198.18.91.1"]}]"#);
    assert_eq!(p.default_routes(), [("net1".to_string(), "198.18.91.1".to_string())]);
    let st = p.status_file();
    assert_eq!(st["defaultRouteReplaced"]["by"], "net1", "{st}");
    // Kept while another network is added: still via red.
    assert_eq!(p.update(r#"[{"name": "red", "default-route": ["198.18.91.1"]}, {"name": "green"}]"#).0, 0);
    assert_eq!(p.default_routes(), [("net1".to_string(), "198.18.91.1".to_string())]);
    // Changed: blue takes it; red's is gone with red, eth0's stays replaced.
    let (code, r) = p.update(r#"[{"name": "blue", "default-route": ["198.18.92.1"]}, {"name": "green"}]"#);
    assert_eq!(code, 0, "{r}");
    let blue = p.status_file();
    let via: Vec<(String, String)> = p.default_routes();
    assert_eq!(via.len(), 1, "{via:?}");
    assert_eq!(via[0].1, "198.18.92.1");
    assert!(blue["networkStatus"].as_array().unwrap().iter().any(|e| e["default-route"] == json!(["198.18.92.1"])));
    // Removed: the cluster network's default route is back, and no entry claims one.
    let (code, r) = p.update("green");
    assert_eq!(code, 0, "{r}");
    assert_eq!(p.default_routes(), [("eth0".to_string(), "198.18.90.1".to_string())]);
    let st = p.status_file();
    assert!(st["networkStatus"].as_array().unwrap().iter().all(|e| e.get("default-route").is_none()), "{st}");
    assert!(st.get("defaultRouteReplaced").is_none(), "{st}");
    p.del();
}

/// A later plugin of the chain (vmtap's place) that fails: the added network is rolled back,
/// and the status file — written only once the whole chain succeeded — still says what the
/// sandbox carries out.
#[test]
fn a_later_plugin_that_fails_rolls_the_added_network_back_and_the_file_stays() {
    if !require_root("a_later_plugin_that_fails_rolls_the_added_network_back_and_the_file_stays") {
        return;
    }
    let mut p = Pod::new("hpc");
    let fail = p.h.dir.path().join("tail-fails");
    p.then(json!({"type": "braid-fault", "failWhile": fail,
        "fail": {"command": "ADD", "code": 11, "msg": "no tap for the VM"}}));
    p.add("red");
    let before = p.links();
    std::fs::write(&fail, "").unwrap();
    let (code, e) = p.update("red,blue");
    assert_eq!((code, &e["code"]), (1, &json!(11)), "{e}");
    assert!(e["msg"].as_str().unwrap().contains("no tap for the VM"), "{e}");
    assert_eq!(p.links(), before, "blue rolled back");
    assert_eq!(p.reserved(92), 0);
    let st = p.status_file();
    assert_eq!(st["networks"], "red", "{st}");
    assert_eq!(status_names(&st).len(), 2, "{st}");
    std::fs::remove_file(&fail).unwrap();
    let (code, r) = p.update("red,blue");
    assert_eq!(code, 0, "{r}");
    assert_eq!(p.status_file()["networks"], "red,blue");
    p.del();
}

/// Whether a `vmtap` DEL process is alive (the runtime's DEL of the sandbox, waiting for the
/// pod namespace's lock while an update holds it).
fn vmtap_del_running() -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let dir = e.path();
        std::fs::read_to_string(dir.join("comm")).is_ok_and(|c| c.trim() == "vmtap")
            && std::fs::read(dir.join("environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == b"CNI_COMMAND=DEL"))
    })
}

/// The runtime deletes the sandbox while the agent's update adds a network and vmtap's ADD is
/// still to come: libcni runs vmtap's DEL first, and it waits for the pod namespace's lock the
/// update holds, so the update's tap and DAN file are made before the DEL, and the DEL removes
/// them — no tap, no DAN file of a deleted sandbox.
#[test]
fn a_sandbox_deleted_during_an_update_with_vmtap_leaves_no_dan_file_or_tap() {
    if !require_root("a_sandbox_deleted_during_an_update_with_vmtap_leaves_no_dan_file_or_tap") {
        return;
    }
    let mut p = Pod::new("hpw");
    let (hang, calls) = (p.h.dir.path().join("hang"), p.h.dir.path().join("held-calls"));
    let held = json!({"cniVersion": "1.0.0", "name": "held", "plugins": [
        {"type": "braid-fault", "link": true, "sleepOn": "ADD", "hangWhile": hang, "log": calls}
    ]});
    std::fs::write(p.h.dir.path().join("networks/braid-hot/held.conflist"), held.to_string()).unwrap();
    let dans = p.h.dir.path().join("dans");
    p.then(json!({"type": "vmtap", "danDir": dans}));
    p.add("red");
    let dan = dans.join(format!("{}.json", p.rt.container_id));
    assert!(dan.is_file());
    std::fs::write(&hang, "").unwrap();
    let (code, del) = p.run_update("red,held", |child| {
        wait_until(
            "the update's held network started its ADD",
            || std::fs::read_to_string(&calls).is_ok_and(|c| c.contains("\"command\":\"ADD\"")),
            String::new,
        );
        std::thread::scope(|s| {
            let del = s.spawn(|| p.h.del(&p.list, &p.rt));
            // vmtap's DEL started (and waits), or — without the lock — already removed the file.
            wait_until("vmtap's DEL started", || vmtap_del_running() || !dan.exists(), String::new);
            std::fs::remove_file(&hang).unwrap();
            let out = child.wait_with_output().unwrap();
            (out.status.code(), del.join().unwrap())
        })
    });
    assert_eq!(code, Some(0), "the update");
    del.unwrap_or_else(|e| panic!("DEL: {e}"));
    assert!(!dan.exists(), "the DAN file of a deleted sandbox: {}", std::fs::read_to_string(&dan).unwrap_or_default());
    assert_eq!(p.links(), Vec::<(String, u64)>::new(), "links left in the pod");
    assert!(p.h.reservations().is_empty(), "{:?}", p.h.dir.files());
    assert!(p.h.state_files().is_empty(), "{:?}", p.h.dir.files());
    assert!(!p.h.dir.path().join("status").read_dir().unwrap().any(|e| e.is_ok()), "status file left");
}

/// Whether `pid` holds a `flock` on the file at `path` (`/proc/locks`, by the file's inode).
fn holds_flock(pid: u32, path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(ino) = std::fs::metadata(path).map(|m| m.ino()) else { return false };
    std::fs::read_to_string("/proc/locks").unwrap().lines().any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w.get(1) == Some(&"FLOCK")
            && w.get(4) == Some(&pid.to_string().as_str())
            && w.get(5).is_some_and(|f| f.rsplit(':').next() == Some(&ino.to_string()))
    })
}

/// vmtap inside a selected network's conflist, and the sandbox's DEL under way (its container
/// lock held, a delegate of that network still deleting) when an update starts: the update takes
/// the pod namespace's lock and waits for the container's; the nested vmtap's DEL, run by the
/// delegator's DEL, must not wait for the namespace's lock in turn (it would wait for the update
/// waiting for it): it inherits it, the DEL ends, and the update finds the sandbox gone.
#[test]
fn a_del_under_way_with_a_nested_vmtap_never_waits_for_an_update_waiting_for_it() {
    if !require_root("a_del_under_way_with_a_nested_vmtap_never_waits_for_an_update_waiting_for_it") {
        return;
    }
    let mut p = Pod::new("hpn");
    let (hang, calls) = (p.h.dir.path().join("hang"), p.h.dir.path().join("tapped-calls"));
    let tapped = json!({"cniVersion": "1.0.0", "name": "tapped", "plugins": [
        {"type": "ptp", "ipam": p.h.host_local(94)},
        {"type": "vmtap"},
        {"type": "braid-fault", "sleepOn": "DEL", "hangWhile": hang, "log": calls}
    ]});
    std::fs::write(p.h.dir.path().join("networks/braid-hot/tapped.conflist"), tapped.to_string()).unwrap();
    p.add("tapped");
    assert!(names(&p.links()).contains(&"tap0"), "{:?}", p.links());
    let netns_lock = {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(&p.rt.netns).unwrap();
        PathBuf::from(format!("/run/braid/netns-locks/netns-{}-{}.lock", m.dev(), m.ino()))
    };
    std::fs::write(&hang, "").unwrap();
    let (del, update) = std::thread::scope(|s| {
        let del = s.spawn(|| p.h.del(&p.list, &p.rt));
        wait_until(
            "the DEL of tapped's last plugin started",
            || std::fs::read_to_string(&calls).is_ok_and(|c| c.contains("\"command\":\"DEL\"")),
            String::new,
        );
        let update = p.run_update("tapped,red", |child| {
            wait_until(
                "the update holding the pod namespace's lock",
                || holds_flock(child.id(), &netns_lock),
                String::new,
            );
            std::fs::remove_file(&hang).unwrap();
            child.wait_with_output().unwrap()
        });
        (del.join().unwrap(), update)
    });
    del.unwrap_or_else(|e| panic!("DEL: {e}"));
    let msg = String::from_utf8_lossy(&update.stdout).into_owned();
    assert!(!msg.contains("lock"), "the update waited out a lock instead of finding the sandbox gone: {msg}");
    assert_eq!(p.links(), Vec::<(String, u64)>::new(), "links left in the pod");
    assert!(p.h.reservations().is_empty(), "{:?}", p.h.dir.files());
    assert!(p.h.state_files().is_empty(), "{:?}", p.h.dir.files());
    println!("the update after the DEL: exit {:?}: {msg}", update.status.code());
}

#[test]
fn a_claims_networks_are_attached_listed_kept_by_every_update_and_released_by_del() {
    if !require_root("a_claims_networks_are_attached_listed_kept_by_every_update_and_released_by_del") {
        return;
    }
    let mut p = Pod::new("hpc");
    claim_record(&p);
    // A network of the annotation's only (ptp cannot attach one network twice to a pod: its
    // route to the gateway would be there twice).
    let violet =
        json!({"cniVersion": "1.0.0", "name": "violet", "plugins": [{"type": "ptp", "ipam": p.h.host_local(94)}]});
    std::fs::write(p.h.dir.path().join("networks/braid-hot/violet.conflist"), violet.to_string()).unwrap();
    p.add("red");
    let start = p.links();
    // After the annotation's red (net1): the claim's green on its own name, blue on the next net<N>.
    assert_eq!(names(&start), ["eth0", "net1", "net2", "side0"]);
    assert_eq!((p.reserved(91), p.reserved(92), p.reserved(93)), (1, 1, 1));
    let addr = |ifname: &str| -> Vec<String> {
        p.ctr.ip_json(&["-4", "addr", "show", "dev", ifname]).as_array().unwrap()[0]["addr_info"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["local"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(addr("side0")[0].starts_with("198.18.93."), "{:?}", addr("side0"));
    let st = p.status_file();
    let listed = vec![
        ("eth0".to_string(), "cluster".to_string()),
        ("net1".into(), "braid-hot/red".into()),
        ("side0".into(), "braid-hot/green".into()),
        ("net2".into(), "braid-hot/blue".into()),
    ];
    assert_eq!(status_names(&st), listed);
    assert_eq!(st["networks"], "red");
    let claims = json!([
        {"namespace": "braid-hot", "name": "web-net", "uid": "claim-1", "request": "side", "driver": "net.braid-cni.io",
         "pool": "node1", "device": "braid-hot-side-1a2b3c4d", "shareID": "share-side", "interface": "side0"},
        {"namespace": "braid-hot", "name": "web-net", "uid": "claim-1", "request": "more", "driver": "net.braid-cni.io",
         "pool": "node1", "device": "braid-hot-more-1a2b3c4d", "shareID": "share-more", "interface": "net2"}
    ]);
    assert_eq!(st["claims"], claims);
    // The document's entries are NPWG-shaped: nothing of the claim in them.
    assert!(st["networkStatus"].as_array().unwrap().iter().all(|e| e.get("claim").is_none()), "{st}");

    // The annotation changed (violet added, red moved to red0: detached and attached again):
    // the claim's attachments are kept as they were, the same kernel interfaces.
    let (code, r) = p.update("violet,red@red0");
    assert_eq!(code, 0, "{r}");
    let after = p.links();
    assert_eq!(names(&after), ["eth0", "net1", "net2", "red0", "side0"]);
    let kept = |links: &[(String, u64)]| -> Vec<(String, u64)> {
        links.iter().filter(|(n, _)| n == "side0" || n == "net2").cloned().collect()
    };
    assert_eq!(kept(&after), kept(&start), "the claim's interfaces untouched");
    assert_eq!((p.reserved(91), p.reserved(92), p.reserved(93), p.reserved(94)), (1, 1, 1, 1));
    let st = p.status_file();
    assert_eq!(st["claims"], claims);
    assert_eq!(st["networks"], "violet,red@red0");

    // Nothing in the annotation any more: the claim's networks stay.
    let (code, r) = p.update("");
    assert_eq!(code, 0, "{r}");
    assert_eq!(names(&p.links()), ["eth0", "net2", "side0"]);
    assert_eq!(kept(&p.links()), kept(&start));
    assert_eq!(p.status_file()["claims"], claims);
    assert_eq!((p.reserved(91), p.reserved(92), p.reserved(93), p.reserved(94)), (0, 1, 1, 0));

    // An annotation element asking for the claim's interface is refused, naming it; nothing changes.
    let (code, e) = p.update("red@side0");
    assert_eq!((code, e["code"].as_u64()), (1, Some(7)), "{e}");
    let msg = e["msg"].as_str().unwrap();
    assert!(msg.contains("resource claim braid-hot/web-net, request side (network braid-hot/green): interface side0 is already used by element 0 (network braid-hot/red)"), "{msg}");
    assert_eq!(kept(&p.links()), kept(&start));

    // DEL releases the claim's attachments with the rest (links, addresses, state: Pod::del).
    p.del();
}
