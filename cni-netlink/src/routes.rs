//! The routes of a namespace (every table, both families), and adding or deleting one, as
//! netlink-packet-route's `RouteMessage`s.

use crate::{NetlinkError, Rtnl};
use cni_types::ip::IpNet;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteMetric, RouteProtocol, RouteScope,
    RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A route (one entry per gateway for multipath routes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The table, from `RTA_TABLE` (tables above 255), else the header's.
    pub table: u32,
    /// The destination network (`0.0.0.0/0` or `::/0` for default routes).
    pub dst: IpNet,
    /// The gateway, if any.
    pub gw: Option<IpAddr>,
    /// The output interface, if any.
    pub oif: Option<u32>,
    /// `RTA_PRIORITY` (the metric), 0 when absent.
    pub priority: u32,
    /// `rtm_scope`.
    pub scope: u8,
    /// `RTAX_MTU`, 0 when absent.
    pub mtu: u32,
    /// `rtm_type` (unicast, local, blackhole, …).
    pub kind: u8,
}

/// The main table (`RT_TABLE_MAIN`), where routes go that name no other.
pub const MAIN_TABLE: u32 = RouteHeader::RT_TABLE_MAIN as u32;

/// The `rtm_type` of ordinary routes; others (local, blackhole, …) are named in reports.
pub fn is_unicast(kind: u8) -> bool {
    kind == u8::from(RouteType::Unicast)
}

impl Route {
    /// A unicast route of the main table, scope universe, no metric: what `ip route add <dst>
    /// via <gw> dev <oif>` makes.
    pub fn unicast(dst: IpNet, gw: Option<IpAddr>, oif: u32) -> Route {
        Route {
            table: MAIN_TABLE,
            dst,
            gw,
            oif: Some(oif),
            priority: 0,
            scope: RouteScope::Universe.into(),
            mtu: 0,
            kind: RouteType::Unicast.into(),
        }
    }

    /// The routes an `RTM_NEWROUTE` reports: one per next hop, none for cached clones
    /// (`RTM_F_CLONED`) or families other than IPv4 and IPv6.
    pub fn from_message(m: &RouteMessage) -> Vec<Route> {
        let header = &m.header;
        if header.flags.contains(RouteFlags::Cloned) {
            return Vec::new();
        }
        let mut dst: IpAddr = match header.address_family {
            AddressFamily::Inet => Ipv4Addr::UNSPECIFIED.into(),
            AddressFamily::Inet6 => Ipv6Addr::UNSPECIFIED.into(),
            _ => return Vec::new(),
        };
        let (mut table, mut gw, mut oif, mut priority, mut mtu) = (u32::from(header.table), None, None, 0, 0);
        let mut hops = Vec::new();
        for a in &m.attributes {
            match a {
                RouteAttribute::Table(t) => table = *t,
                RouteAttribute::Destination(d) => dst = ip(d).unwrap_or(dst),
                RouteAttribute::Gateway(g) => gw = ip(g),
                RouteAttribute::Oif(o) => oif = Some(*o),
                RouteAttribute::Priority(p) => priority = *p,
                RouteAttribute::Metrics(metrics) => {
                    for metric in metrics {
                        if let RouteMetric::Mtu(m) = metric {
                            mtu = *m;
                        }
                    }
                }
                RouteAttribute::MultiPath(next_hops) => {
                    for hop in next_hops {
                        let gw = hop.attributes.iter().find_map(|a| match a {
                            RouteAttribute::Gateway(g) => ip(g),
                            _ => None,
                        });
                        hops.push((gw, hop.interface_index));
                    }
                }
                _ => {}
            }
        }
        if table == 0 {
            table = MAIN_TABLE;
        }
        let Some(net) = IpNet::new(dst, header.destination_prefix_length) else {
            return Vec::new();
        };
        let route = Route {
            table,
            dst: net.network(),
            gw,
            oif,
            priority,
            scope: header.scope.into(),
            mtu,
            kind: header.kind.into(),
        };
        if hops.is_empty() {
            return vec![route];
        }
        hops.into_iter().map(|(gw, oif)| Route { gw, oif: Some(oif), ..route.clone() }).collect()
    }

