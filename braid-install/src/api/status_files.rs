//! Which network-status files exist, and which one of each pod's is newest: the file names
//! the delegator writes (`<namespace>_<pod>_<container ID>.json`) and their versions. Below both
//! the publisher ([`super::status`]) and the index it keeps ([`super::status_index`]), and the
//! hot-plug loop ([`super::hotplug`]), which read the same directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A pod, as its status file names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodKey {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for PodKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The pod a status file is for: `<namespace>_<pod>_<container ID>.json` (namespaces and pod
/// names have no `_`; the delegator writes no other name). Temporary files (`.`-prefixed) and
/// anything else are not.
pub fn pod_of(file_name: &str) -> Option<PodKey> {
    if file_name.starts_with('.') {
        return None;
    }
    let stem = file_name.strip_suffix(".json")?;
    let (namespace, rest) = stem.split_once('_')?;
    let (name, container) = rest.split_once('_')?;
    (!namespace.is_empty() && !name.is_empty() && !container.is_empty())
        .then(|| PodKey { namespace: namespace.into(), name: name.into() })
}

/// One version of a status file: which file, and its modification time and size. A new
/// document is a new version (the delegator renames a new file into place).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// The file.
    pub path: PathBuf,
    /// Its modification time.
    pub modified: SystemTime,
    /// Its size.
    pub len: u64,
}

/// The pod's newest status file (by modification time, then name); `None` when it has none.
pub fn newest(dir: &Path, pod: &PodKey) -> Option<Version> {
    newest_of(dir).remove(pod)
}

/// Every pod's newest status file: one `read_dir` and a `stat` per file.
pub fn newest_of(dir: &Path) -> BTreeMap<PodKey, Version> {
    let mut best: BTreeMap<PodKey, Version> = BTreeMap::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Some(pod) = pod_of(&e.file_name().to_string_lossy()) else { continue };
        let Ok(meta) = e.metadata() else { continue };
        let Ok(modified) = meta.modified() else { continue };
        let v = Version { path: e.path(), modified, len: meta.len() };
        match best.get(&pod) {
            Some(b) if (b.modified, &b.path) >= (v.modified, &v.path) => {}
            _ => {
                best.insert(pod, v);
            }
        }
    }
    best
}
