//! What the kernel says: one netlink snapshot of links, addresses, routes (every table) and
//! policy routing rules of the namespace the calling thread is in.
//!
//! rtnetlink's socket needs a reactor, so each snapshot runs a current-thread tokio runtime on
//! the calling thread — the thread that entered the namespace (`cni_skel::netns::run_in`); the
//! netlink socket is created there and so belongs to that namespace. Dumps go through
//! [`rtnetlink::Handle::request`] rather than the typed getters because only the raw messages
//! carry `NLM_F_DUMP_INTR`, the kernel's word that a dump raced with a change and must be redone.

use cni_types::ip::IpNet;
use futures::StreamExt;
use rtnetlink::packet_core::{NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST};
use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};
use rtnetlink::packet_route::link::{InfoData, InfoVrf, LinkAttribute, LinkExtentMask, LinkInfo, LinkMessage};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteMetric, RouteType,
};
use rtnetlink::packet_route::rule::{RuleAction, RuleAttribute, RuleFlags, RuleMessage};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};
use std::net::IpAddr;

/// How often a dump interrupted by a concurrent change is redone before giving up.
const DUMP_TRIES: usize = 5;

/// A link as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The ifindex.
    pub index: u32,
    /// The name.
    pub name: String,
    /// The hardware address (empty for links without one).
    pub mac: Vec<u8>,
    /// The MTU.
    pub mtu: u32,
    /// `IFLA_MASTER`: the bridge, bond or VRF device this link is enslaved to.
    pub master: Option<u32>,
    /// For a VRF device, its routing table (`IFLA_VRF_TABLE`).
    pub vrf_table: Option<u32>,
}

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

/// A policy routing rule (`ip rule`): which packets it matches and the table it sends their
/// lookup to. Selectors the verifier does not reason about are kept as a flag, so that a rule
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

/// Links, addresses, routes and rules of one namespace, read in one go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Every link.
    pub links: Vec<Link>,
    /// Every address of both families.
    pub addrs: Vec<Addr>,
    /// Every route of both families in every table (cloned cache entries left out).
    pub routes: Vec<Route>,
    /// Every policy routing rule of both families, in the kernel's order (by priority).
    pub rules: Vec<Rule>,
    /// tc redirects on links' ingress (`from` ifindex, `to` ifindex): match-all u32 filters
    /// with `mirred egress redirect`, as vmtap and tc-redirect-tap join a tap to a pod
    /// interface. Read only when asked ([`redirects`]).
    pub redirects: Vec<(u32, u32)>,
}

impl Snapshot {
    /// The link with this name.
    pub fn link(&self, name: &str) -> Option<&Link> {
        self.links.iter().find(|l| l.name == name)
    }

    /// The name of the link with this index (or `#index` when it has none).
    pub fn link_name(&self, index: u32) -> String {
        self.links.iter().find(|l| l.index == index).map_or_else(|| format!("#{index}"), |l| l.name.clone())
    }
}

/// Why the namespace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The netlink socket or the runtime around it could not be set up.
    #[error("cannot open a netlink socket: {0}")]
    Socket(#[source] std::io::Error),
    /// The kernel refused a dump.
    #[error("netlink dump of {0} failed: {1}")]
    Dump(&'static str, #[source] std::io::Error),
    /// Every try of a dump was interrupted by concurrent changes.
    #[error("netlink dump of {0} was interrupted by concurrent changes {DUMP_TRIES} times")]
    Interrupted(&'static str),
    /// The connection ended before the dump did.
    #[error("netlink connection closed during the dump of {0}")]
    Closed(&'static str),
    /// Reading tc qdiscs or filters failed.
    #[error(transparent)]
    Tc(cni_netlink::NetlinkError),
}

/// Reads links, addresses, routes and rules of the calling thread's network namespace.
pub fn snapshot() -> Result<Snapshot, KernelError> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().map_err(KernelError::Socket)?;
    rt.block_on(async {
        let (conn, handle, _) = rtnetlink::new_connection().map_err(KernelError::Socket)?;
        let work = Box::pin(read_all(handle));
        match futures::future::select(Box::pin(conn), work).await {
            futures::future::Either::Right((r, _)) => r,
            futures::future::Either::Left(_) => Err(KernelError::Closed("the namespace")),
        }
    })
}

/// The tc redirects of the calling thread's namespace (see [`Snapshot::redirects`]): for each
/// link with an ingress qdisc, its match-all egress redirects. Blocking netlink (cni-netlink):
/// no reactor is needed for three small dumps.
pub fn redirects() -> Result<Vec<(u32, u32)>, cni_netlink::NetlinkError> {
    let mut rtnl = cni_netlink::Rtnl::open()?;
    let mut out = Vec::new();
    for index in cni_netlink::tc::ingress_qdiscs(&mut rtnl)? {
        for r in cni_netlink::tc::redirects(&mut rtnl, index, &format!("#{index}"))? {
            if r.egress_redirect && r.match_all {
                out.push((r.from, r.to));
            }
        }
    }
    Ok(out)
}

async fn read_all(mut handle: rtnetlink::Handle) -> Result<Snapshot, KernelError> {
    let mut snap = Snapshot::default();
    // The verifier needs names, MACs and MTUs: skip the per-link statistics (a third of each
    // message, and the most attributes to parse).
    let mut req = LinkMessage::default();
    req.attributes.push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
    snap.links = dump(&mut handle, "links", RouteNetlinkMessage::GetLink(req), |m, out| {
        if let RouteNetlinkMessage::NewLink(l) = m {
            out.push(link(&l));
        }
    })
    .await?;
    snap.addrs =
        dump(&mut handle, "addresses", RouteNetlinkMessage::GetAddress(AddressMessage::default()), |m, out| {
            if let RouteNetlinkMessage::NewAddress(a) = m {
                out.extend(addr(&a));
            }
        })
        .await?;
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        let mut req = RouteMessage::default();
        req.header.address_family = family;
        let routes = dump(&mut handle, "routes", RouteNetlinkMessage::GetRoute(req), |m, out| {
            if let RouteNetlinkMessage::NewRoute(r) = m {
                out.extend(routes(&r));
            }
        })
        .await?;
        snap.routes.extend(routes);
    }
    // Policy rules, the same way (sbr's `from <pod IP> lookup 100`, VRF's l3mdev rule): a route
    // of the result may live in a table one of them selects.
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        let mut req = RuleMessage::default();
        req.header.family = family;
        let rules = dump(&mut handle, "rules", RouteNetlinkMessage::GetRule(req), |m, out| {
            if let RouteNetlinkMessage::NewRule(r) = m {
                out.extend(rule(&r));
            }
        })
        .await?;
        snap.rules.extend(rules);
    }
    Ok(snap)
}

