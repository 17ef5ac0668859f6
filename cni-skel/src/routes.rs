//! Moving a namespace's default routes to one interface — what a meta-plugin does when a pod
//! asks for its default route on a secondary network (NPWG `default-route`).
//!
//! Three small rtnetlink requests of `rtnetlink(7)`, sent on a socket created on a thread that
//! entered the namespace (as [`crate::links`] does): a dump of the routes (`RTM_GETROUTE`),
//! `RTM_DELROUTE` of the main-table default routes on the other interfaces, and `RTM_NEWROUTE`
//! of a default route via each requested gateway on the chosen interface.

use crate::netns::{run_in, NetnsError};
use crate::rtnl;
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

const RTM_NEWROUTE: u16 = 24;
const RTM_DELROUTE: u16 = 25;
const RTM_GETROUTE: u16 = 26;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_TABLE: u16 = 15;
const RT_TABLE_MAIN: u32 = 254;
const RTN_UNICAST: u8 = 1;
const RTPROT_BOOT: u8 = 3;
const RT_SCOPE_UNIVERSE: u8 = 0;
const RT_SCOPE_NOWHERE: u8 = 255;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
/// `sizeof(struct nlmsghdr)` and `sizeof(struct rtmsg)`.
const RTMSG: usize = 12;

/// A main-table default route as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultRoute {
    /// `AF_INET6` rather than `AF_INET`.
    pub ipv6: bool,
    /// Its output interface's index (0 when it has none).
    pub oif: u32,
    /// Its output interface's name, when that is known.
    pub ifname: String,
    /// `RTA_GATEWAY`.
    pub gateway: Option<IpAddr>,
    /// `RTA_PRIORITY` (the metric; 0 when absent).
    pub priority: u32,
}

/// Why the default routes could not be moved; every message names the namespace.
#[derive(Debug)]
pub enum RouteError {
    /// The namespace could not be entered.
    Netns(NetnsError),
    /// The interface to carry the default routes is not in the namespace.
    NoInterface(PathBuf, String),
    /// A netlink request failed: what it was, and the kernel's answer.
    Netlink(PathBuf, String, nix::Error),
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteError::Netns(e) => e.fmt(f),
            RouteError::NoInterface(p, i) => write!(f, "interface {i} is not in netns {:?}", p.display().to_string()),
            RouteError::Netlink(p, what, e) => write!(f, "{what} in netns {:?}: {e}", p.display().to_string()),
        }
    }
}

impl std::error::Error for RouteError {}

impl From<RouteError> for cni_types::CniError {
    /// Code 999 (internal), as Go plugins report netlink failures; a namespace that cannot be
    /// entered keeps its own code.
    fn from(e: RouteError) -> cni_types::CniError {
        match e {
            RouteError::Netns(n) => n.into(),
            other => cni_types::CniError::new(cni_types::error::INTERNAL, other.to_string()),
        }
    }
}

/// In the namespace at `netns`: deletes every main-table default route whose output interface
/// is one of `others`, then adds a default route via each of `gateways` on `ifname` (one that
/// exists already is kept). Default routes on interfaces not named are left alone. Returns the
/// routes it deleted.
pub fn move_default_routes(
    netns: &Path,
    ifname: &str,
    others: &[String],
    gateways: &[IpAddr],
) -> Result<Vec<DefaultRoute>, RouteError> {
    let p = netns.to_path_buf();
    run_in(netns, || {
        let nl = |what: String| {
            let p = p.clone();
            move |e: nix::Error| RouteError::Netlink(p, what, e)
        };
        let (links, _) = crate::links::dump().map_err(nl("reading the links".into()))?;
        let oif = links
            .iter()
            .find(|l| l.name == ifname)
            .map(|l| l.index)
            .ok_or_else(|| RouteError::NoInterface(p.clone(), ifname.to_string()))?;
        let other_oifs: Vec<u32> = links.iter().filter(|l| others.contains(&l.name)).map(|l| l.index).collect();
        let mut removed = Vec::new();
        for mut r in default_routes().map_err(nl("reading the routes".into()))? {
            if r.oif == oif || !other_oifs.contains(&r.oif) {
                continue;
            }
            r.ifname = links.iter().find(|l| l.index == r.oif).map(|l| l.name.clone()).unwrap_or_default();
            let what = format!("deleting the default route {} of {}", describe_gw(r.gateway), r.ifname);
            match request(&route_message(RTM_DELROUTE, rtnl::NLM_F_REQUEST | NLM_F_ACK, &r)) {
                Ok(()) | Err(nix::Error::ESRCH) => removed.push(r),
                Err(e) => return Err(nl(what)(e)),
            }
        }
        for gw in gateways {
            let r =
                DefaultRoute { ipv6: gw.is_ipv6(), oif, ifname: ifname.to_string(), gateway: Some(*gw), priority: 0 };
            let flags = rtnl::NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
            match request(&route_message(RTM_NEWROUTE, flags, &r)) {
                Ok(()) | Err(nix::Error::EEXIST) => {}
                Err(e) => return Err(nl(format!("adding the default route via {gw} on {ifname}"))(e)),
            }
        }
        Ok(removed)
    })
    .map_err(RouteError::Netns)?
}

/// The main-table default routes of the namespace at `netns`, with their interfaces' names.
pub fn default_routes_in(netns: &Path) -> Result<Vec<DefaultRoute>, RouteError> {
    let p = netns.to_path_buf();
    run_in(netns, || {
        let (links, _) =
            crate::links::dump().map_err(|e| RouteError::Netlink(p.clone(), "reading the links".into(), e))?;
        let mut routes =
            default_routes().map_err(|e| RouteError::Netlink(p.clone(), "reading the routes".into(), e))?;
        for r in &mut routes {
            r.ifname = links.iter().find(|l| l.index == r.oif).map(|l| l.name.clone()).unwrap_or_default();
        }
        Ok(routes)
    })
    .map_err(RouteError::Netns)?
}

