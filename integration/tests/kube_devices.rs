//! Networks backed by the kubelet's devices, on the real node of `scripts/node.sh` (the same
//! cluster and fixture as `kube_node.rs`): braid's test device plugin
//! (`integration/node/deviceplugin`, started with `scripts/node.sh deviceplugin node1`)
//! registers `braid.test/fakevf` — four devices with PCI-address-shaped IDs — with node1's real
//! kubelet, which allocates them to pods that request them in `resources.limits`. A NAD with
//! `k8s.v1.cni.cncf.io/resourceName: braid.test/fakevf` runs two recording plugins (braid-fault
//! with `log`, one declaring the `deviceID` and `CNIDeviceInfoFile` capabilities, one not) before
//! a bridge; the tests compare what they were given with what the kubelet allocated, read from
//! the kubelet's own record of it (its device manager's checkpoint,
//! `/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint`, not braid's helper) and from
//! the environment the device plugin's Allocate gave the pod.
//!
//! Waits are upper bounds for a stuck cluster, never measurements.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use braid_integration::cluster::{Cluster, Defer, BUSYBOX, NETWORKS};
use serde_json::{json, Value};
use std::collections::BTreeSet;

const VF: &str = "braid.test/fakevf";
const RESOURCE_NAME: &str = "k8s.v1.cni.cncf.io/resourceName";
const CHECKPOINT: &str = "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint";
const DEVINFO_CNI: &str = "/var/run/k8s.cni.cncf.io/devinfo/cni";

/// braid-fault (integration/src/bin) in node1's CNI bin dir.
fn install_fault_plugin(c: &Cluster) {
    let fault = braid_integration::build_dir().join("braid-fault");
    let out = c.on_node("node1", "cp", &[fault.to_str().unwrap(), "/opt/cni/bin/braid-fault"]);
    assert!(out.status.success(), "installing braid-fault on node1: {out:?}");
}

/// The test device plugin on node1 (a part of the cluster, started by `node.sh deviceplugin`,
/// stopped by its PID on drop), once node1 offers its four devices.
fn device_plugin(c: &Cluster) -> Defer<impl FnMut() + '_> {
    c.node_sh(&["deviceplugin", "node1", "-resource", VF, "-count", "4"]);
    let stop = Defer(move || {
        c.node_sh(&["stop", "deviceplugin-node1"]);
    });
    c.wait(
        "node1 offering braid.test/fakevf",
        || c.get(&["node", "node1"])["status"]["allocatable"][VF] == "4",
        || c.log("deviceplugin-node1"),
    );
    stop
}

/// A NAD `ns/name` of the resource: two recording plugins (the first declaring the `deviceID`
/// and `CNIDeviceInfoFile` capabilities), then a bridge with addresses from 198.18.<net>.0/24.
/// Its logs: `/run/<ns>-<name>.a` and `.b` on node1.
fn device_nad(c: &Cluster, ns: &str, name: &str, resource: &str, net: u8) {
    let (a, b) = logs(ns, name);
    let config = json!({
        "cniVersion": "1.0.0", "name": format!("{ns}-{name}"),
        "plugins": [
            {"type": "braid-fault", "log": a, "capabilities": {"deviceID": true, "CNIDeviceInfoFile": true}},
            {"type": "braid-fault", "log": b},
            {"type": "bridge", "bridge": format!("br-dev{net}"), "isGateway": false, "ipMasq": false,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": format!("198.18.{net}.0/24")}]]}}
        ]
    });
    c.apply(
        &json!({
            "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": name, "namespace": ns, "annotations": {RESOURCE_NAME: resource}},
            "spec": {"config": config.to_string()}
        })
        .to_string(),
    );
    c.wait(
        &format!("{ns}/{name} mirrored on node1"),
        || c.files_on("node1", "/etc/cni/braid.d").contains(&format!("{ns}/{name}.conflist")),
        || c.agent_log("node1"),
    );
}

fn logs(ns: &str, name: &str) -> (String, String) {
    (format!("/run/{ns}-{name}.a"), format!("/run/{ns}-{name}.b"))
}

/// The calls a recording plugin logged: (command, CNI_IFNAME, the configuration it was sent).
fn calls(c: &Cluster, log: &str) -> Vec<(String, String, Value)> {
    c.read_on("node1", log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let stdin: Value = serde_json::from_str(v["stdin"].as_str().unwrap()).unwrap();
            (v["command"].as_str().unwrap().to_string(), v["env"]["CNI_IFNAME"].as_str().unwrap().to_string(), stdin)
        })
        .collect()
}

/// A pod on node1 selecting `networks`, with `devices` of the resource in its limits (0: none).
fn device_pod(ns: &str, name: &str, networks: &str, devices: u32) -> String {
    let mut container = json!({"name": "main", "image": BUSYBOX, "imagePullPolicy": "Never",
                               "command": ["sleep", "100000"]});
    if devices > 0 {
        container["resources"] = json!({"limits": {VF: devices.to_string()}});
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": {NETWORKS: networks}},
        "spec": {"nodeName": "node1", "terminationGracePeriodSeconds": 0, "containers": [container]}
    })
    .to_string()
}

