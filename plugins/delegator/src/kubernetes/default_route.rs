//! A selection's NPWG `default-route` (§4.1.2.1.8): after every ADD, the pod's default routes
//! on the other attachments' interfaces are removed and a default route via each requested
//! gateway is added on the chosen attachment's — what Multus does in `pkg/netutils`
//! (`DeleteDefaultGW`, `SetDefaultGW`). The netlink is cni-netlink's; what is braid's is which
//! routes go: main-table default routes on the interfaces of this ADD's other delegates, and
//! none elsewhere.
//!
//! What was removed is recorded (in the sandbox's status file, [`super::status::Replaced`]):
//! when a hot-plug update removes or changes the network that took the default route, the
//! routes it replaced are put back ([`restore`]) on the interfaces that are still there —
//! otherwise the pod would be left with no default route at all (no Services, no DNS, no
//! egress), which Multus's dynamic-networks controller leaves too.

use cni_netlink::links;
use cni_netlink::routes::{self, Route, MAIN_TABLE};
use cni_netlink::{NetlinkError, Rtnl};
use cni_types::ip::IpNet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

/// A default route removed from another attachment's interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// Its gateway, if it had one.
    pub gateway: Option<IpAddr>,
    /// The interface it was on.
    pub ifname: String,
    /// Its destination (`0.0.0.0/0` or `::/0`): the family of a route without a gateway.
    pub dst: IpNet,
    /// Its metric.
    pub metric: u32,
}

