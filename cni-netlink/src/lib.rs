//! Blocking rtnetlink for CNI plugins: what a plugin that wires interfaces inside a pod's
//! network namespace needs, without a reactor or a thread of its own.
//!
//! - [`Rtnl`]: a netlink-sys socket of the calling thread's namespace; one request and its
//!   acknowledgement, or one dump (redone when the kernel flags it interrupted).
//! - [`links`]: the links of the namespace (index, name, MAC, MTU, kind, alias) and the few
//!   changes plugins make to them (MTU, up, alias, delete).
//! - [`tc`]: the ingress qdisc and the match-all u32 filter with a `mirred egress redirect`
//!   that joins two interfaces — the technique of awslabs' tc-redirect-tap
//!   (`internal/netlink.go`, `AddIngressQdisc`, `AddRedirectFilter`) — and reading them back.
//!
//! Messages are netlink-packet-route's and netlink-packet-core's; nothing here frames or
//! parses netlink by hand. Open the socket on the thread that entered the pod namespace
//! (`cni_skel::netns::run_in`): a netlink socket belongs to the namespace it was created in.

pub mod links;
mod socket;
pub mod tc;

pub use socket::Rtnl;

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
