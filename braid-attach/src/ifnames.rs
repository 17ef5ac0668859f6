//! Interface names that never collide, whoever else works in the pod namespace.
//!
//! Runtimes set up a pod's networks concurrently (containerd's go-cni does, for
//! `max_conf_num > 1`), and two braid networks in one pod would both pick `net1`. So the names
//! braid chooses are chosen under a lock keyed by the namespace's identity (device and inode of
//! its nsfs file, the same for every path that names it), one lock for every braid plugin on the
//! node, held from the choice until the delegates' ADDs have returned: a second ADD in the same
//! namespace sees the first one's interfaces in the kernel. An explicitly named interface that
//! already exists is refused (code 7) before any delegate is sent its configuration.
//!
//! The lock is a file of braid's own, never a `flock` of the namespace's nsfs file itself: the
//! reference `sbr` plugin locks that file while it works (`withLockAndNetNS`,
//! containernetworking/plugins `plugins/meta/sbr/main.go`), and a braid plugin holds this lock
//! while its delegates run — a delegate `sbr` would wait for the plugin waiting for it.

use crate::deadline::Deadline;
use crate::delegate::Delegate;
use crate::nesting::HELD_ENV;
use crate::sandbox::PodNetns;
use crate::state::{lock_file, ContainerLock, Wait};
use cni_types::error::INVALID_NETWORK_CONFIG;
use cni_types::CniError;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

/// Where the per-namespace locks live (tmpfs: they mean nothing after a reboot).
pub const LOCK_DIR: &str = "/run/braid/netns-locks";

/// The lock of one pod namespace (none when an enclosing braid plugin holds it); released,
/// and its file removed, on drop.
#[derive(Debug)]
pub struct NetnsLock {
    _lock: Option<ContainerLock>,
    held: String,
}

impl NetnsLock {
    /// The value of [`HELD_ENV`] for this plugin's delegates.
    pub fn held(&self) -> &str {
        &self.held
    }
}

/// Locks the namespace at `netns`, refuses fixed names that exist there, and gives each
/// auto-named delegate the first `net<N>` (N ≥ 1) that neither the namespace nor an earlier
/// delegate of this plan has. Hold the returned lock until the delegates' ADDs returned. The
/// lock is waited for until the ADD part of `deadline` ends (then code 11, naming the holder).
pub fn assign(
    pod: &mut PodNetns,
    delegates: &mut [Delegate],
    lock_dir: &Path,
    deadline: &Deadline,
) -> Result<NetnsLock, CniError> {
    let lock = lock(pod, lock_dir, deadline)?;
    name(pod, delegates, &lock)?;
    Ok(lock)
}

/// The first half of [`assign`]: the namespace's lock alone. An update of a live attachment
/// ([`crate::update`]) takes it before the container's lock, as ADD does, and names its added
/// delegates ([`name`]) only once it has removed the ones no longer wanted, whose names are
/// then free again.
pub fn lock(pod: &mut PodNetns, lock_dir: &Path, deadline: &Deadline) -> Result<NetnsLock, CniError> {
    let netns = pod.path().to_string();
    // Opening checks that it is a network namespace (code 4 otherwise) before anything else.
    let (dev, ino) = pod.identity()?;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(lock_dir).map_err(|e| {
        CniError::new(cni_types::error::IO_FAILURE, format!("cannot create {}: {e}", lock_dir.display()))
    })?;
    let id = format!("{dev}:{ino}");
    let inherited = std::env::var(HELD_ENV).unwrap_or_default();
    let lock = if inherited.split(',').any(|h| h == id) {
        None
    } else {
        lock_file(lock_dir.join(format!("netns-{dev}-{ino}.lock")), Wait::Until(deadline.add_until())).map_err(|e| {
            match e.source.kind() {
                std::io::ErrorKind::TimedOut => deadline.passed(format_args!(
                    "the lock of pod namespace {netns} ({}: {})",
                    e.path.display(),
                    e.source
                )),
                _ => e.into(),
            }
        })?
    };
    Ok(NetnsLock { _lock: lock, held: held_with(&inherited, dev, ino) })
}

/// The second half of [`assign`], under `lock`: fixed names that exist in the namespace
/// refused, auto-named delegates given the first free `net<N>`.
pub fn name(pod: &mut PodNetns, delegates: &mut [Delegate], lock: &NetnsLock) -> Result<(), CniError> {
    let netns = pod.path().to_string();
    let present: Vec<String> = pod.links()?.into_iter().map(|l| l.name).collect();
    for (i, d) in delegates.iter().enumerate() {
        if !d.auto_ifname && present.contains(&d.ifname) {
            return Err(CniError::new(
                INVALID_NETWORK_CONFIG,
                format!("delegates[{i}] ({}): interface {} already exists in {netns}", d.name(), d.ifname),
            ));
        }
    }
    let mut taken: Vec<String> = delegates.iter().filter(|d| !d.auto_ifname).map(|d| d.ifname.clone()).collect();
    taken.extend(present);
    if lock._lock.is_none() {
        // The caller holds the lock for us: the names it chose may not exist yet.
        taken.extend(enclosing_names());
    }
    for d in delegates.iter_mut().filter(|d| d.auto_ifname) {
        let name = (1..).map(|n| format!("net{n}")).find(|n| !taken.contains(n)).unwrap_or_default();
        taken.push(name.clone());
        d.ifname = name;
    }
    Ok(())
}

/// The interface names the enclosing braid plugins' plans chose ([`crate::nesting::PLANS_ENV`]);
/// a plan that cannot be read adds none (its names then show in the kernel once created).
fn enclosing_names() -> Vec<String> {
    let read =
        |p: &Path| cni_runtime::files::read_regular(p, crate::state::MAX_STATE, cni_runtime::files::Links::Refuse);
    crate::nesting::enclosing_plans()
        .iter()
        .filter_map(|p| crate::plan::Plan::decode(&read(p).ok()?))
        .flat_map(|plan| plan.attachments.into_iter().map(|a| a.ifname))
        .collect()
}

/// What [`HELD_ENV`] says to the delegates of a plugin that holds (or inherited) the lock of
/// the namespace `dev`:`ino`, given what this plugin inherited.
pub(crate) fn held_with(inherited: &str, dev: u64, ino: u64) -> String {
    match inherited {
        "" => format!("{dev}:{ino}"),
        _ => format!("{inherited},{dev}:{ino}"),
    }
}

/// Removes the lock file of the namespace at `netns` when nobody holds it: one an ADD killed
/// while holding it left behind (a SIGKILL runs no destructor). DEL calls this; it never waits,
/// never creates a file, and leaves a held lock alone.
pub fn sweep(netns: &str, lock_dir: &Path) {
    let Ok((dev, ino)) = cni_skel::netns::identity(Path::new(netns)) else { return };
    let path = lock_dir.join(format!("netns-{dev}-{ino}.lock"));
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
        // Taken and at once released: the release removes the file.
        drop(lock_file(path, Wait::No));
    }
}
