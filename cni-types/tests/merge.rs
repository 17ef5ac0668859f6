//! The merge algorithm: worked cases and properties.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use cni_types::merge::{check_expressible, merge, Attachment};
use cni_types::AnyResult;
use proptest::prelude::*;
use serde_json::json;

fn res(v: serde_json::Value) -> AnyResult {
    AnyResult::from_bytes(&serde_json::to_vec(&v).unwrap()).unwrap()
}

const NS: &str = "/run/netns/pod";

#[test]
fn cluster_network_first_and_legacy_delegate_gets_an_interface() {
    let primary = res(json!({
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "cni0"}, {"name": "veth1"}, {"name": "eth0", "sandbox": NS, "mac": "aa:bb:cc:dd:ee:01"}],
        "ips": [{"address": "198.18.0.5/24", "gateway": "198.18.0.1", "interface": 2}],
        "routes": [{"dst": "0.0.0.0/0", "gw": "198.18.0.1"}],
        "dns": {"nameservers": ["198.18.0.53"], "search": ["a.example"]}
    }));
    let legacy = res(json!({
        "cniVersion": "0.2.0",
        "ip4": {"ip": "198.19.1.5/24", "routes": [{"dst": "198.19.0.0/16"}]},
        "dns": {"nameservers": ["198.18.0.53", "198.19.0.53"], "domain": "b.example", "search": ["b.example"]}
    }));
    let m = merge(&[
        Attachment { result: &primary, ifname: "eth0", sandbox: NS },
        Attachment { result: &legacy, ifname: "net1", sandbox: NS },
    ]);
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
    let r = m.result;
    assert_eq!(r.cni_version, "1.1.0");
    let names: Vec<&str> = r.interfaces.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["cni0", "veth1", "eth0", "net1"]);
    assert_eq!(r.interfaces[3].sandbox, NS);
    assert_eq!(r.ips[0].address.to_string(), "198.18.0.5/24");
    assert_eq!(r.ips[0].interface, Some(2));
    assert_eq!(r.ips[1].interface, Some(3));
    // A route without gw keeps none.
    assert_eq!(r.routes[1].gw, None);
    assert_eq!(r.dns.nameservers, ["198.18.0.53", "198.19.0.53"]);
    assert_eq!(r.dns.search, ["a.example", "b.example"]);
    assert_eq!(r.dns.domain, "b.example");
}

#[test]
fn bogus_and_missing_indices_are_repaired_never_emitted() {
    let odd = res(json!({
        "cniVersion": "1.1.0",
        "interfaces": [{"name": "host-side"}, {"name": "net1", "sandbox": NS}],
        "ips": [
            {"address": "198.18.2.2/24", "interface": -1},
            {"address": "198.18.2.3/24", "interface": 7},
            {"address": "198.18.2.4/24"},
            {"address": "2001:db8::4/64", "interface": 0}
        ]
    }));
    let first = res(json!({"cniVersion": "1.0.0", "ips": [{"address": "198.18.1.2/24"}]}));
    let m = merge(&[
        Attachment { result: &first, ifname: "eth0", sandbox: NS },
        Attachment { result: &odd, ifname: "net1", sandbox: NS },
    ]);
    let idx: Vec<Option<i64>> = m.result.ips.iter().map(|i| i.interface).collect();
    // eth0 was synthesised at 0; odd's interfaces are 1 (host-side) and 2 (net1).
    assert_eq!(idx, [Some(0), Some(2), Some(2), Some(2), Some(1)]);
    assert_eq!(m.warnings.len(), 2, "{:?}", m.warnings);
    assert!(m.warnings[0].contains("interface index -1"), "{}", m.warnings[0]);
}

#[test]
fn missing_container_interface_is_synthesised_once() {
    let hostonly = res(json!({
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "br0"}],
        "ips": [{"address": "198.18.3.2/24"}, {"address": "198.18.3.3/24"}]
    }));
    let m = merge(&[Attachment { result: &hostonly, ifname: "net2", sandbox: NS }]);
    assert_eq!(m.result.interfaces.len(), 2);
    assert_eq!(m.result.interfaces[1].name, "net2");
    assert!(m.result.ips.iter().all(|i| i.interface == Some(1)));
    assert_eq!(m.warnings.len(), 1);
}