/// Why the default routes could not be moved; every message names the namespace.
#[derive(Debug, thiserror::Error)]
pub enum DefaultRouteError {
    /// The interface to carry the default routes is not in the namespace.
    #[error("interface {name} is not in netns {path:?}", name = .1, path = .0.display().to_string())]
    NoInterface(PathBuf, String),
    /// A netlink exchange failed (what it was, and the kernel's answer).
    #[error("netns {path:?}: {e}", path = .0.display().to_string(), e = .1)]
    Netlink(PathBuf, #[source] NetlinkError),
}

impl From<DefaultRouteError> for cni_types::CniError {
    /// Code 999 (internal), as Go plugins report netlink failures.
    fn from(e: DefaultRouteError) -> cni_types::CniError {
        cni_types::CniError::new(cni_types::error::INTERNAL, e.to_string())
    }
}

/// Over `rtnl`, a socket of the pod namespace at `netns` (named in errors): deletes every main-table default unicast route whose output
/// interface is one of `others`, then adds a default route via each of `gateways` on `ifname`
/// (one that exists already is kept). Default routes on interfaces not named are left alone.
/// Returns the routes it deleted.
pub fn move_default_routes(
    rtnl: &mut Rtnl,
    netns: &Path,
    ifname: &str,
    others: &[String],
    gateways: &[IpAddr],
) -> Result<Vec<Removed>, DefaultRouteError> {
    let p = netns.to_path_buf();
    let nl = |e: NetlinkError| DefaultRouteError::Netlink(p.clone(), e);
    let all = links::links(rtnl).map_err(nl)?;
    let name_of = |index: u32| all.iter().find(|l| l.index == index).map(|l| l.name.clone()).unwrap_or_default();
    let oif = all
        .iter()
        .find(|l| l.name == ifname)
        .map(|l| l.index)
        .ok_or_else(|| DefaultRouteError::NoInterface(p.clone(), ifname.to_string()))?;
    let other_oifs: Vec<u32> = all.iter().filter(|l| others.contains(&l.name)).map(|l| l.index).collect();
    let mut removed = Vec::new();
    for r in routes::routes(rtnl).map_err(nl)? {
        let Some(on) = r.oif.filter(|o| *o != oif && other_oifs.contains(o)) else { continue };
        if !(r.dst.is_default() && r.table == MAIN_TABLE && routes::is_unicast(r.kind)) {
            continue;
        }
        let name = name_of(on);
        match routes::delete(rtnl, &r, &name) {
            Err(e) if !e.is_not_found() => return Err(nl(e)),
            _ => removed.push(Removed { gateway: r.gw, ifname: name, dst: r.dst, metric: r.priority }),
        }
    }
    for gw in gateways {
        let any: IpAddr = if gw.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { Ipv6Addr::UNSPECIFIED.into() };
        let Some(dst) = IpNet::new(any, 0) else { continue };
        match routes::add(rtnl, &Route::unicast(dst, Some(*gw), oif), ifname) {
            Err(e) if !e.is_exists() => {
                // The pod keeps the default routes it had: what was removed goes back.
                let _ = restore(rtnl, netns, &removed);
                return Err(nl(e));
            }
            _ => {}
        }
    }
    Ok(removed)
}

/// `RT_SCOPE_LINK` (linux/rtnetlink.h): a route without a gateway, as `ip route add default dev X`.
const SCOPE_LINK: u8 = 253;

/// Puts `routes` (removed by [`move_default_routes`]) back, each on its interface if that is
/// still in the namespace (one that exists already is kept); returns the ones put back.
pub fn restore(rtnl: &mut Rtnl, netns: &Path, routes: &[Removed]) -> Result<Vec<Removed>, DefaultRouteError> {
    let p = netns.to_path_buf();
    let nl = |e: NetlinkError| DefaultRouteError::Netlink(p.clone(), e);
    let all = links::links(rtnl).map_err(nl)?;
    let mut back = Vec::new();
    for r in routes {
        let Some(link) = all.iter().find(|l| l.name == r.ifname) else { continue };
        let mut route = Route::unicast(r.dst, r.gateway, link.index);
        route.priority = r.metric;
        if r.gateway.is_none() {
            route.scope = SCOPE_LINK;
        }
        match routes::add(rtnl, &route, &r.ifname) {
            Err(e) if !e.is_exists() => return Err(nl(e)),
            _ => back.push(r.clone()),
        }
    }
    Ok(back)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use braid_attach::sandbox::PodNetns;
    use cni_skel::netns::run_in;
    use cni_skel::testing::{require_root, TempNetns};

    /// The namespace's main-table default routes: (interface, gateway).
    fn defaults(ns: &TempNetns) -> Vec<(String, String)> {
        let mut now: Vec<(String, String)> = run_in(&ns.path(), || {
            let mut rtnl = Rtnl::open().unwrap();
            let all = links::links(&mut rtnl).unwrap();
            routes::routes(&mut rtnl)
                .unwrap()
                .into_iter()
                .filter(|r| r.dst.is_default() && r.table == MAIN_TABLE)
                .map(|r| {
                    let name = all.iter().find(|l| Some(l.index) == r.oif).map(|l| l.name.clone()).unwrap_or_default();
                    (name, r.gw.map(|g| g.to_string()).unwrap_or_default())
                })
                .collect()
        })
        .unwrap();
        now.sort();
        now
    }

    /// A namespace with veths rta, rtb and rtc, up, with x.2/24 of each of `subnets`.
    fn three_links(tag: &str, subnets: [&str; 3]) -> TempNetns {
        let ns = TempNetns::new(tag);
        for ((a, b), net) in [("rta", "rtap"), ("rtb", "rtbp"), ("rtc", "rtcp")].into_iter().zip(subnets) {
            ns.ip(&["link", "add", a, "type", "veth", "peer", "name", b]);
            ns.ip(&["link", "set", a, "up"]);
            ns.ip(&["link", "set", b, "up"]);
            ns.ip(&["addr", "add", &format!("{net}.2/24"), "dev", a]);
        }
        ns
    }

    #[test]
    fn default_routes_move_to_the_chosen_interface_and_others_stay() {
        if !require_root("default_routes_move_to_the_chosen_interface_and_others_stay") {
            return;
        }
        let ns = three_links("routes", ["198.18.200", "198.18.201", "198.18.202"]);
        ns.ip(&["-6", "addr", "add", "2001:db8:200::2/64", "dev", "rta", "nodad"]);
        ns.ip(&["route", "add", "default", "via", "198.18.200.1", "dev", "rta"]);
        ns.ip(&["-6", "route", "add", "default", "via", "2001:db8:200::1", "dev", "rta"]);
        // Not ours to touch: a default route with a higher metric on an interface not named.
        ns.ip(&["route", "add", "default", "via", "198.18.202.1", "dev", "rtc", "metric", "500"]);
        let gws = ["198.18.201.1".parse().unwrap()];
        let path = ns.path();
        let mut pod = PodNetns::new(&path.to_string_lossy());
        let rtnl = pod.rtnl().unwrap();
        let removed = move_default_routes(rtnl, &path, "rtb", &["rta".to_string()], &gws).unwrap();
        assert_eq!(removed.len(), 2, "{removed:?}");
        assert!(removed.iter().all(|r| r.ifname == "rta"), "{removed:?}");
        assert_eq!(
            defaults(&ns),
            [("rtb".to_string(), "198.18.201.1".to_string()), ("rtc".to_string(), "198.18.202.1".to_string())]
        );
        // Again: nothing to delete, the route exists already.
        assert!(move_default_routes(rtnl, &path, "rtb", &["rta".to_string()], &gws).unwrap().is_empty());
        // An unreachable gateway and an unknown interface are named.
        let e = move_default_routes(rtnl, &path, "rtb", &[], &["198.18.250.1".parse().unwrap()]).unwrap_err();
        assert!(e.to_string().contains("via 198.18.250.1 on rtb"), "{e}");
        // With the kernel's own words for it.
        assert!(e.to_string().ends_with(": Nexthop has invalid gateway"), "{e}");
        let e = move_default_routes(rtnl, &path, "nosuch", &[], &[]).unwrap_err();
        assert!(e.to_string().contains("interface nosuch is not in netns"), "{e}");
    }

    #[test]
    fn a_default_route_gone_before_its_deletion_is_not_an_error() {
        if !require_root("a_default_route_gone_before_its_deletion_is_not_an_error") {
            return;
        }
        let ns = three_links("routes-gone", ["198.18.203", "198.18.204", "198.18.205"]);
        // One IPv4 default route over two of the other attachments' interfaces: the dump
        // lists it once per hop, and the kernel deletes it whole with the first hop (its
        // fib_nh_match compares a deletion with the first next hop only) — so the second hop
        // is gone by the time it is deleted, and the kernel says ESRCH. The same as a route
        // that another process removes between the dump and the deletion.
        ns.ip(&[
            "route",
            "add",
            "default",
            "nexthop",
            "via",
            "198.18.203.1",
            "dev",
            "rta",
            "nexthop",
            "via",
            "198.18.204.1",
            "dev",
            "rtb",
        ]);
        let path = ns.path();
        let mut pod = PodNetns::new(&path.to_string_lossy());
        let rtnl = pod.rtnl().unwrap();
        let others = ["rta".to_string(), "rtb".to_string()];
        let removed = move_default_routes(rtnl, &path, "rtc", &others, &["198.18.205.1".parse().unwrap()]).unwrap();
        let mut from: Vec<&str> = removed.iter().map(|r| r.ifname.as_str()).collect();
        from.sort_unstable();
        assert_eq!(from, ["rta", "rtb"], "{removed:?}");
        assert_eq!(defaults(&ns), [("rtc".to_string(), "198.18.205.1".to_string())]);
    }
}
