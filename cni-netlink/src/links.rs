//! The links of a namespace, and the changes plugins make to them.
//!
//! A link is read from netlink-packet-route's `LinkHeader` and the few attributes this crate
//! reports, walked with netlink-packet-core's `NlasIterator` and decoded with its parsers;
//! changes are a `LinkHeader` with `DefaultNla`s. netlink-packet-route's full `LinkMessage`
//! codec knows every attribute of every link kind (bond, vxlan, …): 0.34 MB in each plugin
//! binary that reads its links (measured on the delegator), for the ten fields kept here.
//! Attribute numbers are those of `linux/if_link.h`.

use crate::socket::Body;
use crate::{rtm, NetlinkError, Rtnl};
use netlink_packet_core::{parse_string, parse_u32, DecodeError, DefaultNla, Emitable, NlasIterator};
use netlink_packet_route::link::{LinkFlags, LinkHeader};

const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_MASTER: u16 = 10;
const IFLA_LINKINFO: u16 = 18;
const IFLA_IFALIAS: u16 = 20;
const IFLA_GROUP: u16 = 27;
const IFLA_EXT_MASK: u16 = 29;
/// In `IFLA_LINKINFO`.
const IFLA_INFO_KIND: u16 = 1;
const IFLA_INFO_DATA: u16 = 2;
/// In the `IFLA_INFO_DATA` of a VRF device (`linux/if_link.h`, `IFLA_VRF_*`).
const IFLA_VRF_TABLE: u16 = 1;
/// `IFLA_EXT_MASK` flag: leave the per-link statistics out (a third of each message).
const RTEXT_FILTER_SKIP_STATS: u32 = 1 << 3;

/// A link as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Link {
    /// The ifindex.
    pub index: u32,
    /// The name.
    pub name: String,
    /// The hardware address (empty for links without one).
    pub mac: Vec<u8>,
    /// The MTU.
    pub mtu: u32,
    /// `IFLA_INFO_KIND` (`"tun"`, `"veth"`, `"macvlan"`, `"vrf"`, …), empty when the kernel
    /// gives none.
    pub kind: String,
    /// `IFLA_IFALIAS`, empty when unset.
    pub alias: String,
    /// `IFF_UP` is set.
    pub up: bool,
    /// `IFLA_GROUP`, the device group (0: the default group).
    pub group: u32,
    /// `IFLA_MASTER`: the bridge, bond or VRF device this link is enslaved to.
    pub master: Option<u32>,
    /// For a VRF device, its routing table (`IFLA_VRF_TABLE`).
    pub vrf_table: Option<u32>,
}

impl Link {
    /// The MAC in the CNI result's form (`aa:bb:cc:dd:ee:ff`, lower case).
    pub fn mac_string(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::with_capacity(self.mac.len() * 3);
        for (i, b) in self.mac.iter().enumerate() {
            let sep = if i == 0 { "" } else { ":" };
            let _ = write!(out, "{sep}{b:02x}");
        }
        out
    }

