//! A route of the result: in its table, or in one a policy rule or VRF selects for the
//! interface it leaves by, with the 1.1 fields it gives.

use super::{Finding, Item, RouteChecks};
use crate::kernel::{self, Snapshot};
use crate::policy::{self, table_name};
use cni_types::result::Route;

/// The main routing table.
pub const MAIN_TABLE: u32 = 254;

/// `198.19.0.0/16 via 198.18.0.1` as the result states it.
pub(super) fn route_label(r: &Route) -> String {
    match r.gw {
        Some(gw) => format!("route {} via {gw}", r.dst),
        None => format!("route {}", r.dst),
    }
}

pub(super) fn kernel_label(r: &kernel::Route, snap: &Snapshot) -> String {
    let mut s = r.dst.to_string();
    if let Some(gw) = r.gw {
        s.push_str(&format!(" via {gw}"));
    }
    if let Some(oif) = r.oif {
        s.push_str(&format!(" dev {}", snap.link_name(oif)));
    }
    s.push_str(&format!(" table {}", table_name(r.table)));
    if r.priority != 0 {
        s.push_str(&format!(" metric {}", r.priority));
    }
    if !kernel::is_unicast(r.kind) {
        s.push_str(&format!(" type {}", r.kind));
    }
    s
}

pub(super) fn check_route(snap: &Snapshot, want: &Route, mode: RouteChecks) -> Item {
    let dst = want.dst.network();
    let full = mode == RouteChecks::Full;
    let table = match want.table {
        Some(t) if full => u32::try_from(t).unwrap_or(u32::MAX),
        _ => MAIN_TABLE,
    };
    let mut claim = route_label(want);
    if full && want.table.is_some() {
        claim.push_str(&format!(" table {}", table_name(table)));
    }
    // A route without a table may also live in a table a policy rule or a VRF selects for the
    // interface it leaves by (sbr, vrf); upstream's rules read main only.
    let reach = if full && want.table.is_none() { policy::reach(snap, dst) } else { Vec::new() };
    let in_place =
        |r: &kernel::Route| r.table == table || reach.iter().any(|x| x.table == r.table && Some(x.link.index) == r.oif);
    let same_dst: Vec<&kernel::Route> = snap.routes.iter().filter(|r| r.dst == dst).collect();
    // Upstream ignores the gateway of default routes (Q18); full checks compare it.
    let gw_matters = full || !dst.is_default();
    let candidates: Vec<&&kernel::Route> =
        same_dst.iter().filter(|r| in_place(r) && (!gw_matters || want.gw.is_none() || r.gw == want.gw)).collect();
    if candidates.is_empty() {
        let has: Vec<String> = same_dst
            .iter()
            .map(|r| {
                let mut label = kernel_label(r, snap);
                if full && want.table.is_none() && !in_place(r) {
                    label.push_str(&match r.oif {
                        Some(i) => format!(" [no policy rule or VRF selects it for {}'s addresses]", snap.link_name(i)),
                        None => " [no interface: only table main counts]".to_string(),
                    });
                }
                label
            })
            .collect();
        let looked = if reach.is_empty() { format!("table {}", table_name(table)) } else { policy::places(&reach) };
        let why = format!(
            "missing from {looked} (has: {})",
            if has.is_empty() { "no route to this destination".to_string() } else { has.join(", ") }
        );
        return Item::new("", claim, Finding::Mismatch(why));
    }
    if !full {
        return Item::new("", claim, Finding::Ok);
    }
    let differences = |r: &kernel::Route| {
        let mut d = Vec::new();
        if want.priority > 0 && i64::from(r.priority) != want.priority {
            d.push(format!("priority {} expected, has {}", want.priority, r.priority));
        }
        if let Some(scope) = want.scope {
            if i64::from(r.scope) != scope {
                d.push(format!("scope {scope} expected, has {}", r.scope));
            }
        }
        if want.mtu > 0 && i64::from(r.mtu) != want.mtu {
            d.push(format!("mtu {} expected, has {}", want.mtu, r.mtu));
        }
        d
    };
    let mut first = None;
    for c in &candidates {
        let d = differences(c);
        if d.is_empty() {
            return Item::new("", claim, Finding::Ok);
        }
        first.get_or_insert(d);
    }
    let why = first.unwrap_or_default().join(", ");
    Item::new("", claim, Finding::Mismatch(format!("differs: {why}")))
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::{Options, RouteChecks};
    use crate::kernel::{self, Link, Snapshot};
    use serde_json::json;

    #[test]
    fn default_route_gateways_are_compared_unless_upstream() {
        let r = result(good());
        let mut s = pod();
        s.routes[1].gw = Some("198.18.0.254".parse().unwrap());
        assert_eq!(bad(&r, &s, FULL).len(), 1);
        let upstream = Options { check_host: true, routes: RouteChecks::Upstream };
        // Upstream: the default route is matched on dst only, but only the main table is read.
        assert_eq!(
            bad(&r, &s, upstream),
            ["route 198.19.0.0/16 via 198.19.1.1 missing from table main (has: 198.19.0.0/16 via 198.19.1.1 dev net1 table 1000)"]
        );
    }

    #[test]
    fn route_attributes_are_compared_when_given() {
        let mut v = good();
        v["routes"] = json!([{"dst": "0.0.0.0/0", "gw": "198.18.0.1", "priority": 100, "scope": 0, "mtu": 1400}]);
        let r = result(v);
        assert_eq!(
            bad(&r, &pod(), FULL),
            ["route 0.0.0.0/0 via 198.18.0.1 differs: priority 100 expected, has 0, mtu 1400 expected, has 0"]
        );
        let mut s = pod();
        s.routes[1].priority = 100;
        s.routes[1].mtu = 1400;
        assert!(bad(&r, &s, FULL).is_empty());
    }

    /// sbr's work on eth0: its routes moved from main to table 100, `from <eth0's IP> lookup 100`.
    fn sbr(s: &mut Snapshot) {
        for r in s.routes.iter_mut().filter(|r| r.oif == Some(2) && r.dst.is_ipv4()) {
            r.table = 100;
        }
        s.rules.push(kernel::Rule {
            priority: 32765,
            ipv4: true,
            src: Some(net("198.18.0.5/32")),
            dst: None,
            table: Some(100),
            invert: false,
            iif: None,
            oif: None,
            l3mdev: false,
            narrowed: false,
        });
    }

    #[test]
    fn routes_in_a_table_a_policy_rule_selects_for_their_interface_pass() {
        let r = result(good());
        let mut s = pod();
        sbr(&mut s);
        assert!(bad(&r, &s, FULL).is_empty(), "{:?}", bad(&r, &s, FULL));
        // Upstream's rules read main only.
        let upstream = Options { check_host: true, routes: RouteChecks::Upstream };
        assert_eq!(
            bad(&r, &s, upstream)[0],
            "route 0.0.0.0/0 via 198.18.0.1 missing from table main (has: 0.0.0.0/0 via 198.18.0.1 dev eth0 table 100)"
        );
        // Gone from every place it may be: each place named.
        s.routes.retain(|x| x.dst != net("0.0.0.0/0"));
        assert_eq!(
            bad(&r, &s, FULL),
            ["route 0.0.0.0/0 via 198.18.0.1 missing from table main and table 100 (selected for eth0 by rule 32765 from 198.18.0.5/32) (has: no route to this destination)"]
        );
    }

    #[test]
    fn a_tampered_rule_is_named() {
        let r = result(good());
        // The rule now selects table 100 for another address: eth0's routes there are unreachable.
        let mut s = pod();
        sbr(&mut s);
        s.rules[0].src = Some(net("198.18.0.9/32"));
        assert_eq!(
            bad(&r, &s, FULL),
            ["route 0.0.0.0/0 via 198.18.0.1 missing from table main (has: 0.0.0.0/0 via 198.18.0.1 dev eth0 table 100 [no policy rule or VRF selects it for eth0's addresses])"]
        );
        // The rule points at another table.
        let mut s = pod();
        sbr(&mut s);
        s.rules[0].table = Some(101);
        assert_eq!(
            bad(&r, &s, FULL),
            ["route 0.0.0.0/0 via 198.18.0.1 missing from table main and table 101 (selected for eth0 by rule 32765 from 198.18.0.5/32) (has: 0.0.0.0/0 via 198.18.0.1 dev eth0 table 100 [no policy rule or VRF selects it for eth0's addresses])"]
        );
        // A route of net1 in eth0's table does not count for net1.
        let mut s = pod();
        sbr(&mut s);
        s.routes.push(route(100, "198.19.7.0/24", Some("198.19.1.1"), 3));
        let mut v = good();
        v["routes"] = json!([{"dst": "198.19.7.0/24", "gw": "198.19.1.1"}]);
        assert_eq!(
            bad(&result(v), &s, FULL),
            ["route 198.19.7.0/24 via 198.19.1.1 missing from table main and table 100 (selected for eth0 by rule 32765 from 198.18.0.5/32) (has: 198.19.7.0/24 via 198.19.1.1 dev net1 table 100 [no policy rule or VRF selects it for net1's addresses])"]
        );
    }

    #[test]
    fn an_explicit_table_is_the_only_place_looked() {
        let mut v = good();
        v["routes"] = json!([{"dst": "0.0.0.0/0", "gw": "198.18.0.1", "table": 100}]);
        let r = result(v);
        let mut s = pod();
        assert_eq!(
            bad(&r, &s, FULL),
            ["route 0.0.0.0/0 via 198.18.0.1 table 100 missing from table 100 (has: 0.0.0.0/0 via 198.18.0.1 dev eth0 table main)"]
        );
        sbr(&mut s);
        assert!(bad(&r, &s, FULL).is_empty());
        // Even without the rule: the result says where the route is, not how traffic gets there.
        s.rules.clear();
        assert!(bad(&r, &s, FULL).is_empty());
    }

    #[test]
    fn routes_in_the_vrf_table_of_their_interface_pass() {
        let r = result(good());
        let mut s = pod();
        s.links.push(Link { vrf_table: Some(10), ..link(9, "blue", &[], 65575) });
        s.links[1].master = Some(9);
        for x in s.routes.iter_mut().filter(|x| x.oif == Some(2)) {
            x.table = 10;
        }
        assert!(bad(&r, &s, FULL).is_empty(), "{:?}", bad(&r, &s, FULL));
        s.links[1].master = None;
        assert_eq!(bad(&r, &s, FULL).len(), 2, "{:?}", bad(&r, &s, FULL));
    }
}
