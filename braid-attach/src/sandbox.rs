//! Completing a merged result from the pod namespace: every interface that has a `sandbox`
//! carries its real MAC (and, for 1.1.0 output, its MTU), also when the delegate that made it
//! did not say — 0.1.0/0.2.0 results have no interfaces at all, so the merge synthesises them.

use cni_types::{CniError, CniResult};
use std::path::Path;

/// Fills `mac` (and with `mtu`, `mtu`) of each interface in `netns` that lacks it, from the
/// kernel. An interface the kernel does not have is left as it is: the verifier reports it.
pub fn fill_links(result: &mut CniResult, netns: &str, mtu: bool) -> Result<(), CniError> {
    let wanting = |i: &cni_types::result::Interface| !i.sandbox.is_empty() && (i.mac.is_empty() || (mtu && i.mtu == 0));
    if !result.interfaces.iter().any(wanting) {
        return Ok(());
    }
    let links = cni_skel::links::links(Path::new(netns))?;
    for iface in result.interfaces.iter_mut().filter(|i| wanting(i)) {
        if let Some(link) = links.iter().find(|l| l.name == iface.name) {
            if iface.mac.is_empty() {
                iface.mac = link.mac.clone();
            }
            if mtu && iface.mtu == 0 {
                iface.mtu = i64::from(link.mtu);
            }
        }
    }
    Ok(())
}
