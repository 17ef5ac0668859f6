//! One state directory, one plugin kind: the delegator and the merger key their states alike,
//! so a `stateDir` is claimed by the first kind that uses it and refused to the other.

use cni_runtime::files::{read_regular, Links};
use cni_types::error::{INVALID_NETWORK_CONFIG, IO_FAILURE};
use cni_types::CniError;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The file naming the plugin a state directory belongs to.
pub const OWNER_FILE: &str = ".braid-owner";

/// Claims `dir` for `plugin`, or says which other braid plugin owns it. The delegator and the
/// merger key their states alike (`<containerID>@<ifname>`), so two of them sharing a
/// `stateDir` in one chain would overwrite each other's record — and the second one's rollback
/// or DEL would undo the first one's delegates. So a directory serves one plugin kind.
///
/// The owner file is read as state is: never through a symlink, never blocking on a FIFO, at
/// most a few bytes.
pub(crate) fn claim(dir: &Path, plugin: &str) -> Result<Option<CniError>, CniError> {
    let path = dir.join(OWNER_FILE);
    let io = |e: std::io::Error| unreadable(&path, e);
    let read = || read_owner(&path);
    let owner = match read() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let created = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(&path);
            match created {
                Ok(mut f) => {
                    f.write_all(plugin.as_bytes()).map_err(io)?;
                    return Ok(None);
                }
                // Claimed at the same moment by someone else: read whom.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read().map_err(io)?,
                Err(e) => return Err(io(e)),
            }
        }
        Err(e) => return Err(io(e)),
    };
    Ok(foreign(dir, &owner, plugin))
}

/// The refusal of a `stateDir` whose owner file names another plugin kind.
fn foreign(dir: &Path, owner: &str, plugin: &str) -> Option<CniError> {
    let owner = owner.trim();
    if owner == plugin || owner.is_empty() {
        return None;
    }
    Some(CniError::new(
        INVALID_NETWORK_CONFIG,
        format!(
            "stateDir {} holds the {owner}'s state: give the {plugin} a stateDir of its own (they key state alike and would overwrite each other)",
            dir.display()
        ),
    ))
}

/// Whether `dir` belongs to another braid plugin kind — or holds an owner file ADD could not
/// read — read without claiming it (STATUS), as an ADD's claim reads it: whatever stands there (a
/// FIFO, a symlink, a directory, a huge file), the answer comes at once.
pub fn foreign_owner(dir: &Path, plugin: &str) -> Option<CniError> {
    let path = dir.join(OWNER_FILE);
    match read_owner(&path) {
        Ok(owner) => foreign(dir, &owner, plugin),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(unreadable(&path, e)),
    }
}

/// The owner file's few bytes: never through a symlink, never blocking on a FIFO, a regular
/// file of at most 64 bytes (a plugin's name).
fn read_owner(path: &Path) -> std::io::Result<String> {
    const MAX_OWNER: u64 = 64;
    read_regular(path, MAX_OWNER, Links::Refuse).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The owner file could not be read or written (code 5).
fn unreadable(path: &Path, e: std::io::Error) -> CniError {
    CniError::new(IO_FAILURE, format!("{}: {e}", path.display()))
}
