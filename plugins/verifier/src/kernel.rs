//! What the kernel says: one netlink snapshot of links, addresses, routes (every table) and
//! policy routing rules of the namespace the calling thread is in.
//!
//! Read over cni-netlink's blocking socket, created on the calling thread — the thread that
//! entered the namespace (`cni_skel::netns::run_in`) — so it belongs to that namespace. Each
//! dump is redone while the kernel flags it interrupted (`NLM_F_DUMP_INTR`), and each answer is
//! turned into cni-netlink's small records as it arrives.

use cni_netlink::{addresses, links, routes, rules, NetlinkError, Rtnl};

pub use cni_netlink::addresses::Addr;
pub use cni_netlink::links::Link;
pub use cni_netlink::routes::{is_unicast, Route};
pub use cni_netlink::rules::Rule;

/// Links, addresses, routes and rules of one namespace, read in one go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Every link.
    pub links: Vec<Link>,
    /// Every address of both families.
    pub addrs: Vec<Addr>,
    /// Every route of both families in every table (cloned cache entries left out).
    pub routes: Vec<Route>,
    /// Every policy routing rule of both families, in the kernel's order (by priority).
    pub rules: Vec<Rule>,
    /// tc redirects on links' ingress (`from` ifindex, `to` ifindex) that pass every frame:
    /// match-all u32 filters of every protocol with `mirred egress redirect`, as vmtap and
    /// tc-redirect-tap join a tap to a pod interface (`cni_netlink::tc::Redirect::
    /// passes_every_frame`, the rule vmtap's CHECK applies too). Read only when asked
    /// ([`redirects`]).
    pub redirects: Vec<(u32, u32)>,
}

impl Snapshot {
    /// The link with this name.
    pub fn link(&self, name: &str) -> Option<&Link> {
        self.links.iter().find(|l| l.name == name)
    }

    /// The name of the link with this index (or `#index` when it has none).
    pub fn link_name(&self, index: u32) -> String {
        self.links.iter().find(|l| l.index == index).map_or_else(|| format!("#{index}"), |l| l.name.clone())
    }
}

/// Why the namespace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The netlink socket could not be set up.
    #[error("cannot open a netlink socket: {0}")]
    Socket(#[source] std::io::Error),
    /// The kernel refused a dump (its errno, and its explanation when it sent one).
    #[error("netlink dump of {0} failed: {1}{why}", why = .2.as_ref().map_or_else(String::new, |m| format!(": {m}")))]
    Dump(&'static str, #[source] std::io::Error, Option<String>),
    /// Every try of a dump was interrupted by concurrent changes.
    #[error("netlink dump of {0} was interrupted by concurrent changes {1} times")]
    Interrupted(&'static str, usize),
    /// An answer of a dump did not decode.
    #[error("netlink dump of {0} failed: undecodable answer: {1}")]
    Undecodable(&'static str, String),
    /// Reading tc qdiscs or filters failed (or cni-netlink refused a request).
    #[error(transparent)]
    Netlink(NetlinkError),
}

impl KernelError {
    /// The failure of the dump of `what` ("links", "routes", …).
    fn of(what: &'static str) -> impl FnOnce(NetlinkError) -> KernelError {
        move |e| match e {
            NetlinkError::Socket(e) => KernelError::Socket(e),
            NetlinkError::Kernel { errno, ext_ack, .. } => KernelError::Dump(what, errno, ext_ack),
            NetlinkError::Interrupted(_, tries) => KernelError::Interrupted(what, tries),
            NetlinkError::Decode(_, why) => KernelError::Undecodable(what, why),
            e @ NetlinkError::Refused(..) => KernelError::Netlink(e),
        }
    }
}

/// Reads links, addresses, routes and rules of the calling thread's network namespace.
pub fn snapshot() -> Result<Snapshot, KernelError> {
    let mut rtnl = Rtnl::open().map_err(KernelError::of("the namespace"))?;
    Ok(Snapshot {
        // Names, MACs, MTUs, masters and VRF tables: the per-link statistics are left out.
        links: links::links(&mut rtnl).map_err(KernelError::of("links"))?,
        addrs: addresses::addresses(&mut rtnl).map_err(KernelError::of("addresses"))?,
        routes: routes::routes(&mut rtnl).map_err(KernelError::of("routes"))?,
        // Policy rules (sbr's `from <pod IP> lookup 100`, VRF's l3mdev rule): a route of the
        // result may live in a table one of them selects.
        rules: rules::rules(&mut rtnl).map_err(KernelError::of("rules"))?,
        redirects: Vec::new(),
    })
}

/// The tc redirects of the calling thread's namespace (see [`Snapshot::redirects`]): for each
/// link whose ingress is served (an ingress or a clsact qdisc), its redirects of every frame.
pub fn redirects() -> Result<Vec<(u32, u32)>, NetlinkError> {
    let mut rtnl = Rtnl::open()?;
    let mut out = Vec::new();
    for index in cni_netlink::tc::ingress_qdiscs(&mut rtnl)?.into_iter().map(|q| q.index) {
        for r in cni_netlink::tc::redirects(&mut rtnl, index, &format!("#{index}"))? {
            if r.passes_every_frame() {
                out.push((r.from, r.to));
            }
        }
    }
    Ok(out)
}
