//! Who owns which file of networksDir when both sources run: the ConfigMap mirror
//! ([`crate::mirror`]) and the NetworkAttachmentDefinition mirror ([`crate::nad_mirror`]).
//!
//! When both define `<namespace>/<name>`, **the NAD wins**: it is the object the cluster's own
//! tools show and read (`kubectl get net-attach-def`, KubeVirt, admission), that its namespace's
//! owners manage under RBAC, and that a pod's network-status names; the ConfigMap is braid's way
//! for clusters without the API mode. The ConfigMap's definition is used again once the NAD is
//! deleted (at the ConfigMap mirror's next pass, within `--interval`).
//!
//! A NAD takes the name over as soon as it exists, also when it cannot be mirrored (its config
//! is refused): the ConfigMap key is no longer used, and the file keeps what it held — the
//! ConfigMap's last version, or nothing — until the NAD's config is good, as a NAD's own last
//! good version stays while a newer one is refused. Pods keep starting as before; the
//! ConfigMap's later edits do not apply; the Event on the NAD says why.
//!
//! The NAD mirror's record is loaded into the set before either mirror writes (`run`), so the
//! ConfigMap mirror's first pass after a restart never overwrites a file a NAD owns.
//!
//! One lock serialises both mirrors' writes, and holds the set of files a NAD backs, so a
//! ConfigMap pass never overwrites a NAD's file that appeared during the pass.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

/// The files (`<namespace>/<name>.conflist`, relative to networksDir) a NAD backs, behind the
/// lock both mirrors write under.
#[derive(Debug, Clone, Default)]
pub struct Owners(Arc<Mutex<BTreeSet<String>>>);

impl Owners {
    /// Takes the lock; a mirror holds it for the whole of a pass or a write.
    pub fn lock(&self) -> MutexGuard<'_, BTreeSet<String>> {
        // A panic while holding it leaves a set that is still a set: go on with it.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
