//! A blocking rtnetlink socket: one request and its acknowledgement, one object asked for and
//! the kernel's answer, or one dump and all its parts.
//!
//! The socket belongs to the network namespace of the thread that opened it, so a plugin opens
//! it inside `cni_skel::netns::run_in` and keeps it on that thread. Requests are
//! netlink-packet-route's typed messages (`LinkMessage`, `RouteMessage`, `TcMessage`, …) sent
//! as one of its [`RouteNetlinkMessage`] variants (`GetLink`, `NewRoute`, `DelTrafficFilter`,
//! …: the variant says the message type), framed by netlink-packet-core's [`NetlinkMessage`];
//! the socket is netlink-sys's. What is left here is the exchange: sequence numbers, the
//! acknowledgement and the kernel's explanation of a refusal (its extended acknowledgement),
//! multi-part dumps and `NLM_F_DUMP_INTR` (the kernel's word that a dump raced with a change
//! and must be redone, as Go's `pkg/netlinksafe` does).
//!
//! A message goes out and comes back as its own type (`LinkMessage` for a link, …; each is
//! netlink-packet-route's `Emitable` and `Parseable<[u8]>`), not through `RouteNetlinkMessage`'s
//! dispatch over every rtnetlink message, whose encoders and decoders of neighbours,
//! statistics, namespace ids, qdisc and action options would all be linked into every plugin:
//! 0.23 MB more for the delegator, which sends and reads links and routes only (measured; the
//! decoders would add more). The variant is used for the message type alone.

use crate::NetlinkError;
use netlink_packet_core::{
    parse_string, DecodeError, Emitable, NetlinkBuffer, NetlinkDeserializable, NetlinkHeader, NetlinkMessage,
    NetlinkPayload, NetlinkSerializable, NlasIterator, Parseable, NLMSG_ALIGNTO, NLM_F_ACK, NLM_F_ACK_TLVS,
    NLM_F_CAPPED, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_MULTIPART, NLM_F_REQUEST,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::constants::NLMSGERR_ATTR_MSG;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use nix::libc::{MSG_PEEK, MSG_TRUNC};

/// How often a dump interrupted by a concurrent change is redone before giving up.
const DUMP_TRIES: usize = 5;

/// The receive buffer offered to the kernel: 32 KiB, the most it packs into one datagram of a
/// dump (`netlink_recvmsg` remembers the largest buffer a reader offered, capped at
/// `SKB_WITH_OVERHEAD(32768)`, and `netlink_dump` fills datagrams of that size). Offering
/// only what the next datagram needs — netlink-sys's `recv_from_full` peeks with an empty
/// buffer — keeps dumps at `NLMSG_GOODSIZE`, about 4 KB: three links a datagram, so a link
/// dump of a pod with a few interfaces took ten exchanges with the kernel instead of two (a
/// socket's first dump fills its first datagram before any read has offered a buffer).
/// vishvananda/netlink reads into 64 KiB (`RECEIVE_BUFFER_SIZE`) for the same reason.
const RECEIVE_BUFFER: usize = 32 * 1024;

/// An rtnetlink socket of the calling thread's network namespace.
#[derive(Debug)]
pub struct Rtnl {
    socket: Socket,
    seq: u32,
    /// Reused by every receive (see [`RECEIVE_BUFFER`]).
    buffer: Vec<u8>,
}

/// What goes out: a typed message and its message type.
struct Outgoing<'a> {
    kind: u16,
    message: &'a dyn Emitable,
}

impl NetlinkSerializable for Outgoing<'_> {
    fn message_type(&self) -> u16 {
        self.kind
    }

    fn buffer_len(&self) -> usize {
        self.message.buffer_len()
    }

    fn serialize(&self, buffer: &mut [u8]) {
        self.message.emit(buffer)
    }
}

/// The message type of `variant`'s messages (`RouteNetlinkMessage::SetLink`: `RTM_SETLINK`),
/// as netlink-packet-route says it. The empty message asked about is not dropped: dropping a
/// `RouteNetlinkMessage` would link the drop code of every message netlink-packet-route knows,
/// and an empty message owns no memory (its attribute vectors are empty).
fn message_type<M: Default>(variant: fn(M) -> RouteNetlinkMessage) -> u16 {
    std::mem::ManuallyDrop::new(variant(M::default())).message_type()
}

/// What a dump hands the decoder of its answers.
enum Part<'a> {
    /// The dump starts (over, after an interruption): what was kept is stale.
    Restart,
    /// The body of one answer.
    Answer(&'a [u8]),
}

