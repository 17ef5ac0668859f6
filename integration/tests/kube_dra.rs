//! braid as a DRA driver on the real cluster of `scripts/node.sh` (two nodes, the real
//! kube-scheduler, kube-controller-manager's resourceclaim controller, each node's kubelet with
//! its plugin manager): braid's agent with `--dra` (`deploy/kubernetes-dra`) registers with each
//! kubelet, publishes each node's networks as a ResourceSlice, prepares the claims the kubelet
//! hands it, and reports each claim-backed attachment on its claim.
//!
//! A network only node2 can attach: its plugin (`braid-dra-only`, a copy of the reference
//! `bridge` under another name — what an SR-IOV CNI installed only on the nodes with the NICs
//! is) is in node2's CNI bin dir alone, so only node2's slice offers it, and the scheduler puts
//! a pod whose claim asks for it on node2.
//!
//! Waits are upper bounds for a stuck cluster, never measurements.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use braid_integration::cluster::{Cluster, Defer, BUSYBOX};
use serde_json::{json, Value};
use std::collections::BTreeMap;

const DRIVER: &str = "net.braid-cni.io";
const ONLY: &str = "braid-dra-only";
const CLAIMS: &str = "/var/lib/braid/claims";

/// `braid-dra-only` in node2's CNI bin dir (the reference bridge plugin under that name),
/// removed again when the guard drops.
fn plugin_only_on_node2(c: &Cluster) -> Defer<impl FnMut() + '_> {
    let out = c.on_node("node2", "cp", &["/opt/cni/bin/bridge", &format!("/opt/cni/bin/{ONLY}")]);
    assert!(out.status.success(), "installing {ONLY} on node2: {out:?}");
    Defer(move || {
        let _ = c.on_node("node2", "rm", &["-f", &format!("/opt/cni/bin/{ONLY}")]);
    })
}

/// A NAD `ns/name` of `config`.
fn nad_of(ns: &str, name: &str, config: &Value) -> String {
    json!({
        "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"config": config.to_string()}
    })
    .to_string()
}

/// A NAD `ns/name` of plugin `plugin` (a bridge) with addresses from 198.18.<net>.0/24.
fn nad(c: &Cluster, ns: &str, name: &str, plugin: &str, net: u8) {
    let config = json!({
        "cniVersion": "1.0.0", "name": format!("{ns}-{name}"),
        "plugins": [{"type": plugin, "bridge": format!("br-dra{net}"), "isGateway": false, "ipMasq": false,
                     "ipam": {"type": "host-local", "ranges": [[{"subnet": format!("198.18.{net}.0/24")}]]}}]
    });
    c.apply(&nad_of(ns, name, &config));
}

/// The devices of braid's slices on `node`: (device name, its `network` attribute).
fn offered(c: &Cluster, node: &str) -> Vec<(String, String)> {
    let slices = c.get(&["resourceslices", "--field-selector", &format!("spec.nodeName={node},spec.driver={DRIVER}")]);
    let mut out: Vec<(String, String)> = slices["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["spec"]["devices"].as_array().cloned().unwrap_or_default())
        .map(|d| {
            (
                d["name"].as_str().unwrap_or_default().to_string(),
                d["attributes"]["network"]["string"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn offers(c: &Cluster, node: &str, network: &str) -> bool {
    offered(c, node).iter().any(|(_, n)| n == network)
}

/// A ResourceClaimTemplate `name` asking for braid's device of `network`, with `parameters`
/// (braid's opaque selection keys) for its request `net`.
fn template(ns: &str, name: &str, network: &str, parameters: Value) -> String {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"spec": {"devices": {
            "requests": [{"name": "net", "exactly": {
                "deviceClassName": DRIVER,
                "selectors": [{"cel": {"expression": format!("device.attributes[\"{DRIVER}\"].network == \"{network}\"")}}]
            }}],
            "config": [{"requests": ["net"], "opaque": {"driver": DRIVER, "parameters": parameters}}]
        }}}
    })
    .to_string()
}

/// A pod `ns/name` (no node: the scheduler places it) whose claim `net` comes from `template`.
fn claim_pod(ns: &str, name: &str, template: &str) -> String {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "resourceClaims": [{"name": "net", "resourceClaimTemplateName": template}],
            "containers": [{"name": "main", "image": BUSYBOX, "imagePullPolicy": "Never",
                            "command": ["sleep", "100000"]}]
        }
    })
    .to_string()
}

/// The claim the resourceclaim controller made for the pod's claim `net`.
fn claim_of(c: &Cluster, ns: &str, pod: &str) -> Option<Value> {
    let p = c.get(&["pod", pod, "-n", ns]);
    let name = p["status"]["resourceClaimStatuses"].as_array()?.iter().find(|s| s["name"] == "net")?
        ["resourceClaimName"]
        .as_str()?
        .to_string();
    Some(c.get(&["resourceclaim", &name, "-n", ns]))
}

/// braid's state files on node2 (the delegator's, one per sandbox it attached, named by the
/// sandbox): not its dot-files — the directory's owner mark, which the first ADD on a fresh
/// node creates (a clean clone's run began with this file's tests), and the retired files the
/// agent sweeps.
fn state(c: &Cluster) -> Vec<String> {
    c.files_on("node2", "/var/lib/cni/braid").into_iter().filter(|f| !f.starts_with('.')).collect()
}

