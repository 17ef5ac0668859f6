//! NetworkAttachmentDefinitions mirrored into networksDir (`<namespace>/<name>.conflist`, as
//! the delegator reads them): written atomically when they change, removed when their NAD is
//! deleted. Files it wrote are recorded in `<networksDir>/.braid-install-nads.json`; after a
//! restart (the agent's, or a relist after `410 Gone`) a file that no NAD backs any more is
//! removed only once a **full list** has been seen — never before, so a watch that cannot start
//! (the API server down) leaves every definition in place and pods keep starting.
//!
//! A NAD that cannot be mirrored (its config does not parse, no file of that name) is reported
//! once per resourceVersion (the caller logs it and creates an Event on it); the last good
//! version of its file, if any, stays, as with a bad ConfigMap key.

use crate::fsutil;
use crate::nad::{self, Nad, Refusal};
use crate::owners::Owners;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The NAD mirror's record of the files it wrote, in networksDir.
pub const MANIFEST: &str = ".braid-install-nads.json";

/// What applying a NAD did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The file was written (new or changed).
    Written,
    /// The file already held this definition.
    Unchanged,
    /// Not mirrored, and not reported before for this resourceVersion: report it.
    Refused(Refusal),
    /// Not mirrored, already reported.
    StillRefused,
}

/// The mirror's state between events.
#[derive(Debug)]
pub struct NadMirror {
    networks: PathBuf,
    nad_conf_dir: PathBuf,
    owners: Owners,
    /// The NADs known now, by file.
    nads: BTreeMap<String, Nad>,
    /// Files seen in the list under way (`Some` between a list's start and its end).
    listing: Option<BTreeSet<String>>,
    /// The refusal last reported per NAD (uid, resourceVersion, text).
    reported: BTreeMap<String, (String, String, Refusal)>,
}

fn read_manifest(networks: &Path) -> BTreeSet<String> {
    crate::mirror::read_record(networks, MANIFEST)
}

impl NadMirror {
    /// The mirror of `networks` (networksDir as the agent reaches it), empty-config NADs looked
    /// up in `nad_conf_dir` alone. The files of an earlier run are owned again at once
    /// ([`load_record`]: `run` has done so before either mirror wrote; this is for callers that
    /// did not) and kept until a full list shows which NADs are gone.
    pub fn open(networks: &Path, nad_conf_dir: PathBuf, owners: Owners) -> NadMirror {
        load_record(networks, &owners);
        NadMirror {
            networks: networks.to_path_buf(),
            nad_conf_dir,
            owners,
            nads: BTreeMap::new(),
            listing: None,
            reported: BTreeMap::new(),
        }
    }

    /// A full list starts (the watcher's `Init`: first start, or a relist after `410 Gone`).
    pub fn begin_list(&mut self) {
        self.listing = Some(BTreeSet::new());
    }

    /// The full list is complete: every file that no listed NAD backs is removed. Returns how
    /// many were.
    pub fn end_list(&mut self) -> std::io::Result<usize> {
        let Some(seen) = self.listing.take() else { return Ok(0) };
        self.nads.retain(|rel, _| seen.contains(rel));
        self.reported.retain(|key, _| seen.iter().any(|rel| rel.trim_end_matches(".conflist") == key));
        let mut owned = self.owners.lock();
        let stale: Vec<String> = owned.difference(&seen).cloned().collect();
        for rel in &stale {
            self.remove_file(rel, "no NetworkAttachmentDefinition backs it any more")?;
            owned.remove(rel);
        }
        if !stale.is_empty() {
            self.write_manifest(&owned)?;
        }
        Ok(stale.len())
    }

    /// A NAD was listed, added or changed: what the API server said exists, so a list under
    /// way counts it as seen.
    pub fn apply(&mut self, nad: Nad) -> std::io::Result<Applied> {
        if let Some(seen) = &mut self.listing {
            seen.insert(nad.rel_path());
        }
        self.mirror(nad)
    }

    /// Renders and writes `nad`, or reports why not. Never marks it listed: only the API
    /// server's word ([`NadMirror::apply`]) does.
    fn mirror(&mut self, nad: Nad) -> std::io::Result<Applied> {
        let rel = nad.rel_path();
        let outcome = match nad::render(&nad, &self.nad_conf_dir) {
            Ok(bytes) => {
                self.reported.remove(&nad.key());
                self.write(&rel, &bytes, &nad)?
            }
            Err(why) => {
                self.claim(&rel)?;
                let this = (nad.source.uid.clone(), nad.source.resource_version.clone(), why.clone());
                if self.reported.get(&nad.key()) == Some(&this) {
                    Applied::StillRefused
                } else {
                    self.reported.insert(nad.key(), this);
                    Applied::Refused(why)
                }
            }
        };
        self.nads.insert(rel, nad);
        Ok(outcome)
    }

