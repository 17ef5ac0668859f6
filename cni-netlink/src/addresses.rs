//! The addresses of a namespace, decoded with netlink-packet-route's `AddressMessage`.

use crate::{NetlinkError, Rtnl};
use cni_types::ip::IpNet;
use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressHeader, AddressMessage};
use netlink_packet_route::RouteNetlinkMessage;

/// An address on a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addr {
    /// The ifindex of the link that carries it.
    pub ifindex: u32,
    /// The address with its prefix length.
    pub net: IpNet,
    /// IPv6 duplicate address detection still running.
    pub tentative: bool,
    /// IPv6 duplicate address detection failed: the address is unusable.
    pub dadfailed: bool,
}

impl Addr {
    /// The address an `RTM_NEWADDR` reports, if it carries one.
    pub fn from_message(m: &AddressMessage) -> Option<Addr> {
        let (mut local, mut address) = (None, None);
        // The 32-bit IFA_FLAGS attribute supersedes the 8-bit header field when present.
        let mut flags = AddressFlags::from_bits_retain(u32::from(m.header.flags.bits()));
        for a in &m.attributes {
            match a {
                AddressAttribute::Local(ip) => local = Some(*ip),
                AddressAttribute::Address(ip) => address = Some(*ip),
                AddressAttribute::Flags(f) => flags = *f,
                _ => {}
            }
        }
        // IPv4: IFA_LOCAL is the interface's own address (IFA_ADDRESS is the peer on
        // point-to-point links); IPv6 reports only IFA_ADDRESS.
        let ip = local.or(address)?;
        Some(Addr {
            ifindex: m.header.index,
            net: IpNet::new(ip, m.header.prefix_len)?,
            tentative: flags.contains(AddressFlags::Tentative),
            dadfailed: flags.contains(AddressFlags::Dadfailed),
        })
    }
}

/// Every address of the namespace, both families.
pub fn addresses(rtnl: &mut Rtnl) -> Result<Vec<Addr>, NetlinkError> {
    rtnl.dump("dump addresses", RouteNetlinkMessage::GetAddress, &AddressHeader::default(), |m| Addr::from_message(&m))
}
