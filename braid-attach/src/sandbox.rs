//! What braid reads from the pod namespace: its links, to name interfaces and to complete a
//! merged result — every interface that has a `sandbox` carries its real MAC (and, for 1.1.0
//! output, its MTU), also when the delegate that made it did not say (0.1.0/0.2.0 results have
//! no interfaces at all, so the merge synthesises them).

use cni_netlink::links::Link;
use cni_netlink::Rtnl;
use cni_types::error::INTERNAL;
use cni_types::{CniError, CniResult};
use std::fs::File;
use std::path::Path;

/// The pod namespace of one command, entered at most once. The first read opens an rtnetlink
/// socket there — the calling thread enters the namespace, makes it and returns at once
/// ([`cni_skel::netns::run_here_in_file`]: a thread of its own cost a scheduler wake-up each
/// way, milliseconds on a busy node); a socket belongs to the namespace it was made in, so
/// that one socket serves every later read and change from the calling thread — the names
/// checked before the delegates run, the MACs and MTUs and the network-status document after
/// them, the default routes moved. (An ADD used to enter the namespace up to four times, each
/// time a thread, a socket and a dump.) `/sys/class/net` cannot serve: sysfs shows the
/// namespace it was mounted in.
#[derive(Debug)]
pub struct PodNetns {
    path: String,
    file: Option<File>,
    rtnl: Option<Rtnl>,
}

impl PodNetns {
    /// The namespace at `path` (`CNI_NETNS`); nothing is opened until it is read.
    pub fn new(path: &str) -> PodNetns {
        PodNetns { path: path.to_string(), file: None, rtnl: None }
    }

    /// `CNI_NETNS`, as given.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The namespace file, opened and checked to be a network namespace (code 4 when it is
    /// not one, its own code when it cannot be opened).
    pub fn file(&mut self) -> Result<&File, CniError> {
        let file = match self.file.take() {
            Some(f) => f,
            None => cni_skel::netns::open(Path::new(&self.path))?,
        };
        Ok(self.file.insert(file))
    }

    /// The namespace's identity (device and inode of its nsfs file): the same for every path
    /// that names it.
    pub fn identity(&mut self) -> Result<(u64, u64), CniError> {
        use std::os::unix::fs::MetadataExt;
        let path = self.path.clone();
        let m = self
            .file()?
            .metadata()
            .map_err(|e| CniError::new(INTERNAL, format!("failed to stat netns {path:?}: {e}")))?;
        Ok((m.dev(), m.ino()))
    }

    /// The rtnetlink socket of the namespace, made on first use.
    pub fn rtnl(&mut self) -> Result<&mut Rtnl, CniError> {
        let rtnl = match self.rtnl.take() {
            Some(r) => r,
            None => {
                let path = self.path.clone();
                let file = self.file()?;
                cni_skel::netns::run_here_in_file(file, Path::new(&path), Rtnl::open)?.map_err(|e| {
                    CniError::new(INTERNAL, format!("opening an rtnetlink socket in netns {path:?}: {e}"))
                })?
            }
        };
        Ok(self.rtnl.insert(rtnl))
    }

    /// Every link of the namespace, now: one rtnetlink dump. A failed dump is code 999,
    /// naming the namespace.
    pub fn links(&mut self) -> Result<Vec<Link>, CniError> {
        let path = self.path.clone();
        cni_netlink::links::links(self.rtnl()?)
            .map_err(|e| CniError::new(INTERNAL, format!("reading the links of netns {path:?}: {e}")))
    }
}

/// Whether [`fill_links`] has anything to fill in `result`: an interface in the pod namespace
/// without a MAC, or with `mtu` without an MTU. Nothing is read from the kernel otherwise.
pub fn wants_links(result: &CniResult, mtu: bool) -> bool {
    result.interfaces.iter().any(|i| wanting(i, mtu))
}

fn wanting(i: &cni_types::result::Interface, mtu: bool) -> bool {
    !i.sandbox.is_empty() && (i.mac.is_empty() || (mtu && i.mtu == 0))
}

/// Fills `mac` (and with `mtu`, `mtu`) of each interface in the pod namespace that lacks it,
/// from that namespace's `links`. An interface the kernel does not have is left as it is: the
/// verifier reports it.
pub fn fill_links(result: &mut CniResult, links: &[Link], mtu: bool) {
    for iface in result.interfaces.iter_mut().filter(|i| wanting(i, mtu)) {
        if let Some(link) = links.iter().find(|l| l.name == iface.name) {
            if iface.mac.is_empty() {
                iface.mac = link.mac_string();
            }
            if mtu && iface.mtu == 0 {
                iface.mtu = i64::from(link.mtu);
            }
        }
    }
}
