//! The verifier against real namespaces: real ADDs pass, in chain and in operators' mode; each
//! tampering with the namespace afterwards is detected and named.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::{require_root, unique, Harness, Netns};
use cni_runtime::chain::RuntimeConf;
use cni_types::version::Command;
use serde_json::{json, Value};

/// host-local with an IPv4 and an IPv6 range, each with a routed destination behind its gateway.
fn dual_stack_ipam(h: &Harness, n: u8) -> Value {
    let mut ipam = h.host_local(n);
    ipam["ranges"]
        .as_array_mut()
        .unwrap()
        .push(json!([{"subnet": format!("2001:db8:{n}::/64"), "gateway": format!("2001:db8:{n}::1")}]));
    ipam["routes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"dst": format!("2001:db8:ff{n}::/64"), "gw": format!("2001:db8:{n}::1")}));
    ipam
}

/// `[delegator{bridge (dual-stack), ptp, macvlan} merged, verifier]`.
struct Attached {
    h: Harness,
    ctr: Netns,
    rt: RuntimeConf,
    list: Value,
    result: cni_types::CniResult,
}

fn attach(tag: &str, version: &str) -> Attached {
    let h = Harness::new(tag);
    let ctr = h.container(tag);
    let master = unique("m");
    h.host.ip(&["link", "add", &master, "type", "veth", "peer", "name", &format!("{master}p")]);
    h.host.ip(&["link", "set", &master, "up"]);
    let list = json!({
        "cniVersion": version,
        "name": unique("ver"),
        "plugins": [
            {"type": "delegator", "stateDir": h.dir.path().join("state"), "result": "merged", "timeout": 10, "delegates": [
                {"cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "bridge": unique("br"), "ipam": dual_stack_ipam(&h, 70)},
                {"cniVersion": "0.4.0", "name": "side", "type": "ptp", "ipam": h.host_local(71)},
                {"cniVersion": "0.4.0", "name": "mac", "type": "macvlan", "master": master, "mode": "bridge", "ipam": h.host_local(72)}
            ]},
            {"type": "verifier"}
        ]
    });
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let result = h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD ({tag}, {version}): {e}")).to_latest();
    Attached { h, ctr, rt, list, result }
}

impl Attached {
    /// The address (`a/len`) of the result on interface `name`, of the given family.
    fn addr(&self, name: &str, v4: bool) -> String {
        let r = &self.result;
        r.ips
            .iter()
            .find(|ip| r.interfaces[ip.interface.unwrap() as usize].name == name && ip.address.is_ipv4() == v4)
            .map(|ip| ip.address.to_string())
            .unwrap_or_else(|| panic!("no address on {name}"))
    }

    fn result_json(&self) -> String {
        cni_types::AnyResult::V1(self.result.clone()).to_json()
    }

    /// Operators' mode in the host namespace: (status, stdout, stderr).
    fn operators(&self) -> (i32, String, String) {
        self.h.run_tool("verifier", &["--netns", &self.rt.netns, "--ifname", "eth0"], self.result_json().as_bytes())
    }

    /// The verifier's CHECK with the chain's final result as prevResult, as the runtime calls it
    /// (upstream CHECKs earlier in the chain may stop a chain CHECK before it gets there).
    fn verifier_check(&self) -> Result<Vec<u8>, cni_runtime::invoke::InvokeError> {
        let conf = json!({"cniVersion": "1.1.0", "name": "n", "type": "verifier", "settleMs": 200, "prevResult": cni_types::AnyResult::V1(self.result.clone()).to_value()});
        self.h.exec_plugin("verifier", Command::Check, &self.rt, &serde_json::to_vec(&conf).unwrap())
    }

    /// The chain's CHECK fails; the verifier's names `expect`; operators' mode agrees; DEL cleans up.
    fn assert_detected(self, what: &str, expect: &str) {
        assert!(self.h.check(&self.list, &self.rt).is_err(), "{what}: the chain's CHECK passed");
        let cause = match self.verifier_check() {
            Err(cni_runtime::invoke::InvokeError::Plugin(e)) => e,
            other => panic!("{what}: expected the verifier to fail, got {other:?}"),
        };
        assert_eq!(cause.code, 120, "{what}: {cause:?}");
        assert!(
            cause.msg.ends_with(&format!("between result and namespace {}", self.rt.netns)),
            "{what}: {}",
            cause.msg
        );
        assert!(cause.details.contains(expect), "{what}: expected {expect:?} in {:?}", cause.details);
        let (code, out, _) = self.operators();
        assert_eq!(code, 1, "{what}: operators' mode\n{out}");
        assert!(out.lines().any(|l| l.starts_with("MISMATCH") && l.contains(expect)), "{what}:\n{out}");
        self.h.del(&self.list, &self.rt).unwrap_or_else(|e| panic!("{what}: DEL after tampering: {e}"));
    }
}

#[test]
fn real_adds_pass_in_chain_and_in_operators_mode() {
    if !require_root("real_adds_pass_in_chain_and_in_operators_mode") {
        return;
    }
    for version in ["1.1.0", "1.0.0", "0.4.0"] {
        let a = attach("vok", version);
        // Dual-stack eth0, plus net1 (ptp) and net2 (macvlan): every IP checked on its own link.
        assert_eq!(a.result.ips.len(), 4, "{version}");
        a.h.check(&a.list, &a.rt).unwrap_or_else(|e| panic!("CHECK {version}: {e}"));
        a.verifier_check().unwrap_or_else(|e| panic!("verifier CHECK {version}: {e}"));
        let (code, out, err) = a.operators();
        assert_eq!(code, 0, "{version}:\n{out}{err}");
        assert!(!out.contains("MISMATCH"), "{out}");
        for claim in [
            format!("eth0: address {}", a.addr("eth0", true)),
            format!("eth0: address {}", a.addr("eth0", false)),
            format!("net1: address {}", a.addr("net1", true)),
            format!("net2: address {}", a.addr("net2", true)),
            "route 198.19.70.0/24 via 198.18.70.1".to_string(),
            "route 2001:db8:ff70::/64 via 2001:db8:70::1".to_string(),
        ] {
            assert!(
                out.lines().any(|l| l.starts_with("ok") && l.ends_with(&claim)),
                "{version}: {claim} not ok in\n{out}"
            );
        }
        // Host side (the bridge and the host veths) is checked in the plugins' namespace.
        assert!(out.lines().any(|l| l.starts_with("ok") && l.contains("(host): link present")), "{out}");
        a.h.del(&a.list, &a.rt).unwrap_or_else(|e| panic!("DEL {version}: {e}"));
    }
}

#[test]
fn an_address_deleted_is_detected() {
    if !require_root("an_address_deleted_is_detected") {
        return;
    }
    let a = attach("vaddr", "1.0.0");
    let addr = a.addr("net1", true);
    a.ctr.ip(&["addr", "del", &addr, "dev", "net1"]);
    a.assert_detected("address deleted", &format!("net1: address {addr} missing"));
}

#[test]
fn a_mac_changed_is_detected() {
    if !require_root("a_mac_changed_is_detected") {
        return;
    }
    let a = attach("vmac", "1.1.0");
    a.ctr.ip(&["link", "set", "net2", "address", "02:00:00:00:0a:99"]);
    a.assert_detected("MAC changed", "net2: mac");
}

#[test]
fn a_route_deleted_or_moved_to_another_table_is_detected() {
    if !require_root("a_route_deleted_or_moved_to_another_table_is_detected") {
        return;
    }
    let a = attach("vrdel", "1.0.0");
    a.ctr.ip(&["route", "del", "198.19.70.0/24"]);
    a.assert_detected(
        "route deleted",
        "route 198.19.70.0/24 via 198.18.70.1 missing from table main (has: no route to this destination)",
    );

    let a = attach("vrtab", "1.0.0");
    a.ctr.ip(&["route", "del", "198.19.70.0/24"]);
    a.ctr.ip(&["route", "add", "198.19.70.0/24", "via", "198.18.70.1", "dev", "eth0", "table", "100"]);
    a.assert_detected(
        "route moved",
        "missing from table main (has: 198.19.70.0/24 via 198.18.70.1 dev eth0 table 100 [no policy rule or VRF selects it for eth0's addresses])",
    );
}

/// The verifier's CHECK of `result` with `settleMs` 0 (the namespace is settled).
fn check_with(h: &Harness, rt: &RuntimeConf, result: &Value) -> Result<Vec<u8>, cni_runtime::invoke::InvokeError> {
    let conf = json!({"cniVersion": "1.1.0", "name": "n", "type": "verifier", "settleMs": 0, "prevResult": result});
    h.exec_plugin("verifier", Command::Check, rt, &serde_json::to_vec(&conf).unwrap())
}

fn mismatch(out: Result<Vec<u8>, cni_runtime::invoke::InvokeError>) -> cni_types::CniError {
    match out {
        Err(cni_runtime::invoke::InvokeError::Plugin(e)) if e.code == 120 => e,
        other => panic!("expected the verifier's mismatch (code 120), got {other:?}"),
    }
}

/// `ip -j rule` entries whose `src` is `ip`: (priority, table).
fn rules_from(ctr: &Netns, ip: &str) -> Vec<(u64, String)> {
    let rules = ctr.ip_json(&["rule", "show"]);
    rules
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["src"] == ip)
        .map(|r| (r["priority"].as_u64().unwrap(), r["table"].as_str().unwrap().to_string()))
        .collect()
}

/// sbr after a merged result moves eth0's routes to a table of their own and adds a rule for
/// eth0's address: the verifier (enforcing on ADD) finds them there. Tampering with the rule —
/// another source, another table, gone — is detected and named.
#[test]
fn sbr_routes_are_found_through_its_rule_and_a_tampered_rule_is_named() {
    if !require_root("sbr_routes_are_found_through_its_rule_and_a_tampered_rule_is_named") {
        return;
    }
    let h = Harness::new("vsbr");
    let ctr = h.container("vsbr");
    let list = json!({
        "cniVersion": "1.0.0",
        "name": unique("vsbr"),
        "plugins": [
            {"type": "delegator", "stateDir": h.dir.path().join("state"), "result": "merged", "delegates": [
                {"name": "cluster", "type": "bridge", "bridge": unique("br"), "isDefaultGateway": true, "ipam": h.host_local(73)},
                {"name": "side", "type": "ptp", "ipam": h.host_local(74)}
            ]},
            {"type": "sbr"},
            {"type": "verifier"}
        ]
    });
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let result = h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD with sbr and the verifier: {e}")).to_value();
    let r = cni_types::AnyResult::from_bytes(result.to_string().as_bytes()).unwrap().to_latest();
    let eth0 = r.ips[0].address.addr().to_string();
    assert_eq!(rules_from(&ctr, &eth0), [(32765, "100".to_string())], "{}", ctr.ip(&["rule"]));
    check_with(&h, &rt, &result).unwrap_or_else(|e| panic!("verifier CHECK after sbr: {e}"));
    let (code, out, err) = h.run_tool("verifier", &["--netns", &rt.netns], result.to_string().as_bytes());
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.lines().any(|l| l == "ok       route 0.0.0.0/0 via 198.18.73.1"), "{out}");

    // The rule now selects table 100 for an address eth0 does not have.
    ctr.ip(&["rule", "del", "pref", "32765"]);
    ctr.ip(&["rule", "add", "pref", "32765", "from", "198.18.73.250", "lookup", "100"]);
    let e = mismatch(check_with(&h, &rt, &result));
    assert_eq!(e.msg, format!("2 mismatches between result and namespace {}", rt.netns));
    assert!(
        e.details.contains("route 0.0.0.0/0 via 198.18.73.1 missing from table main (has: 0.0.0.0/0 via 198.18.73.1 dev eth0 table 100 [no policy rule or VRF selects it for eth0's addresses])"),
        "{}",
        e.details
    );
    assert!(e.details.contains("route 198.19.73.0/24 via 198.18.73.1 missing from table main"), "{}", e.details);
    // The rule sends eth0's traffic to another table: both places are named.
    ctr.ip(&["rule", "del", "pref", "32765"]);
    ctr.ip(&["rule", "add", "pref", "32765", "from", &eth0, "lookup", "101"]);
    let e = mismatch(check_with(&h, &rt, &result));
    assert!(
        e.details.contains(&format!("route 0.0.0.0/0 via 198.18.73.1 missing from table main and table 101 (selected for eth0 by rule 32765 from {eth0}/32) (has: 0.0.0.0/0 via 198.18.73.1 dev eth0 table 100 [no policy rule or VRF selects it for eth0's addresses])")),
        "{}",
        e.details
    );
    // Operators' mode names the same.
    let (code, out, _) = h.run_tool("verifier", &["--netns", &rt.netns], result.to_string().as_bytes());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("MISMATCH route 0.0.0.0/0 via 198.18.73.1 missing from table main and table 101")),
        "{out}"
    );
    // Restored: verified again. DEL (sbr removes its rule) leaves no rule behind.
    ctr.ip(&["rule", "del", "pref", "32765"]);
    ctr.ip(&["rule", "add", "pref", "32765", "from", &eth0, "lookup", "100"]);
    check_with(&h, &rt, &result).unwrap_or_else(|e| panic!("verifier CHECK with the rule restored: {e}"));
    h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL: {e}"));
    assert!(rules_from(&ctr, &eth0).is_empty(), "{}", ctr.ip(&["rule"]));
    assert_eq!(ctr.links(), ["lo"]);
    assert!(h.reservations().is_empty() && h.state_files().is_empty(), "{:?}", h.dir.files());
}

