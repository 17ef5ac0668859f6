//! The routes of a namespace (every table, both families), and adding or deleting one.
//!
//! As for links, a route is read from netlink-packet-route's `RouteHeader` and the attributes
//! this crate reports, walked with netlink-packet-core's `NlasIterator` and decoded with its
//! parsers, and written as a `RouteHeader` with `DefaultNla`s: netlink-packet-route's
//! `RouteMessage` codec (every encapsulation, MPLS, multicast statistics) would add 60 KB to a
//! plugin that moves a default route (measured on the delegator). Attribute numbers are those of
//! `linux/rtnetlink.h`.

use crate::socket::Body;
use crate::{rtm, NetlinkError, Rtnl};
use cni_types::ip::IpNet;
use netlink_packet_core::{
    parse_ip, parse_u32, DecodeError, DefaultNla, Emitable, NlaBuffer, NlasIterator, NLM_F_CREATE, NLM_F_EXCL,
};
use netlink_packet_route::route::{RouteFlags, RouteHeader, RouteProtocol, RouteScope, RouteType};
use netlink_packet_route::AddressFamily;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_METRICS: u16 = 8;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
/// In `RTA_METRICS`.
const RTAX_MTU: u16 = 2;
/// `sizeof(int)`: the interface index that opens a `struct rtnexthop` after its length, flags
/// and hops.
const RTNH_IFINDEX: usize = 4;

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
    /// Decodes the body of an `RTM_NEWROUTE`: one route per next hop, none for cached clones
    /// (`RTM_F_CLONED`) or families other than IPv4 and IPv6.
    pub fn decode(body: &[u8]) -> Result<Vec<Route>, DecodeError> {
        let header = RouteHeader::parse(body)?;
        if header.flags.contains(RouteFlags::Cloned) {
            return Ok(Vec::new());
        }
        let mut dst: IpAddr = match header.address_family {
            AddressFamily::Inet => Ipv4Addr::UNSPECIFIED.into(),
            AddressFamily::Inet6 => Ipv6Addr::UNSPECIFIED.into(),
            _ => return Ok(Vec::new()),
        };
        let (mut table, mut gw, mut oif, mut priority, mut mtu) = (u32::from(header.table), None, None, 0, 0);
        let mut hops = Vec::new();
        for nla in NlasIterator::new(&body[header.buffer_len()..]) {
            let nla = nla?;
            let value = nla.value();
            match nla.kind() {
                RTA_TABLE => table = parse_u32(value)?,
                RTA_DST => dst = parse_ip(value)?,
                RTA_GATEWAY => gw = Some(parse_ip(value)?),
                RTA_OIF => oif = Some(parse_u32(value)?),
                RTA_PRIORITY => priority = parse_u32(value)?,
                RTA_METRICS => {
                    for metric in NlasIterator::new(value) {
                        let metric = metric?;
                        if metric.kind() == RTAX_MTU {
                            mtu = parse_u32(metric.value())?;
                        }
                    }
                }
                RTA_MULTIPATH => {
                    // A `struct rtnexthop` opens as an attribute does — its length (covering its
                    // own attributes), then two bytes (flags, hops) where an attribute has its
                    // type — and is aligned as one (RTNH_ALIGN is NLA_ALIGN), so core's iterator
                    // walks the hops; each one's value is its ifindex and its attributes.
                    for hop in NlasIterator::new(value) {
                        hops.push(next_hop(&hop?)?);
                    }
                }
                _ => {}
            }
        }
        if table == 0 {
            table = MAIN_TABLE;
        }
        let Some(net) = IpNet::new(dst, header.destination_prefix_length) else {
            return Ok(Vec::new());
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
            return Ok(vec![route]);
        }
        Ok(hops.into_iter().map(|(gw, oif)| Route { gw, oif: Some(oif), ..route.clone() }).collect())
    }

    /// The body of an `RTM_NEWROUTE` (`add`) or `RTM_DELROUTE` for this route, as iproute2's
    /// `ip route` builds it: a table above 255 goes in `RTA_TABLE`; a deletion leaves protocol
    /// and type unspecified and asks for scope `nowhere`, so that the kernel matches on
    /// destination, table, gateway, interface and metric only.
    fn message(&self, add: bool) -> Body<RouteHeader> {
        let (protocol, scope, kind) = if add {
            (RouteProtocol::Boot, self.scope.into(), self.kind.into())
        } else {
            (RouteProtocol::Unspec, RouteScope::NoWhere, RouteType::Unspec)
        };
        let header = RouteHeader {
            address_family: if self.dst.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 },
            destination_prefix_length: self.dst.prefix_len(),
            table: u8::try_from(self.table).unwrap_or(RouteHeader::RT_TABLE_UNSPEC),
            protocol,
            scope,
            kind,
            ..RouteHeader::default()
        };
        let mut attributes = Vec::new();
        if self.dst.prefix_len() > 0 {
            attributes.push(DefaultNla::new(RTA_DST, ip_bytes(self.dst.addr())));
        }
        if let Some(gw) = self.gw {
            attributes.push(DefaultNla::new(RTA_GATEWAY, ip_bytes(gw)));
        }
        if let Some(oif) = self.oif {
            attributes.push(DefaultNla::new(RTA_OIF, oif.to_ne_bytes().to_vec()));
        }
        if self.priority != 0 {
            attributes.push(DefaultNla::new(RTA_PRIORITY, self.priority.to_ne_bytes().to_vec()));
        }
        if self.table > 255 {
            attributes.push(DefaultNla::new(RTA_TABLE, self.table.to_ne_bytes().to_vec()));
        }
        if self.mtu != 0 {
            let metrics = [DefaultNla::new(RTAX_MTU, self.mtu.to_ne_bytes().to_vec())];
            let mut value = vec![0; metrics.as_slice().buffer_len()];
            metrics.as_slice().emit(&mut value);
            attributes.push(DefaultNla::new(RTA_METRICS, value));
        }
        Body { header, attributes }
    }

    /// `default via 198.18.0.1 on eth0`, for messages.
    fn describe(&self, ifname: &str) -> String {
        let dst = if self.dst.is_default() { "default".to_string() } else { self.dst.to_string() };
        let via = self.gw.map_or_else(String::new, |g| format!(" via {g}"));
        format!("{dst}{via} on {ifname}")
    }
}