/// One dump, each message turned into our own small records as it arrives (the parsed
/// messages are large; keeping them all would cost page faults); redone while the kernel flags
/// it interrupted.
async fn dump<T>(
    handle: &mut rtnetlink::Handle,
    what: &'static str,
    request: RouteNetlinkMessage,
    mut keep: impl FnMut(RouteNetlinkMessage, &mut Vec<T>),
) -> Result<Vec<T>, KernelError> {
    for _ in 0..DUMP_TRIES {
        let mut req = NetlinkMessage::from(request.clone());
        req.header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        let mut stream = handle.request(req).map_err(|_| KernelError::Closed(what))?;
        let (mut out, mut interrupted) = (Vec::new(), false);
        while let Some(msg) = stream.next().await {
            interrupted |= msg.header.flags & NLM_F_DUMP_INTR != 0;
            match msg.payload {
                NetlinkPayload::InnerMessage(m) => keep(m, &mut out),
                NetlinkPayload::Error(e) if e.code.is_some() => return Err(KernelError::Dump(what, e.to_io())),
                _ => {}
            }
        }
        if !interrupted {
            return Ok(out);
        }
    }
    Err(KernelError::Interrupted(what))
}

fn link(m: &LinkMessage) -> Link {
    let mut l =
        Link { index: m.header.index, name: String::new(), mac: Vec::new(), mtu: 0, master: None, vrf_table: None };
    for a in &m.attributes {
        match a {
            LinkAttribute::IfName(n) => l.name = n.clone(),
            LinkAttribute::Address(b) => l.mac = b.clone(),
            LinkAttribute::Mtu(v) => l.mtu = *v,
            LinkAttribute::Controller(i) => l.master = Some(*i),
            LinkAttribute::LinkInfo(infos) => {
                for info in infos {
                    if let LinkInfo::Data(InfoData::Vrf(vrf)) = info {
                        l.vrf_table = vrf.iter().find_map(|v| match v {
                            InfoVrf::TableId(t) => Some(*t),
                            _ => None,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    l
}

fn rule(m: &RuleMessage) -> Option<Rule> {
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

fn addr(m: &AddressMessage) -> Option<Addr> {
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
    // IPv4: IFA_LOCAL is the interface's own address (IFA_ADDRESS is the peer on point-to-point
    // links); IPv6 reports only IFA_ADDRESS.
    let ip = local.or(address)?;
    Some(Addr {
        ifindex: m.header.index,
        net: IpNet::new(ip, m.header.prefix_len)?,
        tentative: flags.contains(AddressFlags::Tentative),
        dadfailed: flags.contains(AddressFlags::Dadfailed),
    })
}

fn ip_of(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

fn routes(m: &RouteMessage) -> Vec<Route> {
    if m.header.flags.contains(RouteFlags::Cloned) {
        return Vec::new();
    }
    let mut dst: IpAddr = match m.header.address_family {
        AddressFamily::Inet => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        AddressFamily::Inet6 => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        _ => return Vec::new(),
    };
    let (mut table, mut gw, mut oif, mut priority, mut mtu) = (u32::from(m.header.table), None, None, 0, 0);
    let mut hops = Vec::new();
    for a in &m.attributes {
        match a {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(d) => dst = ip_of(d).unwrap_or(dst),
            RouteAttribute::Gateway(g) => gw = ip_of(g),
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::Priority(p) => priority = *p,
            RouteAttribute::Metrics(ms) => {
                for metric in ms {
                    if let RouteMetric::Mtu(v) = metric {
                        mtu = *v;
                    }
                }
            }
            RouteAttribute::MultiPath(nh) => hops.extend(nh.iter().map(|h| {
                let gw = h.attributes.iter().find_map(|a| match a {
                    RouteAttribute::Gateway(g) => ip_of(g),
                    _ => None,
                });
                (gw, h.interface_index)
            })),
            _ => {}
        }
    }
    if table == 0 {
        table = u32::from(RouteHeader::RT_TABLE_MAIN);
    }
    let Some(net) = IpNet::new(dst, m.header.destination_prefix_length) else {
        return Vec::new();
    };
    let r = Route {
        table,
        dst: net.network(),
        gw,
        oif,
        priority,
        scope: m.header.scope.into(),
        mtu,
        kind: m.header.kind.into(),
    };
    if hops.is_empty() {
        return vec![r];
    }
    hops.into_iter().map(|(gw, oif)| Route { gw, oif: Some(oif), ..r.clone() }).collect()
}

/// The `rtm_type` of ordinary routes; others (local, blackhole, …) are named in reports.
pub fn is_unicast(kind: u8) -> bool {
    kind == u8::from(RouteType::Unicast)
}