#[test]
fn a_network_only_node2_has_puts_the_pod_there_with_the_interface_its_claim_reports_and_del_leaves_nothing() {
    let Some(c) = Cluster::lock(
        "a_network_only_node2_has_puts_the_pod_there_with_the_interface_its_claim_reports_and_del_leaves_nothing",
    ) else {
        return;
    };
    assert!(c.nodes() >= 2, "this test needs two nodes (scripts/node.sh up 2)");
    let _only = plugin_only_on_node2(&c);
    let _dra = c.dra_layout();
    let ns = c.namespace("braid-dra1");
    nad(&c, &ns.name, "side", ONLY, 130);
    nad(&c, &ns.name, "both", "bridge", 131);
    let (side, both) = ("braid-dra1/side", "braid-dra1/both");
    c.wait(
        "node2's slice offering both networks",
        || offers(&c, "node2", side) && offers(&c, "node2", both),
        || format!("{:?}\n{}", offered(&c, "node2"), c.agent_log("node2")),
    );
    c.wait(
        "node1's slice offering the network of the bridge",
        || offers(&c, "node1", both),
        || format!("{:?}\n{}", offered(&c, "node1"), c.agent_log("node1")),
    );
    assert!(!offers(&c, "node1", side), "node1 has no {ONLY}, yet offers {side}: {:?}", offered(&c, "node1"));

    c.apply(&template(&ns.name, "side", side, json!({"interface": "side0"})));
    let state_before = state(&c);
    let mark = c.agent_requests().len();
    c.apply(&claim_pod(&ns.name, "web", "side"));
    c.wait_running(&ns.name, "web");
    let pod = c.get(&["pod", "web", "-n", &ns.name]);
    assert_eq!(pod["spec"]["nodeName"], "node2", "the scheduler placed the pod where its network is");

    // The interface, seen inside the pod, with its address from the network's range.
    let addr = c.ok(&["exec", "-n", &ns.name, "web", "--", "ip", "-o", "-4", "addr", "show", "dev", "side0"]);
    let ip = addr
        .split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .unwrap_or_else(|| panic!("no IPv4 address on side0: {addr}"))
        .to_string();
    assert!(ip.starts_with("198.18.130."), "{ip}");

    // The claim reports it: braid's device, Ready, with the interface's name, address and MAC.
    let reported = |claim: &Value| claim["status"]["devices"].as_array().is_some_and(|d| !d.is_empty());
    c.wait(
        "the claim's status.devices",
        || reported(&claim_of(&c, &ns.name, "web").unwrap_or_default()),
        || format!("{:?}\n{}", claim_of(&c, &ns.name, "web"), c.agent_log("node2")),
    );
    let claim = claim_of(&c, &ns.name, "web").unwrap();
    let devices = claim["status"]["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 1, "{claim}");
    let d = &devices[0];
    let allocated = &claim["status"]["allocation"]["devices"]["results"][0];
    assert_eq!((&d["driver"], &d["pool"], &d["device"]), (&json!(DRIVER), &json!("node2"), &allocated["device"]));
    assert_eq!(d["shareID"], allocated["shareID"], "{claim}");
    assert_eq!(d["networkData"]["interfaceName"], "side0", "{claim}");
    assert_eq!(d["networkData"]["ips"], json!([ip]), "{claim}");
    let mac = c.ok(&["exec", "-n", &ns.name, "web", "--", "cat", "/sys/class/net/side0/address"]);
    assert_eq!(d["networkData"]["hardwareAddress"], mac.trim(), "{claim}");
    let ready: Vec<&Value> = d["conditions"].as_array().unwrap().iter().filter(|k| k["type"] == "Ready").collect();
    assert_eq!(ready.len(), 1, "{claim}");
    assert_eq!(ready[0]["status"], "True", "{claim}");

    // What the claim cost in API requests, all from node2's agent and off the ADD path: one
    // GET of the claim (Prepare), the pod's network-status patch, the claim's status, an
    // AddedInterface Event per interface.
    let ours = format!(" in {}", ns.name);
    let sent = || {
        let mut v: Vec<String> = c.requests_of("node2", mark).into_iter().filter(|r| r.ends_with(&ours)).collect();
        v.sort();
        v
    };
    // The Events come after the claim's status (the agent announces once both are written).
    c.wait(
        "node2's agent's AddedInterface Events",
        || sent().iter().filter(|r| r.starts_with("create events")).count() >= 2,
        || format!("{:?}", sent()),
    );
    let sent = sent();
    eprintln!("REPORT requests of node2's agent for a pod with one claim: {sent:?}");
    assert_eq!(
        sent,
        [
            format!("create events{ours}"),
            format!("create events{ours}"),
            format!("get resourceclaims{ours}"),
            format!("patch pods{ours}"),
            format!("patch resourceclaims/status{ours}"),
        ],
        "node2's agent"
    );
    assert!(c.requests_of("node1", mark).iter().all(|r| !r.ends_with(&ours)), "node1's agent sent none");

    // network-status lists it like an annotation-selected network.
    let st = c
        .network_status(&ns.name, "web")
        .unwrap_or_else(|| panic!("no network-status: {}", c.describe(&ns.name, "web")));
    let entries: Vec<&Value> = st.as_array().unwrap().iter().filter(|e| e["name"] == side).collect();
    assert_eq!(entries.len(), 1, "{st}");
    assert_eq!(entries[0]["interface"], "side0", "{st}");
    assert_eq!(entries[0]["ips"], json!([ip.split('/').next().unwrap()]), "{st}");

    // The node-local record the ADD read, for this pod; gone with the pod, as its attachment.
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let claim_uid = claim["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(c.files_on("node2", CLAIMS), [format!("{uid}/{claim_uid}.json")]);
    c.ok(&["delete", "pod", "web", "-n", &ns.name, "--wait=true"]);
    c.wait(
        "the claim's record removed (NodeUnprepareResources)",
        || c.files_on("node2", CLAIMS).is_empty(),
        || c.agent_log("node2"),
    );
    // braid's state of the sandbox (named by its container ID) is gone: the state directory
    // holds what it held before the pod.
    c.wait(
        "braid's state of the pod's sandbox gone",
        || state(&c) == state_before,
        || format!("{:?} vs {state_before:?}", state(&c)),
    );
    let held: Vec<String> = c
        .files_on("node2", "/var/lib/cni/networks/braid-dra1-side")
        .into_iter()
        .filter(|f| f.starts_with("198."))
        .collect();
    assert!(held.is_empty(), "host-local still holds {held:?}");
}

#[test]
fn a_claim_for_a_network_no_node_has_leaves_the_pod_pending_with_the_schedulers_reason() {
    let Some(c) = Cluster::lock("a_claim_for_a_network_no_node_has_leaves_the_pod_pending_with_the_schedulers_reason")
    else {
        return;
    };
    let _dra = c.dra_layout();
    let ns = c.namespace("braid-dra2");
    // A network whose plugin no node has: on no slice.
    nad(&c, &ns.name, "nowhere", "braid-dra-nowhere", 132);
    c.wait(
        "the mirror of braid-dra2/nowhere on node1",
        || c.files_on("node1", "/etc/cni/braid.d").contains(&"braid-dra2/nowhere.conflist".to_string()),
        || c.agent_log("node1"),
    );
    c.apply(&template(&ns.name, "nowhere", "braid-dra2/nowhere", json!({})));
    c.apply(&claim_pod(&ns.name, "lost", "nowhere"));
    let said = c.wait_pod_events(&ns.name, "lost", "FailedScheduling", 1).join(
        "
",
    );
    assert!(said.contains("cannot allocate all claims"), "{said}");
    let pod = c.get(&["pod", "lost", "-n", &ns.name]);
    assert_eq!(pod["status"]["phase"], "Pending", "{pod}");
    assert!(pod["spec"]["nodeName"].is_null(), "no node: {pod}");
    // No sandbox was ever tried: no kubelet refused one.
    assert_eq!(c.pod_events(&ns.name, "lost", "FailedCreatePodSandBox"), Vec::<String>::new());
}

#[test]
fn an_agent_may_write_only_its_own_nodes_slices_and_claims() {
    let Some(c) = Cluster::lock("an_agent_may_write_only_its_own_nodes_slices_and_claims") else {
        return;
    };
    assert!(c.nodes() >= 2, "this test needs two nodes (scripts/node.sh up 2)");
    let _only = plugin_only_on_node2(&c);
    let _dra = c.dra_layout();
    let ns = c.namespace("braid-dra3");
    nad(&c, &ns.name, "side", ONLY, 133);
    c.wait(
        "node2's slice offering braid-dra3/side",
        || offers(&c, "node2", "braid-dra3/side"),
        || c.agent_log("node2"),
    );
    c.apply(&template(&ns.name, "side", "braid-dra3/side", json!({})));
    c.apply(&claim_pod(&ns.name, "web", "side"));
    c.wait_running(&ns.name, "web");
    let claim = claim_of(&c, &ns.name, "web").unwrap();
    let name = claim["metadata"]["name"].as_str().unwrap().to_string();
    let allocated = claim["status"]["allocation"]["devices"]["results"][0].clone();
    let device_status = |message: &str| {
        let mut d = json!({"driver": DRIVER, "pool": allocated["pool"], "device": allocated["device"],
                           "conditions": [{"type": "Ready", "status": "False", "reason": "Forged", "message": message,
                                           "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        if !allocated["shareID"].is_null() {
            d["shareID"] = allocated["shareID"].clone();
        }
        json!({"status": {"devices": [d]}}).to_string()
    };
    // A merge patch of the claim's status subresource, as the token's holder sends it (curl:
    // kubectl patch first GETs the subresource, which the agent is not granted).
    let patch = |token: &str, body: String| -> (u16, String) {
        let url = format!(
            "https://198.18.0.1:6443/apis/resource.k8s.io/v1/namespaces/{}/resourceclaims/{name}/status",
            ns.name
        );
        let ca = format!("{}/pki/ca.crt", c.dir().display());
        let auth = format!("Authorization: Bearer {token}");
        let out = c.on_node(
            "node1",
            "curl",
            &[
                "-sS",
                "--cacert",
                &ca,
                "-H",
                &auth,
                "-H",
                "Content-Type: application/merge-patch+json",
                "-X",
                "PATCH",
                "--data-binary",
                &body,
                "-w",
                "\n%{http_code}",
                &url,
            ],
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let code = text.lines().last().and_then(|l| l.trim().parse().ok()).unwrap_or(0);
        (code, text)
    };
    // node1's agent: the claim is allocated on node2 — refused.
    let (code, said) = patch(&c.agent_token("node1"), device_status("from node1"));
    assert!(code >= 400, "node1's agent wrote a claim of node2: {said}");
    assert!(
        said.contains("ValidatingAdmissionPolicy 'braid-node-agent-resourceclaims'")
            || said.contains("resourceclaims/driver"),
        "{said}"
    );
    // node2's agent may set braid's device status, but not the allocation or reservations.
    let token2 = c.agent_token("node2");
    let (code, said) = patch(&token2, device_status("from node2"));
    assert_eq!(code, 200, "node2's agent may write its claim's device status: {said}");
    let (code, said) = patch(&token2, json!({"status": {"reservedFor": null}}).to_string());
    assert!(code >= 400, "node2's agent changed the claim's reservedFor: {said}");
    // The 1.36 API server refuses it itself (granular status authorization: the binding
    // subresource, which braid is not granted), before braid's policy would (its guard where the
    // server does not check, 1.34 and 1.35).
    assert!(said.contains("resourceclaims/binding") || said.contains("braid-node-agent-resourceclaims"), "{said}");
    let stored = claim_of(&c, &ns.name, "web").unwrap();
    assert!(!stored["status"]["reservedFor"].is_null(), "{stored}");
    // Slices: node1's agent may not write one for node2.
    let forged = json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "forged-node2"},
        "spec": {"driver": DRIVER, "nodeName": "node2", "pool": {"name": "node2", "generation": 1, "resourceSliceCount": 1},
                 "devices": []}
    });
    let file = c.dir().join("forged-slice.json");
    std::fs::write(&file, forged.to_string()).unwrap();
    let _rm = Defer(|| {
        let _ = std::fs::remove_file(c.dir().join("forged-slice.json"));
        let _ = c.kubectl(&["delete", "resourceslice", "forged-node2", "--ignore-not-found"]);
    });
    let (ok, said) = c.as_token(&c.agent_token("node1"), &["create", "-f", file.to_str().unwrap()]);
    assert!(!ok, "node1's agent created a slice of node2: {said}");
}

/// The devices of `node`'s ResourceSlices of braid's driver, by their `network` attribute, and
/// the pool's generations (one per slice).
fn dra_devices(c: &Cluster, node: &str) -> (BTreeMap<String, Value>, Vec<i64>) {
    let slices =
        c.get(&["resourceslices", "--field-selector", &format!("spec.nodeName={node},spec.driver=net.braid-cni.io")]);
    let mut devices = BTreeMap::new();
    let mut generations = Vec::new();
    for s in slices["items"].as_array().unwrap() {
        generations.push(s["spec"]["pool"]["generation"].as_i64().unwrap());
        for d in s["spec"]["devices"].as_array().into_iter().flatten() {
            devices.insert(d["attributes"]["network"]["string"].as_str().unwrap().to_string(), d.clone());
        }
    }
    (devices, generations)
}

/// `deploy/kubernetes-dra` on the real API server (v1.36, consumable capacity on): each node's
/// agent publishes its ResourceSlice with the networks it can attach — a network whose plugin
/// only node1 has is on node1's slice only, and comes and goes with the plugin; a NAD added or
/// deleted changes both slices; the admission policies type-check, and node1's agent token may
/// write node1's slices of braid's driver only.
#[test]
fn dra_slices_follow_the_networks_and_only_the_nodes_agent_writes_its_slice() {
    let Some(c) = Cluster::lock("dra_slices_follow_the_networks_and_only_the_nodes_agent_writes_its_slice") else {
        return;
    };
    assert!(c.nodes() >= 2, "this test needs two nodes (scripts/node.sh up 2)");
    let only1 = "/opt/cni/bin/braid-dra-test-node1-only";
    let _plugin = Defer(|| {
        let _ = c.on_node("node1", "rm", &["-f", only1]);
    });
    let _layout = c.dra_layout();
    for policy in ["braid-node-agent-resourceslices", "braid-node-agent-resourceclaims"] {
        let get = || c.get(&["validatingadmissionpolicy", policy]);
        c.wait(
            &format!("{policy}'s type check"),
            || {
                let p = get();
                p["status"]["observedGeneration"] == p["metadata"]["generation"]
            },
            || get().to_string(),
        );
        assert_eq!(get()["status"]["typeChecking"], json!({}), "{policy}: type-checking warnings");
    }
    let ns = c.namespace("braid-dra");
    let n = ns.name.as_str();
    // Created first: a network whose plugin no node has, then one only node1 has, then one of
    // the reference plugins every node has.
    let missing = json!({"cniVersion": "1.0.0", "name": "missing", "plugins": [{"type": "braid-no-such-plugin"}]});
    c.apply(&nad_of(n, "missing", &missing));
    let only = json!({"cniVersion": "1.0.0", "name": "only1", "plugins": [{"type": "braid-dra-test-node1-only"}]});
    c.apply(&nad_of(n, "only1", &only));
    nad(&c, n, "side", "bridge", 40);
    let has = |node: &str, net: &str| dra_devices(&c, node).0.contains_key(&format!("{n}/{net}"));
    for node in ["node1", "node2"] {
        c.wait(&format!("{n}/side on {node}'s slice"), || has(node, "side"), || c.agent_log(node));
    }
    let (devices, generations) = dra_devices(&c, "node1");
    let side = &devices[&format!("{n}/side")];
    assert_eq!(side["allowMultipleAllocations"], true, "consumable capacity kept: {side}");
    assert_eq!(
        side["capacity"],
        json!({"attachments": {"value": "1024", "requestPolicy": {"default": "1", "validValues": ["1"]}}}),
        "{side}"
    );
    assert_eq!(side["attributes"]["type"], json!({"string": "bridge"}));
    assert_eq!(side["attributes"]["namespace"], json!({"string": n}));
    assert!(!has("node1", "missing") && !has("node2", "missing"), "a network without its plugin is offered");
    assert!(!has("node1", "only1"), "node1 offers only1 before its plugin is there");
    let slice = c.get(&["resourceslice", "node1-net.braid-cni.io"]);
    assert_eq!(slice["spec"]["pool"]["name"], "node1");
    assert_eq!(slice["spec"]["pool"]["resourceSliceCount"], 1);
    let node_uid = c.get(&["node", "node1"])["metadata"]["uid"].clone();
    assert_eq!(slice["metadata"]["ownerReferences"][0]["uid"], node_uid, "owned by the Node");
    assert!(!c.agent_log("node1").contains("WARNING: DRA"), "{}", c.agent_log("node1"));

    // The plugin installed on node1 alone: only1 joins node1's slice, never node2's.
    let out = c.on_node("node1", "cp", &["/opt/cni/bin/bridge", only1]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    c.wait("only1 on node1's slice once its plugin is installed", || has("node1", "only1"), || c.agent_log("node1"));
    assert!(dra_devices(&c, "node1").1[0] > generations[0], "the pool's generation bumped");
    assert!(!has("node2", "only1"), "node2 has no such plugin");
    // And leaves it with the plugin.
    let _ = c.on_node("node1", "rm", &["-f", only1]);
    c.wait("only1 off node1's slice once its plugin is gone", || !has("node1", "only1"), || c.agent_log("node1"));

    // node1's agent token: its own node's slices of braid's driver, nothing else.
    let token = c.agent_token("node1");
    let stray = |name: &str, node: &str, driver: &str| {
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 0, "resourceSliceCount": 1}}
        })
        .to_string()
    };
    let create = |body: String| {
        let dir = std::env::temp_dir().join(format!("braid-dra-slice-{}.json", std::process::id()));
        std::fs::write(&dir, body).unwrap();
        let r = c.as_token(&token, &["create", "-f", &dir.display().to_string()]);
        let _ = std::fs::remove_file(&dir);
        r
    };
    for (what, name, node, driver, words) in [
        (
            "another node's slice",
            "braid-test-node2",
            "node2",
            "net.braid-cni.io",
            "may write only ResourceSlices whose spec.nodeName",
        ),
        ("another driver's slice", "braid-test-other", "node1", "other.example.com", "is another driver's"),
    ] {
        let (ok, said) = create(stray(name, node, driver));
        assert!(!ok, "{what} was admitted: {said}");
        assert!(said.contains("braid-node-agent-resourceslices") && said.contains(words), "{what}: {said}");
    }
    let patch = |name: &str| {
        c.as_token(
            &token,
            &["patch", "resourceslice", name, "--type=merge", "-p", r#"{"metadata":{"labels":{"braid.io/test":"x"}}}"#],
        )
    };
    let (ok, said) = patch("node2-net.braid-cni.io");
    assert!(
        !ok && said.contains("braid-node-agent-resourceslices"),
        "node2's slice patched with node1's token: {said}"
    );
    let (ok, said) = c.as_token(&token, &["delete", "resourceslice", "node2-net.braid-cni.io"]);
    assert!(
        !ok && said.contains("braid-node-agent-resourceslices"),
        "node2's slice deleted with node1's token: {said}"
    );
    assert!(c.kubectl(&["get", "resourceslice", "node2-net.braid-cni.io"]).status.success());
    // Its own node's: created and deleted (what the agent itself does).
    let (ok, said) = create(stray("node1-braid-test", "node1", "net.braid-cni.io"));
    assert!(ok, "node1's token may create node1's slice of braid's driver: {said}");
    let (ok, said) = c.as_token(&token, &["delete", "resourceslice", "node1-braid-test"]);
    assert!(ok, "node1's token may delete node1's slice: {said}");
    // A NAD deleted: off both slices.
    c.ok(&["delete", "net-attach-def", "side", "-n", n]);
    for node in ["node1", "node2"] {
        c.wait(&format!("{n}/side off {node}'s slice"), || !has(node, "side"), || c.agent_log(node));
    }
    // The braid-networks ConfigMap's networks stay on it.
    assert!(dra_devices(&c, "node2").0.keys().all(|k| !k.starts_with(&format!("{n}/"))));
}

/// The kubelet deletes every ResourceSlice of its node when it starts: node2's kubelet
/// restarted, its agent registers the driver again (the kubelet finds the socket) and writes
/// its slice again, and a pod whose claim only node2 can serve runs there.
#[test]
fn a_restarted_kubelet_gets_the_driver_registered_and_its_slice_back() {
    let Some(c) = Cluster::lock("a_restarted_kubelet_gets_the_driver_registered_and_its_slice_back") else {
        return;
    };
    assert!(c.nodes() >= 2, "this test needs two nodes (scripts/node.sh up 2)");
    let _only = plugin_only_on_node2(&c);
    let _dra = c.dra_layout();
    let ns = c.namespace("braid-dra4");
    nad(&c, &ns.name, "side", ONLY, 134);
    let side = "braid-dra4/side";
    c.wait("node2's slice offering braid-dra4/side", || offers(&c, "node2", side), || c.agent_log("node2"));
    let uid_of = || {
        c.get(&["resourceslices", "--field-selector", &format!("spec.nodeName=node2,spec.driver={DRIVER}")])["items"][0]
            ["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let before = uid_of();
    c.node_sh(&["restart", "kubelet-node2"]);
    // Written again: another object (the kubelet deleted the first), with the network.
    c.wait(
        "node2's slice written again",
        || {
            let now = uid_of();
            !now.is_empty() && now != before && offers(&c, "node2", side)
        },
        || format!("{:?}\n{}\n{}", offered(&c, "node2"), c.agent_log("node2"), c.log("kubelet-node2")),
    );
    c.apply(&template(&ns.name, "side", side, json!({"interface": "side0"})));
    c.apply(&claim_pod(&ns.name, "web", "side"));
    c.wait_running(&ns.name, "web");
    assert_eq!(c.get(&["pod", "web", "-n", &ns.name])["spec"]["nodeName"], "node2");
    c.ok(&["exec", "-n", &ns.name, "web", "--", "ip", "link", "show", "side0"]);
}

/// A claim prepared whose sandbox never runs: the pod's annotation also selects a network that
/// does not exist, so every ADD is refused (code 7) after the kubelet prepared the claim. The
/// claim's network is never left attached by a refused ADD, and deleting the pod unprepares the
/// claim: its record goes, nothing of braid's is left on the node.
#[test]
fn a_claim_whose_sandbox_never_runs_leaves_nothing_once_its_pod_is_deleted() {
    let Some(c) = Cluster::lock("a_claim_whose_sandbox_never_runs_leaves_nothing_once_its_pod_is_deleted") else {
        return;
    };
    assert!(c.nodes() >= 2, "this test needs two nodes (scripts/node.sh up 2)");
    let _only = plugin_only_on_node2(&c);
    let _dra = c.dra_layout();
    let ns = c.namespace("braid-dra5");
    nad(&c, &ns.name, "side", ONLY, 135);
    let side = "braid-dra5/side";
    c.wait("node2's slice offering braid-dra5/side", || offers(&c, "node2", side), || c.agent_log("node2"));
    c.apply(&template(&ns.name, "side", side, json!({})));
    let state_before = state(&c);
    let mut p: Value = serde_json::from_str(&claim_pod(&ns.name, "never", "side")).unwrap();
    p["metadata"]["annotations"] = json!({"k8s.v1.cni.cncf.io/networks": "no-such-network"});
    c.apply(&p.to_string());
    let said = c.wait_pod_events(&ns.name, "never", "FailedCreatePodSandBox", 1).join(
        "
",
    );
    assert!(said.contains("no-such-network"), "{said}");
    let uid = c.get(&["pod", "never", "-n", &ns.name])["metadata"]["uid"].as_str().unwrap().to_string();
    // Prepared: the record is there, though no sandbox ever ran.
    let records = c.files_on("node2", CLAIMS);
    assert!(records.len() == 1 && records[0].starts_with(&format!("{uid}/")), "{records:?}");
    c.ok(&["delete", "pod", "never", "-n", &ns.name, "--wait=true"]);
    c.wait("the claim unprepared", || c.files_on("node2", CLAIMS).is_empty(), || c.agent_log("node2"));
    let held: Vec<String> = c
        .files_on("node2", "/var/lib/cni/networks/braid-dra5-side")
        .into_iter()
        .filter(|f| f.starts_with("198."))
        .collect();
    assert!(held.is_empty(), "host-local still holds {held:?}");
    assert_eq!(state(&c), state_before, "braid's state on node2");
}

/// braid's agent on node2 frozen (SIGSTOP: its sockets are there, nothing answers) until the
/// guard drops (SIGCONT). Only the agent of this cluster's node2: the `braid-install` process in
/// the network namespace of node2's kubelet (whose PID the cluster recorded).
fn freeze_agent_on_node2(c: &Cluster) -> Defer<impl FnMut() + '_> {
    let kubelet = std::fs::read_to_string(c.dir().join("pids/kubelet-node2")).unwrap().trim().to_string();
    let signal = move |sig: &str| {
        c.on_node("node2", "pkill", &[sig, "-x", "braid-install", "--ns", &kubelet, "--nslist", "net"])
    };
    let out = signal("-STOP");
    assert!(out.status.success(), "no braid-install process on node2: {out:?}");
    Defer(move || {
        signal("-CONT");
    })
}

/// The agent not answering when the kubelet prepares a claim (node2's agent frozen with
/// SIGSTOP: its sockets are there, nothing answers): the kubelet's Prepare fails
/// (`FailedPrepareDynamicResources` on the pod), no sandbox is started, and once the agent
/// answers again the kubelet's retry prepares the claim and the pod runs with its network.
#[test]
fn an_agent_that_does_not_answer_prepare_holds_the_pod_until_it_does() {
    let Some(c) = Cluster::lock("an_agent_that_does_not_answer_prepare_holds_the_pod_until_it_does") else {
        return;
    };
    assert!(c.nodes() >= 2, "this test needs two nodes (scripts/node.sh up 2)");
    let _only = plugin_only_on_node2(&c);
    let _dra = c.dra_layout();
    let ns = c.namespace("braid-dra6");
    nad(&c, &ns.name, "side", ONLY, 136);
    let side = "braid-dra6/side";
    c.wait("node2's slice offering braid-dra6/side", || offers(&c, "node2", side), || c.agent_log("node2"));
    c.apply(&template(&ns.name, "side", side, json!({"interface": "side0"})));
    let mut frozen = Some(freeze_agent_on_node2(&c));
    c.apply(&claim_pod(&ns.name, "web", "side"));
    let said = c.wait_pod_events(&ns.name, "web", "FailedPrepareDynamicResources", 1).join(
        "
",
    );
    assert!(said.contains("NodePrepareResources"), "{said}");
    assert_ne!(c.get(&["pod", "web", "-n", &ns.name])["status"]["phase"], "Running");
    drop(frozen.take());
    c.wait_running(&ns.name, "web");
    assert_eq!(c.get(&["pod", "web", "-n", &ns.name])["spec"]["nodeName"], "node2");
    c.ok(&["exec", "-n", &ns.name, "web", "--", "ip", "link", "show", "side0"]);
}

/// The pod's claim `net` once the scheduler has allocated it (its `status.allocation`).
fn allocated_claim(c: &Cluster, ns: &str, pod: &str) -> Value {
    let mut claim = Value::Null;
    c.wait(
        &format!("{ns}/{pod}'s claim allocated"),
        || {
            claim = claim_of(c, ns, pod).unwrap_or_default();
            !claim["status"]["allocation"].is_null()
        },
        || format!("{:?}\n{}", claim_of(c, ns, pod), c.describe(ns, pod)),
    );
    claim
}

/// Waits for a `FailedPrepareDynamicResources` event of the pod saying `words` (the kubelet's
/// first try may have ended at its own timeout while the agent was frozen: another message);
/// that message.
fn wait_prepare_refused(c: &Cluster, ns: &str, pod: &str, words: &str) -> String {
    let saying = || c.pod_events(ns, pod, "FailedPrepareDynamicResources").into_iter().find(|m| m.contains(words));
    c.wait(
        &format!("a FailedPrepareDynamicResources event of {ns}/{pod} saying {words:?}"),
        || saying().is_some(),
        || format!("{}\n{}", c.describe(ns, pod), c.agent_log("node2")),
    );
    saying().unwrap()
}

/// The addresses host-local holds on node2 in `network`'s directory.
fn held_on_node2(c: &Cluster, network: &str) -> Vec<String> {
    c.files_on("node2", &format!("/var/lib/cni/networks/{network}"))
        .into_iter()
        .filter(|f| f.starts_with("198."))
        .collect()
}

/// The whole log of braid's agent on node2 (its pod of this test's layout), its lines that
/// name `words`.
fn agent_lines(c: &Cluster, words: &str) -> Vec<String> {
    let (pod, _) = c.agent_pod("node2");
    let out = c.kubectl(&["logs", "-n", "kube-system", &pod]);
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains(words)).map(str::to_string).collect()
}

/// The position of the first of `lines` that contains `words`.
fn line_of(lines: &[String], words: &str) -> Option<usize> {
    lines.iter().position(|l| l.contains(words))
}

/// A claim for a network that left the node: the scheduler allocates the pod's claim node2's
/// device while node2's slice offers it, then — node2's agent frozen, so that the kubelet's
/// Prepare waits in its socket — the network's plugin is removed from node2's bin dir, then the
/// agent answers. It refuses the Prepare naming the network, the node and why (the kubelet puts
/// it on the pod as `FailedPrepareDynamicResources`), records nothing, and no sandbox is tried.
/// The plugin back, the kubelet's retry (its pod worker retries a failed sync with backoff,
/// `pkg/kubelet/kubelet.go` backOffPeriod) prepares the claim and the pod runs with its
/// interface.
#[test]
fn a_claim_whose_network_left_the_node_before_prepare_holds_the_pod_until_the_network_is_back() {
    let Some(c) =
        Cluster::lock("a_claim_whose_network_left_the_node_before_prepare_holds_the_pod_until_the_network_is_back")
    else {
        return;
    };
    assert!(c.nodes() >= 2, "this test needs two nodes (scripts/node.sh up 2)");
    let _only = plugin_only_on_node2(&c);
    let _dra = c.dra_layout();
    let ns = c.namespace("braid-dra7");
    nad(&c, &ns.name, "side", ONLY, 137);
    let side = "braid-dra7/side";
    c.wait("node2's slice offering braid-dra7/side", || offers(&c, "node2", side), || c.agent_log("node2"));
    c.apply(&template(&ns.name, "side", side, json!({"interface": "side0"})));
    let state_before = state(&c);
    let mut frozen = Some(freeze_agent_on_node2(&c));
    c.apply(&claim_pod(&ns.name, "web", "side"));
    // 1. Allocated while the network is on node2's slice.
    let claim = allocated_claim(&c, &ns.name, "web");
    let result = &claim["status"]["allocation"]["devices"]["results"][0];
    let device = result["device"].as_str().unwrap().to_string();
    assert_eq!(result["pool"], "node2", "{claim}");
    assert!(offered(&c, "node2").contains(&(device.clone(), side.to_string())), "{:?}", offered(&c, "node2"));
    // 2. The network leaves node2 (its plugin removed), 3. then the agent answers.
    let out = c.on_node("node2", "rm", &[&format!("/opt/cni/bin/{ONLY}")]);
    assert!(out.status.success(), "{out:?}");
    drop(frozen.take());
    let said = wait_prepare_refused(&c, &ns.name, "web", "is not attachable on node node2");
    eprintln!("REPORT the kubelet's event: {said}");
    let claim_name = claim["metadata"]["name"].as_str().unwrap();
    assert!(
        said.contains(&format!(
            "claim {}/{claim_name}, request net: network {side} (device {device}) is not attachable on node node2 any more: its plugin \"{ONLY}\" is not an executable in",
            ns.name
        )) && said.contains("nothing was prepared, the kubelet retries"),
        "{said}"
    );
    // Nothing recorded, no sandbox tried, the pod not running.
    assert_eq!(c.files_on("node2", CLAIMS), Vec::<String>::new(), "a claim record of a refused Prepare");
    assert_eq!(state(&c), state_before, "braid's state on node2");
    assert_eq!(c.pod_events(&ns.name, "web", "FailedCreatePodSandBox"), Vec::<String>::new());
    assert_eq!(c.get(&["pod", "web", "-n", &ns.name])["status"]["phase"], "Pending");
    c.wait("the network off node2's slice", || !offers(&c, "node2", side), || c.agent_log("node2"));

    // The plugin back: on the slice again, and the kubelet's retry prepares the claim.
    let out = c.on_node("node2", "cp", &["/opt/cni/bin/bridge", &format!("/opt/cni/bin/{ONLY}")]);
    assert!(out.status.success(), "{out:?}");
    c.wait_running(&ns.name, "web");
    c.ok(&["exec", "-n", &ns.name, "web", "--", "ip", "link", "show", "side0"]);
    let uid = c.get(&["pod", "web", "-n", &ns.name])["metadata"]["uid"].as_str().unwrap().to_string();
    let claim_uid = claim["metadata"]["uid"].as_str().unwrap();
    assert_eq!(c.files_on("node2", CLAIMS), [format!("{uid}/{claim_uid}.json")]);
    // Same claim, same allocation: refused first, prepared after (the agent's own order).
    let lines = agent_lines(&c, &format!("{}/{claim_name}", ns.name));
    let refused = line_of(&lines, "is not attachable");
    let prepared = line_of(&lines, "prepared for pod");
    assert!(refused.is_some() && prepared.is_some() && refused < prepared, "{lines:#?}");
}

/// A claim for a network whose definition left the node (its NAD deleted and its mirrored file
/// gone, while node2's agent was frozen between the allocation and the kubelet's Prepare): the
/// agent names the network it offered and says its definition is gone; the pod deleted, nothing
/// is left — no claim record, no state, no address, the claim itself deleted with its pod.
#[test]
fn a_claim_whose_network_definition_left_the_node_leaves_nothing_once_its_pod_is_deleted() {
    let Some(c) =
        Cluster::lock("a_claim_whose_network_definition_left_the_node_leaves_nothing_once_its_pod_is_deleted")
    else {
        return;
    };
    assert!(c.nodes() >= 2, "this test needs two nodes (scripts/node.sh up 2)");
    let _only = plugin_only_on_node2(&c);
    let _dra = c.dra_layout();
    let ns = c.namespace("braid-dra8");
    nad(&c, &ns.name, "side", ONLY, 138);
    let side = "braid-dra8/side";
    c.wait("node2's slice offering braid-dra8/side", || offers(&c, "node2", side), || c.agent_log("node2"));
    c.apply(&template(&ns.name, "side", side, json!({})));
    let state_before = state(&c);
    let mut frozen = Some(freeze_agent_on_node2(&c));
    c.apply(&claim_pod(&ns.name, "web", "side"));
    let claim = allocated_claim(&c, &ns.name, "web");
    let device = claim["status"]["allocation"]["devices"]["results"][0]["device"].as_str().unwrap().to_string();
    // The NAD deleted, and its mirror on node2 with it (the frozen agent's mirror cannot).
    c.ok(&["delete", "net-attach-def", "side", "-n", &ns.name]);
    let out = c.on_node("node2", "rm", &["/etc/cni/braid.d/braid-dra8/side.conflist"]);
    assert!(out.status.success(), "{out:?}");
    drop(frozen.take());
    let said = wait_prepare_refused(&c, &ns.name, "web", "is not attachable on node node2");
    eprintln!("REPORT the kubelet's event: {said}");
    assert!(
        said.contains(&format!(
            "network {side} (device {device}) is not attachable on node node2 any more: its definition is gone from"
        )),
        "{said}"
    );
    assert_eq!(c.files_on("node2", CLAIMS), Vec::<String>::new(), "a claim record of a refused Prepare");
    assert_eq!(c.get(&["pod", "web", "-n", &ns.name])["status"]["phase"], "Pending");

    // The pod deleted: its claim goes with it (the resourceclaim controller), nothing of
    // braid's is left on node2.
    let claim_name = claim["metadata"]["name"].as_str().unwrap();
    c.ok(&["delete", "pod", "web", "-n", &ns.name, "--wait=true"]);
    c.wait(
        "the pod's claim deleted",
        || !c.kubectl(&["get", "resourceclaim", claim_name, "-n", &ns.name]).status.success(),
        || c.ok(&["get", "resourceclaim", claim_name, "-n", &ns.name, "-o", "yaml"]),
    );
    assert_eq!(c.files_on("node2", CLAIMS), Vec::<String>::new());
    assert_eq!(state(&c), state_before, "braid's state on node2");
    assert_eq!(held_on_node2(&c, "braid-dra8-side"), Vec::<String>::new(), "host-local addresses");
    eprintln!("REPORT node2's agent on the claim: {:#?}", agent_lines(&c, &format!("{}/{claim_name}", ns.name)));
}

/// braid-fault (integration/src/bin) in node2's CNI bin dir, removed again when the guard drops.
fn fault_plugin_on_node2(c: &Cluster) -> Defer<impl FnMut() + '_> {
    let fault = braid_integration::build_dir().join("braid-fault");
    let out = c.on_node("node2", "cp", &[fault.to_str().unwrap(), "/opt/cni/bin/braid-fault"]);
    assert!(out.status.success(), "installing braid-fault on node2: {out:?}");
    Defer(move || {
        let _ = c.on_node("node2", "rm", &["-f", "/opt/cni/bin/braid-fault"]);
    })
}

