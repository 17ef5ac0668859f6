//! What the real-runtime harnesses (podman, containerd) share: the tools they need, a small
//! static-busybox root filesystem for images built on the spot, the libcni result cache, and
//! teardown (processes stopped by PID, mounts below a test's directory unmounted).
//!
//! Nothing here reaches outside what a test created: processes are matched by a path of the
//! test's own temporary directory in their command line, mounts by their mount point below it,
//! cache entries by the test's unique network names.

use crate::require_root;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Debian's static busybox (`busybox-static`): the only program in the images the tests build.
pub const BUSYBOX: &str = "/bin/busybox";

/// libcni's result cache, shared by every runtime on the machine.
pub const LIBCNI_CACHE: &str = "/var/lib/cni/results";

/// [`require_root`], and also the commands a runtime test runs (podman, containerd, …) with
/// the same rule: a loud SKIPPED line without them, a failure under `BRAID_REQUIRE_ROOT_TESTS=1`.
pub fn require_root_and(test: &str, commands: &[&str]) -> bool {
    if !require_root(test) {
        return false;
    }
    let missing: Vec<&str> = commands.iter().copied().filter(|c| !on_path(c)).collect();
    if missing.is_empty() && Path::new(BUSYBOX).exists() {
        return true;
    }
    let why = format!("needs {} and busybox-static (scripts/test.sh installs them)", missing.join(", "));
    if std::env::var("BRAID_REQUIRE_ROOT_TESTS").is_ok_and(|v| v == "1") {
        panic!("{test} {why}, and BRAID_REQUIRE_ROOT_TESTS=1 forbids skipping");
    }
    eprintln!("\n*** SKIPPED {test}: {why} ***\n");
    false
}

fn on_path(cmd: &str) -> bool {
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file())).unwrap_or(false)
}

/// Runs a command; stdout on success, panics with its stderr otherwise.
pub fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes a root filesystem of static busybox into `dir` (`bin/busybox` and the applets `names`
/// as symlinks to it) and packs it as `tar` (paths relative to the root, as images want).
pub fn busybox_rootfs_tar(dir: &Path, names: &[&str], tar: &Path) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    std::fs::copy(BUSYBOX, bin.join("busybox")).unwrap_or_else(|e| panic!("copying {BUSYBOX}: {e}"));
    for n in names {
        std::os::unix::fs::symlink("busybox", bin.join(n)).unwrap_or_else(|e| panic!("symlink {n}: {e}"));
    }
    run_ok(Command::new("tar").arg("-C").arg(dir).arg("-cf").arg(tar).arg("."));
}

/// `ip -o addr` as busybox prints it, reduced to `(interface, address/prefix)` of global scope.
pub fn parse_ip_o_addr(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| l.contains("scope global"))
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let _index = it.next()?;
            let name = it.next()?.split('@').next()?.to_string();
            let family = it.next()?;
            (family == "inet" || family == "inet6").then_some(())?;
            Some((name, it.next()?.to_string()))
        })
        .collect()
}

/// The addresses (`a/len`, global scope) per interface of the network namespace at `path`, read
/// with iproute2 from inside it (`nsenter --net`).
pub fn addresses_in(netns: &Path) -> Vec<(String, String)> {
    let text = run_ok(Command::new("nsenter").arg(format!("--net={}", netns.display())).args(["ip", "-j", "addr"]));
    let v: Value = serde_json::from_str(if text.trim().is_empty() { "[]" } else { &text }).unwrap_or(Value::Null);
    let mut out = Vec::new();
    for link in v.as_array().into_iter().flatten() {
        let name = link["ifname"].as_str().unwrap_or_default();
        for a in link["addr_info"].as_array().into_iter().flatten() {
            if a["scope"] == "global" {
                if let (Some(ip), Some(len)) = (a["local"].as_str(), a["prefixlen"].as_u64()) {
                    out.push((name.to_string(), format!("{ip}/{len}")));
                }
            }
        }
    }
    out
}

/// The libcni cache entries (`<network>-<containerID>-<ifname>`) of these networks.
pub fn libcni_cache_entries(networks: &[String]) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(LIBCNI_CACHE)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|f| networks.iter().any(|n| f.starts_with(&format!("{n}-"))))
        .collect();
    out.sort();
    out
}

/// Removes the libcni cache entries of these networks (teardown after a failed test).
pub fn remove_libcni_cache_entries(networks: &[String]) {
    for f in libcni_cache_entries(networks) {
        let _ = std::fs::remove_file(Path::new(LIBCNI_CACHE).join(f));
    }
}

/// PIDs of the processes whose command line mentions `needle` (a path of the test's own), this
/// process excluded.
pub fn pids_mentioning(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(needle))
        })
        .collect()
}

fn alive(pid: u32) -> bool {
    // A zombie (reaped later by its parent) counts as stopped.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
}

/// Sends SIGTERM to `pid`, waits up to `grace`, then SIGKILL; true if it stopped in time.
pub fn stop_pid(pid: u32, grace: Duration) -> bool {
    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let start = Instant::now();
    while start.elapsed() < grace {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    false
}

/// Waits up to `grace` for the processes mentioning `needle` to exit by themselves, then stops
/// each of those left by PID.
pub fn stop_processes_mentioning(needle: &str, grace: Duration) {
    let start = Instant::now();
    while start.elapsed() < grace && pids_mentioning(needle).iter().any(|&p| alive(p)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    for pid in pids_mentioning(needle) {
        if alive(pid) {
            stop_pid(pid, Duration::from_secs(2));
        }
    }
}

/// The mount points at `dir` or below it (pod namespaces, sandbox root filesystems, shm), from
/// this process's mountinfo, in its order.
pub fn mounts_below(dir: &Path) -> Vec<PathBuf> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else { return Vec::new() };
    let prefix = dir.display().to_string();
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mount_point)
        .filter(|p| p == &prefix || p.starts_with(&format!("{prefix}/")))
        .map(PathBuf::from)
        .collect()
}

/// Unmounts every mount whose mount point is `dir` or below it, innermost first.
pub fn unmount_below(dir: &Path) {
    let mut points = mounts_below(dir);
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points.dedup();
    for p in points {
        let _ = Command::new("umount").arg("-l").arg(&p).status();
    }
}

/// Mount points in mountinfo escape space, tab, newline and backslash as `\ooo`.
fn unescape_mount_point(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Waits until `f` returns `Some`, polling every 50 ms, for at most `limit`.
pub fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() >= limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busybox_ip_o_addr() {
        let text = "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n\
                    2: eth0    inet 198.18.90.3/24 brd 198.18.90.255 scope global eth0\\       valid_lft forever\n\
                    2: eth0    inet6 2001:db8::5/64 scope global \\       valid_lft forever\n\
                    2: eth0    inet6 fe80::1/64 scope link \\       valid_lft forever\n";
        assert_eq!(
            parse_ip_o_addr(text),
            vec![("eth0".into(), "198.18.90.3/24".into()), ("eth0".into(), "2001:db8::5/64".into())]
        );
    }

    #[test]
    fn mount_points_unescaped() {
        assert_eq!(unescape_mount_point("/tmp/a\\040b"), "/tmp/a b");
        assert_eq!(unescape_mount_point("/tmp/plain"), "/tmp/plain");
    }
}
