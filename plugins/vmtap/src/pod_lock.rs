//! DEL under the pod namespace's lock.
//!
//! braid's node agent adds a network to a running pod with `delegator update`, which runs the
//! rest of the sandbox's conflist — vmtap's ADD, which makes the new tap and writes the DAN file
//! anew — while it holds the pod namespace's lock ([`braid_attach::ifnames`]). A runtime that
//! deletes the sandbox meanwhile runs the list's DEL in reverse order (libcni `DelNetworkList`),
//! vmtap's first: without this lock vmtap's DEL would remove the file and the taps at once, the
//! update's ADD would write them again, and the delegator's DEL (which does wait for the lock)
//! would leave them behind. Under it, vmtap's DEL comes before the update or after it, never in
//! the middle. Nested in a braid plugin (vmtap in a delegate's conflist, run by the delegator's
//! ADD, update or DEL) it is inherited ([`braid_attach::nesting::HELD_ENV`]), not waited for: the
//! delegator's DEL holds the sandbox's container lock, which an update takes after this one.

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
