//! Entering network namespaces.
//!
//! `setns(2)` changes the namespace of one *thread*, and sockets belong to the namespace they
//! were created in. So work inside a container namespace runs on a dedicated OS thread that
//! enters the namespace, does the work and ends — it never returns to a pool, and the calling
//! thread's namespace is never touched ([`run_in`]). The one exception, [`run_here_in_file`],
//! only makes a socket: the calling thread enters, makes it, and returns at once.

use nix::sched::{setns, CloneFlags};
use nix::sys::statfs::fstatfs;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// `NSFS_MAGIC`: files under `/run/netns` (bind mounts) and `/proc/*/ns/*`.
const NSFS_MAGIC: i64 = 0x6e73_6673;
/// `PROC_SUPER_MAGIC`: older kernels report `/proc/<pid>/ns/net` as procfs.
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

/// Why a namespace could not be entered.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// `failed to open netns "<path>": <err>` (the path is missing or unreadable).
    #[error("failed to open netns {path:?}: {1}", path = .0.display().to_string())]
    Open(PathBuf, #[source] std::io::Error),
    /// `unknown FS magic on "<path>": <hex>`: the path is not a namespace file.
    #[error("unknown FS magic on {path:?}: {1:x}", path = .0.display().to_string())]
    NotNetns(PathBuf, i64),
    /// The path is a namespace, but not a network namespace, or setns failed.
    #[error("failed to enter netns {path:?}: {1} (is it a network namespace?)", path = .0.display().to_string())]
    Enter(PathBuf, #[source] nix::Error),
    /// The work panicked on the namespace thread.
    #[error("work inside netns {path:?} panicked", path = .0.display().to_string())]
    Panicked(PathBuf),
}

impl NetnsError {
    /// Whether the namespace is simply gone (DEL treats this as success).
    pub fn is_missing(&self) -> bool {
        matches!(self, NetnsError::Open(_, e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

impl From<NetnsError> for cni_types::CniError {
    /// A path that is not a network namespace is a bad `CNI_NETNS` (code 4, the spec's
    /// "invalid environment variable"); one that cannot be opened, or work that panicked, is
    /// code 999 with the path in the message, as Go plugins report `ns.GetNS` failures.
    fn from(e: NetnsError) -> cni_types::CniError {
        use cni_types::error::{INTERNAL, INVALID_ENVIRONMENT_VARIABLES};
        let code = match e {
            NetnsError::NotNetns(..) | NetnsError::Enter(..) => INVALID_ENVIRONMENT_VARIABLES,
            NetnsError::Open(..) | NetnsError::Panicked(_) => INTERNAL,
        };
        cni_types::CniError::new(code, e.to_string())
    }
}

/// Opens a namespace file and checks that it is one. `O_NONBLOCK`: a FIFO at `CNI_NETNS` would
/// otherwise block `open(2)` until a writer came, before the filesystem check could refuse it
/// (nsfs ignores the flag). Symlinks are followed: `/proc/<pid>/ns/net` is one, and runtimes
/// pass it.
pub fn open(path: &Path) -> Result<File, NetnsError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| NetnsError::Open(path.to_path_buf(), e))?;
    let st = fstatfs(&file).map_err(|e| NetnsError::Open(path.to_path_buf(), e.into()))?;
    let magic = st.filesystem_type().0 as i64;
    if magic != NSFS_MAGIC && magic != PROC_SUPER_MAGIC {
        return Err(NetnsError::NotNetns(path.to_path_buf(), magic));
    }
    Ok(file)
}

/// Runs `work` on a new OS thread inside the network namespace at `path`, and returns its
/// value. The thread ends with the work, so its namespace dies with it.
pub fn run_in<T: Send, F: FnOnce() -> T + Send>(path: &Path, work: F) -> Result<T, NetnsError> {
    run_in_file(&open(path)?, path, work)
}

/// [`run_in`] for a namespace already opened (and checked) with [`open`]; `path` names it in
/// errors. A plugin that reads a namespace several times opens it once, and can open a socket
/// here that keeps serving it from any thread: a socket belongs to the namespace it was made in.
pub fn run_in_file<T: Send, F: FnOnce() -> T + Send>(file: &File, path: &Path, work: F) -> Result<T, NetnsError> {
    std::thread::scope(|s| {
        let handle = s.spawn(move || {
            setns(file, CloneFlags::CLONE_NEWNET).map_err(|e| NetnsError::Enter(path.to_path_buf(), e))?;
            Ok(work())
        });
        handle.join().unwrap_or_else(|_| Err(NetnsError::Panicked(path.to_path_buf())))
    })
}

/// [`run_in_file`] on the calling thread, for `work` that only makes something which keeps the
/// namespace it was made in (an rtnetlink socket) and runs nothing else: the thread enters the
/// namespace, runs `work` and returns to its own namespace before this returns. No thread is
/// created and joined — on a busy node each is a scheduler wake-up, and a delegator's ADD
/// waited 0.8–4 ms for the one it entered the pod namespace on, on a loaded two-core machine
/// (braid's `docs/bench/NOTES.md`). A thread that cannot return to its own namespace must not
/// run anything more (it would run the caller's next plugins in the container's namespace):
/// the process aborts, saying why.
pub fn run_here_in_file<T, F: FnOnce() -> T>(file: &File, path: &Path, work: F) -> Result<T, NetnsError> {
    let here = Path::new("/proc/thread-self/ns/net");
    let home = File::open(here).map_err(|e| NetnsError::Open(here.to_path_buf(), e))?;
    setns(file, CloneFlags::CLONE_NEWNET).map_err(|e| NetnsError::Enter(path.to_path_buf(), e))?;
    let out = work();
    if let Err(e) = setns(&home, CloneFlags::CLONE_NEWNET) {
        eprintln!("cannot return to this thread's own network namespace after entering {}: {e}", path.display());
        std::process::abort();
    }
    Ok(out)
}

/// Identifies a namespace file by device and inode (equal identities: the same namespace).
pub fn identity(path: &Path) -> std::io::Result<(u64, u64)> {
    let m = std::fs::metadata(path)?;
    Ok((m.dev(), m.ino()))
}

/// Whether a result's `sandbox` names the network namespace at `netns` (`CNI_NETNS`): the same
/// path, or another path of the same namespace — `/var/run/netns/x` and `/run/netns/x`, a bind
/// mount, `/proc/<pid>/ns/net` — by device and inode. The namespace's identity is read once; a
/// sandbox that cannot be read is another namespace. The one "same namespace" test of the
/// plugins that read a result's sandboxes (vmtap, the verifier).
pub fn sandbox_matcher(netns: &str) -> impl Fn(&str) -> bool + '_ {
    let target = identity(Path::new(netns)).ok();
    move |sandbox: &str| sandbox == netns || (target.is_some() && identity(Path::new(sandbox)).ok() == target)
}

/// The identity of the calling thread's network namespace.
pub fn current_identity() -> std::io::Result<(u64, u64)> {
    identity(Path::new("/proc/thread-self/ns/net")).or_else(|_| identity(Path::new("/proc/self/ns/net")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files stand in for namespace files: identity is device and inode, whatever the file.
    #[test]
    fn a_sandbox_is_the_namespace_by_path_or_by_identity() {
        let dir = std::env::temp_dir().join(format!("braid-sandbox-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (ns, other, alias) = (dir.join("pod"), dir.join("other"), dir.join("alias"));
        std::fs::write(&ns, b"").unwrap();
        std::fs::write(&other, b"").unwrap();
        std::os::unix::fs::symlink(&ns, &alias).unwrap();
        let path = ns.display().to_string();
        let is_pod = sandbox_matcher(&path);
        assert!(is_pod(&path));
        assert!(is_pod(&alias.display().to_string()), "another path of the same namespace");
        assert!(!is_pod(&other.display().to_string()));
        assert!(!is_pod("ctr-id") && !is_pod(""));
        // A namespace that cannot be read matches its own path only.
        let gone = dir.join("gone").display().to_string();
        let is_gone = sandbox_matcher(&gone);
        assert!(is_gone(&gone) && !is_gone(&path));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