#[test]
fn duplicate_routes_are_dropped() {
    let a = res(json!({"cniVersion": "1.0.0", "routes": [{"dst": "198.18.0.0/15", "gw": "198.18.0.1"}]}));
    let m = merge(&[
        Attachment { result: &a, ifname: "eth0", sandbox: NS },
        Attachment { result: &a, ifname: "net1", sandbox: NS },
    ]);
    assert_eq!(m.result.routes.len(), 1);
}

#[test]
fn legacy_output_is_refused_for_more_than_one_attachment() {
    assert!(check_expressible("0.2.0", 1).is_ok());
    let e = check_expressible("0.2.0", 2).unwrap_err().to_string();
    assert!(e.contains("0.3.0 or later"), "{e}");
    assert!(check_expressible("0.4.0", 5).is_ok());
    assert!(check_expressible("1.1.0", 5).is_ok());
}

#[test]
fn a_thousand_attachments_merge() {
    let one = res(json!({
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "x", "sandbox": NS}],
        "ips": [{"address": "198.18.0.2/24", "interface": 0}],
        "routes": [{"dst": "0.0.0.0/0", "gw": "198.18.0.1"}]
    }));
    let names: Vec<String> = (0..1000).map(|i| format!("net{i}")).collect();
    let atts: Vec<Attachment> = names.iter().map(|n| Attachment { result: &one, ifname: n, sandbox: NS }).collect();
    let m = merge(&atts);
    assert_eq!(m.result.interfaces.len(), 1000);
    assert_eq!(m.result.ips.len(), 1000);
    assert_eq!(m.result.routes.len(), 1);
    assert_eq!(m.result.ips[999].interface, Some(999));
}

fn arb_result() -> impl Strategy<Value = AnyResult> {
    let ifaces = prop::collection::vec((0u8..4, any::<bool>()), 0..4);
    let ips = prop::collection::vec((1u8..250, prop::option::of(-2i64..6)), 0..5);
    (prop_oneof![Just("0.2.0"), Just("0.4.0"), Just("1.0.0"), Just("1.1.0")], ifaces, ips).prop_map(
        |(v, ifaces, ips)| {
            let ifs: Vec<_> = ifaces
                .iter()
                .map(|(n, sb)| json!({"name": format!("if{n}"), "sandbox": if *sb { NS } else { "" }}))
                .collect();
            match v {
                "0.2.0" => res(
                    json!({"cniVersion": v, "ip4": {"ip": format!("198.18.0.{}/24", ips.first().map_or(1, |i| i.0))}}),
                ),
                _ => {
                    let ips: Vec<_> = ips
                        .iter()
                        .map(|(h, idx)| {
                            let mut ip = json!({"address": format!("198.18.1.{h}/24"), "version": "4"});
                            if let Some(i) = idx {
                                ip["interface"] = json!(i);
                            }
                            ip
                        })
                        .collect();
                    res(json!({"cniVersion": v, "interfaces": ifs, "ips": ips}))
                }
            }
        },
    )
}

