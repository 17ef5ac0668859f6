//! Reading the files a runtime or a meta-plugin is handed — conflists, cached results,
//! definitions, state — so that no file can hang or flood it: opened with `O_NONBLOCK` (a FIFO
//! planted in a file's place would block `open(2)` until a writer came, and every `read(2)`
//! after), checked to be a regular file before a byte is read, read up to a cap, and — where
//! asked — never through a symlink (`O_NOFOLLOW`). `O_NONBLOCK` does nothing to a regular
//! file's reads.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

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

/// Reads up to `max` bytes of an open file; a longer one is an error saying so.
pub fn read_capped(f: File, max: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
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

/// The cap on a configuration file (a conflist in a configuration directory, a network
/// definition): far above any real one, far below what could hurt.
pub const MAX_CONFIG_FILE: u64 = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_symlinks_and_large_files_are_refused_without_blocking() {
        let dir = std::env::temp_dir().join(format!("braid-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
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
}
