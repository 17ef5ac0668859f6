//! The links of a namespace, and the changes plugins make to them.

use crate::{NetlinkError, Rtnl};
use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkExtentMask, LinkFlags, LinkInfo, LinkMessage};
use netlink_packet_route::RouteNetlinkMessage;

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
    /// `IFLA_INFO_KIND` (`"tun"`, `"veth"`, `"macvlan"`, …), empty when the kernel gives none.
    pub kind: String,
    /// `IFLA_IFALIAS`, empty when unset.
    pub alias: String,
    /// `IFF_UP` is set.
    pub up: bool,
    /// `IFLA_GROUP`, the device group (0: the default group).
    pub group: u32,
}

impl Link {
    /// The MAC in the CNI result's form (`aa:bb:cc:dd:ee:ff`, lower case).
    pub fn mac_string(&self) -> String {
        self.mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
    }
}

impl From<LinkMessage> for Link {
    fn from(m: LinkMessage) -> Link {
        let mut link = Link { index: m.header.index, up: m.header.flags.contains(LinkFlags::Up), ..Link::default() };
        for attr in m.attributes {
            match attr {
                LinkAttribute::IfName(n) => link.name = n,
                LinkAttribute::Address(a) => link.mac = a,
                LinkAttribute::Mtu(v) => link.mtu = v,
                LinkAttribute::IfAlias(a) => link.alias = a,
                LinkAttribute::Group(g) => link.group = g,
                LinkAttribute::LinkInfo(infos) => {
                    for info in infos {
                        if let LinkInfo::Kind(k) = info {
                            link.kind = kind_name(&k);
                        }
                    }
                }
                _ => {}
            }
        }
        link
    }
}

fn kind_name(k: &InfoKind) -> String {
    match k {
        InfoKind::Tun => "tun".to_string(),
        InfoKind::Veth => "veth".to_string(),
        InfoKind::Bridge => "bridge".to_string(),
        InfoKind::MacVlan => "macvlan".to_string(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// Every link of the namespace (per-link statistics left out: a third of each message).
pub fn links(rtnl: &mut Rtnl) -> Result<Vec<Link>, NetlinkError> {
    let mut req = LinkMessage::default();
    req.attributes.push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
    let replies = rtnl.dump("dump links", RouteNetlinkMessage::GetLink(req))?;
    Ok(replies
        .into_iter()
        .filter_map(|m| match m {
            RouteNetlinkMessage::NewLink(l) => Some(Link::from(l)),
            _ => None,
        })
        .collect())
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

/// Changes a link (`RTM_NEWLINK` on an existing index, as `ip link set` does). `name` is only
/// for messages.
pub fn set(rtnl: &mut Rtnl, index: u32, name: &str, change: &LinkChange<'_>) -> Result<(), NetlinkError> {
    let mut msg = LinkMessage::default();
    msg.header.index = index;
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
        msg.attributes.push(LinkAttribute::IfAlias(alias.to_string()));
    }
    if let Some(group) = change.group {
        msg.attributes.push(LinkAttribute::Group(group));
    }
    rtnl.request(&format!("set link {name}"), RouteNetlinkMessage::SetLink(msg), 0)
}

/// Deletes a link; one that is already gone is success.
pub fn delete(rtnl: &mut Rtnl, index: u32, name: &str) -> Result<(), NetlinkError> {
    let mut msg = LinkMessage::default();
    msg.header.index = index;
    match rtnl.request(&format!("delete link {name}"), RouteNetlinkMessage::DelLink(msg), 0) {
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
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::Group(group));
    match rtnl.request(&format!("delete device group {group}"), RouteNetlinkMessage::DelLink(msg), 0) {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}
