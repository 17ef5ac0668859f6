//! Property tests: round trips, lossless conversions where Go's are lossless, and no panic on
//! any input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use cni_types::args::{load_args, ArgKind, ArgSpec};
use cni_types::result::{
    AnyResult, CniResult, Dns, Interface, InterfaceV04, IpConfig, IpConfigLegacy, IpConfigV04, ResultLegacy, ResultV04,
    Route,
};
use cni_types::version::{self, Version, VersionInfo};
use cni_types::{CniError, IpNet, NetConf, NetConfList};
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<u32>().prop_map(|n| IpAddr::V4(Ipv4Addr::from(n))),
        // Exclude IPv4-mapped addresses: they are IPv4 by definition and print as such.
        any::<u128>()
            .prop_filter("not v4-mapped", |n| Ipv6Addr::from(*n).to_ipv4_mapped().is_none())
            .prop_map(|n| IpAddr::V6(Ipv6Addr::from(n))),
    ]
}

fn ipnet() -> impl Strategy<Value = IpNet> {
    (ip(), 0u8..=128).prop_map(|(a, p)| IpNet::new(a, if a.is_ipv4() { p % 33 } else { p }).unwrap())
}

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9/:._<>&é -]{0,12}"
}

fn texts() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(text().prop_filter("non-empty", |s| !s.is_empty()), 0..3)
}

fn dns() -> impl Strategy<Value = Dns> {
    (texts(), text(), texts(), texts()).prop_map(|(nameservers, domain, search, options)| Dns {
        nameservers,
        domain,
        search,
        options,
    })
}

fn route() -> impl Strategy<Value = Route> {
    (
        ipnet(),
        prop::option::of(ip()),
        any::<i32>(),
        any::<i32>(),
        any::<i32>(),
        any::<Option<i32>>(),
        any::<Option<i32>>(),
    )
        .prop_map(|(dst, gw, mtu, advmss, priority, table, scope)| Route {
            dst,
            gw,
            mtu: mtu.into(),
            advmss: advmss.into(),
            priority: priority.into(),
            table: table.map(Into::into),
            scope: scope.map(Into::into),
        })
}

fn simple_route() -> impl Strategy<Value = Route> {
    (ipnet(), prop::option::of(ip())).prop_map(|(dst, gw)| Route::new(dst, gw))
}

fn result_v1() -> impl Strategy<Value = CniResult> {
    let iface = (text(), text(), any::<i32>(), text(), text(), text()).prop_map(
        |(name, mac, mtu, sandbox, socket_path, pci_id)| Interface {
            name,
            mac,
            mtu: mtu.into(),
            sandbox,
            socket_path,
            pci_id,
        },
    );
    let ipc = (ipnet(), prop::option::of(ip()), any::<Option<i32>>())
        .prop_map(|(address, gateway, interface)| IpConfig { address, gateway, interface: interface.map(Into::into) });
    (
        prop_oneof![Just("1.0.0"), Just("1.1.0")],
        prop::collection::vec(iface, 0..4),
        prop::collection::vec(ipc, 0..4),
        prop::collection::vec(route(), 0..4),
        dns(),
    )
        .prop_map(|(v, interfaces, ips, routes, dns)| CniResult {
            cni_version: v.into(),
            interfaces,
            ips,
            routes,
            dns,
        })
}

fn result_v04() -> impl Strategy<Value = ResultV04> {
    let iface = (text(), text(), text()).prop_map(|(name, mac, sandbox)| InterfaceV04 { name, mac, sandbox });
    let ipc = (ipnet(), prop::option::of(ip()), any::<Option<i32>>()).prop_map(|(address, gateway, interface)| {
        // A consistent version string, as every real plugin writes it.
        IpConfigV04 {
            version: if address.is_ipv4() { "4" } else { "6" }.into(),
            interface: interface.map(Into::into),
            address,
            gateway,
        }
    });
    (
        prop_oneof![Just("0.3.0"), Just("0.3.1"), Just("0.4.0")],
        prop::collection::vec(iface, 0..4),
        prop::collection::vec(ipc, 0..4),
        prop::collection::vec(route(), 0..4),
        dns(),
    )
        .prop_map(|(v, interfaces, ips, routes, dns)| ResultV04 {
            cni_version: v.into(),
            interfaces,
            ips,
            routes,
            dns,
        })
}

