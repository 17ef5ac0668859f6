//! The default-network override (`v1.multus-cni.io/default-network`) and the node agent's
//! `AddedInterface` Events, on the real cluster of `scripts/node.sh` (the fixture of
//! `kube_node.rs`: braid installed with `kubectl apply -k deploy/kubernetes`, API mode). Each
//! test does what an operator does with `kubectl` and reads what they would read: the pod's
//! interfaces from inside it, its network-status, `kubectl describe pod`, the kubelet's events,
//! the node's files.
//!
//! Waits are upper bounds for a stuck cluster, never measurements.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use braid_integration::cluster::{Cluster, Defer, BUSYBOX, NETWORK_STATUS};
use serde_json::{json, Value};
use std::collections::BTreeMap;

const DEFAULT_NETWORK: &str = "v1.multus-cni.io/default-network";

/// A NAD `ns/name` of a bridge network of its own (no gateway) with host-local addresses from
/// `198.18.<net>.0/24` on the bridge `brd<net>` (interface names have at most 15 characters); host-local keeps its leases in `/var/lib/cni/networks/<name>`.
fn nad(ns: &str, name: &str, net: u8) -> String {
    let config = json!({
        "cniVersion": "1.0.0", "name": name,
        "plugins": [{"type": "bridge", "bridge": format!("brd{net}"), "isGateway": false, "ipMasq": false,
                     "ipam": {"type": "host-local", "ranges": [[{"subnet": format!("198.18.{net}.0/24")}]]}}]
    });
    json!({
        "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name, "namespace": ns}, "spec": {"config": config.to_string()}
    })
    .to_string()
}

/// A NAD made for the test (in `kube-system`, which the test's namespace guard does not
/// delete), deleted on drop.
fn nad_for_test<'c>(c: &'c Cluster, ns: &str, name: &str, net: u8) -> Defer<impl FnMut() + 'c> {
    c.apply(&nad(ns, name, net));
    let (ns, name) = (ns.to_string(), name.to_string());
    Defer(move || {
        let _ = c.kubectl(&["delete", "network-attachment-definition", &name, "-n", &ns, "--ignore-not-found"]);
    })
}

/// A busybox pod on node1 with these annotations.
fn pod(ns: &str, name: &str, annotations: Value) -> String {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {
            "nodeName": "node1",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": BUSYBOX, "imagePullPolicy": "Never", "command": ["sleep", "100000"]}]
        }
    })
    .to_string()
}

fn wait_mirrored(c: &Cluster, network: &str) {
    c.wait(
        &format!("{network} mirrored on node1"),
        || c.files_on("node1", "/etc/cni/braid.d").contains(&format!("{network}.conflist")),
        || c.agent_log("node1"),
    );
}

fn status(c: &Cluster, ns: &str, name: &str) -> Option<Value> {
    let p = c.get(&["pod", name, "-n", ns]);
    let text = p["metadata"]["annotations"][NETWORK_STATUS].as_str()?.to_string();
    Some(serde_json::from_str(&text).unwrap())
}

fn wait_status(c: &Cluster, ns: &str, name: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let mut found = None;
    c.wait(
        &format!("network-status of {ns}/{name}"),
        || {
            found = status(c, ns, name).filter(|s| ok(s));
            found.is_some()
        },
        || format!("{:?}\n{}", status(c, ns, name), c.agent_log("node1")),
    );
    found.unwrap()
}

/// The pod's IPv4 addresses (with prefix) by interface, as `ip` inside it shows them.
fn addresses_inside(c: &Cluster, ns: &str, name: &str) -> BTreeMap<String, Vec<String>> {
    c.wait_running(ns, name);
    let addr = c.ok(&["exec", "-n", ns, name, "--", "ip", "-o", "-4", "addr"]);
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for l in addr.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if let (Some(ifname), Some(a)) = (w.get(1), w.get(3)) {
            if *ifname != "lo" {
                m.entry(ifname.to_string()).or_default().push(a.to_string());
            }
        }
    }
    m
}

