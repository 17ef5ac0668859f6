//! Policy routing: the tables beside `main` where a route of a result may live.
//!
//! A result's routes carry no table (before 1.1.0, and mostly after), but the kernel looks a
//! packet up in whatever table the policy rules select for it. Two reference plugins put an
//! interface's routes elsewhere than `main`:
//!
//! - **sbr** (containernetworking/plugins `plugins/meta/sbr/main.go`, `doRoutes`) moves the
//!   routes of `CNI_IFNAME` to the first unused table from 100 and adds `from <each IP of that
//!   interface> lookup <table>`;
//! - **vrf** (`plugins/meta/vrf`) enslaves the interface to a VRF device whose table holds its
//!   routes, reached through the kernel's `l3mdev` rule.
//!
//! So a route found in table T, leaving by interface L, is where the result says it is when a
//! rule selects T for traffic from L's addresses, or when L's VRF owns T. Only rules that hold
//! for *all* such traffic count: a `lookup` action, not inverted, no `iif`, no fwmark, tos,
//! port, protocol or uid selector, an `oif` (if any) naming L, a `to` prefix (if any) covering
//! the route's destination, and a `from` prefix that is "all" or covers an address of L of the
//! route's family. Rule priorities are not weighed against each other: a rule that selects T
//! makes T a place the route may live, whatever rules come before it.

use crate::kernel::{Link, Rule, Snapshot};
use cni_types::ip::IpNet;

/// The main table, where every route may live without a rule.
const MAIN: u32 = 254;
/// The local table (addresses of the namespace): never where a result's route lives.
const LOCAL: u32 = 255;
/// The `default` table, which the kernel's own last rule (`32767: from all lookup default`)
/// selects for all traffic in every namespace: left out, or every message would name it. It is
/// empty unless an administrator fills it; no reference plugin puts a route there.
const DEFAULT: u32 = 253;

/// A table as `ip route` names it.
pub(crate) fn table_name(t: u32) -> String {
    match t {
        MAIN => "main".into(),
        LOCAL => "local".into(),
        DEFAULT => "default".into(),
        n => n.to_string(),
    }
}

/// One table beside `main` that traffic leaving by `link` is looked up in, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach<'a> {
    /// The table.
    pub table: u32,
    /// The interface whose traffic is looked up there.
    pub link: &'a Link,
    /// What selects it: `rule 32765 from 198.18.0.5/32`, `VRF blue`.
    pub via: String,
}

fn covers(prefix: &IpNet, net: IpNet) -> bool {
    prefix.is_ipv4() == net.is_ipv4() && prefix.prefix_len() <= net.prefix_len() && prefix.contains(net.addr())
}

/// Whether `rule` sends every packet from `link`'s addresses to `dst` to its table.
fn selects(snap: &Snapshot, rule: &Rule, link: &Link, dst: IpNet) -> bool {
    let unconditional = !rule.invert && !rule.l3mdev && !rule.narrowed && rule.iif.is_none();
    if !unconditional || rule.ipv4 != dst.is_ipv4() {
        return false;
    }
    if rule.oif.as_ref().is_some_and(|o| *o != link.name) || rule.dst.as_ref().is_some_and(|d| !covers(d, dst)) {
        return false;
    }
    match &rule.src {
        None => true,
        Some(src) => snap
            .addrs
            .iter()
            .any(|a| a.ifindex == link.index && a.net.is_ipv4() == src.is_ipv4() && src.contains(a.net.addr())),
    }
}

fn describe(rule: &Rule) -> String {
    let mut s =
        format!("rule {} from {}", rule.priority, rule.src.map_or_else(|| "all".to_string(), |n| n.to_string()));
    if let Some(d) = &rule.dst {
        s.push_str(&format!(" to {d}"));
    }
    if let Some(o) = &rule.oif {
        s.push_str(&format!(" oif {o}"));
    }
    s
}

/// Every table beside `main` (and `local`) where a route to `dst` may live, with the interface
/// whose traffic reaches it: selected by a policy rule for that interface's addresses, or the
/// table of its VRF.
pub fn reach(snap: &Snapshot, dst: IpNet) -> Vec<Reach<'_>> {
    let mut out: Vec<Reach<'_>> = Vec::new();
    for rule in &snap.rules {
        let Some(table) = rule.table.filter(|t| ![MAIN, LOCAL, DEFAULT].contains(t)) else { continue };
        for link in snap.links.iter().filter(|l| selects(snap, rule, l, dst)) {
            if !out.iter().any(|r| r.table == table && r.link.index == link.index) {
                out.push(Reach { table, link, via: describe(rule) });
            }
        }
    }
    for link in &snap.links {
        let vrf = link.master.and_then(|m| snap.links.iter().find(|l| l.index == m));
        if let Some((vrf, table)) = vrf.and_then(|v| Some((v, v.vrf_table?))) {
            if !out.iter().any(|r| r.table == table && r.link.index == link.index) {
                out.push(Reach { table, link, via: format!("VRF {}", vrf.name) });
            }
        }
    }
    out
}

