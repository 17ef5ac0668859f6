//! Joining two interfaces with tc: an ingress qdisc on each and, on each, a match-all u32
//! filter whose action is `mirred egress redirect` to the other — every frame that arrives on
//! one leaves by the other. This is awslabs' tc-redirect-tap (`internal/netlink.go`,
//! `AddIngressQdisc`, `AddRedirectFilter`), and what
//! `tc qdisc add dev X ingress; tc filter add dev X ingress protocol all u32 match u8 0 0
//! action mirred egress redirect dev Y` does. A link whose ingress a clsact qdisc serves (eBPF
//! CNIs put one on pod interfaces) takes the filter as it is: filters go to the ingress hook,
//! `ffff:fff2`, which both kinds serve.
//!
//! The filter is added with priority 0, so the kernel gives it a priority of its own
//! (`tcf_auto_prio`: below every existing one) and thus a filter chain of its own: deleting
//! that priority later removes this filter and nothing else.

use crate::{NetlinkError, Rtnl};
use netlink_packet_core::{EthernetProtocol, NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::tc::{
    TcAction, TcActionAttribute, TcActionMirror, TcActionMirrorOption, TcActionOption, TcActionType, TcAttribute,
    TcFilterU32, TcFilterU32Option, TcHandle, TcHeader, TcMessage, TcMirror, TcMirrorActionType, TcOption, TcU32Key,
    TcU32Selector, TcU32SelectorFlags,
};
use netlink_packet_route::RouteNetlinkMessage;

/// `ETH_P_ALL` (`protocol all`): the filter sees every frame, whatever its protocol.
fn all_protocols() -> u16 {
    EthernetProtocol::All.value()
}

/// The ingress qdisc's handle, `ffff:` (the major of its parent, `TC_H_INGRESS`).
const INGRESS_HANDLE: TcHandle = TcHandle { major: TcHandle::INGRESS.major, minor: 0 };

/// Where filters on a link's ingress attach: `ffff:fff2` (`TC_H_MAKE(TC_H_CLSACT,
/// TC_H_MIN_INGRESS)`, what `tc filter … ingress` sends), which an ingress qdisc and a clsact
/// qdisc both serve. clsact — which eBPF-based CNIs put on pod interfaces — serves only its
/// two hooks: it refuses a filter for `ffff:0` (`clsact_tcf_block`: no block, `EINVAL`) and
/// dumps nothing for `ffff:fff1`.
const INGRESS_HOOK: TcHandle = TcHandle { major: TcHandle::INGRESS.major, minor: TcHandle::MIN_INGRESS };

/// `tcm_info` of a filter: priority in the upper half, the protocol in network byte order in
/// the lower (`TC_H_MAKE(prio << 16, htons(protocol))` in iproute2's `tc_filter_modify`).
fn filter_info(priority: u16, protocol: u16) -> u32 {
    (u32::from(priority) << 16) | u32::from(protocol.to_be())
}

/// The priority and protocol (host byte order) of a filter's `tcm_info`.
fn priority_and_protocol(info: u32) -> (u16, u16) {
    ((info >> 16) as u16, u16::from_be(info as u16))
}

fn ingress_message(index: u32) -> TcMessage {
    let mut msg = TcMessage::with_index(index as i32);
    msg.header.parent = TcHandle::INGRESS;
    msg.header.handle = INGRESS_HANDLE;
    msg.attributes.push(TcAttribute::Kind("ingress".to_string()));
    msg
}

/// Adds an ingress qdisc to the link. Returns `false` when it had one already (which is kept
/// and used as it is).
pub fn add_ingress(rtnl: &mut Rtnl, index: u32, name: &str) -> Result<bool, NetlinkError> {
    let what = format!("add ingress qdisc to {name}");
    match rtnl.request(
        &what,
        RouteNetlinkMessage::NewQueueDiscipline,
        ingress_message(index),
        NLM_F_CREATE | NLM_F_EXCL,
    ) {
        Ok(()) => Ok(true),
        Err(e) if e.is_exists() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Removes the link's ingress qdisc (and with it every filter attached to it).
pub fn delete_ingress(rtnl: &mut Rtnl, index: u32, name: &str) -> Result<(), NetlinkError> {
    let what = format!("delete ingress qdisc of {name}");
    rtnl.request(&what, RouteNetlinkMessage::DelQueueDiscipline, ingress_message(index), 0)
}

/// A qdisc serving a link's ingress hook: an ingress qdisc, or a clsact (which serves ingress
/// and egress; a link has one or the other, never both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngressQdisc {
    /// The link's ifindex.
    pub index: u32,
    /// It is a clsact: [`delete_ingress`] would not take it (its request names the kind
    /// `ingress`, which the kernel checks), and whoever made it has egress filters on it too.
    pub clsact: bool,
}

/// The links of the namespace whose ingress hook is served, and by which kind of qdisc.
pub fn ingress_qdiscs(rtnl: &mut Rtnl) -> Result<Vec<IngressQdisc>, NetlinkError> {
    rtnl.dump("dump qdiscs", RouteNetlinkMessage::GetQueueDiscipline, &TcHeader::default(), |q: TcMessage| {
        let kind = q.attributes.iter().find_map(|a| match a {
            TcAttribute::Kind(k) if k == "ingress" || k == "clsact" => Some(k == "clsact"),
            _ => None,
        });
        kind.map(|clsact| IngressQdisc { index: q.header.index as u32, clsact })
    })
}

/// Whether `index` is among `qdiscs`.
pub fn serves(qdiscs: &[IngressQdisc], index: u32) -> bool {
    qdiscs.iter().any(|q| q.index == index)
}

/// Adds, on `from`'s ingress qdisc, a match-all u32 filter that redirects every frame to the
/// egress of `to` (`action mirred egress redirect`, verdict `stolen`). Names are for messages.
pub fn add_redirect(rtnl: &mut Rtnl, from: (u32, &str), to: (u32, &str)) -> Result<(), NetlinkError> {
    let mut msg = TcMessage::with_index(from.0 as i32);
    msg.header.parent = INGRESS_HOOK;
    msg.header.info = filter_info(0, all_protocols());
    msg.attributes.push(TcAttribute::Kind(TcFilterU32::KIND.to_string()));

    // One key with mask 0 at offset 0 (`match u8 0 0`): every frame matches.
    let mut selector = TcU32Selector::default();
    selector.flags = TcU32SelectorFlags::Terminal;
    selector.nkeys = 1;
    selector.keys = vec![TcU32Key::default()];

    let mut mirred = TcMirror::default();
    mirred.generic.action = TcActionType::Stolen;
    mirred.eaction = TcMirrorActionType::EgressRedir;
    mirred.ifindex = to.0;
    let mut action = TcAction::default();
    action.attributes = vec![
        TcActionAttribute::Kind(TcActionMirror::KIND.to_string()),
        TcActionAttribute::Options(vec![TcActionOption::Mirror(TcActionMirrorOption::Parms(mirred))]),
    ];
    msg.attributes.push(TcAttribute::Options(vec![
        TcOption::U32(TcFilterU32Option::Selector(selector)),
        TcOption::U32(TcFilterU32Option::Action(vec![action])),
    ]));
    let what = format!("add redirect filter {} -> {}", from.1, to.1);
    rtnl.request(&what, RouteNetlinkMessage::NewTrafficFilter, msg, NLM_F_CREATE | NLM_F_EXCL)
}

/// A `mirred` action of a u32 filter on a link's ingress, as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The link whose ingress carries the filter.
    pub from: u32,
    /// The filter's priority (its chain: [`delete_filters`] takes it).
    pub priority: u16,
    /// The filter's protocol, host byte order (`0x0003`: all).
    pub protocol: u16,
    /// The link frames are sent to.
    pub to: u32,
    /// The action is an egress redirect (not a mirror, not to ingress).
    pub egress_redirect: bool,
    /// Every key of the filter's selector has mask 0: it matches every frame.
    pub match_all: bool,
}

impl Redirect {
    /// Whether it sends every frame that arrives — of every protocol (`protocol all`), matched
    /// by a selector that matches everything — out of its target (`mirred egress redirect`):
    /// what joins a tap to a pod interface ([`add_redirect`]). A filter for one protocol
    /// (`protocol ip`) leaves ARP and IPv6 behind.
    pub fn passes_every_frame(&self) -> bool {
        self.egress_redirect && self.match_all && self.protocol == all_protocols()
    }
}

/// What the ingress hook of a link carries, read in one dump.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngressFilters {
    /// Every filter chain of tc chain 0 (where the hook starts), of any kind, as (priority,
    /// protocol in host byte order): what [`delete_filters`] takes. A chain the kernel reports
    /// in several messages (a u32 filter comes with its hash table) is listed once.
    pub chains: Vec<(u16, u16)>,
    /// Whether filters sit in other tc chains (`tc filter add … chain N`, reached only by a
    /// `goto chain` action): never braid's, never counted among [`IngressFilters::chains`] or
    /// [`IngressFilters::redirects`], but something a shared qdisc must not be deleted under.
    pub other_tc_chains: bool,
    /// The redirects among them (u32 filters with a `mirred` action).
    pub redirects: Vec<Redirect>,
}