    /// Decodes the body of an `RTM_NEWLINK`.
    pub fn decode(body: &[u8]) -> Result<Link, DecodeError> {
        let header = LinkHeader::parse(body)?;
        let mut link = Link { index: header.index, up: header.flags.contains(LinkFlags::Up), ..Link::default() };
        for nla in NlasIterator::new(&body[header.buffer_len()..]) {
            let nla = nla?;
            let value = nla.value();
            match nla.kind() {
                IFLA_IFNAME => link.name = parse_string(value)?,
                IFLA_ADDRESS => link.mac = value.to_vec(),
                IFLA_MTU => link.mtu = parse_u32(value)?,
                IFLA_MASTER => link.master = Some(parse_u32(value)?),
                IFLA_IFALIAS => link.alias = parse_string(value)?,
                IFLA_GROUP => link.group = parse_u32(value)?,
                IFLA_LINKINFO => {
                    for info in NlasIterator::new(value) {
                        let info = info?;
                        match info.kind() {
                            IFLA_INFO_KIND => link.kind = parse_string(info.value())?,
                            IFLA_INFO_DATA if link.kind == "vrf" => {
                                for data in NlasIterator::new(info.value()) {
                                    let data = data?;
                                    if data.kind() == IFLA_VRF_TABLE {
                                        link.vrf_table = Some(parse_u32(data.value())?);
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(link)
    }
}

/// Every link of the namespace (per-link statistics left out: a third of each message).
pub fn links(rtnl: &mut Rtnl) -> Result<Vec<Link>, NetlinkError> {
    let mask = DefaultNla::new(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS.to_ne_bytes().to_vec());
    let request = Body { header: LinkHeader::default(), attributes: vec![mask] };
    rtnl.dump("dump links", rtm::GETLINK, &request, |body| Link::decode(body).map(Some))
}

/// What [`set`] changes on a link; `None` leaves it as it is.
#[derive(Debug, Clone, Default)]
pub struct LinkChange<'a> {
    /// A new MTU.
    pub mtu: Option<u32>,
    /// Bring the link up (`true`) or down (`false`).
    pub up: Option<bool>,
    /// A new `IFLA_IFALIAS`.
    pub alias: Option<&'a str>,
    /// A new device group (`IFLA_GROUP`).
    pub group: Option<u32>,
}

/// Changes a link (`RTM_SETLINK` on its index: the kernel's `rtnl_setlink`, which changes and
/// never creates). `name` is only for messages.
pub fn set(rtnl: &mut Rtnl, index: u32, name: &str, change: &LinkChange<'_>) -> Result<(), NetlinkError> {
    let mut msg = Body { header: LinkHeader { index, ..LinkHeader::default() }, attributes: Vec::new() };
    if let Some(up) = change.up {
        msg.header.change_mask = LinkFlags::Up;
        if up {
            msg.header.flags = LinkFlags::Up;
        }
    }
    if let Some(mtu) = change.mtu {
        msg.attributes.push(DefaultNla::new(IFLA_MTU, mtu.to_ne_bytes().to_vec()));
    }
    if let Some(alias) = change.alias {
        // NUL-terminated, as iproute2 and netlink-packet-route send strings.
        msg.attributes.push(DefaultNla::new(IFLA_IFALIAS, [alias.as_bytes(), &[0]].concat()));
    }
    if let Some(group) = change.group {
        msg.attributes.push(DefaultNla::new(IFLA_GROUP, group.to_ne_bytes().to_vec()));
    }
    rtnl.request(&format!("set link {name}"), rtm::SETLINK, &msg, 0)
}

/// Deletes a link; one that is already gone is success.
pub fn delete(rtnl: &mut Rtnl, index: u32, name: &str) -> Result<(), NetlinkError> {
    let header = LinkHeader { index, ..LinkHeader::default() };
    match rtnl.request(&format!("delete link {name}"), rtm::DELLINK, &header, 0) {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

/// Deletes every link of device group `group` in one request (`RTM_DELLINK` with ifindex 0 and
/// `IFLA_GROUP`, the kernel's `rtnl_group_dellink`): they are unregistered together, so the
/// kernel's wait for RCU grace periods — most of what deleting a device costs — is paid once
/// rather than once per link. Never use it with group 0, which every link starts in.
pub fn delete_group(rtnl: &mut Rtnl, group: u32) -> Result<(), NetlinkError> {
    if group == 0 {
        return Err(NetlinkError::Decode("delete device group 0".into(), "refused: every link is in group 0".into()));
    }
    let group_nla = DefaultNla::new(IFLA_GROUP, group.to_ne_bytes().to_vec());
    let msg = Body { header: LinkHeader::default(), attributes: vec![group_nla] };
    match rtnl.request(&format!("delete device group {group}"), rtm::DELLINK, &msg, 0) {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::socket::emitted;
    use netlink_packet_core::Parseable;
    use netlink_packet_route::link::{InfoData, InfoKind, InfoVrf, LinkAttribute, LinkInfo, LinkMessage};

    #[test]
    fn links_decode_as_netlink_packet_route_encodes_them() {
        let mut m = LinkMessage::default();
        m.header.index = 7;
        m.header.flags = LinkFlags::Up | LinkFlags::Broadcast;
        m.attributes = vec![
            LinkAttribute::IfName("blue".into()),
            LinkAttribute::Address(vec![2, 0, 0, 0, 7, 7]),
            LinkAttribute::Mtu(1400),
            LinkAttribute::Controller(3),
            LinkAttribute::IfAlias("braid".into()),
            LinkAttribute::Group(9),
            LinkAttribute::LinkInfo(vec![
                LinkInfo::Kind(InfoKind::Vrf),
                LinkInfo::Data(InfoData::Vrf(vec![InfoVrf::TableId(10)])),
            ]),
        ];
        let link = Link::decode(&emitted(&m)).unwrap();
        let want = Link {
            index: 7,
            name: "blue".into(),
            mac: vec![2, 0, 0, 0, 7, 7],
            mtu: 1400,
            kind: "vrf".into(),
            alias: "braid".into(),
            up: true,
            group: 9,
            master: Some(3),
            vrf_table: Some(10),
        };
        assert_eq!(link, want);
        assert_eq!(link.mac_string(), "02:00:00:00:07:07");
        // A 20-byte IPoIB hardware address is kept whole; a link without one has none.
        m.attributes =
            vec![LinkAttribute::Address(vec![0xa0; 20]), LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Tun)])];
        m.header.flags = LinkFlags::empty();
        let link = Link::decode(&emitted(&m)).unwrap();
        assert_eq!((link.mac.len(), link.kind.as_str(), link.up, link.vrf_table), (20, "tun", false, None));
        // A truncated message is an error, not a link.
        let bytes = emitted(&m);
        assert!(Link::decode(&bytes[..bytes.len() - 2]).is_err());
        assert!(Link::decode(&bytes[..10]).is_err());
    }

    #[test]
    fn a_change_reads_back_as_netlink_packet_route_reads_it() {
        let mut msg = Body { header: LinkHeader::default(), attributes: Vec::new() };
        msg.header.index = 4;
        msg.attributes.push(DefaultNla::new(IFLA_MTU, 1500u32.to_ne_bytes().to_vec()));
        msg.attributes.push(DefaultNla::new(IFLA_IFALIAS, [b"x".as_slice(), &[0]].concat()));
        let theirs = LinkMessage::parse(&emitted(&msg)).unwrap();
        assert_eq!(theirs.header.index, 4);
        assert_eq!(theirs.attributes, [LinkAttribute::Mtu(1500), LinkAttribute::IfAlias("x".into())]);
    }
}