/// A 1.1.0 route with `table` is looked for in that table only; one without is found in a
/// table only through a rule for its interface's addresses.
#[test]
fn an_explicit_table_is_honoured_and_a_table_without_a_rule_is_not_enough() {
    if !require_root("an_explicit_table_is_honoured_and_a_table_without_a_rule_is_not_enough") {
        return;
    }
    let (h, ctr, rt) = hand_made_pod("vtab", &["198.18.93.2/24"]);
    ctr.ip(&["route", "add", "198.19.93.0/24", "via", "198.18.93.1", "dev", "eth0", "table", "200"]);
    let claim = |table: Option<u32>| {
        let mut route = json!({"dst": "198.19.93.0/24", "gw": "198.18.93.1"});
        if let Some(t) = table {
            route["table"] = json!(t);
        }
        json!({"cniVersion": "1.1.0", "interfaces": [{"name": "eth0", "sandbox": rt.netns}],
            "ips": [{"address": "198.18.93.2/24", "interface": 0}], "routes": [route]})
    };
    check_with(&h, &rt, &claim(Some(200))).unwrap_or_else(|e| panic!("route in its table 200: {e}"));
    let e = mismatch(check_with(&h, &rt, &claim(Some(201))));
    assert_eq!(
        e.details,
        "route 198.19.93.0/24 via 198.18.93.1 table 201 missing from table 201 (has: 198.19.93.0/24 via 198.18.93.1 dev eth0 table 200)"
    );
    // No table in the result, and no rule: table 200 is not where eth0's traffic is looked up.
    let e = mismatch(check_with(&h, &rt, &claim(None)));
    assert_eq!(
        e.details,
        "route 198.19.93.0/24 via 198.18.93.1 missing from table main (has: 198.19.93.0/24 via 198.18.93.1 dev eth0 table 200 [no policy rule or VRF selects it for eth0's addresses])"
    );
    // A rule that holds only for marked packets does not make it so either.
    ctr.ip(&["rule", "add", "pref", "1000", "from", "198.18.93.2", "fwmark", "0x1", "lookup", "200"]);
    mismatch(check_with(&h, &rt, &claim(None)));
    // A rule for eth0's address does.
    ctr.ip(&["rule", "add", "pref", "1001", "from", "198.18.93.0/24", "lookup", "200"]);
    check_with(&h, &rt, &claim(None)).unwrap_or_else(|e| panic!("route in table 200 selected by a rule: {e}"));
    check_with(&h, &rt, &claim(Some(200))).unwrap_or_else(|e| panic!("explicit table with the rule: {e}"));
    // Upstream's route checks read main only, rules or not.
    let conf = json!({"cniVersion": "1.1.0", "name": "n", "type": "verifier", "settleMs": 0, "routeChecks": "upstream", "prevResult": claim(None)});
    let e = mismatch(h.exec_plugin("verifier", Command::Check, &rt, &serde_json::to_vec(&conf).unwrap()));
    assert!(
        e.details.contains("missing from table main (has: 198.19.93.0/24 via 198.18.93.1 dev eth0 table 200)"),
        "{}",
        e.details
    );
}

