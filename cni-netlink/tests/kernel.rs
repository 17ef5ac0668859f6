//! Links, addresses, routes, rules and the ingress qdisc against the real kernel, in namespaces
//! of the test's own (root only; `BRAID_REQUIRE_ROOT_TESTS=1` turns the skip into a failure).
//! vmtap's and the verifier's integration tests cover the tc redirects and the rest of what
//! plugins do with them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use cni_netlink::links::{self, LinkChange, MAX_ALIAS};
use cni_netlink::routes::{self, Route};
use cni_netlink::{addresses, rules, tc, NetlinkError, Rtnl};
use cni_skel::netns::run_in;
use cni_skel::testing::{require_root, TempNetns};
use cni_types::ip::IpNet;

fn net(s: &str) -> IpNet {
    IpNet::parse(s).unwrap()
}

/// A throwaway namespace for `test`, or `None` (the test SKIPPED, or failing under
/// BRAID_REQUIRE_ROOT_TESTS) without root.
fn root_ns(test: &str, tag: &str) -> Option<TempNetns> {
    require_root(test).then(|| TempNetns::new(tag))
}

/// [`root_ns`] with a veth pair `a`–`b`, both up, and `addr` on `a`.
fn veth_ns(test: &str, tag: &str, (a, b): (&str, &str), addr: &str) -> Option<TempNetns> {
    let ns = root_ns(test, tag)?;
    ns.ip(&["link", "add", a, "type", "veth", "peer", "name", b]);
    ns.ip(&["link", "set", a, "up"]);
    ns.ip(&["link", "set", b, "up"]);
    ns.ip(&["addr", "add", addr, "dev", a]);
    Some(ns)
}

/// Runs `work` on a socket of the namespace.
fn inside<T: Send>(ns: &TempNetns, work: impl FnOnce(&mut Rtnl) -> Result<T, NetlinkError> + Send) -> T {
    run_in(&ns.path(), || work(&mut Rtnl::open()?)).unwrap().unwrap()
}

#[test]
fn links_are_read_and_changed() {
    let Some(ns) = root_ns("links_are_read_and_changed", "nl-links") else {
        return;
    };
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
    // Asked for by name: the same link as the dump's; a name nobody has: none.
    let (got, none) = inside(&ns, |r| Ok((links::get(r, "net7")?, links::get(r, "net9")?)));
    assert_eq!((got, none), (Some(net7.clone()), None));

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
    let Some(ns) = root_ns("a_dump_spanning_many_datagrams_is_read_whole", "nl-many") else {
        return;
    };
    for i in 0..150 {
        ns.ip(&["link", "add", &format!("d{i}"), "type", "veth", "peer", "name", &format!("e{i}")]);
    }
    let all = inside(&ns, links::links);
    assert_eq!(all.len(), 1 + 300);
    assert!((0..150).all(|i| all.iter().any(|l| l.name == format!("e{i}"))));
}

