//! The delegator in real namespaces with the reference plugins as delegates.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::{require_root, unique, Harness};
use serde_json::{json, Value};

fn ipam(h: &Harness, subnet: u8) -> Value {
    json!({
        "type": "host-local",
        "dataDir": h.ipam_dir(),
        "ranges": [[{"subnet": format!("198.18.{subnet}.0/24"), "gateway": format!("198.18.{subnet}.1")}]],
        "routes": [{"dst": format!("198.19.{subnet}.0/24"), "gw": format!("198.18.{subnet}.1")}]
    })
}

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

fn reservations(h: &Harness) -> Vec<String> {
    h.dir.files().into_iter().filter(|f| f.starts_with("ipam/") && f.contains("198.18.")).collect()
}

fn state_files(h: &Harness) -> Vec<String> {
    h.dir.files().into_iter().filter(|f| f.starts_with("state/") && !f.starts_with("state/cache")).collect()
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
            {"cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "bridge": unique("br"), "isGateway": true, "ipam": ipam(&h, 30)},
            {"cniVersion": "0.4.0", "name": "side", "type": "ptp", "ipam": ipam(&h, 31)}
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
    assert_eq!(state_files(&h).len(), 1);

    h.check(&list, &rt).unwrap_or_else(|e| panic!("CHECK: {e}"));
    h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL: {e}"));
    assert!(ctr.link("eth0").is_none() && ctr.link("net1").is_none());
    assert!(reservations(&h).is_empty(), "{:?}", h.dir.files());
    assert!(state_files(&h).is_empty(), "{:?}", h.dir.files());
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
            {"cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "bridge": unique("br"), "ipam": ipam(&h, 32)},
            {"cniVersion": "1.0.0", "name": "broken", "type": "braid-fault", "link": true,
             "fail": {"command": "ADD", "code": 7, "msg": "Invalid Configuration", "details": "injected"}},
            {"cniVersion": "0.4.0", "name": "side", "type": "ptp", "ipam": ipam(&h, 33)}
        ]),
    );
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let e = h.add(&list, &rt).unwrap_err();
    let cause = e.cause.clone().unwrap();
    assert_eq!(cause.code, 7, "{e}");
    assert!(
        e.msg.contains(
            "delegate 1 (network \"broken\", type \"braid-fault\", interface net1) failed: Invalid Configuration"
        ),
        "{}",
        e.msg
    );
    assert!(ctr.link("eth0").is_none(), "bridge attachment not rolled back");
    assert!(reservations(&h).is_empty(), "{:?}", h.dir.files());
    assert!(state_files(&h).is_empty(), "{:?}", h.dir.files());
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
        assert_eq!(e.cause.as_ref().unwrap().code, 7, "{e}");
        assert!(e.msg.contains(want), "{}", e.msg);
    }
    let e = h.add(&delegator_list(&h, "0.2.0", "merged", json!([fault, fault])), &rt).unwrap_err();
    assert!(e.msg.contains("use cniVersion 0.3.0 or later"), "{}", e.msg);
    ctr.ip(&["link", "add", "net1", "type", "veth", "peer", "name", "net1peer"]);
    let e = h.add(&delegator_list(&h, "1.1.0", "merged", json!([fault, fault])), &rt).unwrap_err();
    assert!(e.msg.contains("interface net1 already exists"), "{}", e.msg);
    assert!(!log.exists(), "a delegate ran despite an invalid plan");
}
