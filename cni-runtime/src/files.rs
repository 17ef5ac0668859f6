//! Reading the files a runtime or a meta-plugin is handed — conflists, cached results,
//! definitions, state — so that no file can hang or flood it: opened with `O_NONBLOCK` (a FIFO
//! planted in a file's place would block `open(2)` until a writer came, and every `read(2)`
//! after), checked to be a regular file before a byte is read, read up to a cap, and — where
//! asked — never through a symlink (`O_NOFOLLOW`). `O_NONBLOCK` does nothing to a regular
//! file's reads.
//!
//! And writing the files braid keeps — state, the result cache, network-status documents, Kata
//! DAN files, the installer's conflists and binaries — with one atomic replacement
//! ([`replace`]): a reader sees the old bytes or the new, never a torn file, and the new ones
//! survive a power failure once it returned ([`replace_volatile`]: the same without the last
//! promise, for files that mean nothing after a reboot).

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Whether the last component of a path may be a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Followed (what libcni does for conflists in a configuration directory).
    Follow,
    /// Refused (`ELOOP`, "too many levels of symbolic links"): for files in directories that
    /// braid owns, where a symlink is never braid's own doing.
    Refuse,
}

/// Opens `path` for reading without blocking on a FIFO, refusing anything but a regular file.
pub fn open_regular(path: &Path, links: Links) -> std::io::Result<File> {
    let mut flags = nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC;
    if links == Links::Refuse {
        flags |= nix::libc::O_NOFOLLOW;
    }
    let f = std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(f)
}

/// Reads up to `max` bytes of an open file; a longer one is an error saying so. The buffer is
/// sized from the file's length up front: grown from nothing, a 1.5 KB state file took seven
/// `read(2)`s.
pub fn read_capped(f: File, max: u64) -> std::io::Result<Vec<u8>> {
    let expected = f.metadata().map_or(0, |m| m.len()).min(max).saturating_add(1);
    let mut bytes = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
    f.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::other(format!("larger than {max} bytes")));
    }
    Ok(bytes)
}

/// [`open_regular`] then [`read_capped`]. A missing file keeps `ErrorKind::NotFound`.
pub fn read_regular(path: &Path, max: u64, links: Links) -> std::io::Result<Vec<u8>> {
    read_capped(open_regular(path, links)?, max)
}

/// Creates a new file for writing with `mode` (less the umask), failing if anything — a file, a
/// symlink, a FIFO — already stands at `path`: what a temporary file before a rename needs.
pub fn create_new(path: &Path, mode: u32) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(path)
}

/// The step of a [`replace`] that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Creating the temporary file (and giving it its mode).
    Create,
    /// Writing the bytes into it.
    Write,
    /// `fsync(2)` of the temporary file.
    Fsync,
    /// `rename(2)` over the target.
    Rename,
    /// `fsync(2)` of the directory, which makes the rename durable. The target already holds
    /// the new bytes when only this failed.
    SyncDir,
}

impl Step {
    /// The verb of messages: `create`, `write`, `fsync`, `rename into`, `fsync`.
    pub fn verb(self) -> &'static str {
        match self {
            Step::Create => "create",
            Step::Write => "write",
            Step::Fsync | Step::SyncDir => "fsync",
            Step::Rename => "rename into",
        }
    }
}

/// A [`replace`] that failed: the step, the path it failed on (the temporary file, the target
/// for the rename, the directory for its fsync) and the system's error.
#[derive(Debug, thiserror::Error)]
#[error("cannot {} {}: {source}", .step.verb(), .path.display())]
pub struct ReplaceError {
    /// What failed.
    pub step: Step,
    /// Where.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// The temporary file [`replace`] writes beside `target`: `.<name>.tmp<pid>` — hidden, ending
/// in no CNI extension (`.conf`, `.conflist`, `.json`: no runtime loads it half-written), one
/// per process (two processes replacing one target never share it).
pub fn temp_beside(target: &Path) -> PathBuf {
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    target.with_file_name(format!(".{name}.tmp{}", std::process::id()))
}

/// Replaces `target` with `bytes` atomically and durably, through [`temp_beside`]: the
/// temporary file is created with `O_EXCL|O_NOFOLLOW` (nothing planted in its place is
/// followed or written through; a leftover of an earlier attempt is removed first) and
/// exactly `mode` (the umask does not apply), written, fsynced, renamed over `target`, and the
/// directory fsynced. A program running from `target` keeps its old inode (no `ETXTBSY`). On
/// failure before the rename the temporary file is removed and `target` is untouched.
pub fn replace(target: &Path, bytes: &[u8], mode: u32) -> Result<(), ReplaceError> {
    replace_via(target, &temp_beside(target), bytes, mode)
}

/// [`replace`] without its two fsyncs: atomic — a reader, and whatever a crash of the writer
/// leaves, sees the old bytes or the new, never a torn file — but not durable: after a power
/// failure the file may hold the old bytes, none, or be gone. For a file that means nothing
/// after a reboot: one under `/run` (a tmpfs on every systemd host, where an fsync does nothing)
/// describing a live sandbox, which a reboot ends. On a disk the two fsyncs cost 0.5–1 ms.
pub fn replace_volatile(target: &Path, bytes: &[u8], mode: u32) -> Result<(), ReplaceError> {
    write_and_rename(target, &temp_beside(target), bytes, mode, false)
}

/// The error of `step` on `path`, for `map_err`.
fn fail(step: Step, path: &Path) -> impl FnOnce(std::io::Error) -> ReplaceError + '_ {
    move |source| ReplaceError { step, path: path.to_path_buf(), source }
}

