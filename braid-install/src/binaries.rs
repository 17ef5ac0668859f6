//! Copying braid's plugin binaries into the node's CNI bin dir.
//!
//! Each binary is written under a temp name in the destination directory, fsynced and renamed
//! over the old one: a runtime that execs the plugin at that moment runs either the old or the
//! new file, never a half-written one, and a running plugin never makes the copy fail with
//! ETXTBSY (its inode is replaced, not written). A destination with the same bytes is left alone.

use crate::error::InstallError;
use crate::fsutil;
use crate::log;
use std::path::Path;

/// Copies `names` from `source` into `dest`; returns how many were written (the rest were unchanged).
pub fn install(source: &Path, dest: &Path, names: &[&str]) -> Result<usize, InstallError> {
    std::fs::create_dir_all(dest).map_err(|e| InstallError::Binary { path: dest.to_path_buf(), source: e })?;
    // Read every source first: a missing one fails the install before anything changed.
    let mut sources = Vec::new();
    for name in names {
        let path = source.join(name);
        let bytes = std::fs::read(&path).map_err(|e| InstallError::Source { path: path.clone(), source: e })?;
        sources.push((name, bytes));
    }
    let mut written = 0;
    for (name, bytes) in sources {
        let target = dest.join(name);
        if fsutil::read_opt(&target).is_some_and(|old| old == bytes) && is_executable(&target) {
            log(&format!("{} is unchanged", target.display()));
            continue;
        }
        fsutil::replace(&target, &bytes, 0o755)
            .map_err(|e| InstallError::Binary { path: target.clone(), source: e })?;
        log(&format!("installed {} ({} bytes)", target.display(), bytes.len()));
        written += 1;
    }
    Ok(written)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 == 0o111)
}

/// Removes `names` from `dest` (uninstall).
pub fn remove(dest: &Path, names: &[&str]) -> Result<(), InstallError> {
    for name in names {
        let target = dest.join(name);
        if fsutil::remove(&target).map_err(|e| InstallError::Binary { path: target.clone(), source: e })? {
            log(&format!("removed {}", target.display()));
        }
    }
    Ok(())
}