/// Where a route was looked for, for messages: `table main and table 100 (selected for eth0 by
/// rule 32765 from 198.18.0.5/32)`.
pub fn places(reach: &[Reach<'_>]) -> String {
    let mut groups: Vec<(u32, &str, Vec<&str>)> = Vec::new();
    for r in reach {
        match groups.iter_mut().find(|(t, via, _)| *t == r.table && *via == r.via) {
            Some(g) => g.2.push(&r.link.name),
            None => groups.push((r.table, &r.via, vec![&r.link.name])),
        }
    }
    let mut s = format!("table {}", table_name(MAIN));
    for (table, via, links) in groups {
        s.push_str(&format!(" and table {} (selected for {} by {via})", table_name(table), links.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Addr;

    fn net(s: &str) -> IpNet {
        IpNet::parse(s).unwrap()
    }

    fn link(index: u32, name: &str) -> Link {
        Link { index, name: name.into(), mac: Vec::new(), mtu: 1500, master: None, vrf_table: None, ..Link::default() }
    }

    fn rule(priority: u32, src: Option<&str>, table: u32) -> Rule {
        Rule {
            priority,
            ipv4: true,
            src: src.map(|s| net(s).network()),
            dst: None,
            table: Some(table),
            invert: false,
            iif: None,
            oif: None,
            l3mdev: false,
            narrowed: false,
        }
    }

    /// What sbr leaves: eth0's address has a rule to table 100.
    fn sbr() -> Snapshot {
        Snapshot {
            links: vec![link(1, "lo"), link(2, "eth0"), link(3, "net1")],
            addrs: vec![
                Addr { ifindex: 2, net: net("198.18.0.5/24"), tentative: false, dadfailed: false },
                Addr { ifindex: 3, net: net("198.18.1.5/24"), tentative: false, dadfailed: false },
            ],
            routes: Vec::new(),
            rules: vec![
                rule(0, None, LOCAL),
                rule(32765, Some("198.18.0.5/32"), 100),
                rule(32766, None, MAIN),
                rule(32767, None, DEFAULT),
            ],
            redirects: Vec::new(),
        }
    }

    fn tables(snap: &Snapshot, dst: &str) -> Vec<(u32, String)> {
        reach(snap, net(dst)).iter().map(|r| (r.table, r.link.name.clone())).collect()
    }

    #[test]
    fn a_source_rule_selects_its_table_for_the_interface_with_that_address() {
        let s = sbr();
        assert_eq!(tables(&s, "0.0.0.0/0"), [(100, "eth0".to_string())]);
        assert_eq!(
            places(&reach(&s, net("0.0.0.0/0"))),
            "table main and table 100 (selected for eth0 by rule 32765 from 198.18.0.5/32)"
        );
        // IPv4 rules say nothing of IPv6 routes.
        assert!(tables(&s, "::/0").is_empty());
    }

    #[test]
    fn rules_that_hold_for_only_some_traffic_do_not_count() {
        for tamper in [
            |r: &mut Rule| r.src = Some(IpNet::parse("198.18.0.6/32").unwrap()),
            |r: &mut Rule| r.invert = true,
            |r: &mut Rule| r.narrowed = true,
            |r: &mut Rule| r.iif = Some("eth0".into()),
            |r: &mut Rule| r.oif = Some("net1".into()),
            |r: &mut Rule| r.dst = Some(IpNet::parse("198.19.0.0/16").unwrap()),
            |r: &mut Rule| r.table = None,
        ] {
            let mut s = sbr();
            tamper(&mut s.rules[1]);
            assert!(tables(&s, "0.0.0.0/0").is_empty(), "{:?}", s.rules[1]);
            assert_eq!(places(&reach(&s, net("0.0.0.0/0"))), "table main");
        }
        // A destination prefix covering the route, or an oif naming its interface, still counts.
        let mut s = sbr();
        s.rules[1].dst = Some(net("198.19.0.0/16"));
        s.rules[1].oif = Some("eth0".into());
        assert_eq!(tables(&s, "198.19.3.0/24"), [(100, "eth0".to_string())]);
    }

    #[test]
    fn from_all_selects_for_every_interface() {
        let mut s = sbr();
        s.rules[1].src = None;
        assert_eq!(
            places(&reach(&s, net("0.0.0.0/0"))),
            "table main and table 100 (selected for lo, eth0, net1 by rule 32765 from all)"
        );
    }

    #[test]
    fn a_vrf_owns_its_table_for_its_ports() {
        let mut s = sbr();
        s.rules.clear();
        s.links.push(Link { vrf_table: Some(10), ..link(4, "blue") });
        s.links[2].master = Some(4);
        assert_eq!(tables(&s, "0.0.0.0/0"), [(10, "net1".to_string())]);
        assert_eq!(tables(&s, "::/0"), [(10, "net1".to_string())]);
        assert_eq!(places(&reach(&s, net("::/0"))), "table main and table 10 (selected for net1 by VRF blue)");
        // A bridge master has no table.
        s.links[3].vrf_table = None;
        assert!(tables(&s, "0.0.0.0/0").is_empty());
    }
}
