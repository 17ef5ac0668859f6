//! Links, addresses, routes and rules against the real kernel, in namespaces of the test's own
//! (root only; `BRAID_REQUIRE_ROOT_TESTS=1` turns the skip into a failure). vmtap's and the
//! verifier's integration tests cover tc and the rest of what plugins do with them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use cni_netlink::links::{self, LinkChange};
use cni_netlink::routes::{self, Route};
use cni_netlink::{addresses, rules, NetlinkError, Rtnl};
use cni_skel::netns::run_in;
use cni_skel::testing::{require_root, TempNetns};
use cni_types::ip::IpNet;

fn net(s: &str) -> IpNet {
    IpNet::parse(s).unwrap()
}

/// Runs `work` on a socket of the namespace.
fn inside<T: Send>(ns: &TempNetns, work: impl FnOnce(&mut Rtnl) -> Result<T, NetlinkError> + Send) -> T {
    run_in(&ns.path(), || work(&mut Rtnl::open()?)).unwrap().unwrap()
}

#[test]
fn links_are_read_and_changed() {
    if !require_root("links_are_read_and_changed") {
        return;
    }
    let ns = TempNetns::new("nl-links");
    ns.ip(&[
        "link",
        "add",
        "net7",
        "address",
        "02:00:00:00:07:07",
        "mtu",
        "1400",
        "type",
        "veth",
        "peer",
        "name",
        "p7",
    ]);
    ns.ip(&["link", "add", "br7", "type", "bridge"]);
    ns.ip(&["link", "set", "p7", "master", "br7"]);
    let all = inside(&ns, links::links);
    let find = |name: &str| all.iter().find(|l| l.name == name).unwrap().clone();
    let (net7, p7, br7, lo) = (find("net7"), find("p7"), find("br7"), find("lo"));
    assert_eq!((net7.mac_string().as_str(), net7.mtu, net7.kind.as_str()), ("02:00:00:00:07:07", 1400, "veth"));
    assert_eq!((p7.master, br7.kind.as_str(), net7.master), (Some(br7.index), "bridge", None));
    assert!(!net7.up && lo.kind.is_empty() && lo.mac.len() == 6);

    let change = LinkChange { mtu: Some(1300), up: Some(true), alias: Some("braid test"), group: Some(42) };
    let net7 = inside(&ns, |r| {
        links::set(r, net7.index, "net7", &change)?;
        Ok(links::links(r)?.into_iter().find(|l| l.name == "net7").unwrap())
    });
    assert_eq!((net7.mtu, net7.up, net7.alias.as_str(), net7.group), (1300, true, "braid test", 42));
    // Deleting the group takes its link (and the veth peer with it); deleting again is success.
    let left = inside(&ns, |r| {
        links::delete_group(r, 42)?;
        links::delete(r, net7.index, "net7")?;
        links::links(r)
    });
    assert!(left.iter().all(|l| l.name != "net7" && l.name != "p7"), "{left:?}");
}

#[test]
fn a_dump_spanning_many_datagrams_is_read_whole() {
    if !require_root("a_dump_spanning_many_datagrams_is_read_whole") {
        return;
    }
    let ns = TempNetns::new("nl-many");
    for i in 0..150 {
        ns.ip(&["link", "add", &format!("d{i}"), "type", "veth", "peer", "name", &format!("e{i}")]);
    }
    let all = inside(&ns, links::links);
    assert_eq!(all.len(), 1 + 300);
    assert!((0..150).all(|i| all.iter().any(|l| l.name == format!("e{i}"))));
}

#[test]
fn addresses_routes_and_rules_are_read_and_routes_changed() {
    if !require_root("addresses_routes_and_rules_are_read_and_routes_changed") {
        return;
    }
    let ns = TempNetns::new("nl-routes");
    ns.ip(&["link", "add", "rta", "type", "veth", "peer", "name", "rtb"]);
    ns.ip(&["link", "set", "rta", "up"]);
    ns.ip(&["link", "set", "rtb", "up"]);
    ns.ip(&["addr", "add", "198.18.210.2/24", "dev", "rta"]);
    ns.ip(&["-6", "addr", "add", "2001:db8:210::2/64", "dev", "rta", "nodad"]);
    ns.ip(&["route", "add", "198.18.211.0/24", "via", "198.18.210.1", "dev", "rta", "table", "1000", "metric", "5"]);
    ns.ip(&["rule", "add", "from", "198.18.210.2", "lookup", "1000", "priority", "100"]);
    ns.ip(&["rule", "add", "fwmark", "7", "lookup", "1000", "priority", "101"]);
    let (addrs, found, rules, rta) = inside(&ns, |r| {
        let rta = links::links(r)?.into_iter().find(|l| l.name == "rta").unwrap();
        Ok((addresses::addresses(r)?, routes::routes(r)?, rules::rules(r)?, rta))
    });
    assert!(addrs.iter().any(|a| a.ifindex == rta.index && a.net == net("198.18.210.2/24")), "{addrs:?}");
    assert!(addrs.iter().any(|a| a.net == net("2001:db8:210::2/64") && !a.tentative), "{addrs:?}");
    let want = Route {
        table: 1000,
        dst: net("198.18.211.0/24"),
        gw: Some("198.18.210.1".parse().unwrap()),
        oif: Some(rta.index),
        priority: 5,
        scope: 0,
        mtu: 0,
        kind: 1,
    };
    assert!(found.contains(&want), "{found:?}");
    // The connected routes of both families, and the local table.
    assert!(found.iter().any(|r| r.table == routes::MAIN_TABLE && r.dst == net("198.18.210.0/24")), "{found:?}");
    assert!(found.iter().any(|r| r.dst == net("2001:db8:210::/64")), "{found:?}");
    assert!(found.iter().any(|r| r.table == 255 && !routes::is_unicast(r.kind)), "{found:?}");
    let from = rules.iter().find(|r| r.priority == 100).unwrap();
    assert_eq!(
        (from.src, from.table, from.narrowed, from.ipv4),
        (Some(net("198.18.210.2/32")), Some(1000), false, true)
    );
    assert!(rules.iter().find(|r| r.priority == 101).unwrap().narrowed);
    assert!(rules.iter().any(|r| !r.ipv4 && r.table == Some(routes::MAIN_TABLE)), "{rules:?}");

    // Added with a metric and an MTU, found as added; added again: EEXIST; deleted; deleted
    // again: not found.
    let added = Route { table: 1001, dst: net("198.18.212.0/24"), priority: 9, mtu: 1300, ..want };
    let (after_add, again, after_del, del_again) = inside(&ns, |r| {
        routes::add(r, &added, "rta")?;
        let after_add = routes::routes(r)?;
        let again = routes::add(r, &added, "rta").unwrap_err();
        routes::delete(r, &added, "rta")?;
        let after_del = routes::routes(r)?;
        Ok((after_add, again, after_del, routes::delete(r, &added, "rta").unwrap_err()))
    });
    assert!(after_add.contains(&added), "{after_add:?}");
    assert!(again.is_exists(), "{again}");
    assert!(again.to_string().contains("add route 198.18.212.0/24 via 198.18.210.1 on rta"), "{again}");
    assert!(!after_del.iter().any(|r| r.table == 1001), "{after_del:?}");
    assert_eq!(del_again.errno(), Some(3 /* ESRCH */), "{del_again}");
}