/// A hop of `RTA_MULTIPATH`: its gateway and interface.
fn next_hop(hop: &NlaBuffer<&[u8]>) -> Result<(Option<IpAddr>, u32), DecodeError> {
    let value = hop.value();
    let oif = parse_u32(value.get(..RTNH_IFINDEX).unwrap_or_default())?;
    let mut gw = None;
    for nla in NlasIterator::new(&value[RTNH_IFINDEX.min(value.len())..]) {
        let nla = nla?;
        if nla.kind() == RTA_GATEWAY {
            gw = Some(parse_ip(nla.value())?);
        }
    }
    Ok((gw, oif))
}

fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// Every route of the namespace, IPv4 then IPv6, in every table (cached clones left out).
pub fn routes(rtnl: &mut Rtnl) -> Result<Vec<Route>, NetlinkError> {
    let mut out = Vec::new();
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        let header = RouteHeader { address_family: family, ..RouteHeader::default() };
        let per_message = rtnl.dump("dump routes", rtm::GETROUTE, &header, |body| Route::decode(body).map(Some))?;
        out.extend(per_message.into_iter().flatten());
    }
    Ok(out)
}

/// Adds `route` (`ip route add`; `NLM_F_EXCL`: one that exists already is the kernel's
/// `EEXIST`, see [`NetlinkError::is_exists`]). `ifname` names its interface in messages.
pub fn add(rtnl: &mut Rtnl, route: &Route, ifname: &str) -> Result<(), NetlinkError> {
    let what = format!("add route {}", route.describe(ifname));
    rtnl.request(&what, rtm::NEWROUTE, &route.message(true), NLM_F_CREATE | NLM_F_EXCL)
}

/// Deletes `route` (`ip route del`): the kernel removes the route that matches its
/// destination, table, gateway, interface and metric; none left is its `ESRCH`, see
/// [`NetlinkError::is_not_found`]. `ifname` names its interface in messages.
pub fn delete(rtnl: &mut Rtnl, route: &Route, ifname: &str) -> Result<(), NetlinkError> {
    let what = format!("delete route {}", route.describe(ifname));
    rtnl.request(&what, rtm::DELROUTE, &route.message(false), 0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::socket::emitted;
    use netlink_packet_core::Parseable;
    use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage, RouteMetric, RouteNextHop};

    fn net(s: &str) -> IpNet {
        IpNet::parse(s).unwrap()
    }

    fn default_via(gw: &str, oif: u32) -> Route {
        let gw: IpAddr = gw.parse().unwrap();
        Route {
            table: MAIN_TABLE,
            dst: net(if gw.is_ipv4() { "0.0.0.0/0" } else { "::/0" }),
            gw: Some(gw),
            oif: Some(oif),
            priority: 0,
            scope: 0,
            mtu: 0,
            kind: 1,
        }
    }

    #[test]
    fn routes_decode_as_netlink_packet_route_encodes_them() {
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
        let r = &Route::decode(&emitted(&m)).unwrap()[0];
        let want = Route {
            table: 1000,
            dst: net("198.18.5.0/24"),
            gw: Some("198.18.0.1".parse().unwrap()),
            oif: Some(3),
            priority: 100,
            scope: 253,
            mtu: 1400,
            kind: 1,
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
        let rs = Route::decode(&emitted(&m)).unwrap();
        let gws: Vec<(String, Option<u32>)> = rs.iter().map(|r| (r.gw.unwrap().to_string(), r.oif)).collect();
        assert_eq!(gws, [("2001:db8::1".to_string(), Some(2)), ("2001:db8::2".to_string(), Some(3))]);
        assert!(rs.iter().all(|r| r.dst.is_default() && r.table == MAIN_TABLE && r.dst == net("::/0")));

        // Cached clones and other families are left out.
        m.header.flags = RouteFlags::Cloned;
        assert!(Route::decode(&emitted(&m)).unwrap().is_empty());
        m.header.flags = RouteFlags::empty();
        m.header.address_family = AddressFamily::Mpls;
        assert!(Route::decode(&emitted(&m)).unwrap().is_empty());
    }

    #[test]
    fn what_add_and_delete_send_reads_back_as_netlink_packet_route_reads_it() {
        let r = Route { table: 1000, priority: 7, mtu: 1400, ..default_via("198.18.0.1", 4) };
        let add = emitted(&r.message(true));
        assert_eq!(Route::decode(&add).unwrap(), [r]);
        let theirs = RouteMessage::parse(&add).unwrap();
        assert_eq!(theirs.header.protocol, RouteProtocol::Boot);
        assert_eq!(theirs.header.table, RouteHeader::RT_TABLE_UNSPEC);
        assert!(theirs.attributes.contains(&RouteAttribute::Table(1000)));
        assert!(theirs.attributes.contains(&RouteAttribute::Metrics(vec![RouteMetric::Mtu(1400)])));
        // A deletion: scope nowhere, protocol and type unspecified, main table in the header.
        let d = default_via("2001:db8::1", 2);
        let theirs = RouteMessage::parse(&emitted(&d.message(false))).unwrap();
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