#[test]
fn a_link_renamed_is_detected() {
    if !require_root("a_link_renamed_is_detected") {
        return;
    }
    let a = attach("vren", "1.0.0");
    a.ctr.ip(&["link", "set", "net1", "down"]);
    a.ctr.ip(&["link", "set", "net1", "name", "net9"]);
    a.assert_detected("link renamed", "net1: link missing in");
}

#[test]
fn an_ip_moved_to_another_interface_is_detected() {
    if !require_root("an_ip_moved_to_another_interface_is_detected") {
        return;
    }
    let a = attach("vmove", "1.0.0");
    let addr = a.addr("eth0", true);
    a.ctr.ip(&["addr", "del", &addr, "dev", "eth0"]);
    a.ctr.ip(&["addr", "add", &addr, "dev", "net2"]);
    a.assert_detected("IP moved", &format!("eth0: address {addr} missing (has: none); found {addr} on net2"));
}

/// The merger's chain with the verifier last. Upstream main plugins validate every IP of the
/// final result against CNI_IFNAME on CHECK, so a merged chain CHECKs cleanly when the cluster
/// plugin sits behind the delegator (which CHECKs it with its own recorded result).
#[test]
fn merger_chains_are_verified() {
    if !require_root("merger_chains_are_verified") {
        return;
    }
    let h = Harness::new("vmrg");
    let ctr = h.container("vmrg");
    let master = unique("m");
    h.host.ip(&["link", "add", &master, "type", "veth", "peer", "name", &format!("{master}p")]);
    h.host.ip(&["link", "set", &master, "up"]);
    let name = unique("mrg");
    let list = json!({
        "cniVersion": "1.0.0",
        "name": name,
        "plugins": [
            {"type": "delegator", "stateDir": h.dir.path().join("dstate"), "delegates": [
                {"type": "bridge", "bridge": unique("br"), "isDefaultGateway": true, "ipam": h.host_local(80)}
            ]},
            {"type": "merger", "stateDir": h.dir.path().join("mstate"), "delegates": [
                {"cniVersion": "0.4.0", "name": "mac", "type": "macvlan", "master": master, "mode": "bridge", "ipam": h.host_local(81)},
                {"cniVersion": "0.2.0", "name": "legacy", "type": "ptp", "ipam": h.host_local(82)}
            ]},
            {"type": "tuning", "mtu": 1400},
            {"type": "verifier"}
        ]
    });
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let r = h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD: {e}")).to_latest();
    assert_eq!(r.ips.len(), 3);
    h.check(&list, &rt).unwrap_or_else(|e| panic!("CHECK of the whole chain: {e}"));
    // Operators' mode reads libcni's cache file as it is (its ifName is the default).
    let cache = h.cache_dir().join("results").join(format!("{name}-{}-eth0", rt.container_id));
    let (code, out, err) = h.run_tool("verifier", &["--netns", &rt.netns], &std::fs::read(&cache).unwrap());
    assert_eq!(code, 0, "{out}{err}");
    // A default route's gateway changed behind the chain's back: upstream CHECKs compare only
    // the destination of default routes (`pkg/ip/utils.go`, `ValidateExpectedRoute`), so the verifier, last, reports it.
    ctr.ip(&["route", "replace", "default", "via", "198.18.80.254", "dev", "eth0"]);
    let e = h.check(&list, &rt).unwrap_err();
    let cause = e.cause().unwrap();
    assert_eq!(cause.code, 120, "the verifier, last in the chain, reports it: {}", e);
    let details = cause.details;
    assert!(
        details.contains("route 0.0.0.0/0 via 198.18.80.1 missing from table main (has: 0.0.0.0/0 via 198.18.80.254 dev eth0 table main)"),
        "{details}"
    );
    h.del(&list, &rt).unwrap();
    assert!(ctr.link("eth0").is_none() && ctr.link("net1").is_none() && ctr.link("net2").is_none());

    // The plain layout: ADD is verified (enforce) over the merged result.
    let plain = json!({"cniVersion": "1.0.0", "name": unique("mrg"), "plugins": [
        {"type": "bridge", "bridge": unique("br"), "ipam": h.host_local(83)},
        {"type": "merger", "stateDir": h.dir.path().join("mstate"), "delegates": [{"type": "ptp", "ipam": h.host_local(84)}]},
        {"type": "verifier"}
    ]});
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    h.add(&plain, &rt).unwrap_or_else(|e| panic!("ADD of [bridge, merger, verifier]: {e}"));
    h.del(&plain, &rt).unwrap();
}

