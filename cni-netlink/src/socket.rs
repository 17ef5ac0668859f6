//! A blocking rtnetlink socket: one request and its acknowledgement, or one dump and all its
//! parts.
//!
//! The socket belongs to the network namespace of the thread that opened it, so a plugin opens
//! it inside `cni_skel::netns::run_in` and keeps it on that thread. Messages are netlink-packet-
//! route's; framing, checking and the error object are netlink-packet-core's; the socket is
//! netlink-sys's. What is left here is the exchange: sequence numbers, the acknowledgement,
//! multi-part dumps and `NLM_F_DUMP_INTR` (the kernel's word that a dump raced with a change
//! and must be redone, as Go's `pkg/netlinksafe` does).

use crate::NetlinkError;
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_MULTIPART,
    NLM_F_REQUEST,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

/// How often a dump interrupted by a concurrent change is redone before giving up.
const DUMP_TRIES: usize = 5;

/// An rtnetlink socket of the calling thread's network namespace.
#[derive(Debug)]
pub struct Rtnl {
    socket: Socket,
    seq: u32,
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

    /// Sends `message` with `NLM_F_REQUEST | NLM_F_ACK | flags` and waits for the kernel's
    /// answer. `what` names the operation in errors ("add ingress qdisc to eth0").
    pub fn request(&mut self, what: &str, message: RouteNetlinkMessage, flags: u16) -> Result<(), NetlinkError> {
        let seq = self.send(what, message, NLM_F_REQUEST | NLM_F_ACK | flags)?;
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

    /// Dumps every object `message` asks for (`NLM_F_DUMP`), redoing the dump when the kernel
    /// flags it interrupted.
    pub fn dump(&mut self, what: &str, message: RouteNetlinkMessage) -> Result<Vec<RouteNetlinkMessage>, NetlinkError> {
        for _ in 0..DUMP_TRIES {
            let seq = self.send(what, message.clone(), NLM_F_REQUEST | NLM_F_DUMP)?;
            let mut out = Vec::new();
            let mut interrupted = false;
            'parts: loop {
                for reply in self.receive(what, seq)? {
                    interrupted |= reply.header.flags & NLM_F_DUMP_INTR != 0;
                    match reply.payload {
                        NetlinkPayload::InnerMessage(m) => out.push(m),
                        NetlinkPayload::Done(_) => break 'parts,
                        NetlinkPayload::Error(e) if e.code.is_none() => break 'parts,
                        NetlinkPayload::Error(e) => return Err(NetlinkError::Kernel(what.to_string(), e.to_io())),
                        _ => {}
                    }
                    if reply.header.flags & NLM_F_MULTIPART == 0 {
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

    fn send(&mut self, what: &str, message: RouteNetlinkMessage, flags: u16) -> Result<u32, NetlinkError> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.seq;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::from(message));
        packet.finalize();
        let mut buf = vec![0; packet.buffer_len()];
        packet.serialize(&mut buf);
        self.socket.send(&buf, 0).map_err(|e| NetlinkError::Kernel(what.to_string(), e))?;
        Ok(self.seq)
    }

    /// One datagram (sized by the kernel's message, never truncated), split into its
    /// messages; replies to other sequence numbers (a stale answer) are skipped.
    fn receive(&mut self, what: &str, seq: u32) -> Result<Vec<NetlinkMessage<RouteNetlinkMessage>>, NetlinkError> {
        let (buf, _) = self.socket.recv_from_full().map_err(|e| NetlinkError::Kernel(what.to_string(), e))?;
        let mut out = Vec::new();
        let mut at = 0;
        while at < buf.len() {
            let message = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[at..])
                .map_err(|e| NetlinkError::Decode(what.to_string(), e.to_string()))?;
            let len = message.header.length as usize;
            if len == 0 {
                return Err(NetlinkError::Decode(what.to_string(), "a message of length 0".to_string()));
            }
            at += (len + 3) & !3;
            if message.header.sequence_number == seq {
                out.push(message);
            }
        }
        Ok(out)
    }
}