fn result_legacy() -> impl Strategy<Value = ResultLegacy> {
    let v4 = (any::<u32>(), 0u8..=32, prop::option::of(any::<u32>()), prop::collection::vec(simple_route(), 0..3))
        .prop_map(|(a, p, gw, routes)| IpConfigLegacy {
            ip: IpNet::new(IpAddr::V4(a.into()), p).unwrap(),
            gateway: gw.map(|g| IpAddr::V4(g.into())),
            routes: routes.into_iter().filter(|r| r.dst.is_ipv4()).collect(),
        });
    let v6 = (ip().prop_filter("v6", IpAddr::is_ipv6), 0u8..=128, prop::collection::vec(simple_route(), 0..3))
        .prop_map(|(a, p, routes)| IpConfigLegacy {
            ip: IpNet::new(a, p).unwrap(),
            gateway: None,
            routes: routes.into_iter().filter(|r| !r.dst.is_ipv4()).collect(),
        });
    (prop_oneof![Just("0.1.0"), Just("0.2.0")], prop::option::of(v4), prop::option::of(v6), dns())
        .prop_map(|(v, ip4, ip6, dns)| ResultLegacy { cni_version: v.into(), ip4, ip6, dns })
}

fn any_result() -> impl Strategy<Value = AnyResult> {
    prop_oneof![
        result_legacy().prop_map(AnyResult::Legacy),
        result_v04().prop_map(AnyResult::V04),
        result_v1().prop_map(AnyResult::V1),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn parse_serialise_parse(r in any_result()) {
        for bytes in [r.to_json_pretty(), r.to_json()] {
            let back = AnyResult::create(r.version(), bytes.as_bytes()).unwrap();
            prop_assert_eq!(&back, &r);
        }
        let back = AnyResult::create_from_value(r.version(), &r.to_value()).unwrap();
        prop_assert_eq!(back, r);
    }

    #[test]
    fn v1_relabel_round_trip(r in result_v1()) {
        let other = if r.cni_version == "1.0.0" { "1.1.0" } else { "1.0.0" };
        let there = r.convert_to(other).unwrap();
        prop_assert_eq!(there.convert_to(&r.cni_version).unwrap(), AnyResult::V1(r));
    }

    #[test]
    fn v04_up_and_down_is_lossless(r in result_v04()) {
        let orig = AnyResult::V04(r.clone());
        for up in ["1.0.0", "1.1.0"] {
            prop_assert_eq!(orig.convert_to(up).unwrap().convert_to(&r.cni_version).unwrap(), orig.clone());
        }
    }

    #[test]
    fn legacy_up_and_down_is_lossless(r in result_legacy()) {
        prop_assume!(r.ip4.is_some() || r.ip6.is_some());
        let orig = AnyResult::Legacy(r.clone());
        for up in ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"] {
            prop_assert_eq!(orig.convert_to(up).unwrap().convert_to(&r.cni_version).unwrap(), orig.clone());
        }
    }

    #[test]
    fn every_conversion_is_total(r in any_result(), target in prop::sample::select(version::ALL.to_vec())) {
        // Either a result of the target version or Go's error; never a panic.
        if let Ok(c) = r.convert_to(target) {
            prop_assert_eq!(c.version(), target);
        }
    }

    #[test]
    fn no_bytes_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        feed(&bytes);
    }

    #[test]
    fn no_json_like_text_panics(s in r#"[\[\]{}":,0-9a-zA-Z./ \\-]{0,200}"#) {
        feed(s.as_bytes());
    }

    #[test]
    fn mutated_results_never_panic(r in any_result(), cut in 0usize..400, junk in any::<u8>()) {
        let mut bytes = r.to_json().into_bytes();
        if cut < bytes.len() {
            bytes[cut] = junk;
        }
        feed(&bytes);
        bytes.truncate(cut);
        feed(&bytes);
    }
}

/// Every parser in the crate, on the same bytes.
fn feed(bytes: &[u8]) {
    for v in version::ALL.iter().chain(&["", "9.9.9"]) {
        let _ = AnyResult::create(v, bytes);
    }
    let _ = AnyResult::from_bytes(bytes);
    if let Ok(conf) = NetConf::parse(bytes) {
        let _ = conf.prev_result();
        let _ = conf.runtime_config();
        let _ = conf.valid_attachments();
        let _ = conf.to_bytes();
    }
    let _ = NetConfList::parse(bytes);
    let _ = cni_types::config::decode_version(bytes);
    let _ = CniError::decode(bytes);
    let _ = VersionInfo::decode(bytes);
    let text = String::from_utf8_lossy(bytes);
    let _ = Version::parse(&text);
    let _ = IpNet::parse(&text);
    let _ = cni_types::Mac::parse(&text);
    let _ = load_args(&text, &[ArgSpec { key: "IP", kind: ArgKind::Ip }]);
    let _ = cni_types::validate::interface_name(&text);
    let _ = cni_types::validate::container_id(&text);
}
