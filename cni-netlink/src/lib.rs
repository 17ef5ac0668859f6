//! Blocking rtnetlink for CNI plugins: what a plugin that wires or inspects interfaces inside a
//! pod's network namespace needs, without a reactor or a thread of its own.
//!
//! - [`Rtnl`]: a netlink-sys socket of the calling thread's namespace; one request and its
//!   acknowledgement, or one dump (redone when the kernel flags it interrupted), read in
//!   datagrams of up to 32 KiB. A refusal
//!   carries the kernel's errno and, where it sent one, its own explanation.
//! - [`links`]: the links of the namespace (index, name, MAC, MTU, kind, alias, group, master,
//!   VRF table) — all of them, or one asked for by name — and the few changes plugins make to
//!   them (MTU, up, alias, group, delete).
//! - [`addresses`], [`routes`] (every table; adding and deleting one), [`rules`] (policy
//!   routing): what a plugin needs to see, or change, where traffic goes.
//! - [`tc`]: the ingress qdisc and the match-all u32 filter with a `mirred egress redirect`
//!   that joins two interfaces — the technique of awslabs' tc-redirect-tap
//!   (`internal/netlink.go`, `AddIngressQdisc`, `AddRedirectFilter`) — and reading them back
//!   (every filter chain of an ingress, and the redirects among them, in one dump).
//!
//! Every message is netlink-packet-route's typed one (`LinkMessage`, `RouteMessage`,
//! `AddressMessage`, `RuleMessage`, `TcMessage`, sent as a `RouteNetlinkMessage`), framed by
//! netlink-packet-core: no message type or attribute number is written here. A link dump's
//! answers are read attribute by attribute (the library's header, attribute numbers and value
//! parsers) rather than decoded whole: see [`links`]. The one place
//! that departs from the library's encoding is the link alias, which the kernel wants without
//! the NUL the library appends (see [`links`]). Open the socket on the thread that entered the
//! pod namespace (`cni_skel::netns::run_in`): a netlink socket belongs to the namespace it was
//! created in.

pub mod addresses;
mod error;
pub mod links;
pub mod routes;
pub mod rules;
mod socket;
pub mod tc;

pub use error::NetlinkError;
pub use socket::Rtnl;
