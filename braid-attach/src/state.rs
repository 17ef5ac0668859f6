//! Crash-safe per-attachment state.
//!
//! A meta-plugin must remember what it did so that DEL undoes exactly that, even after a crash
//! or a reboot. A state is created durably (the file fsynced, and its directory
//! where the file system needs that: [`StateStore::make_durable`]) or replaced atomically
//! and durably (temp file, fsync, rename, fsync the directory); progress is appended without an
//! fsync (an fsync on every pod start is measurable: `docs/bench/NOTES.md`), and a record lost
//! to a power failure falls back to the durable part. The directory is 0700, files 0600; symlinks
//! are never followed; file names are built only from validated IDs. A lock per container
//! serialises ADD/DEL of one container while different containers run in parallel.

use nix::fcntl::{Flock, FlockArg};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A new 0600 file that must not exist yet, never through a symlink.
fn create_new(path: &Path) -> std::io::Result<File> {
    cni_runtime::files::create_new(path, 0o600)
}

/// State is replayed as root: what DEL runs comes from it. So a state directory or file must
/// belong to this process's user and be writable by nobody else — otherwise anyone who could
/// write there could make the next DEL run a plugin of their choosing with a config of theirs.
fn trusted(meta: &fs::Metadata) -> std::io::Result<()> {
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(std::io::Error::other(format!("owned by uid {}, not by this plugin's uid {me}", meta.uid())));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(std::io::Error::other(format!("writable by group or others (mode {:o})", meta.mode() & 0o7777)));
    }
    Ok(())
}

/// A state-store failure, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("state: cannot {action} {}: {source}", .path.display())]
pub struct StateError {
    /// What was being done.
    pub action: &'static str,
    /// The file or directory.
    pub path: PathBuf,
    /// Why it failed.
    #[source]
    pub source: std::io::Error,
}

impl From<StateError> for cni_types::CniError {
    /// Code 5, the spec's I/O failure, naming the file; a lock still held at the deadline is
    /// code 11 ("try again later").
    fn from(e: StateError) -> cni_types::CniError {
        let code = match e.source.kind() {
            std::io::ErrorKind::TimedOut => cni_types::error::TRY_AGAIN_LATER,
            _ => cni_types::error::IO_FAILURE,
        };
        cni_types::CniError::new(code, e.to_string())
    }
}

/// Unlinks every state file DEL retired under the state directory `dir` ([`RETIRED`]), best
/// effort. The delegator's DELs sweep while their delegates work; braid's node agent
/// (`braid-install`) sweeps every tick, so that on a node the files of the last DELs of a burst
/// do not stay until the next DEL — deleted pods leave no state behind.
pub fn sweep_retired(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir.join(RETIRED)) else { return };
    for e in entries.flatten() {
        let _ = fs::remove_file(e.path());
    }
}

fn err(action: &'static str, path: &Path, source: std::io::Error) -> StateError {
    StateError { action, path: path.to_path_buf(), source }
}

/// The directory under a state directory where DEL leaves finished state files to be unlinked
/// later ([`StateStore::retire`]). Hidden, and without the `@` every key's file name has.
pub const RETIRED: &str = ".retired";

/// The largest state file read (64 MiB): a plan records each delegate's configuration (a
/// plugin's stdin is capped at 16 MiB, files it names at 1 MiB) and result (a plugin's stdout is
/// capped at 16 MiB); real ones are a few kilobytes. A larger file is not braid's and is
/// treated as unusable (DEL then deletes the configured delegates).
pub const MAX_STATE: u64 = 64 << 20;

/// The longest container ID kept: `<id>@<ifname>` and `<id>.lock` must fit a file name (255
/// bytes); runtimes use 64 hex characters.
pub const MAX_CONTAINER_ID: usize = 200;

/// The key of one attachment: a validated container ID and interface name. Container IDs
/// cannot contain `@`, so `<id>@<ifname>` names every pair uniquely.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    container_id: String,
    ifname: String,
}