impl IngressFilters {
    /// Whether a filter is left once the chains `removed` are deleted: what decides if a
    /// qdisc someone shares may go (deleting the qdisc deletes what is left on it).
    pub fn others_than(&self, removed: &[(u16, u16)]) -> bool {
        self.other_tc_chains || self.chains.iter().any(|c| !removed.contains(c))
    }
}

/// Every filter on the ingress of the link `index` and the redirects among them, in one dump.
pub fn ingress_filters(rtnl: &mut Rtnl, index: u32, name: &str) -> Result<IngressFilters, NetlinkError> {
    let request = TcHeader { index: index as i32, parent: INGRESS_HOOK, ..TcHeader::default() };
    let what = format!("dump ingress filters of {name}");
    let mut out = IngressFilters::default();
    for f in rtnl.dump(&what, RouteNetlinkMessage::GetTrafficFilter, &request, Some)? {
        if f.attributes.iter().any(|a| matches!(a, TcAttribute::Chain(c) if *c != 0)) {
            out.other_tc_chains = true;
            continue;
        }
        let (priority, protocol) = priority_and_protocol(f.header.info);
        if !out.chains.contains(&(priority, protocol)) {
            out.chains.push((priority, protocol));
        }
        if !f.attributes.iter().any(|a| matches!(a, TcAttribute::Kind(k) if k == TcFilterU32::KIND)) {
            continue;
        }
        let mut match_all = false;
        let mut targets = Vec::new();
        for attr in &f.attributes {
            let TcAttribute::Options(opts) = attr else { continue };
            for opt in opts {
                match opt {
                    TcOption::U32(TcFilterU32Option::Selector(sel)) => {
                        match_all = sel.keys.iter().all(|k| k.mask == 0);
                    }
                    TcOption::U32(TcFilterU32Option::Action(actions)) => {
                        targets.extend(actions.iter().filter_map(mirred))
                    }
                    _ => {}
                }
            }
        }
        for (to, egress_redirect) in targets {
            out.redirects.push(Redirect { from: index, priority, protocol, to, egress_redirect, match_all });
        }
    }
    Ok(out)
}