/// The CNI commands braid-fault logged in `log` on node2, in their order.
fn commands_logged(c: &Cluster, log: &str) -> Vec<String> {
    c.read_on("node2", log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["command"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A pod deleted mid-ADD: its claim's network is braid-fault (held while a gate file exists on
/// node2, logging its calls) chained before the bridge; the kubelet prepared the claim, the
/// sandbox's ADD reached the gate, the pod was deleted (the kubelet saw it), then the gate
/// opened. The kubelet does not cancel a sandbox being made: the ADD completes, then the kubelet
/// stops the sandbox (its DEL) and unprepares the claim. Then nothing is left on node2: no port
/// on the network's bridge, no address, no braid state or status file of the sandbox, no claim
/// record; the claim is deleted; braid's agent logged nothing alarming about it (the pod's
/// network-status is not published: the pod is gone).
#[test]
fn a_pod_deleted_mid_add_leaves_no_interface_state_record_or_claim() {
    let Some(c) = Cluster::lock("a_pod_deleted_mid_add_leaves_no_interface_state_record_or_claim") else {
        return;
    };
    assert!(c.nodes() >= 2, "this test needs two nodes (scripts/node.sh up 2)");
    let _only = plugin_only_on_node2(&c);
    let _fault = fault_plugin_on_node2(&c);
    let (gate, calls) = ("/run/braid-dra9.gate", "/run/braid-dra9.calls");
    c.write_on("node2", gate, "");
    let _gate = Defer(|| {
        let _ = c.on_node("node2", "rm", &["-f", gate, calls]);
    });
    let _dra = c.dra_layout();
    let ns = c.namespace("braid-dra9");
    let config = json!({
        "cniVersion": "1.0.0", "name": "braid-dra9-gated",
        "plugins": [
            {"type": "braid-fault", "sleepOn": "ADD", "hangWhile": gate, "log": calls},
            {"type": ONLY, "bridge": "br-dra139", "isGateway": false, "ipMasq": false,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": "198.18.139.0/24"}]]}}]
    });
    c.apply(&nad_of(&ns.name, "gated", &config));
    let gated = "braid-dra9/gated";
    c.wait("node2's slice offering braid-dra9/gated", || offers(&c, "node2", gated), || c.agent_log("node2"));
    c.apply(&template(&ns.name, "gated", gated, json!({"interface": "side0"})));
    let state_before = state(&c);
    let status_of_pod = || {
        c.files_on("node2", "/run/braid/network-status")
            .into_iter()
            .filter(|f| f.starts_with("braid-dra9_web_"))
            .collect::<Vec<_>>()
    };
    c.apply(&claim_pod(&ns.name, "web", "gated"));
    // 1. Prepared, and the sandbox's ADD held at the gate.
    c.wait(
        "the sandbox's ADD at the gate",
        || commands_logged(&c, calls).contains(&"ADD".to_string()),
        || format!("{}\n{}", c.describe(&ns.name, "web"), c.log("containerd-node2")),
    );
    let pod = c.get(&["pod", "web", "-n", &ns.name]);
    assert_eq!(pod["spec"]["nodeName"], "node2");
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let claim = claim_of(&c, &ns.name, "web").unwrap();
    let (claim_name, claim_uid) =
        (claim["metadata"]["name"].as_str().unwrap().to_string(), claim["metadata"]["uid"].as_str().unwrap());
    assert_eq!(c.files_on("node2", CLAIMS), [format!("{uid}/{claim_uid}.json")], "prepared before the ADD");
    // 2. The pod deleted while the ADD is held, and the kubelet has seen it.
    let kubelet_mark = c.log_all("kubelet-node2").len();
    c.ok(&["delete", "pod", "web", "-n", &ns.name, "--wait=false"]);
    // Its `SyncLoop DELETE` (the deletion's timestamp: graceful) or `REMOVE` (the object gone:
    // a grace period of 0 deletes it at once), `pkg/kubelet/kubelet.go` syncLoopIteration.
    let seen = |what: &str| format!("\"SyncLoop {what}\" source=\"api\" pods=[\"{}/web\"]", ns.name);
    c.wait(
        "node2's kubelet seeing the pod's deletion",
        || {
            c.log_all("kubelet-node2")
                .get(kubelet_mark..)
                .is_some_and(|l| l.contains(&seen("DELETE")) || l.contains(&seen("REMOVE")))
        },
        || c.log("kubelet-node2"),
    );
    assert_eq!(commands_logged(&c, calls).first().map(String::as_str), Some("ADD"));
    // 3. The ADD released.
    let _ = c.on_node("node2", "rm", &["-f", gate]);
    // The pod object may be gone at once (a grace period of 0); the kubelet's work is done
    // when it has unprepared the claim, which it does only once the pod is terminated
    // (`SyncTerminatedPod`), after its sandbox's DEL.
    c.wait(
        "the claim unprepared (its record removed)",
        || c.files_on("node2", CLAIMS).is_empty(),
        || format!("{}\n{}", c.log("kubelet-node2"), c.agent_log("node2")),
    );
    assert!(!c.kubectl(&["get", "pod", "web", "-n", &ns.name]).status.success(), "the pod is still there");
    c.wait(
        "the pod's claim deleted",
        || !c.kubectl(&["get", "resourceclaim", &claim_name, "-n", &ns.name]).status.success(),
        || c.ok(&["get", "resourceclaim", &claim_name, "-n", &ns.name, "-o", "yaml"]),
    );
    let logged = commands_logged(&c, calls);
    eprintln!("REPORT braid-fault's calls on the held sandbox: {logged:?}");
    // Released before the delegator's own deadline (the usual case) the ADD completed and the
    // kubelet stopped the sandbox; past it (a very slow node) the delegator rolled it back:
    // either way nothing may be left.
    let deadline = c.log_all("kubelet-node2")[kubelet_mark..].contains("killed at the command's deadline");
    eprintln!(
        "REPORT the held ADD {}",
        if deadline { "ended at the delegator's deadline" } else { "completed once released" }
    );
    assert_eq!(logged.first().map(String::as_str), Some("ADD"), "{logged:?}");
    assert!(logged.iter().any(|l| l == "DEL"), "unprepared before the sandbox's DEL: {logged:?}");
    assert_eq!(logged.iter().filter(|l| *l == "ADD").count(), 1, "another sandbox was started: {logged:?}");
    assert_eq!(c.files_on("node2", CLAIMS), Vec::<String>::new(), "claim records");
    c.wait(
        "braid's state of the sandbox gone",
        || state(&c) == state_before,
        || format!("{:?} vs {state_before:?}", state(&c)),
    );
    assert_eq!(status_of_pod(), Vec::<String>::new(), "status files of the pod");
    assert_eq!(held_on_node2(&c, "braid-dra9-gated"), Vec::<String>::new(), "host-local addresses");
    // The bridge (if the ADD got that far) has no port left: the pod's veth is gone.
    let ports = c.on_node("node2", "ip", &["-o", "link", "show", "master", "br-dra139"]);
    assert_eq!(String::from_utf8_lossy(&ports.stdout).trim(), "", "ports left on br-dra139");
    // The agent: prepared, then unprepared, nothing alarming.
    let lines = agent_lines(&c, &ns.name);
    eprintln!("REPORT node2's agent on the namespace: {lines:#?}");
    let claim_said = format!("{}/{claim_name}", ns.name);
    let prepared = line_of(&lines, &format!("claim {claim_said} prepared"));
    let unprepared = line_of(&lines, &format!("claim {claim_said} unprepared"));
    assert!(prepared.is_some() && unprepared.is_some() && prepared < unprepared, "{lines:#?}");
    let alarming: Vec<&String> = lines
        .iter()
        .filter(|l| ["WARNING", "cannot", "refused", "failed", "error"].iter().any(|w| l.contains(w)))
        .collect();
    assert!(alarming.is_empty(), "{alarming:#?}");
}

/// The pod's network-status file on `node` (`/run/braid/network-status/<ns>_<pod>_<sandbox>.json`).
fn status_file(c: &Cluster, node: &str, ns: &str, pod: &str) -> Option<Value> {
    let dir = "/run/braid/network-status";
    let name = c.files_on(node, dir).into_iter().find(|f| f.starts_with(&format!("{ns}_{pod}_")))?;
    serde_json::from_str(&c.read_on(node, &format!("{dir}/{name}"))?).ok()
}

/// braid's agents with `--vmtap` too (the DRA layout's DaemonSet patched) for one test; when
/// the guard drops, the DRA layout as it was and vmtap's binary gone from every node.
fn vmtap_on(c: &Cluster) -> Defer<impl FnMut() + '_> {
    let rollout = ["rollout", "status", "daemonset/braid-install", "-n", "kube-system", "--timeout=240s"];
    let add = r#"[{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--vmtap"}]"#;
    c.ok(&["patch", "daemonset", "braid-install", "-n", "kube-system", "--type=json", "-p", add]);
    c.ok(&rollout);
    Defer(move || {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
        let _ = c.kubectl(&["apply", "-k", &repo.join("deploy/kubernetes-dra").display().to_string()]);
        let _ = c.kubectl(&rollout);
        for n in 1..=c.nodes() {
            let _ = c.on_node(&format!("node{n}"), "rm", &["-f", "/opt/cni/bin/vmtap"]);
        }
    })
}

/// Where KEP-5304 puts the metadata of request `net` of the pod's claim `net` (from a
/// template) in a container that lists the claim.
const METADATA_IN_POD: &str =
    "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/net/net/net.braid-cni.io-metadata.json";

#[test]
fn a_claim_backed_interface_gets_its_tap_and_its_device_metadata_reaches_the_containers_that_use_the_claim() {
    let Some(c) = Cluster::lock(
        "a_claim_backed_interface_gets_its_tap_and_its_device_metadata_reaches_the_containers_that_use_the_claim",
    ) else {
        return;
    };
    assert!(c.nodes() >= 2, "this test needs two nodes (scripts/node.sh up 2)");
    let _only = plugin_only_on_node2(&c);
    let _dra = c.dra_layout();
    let _vmtap = vmtap_on(&c);
    let ns = c.namespace("braid-dra-vm");
    nad(&c, &ns.name, "side", ONLY, 140);
    nad(&c, &ns.name, "both", "bridge", 141);
    let (side, both) = ("braid-dra-vm/side", "braid-dra-vm/both");
    c.wait(
        "the slices offering both networks",
        || offers(&c, "node2", side) && offers(&c, "node1", both),
        || format!("{:?} {:?}\n{}", offered(&c, "node1"), offered(&c, "node2"), c.agent_log("node2")),
    );
    c.apply(&template(&ns.name, "side", side, json!({"interface": "side0"})));
    c.apply(&template(&ns.name, "both", both, json!({"interface": "side0"})));
    // Two containers: `vmm` lists the claim (the KEP's mount is its), `other` does not. One
    // pod on each node: node2 runs CRI-O, node1 containerd.
    let pod = |name: &str, template: &str, node: &str| {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns.name},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "nodeSelector": {"kubernetes.io/hostname": node},
                "resourceClaims": [{"name": "net", "resourceClaimTemplateName": template}],
                "containers": [
                    {"name": "vmm", "image": BUSYBOX, "imagePullPolicy": "Never", "command": ["sleep", "100000"],
                     "resources": {"claims": [{"name": "net"}]}},
                    {"name": "other", "image": BUSYBOX, "imagePullPolicy": "Never", "command": ["sleep", "100000"]}
                ]
            }
        })
        .to_string()
    };
    c.apply(&pod("vm2", "side", "node2"));
    c.apply(&pod("vm1", "both", "node1"));
    for (name, node, net) in [("vm2", "node2", "198.18.140."), ("vm1", "node1", "198.18.141.")] {
        c.wait_running(&ns.name, name);
        let exec = |container: &str, cmd: &[&str]| {
            let mut a = vec!["exec", "-n", &ns.name, name, "-c", container, "--"];
            a.extend_from_slice(cmd);
            c.kubectl(&a)
        };
        let text = |container: &str, cmd: &[&str]| {
            let out = exec(container, cmd);
            assert!(out.status.success(), "{name}/{container} {cmd:?}: {out:?}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };

        // vmtap handed the claim's interface to the VM like the cluster network's: a tap each
        // (tap0 for eth0, tap1 for side0), each joined to its interface by tc.
        for tap in ["tap0", "tap1"] {
            text("vmm", &["cat", &format!("/sys/class/net/{tap}/tun_flags")]);
        }
        let st = status_file(&c, node, &ns.name, name).unwrap_or_else(|| panic!("no status file of {name} on {node}"));
        let netns = st["sandbox"]["netns"].as_str().unwrap_or_else(|| panic!("no sandbox in {st}")).to_string();
        let filters =
            c.on_node(node, "nsenter", &[&format!("--net={netns}"), "tc", "filter", "show", "dev", "side0", "ingress"]);
        let filters = String::from_utf8_lossy(&filters.stdout).into_owned();
        assert!(filters.contains("mirred") && filters.contains("tap1"), "side0 is not redirected to tap1: {filters}");

        // The metadata, in the container that lists the claim: the claim's device with the
        // interface's name, address and MAC, written by the ADD before the containers started.
        let addr = text("vmm", &["ip", "-o", "-4", "addr", "show", "dev", "side0"]);
        let ip = addr.split_whitespace().skip_while(|w| *w != "inet").nth(1).unwrap_or_default().to_string();
        assert!(ip.starts_with(net), "{name}: {addr}");
        let mac = text("vmm", &["cat", "/sys/class/net/side0/address"]).trim().to_string();
        let md: Value = serde_json::from_str(&text("vmm", &["cat", METADATA_IN_POD]))
            .unwrap_or_else(|e| panic!("{name}: the metadata is not JSON: {e}"));
        let claim = claim_of(&c, &ns.name, name).unwrap();
        assert_eq!(md["apiVersion"], "metadata.resource.k8s.io/v1alpha1", "{md}");
        assert_eq!(md["kind"], "DeviceMetadata", "{md}");
        assert_eq!(md["metadata"]["name"], claim["metadata"]["name"], "{md}");
        assert_eq!(md["metadata"]["uid"], claim["metadata"]["uid"], "{md}");
        assert_eq!(md["metadata"]["generation"], 2, "prepared, then filled by the ADD: {md}");
        assert_eq!(md["podClaimName"], "net", "{md}");
        let allocated = &claim["status"]["allocation"]["devices"]["results"][0];
        let d = &md["requests"][0]["devices"][0];
        assert_eq!(md["requests"][0]["name"], "net", "{md}");
        assert_eq!(
            (&d["driver"], &d["pool"], &d["name"]),
            (&json!(DRIVER), &json!(node), &allocated["device"]),
            "{md}"
        );
        assert_eq!(d["attributes"]["network"], json!({"string": if node == "node2" { side } else { both }}), "{md}");
        assert_eq!(
            d["networkData"],
            json!({"interfaceName": "side0", "ips": [ip], "hardwareAddress": mac}),
            "{name}: {md}"
        );
        // Read-only, and only where the claim is listed.
        assert!(!exec("vmm", &["sh", "-c", &format!("echo x >> {METADATA_IN_POD}")]).status.success(), "writable");
        assert!(!exec("other", &["cat", METADATA_IN_POD]).status.success(), "{name}/other sees the metadata");
    }

    // On the node: the file and its CDI spec while the claim is prepared; neither once its pod
    // is gone (NodeUnprepareResources).
    let claim = claim_of(&c, &ns.name, "vm2").unwrap();
    let (claim_name, uid) = (claim["metadata"]["name"].as_str().unwrap(), claim["metadata"]["uid"].as_str().unwrap());
    let dir = format!("/var/lib/kubelet/plugins/{DRIVER}/dra-device-metadata");
    assert!(
        c.files_on("node2", &dir).contains(&format!("{}_{claim_name}/net/metadata.json", ns.name)),
        "{:?}",
        c.files_on("node2", &dir)
    );
    let spec = format!("{DRIVER}_metadata_{uid}_net.json");
    assert!(c.files_on("node2", "/var/run/cdi").contains(&spec), "{:?}", c.files_on("node2", "/var/run/cdi"));
    c.ok(&["delete", "pod", "vm2", "vm1", "-n", &ns.name, "--wait=true"]);
    for node in ["node1", "node2"] {
        c.wait(
            "the metadata and its CDI spec removed",
            || {
                c.files_on(node, &dir).is_empty()
                    && c.files_on(node, "/var/run/cdi").iter().all(|f| !f.starts_with(DRIVER))
            },
            || format!("{:?} {:?}\n{}", c.files_on(node, &dir), c.files_on(node, "/var/run/cdi"), c.agent_log(node)),
        );
    }
}
