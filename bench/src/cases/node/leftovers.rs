//! What pods leave on the node after their deletion: found, sorted by kind for the report, and
//! removed so the next burst starts clean.

use super::NODE;
use braid_integration::cluster::Cluster;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The node's host-side veths.
fn veths(c: &Cluster) -> BTreeSet<String> {
    String::from_utf8_lossy(&c.on_node(NODE, "ip", &["-o", "link"]).stdout)
        .lines()
        .filter_map(|l| l.split(": ").nth(1)?.split('@').next().map(str::to_string))
        .filter(|n| n.starts_with("veth"))
        .collect()
}

/// Where each kind of [`leftovers`] entry is (its prefix) and its name in the report, in the
/// order the report lists them; an entry under none of them is "other".
pub(super) const LEFT_KINDS: [(&str, &str); 6] = [
    ("interface ", "host-side interfaces"),
    ("/var/lib/cni/networks/", "host-local reservations"),
    ("/var/lib/cni/multus/", "Multus's cache files"),
    ("/var/lib/cni/results/", "libcni's result cache files"),
    ("/run/braid/network-status/", "braid's status files"),
    ("/var/lib/cni/braid/", "braid's state files"),
];

/// The report's name for a [`leftovers`] entry's kind.
pub(super) fn left_kind(entry: &str) -> &'static str {
    LEFT_KINDS.iter().find(|(prefix, _)| entry.starts_with(prefix)).map_or("other", |(_, kind)| kind)
}

/// Everything a pod may leave on the node: its host-side interfaces, its host-local
/// reservations, Multus's cache, libcni's result cache, braid's status and state files.
pub(super) fn leftovers(c: &Cluster) -> BTreeSet<String> {
    let mut left: BTreeSet<String> = veths(c).into_iter().map(|v| format!("interface {v}")).collect();
    for net in ["cluster", "net1", "net2", "net3", "net4"] {
        let dir = format!("/var/lib/cni/networks/{net}");
        left.extend(c.files_on(NODE, &dir).into_iter().filter(|f| f.starts_with("198.")).map(|f| format!("{dir}/{f}")));
    }
    for dir in ["/var/lib/cni/multus", "/var/lib/cni/results", "/run/braid/network-status", "/var/lib/cni/braid"] {
        // The state directory's owner file is the node's claim on the directory, written by
        // the first ADD and kept for good (braid-attach's `owner`): no pod's.
        let pods = c.files_on(NODE, dir).into_iter().filter(|f| f != braid_attach::owner::OWNER_FILE);
        left.extend(pods.map(|f| format!("{dir}/{f}")));
    }
    left
}

/// What the deleted pods left beyond `before`, once it stops changing; reported by the caller
/// and removed here.
pub(super) fn settle_and_clear(c: &Cluster, before: &BTreeSet<String>) -> Vec<String> {
    // Called once the kubelet has stopped the pods' sandboxes (CNI DEL included: `delete_all`);
    // what is left then is looked at until nothing more goes away for 5 s (at most 60 s): a
    // set-up that leaks (Multus thick, every burst) would otherwise cost the whole 60 s each
    // time.
    let give_up = Instant::now() + Duration::from_secs(60);
    let new = |c: &Cluster| leftovers(c).difference(before).cloned().collect::<Vec<String>>();
    let mut left = new(c);
    let mut changed = Instant::now();
    while !left.is_empty() && Instant::now() < give_up && changed.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(500));
        let now = new(c);
        if now != left {
            changed = Instant::now();
        }
        left = now;
    }
    // Reported, then removed: a set-up that leaks host-local reservations (Multus thick's DEL
    // fails here: docs/bench/NOTES.md) would otherwise exhaust the node's pod range for every
    // set-up after it. This is what an operator cleans up by hand.
    for f in left.iter().filter(|f| f.starts_with('/')) {
        let _ = c.on_node(NODE, "rm", &["-f", f]);
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_leftover_is_reported_under_its_kind() {
        let cases = [
            ("interface veth1a2b3c4d", "host-side interfaces"),
            ("/var/lib/cni/networks/cluster/198.18.40.7", "host-local reservations"),
            ("/var/lib/cni/multus/0a1b", "Multus's cache files"),
            ("/var/lib/cni/results/cluster-0a1b-eth0", "libcni's result cache files"),
            ("/run/braid/network-status/ns_pod_uid", "braid's status files"),
            ("/var/lib/cni/braid/0a1b@eth0", "braid's state files"),
            ("/var/lib/cni/elsewhere", "other"),
        ];
        for (entry, kind) in cases {
            assert_eq!(left_kind(entry), kind, "{entry}");
        }
    }
}