/// A link whose message is larger than the 32 KiB the socket offers the kernel (400 alternative
/// names of 100 bytes: about 46 KB): asked for alone and dumped among others, it is read
/// whole, and so is every link after it.
#[test]
fn a_link_larger_than_the_receive_buffer_is_read_whole() {
    let Some(ns) = root_ns("a_link_larger_than_the_receive_buffer_is_read_whole", "nl-big") else {
        return;
    };
    let mut batch = String::from("link add big0 type veth peer name big1\n");
    for i in 0..400 {
        batch.push_str(&format!("link property add dev big0 altname {i:03}{}\n", "a".repeat(97)));
    }
    batch.push_str("link add after0 type veth peer name after1\n");
    let file = std::env::temp_dir().join(format!("{}.batch", ns.name()));
    std::fs::write(&file, batch).unwrap();
    ns.ip(&["-batch", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    let (big, all) = inside(&ns, |r| Ok((links::get(r, "big0")?, links::links(r)?)));
    assert_eq!(big.unwrap().name, "big0");
    let names: Vec<&str> = all.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names.len(), 5, "{names:?}");
    for name in ["lo", "big0", "big1", "after0", "after1"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
}

/// Every filter chain on an ingress is listed, redirects or not, once each (a u32 filter comes
/// in three messages: its chain, its hash table, its key): what decides if the qdisc may go
/// once some are deleted.
#[test]
fn ingress_filters_list_every_chain_and_the_redirects_among_them() {
    let Some(ns) = veth_ns(
        "ingress_filters_list_every_chain_and_the_redirects_among_them",
        "nl-filters",
        ("fa", "fb"),
        "198.18.214.2/24",
    ) else {
        return;
    };
    let index = |name: &'static str| inside(&ns, |r| links::get(r, name)).unwrap().index;
    let (fa, fb) = (index("fa"), index("fb"));
    inside(&ns, |r| {
        tc::add_ingress(r, fa, "fa")?;
        tc::add_redirect(r, (fa, "fa"), (fb, "fb"))
    });
    ns.exec(&[
        "tc", "filter", "add", "dev", "fa", "ingress", "protocol", "ip", "prio", "7", "u32", "match", "u8", "0", "0",
        "flowid", "1:1",
    ]);
    let filters = inside(&ns, |r| tc::ingress_filters(r, fa, "fa"));
    let [redirect] = filters.redirects.as_slice() else { panic!("{filters:?}") };
    assert!(redirect.to == fb && redirect.passes_every_frame(), "{redirect:?}");
    let ours = (redirect.priority, redirect.protocol);
    let ip = (7, 0x0800);
    assert_eq!(filters.chains.len(), 2, "{filters:?}");
    assert!(filters.chains.contains(&ours) && filters.chains.contains(&ip), "{filters:?}");
    assert!(filters.others_than(&[ours]) && !filters.others_than(&[ours, ip]));
    assert!(!filters.other_tc_chains, "{filters:?}");
    // A filter of the same priority and protocol in another tc chain: not one of the chains,
    // not a redirect, but a reason to keep the qdisc.
    let prio = redirect.priority.to_string();
    ns.exec(&[
        "tc", "filter", "add", "dev", "fa", "ingress", "chain", "5", "protocol", "all", "prio", &prio, "u32", "match",
        "u8", "0", "0", "flowid", "1:1",
    ]);
    let again = inside(&ns, |r| tc::ingress_filters(r, fa, "fa"));
    assert_eq!((again.chains.len(), again.redirects.len()), (2, 1), "{again:?}");
    assert!(again.other_tc_chains && again.others_than(&[ours, ip]), "{again:?}");
}

#[test]
fn addresses_routes_and_rules_are_read_and_routes_changed() {
    let Some(ns) = veth_ns(
        "addresses_routes_and_rules_are_read_and_routes_changed",
        "nl-routes",
        ("rta", "rtb"),
        "198.18.210.2/24",
    ) else {
        return;
    };
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
    // The kernel's word for a route that is not there is ESRCH: not found, as DEL wants it.
    assert_eq!(del_again.errno(), Some(nix::errno::Errno::ESRCH as i32), "{del_again}");
    assert!(del_again.is_not_found(), "{del_again}");
}

#[test]
fn the_kernels_explanation_of_a_refusal_is_in_the_error() {
    let Some(ns) =
        veth_ns("the_kernels_explanation_of_a_refusal_is_in_the_error", "nl-extack", ("xa", "xb"), "198.18.213.2/24")
    else {
        return;
    };
    let (unreachable, again) = inside(&ns, |r| {
        let xa = links::links(r)?.into_iter().find(|l| l.name == "xa").unwrap();
        // A gateway off every subnet of the link: the kernel's fib_check_nh says why it
        // refuses (ENETUNREACH alone would not).
        let off_link = Route::unicast(net("0.0.0.0/0"), Some("198.18.250.1".parse().unwrap()), xa.index);
        let unreachable = routes::add(r, &off_link, "xa").unwrap_err();
        // A second ingress qdisc, asked for exclusively: EEXIST, and tc's own words.
        assert!(tc::add_ingress(r, xa.index, "xa")?);
        assert!(!tc::add_ingress(r, xa.index, "xa")?);
        Ok((unreachable, tc::delete_ingress(r, xa.index, "xa").and_then(|()| tc::delete_ingress(r, xa.index, "xa"))))
    });
    assert_eq!(unreachable.ext_ack(), Some("Nexthop has invalid gateway"), "{unreachable}");
    let text = unreachable.to_string();
    assert!(text.starts_with("add route default via 198.18.250.1 on xa: "), "{text}");
    assert!(text.ends_with(": Nexthop has invalid gateway"), "{text}");
    // Deleting a qdisc that is gone: the kernel's errno and its explanation ("Invalid handle").
    let gone = again.unwrap_err();
    assert!(gone.ext_ack().is_some_and(|m| !m.is_empty()), "{gone}");
    assert!(gone.to_string().contains(gone.ext_ack().unwrap()), "{gone}");
}

#[test]
fn an_alias_of_max_alias_bytes_is_kept_and_a_longer_one_refused_by_name() {
    let Some(ns) = veth_ns(
        "an_alias_of_max_alias_bytes_is_kept_and_a_longer_one_refused_by_name",
        "nl-alias",
        ("al0", "al1"),
        "198.18.214.2/24",
    ) else {
        return;
    };
    // The link's alias after setting it, or the refusal.
    let set_alias = |alias: &str| {
        inside(&ns, |r| {
            let al0 = links::links(r)?.into_iter().find(|l| l.name == "al0").unwrap();
            let change = LinkChange { alias: Some(alias), ..LinkChange::default() };
            let set = links::set(r, al0.index, "al0", &change);
            Ok(set.and_then(|()| links::links(r)).map(|l| l.into_iter().find(|l| l.name == "al0").unwrap().alias))
        })
    };
    // IFALIASZ − 2 and IFALIASZ − 1 bytes: kept as they are.
    for len in [MAX_ALIAS - 1, MAX_ALIAS] {
        let alias: String = (0..len).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        assert_eq!(set_alias(&alias).map_err(|e| format!("{len}: {e}")).unwrap(), alias, "{len} bytes");
    }
    // One more: refused before the kernel sees it, naming the link and the limit.
    let e = set_alias(&"a".repeat(MAX_ALIAS + 1)).unwrap_err();
    assert!(matches!(e, NetlinkError::Refused(..)), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("set link al0") && text.contains("256 bytes") && text.contains("255"), "{text}");
    // An empty alias removes it.
    assert_eq!(set_alias("").unwrap(), "");
}
