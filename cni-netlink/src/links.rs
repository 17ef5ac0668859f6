//! The links of a namespace, and the changes plugins make to them, as netlink-packet-route's
//! `LinkMessage`s.

use crate::{NetlinkError, Rtnl};
use netlink_packet_core::{parse_string, parse_u32, DecodeError, DefaultNla, Emitable, Nla, NlasIterator, Parseable};
use netlink_packet_route::link::{
    InfoData, InfoKind, InfoVrf, LinkAttribute, LinkExtentMask, LinkFlags, LinkHeader, LinkInfo, LinkMessage,
};
use netlink_packet_route::RouteNetlinkMessage;

/// The longest alias the kernel keeps: `IFALIASZ` − 1 bytes (`linux/if.h`: `IFALIASZ` is 256;
/// the kernel's policy for `IFLA_IFALIAS` and its `dev_set_alias` refuse anything longer).
pub const MAX_ALIAS: usize = 255;

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

    /// The link an `RTM_NEWLINK` reports.
    pub fn from_message(m: LinkMessage) -> Link {
        let mut link = Link { index: m.header.index, up: m.header.flags.contains(LinkFlags::Up), ..Link::default() };
        for a in m.attributes {
            match a {
                LinkAttribute::IfName(name) => link.name = name,
                LinkAttribute::Address(mac) => link.mac = mac,
                LinkAttribute::Mtu(mtu) => link.mtu = mtu,
                LinkAttribute::Controller(master) => link.master = Some(master),
                LinkAttribute::IfAlias(alias) => link.alias = alias,
                LinkAttribute::Group(group) => link.group = group,
                LinkAttribute::LinkInfo(info) => {
                    for i in info {
                        match i {
                            LinkInfo::Kind(kind) => link.kind = kind.to_string(),
                            LinkInfo::Data(InfoData::Vrf(vrf)) => link.vrf_table = vrf_table(vrf.iter()),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        link
    }

    /// The link an `RTM_NEWLINK`'s body reports (what [`Link::from_message`] gives for the
    /// message netlink-packet-route decodes from it), reading only the attributes a [`Link`]
    /// keeps. `LinkMessage::parse` decodes every attribute, and with `IFLA_LINKINFO` the
    /// `IFLA_INFO_DATA` of every link kind the library knows (bond, vxlan, CAN, …): linking
    /// those decoders cost the delegator 0.18 MB (measured), for a name, an index and a MAC.
    /// Here the header is netlink-packet-route's `LinkHeader`; each attribute is told by the
    /// number the library gives its `LinkAttribute` (`Nla::kind`), and its value read as the
    /// library reads it (netlink-packet-core's `parse_string`, `parse_u32`; `InfoKind`,
    /// `InfoVrf`). An attribute a `Link` does not keep is not decoded, so it cannot fail the
    /// dump either.
    fn parse(body: &[u8]) -> Result<Link, DecodeError> {
        let header = LinkHeader::parse(body)?;
        let mut link = Link { index: header.index, up: header.flags.contains(LinkFlags::Up), ..Link::default() };
        let [name, mac, mtu, master, alias, group, info] = [
            LinkAttribute::IfName(String::new()),
            LinkAttribute::Address(Vec::new()),
            LinkAttribute::Mtu(0),
            LinkAttribute::Controller(0),
            LinkAttribute::IfAlias(String::new()),
            LinkAttribute::Group(0),
            LinkAttribute::LinkInfo(Vec::new()),
        ]
        .map(kind);
        let attributes = body.get(header.buffer_len()..).unwrap_or_default();
        for a in NlasIterator::new(attributes) {
            let a = a?;
            match a.kind() {
                k if k == name => link.name = parse_string(a.value())?,
                k if k == mac => link.mac = a.value().to_vec(),
                k if k == mtu => link.mtu = parse_u32(a.value())?,
                k if k == master => link.master = Some(parse_u32(a.value())?),
                k if k == alias => link.alias = parse_string(a.value())?,
                k if k == group => link.group = parse_u32(a.value())?,
                k if k == info => (link.kind, link.vrf_table) = link_info(a.value())?,
                _ => {}
            }
        }
        Ok(link)
    }
}

/// The kind (`IFLA_INFO_KIND`) and a VRF's table (`IFLA_VRF_TABLE` in `IFLA_INFO_DATA`) of an
/// `IFLA_LINKINFO`, each told and read by netlink-packet-route's `LinkInfo`, `InfoKind` and
/// `InfoVrf`; the data of other kinds is not decoded.
fn link_info(nested: &[u8]) -> Result<(String, Option<u32>), DecodeError> {
    let (kind_attribute, data) = (kind(LinkInfo::Kind(InfoKind::Vrf)), kind(LinkInfo::Data(InfoData::Vrf(Vec::new()))));
    let (mut link_kind, mut table) = (None, None);
    for i in NlasIterator::new(nested) {
        let i = i?;
        if i.kind() == kind_attribute {
            link_kind = Some(InfoKind::parse(&i)?);
        } else if i.kind() == data && link_kind == Some(InfoKind::Vrf) {
            let vrf = NlasIterator::new(i.value()).map(|v| InfoVrf::parse(&v?)).collect::<Result<Vec<_>, _>>()?;
            table = vrf_table(vrf.iter());
        }
    }
    Ok((link_kind.map(|k| k.to_string()).unwrap_or_default(), table))
}

/// The number netlink-packet-route gives `attribute` (`Nla::kind`). The empty attribute asked
/// about is not dropped: its drop code is that of every attribute the library knows, and it
/// owns no memory.
fn kind(attribute: impl Nla) -> u16 {
    std::mem::ManuallyDrop::new(attribute).kind()
}

/// The table among a VRF's `IFLA_INFO_DATA`.
fn vrf_table<'a>(mut vrf: impl Iterator<Item = &'a InfoVrf>) -> Option<u32> {
    vrf.find_map(|v| match v {
        InfoVrf::TableId(t) => Some(*t),
        _ => None,
    })
}

/// A link message for the link `index` (0: none).
fn message(index: u32, attributes: Vec<LinkAttribute>) -> LinkMessage {
    let mut m = LinkMessage::default();
    m.header = LinkHeader { index, ..LinkHeader::default() };
    m.attributes = attributes;
    m
}

/// Every link of the namespace (per-link statistics left out: a third of each message).
pub fn links(rtnl: &mut Rtnl) -> Result<Vec<Link>, NetlinkError> {
    let request = HeaderAnd { header: LinkHeader::default(), attributes: vec![skip_stats()] };
    rtnl.dump_decoded("dump links", RouteNetlinkMessage::GetLink, &request, |body| Link::parse(body).map(Some))
}

/// The link named `name`, asked for alone (`RTM_GETLINK` with `IFLA_IFNAME`, as `ip link show
/// dev NAME` does); `None` when there is none. The kernel answers with that one link, where
/// [`links`] costs it — and the reader — every link of the namespace: a plugin that makes
/// links one by one and needs each one's index or MAC asks for it by name rather than
/// listing the namespace after each. The kernel looks the name up among alternative names
/// too (`ip link property add … altname`), so the link returned may carry another `name`; a
/// name longer than `IFNAMSIZ` − 1 bytes is refused by the kernel's attribute policy (ERANGE),
/// not answered with `None`.
pub fn get(rtnl: &mut Rtnl, name: &str) -> Result<Option<Link>, NetlinkError> {
    rtnl.get_decoded(&format!("get link {name}"), RouteNetlinkMessage::GetLink, &get_request(name), Link::parse)
}

/// `RTM_GETLINK` of the link `name`, statistics left out. The name goes as netlink-packet-route's
/// `LinkAttribute::IfName` sends it (NUL-terminated), without linking the encoder of every
/// link attribute (see [`skip_stats`]).
fn get_request(name: &str) -> HeaderAnd<LinkHeader> {
    let ifname = DefaultNla::new(kind(LinkAttribute::IfName(String::new())), [name.as_bytes(), &[0]].concat());
    HeaderAnd { header: LinkHeader::default(), attributes: vec![ifname, skip_stats()] }
}

/// `IFLA_EXT_MASK` with `RTEXT_FILTER_SKIP_STATS`: the kernel leaves each link's statistics
/// out of a dump (a third of each message, parsed for nothing). Number and flag are
/// netlink-packet-route's; the attribute is not sent as its `LinkAttribute::ExtMask` because
/// encoding a `LinkAttribute` links the encoder of every link attribute (about 40 KB) into
/// plugins that never change a link.
fn skip_stats() -> DefaultNla {
    DefaultNla::new(
        kind(LinkAttribute::ExtMask(Vec::new())),
        u32::from(LinkExtentMask::SkipStats).to_ne_bytes().to_vec(),
    )
}

/// A request of a header and a few attributes.
struct HeaderAnd<H> {
    header: H,
    attributes: Vec<DefaultNla>,
}

impl<H: Emitable> Emitable for HeaderAnd<H> {
    fn buffer_len(&self) -> usize {
        self.header.buffer_len() + self.attributes.as_slice().buffer_len()
    }

    fn emit(&self, buffer: &mut [u8]) {
        let at = self.header.buffer_len();
        self.header.emit(&mut buffer[..at]);
        self.attributes.as_slice().emit(&mut buffer[at..]);
    }
}

/// What [`set`] changes on a link; `None` leaves it as it is.
#[derive(Debug, Clone, Default)]
pub struct LinkChange<'a> {
    /// A new MTU.
    pub mtu: Option<u32>,
    /// Bring the link up (`true`) or down (`false`).
    pub up: Option<bool>,
    /// A new `IFLA_IFALIAS`, at most [`MAX_ALIAS`] bytes (empty: none).
    pub alias: Option<&'a str>,
    /// A new device group (`IFLA_GROUP`).
    pub group: Option<u32>,
}

/// Changes a link (`RTM_SETLINK` on its index: the kernel's `rtnl_setlink`, which changes and
/// never creates). `name` is for messages. An alias longer than [`MAX_ALIAS`] is refused
/// before anything is sent, naming the link.
pub fn set(rtnl: &mut Rtnl, index: u32, name: &str, change: &LinkChange<'_>) -> Result<(), NetlinkError> {
    let what = format!("set link {name}");
    let mut msg = message(index, Vec::new());
    if let Some(up) = change.up {
        msg.header.change_mask = LinkFlags::Up;
        if up {
            msg.header.flags = LinkFlags::Up;
        }
    }
    if let Some(mtu) = change.mtu {
        msg.attributes.push(LinkAttribute::Mtu(mtu));
    }
    if let Some(alias) = change.alias {
        msg.attributes.push(alias_attribute(alias).map_err(|why| NetlinkError::Refused(what.clone(), why))?);
    }
    if let Some(group) = change.group {
        msg.attributes.push(LinkAttribute::Group(group));
    }
    rtnl.request(&what, RouteNetlinkMessage::SetLink, msg, 0)
}

/// `IFLA_IFALIAS` without the NUL that netlink-packet-route's `LinkAttribute::IfAlias` appends.
/// The kernel takes the attribute's bytes as they are: its policy is a binary of at most
/// `IFALIASZ` − 1 bytes (`ifla_policy` in `net/core/rtnetlink.c`; binary, so that an empty one
/// removes the alias), and `do_setlink` hands the whole length to `dev_set_alias`. A NUL would
/// count as one of those bytes — an alias of 255 would be refused ("Attribute failed policy
/// validation") — and an empty alias would become a NUL rather than none. iproute2's
/// `ip link set alias` sends the text alone too.
fn alias_attribute(alias: &str) -> Result<LinkAttribute, String> {
    if alias.len() > MAX_ALIAS {
        return Err(format!("alias of {} bytes is longer than the kernel's limit of {MAX_ALIAS}", alias.len()));
    }
    Ok(LinkAttribute::Other(DefaultNla::new(kind(LinkAttribute::IfAlias(String::new())), alias.as_bytes().to_vec())))
}

/// Deletes a link; one that is already gone is success.
pub fn delete(rtnl: &mut Rtnl, index: u32, name: &str) -> Result<(), NetlinkError> {
    match rtnl.request(&format!("delete link {name}"), RouteNetlinkMessage::DelLink, message(index, Vec::new()), 0) {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

/// Deletes every link of device group `group` in one request (`RTM_DELLINK` with ifindex 0 and
/// `IFLA_GROUP`, the kernel's `rtnl_group_dellink`): they are unregistered together, so the
/// kernel's wait for RCU grace periods — most of what deleting a device costs — is paid once
/// rather than once per link. Never use it with group 0, which every link starts in.
pub fn delete_group(rtnl: &mut Rtnl, group: u32) -> Result<(), NetlinkError> {
    let what = format!("delete device group {group}");
    if group == 0 {
        return Err(NetlinkError::Refused(what, "every link is in group 0".into()));
    }
    let msg = message(0, vec![LinkAttribute::Group(group)]);
    match rtnl.request(&what, RouteNetlinkMessage::DelLink, msg, 0) {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use netlink_packet_route::link::{BondMode, InfoBond};

    fn emitted(m: &impl Emitable) -> Vec<u8> {
        let mut buf = vec![0; m.buffer_len()];
        m.emit(&mut buf);
        buf
    }

    #[test]
    fn a_link_is_read_from_its_message() {
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
        let link = Link::from_message(m.clone());
        // What a dump reads from the message's bytes is what the library's whole decode gives.
        assert_eq!(Link::parse(&emitted(&m)).unwrap(), link);
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
        let link = Link::from_message(m.clone());
        assert_eq!(Link::parse(&emitted(&m)).unwrap(), link);
        assert_eq!((link.mac.len(), link.kind.as_str(), link.up, link.vrf_table), (20, "tun", false, None));
    }

    #[test]
    fn a_dump_reads_only_what_a_link_keeps() {
        // The data of kinds other than VRF, and attributes a Link does not keep, are passed
        // over: a bond with its options, its statistics and a VRF table id of a non-VRF kind.
        let mut m = message(5, Vec::new());
        m.attributes = vec![
            LinkAttribute::IfName("bond0".into()),
            LinkAttribute::TxQueueLen(1000),
            LinkAttribute::LinkInfo(vec![
                LinkInfo::Kind(InfoKind::Bond),
                LinkInfo::Data(InfoData::Bond(vec![InfoBond::Mode(BondMode::ActiveBackup), InfoBond::MiiMon(100)])),
            ]),
        ];
        let link = Link::parse(&emitted(&m)).unwrap();
        assert_eq!(link, Link::from_message(m));
        assert_eq!((link.index, link.name.as_str(), link.kind.as_str(), link.vrf_table), (5, "bond0", "bond", None));
        // A kind the library does not name is kept as the kernel wrote it.
        let m = message(6, vec![LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Other("braidtest".into()))])]);
        assert_eq!(Link::parse(&emitted(&m)).unwrap().kind, "braidtest");
        // A truncated header or attribute is an error, not a link.
        let bytes = emitted(&message(7, vec![LinkAttribute::IfName("eth0".into())]));
        assert!(Link::parse(&bytes[..10]).is_err());
        assert!(Link::parse(&bytes[..bytes.len() - 4]).is_err());
    }

    #[test]
    fn a_link_dump_asks_for_no_statistics() {
        let request = HeaderAnd { header: LinkHeader::default(), attributes: vec![skip_stats()] };
        let theirs = LinkMessage::parse(&emitted(&request)).unwrap();
        assert_eq!(theirs.attributes, [LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats])]);
    }

    #[test]
    fn a_link_asked_for_by_name_is_named_as_the_library_names_it() {
        let request = get_request("tap0");
        let theirs = LinkMessage::parse(&emitted(&request)).unwrap();
        assert_eq!(theirs.header.index, 0);
        let want = [LinkAttribute::IfName("tap0".into()), LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats])];
        assert_eq!(theirs.attributes, want);
        // Byte for byte what the library's own encoder sends for the name.
        let library = message(0, vec![LinkAttribute::IfName("tap0".into())]);
        assert_eq!(emitted(&request)[..emitted(&library).len()], emitted(&library));
    }

    #[test]
    fn the_alias_goes_without_a_nul_and_at_most_max_alias_bytes() {
        let alias = "a".repeat(MAX_ALIAS);
        let attribute = alias_attribute(&alias).unwrap();
        // The kernel counts what it gets: exactly the alias's bytes.
        assert_eq!(attribute.value_len(), MAX_ALIAS);
        // netlink-packet-route reads it back as the alias it is.
        let bytes = emitted(&message(4, vec![attribute]));
        assert_eq!(LinkMessage::parse(&bytes).unwrap().attributes, [LinkAttribute::IfAlias(alias)]);
        assert_eq!(alias_attribute("").unwrap().value_len(), 0);
        let too_long = alias_attribute(&"a".repeat(MAX_ALIAS + 1)).unwrap_err();
        assert!(too_long.contains("256 bytes") && too_long.contains("255"), "{too_long}");
    }
}
