//! The comparison: every claim of a result against snapshots of the kernel. Pure — no I/O —
//! so each rule is unit-tested with made-up snapshots.
//!
//! Improves on upstream's CHECK helpers (containernetworking/plugins `pkg/ip/utils.go`: `ValidateExpectedInterfaceIPs`,
//! `ValidateExpectedRoute`): each IP is looked for on the interface
//! its `interface` index names (not always `CNI_IFNAME`), MACs are compared as bytes, interface
//! MTUs and the 1.1 route fields are compared, and routes are looked up in their own table.

use crate::kernel::{self, Snapshot};
use crate::policy::{self, table_name};
use cni_types::ip::{IpNet, Mac};
use cni_types::result::{Interface, Route};
use std::fmt;
use std::net::IpAddr;

/// The main routing table.
pub const MAIN_TABLE: u32 = 254;

/// How routes are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteChecks {
    /// Everything the result says: `gw` also of default routes, `table`, `priority`, `scope`
    /// and `mtu` when given.
    Full,
    /// As upstream's `ValidateExpectedRoute`: main table only, `dst` and (except for default
    /// routes) `gw`; nothing else.
    Upstream,
}

/// What to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Check host-side interfaces (no `sandbox`) in the plugin's own namespace.
    pub check_host: bool,
    /// How routes are compared.
    pub routes: RouteChecks,
}

/// The finding of one checked claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The kernel agrees.
    Ok,
    /// Not decided yet: the kernel is still settling (an IPv6 address in DAD). Counts as ok once
    /// the settle time is up.
    Pending(String),
    /// The kernel disagrees; the text says what was found instead.
    Mismatch(String),
    /// Deliberately not checked, and why.
    Skipped(String),
}

/// One checked claim: its subject (`eth0`, `route 0.0.0.0/0 via …`), the claim, the finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// What the claim is about.
    pub subject: String,
    /// The claim in words (`address 198.18.1.5/24`).
    pub claim: String,
    /// What the kernel said.
    pub finding: Finding,
}

impl Item {
    fn new(subject: impl Into<String>, claim: impl Into<String>, finding: Finding) -> Item {
        Item { subject: subject.into(), claim: claim.into(), finding }
    }

    /// Whether this item fails the verification.
    pub fn is_mismatch(&self) -> bool {
        matches!(self.finding, Finding::Mismatch(_))
    }

    /// Whether this item is still settling.
    pub fn is_pending(&self) -> bool {
        matches!(self.finding, Finding::Pending(_))
    }
}

/// The line an operator reads: `net1: address 198.18.1.5/24 missing (has: 198.18.1.6/24)`.
impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.subject.is_empty() {
            write!(f, "{}: ", self.subject)?;
        }
        match &self.finding {
            Finding::Ok => write!(f, "{}", self.claim),
            Finding::Pending(why) | Finding::Mismatch(why) | Finding::Skipped(why) => write!(f, "{} {why}", self.claim),
        }
    }
}

/// Which namespace an interface of the result lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Container,
    Host,
    Elsewhere,
}

/// What is verified, and the kernel's views of it.
pub struct Subject<'a> {
    /// The result (1.1 model).
    pub result: &'a cni_types::CniResult,
    /// `CNI_IFNAME`: the interface IPs without a valid index belong to.
    pub ifname: &'a str,
    /// `CNI_NETNS`, as given (for messages).
    pub netns: &'a str,
    /// Whether a `sandbox` value names the container namespace (equal path, or the same
    /// namespace by device and inode).
    pub is_container: &'a dyn Fn(&str) -> bool,
    /// The container namespace.
    pub container: &'a Snapshot,
    /// The plugin's own namespace, when host-side interfaces are checked.
    pub host: Option<&'a Snapshot>,
}

impl Subject<'_> {
    fn place(&self, iface: &Interface) -> Place {
        if iface.sandbox.is_empty() {
            Place::Host
        } else if (self.is_container)(&iface.sandbox) {
            Place::Container
        } else {
            Place::Elsewhere
        }
    }

    fn view(&self, place: Place) -> Option<&Snapshot> {
        match place {
            Place::Container => Some(self.container),
            Place::Host => self.host,
            Place::Elsewhere => None,
        }
    }
}