    /// How many NADs known now are mirrored, and how many refused (`braid_install_nads`).
    pub fn counts(&self) -> (usize, usize) {
        let refused = self.reported.len();
        (self.nads.len().saturating_sub(refused), refused)
    }

    /// A NAD was deleted: its file goes (true when there was one).
    pub fn delete(&mut self, nad: &Nad) -> std::io::Result<bool> {
        let rel = nad.rel_path();
        self.nads.remove(&rel);
        self.reported.remove(&nad.key());
        let mut owned = self.owners.lock();
        if !owned.remove(&rel) {
            return Ok(false);
        }
        self.remove_file(&rel, "its NetworkAttachmentDefinition was deleted")?;
        self.write_manifest(&owned)?;
        Ok(true)
    }

    /// Looks again at the NADs whose config is a file in the NAD conf dir (it may have
    /// appeared or changed since): each NAD with an empty `spec.config`, mirrored again. A
    /// refresh is not the API server's word that the NAD exists: during a relist it never
    /// counts as listed, so a NAD deleted while the API server was unreachable loses its file
    /// when the relist ends.
    pub fn refresh(&mut self) -> std::io::Result<Vec<(Nad, Applied)>> {
        let from_files: Vec<Nad> =
            self.nads.values().filter(|n| n.config.as_deref().is_none_or(|c| c.trim().is_empty())).cloned().collect();
        let mut out = Vec::new();
        for n in from_files {
            let a = self.mirror(n.clone())?;
            out.push((n, a));
        }
        Ok(out)
    }

    /// `rel` becomes the NAD mirror's, written or not: a NAD takes its network's name over from
    /// the ConfigMap as soon as it exists, also while it cannot be mirrored (what the file held
    /// stays until the NAD's config is good; [`crate::owners`]).
    fn claim(&self, rel: &str) -> std::io::Result<()> {
        let mut owned = self.owners.lock();
        if owned.insert(rel.to_string()) {
            self.write_manifest(&owned)?;
        }
        Ok(())
    }

    fn write(&mut self, rel: &str, bytes: &[u8], nad: &Nad) -> std::io::Result<Applied> {
        let mut owned = self.owners.lock();
        let target = self.networks.join(rel);
        let newly_owned = !owned.contains(rel);
        if !newly_owned && fsutil::read_opt(&target).is_some_and(|cur| cur == bytes) {
            return Ok(Applied::Unchanged);
        }
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir)?;
        }
        fsutil::replace(&target, bytes, 0o644)?;
        crate::log(&format!(
            "network {}: wrote {} (NetworkAttachmentDefinition, resourceVersion {})",
            nad.key(),
            target.display(),
            nad.source.resource_version
        ));
        if newly_owned {
            owned.insert(rel.to_string());
            self.write_manifest(&owned)?;
        }
        Ok(Applied::Written)
    }

    fn remove_file(&self, rel: &str, why: &str) -> std::io::Result<()> {
        let target = self.networks.join(rel);
        if fsutil::remove(&target)? {
            crate::log(&format!("network {}: removed {} ({why})", rel.trim_end_matches(".conflist"), target.display()));
        }
        if let Some(dir) = target.parent() {
            // Only when empty: other files stay.
            let _ = std::fs::remove_dir(dir);
        }
        Ok(())
    }

    fn write_manifest(&self, owned: &BTreeSet<String>) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.networks)?;
        let list: Vec<&String> = owned.iter().collect();
        fsutil::replace(&self.networks.join(MANIFEST), &serde_json::to_vec(&list).unwrap_or_default(), 0o644)
    }
}

/// Owns again, in `owners`, the files an earlier run of the NAD mirror recorded. Called before
/// either mirror writes anything (`run`): the ConfigMap mirror's first pass must find a NAD's
/// file owned, or it would overwrite it with a key of the same name before the NAD mirror,
/// started on the API thread, has read its record.
pub fn load_record(networks: &Path, owners: &Owners) {
    owners.lock().extend(read_manifest(networks));
}

