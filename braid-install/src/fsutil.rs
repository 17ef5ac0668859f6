//! Atomic file replacement: write a temp file in the same directory (under a name no runtime
//! loads), fsync it, rename it over the target, fsync the directory.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The temp name beside `target`: `.<name>.braid-tmp`, which ends in no CNI extension
/// (`.conf`, `.conflist`, `.json`), so containerd, CRI-O and podman never load it half-written.
pub fn temp_path(target: &Path) -> PathBuf {
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    target.with_file_name(format!(".{name}.braid-tmp"))
}

/// Replaces `target` with `bytes` (mode `mode`) atomically. A running program at `target` keeps
/// its old inode (no ETXTBSY, never half-written).
pub fn replace(target: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let tmp = temp_path(target);
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).mode(mode).open(&tmp)?;
        f.write_all(bytes)?;
        // The mode given to open is masked by the umask; set it exactly.
        f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, target)?;
        sync_dir(target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Removes `target` if present (and fsyncs its directory); true when something was removed.
pub fn remove(target: &Path) -> std::io::Result<bool> {
    match std::fs::remove_file(target) {
        Ok(()) => {
            sync_dir(target)?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

fn sync_dir(target: &Path) -> std::io::Result<()> {
    match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => File::open(dir)?.sync_all(),
        _ => Ok(()),
    }
}

/// The file's bytes, `None` when it does not exist or cannot be read.
pub fn read_opt(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}
