//! The walk over a whole result: every claim, each lie named, the host view, legacy results.

use super::testkit::*;
use super::*;
use crate::kernel::Addr;
use serde_json::json;

#[test]
fn a_true_result_passes_with_macs_compared_as_bytes() {
    let items = run(&result(good()), &pod(), FULL);
    assert!(mismatches(&items).is_empty(), "{:?}", mismatches(&items));
    assert!(items.iter().all(|i| i.finding == Finding::Ok));
    // 1 own + 2 links + 2 macs + 1 mtu + 3 ips + 3 routes.
    assert_eq!(items.len(), 12);
}

#[test]
fn each_lie_is_named() {
    let r = result(good());
    let mut s = pod();
    s.addrs.retain(|a| a.net != net("198.19.1.5/24"));
    s.addrs.push(Addr { ifindex: 3, net: net("198.19.1.6/24"), tentative: false, dadfailed: false });
    assert_eq!(bad(&r, &s, FULL), ["net1: address 198.19.1.5/24 missing (has: 198.19.1.6/24)"]);

    let mut s = pod();
    s.links[2].mac = vec![0x0a, 0x58, 0, 0, 0, 9];
    assert_eq!(bad(&r, &s, FULL), ["net1: mac 0a:58:00:00:00:02 expected, has 0a:58:00:00:00:09"]);

    let mut s = pod();
    s.links[1].mtu = 1400;
    assert_eq!(bad(&r, &s, FULL), ["eth0: mtu 1500 expected, has 1400"]);

    let mut s = pod();
    s.routes.retain(|x| x.dst != net("0.0.0.0/0"));
    assert_eq!(
        bad(&r, &s, FULL),
        ["route 0.0.0.0/0 via 198.18.0.1 missing from table main (has: no route to this destination)"]
    );

    // Moved to another table.
    let mut s = pod();
    s.routes[3].table = 254;
    assert_eq!(
        bad(&r, &s, FULL),
        ["route 198.19.0.0/16 via 198.19.1.1 table 1000 missing from table 1000 (has: 198.19.0.0/16 via 198.19.1.1 dev net1 table main)"]
    );

    // Renamed: the link and every claim on it.
    let mut s = pod();
    s.links[2].name = "other".into();
    assert_eq!(
        bad(&r, &s, FULL),
        [
            "net1: link missing in /run/netns/pod (has: lo, eth0, other)",
            "net1: address 198.19.1.5/24 missing: no link net1"
        ]
    );

    // An IP moved to another interface: named where it went.
    let mut s = pod();
    s.addrs[0].ifindex = 3;
    assert_eq!(bad(&r, &s, FULL), ["eth0: address 198.18.0.5/24 missing (has: none); found 198.18.0.5/24 on net1"]);
}

#[test]
fn tentative_is_pending_and_dad_failure_a_mismatch() {
    let r = result(good());
    let mut s = pod();
    s.addrs[1].tentative = true;
    let items = run(&r, &s, FULL);
    assert!(mismatches(&items).is_empty());
    assert_eq!(items.iter().filter(|i| i.is_pending()).count(), 1);
    s.addrs[1].dadfailed = true;
    assert_eq!(bad(&r, &s, FULL), ["eth0: address 2001:db8::5/64 present but failed duplicate address detection"]);
}

#[test]
fn ifname_must_be_listed_with_the_sandbox() {
    let mut v = good();
    v["interfaces"][0]["sandbox"] = json!("/run/netns/other");
    let got = bad(&result(v), &pod(), FULL);
    assert_eq!(got[0], "eth0: listed in the result with sandbox /run/netns/pod missing: the result lists it with sandbox [\"/run/netns/other\"]");
}

#[test]
fn host_side_interfaces_use_the_host_view() {
    let mut v = good();
    v["interfaces"] = json!([{"name": "cni0", "mac": "02:00:00:00:00:01"}, {"name": "eth0", "sandbox": NS}, {"name": "net1", "sandbox": NS}]);
    v["ips"] = json!([{"address": "198.18.0.5/24", "interface": 1}]);
    v["routes"] = json!([]);
    let r = result(v);
    let host = Snapshot { links: vec![link(7, "cni0", &[2, 0, 0, 0, 0, 1], 1500)], ..Snapshot::default() };
    let is_container = |s: &str| s == NS;
    let pod_view = pod();
    let subject = |host| Subject {
        result: &r,
        ifname: "eth0",
        netns: NS,
        is_container: &is_container,
        container: &pod_view,
        host,
    };
    assert!(mismatches(&verify(&subject(Some(&host)), FULL)).is_empty());
    let missing = Snapshot::default();
    assert_eq!(
        mismatches(&verify(&subject(Some(&missing)), FULL)),
        ["cni0 (host): link missing in the plugin's namespace (has: no links)"]
    );
    let off = Options { check_host: false, routes: RouteChecks::Full };
    assert!(mismatches(&verify(&subject(None), off)).is_empty());
}

#[test]
fn legacy_results_and_garbage_indices_never_panic() {
    let r = result(json!({"cniVersion": "0.2.0", "ip4": {"ip": "198.18.0.5/24"}}));
    let items = run(&r, &pod(), FULL);
    // 0.2.0 results list no interfaces: the claim is not made, the IP is checked on CNI_IFNAME.
    assert!(mismatches(&items).is_empty(), "{:?}", mismatches(&items));
    let mut v = good();
    v["ips"] = json!([{"address": "198.18.0.5/24", "interface": -4}, {"address": "198.18.0.5/24", "interface": 99}]);
    let wrong = bad(&result(v), &pod(), FULL);
    assert_eq!(wrong.len(), 2, "{wrong:?}");
    assert!(wrong[1].contains("index 99 names no interface of the result"), "{wrong:?}");
}