impl Key {
    /// Validates both parts (CNI rules: no `/`, no `..`, no whitespace).
    pub fn new(container_id: &str, ifname: &str) -> Result<Key, cni_types::CniError> {
        cni_types::validate::container_id(container_id)?;
        if container_id.len() > MAX_CONTAINER_ID {
            return Err(cni_types::CniError::new(
                cni_types::error::INVALID_ENVIRONMENT_VARIABLES,
                format!(
                    "CNI_CONTAINERID is {} characters long; braid names its state files after it and takes at most {MAX_CONTAINER_ID}",
                    container_id.len()
                ),
            ));
        }
        cni_types::validate::interface_name(ifname)?;
        Ok(Key { container_id: container_id.to_string(), ifname: ifname.to_string() })
    }

    /// The container ID.
    pub fn container_id(&self) -> &str {
        &self.container_id
    }

    /// The interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    fn file_name(&self) -> String {
        format!("{}@{}", self.container_id, self.ifname)
    }

    fn parse(name: &str) -> Option<Key> {
        let (cid, ifname) = name.split_once('@')?;
        Key::new(cid, ifname).ok()
    }
}

/// A directory of state files.
#[derive(Debug, Clone)]
pub struct StateStore {
    dir: PathBuf,
}

/// A state file written by [`StateStore::create_pending`], not yet durable.
#[derive(Debug)]
pub struct Pending {
    file: File,
    path: PathBuf,
}

/// Holds the container lock; released (and its file removed) on drop.
#[derive(Debug)]
pub struct ContainerLock {
    path: PathBuf,
    lock: Option<Flock<File>>,
}

impl Drop for ContainerLock {
    fn drop(&mut self) {
        // Unlink while still holding the lock: a waiter that then acquires the old inode sees
        // that the path no longer names it and retries on a fresh file.
        let _ = fs::remove_file(&self.path);
        drop(self.lock.take());
    }
}