    /// The `RTM_NEWROUTE` (`add`) or `RTM_DELROUTE` message for this route, as iproute2's
    /// `ip route` builds it: a table above 255 goes in `RTA_TABLE`; a deletion leaves protocol
    /// and type unspecified and asks for scope `nowhere`, so that the kernel matches on
    /// destination, table, gateway, interface and metric only.
    fn message(&self, add: bool) -> RouteMessage {
        let (protocol, scope, kind) = if add {
            (RouteProtocol::Boot, self.scope.into(), self.kind.into())
        } else {
            (RouteProtocol::Unspec, RouteScope::NoWhere, RouteType::Unspec)
        };
        let mut m = RouteMessage::default();
        m.header = RouteHeader {
            address_family: if self.dst.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 },
            destination_prefix_length: self.dst.prefix_len(),
            table: u8::try_from(self.table).unwrap_or(RouteHeader::RT_TABLE_UNSPEC),
            protocol,
            scope,
            kind,
            ..RouteHeader::default()
        };
        if self.dst.prefix_len() > 0 {
            m.attributes.push(RouteAttribute::Destination(self.dst.addr().into()));
        }
        if let Some(gw) = self.gw {
            m.attributes.push(RouteAttribute::Gateway(gw.into()));
        }
        if let Some(oif) = self.oif {
            m.attributes.push(RouteAttribute::Oif(oif));
        }
        if self.priority != 0 {
            m.attributes.push(RouteAttribute::Priority(self.priority));
        }
        if self.table > 255 {
            m.attributes.push(RouteAttribute::Table(self.table));
        }
        if self.mtu != 0 {
            m.attributes.push(RouteAttribute::Metrics(vec![RouteMetric::Mtu(self.mtu)]));
        }
        m
    }

    /// `default via 198.18.0.1 on eth0`, for messages.
    fn describe(&self, ifname: &str) -> String {
        let dst = if self.dst.is_default() { "default".to_string() } else { self.dst.to_string() };
        let via = self.gw.map_or_else(String::new, |g| format!(" via {g}"));
        format!("{dst}{via} on {ifname}")
    }
}

/// An IPv4 or IPv6 address of a route (MPLS labels and others: none).
fn ip(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some((*v4).into()),
        RouteAddress::Inet6(v6) => Some((*v6).into()),
        _ => None,
    }
}

/// Every route of the namespace, IPv4 then IPv6, in every table (cached clones left out).
pub fn routes(rtnl: &mut Rtnl) -> Result<Vec<Route>, NetlinkError> {
    let mut out = Vec::new();
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        let request = RouteHeader { address_family: family, ..RouteHeader::default() };
        let per_message =
            rtnl.dump("dump routes", RouteNetlinkMessage::GetRoute, &request, |m| Some(Route::from_message(&m)))?;
        out.extend(per_message.into_iter().flatten());
    }
    Ok(out)
}

/// Adds `route` (`ip route add`; `NLM_F_EXCL`: one that exists already is the kernel's
/// `EEXIST`, see [`NetlinkError::is_exists`]). `ifname` names its interface in messages.
pub fn add(rtnl: &mut Rtnl, route: &Route, ifname: &str) -> Result<(), NetlinkError> {
    let what = format!("add route {}", route.describe(ifname));
    rtnl.request(&what, RouteNetlinkMessage::NewRoute, route.message(true), NLM_F_CREATE | NLM_F_EXCL)
}