/// Removes every file the NAD mirror wrote, and its record (uninstall).
pub fn remove_all(networks: &Path) -> std::io::Result<usize> {
    crate::mirror::remove_recorded(networks, MANIFEST)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::Mirror;
    use crate::nad::Source;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn dir(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("braid-nadm-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn nad(ns: &str, name: &str, rv: &str, config: &str) -> Nad {
        let uid = format!("uid-{ns}-{name}");
        let source =
            Source { namespace: ns.into(), name: name.into(), uid, resource_version: rv.into(), resource_name: None };
        Nad { source, config: Some(config.into()) }
    }
    const PTP: &str = r#"{"cniVersion":"1.0.0","type":"ptp"}"#;
    const FROM_CM: &str = r#"{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"bridge"}]}"#;

    /// A ConfigMap with key `a.x.conflist` ([`FROM_CM`]) mirrored once into `<d>/networks`, and
    /// a NAD mirror opened after it on the same owners.
    fn configmap_then_nad_mirror(d: &Dir) -> (PathBuf, PathBuf, Owners, Mirror, NadMirror) {
        let (nets, cm) = (d.0.join("networks"), d.0.join("cm"));
        std::fs::create_dir_all(&cm).unwrap();
        std::fs::write(cm.join("a.x.conflist"), FROM_CM).unwrap();
        let owners = Owners::default();
        let mut cmm = Mirror::default();
        assert_eq!(cmm.sync(&cm, &nets, &owners).unwrap().written, 1);
        let m = NadMirror::open(&nets, PathBuf::new(), owners.clone());
        (nets, cm, owners, cmm, m)
    }

    #[test]
    fn stale_files_go_only_after_a_full_list() {
        let d = dir("stale");
        let nets = d.0.join("networks");
        let mut m = NadMirror::open(&nets, PathBuf::new(), Owners::default());
        m.begin_list();
        assert_eq!(m.apply(nad("a", "x", "1", PTP)).unwrap(), Applied::Written);
        assert_eq!(m.apply(nad("b", "y", "2", PTP)).unwrap(), Applied::Written);
        assert_eq!(m.end_list().unwrap(), 0);
        assert_eq!(m.apply(nad("a", "x", "3", PTP)).unwrap(), Applied::Written, "its resourceVersion is in the file");
        assert_eq!(m.apply(nad("a", "x", "3", PTP)).unwrap(), Applied::Unchanged);
        drop(m);
        // A restart: the old files are owned at once and stay until the first full list ends.
        let owners = Owners::default();
        let mut m = NadMirror::open(&nets, PathBuf::new(), owners.clone());
        assert_eq!(owners.lock().len(), 2);
        m.begin_list();
        m.apply(nad("a", "x", "3", PTP)).unwrap();
        assert!(nets.join("b/y.conflist").exists(), "removed before the list was complete");
        assert_eq!(m.end_list().unwrap(), 1);
        assert!(!nets.join("b/y.conflist").exists() && !nets.join("b").exists());
        assert!(nets.join("a/x.conflist").exists());
        assert_eq!(read_manifest(&nets), BTreeSet::from(["a/x.conflist".to_string()]));
        assert!(m.delete(&nad("a", "x", "4", PTP)).unwrap());
        assert!(!nets.join("a/x.conflist").exists());
        assert!(!m.delete(&nad("a", "x", "4", PTP)).unwrap());
        assert_eq!(remove_all(&nets).unwrap(), 0);
        assert!(!nets.join(MANIFEST).exists());
    }

    #[test]
    fn a_broken_nad_is_reported_once_per_version_and_its_last_good_file_stays() {
        let d = dir("broken");
        let nets = d.0.join("networks");
        let mut m = NadMirror::open(&nets, PathBuf::new(), Owners::default());
        m.apply(nad("a", "x", "1", PTP)).unwrap();
        let good = std::fs::read(nets.join("a/x.conflist")).unwrap();
        let Applied::Refused(why) = m.apply(nad("a", "x", "2", "{")).unwrap() else { panic!("not refused") };
        assert!(why.why.contains("spec.config is not JSON"), "{why}");
        assert_eq!(m.apply(nad("a", "x", "2", "{")).unwrap(), Applied::StillRefused);
        assert!(matches!(m.apply(nad("a", "x", "3", "{")).unwrap(), Applied::Refused(_)));
        assert_eq!(std::fs::read(nets.join("a/x.conflist")).unwrap(), good);
        assert!(matches!(m.apply(nad("a", "new", "4", "[]")).unwrap(), Applied::Refused(_)));
        assert!(!nets.join("a/new.conflist").exists());
    }

    #[test]
    fn a_nad_wins_over_the_configmap_and_hands_back_when_deleted() {
        let d = dir("owners");
        let (nets, cm, owners, mut cmm, mut m) = configmap_then_nad_mirror(&d);
        let from_cm = FROM_CM;
        m.apply(nad("a", "x", "1", PTP)).unwrap();
        let pass = cmm.sync(&cm, &nets, &owners).unwrap();
        assert_eq!((pass.written, pass.removed, pass.shadowed), (0, 0, 1));
        let file = std::fs::read_to_string(nets.join("a/x.conflist")).unwrap();
        assert!(file.contains("ptp") && file.contains(crate::nad::SOURCE_KEY), "{file}");
        m.delete(&nad("a", "x", "2", PTP)).unwrap();
        assert_eq!(cmm.sync(&cm, &nets, &owners).unwrap().written, 1);
        assert_eq!(std::fs::read_to_string(nets.join("a/x.conflist")).unwrap(), from_cm);
    }

    /// The review's case: a NAD whose config is a file is deleted while the API server is
    /// unreachable; the 10 s refresh of empty-config NADs runs during the relist that follows.
    /// The refresh must not count as "listed": the NAD's file goes when the relist ends.
    #[test]
    fn a_refresh_during_a_relist_does_not_count_as_listed() {
        let d = dir("relist");
        let (nets, conf) = (d.0.join("networks"), d.0.join("multus"));
        std::fs::create_dir_all(&conf).unwrap();
        std::fs::write(conf.join("10-x.conf"), r#"{"cniVersion":"1.0.0","name":"x","type":"ptp"}"#).unwrap();
        let mut m = NadMirror::open(&nets, conf, Owners::default());
        let mut from_file = nad("a", "x", "1", "");
        from_file.config = None;
        m.begin_list();
        assert_eq!(m.apply(from_file).unwrap(), Applied::Written);
        assert_eq!(m.end_list().unwrap(), 0);
        // Deleted during an outage; the watcher relists once the API server is back.
        m.begin_list();
        let refreshed = m.refresh().unwrap();
        assert_eq!(refreshed.len(), 1, "the refresh looked at the known NAD");
        assert_eq!(m.end_list().unwrap(), 1, "the NAD no list showed kept its file");
        assert!(!nets.join("a/x.conflist").exists());
        assert!(m.refresh().unwrap().is_empty(), "a NAD the relist did not show is forgotten");
    }

    /// "The NAD wins" holds for a NAD that cannot be mirrored too: it takes the network's name
    /// over from the ConfigMap at once; the file keeps what it held (the ConfigMap's last
    /// version) until the NAD's config is good, and goes back to the ConfigMap when the NAD is
    /// deleted.
    #[test]
    fn a_refused_nad_takes_its_name_over_from_the_configmap() {
        let d = dir("refused-owner");
        let (nets, cm, owners, mut cmm, mut m) = configmap_then_nad_mirror(&d);
        let from_cm = FROM_CM;
        assert!(matches!(m.apply(nad("a", "x", "1", "{")).unwrap(), Applied::Refused(_)));
        // The ConfigMap's key changes: not used any more, the file untouched.
        let changed = r#"{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"macvlan"}]}"#;
        std::fs::write(cm.join("a.x.conflist"), changed).unwrap();
        let pass = cmm.sync(&cm, &nets, &owners).unwrap();
        assert_eq!((pass.written, pass.removed, pass.shadowed), (0, 0, 1));
        assert_eq!(std::fs::read_to_string(nets.join("a/x.conflist")).unwrap(), from_cm);
        assert_eq!(read_manifest(&nets), BTreeSet::from(["a/x.conflist".to_string()]), "recorded as the NAD's");
        // The NAD fixed: its definition.
        assert_eq!(m.apply(nad("a", "x", "2", PTP)).unwrap(), Applied::Written);
        assert!(std::fs::read_to_string(nets.join("a/x.conflist")).unwrap().contains("ptp"));
        // Deleted: the ConfigMap's definition again.
        assert!(m.delete(&nad("a", "x", "3", PTP)).unwrap());
        assert_eq!(cmm.sync(&cm, &nets, &owners).unwrap().written, 1);
        assert_eq!(std::fs::read_to_string(nets.join("a/x.conflist")).unwrap(), changed);
    }
}