/// The entry of `ifname` in a network-status document.
fn entry<'v>(st: &'v Value, ifname: &str) -> &'v Value {
    st.as_array().unwrap().iter().find(|e| e["interface"] == ifname).unwrap_or_else(|| panic!("no {ifname}: {st}"))
}

fn status_files(c: &Cluster, ns: &str, pod: &str) -> Vec<String> {
    c.files_on("node1", "/run/braid/network-status")
        .into_iter()
        .filter(|f| f.starts_with(&format!("{ns}_{pod}_")))
        .collect()
}

fn leases(c: &Cluster, net: &str) -> Vec<String> {
    c.files_on("node1", &format!("/var/lib/cni/networks/{net}")).into_iter().filter(|f| f.starts_with("198.")).collect()
}

/// Kills braid's agent on node1 (SIGKILL) and waits for the kubelet to restart it.
fn kill_agent(c: &Cluster) {
    let (pod_name, _) = c.agent_pod("node1");
    let restarts = || {
        c.get(&["pod", &pod_name, "-n", "kube-system"])["status"]["containerStatuses"][0]["restartCount"]
            .as_u64()
            .unwrap_or(0)
    };
    let r0 = restarts();
    let kubelet = std::fs::read_to_string(c.dir().join("pids/kubelet-node1")).unwrap();
    let out = c.on_node("node1", "pkill", &["-KILL", "-x", "braid-install", "--ns", kubelet.trim(), "--nslist", "net"]);
    assert!(out.status.success(), "no braid-install process on node1: {out:?}");
    c.wait("the kubelet restarting the agent", || restarts() > r0, || c.log("kubelet-node1"));
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

#[test]
fn a_default_network_nad_is_the_pods_eth0_in_network_status_and_events_and_del_releases_it_after_the_nad_and_agent_are_gone(
) {
    let Some(c) = Cluster::lock("a_default_network_nad_is_the_pods_eth0") else {
        return;
    };
    let ns = c.namespace("braid-dflt");
    let _nad = nad_for_test(&c, "kube-system", "braid-primary", 120);
    wait_mirrored(&c, "kube-system/braid-primary");
    // A bare name: the operator's namespace (kube-system, --default-network-namespace's default).
    c.apply(&pod(
        &ns.name,
        "p",
        json!({DEFAULT_NETWORK: "braid-primary", "k8s.v1.cni.cncf.io/networks": "default/isolated"}),
    ));
    let st = wait_status(&c, &ns.name, "p", |s| s.as_array().is_some_and(|a| a.len() == 2));
    let eth0 = entry(&st, "eth0");
    assert_eq!(eth0["name"], "kube-system/braid-primary", "{st}");
    assert_eq!(eth0["default"], true, "{st}");
    assert_eq!(entry(&st, "net1")["name"], "default/isolated");
    assert_eq!(entry(&st, "net1")["default"], false);
    let ip = eth0["ips"][0].as_str().unwrap().to_string();
    assert!(ip.starts_with("198.18.120."), "{st}");
    // Inside the pod: eth0 has the NAD's address; and the cluster knows it as the pod's IP.
    let inside = addresses_inside(&c, &ns.name, "p");
    assert_eq!(inside.get("eth0"), Some(&vec![format!("{ip}/24")]), "{inside:?}");
    assert!(inside.get("net1").is_some_and(|a| a[0].starts_with("198.18.100.")), "{inside:?}");
    assert_eq!(c.get(&["pod", "p", "-n", &ns.name])["status"]["podIP"], ip.as_str());
    assert_eq!(leases(&c, "braid-primary"), vec![ip.clone()]);

    // The agent's AddedInterface Events, Multus's format, one per interface, in describe too.
    let net1 = entry(&st, "net1")["ips"][0].as_str().unwrap().to_string();
    let added = c.wait_pod_events(&ns.name, "p", "AddedInterface", 2);
    assert_eq!(
        added,
        vec![
            format!("Add eth0 [{ip}/24] from kube-system/braid-primary"),
            format!("Add net1 [{net1}/24] from default/isolated")
        ]
    );
    let described = String::from_utf8_lossy(&c.kubectl(&["describe", "pod", "p", "-n", &ns.name]).stdout).into_owned();
    assert!(
        described.contains("AddedInterface") && described.contains("from kube-system/braid-primary"),
        "{described}"
    );
    let ev = c.get(&["events", "-n", &ns.name, "--field-selector", "involvedObject.name=p,reason=AddedInterface"]);
    for e in ev["items"].as_array().unwrap() {
        assert_eq!((e["type"].as_str(), e["source"]["component"].as_str()), (Some("Normal"), Some("braid-install")));
    }

    // DEL releases what ADD attached from braid's state, not from the annotation or the NAD:
    // the NAD is deleted (its mirror goes), the agent killed and restarted, then the pod.
    let sandbox = status_files(&c, &ns.name, "p")[0].trim_end_matches(".json").rsplit('_').next().unwrap().to_string();
    c.ok(&["delete", "network-attachment-definition", "braid-primary", "-n", "kube-system"]);
    c.wait(
        "the mirror of kube-system/braid-primary removed",
        || !c.files_on("node1", "/etc/cni/braid.d/kube-system").iter().any(|f| f.starts_with("braid-primary.")),
        || c.agent_log("node1"),
    );
    kill_agent(&c);
    // The restarted agent republishes the status; its Events are already there (no second ones).
    c.ok(&["delete", "pod", "p", "-n", &ns.name, "--wait=true"]);
    wait_torn_down(&c, &sandbox);
    assert_eq!(leases(&c, "braid-primary"), Vec::<String>::new(), "the default network's lease released");
    assert!(leases(&c, "isolated").iter().all(|l| l != &net1), "net1's lease released");
    assert!(c.files_on("node1", "/var/lib/cni/braid").iter().all(|f| !f.contains(&sandbox)), "state left");
    assert_eq!(status_files(&c, &ns.name, "p"), Vec::<String>::new());
    assert_eq!(c.pod_events(&ns.name, "p", "AddedInterface").len(), 2, "one Event per interface, also after a restart");
}

#[test]
fn an_unknown_or_forbidden_default_network_refuses_the_pod_with_the_reason_and_leaves_nothing() {
    let Some(c) = Cluster::lock("an_unknown_or_forbidden_default_network_refuses_the_pod") else {
        return;
    };
    let ns = c.namespace("braid-dflt-bad");
    let other = c.namespace("braid-dflt-other");
    // The pod's own namespace (not allowed by default) and another tenant's (never).
    c.apply(&nad(&ns.name, "own", 121));
    c.apply(&nad(&other.name, "theirs", 122));
    wait_mirrored(&c, &format!("{}/own", ns.name));
    wait_mirrored(&c, &format!("{}/theirs", other.name));
    let isolated = leases(&c, "isolated").len();
    let cases = [
        ("unknown", "nope".to_string(), "(network kube-system/nope): unknown network: no /etc/cni/braid.d/kube-system/nope.conflist"),
        (
            "own",
            format!("{}/own", ns.name),
            "cannot be the default network of a pod of namespace \"braid-dflt-bad\": only networks of [\"kube-system\"] may",
        ),
        (
            "theirs",
            format!("{}/theirs", other.name),
            "a network of namespace \"braid-dflt-other\" cannot be the default network",
        ),
    ];
    for (p, value, _) in &cases {
        c.apply(&pod(&ns.name, p, json!({DEFAULT_NETWORK: value, "k8s.v1.cni.cncf.io/networks": "default/isolated"})));
    }
    for (p, value, want) in &cases {
        let mut warnings = Vec::new();
        c.wait(
            &format!("the kubelet's FailedCreatePodSandBox of {p}"),
            || {
                warnings = c.pod_events(&ns.name, p, "FailedCreatePodSandBox");
                !warnings.is_empty()
            },
            || c.log("kubelet-node1"),
        );
        let w = &warnings[0];
        let head = format!("pod annotation {DEFAULT_NETWORK} of pod {}/{p}", ns.name);
        assert!(w.contains(&head) && w.contains(want), "{value}: {w}");
        assert!(w.contains(value.as_str()) || *p == "unknown", "{w}");
    }
    // Refused before anything ran: no status, no state, no lease of the secondary network.
    for (p, _, _) in &cases {
        assert_eq!(status_files(&c, &ns.name, p), Vec::<String>::new());
        assert!(status(&c, &ns.name, p).is_none());
        assert_eq!(c.pod_events(&ns.name, p, "AddedInterface"), Vec::<String>::new());
    }
    assert!(c.files_on("node1", "/var/lib/cni/braid").iter().all(|f| !f.contains("braid-dflt-bad")));
    assert_eq!(leases(&c, "isolated").len(), isolated, "no lease of default/isolated taken");
    assert_eq!(leases(&c, "own"), Vec::<String>::new());
    assert_eq!(leases(&c, "theirs"), Vec::<String>::new());
    drop(other);
}

#[test]
fn a_hot_plug_never_swaps_the_primary_and_an_added_network_gets_its_event() {
    let Some(c) = Cluster::lock("a_hot_plug_never_swaps_the_primary") else {
        return;
    };
    let _hotplug = c.hotplug_layout();
    let ns = c.namespace("braid-dflt-hp");
    let _a = nad_for_test(&c, "kube-system", "braid-primary-a", 123);
    let _b = nad_for_test(&c, "kube-system", "braid-primary-b", 124);
    wait_mirrored(&c, "kube-system/braid-primary-a");
    wait_mirrored(&c, "kube-system/braid-primary-b");
    c.apply(&pod(&ns.name, "p", json!({DEFAULT_NETWORK: "kube-system/braid-primary-a"})));
    let st = wait_status(&c, &ns.name, "p", |s| s.as_array().is_some_and(|a| a.len() == 1));
    let ip = entry(&st, "eth0")["ips"][0].as_str().unwrap().to_string();
    assert_eq!(entry(&st, "eth0")["name"], "kube-system/braid-primary-a");
    // Both annotations edited: the networks annotation is carried out (net1 added, with its
    // Event); the default network stays what the sandbox was started with.
    c.ok(&[
        "annotate",
        "pod",
        "p",
        "-n",
        &ns.name,
        "--overwrite",
        &format!("{DEFAULT_NETWORK}=kube-system/braid-primary-b"),
        "k8s.v1.cni.cncf.io/networks=default/isolated",
    ]);
    let st = wait_status(&c, &ns.name, "p", |s| s.as_array().is_some_and(|a| a.len() == 2));
    assert_eq!(entry(&st, "eth0")["name"], "kube-system/braid-primary-a", "{st}");
    assert_eq!(entry(&st, "eth0")["default"], true, "{st}");
    assert_eq!(entry(&st, "eth0")["ips"][0], ip.as_str(), "{st}");
    assert_eq!(entry(&st, "net1")["name"], "default/isolated", "{st}");
    let inside = addresses_inside(&c, &ns.name, "p");
    assert_eq!(inside.get("eth0"), Some(&vec![format!("{ip}/24")]), "{inside:?}");
    assert_eq!(leases(&c, "braid-primary-b"), Vec::<String>::new(), "no attachment of the edited default network");
    let net1 = entry(&st, "net1")["ips"][0].as_str().unwrap().to_string();
    let added = c.wait_pod_events(&ns.name, "p", "AddedInterface", 2);
    assert_eq!(
        added,
        vec![
            format!("Add eth0 [{ip}/24] from kube-system/braid-primary-a"),
            format!("Add net1 [{net1}/24] from default/isolated")
        ]
    );
    let sandbox = status_files(&c, &ns.name, "p")[0].trim_end_matches(".json").rsplit('_').next().unwrap().to_string();
    c.ok(&["delete", "pod", "p", "-n", &ns.name, "--wait=true"]);
    wait_torn_down(&c, &sandbox);
    assert_eq!(leases(&c, "braid-primary-a"), Vec::<String>::new());
}
