//! The installer's files: replaced atomically through a temporary name no runtime loads
//! (`cni_runtime::files` does the replacing), removed durably, read when present.

use std::fs::File;
use std::path::{Path, PathBuf};

/// The temp name beside `target`: `.<name>.braid-tmp`, which ends in no CNI extension
/// (`.conf`, `.conflist`, `.json`), so containerd, CRI-O and podman never load it half-written.
pub fn temp_path(target: &Path) -> PathBuf {
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    target.with_file_name(format!(".{name}.braid-tmp"))
}

/// Replaces `target` with `bytes` (exactly mode `mode`) atomically and durably through
/// [`temp_path`] ([`cni_runtime::files::replace_via`]). A running program at `target` keeps its
/// old inode (no ETXTBSY, never half-written).
pub fn replace(target: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    cni_runtime::files::replace_via(target, &temp_path(target), bytes, mode).map_err(|e| e.source)
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
