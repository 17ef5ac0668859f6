//! The links of a network namespace — name, MAC and MTU — read with one rtnetlink dump
//! (`RTM_GETLINK`), for plugins that must name or describe interfaces that other plugins made.
//!
//! `/sys/class/net` cannot be used from a thread that entered another namespace (sysfs shows
//! the namespace it was mounted in), and `/proc/net/dev` has no MACs. The request and the
//! three attributes read are those of `rtnetlink(7)`; the socket is created on the thread that
//! entered the namespace, so it belongs to that namespace.

use crate::netns::{run_in, NetnsError};
use nix::sys::socket::{
    bind, recv, send, socket, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType,
};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

/// One link as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// `IFLA_IFNAME`.
    pub name: String,
    /// `IFLA_ADDRESS`, lower-case hex with colons (empty for links without one, e.g. `lo` has
    /// `00:00:00:00:00:00`, a tun device none).
    pub mac: String,
    /// `IFLA_MTU`.
    pub mtu: u32,
    /// The interface index (`ifi_index`).
    pub index: u32,
}

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLM_F_DUMP_INTR: u16 = 0x10;
const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
/// `sizeof(struct nlmsghdr)` and `sizeof(struct ifinfomsg)`.
const NLMSG_HDR: usize = 16;
const IFINFO: usize = 16;

/// Every link of the namespace at `path`.
pub fn links(path: &Path) -> Result<Vec<Link>, NetnsError> {
    let netlink_err = |e: nix::Error| NetnsError::Netlink(path.to_path_buf(), e);
    run_in(path, || {
        // A dump interrupted by a concurrent change is flagged; read it again (a few times).
        let mut last = Ok(Vec::new());
        for _ in 0..5 {
            match dump() {
                Ok((links, false)) => return Ok(links),
                Ok((links, true)) => last = Ok(links),
                Err(e) => return Err(e),
            }
        }
        last
    })?
    .map_err(netlink_err)
}

/// One dump: the links, and whether the kernel flagged it as interrupted. Call it on a thread
/// inside the namespace.
pub(crate) fn dump() -> Result<(Vec<Link>, bool), nix::Error> {
    let fd: OwnedFd =
        socket(AddressFamily::Netlink, SockType::Raw, SockFlag::SOCK_CLOEXEC, SockProtocol::NetlinkRoute)?;
    bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0))?;
    let mut req = Vec::with_capacity(NLMSG_HDR + IFINFO);
    req.extend_from_slice(&((NLMSG_HDR + IFINFO) as u32).to_ne_bytes());
    req.extend_from_slice(&RTM_GETLINK.to_ne_bytes());
    req.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    req.extend_from_slice(&0u32.to_ne_bytes()); // port: the kernel fills it in
    req.extend_from_slice(&[0u8; IFINFO]); // AF_UNSPEC, every link
    send(fd.as_raw_fd(), &req, MsgFlags::empty())?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::new();
    let mut interrupted = false;
    loop {
        let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty())?;
        let mut msgs = &buf[..n];
        while msgs.len() >= NLMSG_HDR {
            let len = u32::from_ne_bytes([msgs[0], msgs[1], msgs[2], msgs[3]]) as usize;
            let kind = u16::from_ne_bytes([msgs[4], msgs[5]]);
            let flags = u16::from_ne_bytes([msgs[6], msgs[7]]);
            if len < NLMSG_HDR || len > msgs.len() {
                return Err(nix::Error::EBADMSG);
            }
            interrupted |= flags & NLM_F_DUMP_INTR != 0;
            match kind {
                NLMSG_DONE => return Ok((out, interrupted)),
                NLMSG_ERROR => {
                    let code = msgs.get(16..20).map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                    return Err(nix::Error::from_raw(-code));
                }
                RTM_NEWLINK if len >= NLMSG_HDR + IFINFO => {
                    let mut link = parse_link(&msgs[NLMSG_HDR + IFINFO..len]);
                    link.index = u32::from_ne_bytes([msgs[20], msgs[21], msgs[22], msgs[23]]);
                    out.push(link);
                }
                _ => {}
            }
            msgs = &msgs[align(len).min(msgs.len())..];
        }
    }
}

fn align(n: usize) -> usize {
    (n + 3) & !3
}

/// The attributes of one `RTM_NEWLINK`.
fn parse_link(mut attrs: &[u8]) -> Link {
    let mut link = Link { name: String::new(), mac: String::new(), mtu: 0, index: 0 };
    while attrs.len() >= 4 {
        let len = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
        let kind = u16::from_ne_bytes([attrs[2], attrs[3]]) & 0x3fff;
        if len < 4 || len > attrs.len() {
            break;
        }
        let value = &attrs[4..len];
        match kind {
            IFLA_IFNAME => {
                let end = value.iter().position(|b| *b == 0).unwrap_or(value.len());
                link.name = String::from_utf8_lossy(&value[..end]).into_owned();
            }
            IFLA_ADDRESS => {
                link.mac = value.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
            }
            IFLA_MTU if value.len() >= 4 => link.mtu = u32::from_ne_bytes([value[0], value[1], value[2], value[3]]),
            _ => {}
        }
        attrs = &attrs[align(len).min(attrs.len())..];
    }
    link
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_read_and_garbage_is_survived() {
        let mut a = Vec::new();
        let attr = |a: &mut Vec<u8>, kind: u16, v: &[u8]| {
            a.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
            a.extend_from_slice(&kind.to_ne_bytes());
            a.extend_from_slice(v);
            a.resize(align(a.len()), 0);
        };
        attr(&mut a, IFLA_IFNAME, b"net1\0");
        attr(&mut a, IFLA_ADDRESS, &[0x02, 0, 0, 0, 0x0a, 0x99]);
        attr(&mut a, IFLA_MTU, &1450u32.to_ne_bytes());
        let l = parse_link(&a);
        assert_eq!((l.name.as_str(), l.mac.as_str(), l.mtu), ("net1", "02:00:00:00:0a:99", 1450));
        for cut in 0..a.len() {
            let _ = parse_link(&a[..cut]);
        }
        let _ = parse_link(&[0xff; 9]);
    }
}
