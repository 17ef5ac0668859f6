//! The one-node real Kubernetes of `scripts/node.sh` that the cases of a whole run share
//! (`kube`, then `hotplug`): brought up on first use ([`super::World::real_node`]) and down,
//! its directory removed, when the run ends — one cluster start a run, not one a case.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository (scripts/, deploy/), as built.
pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A cluster of `scripts/node.sh`, down (and its directory removed) on drop.
pub(crate) struct Node {
    pub(crate) dir: PathBuf,
}

impl Node {
    /// `scripts/node.sh up NODES` with braid's release binaries of `bins`.
    pub(crate) fn up(bins: &Path, nodes: usize) -> Result<Node, String> {
        let base = Path::new("/var/lib/braid");
        std::fs::create_dir_all(base).map_err(|e| e.to_string())?;
        let dir = base.join(format!("bench-node.{}", std::process::id()));
        let node = Node { dir };
        let out = Command::new("bash")
            .arg(repo().join("scripts/node.sh"))
            .args(["up", &nodes.to_string()])
            .env("BRAID_NODE_DIR", &node.dir)
            .env("BRAID_RELEASE_DIR", bins)
            .output()
            .map_err(|e| format!("scripts/node.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!("scripts/node.sh up {nodes}: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(node)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo().join("scripts/node.sh"))
            .arg("down")
            .env("BRAID_NODE_DIR", &self.dir)
            .output();
    }
}

/// Seconds since the epoch of an RFC 3339 UTC time as the API server's audit log writes it
/// (`2026-12-06T05:53:16.123456Z`).
pub(crate) fn epoch(t: &str) -> Option<f64> {
    let (date, time) = t.strip_suffix('Z')?.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>());
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let mut hms = time.split(':');
    let (h, min) = (hms.next()?.parse::<f64>().ok()?, hms.next()?.parse::<f64>().ok()?);
    let s = hms.next()?.parse::<f64>().ok()?;
    // Days from the civil date (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days as f64 * 86_400.0 + h * 3600.0 + min * 60.0 + s)
}

/// The API server's audit log read as it grows: each call returns the events appended since the
/// last (whole lines only), so a case waiting for one event never reparses the whole log.
pub(crate) struct AuditTail {
    file: std::fs::File,
    partial: String,
}

impl AuditTail {
    /// From the log's current end on.
    pub(crate) fn at_end(cluster_dir: &Path) -> Result<AuditTail, String> {
        use std::io::Seek;
        let path = cluster_dir.join("logs/audit.log");
        let mut file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        file.seek(std::io::SeekFrom::End(0)).map_err(|e| e.to_string())?;
        Ok(AuditTail { file, partial: String::new() })
    }

    /// The events appended since the last call.
    pub(crate) fn next_events(&mut self) -> Vec<Value> {
        use std::io::Read;
        let mut more = String::new();
        let _ = self.file.read_to_string(&mut more);
        self.partial.push_str(&more);
        let Some(end) = self.partial.rfind('\n') else { return Vec::new() };
        let complete: String = self.partial.drain(..=end).collect();
        complete.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::epoch;

    #[test]
    fn audit_times_read_as_epoch_seconds() {
        assert_eq!(epoch("1970-01-01T00:00:00.000000Z"), Some(0.0));
        assert_eq!(epoch("2000-03-01T00:00:01.5Z"), Some(951_868_801.5));
        let a = epoch("2026-12-06T05:53:16.123456Z").unwrap();
        let b = epoch("2026-12-06T05:53:17.000000Z").unwrap();
        assert!((b - a - 0.876544).abs() < 1e-6, "{}", b - a);
        assert_eq!(epoch("not a time"), None);
    }
}