proptest! {
    #[test]
    fn every_emitted_index_is_valid_and_order_is_kept(results in prop::collection::vec(arb_result(), 1..6)) {
        let names: Vec<String> = (0..results.len()).map(|i| if i == 0 { "eth0".into() } else { format!("net{i}") }).collect();
        let atts: Vec<Attachment> = results.iter().zip(&names).map(|(r, n)| Attachment { result: r, ifname: n, sandbox: NS }).collect();
        let m = merge(&atts);
        let total_ips: usize = results.iter().map(|r| r.to_latest().ips.len()).sum();
        prop_assert_eq!(m.result.ips.len(), total_ips);
        for ip in &m.result.ips {
            let i = ip.interface.unwrap();
            prop_assert!(i >= 0 && (i as usize) < m.result.interfaces.len());
        }
        // The first attachment's IPs lead, in their order.
        let first: Vec<_> = results[0].to_latest().ips.iter().map(|i| i.address).collect();
        let lead: Vec<_> = m.result.ips.iter().take(first.len()).map(|i| i.address).collect();
        prop_assert_eq!(lead, first);
        // Every IP of attachment k points into attachment k's interfaces (at or after its offset).
        prop_assert!(m.result.interfaces.len() >= results.iter().map(|r| r.to_latest().interfaces.len().max(1)).sum::<usize>());
        // The merged result survives printing in every version from 0.3.0 on.
        for v in ["0.3.0", "0.4.0", "1.0.0", "1.1.0"] {
            let printed = m.result.convert_to(v).unwrap().to_json();
            let back = AnyResult::create(v, printed.as_bytes()).unwrap();
            prop_assert_eq!(back.to_latest().ips.len(), total_ips);
        }
    }
}

#[test]
fn dual_stack_attachments_keep_both_families_on_their_interfaces() {
    let primary = res(json!({
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "eth0", "sandbox": NS}],
        "ips": [{"address": "198.18.0.5/24", "gateway": "198.18.0.1", "interface": 0},
                {"address": "2001:db8::5/64", "gateway": "2001:db8::1", "interface": 0}],
        "routes": [{"dst": "0.0.0.0/0", "gw": "198.18.0.1"}, {"dst": "::/0", "gw": "2001:db8::1"}]
    }));
    // A 0.2.0 delegate with both families, and a 0.4.0 one whose IPs carry no index.
    let legacy = res(json!({
        "cniVersion": "0.2.0",
        "ip4": {"ip": "198.19.1.5/24"},
        "ip6": {"ip": "2001:db8:1::5/64", "routes": [{"dst": "2001:db8:ff::/48"}]}
    }));
    let mid = res(json!({
        "cniVersion": "0.4.0",
        "interfaces": [{"name": "host-veth"}, {"name": "net2", "sandbox": NS}],
        "ips": [{"version": "6", "address": "2001:db8:2::5/64"}, {"version": "4", "address": "198.19.2.5/24"}]
    }));
    let m = merge(&[
        Attachment { result: &primary, ifname: "eth0", sandbox: NS },
        Attachment { result: &legacy, ifname: "net1", sandbox: NS },
        Attachment { result: &mid, ifname: "net2", sandbox: NS },
    ]);
    let r = &m.result;
    let on: Vec<(String, &str)> = r
        .ips
        .iter()
        .map(|ip| (ip.address.to_string(), r.interfaces[ip.interface.unwrap() as usize].name.as_str()))
        .collect();
    assert_eq!(
        on,
        [
            ("198.18.0.5/24".to_string(), "eth0"),
            ("2001:db8::5/64".to_string(), "eth0"),
            ("198.19.1.5/24".to_string(), "net1"),
            ("2001:db8:1::5/64".to_string(), "net1"),
            ("2001:db8:2::5/64".to_string(), "net2"),
            ("198.19.2.5/24".to_string(), "net2"),
        ]
    );
    // The IPv6 route keeps no gateway: none is guessed from the IPv4 side.
    let v6 = r.routes.iter().find(|x| x.dst.to_string() == "2001:db8:ff::/48").unwrap();
    assert_eq!(v6.gw, None);
    assert_eq!(r.routes.len(), 3);
    // 0.4.0 IPs without an index are normal (go-cni reads them as the container interface): no warning.
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
}