impl StateStore {
    /// Opens (creating with mode 0700) the directory. A symlink in its place is refused.
    pub fn open(dir: impl Into<PathBuf>) -> Result<StateStore, StateError> {
        let dir = dir.into();
        match fs::symlink_metadata(&dir) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(err("use", &dir, std::io::Error::other("is a symlink")));
            }
            Ok(m) if !m.is_dir() => return Err(err("use", &dir, std::io::Error::other("not a directory"))),
            Ok(m) => trusted(&m).map_err(|e| err("use", &dir, e))?,
            Err(_) => {
                fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(|e| err("create", &dir, e))?
            }
        }
        Ok(StateStore { dir })
    }

    /// Whether [`StateStore::open`] would accept `dir`, without creating anything: a directory
    /// that is absent (ADD creates it) or one this process may trust. For STATUS, which must
    /// have no effect on the node.
    pub fn check(dir: &Path) -> Result<(), StateError> {
        match fs::symlink_metadata(dir) {
            Ok(m) if m.file_type().is_symlink() => Err(err("use", dir, std::io::Error::other("is a symlink"))),
            Ok(m) if !m.is_dir() => Err(err("use", dir, std::io::Error::other("not a directory"))),
            Ok(m) => trusted(&m).map_err(|e| err("use", dir, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(err("use", dir, e)),
        }
    }

    /// A store at `dir` taken as it is, without creating or checking it: for a DEL that must
    /// still release the delegates when the directory is unusable (every file operation then
    /// fails and is reported).
    pub fn unchecked(dir: impl Into<PathBuf>) -> StateStore {
        StateStore { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the state of `key` lives.
    pub fn path(&self, key: &Key) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// Takes the exclusive lock of one container, waiting for a holder to finish.
    pub fn lock(&self, container_id: &str) -> Result<ContainerLock, StateError> {
        self.lock_with(container_id, true)?.ok_or_else(|| err("lock", &self.dir, std::io::Error::other("busy")))
    }

    /// The container lock, or `None` at once when `wait` is false and someone holds it.
    pub fn lock_with(&self, container_id: &str, wait: bool) -> Result<Option<ContainerLock>, StateError> {
        self.lock_until(container_id, if wait { Wait::Until(None) } else { Wait::No })
    }

    /// The container lock, waiting as `wait` says: `None` at once for [`Wait::No`] when someone
    /// holds it, an error of kind `TimedOut` naming the holder when a deadline passes first.
    pub fn lock_until(&self, container_id: &str, wait: Wait) -> Result<Option<ContainerLock>, StateError> {
        cni_types::validate::container_id(container_id)
            .map_err(|e| err("lock", &self.dir, std::io::Error::other(e.to_string())))?;
        lock_file(self.dir.join(format!("{container_id}.lock")), wait)
    }

    /// Reads a state file; `None` when there is none.
    pub fn read(&self, key: &Key) -> Result<Option<Vec<u8>>, StateError> {
        let path = self.path(key);
        // O_NONBLOCK: a FIFO planted in place of the state must not hang DEL in open(2).
        let flags = nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK;
        let file = OpenOptions::new().read(true).custom_flags(flags).open(&path);
        let file = match file {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(err("open", &path, e)),
        };
        let meta = file.metadata().map_err(|e| err("stat", &path, e))?;
        if !meta.is_file() {
            return Err(err("read", &path, std::io::Error::other("not a regular file")));
        }
        trusted(&meta).map_err(|e| err("trust", &path, e))?;
        let buf = cni_runtime::files::read_capped(file, MAX_STATE).map_err(|e| err("read", &path, e))?;
        Ok(Some(buf))
    }

    /// Replaces a state file atomically and durably ([`cni_runtime::files::replace`]).
    pub fn write(&self, key: &Key, bytes: &[u8]) -> Result<(), StateError> {
        cni_runtime::files::replace(&self.path(key), bytes, 0o600).map_err(|e| err(e.step.verb(), &e.path, e.source))
    }

    /// Creates a state file that must not exist yet, durably (file and directory fsynced) but
    /// without the temporary file and rename of [`StateStore::write`]: a crash mid-write leaves
    /// a torn file, which readers treat as corrupt. Falls back to `write` when it exists.
    pub fn create(&self, key: &Key, bytes: &[u8]) -> Result<(), StateError> {
        match self.create_pending(key, bytes)? {
            Some(pending) => self.make_durable(&pending),
            None => Ok(()),
        }
    }

    /// [`StateStore::create`] in two steps: the file written (in the page cache: a crash of
    /// the process loses nothing), and — by [`StateStore::make_durable`] — on disk. Whatever
    /// must not happen before the state would survive a power failure waits for the second
    /// step; what only prepares it (starting a delegate's process, which acts only once it is
    /// sent its configuration) can run meanwhile. `None` when the file existed and was
    /// replaced durably at once.
    pub fn create_pending(&self, key: &Key, bytes: &[u8]) -> Result<Option<Pending>, StateError> {
        let path = self.path(key);
        let mut f = match create_new(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return self.write(key, bytes).map(|()| None),
            Err(e) => return Err(err("create", &path, e)),
        };
        if let Err(e) = f.write_all(bytes) {
            // A full disk must not leave an empty state behind until some DEL.
            let _ = fs::remove_file(&path);
            return Err(err("write", &path, e));
        }
        Ok(Some(Pending { file: f, path }))
    }

    /// The second step of [`StateStore::create_pending`]: the file and its directory entry
    /// made durable — the file fsynced, and the directory too unless the file system persists
    /// a new file's entry with the file's own fsync (`entry_durable_with_file`: ext4 and
    /// XFS, where the directory's fsync is one more synchronous write of its inode, 0.1–4 ms
    /// on this machine's disk, for nothing the plan needs). The directory is looked up either
    /// way: a plan whose directory is no longer where DEL looks is not durable. On failure the
    /// file is removed (nothing may rely on it).
    pub fn make_durable(&self, pending: &Pending) -> Result<(), StateError> {
        if let Err(e) = pending.file.sync_all() {
            let _ = fs::remove_file(&pending.path);
            return Err(err("fsync", &pending.path, e));
        }
        let fs = nix::sys::statfs::statfs(&self.dir).map_err(|e| err("fsync", &self.dir, e.into()))?;
        if entry_durable_with_file(fs.filesystem_type()) {
            return Ok(());
        }
        self.sync_dir()
    }

    /// Appends one record to an existing state file with a single `write(2)` and `O_APPEND`:
    /// records appended at the same time (a parallel ADD's delegates, each on its own thread)
    /// land whole, one after the other, never interleaved. A short write (a full disk) is an
    /// error, never completed by a second write another record could slip in before. Not
    /// fsynced: a record lost to a power failure leaves the durable part intact, and a torn
    /// record is recognisable (it does not end in a newline, or does not decode).
    pub fn append(&self, key: &Key, record: &[u8]) -> Result<(), StateError> {
        let path = self.path(key);
        let mut f = OpenOptions::new()
            .append(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| err("open", &path, e))?;
        loop {
            match f.write(record) {
                Ok(n) if n == record.len() => return Ok(()),
                Ok(n) => {
                    let short = format!("short write: {n} of {} bytes", record.len());
                    return Err(err("append to", &path, std::io::Error::other(short)));
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(err("append to", &path, e)),
            }
        }
    }

    /// Removes a state file; a missing one is fine. Not fsynced: a removal lost to a power
    /// failure brings back a state whose DEL is replayed harmlessly (DEL is idempotent) or
    /// dropped by GC.
    pub fn remove(&self, key: &Key) -> Result<(), StateError> {
        let path = self.path(key);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(err("remove", &path, e)),
        }
    }

    /// [`StateStore::remove`] for DEL, which waits for it: the state file is renamed into
    /// [`RETIRED`] — a name no key parses, so no read, DEL or GC ever finds it again, exactly
    /// as if it were unlinked — and its blocks are freed later by [`StateStore::sweep_retired`]
    /// while another DEL's delegate works. Unlinking a file that was fsynced frees its data
    /// block, which on a disk mounted `discard` without a journal (this machine's) sends the
    /// discard from `unlink` itself and waits for it: 0.1–0.7 ms by the disk's load, against
    /// ~20 µs for the rename (`docs/bench/NOTES.md`, the delegator's fixed cost). As safe as
    /// the unlink: neither is fsynced, and a crash before or after either leaves the state or
    /// nothing. Anything but a regular file — and a file the rename fails for — is removed as
    /// before.
    pub fn retire(&self, key: &Key) -> Result<(), StateError> {
        let path = self.path(key);
        if fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            let dir = self.dir.join(RETIRED);
            // One file per process (a DEL retires one); an older one of a reused pid is replaced.
            let to = dir.join(std::process::id().to_string());
            if fs::rename(&path, &to).is_ok() {
                return Ok(());
            }
            if fs::DirBuilder::new().mode(0o700).create(&dir).is_ok() && fs::rename(&path, &to).is_ok() {
                return Ok(());
            }
        }
        self.remove(key)
    }

    /// Unlinks every retired state file ([`StateStore::retire`]), best effort: what fails stays
    /// for the next sweep. Nothing reads them, so this may run at any time, also while another
    /// process retires or sweeps.
    pub fn sweep_retired(&self) {
        sweep_retired(&self.dir);
    }

    /// Every key with a state file (GC walks these).
    pub fn keys(&self) -> Result<Vec<Key>, StateError> {
        let mut keys = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(|e| err("list", &self.dir, e))? {
            let entry = entry.map_err(|e| err("list", &self.dir, e))?;
            if let Some(key) = entry.file_name().to_str().and_then(Key::parse) {
                keys.push(key);
            }
        }
        keys.sort();
        Ok(keys)
    }

    fn sync_dir(&self) -> Result<(), StateError> {
        File::open(&self.dir).and_then(|d| d.sync_all()).map_err(|e| err("fsync", &self.dir, e))
    }
}

/// Whether on a file system of type `fs` an fsync of a newly created file also makes its
/// directory entry durable, so that the directory's own fsync adds nothing to a plan's
/// durability (POSIX promises it only with the directory fsynced; these file systems do more):
/// - **ext4** (also ext2/ext3 volumes, which the ext4 driver mounts): with a journal, the entry
///   and the new inode are changed in one handle of one transaction, and the file's fsync
///   commits that transaction or a later one (`ext4_fsync_journal`, `fs/ext4/fsync.c`); without
///   a journal, the fsync of a file created since it was last synced writes its parent
///   directory's blocks and inode itself (`ext4_sync_parent`, same file: "If we're not
///   journaling and this is a just-created file, we have to sync our parent directory").
///   Observed here (ext4 without a journal, `perf record -e block:block_rq_issue` over an ADD):
///   the plan's fsync writes its data block, its inode's block and the state directory's data
///   block (its only block, by `filefrag -v`); the directory's fsync after it wrote one more
///   block, the directory's inode (times and size: nothing a lookup of the plan needs).
/// - **XFS**: `xfs_create` logs the directory and the new inode in one transaction, and
///   `xfs_file_fsync` forces the log up to the inode's last commit, which is that one or later.
///
/// Any other file system (btrfs, tmpfs, network ones) keeps the directory's fsync. (The
/// deprecated separate ext2 driver, which shares ext4's magic number and does not sync the
/// parent, is not what nodes run: Debian, Ubuntu and Fedora kernels mount ext2 with the ext4
/// driver.)
fn entry_durable_with_file(fs: nix::sys::statfs::FsType) -> bool {
    // `include/uapi/linux/magic.h` (nix leaves XFS's out of musl builds).
    const EXT4_SUPER_MAGIC: i64 = 0xEF53;
    const XFS_SUPER_MAGIC: i64 = 0x5846_5342;
    #[allow(clippy::unnecessary_cast)] // `f_type`'s width differs between libcs
    let magic = fs.0 as i64;
    magic == EXT4_SUPER_MAGIC || magic == XFS_SUPER_MAGIC
}

/// How long a lock is waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Not at all: a held lock is `None` at once.
    No,
    /// Until the deadline (`None`: as long as it takes).
    Until(Option<Instant>),
}

/// The longest nap between two attempts on a held lock (`flock(2)` has no timed wait; the
/// naps start at 1 ms and double).
const MAX_NAP: Duration = Duration::from_millis(50);

/// Takes an exclusive `flock` on `path` (created 0600, never through a symlink), waiting as
/// `wait` says. The file is removed when the lock is released; a waiter that then holds a lock
/// on a file no longer at `path` starts again, so two holders never coexist. A deadline that
/// passes first is an error of kind `TimedOut` that names the holder where `/proc/locks` does.
pub fn lock_file(path: PathBuf, wait: Wait) -> Result<Option<ContainerLock>, StateError> {
    let mut nap = Duration::from_millis(1);
    loop {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| err("open lock", &path, e))?;
        let how = match wait {
            Wait::Until(None) => FlockArg::LockExclusive,
            _ => FlockArg::LockExclusiveNonblock,
        };
        let mut attempt = Flock::lock(file, how);
        while let (Err((file, nix::errno::Errno::EWOULDBLOCK)), Wait::Until(Some(until))) = (&attempt, wait) {
            let now = Instant::now();
            if now >= until {
                let held = holder(file).map_or_else(String::new, |h| format!(" by {h}"));
                let why =
                    std::io::Error::new(std::io::ErrorKind::TimedOut, format!("still held{held} at the deadline"));
                return Err(err("lock", &path, why));
            }
            std::thread::sleep(nap.min(until - now));
            nap = (nap * 2).min(MAX_NAP);
            let Err((file, _)) = attempt else { break };
            attempt = Flock::lock(file, FlockArg::LockExclusiveNonblock);
        }
        let locked = match attempt {
            Ok(l) => l,
            Err((_, nix::errno::Errno::EWOULDBLOCK)) if wait == Wait::No => return Ok(None),
            Err((_, e)) => return Err(err("lock", &path, e.into())),
        };
        let held = locked.metadata().map_err(|e| err("stat lock", &path, e))?;
        match fs::symlink_metadata(&path) {
            Ok(now) if now.ino() == held.ino() && now.dev() == held.dev() => {
                return Ok(Some(ContainerLock { path, lock: Some(locked) }));
            }
            _ => continue,
        }
    }
}

/// Who holds the `flock` on `file`: `pid 1234 (delegator)`, from `/proc/locks` (`proc(5)`: a
/// line `1: FLOCK  ADVISORY  WRITE <pid> <major>:<minor>:<inode> 0 EOF`, device numbers in
/// hex; lines of waiters carry `->`) and the holder's `/proc/<pid>/comm`.
fn holder(file: &File) -> Option<String> {
    use cni_runtime::files::{read_regular, Links};
    let meta = file.metadata().ok()?;
    let id =
        format!("{:02x}:{:02x}:{}", nix::sys::stat::major(meta.dev()), nix::sys::stat::minor(meta.dev()), meta.ino());
    let locks = read_regular(Path::new("/proc/locks"), 8 << 20, Links::Refuse).ok()?;
    let locks = String::from_utf8_lossy(&locks);
    let pid = locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.get(1) == Some(&"FLOCK") && f.get(5) == Some(&id.as_str())).then(|| f.get(4).map(|p| p.to_string()))?
    })?;
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    Some(match comm.trim() {
        "" => format!("pid {pid}"),
        c => format!("pid {pid} ({c})"),
    })
}