/// What comes back, past the netlink header: decoded by the caller, who knows what it asked.
struct Incoming(Vec<u8>);

impl NetlinkDeserializable for Incoming {
    type Error = DecodeError;

    fn deserialize(_: &NetlinkHeader, payload: &[u8]) -> Result<Incoming, DecodeError> {
        Ok(Incoming(payload.to_vec()))
    }
}

impl Rtnl {
    /// Opens and connects a `NETLINK_ROUTE` socket.
    pub fn open() -> Result<Rtnl, NetlinkError> {
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(NetlinkError::Socket)?;
        socket.bind_auto().map_err(NetlinkError::Socket)?;
        socket.connect(&SocketAddr::new(0, 0)).map_err(NetlinkError::Socket)?;
        // Extended acks carry the kernel's own explanation of a refusal (e.g. "Exclusivity
        // flag on, cannot modify"), which errors then quote; a kernel that cannot send them
        // still answers with the errno.
        let _ = socket.set_ext_ack(true);
        Ok(Rtnl { socket, seq: 0, buffer: Vec::with_capacity(RECEIVE_BUFFER) })
    }

    /// Sends `message` as `variant` (`RouteNetlinkMessage::SetLink` for a `LinkMessage` that
    /// changes a link, …) with `NLM_F_REQUEST | NLM_F_ACK | flags` (`NLM_F_CREATE`, `NLM_F_EXCL`
    /// of netlink-packet-core) and waits for the kernel's answer. `what` names the operation
    /// in errors ("add ingress qdisc to eth0").
    pub fn request<M: Emitable + Default>(
        &mut self,
        what: &str,
        variant: fn(M) -> RouteNetlinkMessage,
        message: M,
        flags: u16,
    ) -> Result<(), NetlinkError> {
        let seq = self.send(what, message_type(variant), &message, NLM_F_REQUEST | NLM_F_ACK | flags)?;
        loop {
            for reply in self.receive(what, seq)? {
                match reply.payload {
                    NetlinkPayload::Error(e) if e.code.is_some() => return Err(refusal(what, reply.header.flags, &e)),
                    NetlinkPayload::Error(_) | NetlinkPayload::Done(_) => return Ok(()),
                    _ => {}
                }
            }
        }
    }

    /// Dumps every object that `request` asks for (`NLM_F_DUMP`), sent as `variant`
    /// (`RouteNetlinkMessage::GetLink`, …), redoing the dump when the kernel flags it
    /// interrupted. `request` is the message's typed header (`LinkHeader`, `RouteHeader`
    /// with the family, `TcHeader` with the link and parent, …) or a whole message: a header
    /// alone keeps the encoder of every attribute out of plugins that only read. Each answer
    /// is decoded as a message of `variant`'s type (the kernel answers a `GetLink` with
    /// `NewLink`s) and handed to `keep` as it arrives (what it returns is kept, not the
    /// message); `None` leaves it out.
    pub fn dump<M: Default + Parseable<[u8]>, T>(
        &mut self,
        what: &str,
        variant: fn(M) -> RouteNetlinkMessage,
        request: &impl Emitable,
        mut keep: impl FnMut(M) -> Option<T>,
    ) -> Result<Vec<T>, NetlinkError> {
        self.dump_decoded(what, variant, request, |body| M::parse(body).map(&mut keep))
    }