fn describe_gw(gw: Option<IpAddr>) -> String {
    gw.map_or_else(|| "without gateway".to_string(), |g| format!("via {g}"))
}

fn ip_bytes(ip: &IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// An `RTM_NEWROUTE`/`RTM_DELROUTE` for a main-table default route.
fn route_message(kind: u16, flags: u16, r: &DefaultRoute) -> Vec<u8> {
    let mut m = rtnl::header(kind, flags);
    let (protocol, scope, rtype) =
        if kind == RTM_NEWROUTE { (RTPROT_BOOT, RT_SCOPE_UNIVERSE, RTN_UNICAST) } else { (0, RT_SCOPE_NOWHERE, 0) };
    let family = if r.ipv6 { AF_INET6 } else { AF_INET };
    m.extend_from_slice(&[family, 0, 0, 0, RT_TABLE_MAIN as u8, protocol, scope, rtype]);
    m.extend_from_slice(&0u32.to_ne_bytes()); // rtm_flags
    if let Some(gw) = &r.gateway {
        rtnl::attr(&mut m, RTA_GATEWAY, &ip_bytes(gw));
    }
    rtnl::attr(&mut m, RTA_OIF, &r.oif.to_ne_bytes());
    if r.priority != 0 {
        rtnl::attr(&mut m, RTA_PRIORITY, &r.priority.to_ne_bytes());
    }
    rtnl::finish(m)
}

/// Sends one request and reads its acknowledgement.
fn request(msg: &[u8]) -> Result<(), nix::Error> {
    rtnl::exchange(msg, |_, _| {}).map(|_| ())
}

/// Every main-table default unicast route of the calling thread's namespace.
fn default_routes() -> Result<Vec<DefaultRoute>, nix::Error> {
    let mut req = rtnl::header(RTM_GETROUTE, rtnl::NLM_F_REQUEST | rtnl::NLM_F_DUMP);
    req.extend_from_slice(&[0u8; RTMSG]); // AF_UNSPEC: every family
    let mut out = Vec::new();
    rtnl::exchange(&rtnl::finish(req), |kind, body| {
        if let Some(r) = (kind == RTM_NEWROUTE).then(|| parse_route(body)).flatten() {
            out.push(r);
        }
    })?;
    Ok(out)
}

/// One `RTM_NEWROUTE` body (rtmsg and attributes): `Some` for a main-table default unicast route.
fn parse_route(body: &[u8]) -> Option<DefaultRoute> {
    let hdr = body.get(..RTMSG)?;
    let (family, dst_len, rtype) = (hdr[0], hdr[1], hdr[7]);
    let mut table = u32::from(hdr[4]);
    if dst_len != 0 || rtype != RTN_UNICAST || (family != AF_INET && family != AF_INET6) {
        return None;
    }
    let mut r = DefaultRoute { ipv6: family == AF_INET6, oif: 0, ifname: String::new(), gateway: None, priority: 0 };
    let u32_of = |v: &[u8]| v.get(..4).map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    for (kind, v) in rtnl::attrs(&body[RTMSG..]) {
        match kind {
            RTA_DST => return None,
            RTA_OIF => r.oif = u32_of(v).unwrap_or(0),
            RTA_PRIORITY => r.priority = u32_of(v).unwrap_or(0),
            RTA_TABLE => table = u32_of(v).unwrap_or(table),
            RTA_GATEWAY => {
                r.gateway = match v.len() {
                    4 => Some(IpAddr::from([v[0], v[1], v[2], v[3]])),
                    16 => {
                        let mut a = [0u8; 16];
                        a.copy_from_slice(v);
                        Some(IpAddr::from(a))
                    }
                    _ => None,
                }
            }
            _ => {}
        }
    }
    (table == RT_TABLE_MAIN).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtnl::{NLMSG_HDR, NLM_F_REQUEST};

    #[test]
    fn a_default_route_is_read_back_from_the_message_that_adds_it_and_garbage_is_survived() {
        let r = DefaultRoute {
            ipv6: false,
            oif: 3,
            ifname: String::new(),
            gateway: Some("198.18.0.1".parse().unwrap()),
            priority: 100,
        };
        let m = route_message(RTM_NEWROUTE, NLM_F_REQUEST, &r);
        assert_eq!(u32::from_ne_bytes([m[0], m[1], m[2], m[3]]) as usize, m.len());
        assert_eq!(parse_route(&m[NLMSG_HDR..]), Some(r.clone()));
        let v6 = DefaultRoute { ipv6: true, gateway: Some("2001:db8::1".parse().unwrap()), ..r };
        let m6 = route_message(RTM_NEWROUTE, NLM_F_REQUEST, &v6);
        assert_eq!(parse_route(&m6[NLMSG_HDR..]), Some(v6));
        for cut in 0..m.len() {
            let _ = parse_route(&m[NLMSG_HDR.min(cut)..cut]);
        }
        let _ = parse_route(&[0xff; 40]);
        // A deletion carries no protocol, scope NOWHERE, and matches on gateway, oif, metric.
        let d = route_message(RTM_DELROUTE, NLM_F_REQUEST, &DefaultRoute { priority: 0, ..v6_default() });
        assert_eq!(&d[NLMSG_HDR..NLMSG_HDR + 8], &[AF_INET6, 0, 0, 0, 254, 0, RT_SCOPE_NOWHERE, 0]);
    }

    fn v6_default() -> DefaultRoute {
        DefaultRoute { ipv6: true, oif: 2, ifname: String::new(), gateway: None, priority: 0 }
    }
}