/// A namespace set up by hand, and a 1.1 result that claims what is there: interface MTU,
/// routes in a table above 255 with priority and MTU, a link-scoped route.
#[test]
fn one_one_fields_are_compared() {
    if !require_root("one_one_fields_are_compared") {
        return;
    }
    let h = Harness::new("v11");
    let ctr = h.container("v11");
    ctr.ip(&["link", "add", "eth0", "mtu", "1450", "type", "veth", "peer", "name", "peer0"]);
    for l in ["eth0", "peer0"] {
        ctr.ip(&["link", "set", l, "up"]);
    }
    ctr.ip(&["addr", "add", "198.18.90.2/24", "dev", "eth0"]);
    ctr.ip(&["route", "add", "198.19.90.0/24", "via", "198.18.90.1", "table", "1000", "metric", "50", "mtu", "1400"]);
    ctr.ip(&["route", "add", "198.19.91.0/24", "dev", "eth0", "scope", "link"]);
    let mac = ctr.link("eth0").unwrap()["address"].as_str().unwrap().to_uppercase();
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let prev = json!({
        "cniVersion": "1.1.0",
        "interfaces": [{"name": "eth0", "sandbox": rt.netns, "mac": mac, "mtu": 1450}],
        "ips": [{"address": "198.18.90.2/24", "interface": 0}],
        "routes": [
            {"dst": "198.19.90.0/24", "gw": "198.18.90.1", "table": 1000, "priority": 50, "mtu": 1400},
            {"dst": "198.19.91.0/24", "scope": 253}
        ]
    });
    let conf = |prev: &Value, extra: Value| {
        let mut c = json!({"cniVersion": "1.1.0", "name": "n", "type": "verifier", "settleMs": 0, "prevResult": prev});
        c.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        serde_json::to_vec(&c).unwrap()
    };
    let out = h.exec_plugin("verifier", Command::Add, &rt, &conf(&prev, json!({}))).unwrap();
    let printed: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(printed["routes"], prev["routes"], "ADD prints prevResult unchanged");
    assert_eq!(printed["interfaces"][0]["mtu"], 1450);
    h.exec_plugin("verifier", Command::Check, &rt, &conf(&prev, json!({}))).unwrap();

    // Each 1.1 claim that the kernel contradicts is named.
    let mut lie = prev.clone();
    lie["interfaces"][0]["mtu"] = json!(1500);
    lie["routes"][0]["priority"] = json!(60);
    lie["routes"][1]["scope"] = json!(0);
    let e = match h.exec_plugin("verifier", Command::Check, &rt, &conf(&lie, json!({}))) {
        Err(cni_runtime::invoke::InvokeError::Plugin(e)) => e,
        other => panic!("expected a plugin error, got {other:?}"),
    };
    assert_eq!(e.code, 120);
    assert_eq!(e.msg, format!("3 mismatches between result and namespace {}", rt.netns));
    for want in [
        "eth0: mtu 1500 expected, has 1450",
        "route 198.19.90.0/24 via 198.18.90.1 table 1000 differs: priority 60 expected, has 50",
        "route 198.19.91.0/24 differs: scope 0 expected, has 253",
    ] {
        assert!(e.details.contains(want), "{want:?} not in {:?}", e.details);
    }
    // Upstream-compatible route checks ignore what upstream ignores (but not the MTU of a link).
    let e = match h.exec_plugin("verifier", Command::Check, &rt, &conf(&lie, json!({"routeChecks": "upstream"}))) {
        Err(cni_runtime::invoke::InvokeError::Plugin(e)) => e,
        other => panic!("expected a plugin error, got {other:?}"),
    };
    assert!(e.details.contains("route 198.19.90.0/24 via 198.18.90.1 missing from table main"), "{}", e.details);
    assert!(!e.details.contains("scope"), "{}", e.details);

    // warn: ADD logs and passes prevResult on; enforce (default) fails it.
    let out = h.exec_plugin("verifier", Command::Add, &rt, &conf(&lie, json!({"addMode": "warn"}))).unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&out).unwrap()["routes"], lie["routes"]);
    assert!(h.exec_plugin("verifier", Command::Add, &rt, &conf(&lie, json!({}))).is_err());
}