/// Checks every claim of the result; returns one item per claim, in the result's order.
pub fn verify(s: &Subject<'_>, opts: Options) -> Vec<Item> {
    let mut items = Vec::new();
    let r = s.result;
    // The CNI_IFNAME interface must be in the result, in this namespace (P8.1 step 4).
    let own = r.interfaces.iter().any(|i| i.name == s.ifname && s.place(i) == Place::Container);
    items.push(Item::new(
        s.ifname,
        format!("listed in the result with sandbox {}", s.netns),
        if r.interfaces.is_empty() {
            // 0.1.0/0.2.0 and IPAM-style results have no interfaces: nothing is claimed.
            Finding::Skipped("not checked: the result lists no interfaces".into())
        } else if own {
            Finding::Ok
        } else {
            let sandboxes: Vec<&str> =
                r.interfaces.iter().filter(|i| i.name == s.ifname).map(|i| i.sandbox.as_str()).collect();
            Finding::Mismatch(if sandboxes.is_empty() {
                "missing: the result has no interface of this name".to_string()
            } else {
                format!("missing: the result lists it with sandbox {sandboxes:?}")
            })
        },
    ));
    for iface in &r.interfaces {
        items.extend(check_interface(s, iface, opts));
    }
    for ip in &r.ips {
        // An index that names no interface is a broken result, whatever the kernel has:
        // containerd and podman refuse it (go-cni, containers/common `CNIResultToStatus`).
        if let Some(i) = ip.interface.filter(|i| usize::try_from(*i).map_or(true, |i| i >= r.interfaces.len())) {
            let n = r.interfaces.len();
            let why = format!("index {i} names no interface of the result (it lists {n})");
            items.push(Item::new(format!("ip {}", ip.address), format!("interface {i}"), Finding::Mismatch(why)));
            continue;
        }
        let target = ip
            .interface
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| r.interfaces.get(i))
            .map_or((s.ifname, Place::Container), |i| (i.name.as_str(), s.place(i)));
        items.push(check_address(s, target, ip.address, opts));
    }
    for route in &r.routes {
        items.push(check_route(s.container, route, opts.routes));
    }
    for (tap, vm) in vm_pairs(r, s.is_container) {
        items.push(check_vm_pair(s, tap, vm));
    }
    items
}

/// The tap/VM-interface pairs of a result, by tc-redirect-tap's rule (`internal/cniutil.go`,
/// `VMTapPair`), which vmtap extends to every interface: a VM interface has a `sandbox` that
/// is not a namespace path (the container ID), and its tap is the interface of the same name
/// in the container namespace.
pub fn vm_pairs<'r>(
    r: &'r cni_types::CniResult,
    is_container: &dyn Fn(&str) -> bool,
) -> Vec<(&'r Interface, &'r Interface)> {
    r.interfaces
        .iter()
        .filter(|vm| !vm.sandbox.is_empty() && !vm.sandbox.starts_with('/') && !is_container(&vm.sandbox))
        .filter_map(|vm| {
            let tap =
                r.interfaces.iter().find(|t| t.name == vm.name && !t.sandbox.is_empty() && is_container(&t.sandbox))?;
            Some((tap, vm))
        })
        .collect()
}

/// A VM interface is reachable when its tap is joined both ways (ingress redirects) to the pod
/// interface that carries the VM interface's MAC — the frames the pod network sends to that
/// MAC reach the guest, and the guest's reach the pod network.
fn check_vm_pair(s: &Subject<'_>, tap: &Interface, vm: &Interface) -> Item {
    let subject = format!("{} (VM {})", tap.name, vm.sandbox);
    let claim = format!("joined by tc redirects to the pod interface with MAC {}", vm.mac);
    let snap = s.container;
    let Some(tap_link) = snap.link(&tap.name) else {
        return Item::new(
            subject,
            claim,
            Finding::Mismatch(format!("not checked further: tap {} is missing", tap.name)),
        );
    };
    let want = Mac::parse(&vm.mac).ok();
    let pod = snap.links.iter().find(|l| l.index != tap_link.index && want.as_ref() == Some(&Mac::from_bytes(&l.mac)));
    let Some(pod) = pod else {
        return Item::new(subject, claim, Finding::Mismatch(format!("no interface of {} has that MAC", s.netns)));
    };
    let has = |from: u32, to: u32| snap.redirects.contains(&(from, to));
    let missing: Vec<String> = [(pod, tap_link), (tap_link, pod)]
        .iter()
        .filter(|(from, to)| !has(from.index, to.index))
        .map(|(from, to)| format!("no redirect {} -> {}", from.name, to.name))
        .collect();
    if missing.is_empty() {
        Item::new(subject, format!("joined by tc redirects to {}", pod.name), Finding::Ok)
    } else {
        Item::new(
            subject,
            claim,
            Finding::Mismatch(format!("{} (ingress u32 match-all, mirred egress redirect)", missing.join(", "))),
        )
    }
}

