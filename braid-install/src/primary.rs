//! Finding the node's primary (cluster) network: `--primary`, else the lexically first
//! `*.conflist`/`*.conf`/`*.json` of the conf dir that is not braid's — the file the runtime
//! would load if braid were not there.

use cni_types::{NetConf, NetConfList};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The capability braid adds: the runtime then passes the pod's annotations.
pub const POD_ANNOTATIONS: &str = "io.kubernetes.cri.pod-annotations";

/// What braid's conflist takes from the primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Primary {
    /// The file, as the installer reaches it.
    pub path: PathBuf,
    /// Its network name (what the delegator looks up in `confDir`).
    pub name: String,
    /// Its cniVersion (libcni's selection when the file lists `cniVersions`).
    pub cni_version: String,
    /// The capabilities any of its plugins declares `true`.
    pub capabilities: BTreeSet<String>,
}

/// Why no primary was found (the text of a log line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotFound(pub String);

fn is_cni_file(name: &str) -> bool {
    [".conflist", ".conf", ".json"].iter().any(|ext| name.ends_with(ext) && name.len() > ext.len())
}

/// Parses a CNI configuration file as the runtimes' libcni would (`.conflist` as a list,
/// `.conf`/`.json` as one plugin).
pub fn parse_file(path: &Path) -> Result<Primary, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    let list = if path.extension().is_some_and(|e| e == "conflist") {
        NetConfList::parse(&bytes).map_err(|e| e.to_string())?
    } else {
        let conf = NetConf::parse(&bytes).map_err(|e| e.to_string())?;
        if conf.plugin_type().is_empty() {
            return Err("no \"type\"".into());
        }
        NetConfList::from_single(conf)
    };
    if list.name.is_empty() {
        return Err("no network name".into());
    }
    if list.plugins.is_empty() {
        return Err("no plugins".into());
    }
    let capabilities = list
        .plugins
        .iter()
        .flat_map(|p| p.capabilities().iter().filter(|(_, on)| **on).map(|(k, _)| k.clone()))
        .collect();
    let cni_version = if list.cni_version.is_empty() { "0.1.0".to_string() } else { list.cni_version.clone() };
    Ok(Primary { path: path.to_path_buf(), name: list.name, cni_version, capabilities })
}

/// Finds the primary. `explicit`: the `--primary` file (as reached); else the first usable file
/// of `dir` in byte order, skipping `own_file` and any file whose network is `own_name`.
/// `skipped` collects "file: reason" for files passed over.
pub fn find(
    explicit: Option<&Path>,
    dir: &Path,
    own_file: &str,
    own_name: &str,
    skipped: &mut Vec<String>,
) -> Result<Primary, NotFound> {
    if let Some(p) = explicit {
        return match parse_file(p) {
            Ok(pr) if pr.name == own_name => {
                Err(NotFound(format!("{} is braid's own network {own_name:?}", p.display())))
            }
            Ok(pr) => Ok(pr),
            Err(e) => Err(NotFound(format!("{}: {e}", p.display()))),
        };
    }
    let entries = std::fs::read_dir(dir).map_err(|e| NotFound(format!("cannot read {}: {e}", dir.display())))?;
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| is_cni_file(n) && n != own_file)
        .collect();
    names.sort();
    for n in names {
        let path = dir.join(&n);
        if !path.is_file() {
            continue;
        }
        match parse_file(&path) {
            Ok(pr) if pr.name == own_name => skipped.push(format!("{n}: braid's own network {own_name:?}")),
            Ok(pr) => return Ok(pr),
            Err(e) => skipped.push(format!("{n}: {e}")),
        }
    }
    Err(NotFound(format!("no usable *.conflist, *.conf or *.json in {}", dir.display())))
}