#[test]
fn refusals_and_missing_namespaces() {
    if !require_root("refusals_and_missing_namespaces") {
        return;
    }
    let h = Harness::new("vref");
    let ctr = h.container("vref");
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let plugin_err = |cmd, rt: &RuntimeConf, conf: &Value| match h.exec_plugin(
        "verifier",
        cmd,
        rt,
        &serde_json::to_vec(conf).unwrap(),
    ) {
        Err(cni_runtime::invoke::InvokeError::Plugin(e)) => e,
        other => panic!("expected a plugin error, got {other:?}"),
    };
    // Not chained.
    let bare = json!({"cniVersion": "1.0.0", "name": "n", "type": "verifier"});
    let e = plugin_err(Command::Add, &rt, &bare);
    assert_eq!(e.code, 7);
    assert!(e.msg.contains("must be called as a chained plugin"), "{}", e.msg);
    assert_eq!(plugin_err(Command::Check, &rt, &bare).code, 7);
    // A key of the wrong kind is named.
    let e = plugin_err(
        Command::Add,
        &rt,
        &json!({"cniVersion": "1.0.0", "name": "n", "type": "verifier", "settleMs": "soon"}),
    );
    assert_eq!(e.code, 7);
    assert!(e.msg.starts_with("settleMs"), "{}", e.msg);
    // A namespace that is gone: CHECK says so clearly; DEL succeeds.
    let gone = RuntimeConf { netns: "/run/netns/braid-gone-for-good".into(), ..rt.clone() };
    let prev = json!({"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": gone.netns}], "ips": [{"address": "198.18.95.2/24", "interface": 0}]});
    let conf = json!({"cniVersion": "1.0.0", "name": "n", "type": "verifier", "prevResult": prev});
    let e = plugin_err(Command::Check, &gone, &conf);
    assert_eq!(e.code, 121);
    assert_eq!(
        e.msg,
        "failed to open netns \"/run/netns/braid-gone-for-good\": No such file or directory (os error 2)"
    );
    assert_eq!(plugin_err(Command::Add, &gone, &conf).code, 121, "enforce: ADD fails too");
    // warn: ADD logs that it could not look and passes prevResult on.
    let mut warn = conf.clone();
    warn["addMode"] = json!("warn");
    let out = h.exec_plugin("verifier", Command::Add, &gone, &serde_json::to_vec(&warn).unwrap()).unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&out).unwrap()["ips"], prev["ips"]);
    h.exec_plugin("verifier", Command::Del, &gone, &serde_json::to_vec(&conf).unwrap()).unwrap();
    h.exec_plugin("verifier", Command::Del, &rt, &serde_json::to_vec(&bare).unwrap()).unwrap();
    let (code, _, err) = h.run_tool("verifier", &["--netns", &gone.netns], prev.to_string().as_bytes());
    assert_eq!(code, 2);
    assert!(err.contains("failed to open netns"), "{err}");
    // GC and STATUS succeed.
    let v11 = json!({"cniVersion": "1.1.0", "name": "n", "type": "verifier"});
    h.exec_plugin("verifier", Command::Gc, &rt, &serde_json::to_vec(&v11).unwrap()).unwrap();
    h.exec_plugin("verifier", Command::Status, &rt, &serde_json::to_vec(&v11).unwrap()).unwrap();
    // Operators' mode refuses what it cannot read.
    let (code, _, err) = h.run_tool("verifier", &["--netns", &rt.netns], b"not json");
    assert_eq!((code, err.contains("not JSON")), (2, true), "{err}");
    let (code, out, _) = h.run_tool("verifier", &["--help"], b"");
    assert_eq!((code, out.starts_with("usage: verifier --netns PATH")), (0, true));
}

