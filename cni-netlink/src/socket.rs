//! A blocking rtnetlink socket: one request and its acknowledgement, or one dump and all its
//! parts.
//!
//! The socket belongs to the network namespace of the thread that opened it, so a plugin opens
//! it inside `cni_skel::netns::run_in` and keeps it on that thread. Framing, the acknowledgement
//! and the error object are netlink-packet-core's ([`NetlinkMessage`]); the socket is
//! netlink-sys's. What is left here is the exchange: sequence numbers, the acknowledgement,
//! multi-part dumps and `NLM_F_DUMP_INTR` (the kernel's word that a dump raced with a change
//! and must be redone, as Go's `pkg/netlinksafe` does).
//!
//! Bodies go out as any [`Emitable`] — a netlink-packet-route message (`TcMessage`), or a typed
//! header with attributes ([`Body`]) — and come back as the bytes after the netlink header, for
//! the caller to decode with the message type it asked for. That keeps netlink-packet-route's
//! dispatch over every rtnetlink message (`RouteNetlinkMessage`, with the codecs of every link
//! kind, qdisc and route encapsulation) out of the binaries: it would add 0.6 MB to a plugin
//! that only reads its links (measured on the delegator).

use crate::NetlinkError;
use netlink_packet_core::{
    DecodeError, DefaultNla, Emitable, NetlinkDeserializable, NetlinkHeader, NetlinkMessage, NetlinkPayload,
    NetlinkSerializable, NLMSG_ALIGNTO, NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_MULTIPART, NLM_F_REQUEST,
};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

/// How often a dump interrupted by a concurrent change is redone before giving up.
const DUMP_TRIES: usize = 5;

/// An rtnetlink socket of the calling thread's network namespace.
#[derive(Debug)]
pub struct Rtnl {
    socket: Socket,
    seq: u32,
}

/// A message body made of a typed header (netlink-packet-route's `LinkHeader`, `RouteHeader`,
/// …) and attributes (netlink-packet-core's [`DefaultNla`]: type and value, framed and padded
/// by the library).
#[derive(Debug, Clone)]
pub struct Body<H> {
    /// The family-specific header (`struct ifinfomsg`, `struct rtmsg`, …).
    pub header: H,
    /// The attributes after it.
    pub attributes: Vec<DefaultNla>,
}

impl<H: Emitable> Emitable for Body<H> {
    fn buffer_len(&self) -> usize {
        self.header.buffer_len() + self.attributes.as_slice().buffer_len()
    }

    fn emit(&self, buffer: &mut [u8]) {
        let at = self.header.buffer_len();
        self.header.emit(&mut buffer[..at]);
        self.attributes.as_slice().emit(&mut buffer[at..]);
    }
}

/// What goes out: a message type and a body.
struct Outgoing<'a> {
    kind: u16,
    body: &'a dyn Emitable,
}

impl NetlinkSerializable for Outgoing<'_> {
    fn message_type(&self) -> u16 {
        self.kind
    }

    fn buffer_len(&self) -> usize {
        self.body.buffer_len()
    }

    fn serialize(&self, buffer: &mut [u8]) {
        self.body.emit(buffer)
    }
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
        // Extended acks carry the kernel's own explanation (e.g. "Exclusivity flag on, cannot
        // modify"); failing to ask for them changes nothing else.
        let _ = socket.set_ext_ack(true);
        Ok(Rtnl { socket, seq: 0 })
    }

    /// Sends a message of type `kind` (an [`rtm`](crate::rtm) constant) with
    /// `NLM_F_REQUEST | NLM_F_ACK | flags` and waits for the kernel's answer. `what` names the
    /// operation in errors ("add ingress qdisc to eth0").
    pub fn request(&mut self, what: &str, kind: u16, body: &dyn Emitable, flags: u16) -> Result<(), NetlinkError> {
        let seq = self.send(what, kind, body, NLM_F_REQUEST | NLM_F_ACK | flags)?;
        loop {
            for reply in self.receive(what, seq)? {
                match reply.payload {
                    NetlinkPayload::Error(e) if e.code.is_none() => return Ok(()),
                    NetlinkPayload::Error(e) => return Err(NetlinkError::Kernel(what.to_string(), e.to_io())),
                    NetlinkPayload::Done(_) => return Ok(()),
                    _ => {}
                }
            }
        }
    }

    /// Dumps every object a message of type `kind` asks for (`NLM_F_DUMP`), redoing the dump
    /// when the kernel flags it interrupted. Each answer's body is handed to `decode` as it
    /// arrives (the decoded form is kept, not the message); `None` leaves it out.
    pub fn dump<T>(
        &mut self,
        what: &str,
        kind: u16,
        body: &dyn Emitable,
        mut decode: impl FnMut(&[u8]) -> Result<Option<T>, DecodeError>,
    ) -> Result<Vec<T>, NetlinkError> {
        for _ in 0..DUMP_TRIES {
            let seq = self.send(what, kind, body, NLM_F_REQUEST | NLM_F_DUMP)?;
            let mut out = Vec::new();
            let mut interrupted = false;
            'parts: loop {
                for reply in self.receive(what, seq)? {
                    interrupted |= reply.header.flags & NLM_F_DUMP_INTR != 0;
                    let multipart = reply.header.flags & NLM_F_MULTIPART != 0;
                    match reply.payload {
                        NetlinkPayload::InnerMessage(Incoming(m)) => {
                            let decoded =
                                decode(&m).map_err(|e| NetlinkError::Decode(what.to_string(), e.to_string()))?;
                            out.extend(decoded);
                        }
                        NetlinkPayload::Done(_) => break 'parts,
                        NetlinkPayload::Error(e) if e.code.is_none() => break 'parts,
                        NetlinkPayload::Error(e) => return Err(NetlinkError::Kernel(what.to_string(), e.to_io())),
                        _ => {}
                    }
                    if !multipart {
                        break 'parts;
                    }
                }
            }
            if !interrupted {
                return Ok(out);
            }
        }
        Err(NetlinkError::Interrupted(what.to_string(), DUMP_TRIES))
    }

    fn send(&mut self, what: &str, kind: u16, body: &dyn Emitable, flags: u16) -> Result<u32, NetlinkError> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.seq;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(Outgoing { kind, body }));
        packet.finalize();
        let mut buf = vec![0; packet.buffer_len()];
        packet.serialize(&mut buf);
        self.socket.send(&buf, 0).map_err(|e| NetlinkError::Kernel(what.to_string(), e))?;
        Ok(self.seq)
    }

    /// One datagram (sized by the kernel's message: netlink-sys peeks its length first, so
    /// nothing is ever truncated), split into its messages; replies to other sequence numbers
    /// (a stale answer) are skipped.
    fn receive(&mut self, what: &str, seq: u32) -> Result<Vec<NetlinkMessage<Incoming>>, NetlinkError> {
        let (buf, _) = self.socket.recv_from_full().map_err(|e| NetlinkError::Kernel(what.to_string(), e))?;
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

/// A body's bytes, for tests that read them back with netlink-packet-route.
#[cfg(test)]
pub(crate) fn emitted(body: &impl Emitable) -> Vec<u8> {
    let mut buf = vec![0; body.buffer_len()];
    body.emit(&mut buf);
    buf
}