fn subject_of(iface: &Interface, place: Place) -> String {
    match place {
        Place::Host => format!("{} (host)", iface.name),
        _ => iface.name.clone(),
    }
}

fn names(snap: &Snapshot) -> String {
    let n: Vec<&str> = snap.links.iter().map(|l| l.name.as_str()).collect();
    if n.is_empty() {
        "no links".into()
    } else {
        n.join(", ")
    }
}

fn check_interface(s: &Subject<'_>, iface: &Interface, opts: Options) -> Vec<Item> {
    let place = s.place(iface);
    let subject = subject_of(iface, place);
    let view = match place {
        Place::Elsewhere => {
            let why = format!("not checked: sandbox {:?} is not namespace {}", iface.sandbox, s.netns);
            return vec![Item::new(subject, "link", Finding::Skipped(why))];
        }
        Place::Host if !opts.check_host => {
            return vec![Item::new(subject, "link", Finding::Skipped("not checked: checkHost is false".into()))];
        }
        _ => s.view(place),
    };
    let Some(view) = view else {
        return vec![Item::new(subject, "link", Finding::Skipped("not checked: host namespace not read".into()))];
    };
    let Some(link) = view.link(&iface.name) else {
        let where_ = if place == Place::Host { "the plugin's namespace".to_string() } else { s.netns.to_string() };
        let why = format!("missing in {where_} (has: {})", names(view));
        return vec![Item::new(subject, "link", Finding::Mismatch(why))];
    };
    let mut items = vec![Item::new(subject.clone(), "link present", Finding::Ok)];
    if !iface.mac.is_empty() {
        let found = Mac::from_bytes(&link.mac);
        let finding = match Mac::parse(&iface.mac) {
            Ok(want) if want == found => Finding::Ok,
            Ok(_) => Finding::Mismatch(format!("expected, has {found}")),
            Err(e) => Finding::Mismatch(format!("cannot be compared: {e}")),
        };
        items.push(Item::new(subject.clone(), format!("mac {}", iface.mac), finding));
    }
    if iface.mtu > 0 {
        let finding = if i64::from(link.mtu) == iface.mtu {
            Finding::Ok
        } else {
            Finding::Mismatch(format!("expected, has {}", link.mtu))
        };
        items.push(Item::new(subject, format!("mtu {}", iface.mtu), finding));
    }
    items
}

fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
        IpAddr::V4(v4) => v4.is_link_local(),
    }
}

fn check_address(s: &Subject<'_>, (name, place): (&str, Place), want: IpNet, opts: Options) -> Item {
    let subject = if place == Place::Host { format!("{name} (host)") } else { name.to_string() };
    let claim = format!("address {want}");
    let view = match place {
        Place::Elsewhere => {
            return Item::new(
                subject,
                claim,
                Finding::Skipped("not checked: its interface is in another sandbox".into()),
            )
        }
        Place::Host if !opts.check_host => {
            return Item::new(subject, claim, Finding::Skipped("not checked: checkHost is false".into()))
        }
        _ => s.view(place),
    };
    let Some(view) = view else {
        return Item::new(subject, claim, Finding::Skipped("not checked: host namespace not read".into()));
    };
    let Some(link) = view.link(name) else {
        return Item::new(subject, claim, Finding::Mismatch(format!("missing: no link {name}")));
    };
    let on_link = |a: &&kernel::Addr| a.ifindex == link.index;
    let found = view.addrs.iter().filter(on_link).find(|a| a.net == want);
    match found {
        Some(a) if a.dadfailed => {
            Item::new(subject, claim, Finding::Mismatch("present but failed duplicate address detection".into()))
        }
        Some(a) if a.tentative => Item::new(subject, claim, Finding::Pending("still tentative (IPv6 DAD)".into())),
        Some(_) => Item::new(subject, claim, Finding::Ok),
        None => {
            let has: Vec<String> = view
                .addrs
                .iter()
                .filter(on_link)
                .filter(|a| {
                    a.net.is_ipv4() == want.is_ipv4() && (!is_link_local(a.net.addr()) || is_link_local(want.addr()))
                })
                .map(|a| a.net.to_string())
                .collect();
            let elsewhere: Vec<String> = view
                .addrs
                .iter()
                .filter(|a| a.net.addr() == want.addr() && a.ifindex != link.index)
                .map(|a| format!("{} on {}", a.net, view.link_name(a.ifindex)))
                .collect();
            let mut why =
                format!("missing (has: {})", if has.is_empty() { "none".to_string() } else { has.join(", ") });
            if !elsewhere.is_empty() {
                why.push_str(&format!("; found {}", elsewhere.join(", ")));
            }
            Item::new(subject, claim, Finding::Mismatch(why))
        }
    }
}