/// A hand-made pod: `eth0`, a veth whose peer stays in the pod, both up, with `addrs`.
fn hand_made_pod(tag: &str, addrs: &[&str]) -> (Harness, Netns, RuntimeConf) {
    let h = Harness::new(tag);
    let ctr = h.container(tag);
    ctr.ip(&["link", "add", "eth0", "type", "veth", "peer", "name", "peer0"]);
    ctr.ip(&["link", "set", "eth0", "up"]);
    ctr.ip(&["link", "set", "peer0", "up"]);
    for a in addrs {
        ctr.ip(&["addr", "add", a, "dev", "eth0"]);
    }
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    (h, ctr, rt)
}

/// The verifier's configuration (1.0.0) for a result claiming `ip` on the pod's `eth0`.
fn eth0_claim(rt: &RuntimeConf, ip: &str, settle_ms: u64) -> Vec<u8> {
    let prev = json!({"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": rt.netns}],
        "ips": [{"address": ip, "interface": 0}]});
    let conf =
        json!({"cniVersion": "1.0.0", "name": "n", "type": "verifier", "settleMs": settle_ms, "prevResult": prev});
    serde_json::to_vec(&conf).unwrap()
}

/// CHECK right after ADD may see a namespace still settling: an address that appears within
/// `settleMs` is found; one that never appears fails once the settle time is up.
#[test]
fn check_waits_for_a_settling_namespace() {
    if !require_root("check_waits_for_a_settling_namespace") {
        return;
    }
    let (h, ctr, rt) = hand_made_pod("vset", &[]);
    // The address is added while CHECK runs (a moment after it started; the settle time is far
    // longer): a verifier that read the namespace once would report it missing.
    let conf = eth0_claim(&rt, "198.18.97.2/24", 30_000);
    let late = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(400));
            ctr.ip(&["addr", "add", "198.18.97.2/24", "dev", "eth0"]);
        });
        h.exec_plugin("verifier", Command::Check, &rt, &conf)
    });
    late.unwrap_or_else(|e| panic!("the address came within the settle time: {e}"));
    // Never there: fails once the settle time is up, naming the address.
    let e = h.exec_plugin("verifier", Command::Check, &rt, &eth0_claim(&rt, "198.18.98.2/24", 600)).unwrap_err();
    let e = match e {
        cni_runtime::invoke::InvokeError::Plugin(e) => e,
        other => panic!("not the verifier's own error: {other}"),
    };
    assert_eq!(e.code, 120, "{e}");
    assert!(e.to_string().contains("198.18.98.2/24"), "{e}");
}

