//! Blocking rtnetlink for CNI plugins: what a plugin that wires or inspects interfaces inside a
//! pod's network namespace needs, without a reactor or a thread of its own.
//!
//! - [`Rtnl`]: a netlink-sys socket of the calling thread's namespace; one request and its
//!   acknowledgement, or one dump (redone when the kernel flags it interrupted).
//! - [`links`]: the links of the namespace (index, name, MAC, MTU, kind, alias, group, master,
//!   VRF table) and the few changes plugins make to them (MTU, up, alias, group, delete).
//! - [`addresses`], [`routes`] (every table; adding and deleting one), [`rules`] (policy
//!   routing): what a plugin needs to see, or change, where traffic goes.
//! - [`tc`]: the ingress qdisc and the match-all u32 filter with a `mirred egress redirect`
//!   that joins two interfaces — the technique of awslabs' tc-redirect-tap
//!   (`internal/netlink.go`, `AddIngressQdisc`, `AddRedirectFilter`) — and reading them back.
//!
//! Nothing here frames or parses netlink by hand: messages are netlink-packet-core's, headers
//! and message types netlink-packet-route's. Addresses, rules and tc are decoded whole with
//! netlink-packet-route's codecs; links and routes, which every braid plugin reads, from its
//! typed headers and the attributes they report, walked with netlink-packet-core's
//! `NlasIterator` — the full link and route codecs would cost a plugin 0.34 and 0.06 MB (see
//! [`links`], [`routes`]). Open the socket on the thread that entered the pod namespace
//! (`cni_skel::netns::run_in`): a netlink socket belongs to the namespace it was created in.

pub mod addresses;
pub mod links;
pub mod routes;
pub mod rtm;
pub mod rules;
mod socket;
pub mod tc;

pub use socket::{Body, Rtnl};

/// Why a netlink exchange failed. Each names the operation (`what`) it was part of.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    /// The socket could not be opened, bound or connected.
    #[error("cannot open a netlink socket: {0}")]
    Socket(#[source] std::io::Error),
    /// The kernel refused the request (its errno), or the socket failed mid-exchange.
    #[error("{0}: {1}")]
    Kernel(String, #[source] std::io::Error),
    /// An answer did not decode.
    #[error("{0}: undecodable netlink answer: {1}")]
    Decode(String, String),
    /// Every try of a dump was interrupted by concurrent changes.
    #[error("{0}: the dump was interrupted by concurrent changes {1} times")]
    Interrupted(String, usize),
}

impl NetlinkError {
    /// The kernel's errno, when the kernel refused the request.
    pub fn errno(&self) -> Option<i32> {
        match self {
            NetlinkError::Kernel(_, e) => e.raw_os_error(),
            _ => None,
        }
    }

    /// The object does not exist (`ENOENT`, `ENODEV`):
    /// what a DEL treats as already done.
    pub fn is_not_found(&self) -> bool {
        matches!(self.errno(), Some(2 /* ENOENT */ | 19 /* ENODEV */))
    }

    /// The object exists already (`EEXIST`).
    pub fn is_exists(&self) -> bool {
        self.errno() == Some(17)
    }
}

impl From<NetlinkError> for cni_types::CniError {
    /// Code 999 (`INTERNAL`), as Go plugins report netlink failures (`fmt.Errorf` wrapped into
    /// a generic error by `skel`), with the operation and the kernel's reason in the message.
    fn from(e: NetlinkError) -> cni_types::CniError {
        cni_types::CniError::new(cni_types::error::INTERNAL, e.to_string())
    }
}