/// The redirects (u32 filters with a `mirred` action) on the ingress of the link `index`.
pub fn redirects(rtnl: &mut Rtnl, index: u32, name: &str) -> Result<Vec<Redirect>, NetlinkError> {
    Ok(ingress_filters(rtnl, index, name)?.redirects)
}

/// The target and kind of a `mirred` action.
fn mirred(action: &TcAction) -> Option<(u32, bool)> {
    let is_mirred =
        action.attributes.iter().any(|a| matches!(a, TcActionAttribute::Kind(k) if k == TcActionMirror::KIND));
    if !is_mirred {
        return None;
    }
    action.attributes.iter().find_map(|a| match a {
        TcActionAttribute::Options(opts) => opts.iter().find_map(|o| match o {
            TcActionOption::Mirror(TcActionMirrorOption::Parms(p)) => {
                Some((p.ifindex, p.eaction == TcMirrorActionType::EgressRedir))
            }
            _ => None,
        }),
        _ => None,
    })
}

/// Deletes the u32 filter chain of `priority` (and `protocol`) on the link's ingress.
pub fn delete_filters(
    rtnl: &mut Rtnl,
    index: u32,
    name: &str,
    priority: u16,
    protocol: u16,
) -> Result<(), NetlinkError> {
    let mut msg = TcMessage::with_index(index as i32);
    msg.header.parent = INGRESS_HOOK;
    msg.header.info = filter_info(priority, protocol);
    msg.attributes.push(TcAttribute::Kind(TcFilterU32::KIND.to_string()));
    let what = format!("delete filter priority {priority} of {name}");
    rtnl.request(&what, RouteNetlinkMessage::DelTrafficFilter, msg, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_info_puts_the_protocol_in_network_order() {
        // `tc filter show` prints "protocol all pref 49152" for 0xc000_0300 on little-endian.
        let info = filter_info(0xc000, all_protocols());
        assert_eq!((info as u16).to_ne_bytes(), all_protocols().to_be_bytes());
        assert_eq!(info >> 16, 0xc000);
        assert_eq!(priority_and_protocol(info), (0xc000, all_protocols()));
        // And the ingress qdisc is ffff:0, under ffff:fff1.
        assert_eq!((INGRESS_HANDLE.major, INGRESS_HANDLE.minor), (0xffff, 0));
    }
}
