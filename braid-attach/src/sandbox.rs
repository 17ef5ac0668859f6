//! What braid reads from the pod namespace: its links, to name interfaces and to complete a
//! merged result — every interface that has a `sandbox` carries its real MAC (and, for 1.1.0
//! output, its MTU), also when the delegate that made it did not say (0.1.0/0.2.0 results have
//! no interfaces at all, so the merge synthesises them).

use cni_netlink::links::Link;
use cni_netlink::Rtnl;
use cni_types::{CniError, CniResult};
use std::path::Path;

/// Every link of the namespace at `netns`, read with one rtnetlink dump on a thread that
/// entered it. `/sys/class/net` cannot serve: sysfs shows the namespace it was mounted in.
/// A namespace that cannot be entered keeps its code (4 when it is not one); a failed dump is
/// code 999, naming the namespace.
pub fn links(netns: &str) -> Result<Vec<Link>, CniError> {
    cni_skel::netns::run_in(Path::new(netns), || cni_netlink::links::links(&mut Rtnl::open()?))?
        .map_err(|e| CniError::new(cni_types::error::INTERNAL, format!("reading the links of netns {netns:?}: {e}")))
}

/// Fills `mac` (and with `mtu`, `mtu`) of each interface in `netns` that lacks it, from the
/// kernel. An interface the kernel does not have is left as it is: the verifier reports it.
pub fn fill_links(result: &mut CniResult, netns: &str, mtu: bool) -> Result<(), CniError> {
    let wanting = |i: &cni_types::result::Interface| !i.sandbox.is_empty() && (i.mac.is_empty() || (mtu && i.mtu == 0));
    if !result.interfaces.iter().any(wanting) {
        return Ok(());
    }
    let links = links(netns)?;
    for iface in result.interfaces.iter_mut().filter(|i| wanting(i)) {
        if let Some(link) = links.iter().find(|l| l.name == iface.name) {
            if iface.mac.is_empty() {
                iface.mac = link.mac_string();
            }
            if mtu && iface.mtu == 0 {
                iface.mtu = i64::from(link.mtu);
            }
        }
    }
    Ok(())
}