/// [`replace`] through a temporary file of the caller's naming, in `target`'s directory: for
/// a writer whose temporary name others know (a DEL that removes a leftover, an installer
/// whose names are documented).
pub fn replace_via(target: &Path, temp: &Path, bytes: &[u8], mode: u32) -> Result<(), ReplaceError> {
    write_and_rename(target, temp, bytes, mode, true)
}

/// [`replace_via`], the fsyncs only when `durable`.
fn write_and_rename(target: &Path, temp: &Path, bytes: &[u8], mode: u32, durable: bool) -> Result<(), ReplaceError> {
    let _ = std::fs::remove_file(temp);
    let written = (|| {
        let mut f = create_new(temp, mode).map_err(fail(Step::Create, temp))?;
        f.set_permissions(std::fs::Permissions::from_mode(mode)).map_err(fail(Step::Create, temp))?;
        f.write_all(bytes).map_err(fail(Step::Write, temp))?;
        if durable {
            f.sync_all().map_err(fail(Step::Fsync, temp))?;
        }
        drop(f);
        std::fs::rename(temp, target).map_err(fail(Step::Rename, target))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(temp);
        return written;
    }
    if !durable {
        return Ok(());
    }
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir).and_then(|d| d.sync_all()).map_err(fail(Step::SyncDir, dir))
}

/// The cap on a configuration file (a conflist in a configuration directory, a network
/// definition): far above any real one, far below what could hurt.
pub const MAX_CONFIG_FILE: u64 = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty directory of this test's own.
    fn fresh(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("braid-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn fifos_symlinks_and_large_files_are_refused_without_blocking() {
        let dir = fresh("files");
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = read_regular(&fifo, 10, Links::Follow).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file");
        std::fs::write(dir.join("file"), b"0123456789").unwrap();
        assert_eq!(read_regular(&dir.join("file"), 10, Links::Refuse).unwrap(), b"0123456789");
        assert_eq!(read_regular(&dir.join("file"), 9, Links::Refuse).unwrap_err().to_string(), "larger than 9 bytes");
        std::os::unix::fs::symlink(dir.join("file"), dir.join("link")).unwrap();
        assert_eq!(read_regular(&dir.join("link"), 10, Links::Follow).unwrap(), b"0123456789");
        let e = read_regular(&dir.join("link"), 10, Links::Refuse).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(nix::libc::ELOOP));
        std::os::unix::fs::symlink(&fifo, dir.join("fifolink")).unwrap();
        assert!(read_regular(&dir.join("fifolink"), 10, Links::Follow).is_err());
        assert_eq!(
            read_regular(&dir.join("absent"), 10, Links::Refuse).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn replace_is_whole_exact_in_mode_and_never_writes_through_a_link() {
        use std::os::unix::fs::MetadataExt;
        let dir = fresh("replace");
        let target = dir.join("00-x.conflist");
        replace(&target, b"one", 0o644).unwrap();
        let first = std::fs::metadata(&target).unwrap();
        assert_eq!((std::fs::read(&target).unwrap(), first.mode() & 0o777), (b"one".to_vec(), 0o644));
        replace(&target, b"two", 0o600).unwrap();
        let second = std::fs::metadata(&target).unwrap();
        assert_eq!((std::fs::read(&target).unwrap(), second.mode() & 0o777), (b"two".to_vec(), 0o600));
        assert_ne!(first.ino(), second.ino(), "a new inode: who runs the old one keeps it");
        let temp = temp_beside(&target);
        assert_eq!(temp, dir.join(format!(".00-x.conflist.tmp{}", std::process::id())));
        // A symlink planted at the temporary name is removed, not followed.
        std::fs::write(dir.join("victim"), b"keep").unwrap();
        std::os::unix::fs::symlink(dir.join("victim"), &temp).unwrap();
        replace(&target, b"three", 0o600).unwrap();
        assert_eq!(std::fs::read(dir.join("victim")).unwrap(), b"keep");
        assert_eq!(std::fs::read(&target).unwrap(), b"three");
        // A failed rename names the target and leaves no temporary file.
        let e = replace(&dir.join("absent").join("x"), b"", 0o600).unwrap_err();
        assert_eq!(e.step, Step::Create);
        let e = replace_via(&dir.join("sub/x"), &dir.join(".x.tmp"), b"", 0o600).unwrap_err();
        assert_eq!((e.step, e.path.clone()), (Step::Rename, dir.join("sub/x")));
        assert!(e.to_string().starts_with(&format!("cannot rename into {}/sub/x: ", dir.display())), "{e}");
        assert!(!dir.join(".x.tmp").exists());
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left.len(), 2, "{left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
