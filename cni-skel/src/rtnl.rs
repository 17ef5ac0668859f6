//! The rtnetlink plumbing `links` and `routes` share (`rtnetlink(7)`, `netlink(7)`): a socket
//! of the calling thread's namespace, message building, one request/reply exchange, and the
//! attribute walk — hand-written over nix's socket calls so that plugins need no netlink crate.

use nix::sys::socket::{
    bind, recv, send, socket, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType,
};
use std::os::fd::{AsRawFd, OwnedFd};

/// `sizeof(struct nlmsghdr)`.
pub(crate) const NLMSG_HDR: usize = 16;
pub(crate) const NLM_F_REQUEST: u16 = 0x1;
pub(crate) const NLM_F_DUMP: u16 = 0x300;
const NLM_F_DUMP_INTR: u16 = 0x10;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;

/// Netlink's 4-byte alignment.
pub(crate) fn align(n: usize) -> usize {
    (n + 3) & !3
}

/// A message of `kind` with `flags`; finish it with [`finish`].
pub(crate) fn header(kind: u16, flags: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&0u32.to_ne_bytes()); // length, set by `finish`
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    out.extend_from_slice(&0u32.to_ne_bytes()); // port: the kernel fills it in
    out
}

/// Appends one attribute, padded.
pub(crate) fn attr(out: &mut Vec<u8>, kind: u16, value: &[u8]) {
    out.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize(align(out.len()), 0);
}

/// Sets the message's length.
pub(crate) fn finish(mut out: Vec<u8>) -> Vec<u8> {
    let len = (out.len() as u32).to_ne_bytes();
    out[..4].copy_from_slice(&len);
    out
}

/// Sends `msg` on a fresh socket (of the calling thread's namespace) and hands every reply
/// message to `each` as (type, body after the header) until the kernel ends the exchange:
/// `NLMSG_DONE` for a dump, the acknowledgement for a request. An error reply is returned as
/// its errno. Returns whether a dump was flagged interrupted by a concurrent change.
pub(crate) fn exchange(msg: &[u8], mut each: impl FnMut(u16, &[u8])) -> Result<bool, nix::Error> {
    let fd: OwnedFd =
        socket(AddressFamily::Netlink, SockType::Raw, SockFlag::SOCK_CLOEXEC, SockProtocol::NetlinkRoute)?;
    bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0))?;
    send(fd.as_raw_fd(), msg, MsgFlags::empty())?;
    let mut buf = vec![0u8; 64 * 1024];
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
                NLMSG_DONE => return Ok(interrupted),
                NLMSG_ERROR => {
                    let code = msgs.get(16..20).map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                    return if code == 0 { Ok(interrupted) } else { Err(nix::Error::from_raw(-code)) };
                }
                _ => each(kind, &msgs[NLMSG_HDR..len]),
            }
            msgs = &msgs[align(len).min(msgs.len())..];
        }
    }
}

/// The attributes in `buf` as (type, value); stops at the first malformed one.
pub(crate) fn attrs(mut buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if buf.len() < 4 {
            return None;
        }
        let len = u16::from_ne_bytes([buf[0], buf[1]]) as usize;
        let kind = u16::from_ne_bytes([buf[2], buf[3]]) & 0x3fff;
        if len < 4 || len > buf.len() {
            return None;
        }
        let value = &buf[4..len];
        buf = &buf[align(len).min(buf.len())..];
        Some((kind, value))
    })
}