/// Any text the result parser accepts: shapes far from what real plugins print.
fn arb_wild_result() -> impl Strategy<Value = AnyResult> {
    let idx =
        prop_oneof![Just(json!(null)), (-3i64..9).prop_map(|i| json!(i)), Just(json!(i64::MAX)), Just(json!(i64::MIN))];
    let ip = (idx, 0u8..255, any::<bool>()).prop_map(|(i, h, v6)| {
        let a = if v6 { format!("2001:db8::{h:x}/64") } else { format!("198.18.3.{h}/24") };
        if i.is_null() {
            json!({"address": a})
        } else {
            json!({"address": a, "interface": i})
        }
    });
    let iface = ("[a-z0-9]{0,4}", prop::option::of(Just(NS)), prop::option::of(0u32..70000))
        .prop_map(|(n, sb, mtu)| json!({"name": n, "sandbox": sb.unwrap_or(""), "mtu": mtu.unwrap_or(0)}));
    let route = (0u8..4, any::<bool>()).prop_map(|(d, gw)| {
        if gw {
            json!({"dst": format!("198.19.{d}.0/24"), "gw": "198.18.3.1"})
        } else {
            json!({"dst": format!("198.19.{d}.0/24")})
        }
    });
    (
        prop_oneof![Just("0.3.1"), Just("0.4.0"), Just("1.0.0"), Just("1.1.0")],
        prop::collection::vec(iface, 0..5),
        prop::collection::vec(ip, 0..6),
        prop::collection::vec(route, 0..4),
    )
        .prop_filter_map("parser refused", |(v, ifs, ips, routes)| {
            AnyResult::from_bytes(
                &serde_json::to_vec(&json!({"cniVersion": v, "interfaces": ifs, "ips": ips, "routes": routes}))
                    .unwrap(),
            )
            .ok()
        })
}

fn count_synthesised(results: &[AnyResult], names: &[String]) -> usize {
    // Each attachment adds its own interfaces, plus at most one synthesised container interface.
    results
        .iter()
        .zip(names)
        .map(|(r, n)| {
            let l = r.to_latest();
            let has = l.interfaces.iter().any(|i| &i.name == n && !i.sandbox.is_empty());
            usize::from(l.interfaces.is_empty() || (!has && !l.ips.is_empty()))
        })
        .sum()
}

proptest! {
    #[test]
    fn wild_inputs_never_panic_and_lose_nothing(results in prop::collection::vec(arb_wild_result(), 1..5)) {
        let names: Vec<String> = (0..results.len()).map(|i| if i == 0 { "eth0".into() } else { format!("net{i}") }).collect();
        let atts: Vec<Attachment> = results.iter().zip(&names).map(|(r, n)| Attachment { result: r, ifname: n, sandbox: NS }).collect();
        let m = merge(&atts);
        let latest: Vec<_> = results.iter().map(|r| r.to_latest()).collect();
        prop_assert_eq!(m.result.ips.len(), latest.iter().map(|l| l.ips.len()).sum::<usize>());
        let own: usize = latest.iter().map(|l| l.interfaces.len()).sum();
        // Interfaces: every given one kept, plus at most one per attachment (its container
        // interface, when the result had none or lacked it for an unplaced IP).
        prop_assert!(m.result.interfaces.len() >= own);
        prop_assert!(m.result.interfaces.len() <= own + count_synthesised(&results, &names));
        for ip in &m.result.ips {
            let i = ip.interface.unwrap();
            prop_assert!(i >= 0 && (i as usize) < m.result.interfaces.len());
        }
    }

    #[test]
    fn merging_with_nothing_is_the_identity_after_normalisation(r in arb_wild_result()) {
        let once = merge(&[Attachment { result: &r, ifname: "eth0", sandbox: NS }]).result;
        let again = AnyResult::from_bytes(once.convert_to("1.1.0").unwrap().to_json().as_bytes()).unwrap();
        let twice = merge(&[Attachment { result: &again, ifname: "eth0", sandbox: NS }]);
        prop_assert!(twice.warnings.is_empty(), "{:?}", twice.warnings);
        prop_assert_eq!(&twice.result, &once);
        // A result that needed no repair is returned as it was (up to the 1.1 label).
        let l = r.to_latest();
        let clean = !l.interfaces.is_empty()
            && l.ips.iter().all(|ip| ip.interface.is_some_and(|i| i >= 0 && (i as usize) < l.interfaces.len()));
        if clean && l.routes.iter().collect::<std::collections::HashSet<_>>().len() == l.routes.len() {
            let mut expected = l.clone();
            expected.cni_version = once.cni_version.clone();
            prop_assert_eq!(&once, &expected);
        }
    }
}