/// An IPv6 address in duplicate address detection: ADD passes at once (it is configured, and
/// waiting for DAD would delay the pod); CHECK waits until DAD has finished, then passes.
#[test]
fn add_does_not_wait_for_dad_but_check_does() {
    if !require_root("add_does_not_wait_for_dad_but_check_does") {
        return;
    }
    let (h, ctr, rt) = hand_made_pod("vdad", &["2001:db8:99::2/64"]);
    let tentative = || ctr.ip(&["-6", "addr", "show", "dev", "eth0", "tentative"]).contains("2001:db8:99::2");
    assert!(tentative(), "the address should start in DAD");
    let conf = eth0_claim(&rt, "2001:db8:99::2/64", 10000);
    h.exec_plugin("verifier", Command::Add, &rt, &conf).unwrap();
    assert!(tentative(), "ADD waited for DAD");
    h.exec_plugin("verifier", Command::Check, &rt, &conf).unwrap();
    assert!(!tentative(), "CHECK returned while the address was still in DAD");
}

/// Links appearing and disappearing while the verifier reads the namespace (dumps the kernel may
/// flag as interrupted, which are redone) never make a true result fail.
#[test]
fn concurrent_link_churn_does_not_fail_a_true_result() {
    if !require_root("concurrent_link_churn_does_not_fail_a_true_result") {
        return;
    }
    let (h, ctr, rt) = hand_made_pod("vchurn", &["198.18.96.2/24"]);
    let conf = eth0_claim(&rt, "198.18.96.2/24", 0);
    let batch = h.dir.path().join("churn.batch");
    let lines: String =
        (0..40).map(|i| format!("link add ch{i} type veth peer name chp{i}\nlink del ch{i}\n")).collect();
    std::fs::write(&batch, lines).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::process::Command::new("ip").args(["-n", ctr.name(), "-batch"]).arg(&batch).status();
            }
        });
        for i in 0..40 {
            let out = h.exec_plugin("verifier", Command::Check, &rt, &conf);
            if let Err(e) = out {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                panic!("CHECK {i} under churn: {e}");
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}
