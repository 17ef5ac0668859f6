//! rtnetlink message types (`RTM_*` of `linux/rtnetlink.h`, `rtnetlink(7)`), for
//! [`Rtnl::request`](crate::Rtnl::request) and [`Rtnl::dump`](crate::Rtnl::dump).
//! netlink-packet-route keeps its own copies private to its `RouteNetlinkMessage` dispatch.

/// `RTM_NEWLINK`.
pub const NEWLINK: u16 = 16;
/// `RTM_DELLINK`.
pub const DELLINK: u16 = 17;
/// `RTM_GETLINK`.
pub const GETLINK: u16 = 18;
/// `RTM_SETLINK`.
pub const SETLINK: u16 = 19;
/// `RTM_GETADDR`.
pub const GETADDR: u16 = 22;
/// `RTM_NEWROUTE`.
pub const NEWROUTE: u16 = 24;
/// `RTM_DELROUTE`.
pub const DELROUTE: u16 = 25;
/// `RTM_GETROUTE`.
pub const GETROUTE: u16 = 26;
/// `RTM_GETRULE`.
pub const GETRULE: u16 = 34;
/// `RTM_NEWQDISC`.
pub const NEWQDISC: u16 = 36;
/// `RTM_DELQDISC`.
pub const DELQDISC: u16 = 37;
/// `RTM_GETQDISC`.
pub const GETQDISC: u16 = 38;
/// `RTM_NEWTFILTER`.
pub const NEWTFILTER: u16 = 44;
/// `RTM_DELTFILTER`.
pub const DELTFILTER: u16 = 45;
/// `RTM_GETTFILTER`.
pub const GETTFILTER: u16 = 46;

#[cfg(test)]
mod tests {
    use netlink_packet_route::link::LinkMessage;
    use netlink_packet_route::route::RouteMessage;
    use netlink_packet_route::rule::RuleMessage;
    use netlink_packet_route::tc::TcMessage;
    use netlink_packet_route::{address::AddressMessage, RouteNetlinkMessage as M};

    #[test]
    fn the_types_are_netlink_packet_routes() {
        let l = LinkMessage::default;
        let r = RouteMessage::default;
        let t = TcMessage::default;
        let pairs = [
            (super::NEWLINK, M::NewLink(l())),
            (super::DELLINK, M::DelLink(l())),
            (super::GETLINK, M::GetLink(l())),
            (super::SETLINK, M::SetLink(l())),
            (super::GETADDR, M::GetAddress(AddressMessage::default())),
            (super::NEWROUTE, M::NewRoute(r())),
            (super::DELROUTE, M::DelRoute(r())),
            (super::GETROUTE, M::GetRoute(r())),
            (super::GETRULE, M::GetRule(RuleMessage::default())),
            (super::NEWQDISC, M::NewQueueDiscipline(t())),
            (super::DELQDISC, M::DelQueueDiscipline(t())),
            (super::GETQDISC, M::GetQueueDiscipline(t())),
            (super::NEWTFILTER, M::NewTrafficFilter(t())),
            (super::DELTFILTER, M::DelTrafficFilter(t())),
            (super::GETTFILTER, M::GetTrafficFilter(t())),
        ];
        for (ours, theirs) in pairs {
            assert_eq!(ours, theirs.message_type(), "{theirs:?}");
        }
    }
}