fn uid(c: &Cluster, ns: &str, pod: &str) -> String {
    c.get(&["pod", pod, "-n", ns])["metadata"]["uid"].as_str().unwrap().to_string()
}

/// The device IDs node1's kubelet allocated to the pod of `uid` (its device manager's checkpoint:
/// `PodDeviceEntries[].DeviceIDs`, by NUMA node), sorted.
fn allocated(c: &Cluster, uid: &str) -> Vec<String> {
    let cp: Value = serde_json::from_str(&c.read_on("node1", CHECKPOINT).unwrap()).unwrap();
    let mut ids: Vec<String> = cp["Data"]["PodDeviceEntries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["PodUID"] == uid && e["ResourceName"] == VF)
        .flat_map(|e| e["DeviceIDs"].as_object().unwrap().values().flat_map(|v| v.as_array().unwrap().clone()))
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

fn wait_status(c: &Cluster, ns: &str, name: &str) -> Value {
    let mut found = None;
    c.wait(
        &format!("network-status of {ns}/{name}"),
        || {
            found = c.network_status(ns, name);
            found.is_some()
        },
        || {
            format!(
                "{}\n{}",
                String::from_utf8_lossy(&c.kubectl(&["describe", "pod", name, "-n", ns]).stdout),
                c.agent_log("node1")
            )
        },
    );
    found.unwrap()
}

/// The sandbox (container ID) of the pod's status file on node1.
fn sandbox_of(c: &Cluster, ns: &str, pod: &str) -> String {
    let f = c
        .files_on("node1", "/run/braid/network-status")
        .into_iter()
        .find(|f| f.starts_with(&format!("{ns}_{pod}_")))
        .unwrap_or_else(|| panic!("no status file of {ns}/{pod}"));
    f.trim_end_matches(".json").rsplit('_').next().unwrap().to_string()
}

/// Waits for containerd's CNI DEL of `sandbox` on node1.
fn wait_torn_down(c: &Cluster, sandbox: &str) {
    c.wait(
        "the runtime's DEL of the pod",
        || {
            c.log_all("containerd-node1")
                .contains(&format!("TearDown network for sandbox \\\"{sandbox}\\\" successfully"))
        },
        || c.log("containerd-node1"),
    );
}

/// Addresses host-local holds for the network named `net` on node1.
fn reservations(c: &Cluster, net: &str) -> Vec<String> {
    c.files_on("node1", &format!("/var/lib/cni/networks/{net}")).into_iter().filter(|f| f.starts_with("198.")).collect()
}

fn device_info(id: &str) -> Value {
    json!({"type": "pci", "version": "1.1.0", "pci": {"pci-address": id}})
}

/// What a plugin of the network was sent carries the device: `deviceID` and `pciBusID`, and
/// with `capable` the runtimeConfig `deviceID` and a `CNIDeviceInfoFile` (none otherwise).
fn assert_given(conf: &Value, id: &str, capable: bool, what: &str) {
    assert_eq!((conf["deviceID"].as_str(), conf["pciBusID"].as_str()), (Some(id), Some(id)), "{what}: {conf}");
    if capable {
        assert_eq!(conf["runtimeConfig"]["deviceID"].as_str(), Some(id), "{what}: {conf}");
        assert!(conf["runtimeConfig"]["CNIDeviceInfoFile"].as_str().is_some(), "{what}: {conf}");
    } else {
        assert!(conf.get("runtimeConfig").is_none(), "{what}: no capability, no runtimeConfig: {conf}");
    }
}

#[test]
fn a_pod_given_a_device_gets_its_id_in_every_plugin_and_device_info_in_network_status_and_del_gets_the_same() {
    let Some(c) = Cluster::lock(
        "a_pod_given_a_device_gets_its_id_in_every_plugin_and_device_info_in_network_status_and_del_gets_the_same",
    ) else {
        return;
    };
    install_fault_plugin(&c);
    let _dp = device_plugin(&c);
    // Logs of an earlier run gone first; removed after the namespace (its pods' DEL) at the end.
    let (a, b) = logs("braid-dev1", "vf");
    let rm = || {
        let _ = c.on_node("node1", "rm", &["-f", &a, &b]);
    };
    rm();
    let _logs = Defer(rm);
    let _ns = c.namespace("braid-dev1");
    device_nad(&c, "braid-dev1", "vf", VF, 120);
    c.apply(&device_pod("braid-dev1", "one", "vf", 1));
    let st = wait_status(&c, "braid-dev1", "one");
    let ids = allocated(&c, &uid(&c, "braid-dev1", "one"));
    assert_eq!(ids.len(), 1, "the kubelet allocated one device: {ids:?}");
    let id = &ids[0];
    // The device plugin's Allocate gave the pod the same one (its environment).
    c.wait_running("braid-dev1", "one");
    let env = c.ok(&["exec", "-n", "braid-dev1", "one", "--", "sh", "-c", "echo $PCIDEVICE_BRAID_TEST_FAKEVF"]);
    assert_eq!(env.trim(), id, "the pod's PCIDEVICE_BRAID_TEST_FAKEVF");
    // Every plugin of the network was given it.
    let adds = |log: &str| calls(&c, log).into_iter().filter(|(cmd, _, _)| cmd == "ADD").collect::<Vec<_>>();
    let (add_a, add_b) = (adds(&a), adds(&b));
    assert_eq!((add_a.len(), add_b.len()), (1, 1), "{add_a:?} {add_b:?}");
    assert_given(&add_a[0].2, id, true, "the capable plugin's ADD");
    assert_given(&add_b[0].2, id, false, "the other plugin's ADD");
    // network-status: the device's device-info, from the device plugin's file.
    let net1: Vec<&Value> = st.as_array().unwrap().iter().filter(|e| e["name"] == "braid-dev1/vf").collect();
    assert_eq!(net1.len(), 1, "{st}");
    assert_eq!(net1[0]["interface"], "net1", "{st}");
    assert_eq!(net1[0]["device-info"], device_info(id), "{st}");
    let eth0: Vec<&Value> = st.as_array().unwrap().iter().filter(|e| e["interface"] == "eth0").collect();
    assert!(eth0[0].get("device-info").is_none(), "the cluster network has no device: {st}");
    // The network's own device-info file, named in its runtimeConfig.
    let sandbox = sandbox_of(&c, "braid-dev1", "one");
    let file = add_a[0].2["runtimeConfig"]["CNIDeviceInfoFile"].as_str().unwrap().to_string();
    assert_eq!(file, format!("{DEVINFO_CNI}/braid-dev1-vf-{sandbox}_{id}"));
    let held: Value = serde_json::from_str(&c.read_on("node1", &file).unwrap()).unwrap();
    assert_eq!(held, device_info(id));
    assert_eq!(reservations(&c, "braid-dev1-vf").len(), 1);

    // DEL: the same device to every plugin; then nothing of the attachment is left.
    c.ok(&["delete", "pod", "one", "-n", "braid-dev1", "--wait=true"]);
    wait_torn_down(&c, &sandbox);
    let dels = |log: &str| calls(&c, log).into_iter().filter(|(cmd, _, _)| cmd == "DEL").collect::<Vec<_>>();
    let (del_a, del_b) = (dels(&a), dels(&b));
    assert!(!del_a.is_empty() && !del_b.is_empty(), "{del_a:?} {del_b:?}");
    for (_, ifname, conf) in &del_a {
        assert_eq!(ifname, "net1");
        assert_given(conf, id, true, "the capable plugin's DEL");
    }
    for (_, _, conf) in &del_b {
        assert_given(conf, id, false, "the other plugin's DEL");
    }
    assert_eq!(c.read_on("node1", &file), None, "DEL removed {file}");
    assert_eq!(reservations(&c, "braid-dev1-vf"), Vec::<String>::new());
    assert!(c.files_on("node1", "/var/lib/cni/braid").iter().all(|f| !f.contains(&sandbox)));
}

#[test]
fn two_selections_of_one_resource_take_the_pods_two_devices_sorted_in_selection_order() {
    let Some(c) = Cluster::lock("two_selections_of_one_resource_take_the_pods_two_devices_sorted_in_selection_order")
    else {
        return;
    };
    install_fault_plugin(&c);
    let _dp = device_plugin(&c);
    let (a1, b1) = logs("braid-dev2", "vf-a");
    let (a2, b2) = logs("braid-dev2", "vf-b");
    let rm = || {
        let _ = c.on_node("node1", "rm", &["-f", &a1, &b1, &a2, &b2]);
    };
    rm();
    let _logs = Defer(rm);
    let _ns = c.namespace("braid-dev2");
    device_nad(&c, "braid-dev2", "vf-a", VF, 121);
    device_nad(&c, "braid-dev2", "vf-b", VF, 122);
    // vf-b first: the pod's first selection gets the lower ID whatever the networks' names.
    c.apply(&device_pod("braid-dev2", "two", "vf-b, vf-a", 2));
    let st = wait_status(&c, "braid-dev2", "two");
    let ids = allocated(&c, &uid(&c, "braid-dev2", "two"));
    assert_eq!(ids.len(), 2, "the kubelet allocated two devices: {ids:?}");
    let given = |log: &str| {
        let adds: Vec<_> = calls(&c, log).into_iter().filter(|(cmd, _, _)| cmd == "ADD").collect();
        assert_eq!(adds.len(), 1, "{log}: {adds:?}");
        (adds[0].1.clone(), adds[0].2["deviceID"].as_str().unwrap().to_string())
    };
    assert_eq!(given(&a2), ("net1".to_string(), ids[0].clone()), "vf-b, the first selection");
    assert_eq!(given(&a1), ("net2".to_string(), ids[1].clone()), "vf-a, the second selection");
    assert_given(&calls(&c, &b2)[0].2, &ids[0], false, "vf-b's other plugin");
    assert_given(&calls(&c, &b1)[0].2, &ids[1], false, "vf-a's other plugin");
    let distinct: BTreeSet<&str> = [&ids[0], &ids[1]].into_iter().map(String::as_str).collect();
    assert_eq!(distinct.len(), 2);
    for (network, id) in [("braid-dev2/vf-b", &ids[0]), ("braid-dev2/vf-a", &ids[1])] {
        let e: Vec<&Value> = st.as_array().unwrap().iter().filter(|e| e["name"] == network).collect();
        assert_eq!(e.len(), 1, "{st}");
        assert_eq!(e[0]["device-info"], device_info(id), "{network}: {st}");
    }
    let sandbox = sandbox_of(&c, "braid-dev2", "two");
    c.ok(&["delete", "pod", "two", "-n", "braid-dev2", "--wait=true"]);
    wait_torn_down(&c, &sandbox);
    assert!(c.files_on("node1", DEVINFO_CNI).iter().all(|f| !f.contains(&sandbox)));
}

/// The delegator of node1's braid conflist run by hand as the runtime runs it (ADD, in a fresh
/// network namespace of node1's, the pod's annotations in runtimeConfig): its exit code and what
/// it printed, and what the namespace holds afterwards (`ip -o link`). The namespace is removed
/// afterwards (after a DEL, should the ADD have attached anything).
fn add_by_hand(c: &Cluster, ns: &str, pod: &str, networks: &str, id: &str) -> (Value, String) {
    let list: Value = serde_json::from_str(&c.read_on("node1", "/etc/cni/net.d/00-braid.conflist").unwrap()).unwrap();
    let mut conf = list["plugins"][0].clone();
    conf["cniVersion"] = list["cniVersion"].clone();
    conf["name"] = list["name"].clone();
    conf["runtimeConfig"] = json!({"io.kubernetes.cri.pod-annotations": {NETWORKS: networks}});
    let netns = format!("braid-byhand-{id}");
    assert!(c.on_node("node1", "ip", &["netns", "add", &netns]).status.success());
    let run = |command: &str| {
        let script = format!(
            "printf '%s' \"$0\" | CNI_COMMAND={command} CNI_CONTAINERID={id} CNI_NETNS=/run/netns/{netns} CNI_IFNAME=eth0 \
             CNI_PATH=/opt/cni/bin CNI_ARGS='IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={pod};K8S_POD_INFRA_CONTAINER_ID={id}' \
             /opt/cni/bin/delegator"
        );
        c.on_node("node1", "sh", &["-c", &script, &conf.to_string()])
    };
    let out = run("ADD");
    let links = String::from_utf8_lossy(&c.on_node("node1", "ip", &["-n", &netns, "-o", "link"]).stdout).into_owned();
    if out.status.success() {
        let _ = run("DEL");
    }
    let _ = c.on_node("node1", "ip", &["netns", "del", &netns]);
    let printed: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("delegator printed no JSON: {out:?}"));
    assert!(!out.status.success(), "the ADD was not refused: {printed}");
    (printed, links)
}

/// Nothing of a refused ADD is left on node1: no state of the sandbox, no status file, no
/// device-info file, no address of the networks held for it.
fn assert_nothing_left(c: &Cluster, id: &str, nets: &[&str]) {
    assert!(c.files_on("node1", "/var/lib/cni/braid").iter().all(|f| !f.contains(id)), "state of {id} left");
    assert!(c.files_on("node1", "/run/braid/network-status").iter().all(|f| !f.contains(id)), "status of {id} left");
    assert!(c.files_on("node1", DEVINFO_CNI).iter().all(|f| !f.contains(id)), "device-info of {id} left");
    // host-local's reservation files hold the container ID they were made for.
    for net in nets {
        let held: Vec<String> = reservations(c, net)
            .into_iter()
            .filter(|a| c.read_on("node1", &format!("/var/lib/cni/networks/{net}/{a}")).is_some_and(|f| f.contains(id)))
            .collect();
        assert_eq!(held, Vec::<String>::new(), "{net}: addresses held for {id}");
    }
}

#[test]
fn refused_device_networks_say_why_with_code_7_or_11_and_leave_nothing() {
    let Some(c) = Cluster::lock("refused_device_networks_say_why_with_code_7_or_11_and_leave_nothing") else {
        return;
    };
    install_fault_plugin(&c);
    let mut dp = Some(device_plugin(&c));
    let mut files = Vec::new();
    for n in ["vf-a", "vf-b", "nosuch"] {
        let (a, b) = logs("braid-dev3", n);
        files.extend([a, b]);
    }
    let rm = || {
        let mut args = vec!["-f"];
        args.extend(files.iter().map(String::as_str));
        let _ = c.on_node("node1", "rm", &args);
    };
    rm();
    let _logs = Defer(rm);
    let _ns = c.namespace("braid-dev3");
    device_nad(&c, "braid-dev3", "vf-a", VF, 123);
    device_nad(&c, "braid-dev3", "vf-b", VF, 124);
    device_nad(&c, "braid-dev3", "nosuch", "braid.test/nosuch", 125);
    let nets = ["braid-dev3-vf-a", "braid-dev3-vf-b", "braid-dev3-nosuch"];

    // The pod author's mistakes, code 7, as the kubelet reports them (its Event), and by hand.
    let cases = [
        (
            "none",
            "vf-a",
            0,
            "network braid-dev3/vf-a names resource braid.test/fakevf",
            "was allocated no device of it",
        ),
        (
            "few",
            "vf-a, vf-b",
            1,
            "network braid-dev3/vf-b names resource braid.test/fakevf",
            "selects 2 networks of it but was allocated 1",
        ),
        (
            "unknown",
            "nosuch",
            0,
            "network braid-dev3/nosuch names resource braid.test/nosuch",
            "which no device plugin on this node offers",
        ),
    ];
    for (pod, networks, devices, names, why) in cases {
        c.apply(&device_pod("braid-dev3", pod, networks, devices));
        let msg = c.wait_pod_events("braid-dev3", pod, "FailedCreatePodSandBox", 1).join("\n");
        assert!(msg.contains(names) && msg.contains(why), "{pod}: {msg}");
        assert!(msg.contains(&format!("pod braid-dev3/{pod}")), "{pod}: {msg}");
        assert_eq!(c.network_status("braid-dev3", pod), None, "{pod}: no network-status");
        // The runtime's retries keep failing; by hand, the same refusal and its code.
        let id = format!("byhand{pod}");
        let (printed, links) = add_by_hand(&c, "braid-dev3", pod, networks, &id);
        assert_eq!(printed["code"], 7, "{pod}: {printed}");
        assert!(printed["msg"].as_str().unwrap().contains(why), "{pod}: {printed}");
        assert_eq!(links.lines().count(), 1, "{pod}: only lo in the namespace: {links}");
        assert_nothing_left(&c, &id, &nets);
    }
    // No recording plugin ever ran: every refusal came before anything was attached.
    for f in &files {
        assert_eq!(c.read_on("node1", f), None, "{f}: a delegate ran");
    }

    // The kubelet cannot answer: frozen (its socket there, no answer within the bound), then
    // stopped. Code 11: a retry can help. A pod that got its device first, to ask about.
    c.apply(&device_pod("braid-dev3", "later", "vf-a", 1));
    wait_status(&c, "braid-dev3", "later");
    // The kubelet part's own PID (node.sh records it), signalled by it alone.
    let kubelet = std::fs::read_to_string(c.dir().join("pids/kubelet-node1")).unwrap().trim().to_string();
    let signal = |sig: &str| std::process::Command::new("kill").args([sig, &kubelet]).status().unwrap().success();
    assert!(signal("-STOP"), "SIGSTOP to the kubelet {kubelet}");
    let thaw = Defer(|| {
        signal("-CONT");
    });
    let (printed, links) = add_by_hand(&c, "braid-dev3", "later", "vf-a", "byhandfrozen");
    drop(thaw);
    let msg = printed["msg"].as_str().unwrap();
    assert_eq!(printed["code"], 11, "{printed}");
    assert!(
        msg.contains("network braid-dev3/vf-a names resource braid.test/fakevf")
            && msg.contains("pod braid-dev3/later")
            && msg.contains("try again"),
        "{printed}"
    );
    assert_eq!(links.lines().count(), 1, "only lo: {links}");
    assert_nothing_left(&c, "byhandfrozen", &nets[..1]);
    c.node_sh(&["stop", "kubelet-node1"]);
    let restart = Defer(|| {
        c.node_sh(&["start", "kubelet-node1"]);
    });
    let (printed, links) = add_by_hand(&c, "braid-dev3", "later", "vf-a", "byhandstopped");
    assert_eq!(printed["code"], 11, "{printed}");
    assert!(printed["msg"].as_str().unwrap().contains("pod braid-dev3/later"), "{printed}");
    assert_eq!(links.lines().count(), 1, "only lo: {links}");
    assert_nothing_left(&c, "byhandstopped", &nets[..1]);
    report(&format!("kubelet frozen: {msg}"));
    report(&format!("kubelet stopped: {}", printed["msg"]));
    drop(restart);
    // A restarted kubelet forgets its device plugins: the plugin registers again (and is
    // stopped by its PID when the test ends).
    c.wait("node1 Ready again", || node_ready(&c), || c.log("kubelet-node1"));
    dp.take();
    let _dp = device_plugin(&c);
}

fn node_ready(c: &Cluster) -> bool {
    c.get(&["node", "node1"])["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|x| x["type"] == "Ready" && x["status"] == "True"))
}

/// A line for the reader of the suite's output, past libtest's capture.
fn report(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "REPORT {line}");
}

#[test]
fn a_hot_plug_update_keeps_the_device_info_of_the_device_network_it_keeps() {
    let Some(c) = Cluster::lock("a_hot_plug_update_keeps_the_device_info_of_the_device_network_it_keeps") else {
        return;
    };
    install_fault_plugin(&c);
    let _dp = device_plugin(&c);
    let _hotplug = c.hotplug_layout();
    let (a, b) = logs("braid-dev4", "vf");
    let rm = || {
        let _ = c.on_node("node1", "rm", &["-f", &a, &b]);
    };
    rm();
    let _logs = Defer(rm);
    let _ns = c.namespace("braid-dev4");
    device_nad(&c, "braid-dev4", "vf", VF, 126);
    let plain = json!({"cniVersion": "1.0.0", "name": "braid-dev4-plain", "plugins": [
        {"type": "bridge", "bridge": "br-dev127", "isGateway": false, "ipMasq": false,
         "ipam": {"type": "host-local", "ranges": [[{"subnet": "198.18.127.0/24"}]]}}]});
    c.apply(
        &json!({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": "plain", "namespace": "braid-dev4"}, "spec": {"config": plain.to_string()}})
        .to_string(),
    );
    c.wait(
        "braid-dev4/plain mirrored on node1",
        || c.files_on("node1", "/etc/cni/braid.d").contains(&"braid-dev4/plain.conflist".to_string()),
        || c.agent_log("node1"),
    );
    c.apply(&device_pod("braid-dev4", "hp", "vf", 1));
    wait_status(&c, "braid-dev4", "hp");
    let ids = allocated(&c, &uid(&c, "braid-dev4", "hp"));
    assert_eq!(ids.len(), 1, "{ids:?}");
    c.wait_running("braid-dev4", "hp");
    c.ok(&["annotate", "pod", "hp", "-n", "braid-dev4", "--overwrite", &format!("{NETWORKS}=vf, plain")]);
    let mut st = Value::Null;
    c.wait(
        "network-status of braid-dev4/hp with plain added",
        || {
            st = c.network_status("braid-dev4", "hp").unwrap_or_default();
            st.as_array().is_some_and(|a| a.iter().any(|e| e["name"] == "braid-dev4/plain"))
        },
        || c.agent_log("node1"),
    );
    let entry = |n: &str| st.as_array().unwrap().iter().find(|e| e["name"] == n).cloned().unwrap();
    assert_eq!(entry("braid-dev4/vf")["device-info"], device_info(&ids[0]), "kept: {st}");
    assert_eq!(entry("braid-dev4/vf")["interface"], "net1", "{st}");
    assert!(entry("braid-dev4/plain").get("device-info").is_none(), "added, no device: {st}");
    // The kept attachment was not attached again: one ADD of its plugins.
    assert_eq!(calls(&c, &a).iter().filter(|(cmd, _, _)| cmd == "ADD").count(), 1);
}

// --- Devices of another DRA driver --------------------------------------------------------
//
// braid's test DRA driver (`integration/node/dradriver`, started with `scripts/node.sh dradriver
// node1`) publishes node1's ResourceSlice of `dra.braid.test`: three devices carrying Multus's
// attributes (`k8s.cni.cncf.io/resourceName` = braid.test/dravf, `k8s.cni.cncf.io/deviceID` =
// 0000:00:1e.N) and one without them. The scheduler allocates one to a pod's claim, node1's
// kubelet has the driver prepare it and lists it in PodResources; braid's agent keeps the
// node's slices in its DRA devices record, from which the ADD takes the device's ID with no
// API request of its own.

const DRA_DRIVER: &str = "dra.braid.test";
const DRAVF: &str = "braid.test/dravf";
const DRA_RECORD: &str = "/var/lib/braid/dra-devices/devices.json";

/// node1's agent's DRA devices record (`Null` while there is none).
fn dra_record(c: &Cluster) -> Value {
    c.read_on("node1", DRA_RECORD).and_then(|s| serde_json::from_str(&s).ok()).unwrap_or_default()
}

/// The test DRA driver on node1 (a part of the cluster, started by `node.sh dradriver`, which
/// applies its DeviceClass; stopped by its PID on drop, the DeviceClass deleted), once node1's
/// agent's record lists its four devices.
fn dra_driver(c: &Cluster) -> Defer<impl FnMut() + '_> {
    c.node_sh(&["dradriver", "node1", "-driver", DRA_DRIVER, "-resource", DRAVF, "-count", "3", "-plain", "1"]);
    let stop = Defer(move || {
        c.node_sh(&["stop", "dradriver-node1"]);
        let _ = c.kubectl(&["delete", "deviceclass", DRA_DRIVER, "--ignore-not-found"]);
    });
    wait_recorded(c, 4);
    stop
}

/// Waits until node1's record lists `n` devices of the test driver in pool node1.
fn wait_recorded(c: &Cluster, n: usize) {
    c.wait(
        &format!("node1's DRA devices record listing {n} devices of {DRA_DRIVER}"),
        || dra_record(c)["devices"][DRA_DRIVER]["node1"].as_object().map_or(0, |m| m.len()) == n,
        || format!("{}\n{}\n{}", dra_record(c), c.agent_log("node1"), c.log("dradriver-node1")),
    );
}

/// A ResourceClaimTemplate `vf` of one device of the driver's class with the resource's
/// attribute, and a pod on node1 whose container names its claim, selecting `networks`.
fn dra_pod(c: &Cluster, ns: &str, name: &str, networks: &str) {
    c.apply(
        &json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "vf", "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [{"name": "vf", "exactly": {
                "deviceClassName": DRA_DRIVER,
                "selectors": [{"cel": {"expression":
                    format!("device.attributes[\"k8s.cni.cncf.io\"].resourceName == \"{DRAVF}\"")}}]}}]}}}
        })
        .to_string(),
    );
    // Scheduled (nodeSelector), not bound by nodeName: the kubelet refuses a pod bound to it
    // whose claims are not allocated yet, and the scheduler allocates them.
    c.apply(
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "annotations": {NETWORKS: networks}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": "node1"}, "terminationGracePeriodSeconds": 0,
                     "resourceClaims": [{"name": "vf", "resourceClaimTemplateName": "vf"}],
                     "containers": [{"name": "main", "image": BUSYBOX, "imagePullPolicy": "Never",
                                     "command": ["sleep", "100000"], "resources": {"claims": [{"name": "vf"}]}}]}
        })
        .to_string(),
    );
}