/// `198.19.0.0/16 via 198.18.0.1` as the result states it.
fn route_label(r: &Route) -> String {
    match r.gw {
        Some(gw) => format!("route {} via {gw}", r.dst),
        None => format!("route {}", r.dst),
    }
}

fn kernel_label(r: &kernel::Route, snap: &Snapshot) -> String {
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

fn check_route(snap: &Snapshot, want: &Route, mode: RouteChecks) -> Item {
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

/// The items that fail, as the lines of the CNI error's `details`.
pub fn mismatches(items: &[Item]) -> Vec<String> {
    items.iter().filter(|i| i.is_mismatch()).map(ToString::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Addr, Link};
    use cni_types::AnyResult;
    use serde_json::json;

    const NS: &str = "/run/netns/pod";

    fn net(s: &str) -> IpNet {
        IpNet::parse(s).unwrap()
    }

    fn route(table: u32, dst: &str, gw: Option<&str>, oif: u32) -> kernel::Route {
        kernel::Route { table, ..kernel::Route::unicast(net(dst).network(), gw.map(|g| g.parse().unwrap()), oif) }
    }

    fn pod() -> Snapshot {
        Snapshot {
            links: vec![
                Link {
                    index: 1,
                    name: "lo".into(),
                    mac: vec![0; 6],
                    mtu: 65536,
                    master: None,
                    vrf_table: None,
                    ..Link::default()
                },
                Link {
                    index: 2,
                    name: "eth0".into(),
                    mac: vec![0x0a, 0x58, 0, 0, 0, 1],
                    mtu: 1500,
                    master: None,
                    vrf_table: None,
                    ..Link::default()
                },
                Link {
                    index: 3,
                    name: "net1".into(),
                    mac: vec![0x0a, 0x58, 0, 0, 0, 2],
                    mtu: 9000,
                    master: None,
                    vrf_table: None,
                    ..Link::default()
                },
            ],
            addrs: vec![
                Addr { ifindex: 2, net: net("198.18.0.5/24"), tentative: false, dadfailed: false },
                Addr { ifindex: 2, net: net("2001:db8::5/64"), tentative: false, dadfailed: false },
                Addr { ifindex: 2, net: net("fe80::1/64"), tentative: false, dadfailed: false },
                Addr { ifindex: 3, net: net("198.19.1.5/24"), tentative: false, dadfailed: false },
            ],
            routes: vec![
                route(254, "198.18.0.0/24", None, 2),
                route(254, "0.0.0.0/0", Some("198.18.0.1"), 2),
                route(254, "::/0", Some("2001:db8::1"), 2),
                route(1000, "198.19.0.0/16", Some("198.19.1.1"), 3),
            ],
            rules: Vec::new(),
            redirects: Vec::new(),
        }
    }

    fn result(v: serde_json::Value) -> cni_types::CniResult {
        AnyResult::from_bytes(&serde_json::to_vec(&v).unwrap()).unwrap().to_latest()
    }

    fn good() -> serde_json::Value {
        json!({
            "cniVersion": "1.1.0",
            "interfaces": [
                {"name": "eth0", "sandbox": NS, "mac": "0A:58:00:00:00:01", "mtu": 1500},
                {"name": "net1", "sandbox": NS, "mac": "0a:58:00:00:00:02"}
            ],
            "ips": [
                {"address": "198.18.0.5/24", "interface": 0},
                {"address": "2001:db8::5/64"},
                {"address": "198.19.1.5/24", "interface": 1}
            ],
            "routes": [
                {"dst": "0.0.0.0/0", "gw": "198.18.0.1"},
                {"dst": "::/0", "gw": "2001:db8::1"},
                {"dst": "198.19.0.0/16", "gw": "198.19.1.1", "table": 1000}
            ]
        })
    }

    const FULL: Options = Options { check_host: true, routes: RouteChecks::Full };

    fn run(r: &cni_types::CniResult, snap: &Snapshot, opts: Options) -> Vec<Item> {
        let is_container = |s: &str| s == NS;
        verify(
            &Subject { result: r, ifname: "eth0", netns: NS, is_container: &is_container, container: snap, host: None },
            opts,
        )
    }

    fn bad(r: &cni_types::CniResult, snap: &Snapshot, opts: Options) -> Vec<String> {
        mismatches(&run(r, snap, opts))
    }

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
        let host = Snapshot {
            links: vec![Link {
                index: 7,
                name: "cni0".into(),
                mac: vec![2, 0, 0, 0, 0, 1],
                mtu: 1500,
                master: None,
                vrf_table: None,
                ..Link::default()
            }],
            ..Snapshot::default()
        };
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
        s.links.push(Link {
            index: 9,
            name: "blue".into(),
            mac: Vec::new(),
            mtu: 65575,
            master: None,
            vrf_table: Some(10),
            ..Link::default()
        });
        s.links[1].master = Some(9);
        for x in s.routes.iter_mut().filter(|x| x.oif == Some(2)) {
            x.table = 10;
        }
        assert!(bad(&r, &s, FULL).is_empty(), "{:?}", bad(&r, &s, FULL));
        s.links[1].master = None;
        assert_eq!(bad(&r, &s, FULL).len(), 2, "{:?}", bad(&r, &s, FULL));
    }

    #[test]
    fn legacy_results_and_garbage_indices_never_panic() {
        let r = result(json!({"cniVersion": "0.2.0", "ip4": {"ip": "198.18.0.5/24"}}));
        let items = run(&r, &pod(), FULL);
        // 0.2.0 results list no interfaces: the claim is not made, the IP is checked on CNI_IFNAME.
        assert!(mismatches(&items).is_empty(), "{:?}", mismatches(&items));
        let mut v = good();
        v["ips"] =
            json!([{"address": "198.18.0.5/24", "interface": -4}, {"address": "198.18.0.5/24", "interface": 99}]);
        let wrong = bad(&result(v), &pod(), FULL);
        assert_eq!(wrong.len(), 2, "{wrong:?}");
        assert!(wrong[1].contains("index 99 names no interface of the result"), "{wrong:?}");
    }

    #[test]
    fn a_vm_interface_is_checked_through_its_tap_and_redirects() {
        let mut v = good();
        let ifaces = v["interfaces"].as_array_mut().unwrap();
        ifaces.push(json!({"name": "tap1", "sandbox": NS, "mac": "be:00:00:00:00:01"}));
        ifaces.push(json!({"name": "tap1", "sandbox": "ctr-id", "mac": "0a:58:00:00:00:02"}));
        v["ips"].as_array_mut().unwrap().push(json!({"address": "198.19.1.5/24", "interface": 3}));
        let r = result(v);
        let mut snap = pod();
        snap.links.push(Link {
            index: 9,
            name: "tap1".into(),
            mac: vec![0xbe, 0, 0, 0, 0, 1],
            mtu: 9000,
            master: None,
            vrf_table: None,
            ..Link::default()
        });
        snap.redirects = vec![(3, 9), (9, 3)];
        let items = run(&r, &snap, FULL);
        assert!(bad(&r, &snap, FULL).is_empty(), "{:?}", bad(&r, &snap, FULL));
        assert!(items.iter().any(|i| i.to_string() == "tap1 (VM ctr-id): joined by tc redirects to net1"));
        // The VM interface itself and its IP copy are not looked for in the kernel.
        assert!(items.iter().any(|i| i.subject == "tap1" && matches!(i.finding, Finding::Skipped(_))));

        snap.redirects = vec![(3, 9)];
        assert_eq!(
            bad(&r, &snap, FULL),
            ["tap1 (VM ctr-id): joined by tc redirects to the pod interface with MAC 0a:58:00:00:00:02 no redirect tap1 -> net1 (ingress u32 match-all, mirred egress redirect)"]
        );
        snap.links.retain(|l| l.name != "net1");
        let got = bad(&r, &snap, FULL);
        assert!(got.iter().any(|l| l.ends_with("no interface of /run/netns/pod has that MAC")), "{got:?}");
    }
}
