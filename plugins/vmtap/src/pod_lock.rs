//! DEL under the pod namespace's lock.
//!
//! braid's node agent adds a network to a running pod with `delegator update`, which runs the
//! rest of the sandbox's conflist — vmtap's ADD, which makes the new tap and writes the DAN file
//! anew — while it holds the pod namespace's lock ([`braid_attach::ifnames`]). A runtime that
//! deletes the sandbox meanwhile runs the list's DEL in reverse order (libcni `DelNetworkList`),
//! vmtap's first: without this lock vmtap's DEL would remove the file and the taps at once, the
//! update's ADD would write them again, and the delegator's DEL (which does wait for the lock)
//! would leave them behind. Under it, vmtap's DEL comes before the update or after it, never in
//! the middle. Nested in a braid plugin that holds the lock already (vmtap in a delegate's
//! conflist), it is inherited, not waited for.

use braid_attach::deadline::{Deadline, DEFAULT};
use braid_attach::ifnames::{self, NetnsLock, LOCK_DIR};
use braid_attach::sandbox::PodNetns;
use cni_skel::prelude::CniError;
use std::path::Path;
use std::time::Instant;

/// The lock of the pod namespace at `netns`, waited for as long as a delegator's ADD waits for it
/// (the ADD share of the default deadline; then code 11, naming the holder). None for no
/// namespace, or one that is gone: no update can then be adding to it.
pub fn take(netns: &str) -> Result<Option<NetnsLock>, CniError> {
    if netns.is_empty() {
        return Ok(None);
    }
    let deadline = Deadline::new(Instant::now(), DEFAULT);
    match ifnames::lock(&mut PodNetns::new(netns), Path::new(LOCK_DIR), &deadline) {
        Ok(lock) => Ok(Some(lock)),
        Err(_) if !Path::new(netns).exists() => Ok(None),
        Err(e) => Err(e),
    }
}
