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
mod error;
pub mod links;
pub mod routes;
pub mod rtm;
pub mod rules;
mod socket;
pub mod tc;

pub use error::NetlinkError;
pub use socket::{Body, Rtnl};