    /// [`Rtnl::dump`], each answer's body decoded by `decode` rather than as a whole message
    /// of `variant`'s type: for a reader that needs a few of a message's attributes and not
    /// the decoders of all the others (`links::Link`).
    pub(crate) fn dump_decoded<M: Default, T>(
        &mut self,
        what: &str,
        variant: fn(M) -> RouteNetlinkMessage,
        request: &impl Emitable,
        mut decode: impl FnMut(&[u8]) -> Result<Option<T>, DecodeError>,
    ) -> Result<Vec<T>, NetlinkError> {
        let mut out = Vec::new();
        self.answers(what, message_type(variant), request, NLM_F_DUMP, &mut |part| {
            match part {
                Part::Answer(body) => out.extend(decode(body)?),
                Part::Restart => out.clear(),
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// Asks for one object — `request` is a whole message that names it (`RTM_GETLINK` of a
    /// link by name, …), sent as `variant` without `NLM_F_DUMP` — and decodes the kernel's one
    /// answer with `decode`. `Ok(None)` when the kernel says there is no such object
    /// ([`NetlinkError::is_not_found`]). One answer costs the kernel one object, where a dump
    /// costs it every object of the namespace.
    pub(crate) fn get_decoded<M: Default, T>(
        &mut self,
        what: &str,
        variant: fn(M) -> RouteNetlinkMessage,
        request: &impl Emitable,
        mut decode: impl FnMut(&[u8]) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, NetlinkError> {
        let mut out = None;
        let asked = self.answers(what, message_type(variant), request, 0, &mut |part| {
            if let Part::Answer(body) = part {
                out = Some(decode(body)?);
            }
            Ok(())
        });
        match asked {
            Ok(()) => Ok(out),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The exchange, compiled once for every type of answer: `request` is sent with
    /// `NLM_F_REQUEST | flags` (`NLM_F_DUMP` for a dump, nothing for a get); `each` gets
    /// [`Part::Restart`] as each try starts, then every answer's body. Only a dump can be
    /// interrupted and redone.
    fn answers(
        &mut self,
        what: &str,
        kind: u16,
        request: &dyn Emitable,
        flags: u16,
        each: &mut dyn FnMut(Part<'_>) -> Result<(), DecodeError>,
    ) -> Result<(), NetlinkError> {
        let undecodable = |e: DecodeError| NetlinkError::Decode(what.to_string(), e.to_string());
        for _ in 0..DUMP_TRIES {
            each(Part::Restart).map_err(undecodable)?;
            let seq = self.send(what, kind, request, NLM_F_REQUEST | flags)?;
            let mut interrupted = false;
            'parts: loop {
                for reply in self.receive(what, seq)? {
                    interrupted |= reply.header.flags & NLM_F_DUMP_INTR != 0;
                    let multipart = reply.header.flags & NLM_F_MULTIPART != 0;
                    match reply.payload {
                        NetlinkPayload::InnerMessage(Incoming(m)) => each(Part::Answer(&m)).map_err(undecodable)?,
                        NetlinkPayload::Error(e) if e.code.is_some() => {
                            return Err(refusal(what, reply.header.flags, &e))
                        }
                        // A dump that failed part way ends in a DONE carrying the errno
                        // (`netlink_dump_done`: `dump_done_errno`, e.g. EMSGSIZE for an object
                        // that fits no datagram): what came before it is not the whole list.
                        NetlinkPayload::Done(d) if d.code < 0 => {
                            return Err(NetlinkError::Kernel {
                                what: what.to_string(),
                                errno: std::io::Error::from_raw_os_error(-d.code),
                                ext_ack: (reply.header.flags & NLM_F_ACK_TLVS != 0)
                                    .then(|| ack_message(&d.extended_ack))
                                    .flatten(),
                            })
                        }
                        NetlinkPayload::Done(_) | NetlinkPayload::Error(_) => break 'parts,
                        _ => {}
                    }
                    if !multipart {
                        break 'parts;
                    }
                }
            }
            if !interrupted {
                return Ok(());
            }
        }
        Err(NetlinkError::Interrupted(what.to_string(), DUMP_TRIES))
    }

    fn send(&mut self, what: &str, kind: u16, message: &dyn Emitable, flags: u16) -> Result<u32, NetlinkError> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.seq;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(Outgoing { kind, message }));
        packet.finalize();
        let mut buf = vec![0; packet.buffer_len()];
        packet.serialize(&mut buf);
        self.socket.send(&buf, 0).map_err(|e| socket_failed(what, e))?;
        Ok(self.seq)
    }

    /// One datagram, split into its messages; replies to other sequence numbers (a stale
    /// answer) are skipped. The datagram is peeked at into the reused buffer (at least
    /// [`RECEIVE_BUFFER`], grown when the kernel says the datagram is larger: `MSG_TRUNC`
    /// makes it return the real length, so nothing is ever truncated), then dropped from the
    /// queue by a read of no bytes.
    fn receive(&mut self, what: &str, seq: u32) -> Result<Vec<NetlinkMessage<Incoming>>, NetlinkError> {
        let len = loop {
            self.buffer.clear();
            let len = self.socket.recv(&mut self.buffer, MSG_PEEK | MSG_TRUNC).map_err(|e| socket_failed(what, e))?;
            if len <= self.buffer.len() {
                break len;
            }
            self.buffer.clear();
            self.buffer.reserve(len);
        };
        let mut nothing: &mut [u8] = &mut [];
        self.socket.recv(&mut nothing, MSG_TRUNC).map_err(|e| socket_failed(what, e))?;
        let buf = &self.buffer[..len];
        let mut out = Vec::new();
        let mut at = 0;
        while at < buf.len() {
            let message = NetlinkMessage::<Incoming>::deserialize(&buf[at..])
                .map_err(|e| NetlinkError::Decode(what.to_string(), e.to_string()))?;
            // At least a header long (checked by the parse), padded to NLMSG_ALIGNTO.
            at += (message.header.length as usize).next_multiple_of(usize::from(NLMSG_ALIGNTO));
            if message.header.sequence_number == seq {
                out.push(message);
            }
        }
        Ok(out)
    }
}

/// The socket failed mid-exchange: no answer of the kernel's to quote.
fn socket_failed(what: &str, errno: std::io::Error) -> NetlinkError {
    NetlinkError::Kernel { what: what.to_string(), errno, ext_ack: None }
}

/// The kernel's refusal (`NLMSG_ERROR` with a code), with its explanation when it sent one.
fn refusal(what: &str, flags: u16, e: &netlink_packet_core::ErrorMessage) -> NetlinkError {
    NetlinkError::Kernel { what: what.to_string(), errno: e.to_io(), ext_ack: ext_ack_message(flags, &e.header) }
}

/// The message of an extended acknowledgement (`NLMSGERR_ATTR_MSG`, `linux/netlink.h`), if the
/// error carries one (`NLM_F_ACK_TLVS`). netlink-packet-core hands over what follows the errno
/// undecoded: the request's netlink header — the whole request unless the kernel capped it
/// (`NLM_F_CAPPED`) — then the attributes of the acknowledgement (the kernel's `netlink_ack`).
fn ext_ack_message(flags: u16, after_errno: &[u8]) -> Option<String> {
    if flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    let echoed = if flags & NLM_F_CAPPED != 0 {
        NetlinkHeader::default().buffer_len()
    } else {
        NetlinkBuffer::new_checked(after_errno).ok()?.length() as usize
    };
    ack_message(after_errno.get(echoed.next_multiple_of(usize::from(NLMSG_ALIGNTO))..)?)
}

/// The `NLMSGERR_ATTR_MSG` among an acknowledgement's attributes (after an error's echoed
/// request, or right after a DONE's errno).
fn ack_message(attributes: &[u8]) -> Option<String> {
    let message = NlasIterator::new(attributes).map_while(Result::ok).find(|a| a.kind() == NLMSGERR_ATTR_MSG as u16)?;
    parse_string(message.value()).ok().filter(|m| !m.is_empty())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use netlink_packet_core::{DefaultNla, NLMSG_ERROR};

    /// An `NLMSG_ERROR` payload after the errno, as the kernel's `netlink_ack` writes it: the
    /// request (its header, or all of it), then the acknowledgement's attributes.
    fn after_errno(request_len: usize, capped: bool, attributes: &[DefaultNla]) -> Vec<u8> {
        let mut header = NetlinkHeader::default();
        header.length = request_len as u32;
        header.message_type = NLMSG_ERROR;
        let mut out = vec![0; header.buffer_len()];
        header.emit(&mut out);
        if !capped {
            out.resize(request_len.next_multiple_of(4), 0xaa);
        }
        let mut tail = vec![0; attributes.buffer_len()];
        attributes.emit(&mut tail);
        out.extend(tail);
        out
    }

    #[test]
    fn the_extended_ack_message_is_found_after_the_echoed_request() {
        let msg = DefaultNla::new(NLMSGERR_ATTR_MSG as u16, b"Nexthop has invalid gateway\0".to_vec());
        // NLMSGERR_ATTR_OFFS (the offending attribute's offset) before it: skipped.
        let offs = DefaultNla::new(netlink_sys::constants::NLMSGERR_ATTR_OFFS as u16, 36u32.to_ne_bytes().to_vec());
        let attributes = [offs, msg];
        for (len, capped) in [(62, false), (16, false), (62, true)] {
            let bytes = after_errno(len, capped, &attributes);
            let flags = NLM_F_ACK_TLVS | if capped { NLM_F_CAPPED } else { 0 };
            assert_eq!(ext_ack_message(flags, &bytes).as_deref(), Some("Nexthop has invalid gateway"), "{len}");
            // Without NLM_F_ACK_TLVS the bytes after the request are not attributes.
            assert_eq!(ext_ack_message(flags & !NLM_F_ACK_TLVS, &bytes), None);
        }
        // Truncated or absent: no message, no panic.
        let bytes = after_errno(62, false, &attributes);
        assert_eq!(ext_ack_message(NLM_F_ACK_TLVS, &bytes[..20]), None);
        assert_eq!(ext_ack_message(NLM_F_ACK_TLVS, &[]), None);
        assert_eq!(ext_ack_message(NLM_F_ACK_TLVS, &after_errno(62, false, &[])), None);
    }
}
