//! Mirroring network definitions from a mounted ConfigMap into `networksDir`.
//!
//! The kubelet updates a ConfigMap volume by writing a new timestamped directory and swapping
//! the `..data` symlink to it; the keys are symlinks through `..data`. The mirror resolves
//! `..data` once per pass and reads every key from that one directory, so it sees one version of
//! the ConfigMap, never a mix. A key `<namespace>.<name>.conflist` becomes
//! `<networksDir>/<namespace>/<name>.conflist`, written atomically and only when it changed.
//! Files the mirror wrote whose key is gone are removed; it remembers them in
//! `<networksDir>/.braid-install-mirror.json`, so files put there by hand are never touched.
//! A bad definition is logged and skipped (its last good version, if any, is kept) and never
//! stops the others. A key whose network a NetworkAttachmentDefinition also defines is left to
//! the NAD ([`crate::owners`] says why the NAD wins).

use crate::error::InstallError;
use crate::fsutil;
use crate::log;
use crate::owners::Owners;
use cni_types::validate::is_dns_label;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The mirror's record of the files it wrote, in networksDir.
pub const MANIFEST: &str = ".braid-install-mirror.json";

/// The mirror's memory between passes (so a bad key is logged once, not every second).
#[derive(Debug, Default)]
pub struct Mirror {
    bad: BTreeMap<String, String>,
    shadowed: BTreeSet<String>,
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pass {
    /// Definitions written (new or changed).
    pub written: usize,
    /// Definitions removed (their key is gone).
    pub removed: usize,
    /// Keys skipped as bad.
    pub bad: usize,
    /// Keys left to a NetworkAttachmentDefinition of the same network.
    pub shadowed: usize,
}

/// `<namespace>.<name>.conflist` → (namespace, name).
pub fn parse_key(key: &str) -> Result<(&str, &str), String> {
    let stem = key.strip_suffix(".conflist").ok_or("the key must be <namespace>.<name>.conflist")?;
    let (ns, name) = stem.split_once('.').ok_or("the key must be <namespace>.<name>.conflist")?;
    if !is_dns_label(ns) {
        return Err(format!("{ns:?} is not a namespace name (a DNS-1123 label)"));
    }
    if !is_dns_label(name) {
        return Err(format!("{name:?} is not a network name (a DNS-1123 label)"));
    }
    Ok((ns, name))
}

/// Checks one definition; returns the bytes to write (the `name` injected when missing).
pub fn check_definition(name: &str, bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let Some(obj) = v.as_object_mut() else { return Err("not a JSON object".into()) };
    let mut out = bytes.to_vec();
    match obj.get("name") {
        None => {
            obj.insert("name".into(), Value::String(name.to_string()));
            out = serde_json::to_vec_pretty(&v).unwrap_or_default();
            out.push(b'\n');
        }
        Some(Value::String(n)) if n == name => {}
        Some(other) => return Err(format!("its \"name\" is {other}, the key says {name:?}")),
    }
    cni_types::NetConfList::parse(&out).map_err(|e| format!("not a valid conflist: {e}"))?;
    Ok(out)
}

/// The directory holding the ConfigMap's current keys: the target of `..data` when present
/// (a kubelet volume), else the directory itself.
fn snapshot_dir(dir: &Path) -> Result<PathBuf, InstallError> {
    let data = dir.join("..data");
    match std::fs::read_link(&data) {
        Ok(target) => Ok(dir.join(target)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if dir.is_dir() {
                Ok(dir.to_path_buf())
            } else {
                Err(InstallError::Networks {
                    path: dir.to_path_buf(),
                    source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
                })
            }
        }
        // `..data` exists but is not a symlink: a plain directory of keys.
        Err(_) if data.is_dir() => Ok(data),
        Err(e) => Err(InstallError::Networks { path: data, source: e }),
    }
}

fn read_keys(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, InstallError> {
    let net_err = |path: &Path, e| InstallError::Networks { path: path.to_path_buf(), source: e };
    let snap = snapshot_dir(dir)?;
    let mut keys = BTreeMap::new();
    for e in std::fs::read_dir(&snap).map_err(|e| net_err(&snap, e))? {
        let e = e.map_err(|e| net_err(&snap, e))?;
        let Ok(key) = e.file_name().into_string() else { continue };
        if key.starts_with('.') {
            continue;
        }
        let path = snap.join(&key);
        if path.is_dir() {
            continue;
        }
        keys.insert(key, std::fs::read(&path).map_err(|e| net_err(&path, e))?);
    }
    Ok(keys)
}

/// Whether `rel` is a definition's place, `<namespace>/<name>.conflist`: what a mirror's record
/// may name, so a tampered record cannot point elsewhere.
pub fn is_definition_path(rel: &str) -> bool {
    rel.split_once('/').is_some_and(|(ns, f)| is_dns_label(ns) && f.strip_suffix(".conflist").is_some_and(is_dns_label))
}

fn read_manifest(networks: &Path) -> BTreeSet<String> {
    read_record(networks, MANIFEST)
}

/// The files a mirror recorded in `<networks>/<record>` (only definition places: a tampered
/// record cannot point elsewhere). The ConfigMap and the NAD mirror each keep one.
pub fn read_record(networks: &Path, record: &str) -> BTreeSet<String> {
    fsutil::read_opt(&networks.join(record))
        .and_then(|b| serde_json::from_slice::<Vec<String>>(&b).ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|rel| is_definition_path(rel))
        .collect()
}

impl Mirror {
    /// One pass: makes `networks` (as the installer reaches networksDir) match `configmap`.
    /// Fails only when the ConfigMap cannot be read or networksDir cannot be written; then
    /// nothing is removed. Runs under `owners`' lock, and leaves the files it holds alone.
    pub fn sync(&mut self, configmap: &Path, networks: &Path, owners: &Owners) -> Result<Pass, InstallError> {
        let keys = read_keys(configmap)?;
        let nad_owned = owners.lock();
        let mut shadowed_now = BTreeSet::new();
        let net_err = |path: &Path, e| InstallError::Networks { path: path.to_path_buf(), source: e };
        std::fs::create_dir_all(networks).map_err(|e| net_err(networks, e))?;
        let old = read_manifest(networks);
        let mut keep = BTreeSet::new();
        let mut pass = Pass::default();
        let mut bad_now = BTreeMap::new();
        for (key, bytes) in &keys {
            let checked = parse_key(key).and_then(|(ns, name)| Ok((ns, name, check_definition(name, bytes)?)));
            match checked {
                Ok((ns, name, _)) if nad_owned.contains(&format!("{ns}/{name}.conflist")) => {
                    pass.shadowed += 1;
                    if !self.shadowed.contains(key) {
                        log(&format!(
                            "ConfigMap key {key} not used: the NetworkAttachmentDefinition {ns}/{name} defines that network (a NAD wins over the ConfigMap)"
                        ));
                    }
                    shadowed_now.insert(key.clone());
                }
                Ok((ns, name, out)) => {
                    let rel = format!("{ns}/{name}.conflist");
                    let dir = networks.join(ns);
                    let target = dir.join(format!("{name}.conflist"));
                    if fsutil::read_opt(&target).is_none_or(|cur| cur != out) {
                        std::fs::create_dir_all(&dir).map_err(|e| net_err(&dir, e))?;
                        fsutil::replace(&target, &out, 0o644).map_err(|e| net_err(&target, e))?;
                        log(&format!("network {ns}/{name}: wrote {} (ConfigMap key {key})", target.display()));
                        pass.written += 1;
                    }
                    keep.insert(rel);
                }
                Err(why) => {
                    pass.bad += 1;
                    if self.bad.get(key) != Some(&why) {
                        log(&format!("ConfigMap key {key} skipped: {why}"));
                    }
                    // The last good version of a key that went bad stays.
                    if let Ok((ns, name)) = parse_key(key) {
                        let rel = format!("{ns}/{name}.conflist");
                        if old.contains(&rel) {
                            keep.insert(rel);
                        }
                    }
                    bad_now.insert(key.clone(), why);
                }
            }
        }
        self.bad = bad_now;
        self.shadowed = shadowed_now;
        // A file a NAD took over is the NAD's now: not removed, no longer the ConfigMap's.
        for rel in old.difference(&keep).filter(|rel| !nad_owned.contains(*rel)) {
            let target = networks.join(rel);
            if fsutil::remove(&target).map_err(|e| net_err(&target, e))? {
                log(&format!(
                    "network {}: removed {} (its ConfigMap key is gone)",
                    rel.trim_end_matches(".conflist"),
                    target.display()
                ));
                pass.removed += 1;
            }
            if let Some(dir) = target.parent() {
                // Only when empty: files put there by hand stay.
                let _ = std::fs::remove_dir(dir);
            }
        }
        if keep != old {
            let list: Vec<&String> = keep.iter().collect();
            let bytes = serde_json::to_vec(&list).unwrap_or_default();
            let path = networks.join(MANIFEST);
            fsutil::replace(&path, &bytes, 0o644).map_err(|e| net_err(&path, e))?;
        }
        Ok(pass)
    }
}

/// Removes every file the mirror wrote, and its record (uninstall).
pub fn remove_all(networks: &Path) -> Result<usize, InstallError> {
    remove_recorded(networks, MANIFEST).map_err(|e| InstallError::Networks { path: networks.to_path_buf(), source: e })
}

/// Removes every file recorded in `<networks>/<record>` (and the namespace directories they
/// leave empty), then the record; how many files were removed.
pub fn remove_recorded(networks: &Path, record: &str) -> std::io::Result<usize> {
    let mut n = 0;
    for rel in read_record(networks, record) {
        let target = networks.join(&rel);
        if fsutil::remove(&target)? {
            log(&format!("removed {}", target.display()));
            n += 1;
        }
        if let Some(dir) = target.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
    fsutil::remove(&networks.join(record))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert_eq!(parse_key("default.storage.conflist"), Ok(("default", "storage")));
        for bad in [
            "storage.conflist",
            "default.storage.conf",
            "a.b.c.conflist",
            "Default.x.conflist",
            "x.-y.conflist",
            ".x.conflist",
        ] {
            assert!(parse_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn definitions() {
        let ok = br#"{"cniVersion":"1.0.0","name":"side","plugins":[{"type":"ptp"}]}"#;
        assert_eq!(check_definition("side", ok).unwrap(), ok.to_vec());
        let injected = check_definition("side", br#"{"cniVersion":"1.0.0","plugins":[{"type":"ptp"}]}"#).unwrap();
        let v: Value = serde_json::from_slice(&injected).unwrap();
        assert_eq!(v["name"], "side");
        for bad in [
            &b"{"[..],
            b"[]",
            br#"{"name":"other","plugins":[{"type":"ptp"}]}"#,
            br#"{"name":"side","plugins":[]}"#,
            br#"{"name":"side","plugins":[{"notype":1}]}"#,
        ] {
            assert!(check_definition("side", bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
