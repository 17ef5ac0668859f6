//! The policy routing rules of a namespace (`ip rule`), decoded with netlink-packet-route's
//! `RuleMessage`.

use crate::{NetlinkError, Rtnl};
use cni_types::ip::IpNet;
use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleFlags, RuleHeader, RuleMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

/// A policy routing rule: which packets it matches and the table it sends their lookup to.
/// Selectors not reported one by one are kept as a flag ([`Rule::narrowed`]), so that a rule
/// that matches only some packets (marked ones, one port, one user) is never taken to hold for
/// all the traffic of an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// `FRA_PRIORITY` (0 when absent: the `local` rule).
    pub priority: u32,
    /// The rule's family: IPv4 or IPv6.
    pub ipv4: bool,
    /// `from`: the source prefix (`None`: from all).
    pub src: Option<IpNet>,
    /// `to`: the destination prefix (`None`: to all).
    pub dst: Option<IpNet>,
    /// The table of a `lookup` rule (`FRA_TABLE`, else the header's); `None` for other actions
    /// (goto, blackhole, unreachable, prohibit, nop).
    pub table: Option<u32>,
    /// `not`: the selectors are inverted.
    pub invert: bool,
    /// `iif`.
    pub iif: Option<String>,
    /// `oif`.
    pub oif: Option<String>,
    /// `l3mdev`: the table is the VRF's of the packet's device.
    pub l3mdev: bool,
    /// Any other selector: fwmark, tos, ipproto, ports, uid range, tunnel id.
    pub narrowed: bool,
}

impl Rule {
    /// The rule an `RTM_NEWRULE` reports; `None` for families other than IPv4 and IPv6.
    pub fn from_message(m: &RuleMessage) -> Option<Rule> {
        let ipv4 = match m.header.family {
            AddressFamily::Inet => true,
            AddressFamily::Inet6 => false,
            _ => return None,
        };
        let mut r = Rule {
            priority: 0,
            ipv4,
            src: None,
            dst: None,
            table: None,
            invert: m.header.flags.contains(RuleFlags::Invert),
            iif: None,
            oif: None,
            l3mdev: false,
            narrowed: m.header.tos != 0,
        };
        let mut table = u32::from(m.header.table);
        for a in &m.attributes {
            match a {
                RuleAttribute::Priority(p) => r.priority = *p,
                RuleAttribute::Source(ip) => r.src = IpNet::new(*ip, m.header.src_len).map(|n| n.network()),
                RuleAttribute::Destination(ip) => r.dst = IpNet::new(*ip, m.header.dst_len).map(|n| n.network()),
                RuleAttribute::Table(t) => table = *t,
                RuleAttribute::Iifname(n) => r.iif = Some(n.clone()),
                RuleAttribute::Oifname(n) => r.oif = Some(n.clone()),
                RuleAttribute::L3MDev(on) => r.l3mdev = *on,
                // A mark of 0 with mask 0 matches every packet; anything else narrows the rule.
                RuleAttribute::FwMark(v) | RuleAttribute::FwMask(v) => r.narrowed |= *v != 0,
                RuleAttribute::IpProtocol(_)
                | RuleAttribute::SourcePortRange(_)
                | RuleAttribute::DestinationPortRange(_)
                | RuleAttribute::UidRange(_)
                | RuleAttribute::TunId(_) => r.narrowed = true,
                _ => {}
            }
        }
        if m.header.action == RuleAction::ToTable && table != 0 {
            r.table = Some(table);
        }
        Some(r)
    }
}

/// Every policy routing rule of the namespace, IPv4 then IPv6, each family in the kernel's
/// order (by priority).
pub fn rules(rtnl: &mut Rtnl) -> Result<Vec<Rule>, NetlinkError> {
    let mut out = Vec::new();
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        let request = RuleHeader { family, ..RuleHeader::default() };
        out.extend(rtnl.dump("dump rules", RouteNetlinkMessage::GetRule, &request, |m| Rule::from_message(&m))?);
    }
    Ok(out)
}
