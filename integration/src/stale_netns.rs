//! Network namespaces a killed test or bench process left behind.
//!
//! Every namespace the harness makes is `braid-<tag><pid>x<n>` ([`crate::unique`]) and is
//! deleted on drop; a process killed by a signal (a CI timeout, a SIGKILL while measuring) drops
//! nothing, and its namespaces stayed until the machine rebooted. The first namespace a process
//! makes therefore deletes those of the pattern whose `<pid>` is no longer running: a living
//! process's namespaces are never touched, and no name outside the pattern is.

use std::path::Path;

/// The pid in a harness namespace name `braid-<letters><pid>x<n>`, or `None` for any other name.
pub fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("braid-")?;
    let digits_at = rest.find(|c: char| c.is_ascii_digit())?;
    let (tag, rest) = rest.split_at(digits_at);
    if tag.is_empty() || !tag.chars().all(|c| c.is_ascii_lowercase()) {
        return None;
    }
    let (pid, n) = rest.split_once('x')?;
    if pid.is_empty() || n.is_empty() || !n.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Deletes (`ip netns delete`) every namespace under `/run/netns` of the harness's pattern
/// whose process is gone; returns their names.
pub fn remove_dead_owners() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/run/netns") else { return Vec::new() };
    let mut removed = Vec::new();
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner_pid(&name) else { continue };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let ok = std::process::Command::new("ip").args(["netns", "delete", &name]).status().is_ok_and(|s| s.success());
        if ok {
            removed.push(name);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::owner_pid;

    #[test]
    fn only_the_harness_pattern_names_an_owner() {
        assert_eq!(owner_pid("braid-bh1234x0"), Some(1234));
        assert_eq!(owner_pid("braid-bc77x12"), Some(77));
        for other in [
            "bh1234x0",
            "braid-1234x0",
            "braid-bh1234",
            "braid-bh1234x",
            "braid-bhx0",
            "braid-Bh12x0",
            "braid-bh12x0a",
            "cni-12x0",
            "",
        ] {
            assert_eq!(owner_pid(other), None, "{other}");
        }
    }
}