/// The pod's claim as the scheduler allocated it: (claim `ns/name`, device name, the device's
/// `k8s.cni.cncf.io/deviceID` on node1's slice).
fn dra_allocated(c: &Cluster, ns: &str, pod: &str) -> (String, String, String) {
    let mut claim = String::new();
    c.wait(
        &format!("{ns}/{pod}'s claim allocated"),
        || {
            let p = c.get(&["pod", pod, "-n", ns]);
            claim = p["status"]["resourceClaimStatuses"][0]["resourceClaimName"].as_str().unwrap_or("").to_string();
            !claim.is_empty()
                && c.get(&["resourceclaim", &claim, "-n", ns])["status"]["allocation"]["devices"]["results"][0]
                    ["device"]
                    .is_string()
        },
        || c.describe(ns, pod),
    );
    let r = c.get(&["resourceclaim", &claim, "-n", ns])["status"]["allocation"]["devices"]["results"][0].clone();
    assert_eq!((r["driver"].as_str(), r["pool"].as_str()), (Some(DRA_DRIVER), Some("node1")), "{r}");
    let device = r["device"].as_str().unwrap().to_string();
    let slices =
        c.get(&["resourceslices", "--field-selector", &format!("spec.nodeName=node1,spec.driver={DRA_DRIVER}")]);
    let id = slices["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["spec"]["devices"].as_array().unwrap().clone())
        .find(|d| d["name"] == device.as_str())
        .and_then(|d| d["attributes"]["k8s.cni.cncf.io/deviceID"]["string"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("{device} has no deviceID on node1's slice: {slices}"));
    (format!("{ns}/{claim}"), device, id)
}

#[test]
fn a_device_of_another_dra_driver_gives_its_id_from_the_nodes_record_and_one_not_recorded_is_code_11() {
    let Some(c) = Cluster::lock(
        "a_device_of_another_dra_driver_gives_its_id_from_the_nodes_record_and_one_not_recorded_is_code_11",
    ) else {
        return;
    };
    install_fault_plugin(&c);
    let mut driver = Some(dra_driver(&c));
    let ns = "braid-dev5";
    let (a, b) = logs(ns, "dravf");
    let rm = || {
        let _ = c.on_node("node1", "rm", &["-f", &a, &b]);
    };
    rm();
    let _logs = Defer(rm);
    let _ns = c.namespace(ns);
    device_nad(&c, ns, "dravf", DRAVF, 127);
    let net = format!("{ns}-dravf");
    // The record lists the device without Multus's attributes too (Multus skips it).
    let plain = &dra_record(&c)["devices"][DRA_DRIVER]["node1"]["plain-0"];
    assert_eq!(plain, &json!({}), "{}", dra_record(&c));

    let mark = c.agent_requests().len();
    dra_pod(&c, ns, "one", "dravf");
    let st = wait_status(&c, ns, "one");
    let (claim, device, id) = dra_allocated(&c, ns, "one");
    assert!(id.starts_with("0000:00:1e."), "{device}: {id}");
    assert!(
        c.log_all("dradriver-node1").contains(&format!("prepared claim {claim} ")),
        "the driver prepared {claim}: {}",
        c.log("dradriver-node1")
    );
    // Every plugin of the network was given the device's ID, as for a device plugin's device.
    let adds = |log: &str| calls(&c, log).into_iter().filter(|(cmd, _, _)| cmd == "ADD").collect::<Vec<_>>();
    let (add_a, add_b) = (adds(&a), adds(&b));
    assert_eq!((add_a.len(), add_b.len()), (1, 1), "{add_a:?} {add_b:?}");
    assert_eq!(add_a[0].1, "net1");
    assert_given(&add_a[0].2, &id, true, "the capable plugin's ADD");
    assert_given(&add_b[0].2, &id, false, "the other plugin's ADD");
    // No device plugin wrote a device-info file for it: the network's own file names it, the
    // network-status entry has no device-info (unless a delegate wrote one: none here).
    let entry: Vec<&Value> = st.as_array().unwrap().iter().filter(|e| e["name"] == format!("{ns}/dravf")).collect();
    assert_eq!(entry.len(), 1, "{st}");
    assert_eq!(entry[0]["interface"], "net1", "{st}");
    assert!(entry[0].get("device-info").is_none(), "{st}");
    let sandbox = sandbox_of(&c, ns, "one");
    let file = add_a[0].2["runtimeConfig"]["CNIDeviceInfoFile"].as_str().unwrap().to_string();
    assert_eq!(file, format!("{DEVINFO_CNI}/{net}-{sandbox}_{id}"));

    // No API request for it by braid: node1's agent sent only the pod's network-status and its
    // AddedInterface Events (eth0, net1) — nothing of the claim, nothing of the slices.
    c.wait_running(ns, "one");
    let ours = format!(" in {ns}");
    let sent = || {
        let mut v: Vec<String> = c.requests_of("node1", mark).into_iter().filter(|r| r.ends_with(&ours)).collect();
        v.sort();
        v
    };
    c.wait(
        "node1's agent's AddedInterface Events",
        || sent().iter().filter(|r| r.starts_with("create events")).count() >= 2,
        || format!("{:?}", sent()),
    );
    let all = c.requests_of("node1", mark);
    report(&format!("requests of node1's agent for a pod with another DRA driver's device: {all:?}"));
    assert_eq!(sent(), [format!("create events{ours}"), format!("create events{ours}"), format!("patch pods{ours}")]);
    assert!(all.iter().all(|r| !r.contains("resourceclaims") && !r.starts_with("list resourceslices")), "{all:?}");

    // DEL: the same device; nothing of the attachment left.
    c.ok(&["delete", "pod", "one", "-n", ns, "--wait=true"]);
    wait_torn_down(&c, &sandbox);
    let dels: Vec<_> = calls(&c, &a).into_iter().filter(|(cmd, _, _)| cmd == "DEL").collect();
    assert!(!dels.is_empty(), "{dels:?}");
    for (_, _, conf) in &dels {
        assert_given(conf, &id, true, "the capable plugin's DEL");
    }
    assert_nothing_left(&c, &sandbox, &[&net]);
    assert_eq!(c.read_on("node1", &file), None, "DEL removed {file}");

    // A device the record does not hold (the record older than the driver's slice): the pod's
    // sandbox fails with code 11 naming network, resource, pod and device, nothing attached;
    // once the agent records the device, the kubelet's next try attaches it.
    let mut stale = dra_record(&c);
    stale["devices"].as_object_mut().unwrap().remove(DRA_DRIVER);
    c.write_on("node1", DRA_RECORD, &stale.to_string());
    rm();
    dra_pod(&c, ns, "stale", "dravf");
    let (claim, device, id) = dra_allocated(&c, ns, "stale");
    let msg = c.wait_pod_events(ns, "stale", "FailedCreatePodSandBox", 1).join("\n");
    let names = [
        format!("network {ns}/dravf names resource {DRAVF}"),
        format!("pod {ns}/stale"),
        format!("{DRA_DRIVER}/node1/{device} (claim {claim})"),
        "not in the node's DRA devices record".to_string(),
        "try again".to_string(),
    ];
    assert!(names.iter().all(|n| msg.contains(n.as_str())), "{msg}");
    assert_eq!(c.network_status(ns, "stale"), None, "no network-status");
    let (printed, links) = add_by_hand(&c, ns, "stale", "dravf", "byhandstale");
    assert_eq!(printed["code"], 11, "{printed}");
    let m = printed["msg"].as_str().unwrap();
    assert!(names.iter().all(|n| m.contains(n.as_str())), "{printed}");
    assert_eq!(links.lines().count(), 1, "only lo in the namespace: {links}");
    assert_nothing_left(&c, "byhandstale", &[&net]);
    assert_eq!(c.read_on("node1", &a), None, "no delegate ran");
    report(&format!("a DRA device not in the record: {m}"));
    // The driver restarted: its slice deleted and published again, the agent's record anew.
    drop(driver.take());
    driver.replace(dra_driver(&c));
    let st = wait_status(&c, ns, "stale");
    assert!(st.as_array().unwrap().iter().any(|e| e["name"] == format!("{ns}/dravf")), "{st}");
    let adds_a = adds(&a);
    assert_eq!(adds_a.len(), 1, "{adds_a:?}");
    assert_given(&adds_a[0].2, &id, true, "the retried ADD");
    let sandbox = sandbox_of(&c, ns, "stale");
    c.ok(&["delete", "pod", "stale", "-n", ns, "--wait=true"]);
    wait_torn_down(&c, &sandbox);
    assert_nothing_left(&c, &sandbox, &[&net]);
    // The driver stops last (declared before the namespace): the kubelet unprepares the
    // claims of the namespace's pods through it.
}
