//! Which status files exist, kept in memory so that a publication reads the file its event
//! names instead of scanning the directory: an agent restarted with N files used to read the
//! directory and `stat` every file once per pod it published — N² `stat`s on the agent's one
//! thread (2,000 files: seconds during which NAD events and hot-plug waited). Now the start-up
//! scan (and every `--status-rescan`, and an inotify queue overflow) reads the directory once;
//! between them each inotify event `stat`s the one file it names.

use super::status_files::{pod_of, PodKey, Version};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every pod's status files, by name.
#[derive(Debug, Default)]
pub struct Index {
    files: BTreeMap<PodKey, BTreeMap<PathBuf, Version>>,
    /// Directory scans so far (a test counts them).
    pub scans: u64,
}

impl Index {
    /// Reads the whole directory anew (one `read_dir`, a `stat` per file); every pod's newest.
    pub fn rescan(&mut self, dir: &Path) -> BTreeMap<PodKey, Version> {
        self.scans += 1;
        self.files.clear();
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = e.file_name();
            let Some(pod) = pod_of(&name.to_string_lossy()) else { continue };
            if let Some(v) = version(&e.path()) {
                self.files.entry(pod).or_default().insert(e.path(), v);
            }
        }
        self.files.keys().filter_map(|p| Some((p.clone(), self.newest(p)?))).collect()
    }

    /// The file `name` of `dir` changed, appeared or went (an inotify event): one `stat`.
    /// Returns its pod, if it is a status file's name.
    pub fn changed(&mut self, dir: &Path, name: &str) -> Option<PodKey> {
        let pod = pod_of(name)?;
        let path = dir.join(name);
        match version(&path) {
            Some(v) => {
                self.files.entry(pod.clone()).or_default().insert(path, v);
            }
            None => {
                if let Some(f) = self.files.get_mut(&pod) {
                    f.remove(&path);
                    if f.is_empty() {
                        self.files.remove(&pod);
                    }
                }
            }
        }
        Some(pod)
    }

    /// The pod's newest file (by modification time, then name), as [`super::status_files::newest`]
    /// finds it, without reading the directory.
    pub fn newest(&self, pod: &PodKey) -> Option<Version> {
        self.files.get(pod)?.values().max_by(|a, b| (a.modified, &a.path).cmp(&(b.modified, &b.path))).cloned()
    }
}

fn version(path: &Path) -> Option<Version> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Version { path: path.to_path_buf(), modified: meta.modified().ok()?, len: meta.len() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    /// A restart with many files: one scan, then every pod's newest found without another;
    /// events keep it current (a new sandbox's file, a deleted one) and it agrees with a scan.
    #[test]
    fn one_scan_then_each_event_reads_only_its_file() {
        let d = std::env::temp_dir().join(format!("braid-status-index-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for i in 0..200 {
            std::fs::write(d.join(format!("ns_p{i}_c{i}.json")), "[]\n").unwrap();
        }
        std::fs::write(d.join(".ns_p0_c0.json.tmp1"), "").unwrap();
        let mut idx = Index::default();
        let all = idx.rescan(&d);
        assert_eq!(all.len(), 200);
        let pod = |n: &str| PodKey { namespace: "ns".into(), name: n.into() };
        for i in 0..200 {
            let v = idx.newest(&pod(&format!("p{i}"))).unwrap();
            assert_eq!(v.path, d.join(format!("ns_p{i}_c{i}.json")));
        }
        assert_eq!(idx.scans, 1, "one directory scan for the whole start-up");
        // A second sandbox of p1, newer: it is p1's newest; removed, the older one is again.
        let old = d.join("ns_p1_c1.json");
        std::fs::File::options()
            .write(true)
            .open(&old)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(60))
            .unwrap();
        idx.changed(&d, "ns_p1_c1.json");
        std::fs::write(d.join("ns_p1_c9.json"), "[1]\n").unwrap();
        assert_eq!(idx.changed(&d, "ns_p1_c9.json"), Some(pod("p1")));
        assert_eq!(idx.newest(&pod("p1")).unwrap().path, d.join("ns_p1_c9.json"));
        std::fs::remove_file(d.join("ns_p1_c9.json")).unwrap();
        idx.changed(&d, "ns_p1_c9.json");
        assert_eq!(idx.newest(&pod("p1")).unwrap().path, old);
        std::fs::remove_file(&old).unwrap();
        idx.changed(&d, "ns_p1_c1.json");
        assert!(idx.newest(&pod("p1")).is_none());
        assert_eq!(idx.changed(&d, ".ns_p0_c0.json.tmp1"), None, "not a status file");
        assert_eq!(idx.scans, 1);
        // It agrees with the directory.
        let mut fresh = Index::default();
        assert_eq!(fresh.rescan(&d), super::super::status_files::newest_of(&d));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
