//! The links of a network namespace — name, MAC and MTU — read with one rtnetlink dump
//! (`RTM_GETLINK`), for plugins that must name or describe interfaces that other plugins made.
//!
//! `/sys/class/net` cannot be used from a thread that entered another namespace (sysfs shows
//! the namespace it was mounted in), and `/proc/net/dev` has no MACs. The request and the
//! three attributes read are those of `rtnetlink(7)`; the socket is created on the thread that
//! entered the namespace, so it belongs to that namespace.

use crate::netns::{run_in, NetnsError};
use crate::rtnl;
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
const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
/// `sizeof(struct ifinfomsg)`.
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
    let mut req = rtnl::header(RTM_GETLINK, rtnl::NLM_F_REQUEST | rtnl::NLM_F_DUMP);
    req.extend_from_slice(&[0u8; IFINFO]); // AF_UNSPEC, every link
    let mut out = Vec::new();
    let interrupted = rtnl::exchange(&rtnl::finish(req), |kind, body| {
        if kind == RTM_NEWLINK && body.len() >= IFINFO {
            let mut link = parse_link(&body[IFINFO..]);
            link.index = u32::from_ne_bytes([body[4], body[5], body[6], body[7]]);
            out.push(link);
        }
    })?;
    Ok((out, interrupted))
}

/// The attributes of one `RTM_NEWLINK`.
fn parse_link(attrs: &[u8]) -> Link {
    let mut link = Link { name: String::new(), mac: String::new(), mtu: 0, index: 0 };
    for (kind, value) in rtnl::attrs(attrs) {
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
    }
    link
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_read_and_garbage_is_survived() {
        let mut a = Vec::new();
        let attr = rtnl::attr;
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