/// Deletes `route` (`ip route del`): the kernel removes the route that matches its
/// destination, table, gateway, interface and metric; none left is its `ESRCH`, see
/// [`NetlinkError::is_not_found`]. `ifname` names its interface in messages.
pub fn delete(rtnl: &mut Rtnl, route: &Route, ifname: &str) -> Result<(), NetlinkError> {
    let what = format!("delete route {}", route.describe(ifname));
    rtnl.request(&what, RouteNetlinkMessage::DelRoute, route.message(false), 0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use netlink_packet_route::route::RouteNextHop;

    fn net(s: &str) -> IpNet {
        IpNet::parse(s).unwrap()
    }

    fn default_via(gw: &str, oif: u32) -> Route {
        let gw: IpAddr = gw.parse().unwrap();
        Route::unicast(net(if gw.is_ipv4() { "0.0.0.0/0" } else { "::/0" }), Some(gw), oif)
    }

    #[test]
    fn routes_are_read_from_their_messages() {
        let mut m = RouteMessage::default();
        m.header.address_family = AddressFamily::Inet;
        m.header.destination_prefix_length = 24;
        m.header.table = 0;
        m.header.kind = RouteType::Unicast;
        m.header.scope = RouteScope::Link;
        m.attributes = vec![
            RouteAttribute::Table(1000),
            RouteAttribute::Destination(RouteAddress::Inet("198.18.5.0".parse().unwrap())),
            RouteAttribute::Gateway(RouteAddress::Inet("198.18.0.1".parse().unwrap())),
            RouteAttribute::Oif(3),
            RouteAttribute::Priority(100),
            RouteAttribute::Metrics(vec![RouteMetric::Mtu(1400)]),
        ];
        let r = &Route::from_message(&m)[0];
        let want = Route {
            table: 1000,
            dst: net("198.18.5.0/24"),
            gw: Some("198.18.0.1".parse().unwrap()),
            oif: Some(3),
            priority: 100,
            scope: RouteScope::Link.into(),
            mtu: 1400,
            kind: RouteType::Unicast.into(),
        };
        assert_eq!(r, &want);

        // Multipath: one route per hop, each with its gateway and interface.
        let hop = |gw: &str, oif: u32| {
            let mut h = RouteNextHop::default();
            h.interface_index = oif;
            h.attributes = vec![RouteAttribute::Gateway(RouteAddress::Inet6(gw.parse().unwrap()))];
            h
        };
        let mut m = RouteMessage::default();
        m.header.address_family = AddressFamily::Inet6;
        m.header.table = RouteHeader::RT_TABLE_MAIN;
        m.header.kind = RouteType::Unicast;
        m.attributes = vec![RouteAttribute::MultiPath(vec![hop("2001:db8::1", 2), hop("2001:db8::2", 3)])];
        let rs = Route::from_message(&m);
        let gws: Vec<(String, Option<u32>)> = rs.iter().map(|r| (r.gw.unwrap().to_string(), r.oif)).collect();
        assert_eq!(gws, [("2001:db8::1".to_string(), Some(2)), ("2001:db8::2".to_string(), Some(3))]);
        assert!(rs.iter().all(|r| r.dst.is_default() && r.table == MAIN_TABLE && r.dst == net("::/0")));

        // Cached clones and other families are left out.
        m.header.flags = RouteFlags::Cloned;
        assert!(Route::from_message(&m).is_empty());
        m.header.flags = RouteFlags::empty();
        m.header.address_family = AddressFamily::Mpls;
        assert!(Route::from_message(&m).is_empty());
    }

    #[test]
    fn what_add_and_delete_send_is_what_ip_route_sends() {
        let r = Route { table: 1000, priority: 7, mtu: 1400, ..default_via("198.18.0.1", 4) };
        let theirs = r.message(true);
        assert_eq!(Route::from_message(&theirs), [r]);
        assert_eq!(theirs.header.protocol, RouteProtocol::Boot);
        assert_eq!(theirs.header.table, RouteHeader::RT_TABLE_UNSPEC);
        assert!(theirs.attributes.contains(&RouteAttribute::Table(1000)));
        assert!(theirs.attributes.contains(&RouteAttribute::Metrics(vec![RouteMetric::Mtu(1400)])));
        // A deletion: scope nowhere, protocol and type unspecified, main table in the header.
        let d = default_via("2001:db8::1", 2);
        let theirs = d.message(false);
        assert_eq!(theirs.header.scope, RouteScope::NoWhere);
        assert_eq!((theirs.header.protocol, theirs.header.kind), (RouteProtocol::Unspec, RouteType::Unspec));
        assert_eq!(theirs.header.table, RouteHeader::RT_TABLE_MAIN);
        assert_eq!(
            theirs.attributes,
            [RouteAttribute::Gateway(RouteAddress::Inet6("2001:db8::1".parse().unwrap())), RouteAttribute::Oif(2)]
        );
        assert_eq!(d.describe("net1"), "default via 2001:db8::1 on net1");
    }
}
