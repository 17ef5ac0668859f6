//! What the CNI plugins take of a burst, told apart from what braid's delegator takes itself,
//! measured from outside: the kernel's own exec, fork, exit, context-switch and `setns` events of
//! every process (`perf record -a -e sched:sched_process_exec,sched:sched_process_fork,
//! sched:sched_process_exit -e syscalls:sys_enter_setns -e sched:sched_switch`, and the entries
//! and exits of `fsync` and `flock`, the delegator's durable writes and lock waits; the events are
//! written by the kernel with the CPU's clock, no plugin is changed or wrapped). A run's CPU time
//! is the sum of its tasks' on-CPU slices, each slice counted for the run its task belongs to
//! when it is switched out.
//!
//! The machine runs other clusters, whose plugins have the same paths (`/opt/cni/bin/bridge`), so
//! a process counts only when it descends from the bench node's containerd (the CRI plugin in it
//! runs the CNI plugins): its threads at the start are the seed, and every fork of a counted
//! task is counted. A *run* is what one exec starts (until the last thread of its process exits,
//! the `group_dead` exit). An *attaching* run is one a task of which called `setns`: ADD and DEL
//! work in the pod's network namespace, while STATUS (containerd asks every 5 s, CNI 1.1),
//! VERSION and GC never enter one — those runs are not a sandbox's and are left out. Counted:
//!
//! * a plugin run: an exec of `/opt/cni/bin/*` other than braid's own (`delegator`, `merger`)
//!   whose parent is not another such plugin — the runtime's own (`loopback`, the cluster
//!   network's `bridge` alone) when attaching, and braid's delegates; the IPAM plugin a `bridge`
//!   runs in turn is inside its parent's time, not counted twice;
//! * the plugins' time: the attaching runtime's own runs summed, and for each delegator run, the
//!   *union* of its delegates' intervals (braid runs a pod's delegates in parallel: what they
//!   take of its ADD is the time at least one runs, not their sum);
//! * a delegator run (one at least one delegate of which attached): its exec to its exit, and
//!   that less the union of its delegates' intervals — braid's own wall time in the ADD (what
//!   it does between and around its delegates: reading its configuration and the pod's
//!   selection, state files and their fsyncs, the fork and exec of each delegate before its
//!   exec event, the merge, the status file). The others (STATUS, …) are only counted.
//!
//! What neither covers: containerd's own fork and exec of the delegator before its exec event.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// braid's plugins, whose runs are braid's, not delegates'.
const BRAID: [&str; 2] = ["delegator", "merger"];
const BIN: &str = "/opt/cni/bin/";

/// A running `perf record` of the node's processes.
pub(super) struct Recording {
    perf: Child,
    file: PathBuf,
    seed: Vec<i32>,
    /// The node's network namespace and the meta-plugin's daemon's names, with their CPU time
    /// when the recording started.
    net_ns: PathBuf,
    daemons: &'static [&'static str],
    daemon_cpu_ms: f64,
}

/// The plugins' time in one recording.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Plugins {
    /// Plugin runs (see the module's doc), and the plugins' time: the runtime's own summed,
    /// the union of each delegator run's delegates (ms).
    pub runs: usize,
    pub runs_ms: f64,
    /// Delegator runs that attached, their wall time summed, and that less the union of their
    /// delegates' intervals (ms).
    pub delegators: usize,
    pub delegator_ms: f64,
    pub delegator_own_ms: f64,
    /// Delegator runs that attached nothing (STATUS, VERSION, GC), not in the figures above.
    pub other_delegators: usize,
    /// On-CPU time (`sched_switch`) of the delegator runs that attached, each from its fork
    /// (its children's between their fork and exec too: spawning is braid's work), and of the
    /// plugin runs counted, their IPAM's included (ms).
    pub delegator_cpu_ms: f64,
    pub runs_cpu_ms: f64,
    /// Of the delegator runs that attached: time in `fsync`, in `flock`, and from forking each
    /// delegate to its exec (ms, summed; spawns overlap one another and the delegates).
    pub delegator_fsync_ms: f64,
    pub delegator_flock_ms: f64,
    pub delegator_spawn_ms: f64,
    /// CPU time (user + system, `/proc/<pid>/stat`) the meta-plugin's daemon (braid's agent,
    /// Multus's daemon) used during the recording, when it has one (ms, 10 ms resolution).
    pub daemon_cpu_ms: Option<f64>,
}

/// Starts recording (and waits a moment for perf to be recording); `None` (said once) when
/// perf cannot: the bench's other figures need no trace.
pub(super) fn start(cluster_dir: &Path, tag: &str, daemons: &'static [&'static str]) -> Option<Recording> {
    let pid: i32 = std::fs::read_to_string(cluster_dir.join("pids/containerd-node1")).ok()?.trim().parse().ok()?;
    let file = std::env::temp_dir().join(format!("braid-bench-trace-{}-{tag}.data", std::process::id()));
    let mut cmd = Command::new("perf");
    // perf records every CPU until told to stop: if the bench dies, so does the recording (the
    // bench calls this from the thread that finishes it, so the thread outlives the recording).
    // SAFETY: the closure only makes one async-signal-safe system call (prctl).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGINT).map_err(std::io::Error::from)
        });
    }
    let perf = cmd
        .args(["record", "-a", "-q", "--synth=no", "-o"])
        .arg(&file)
        .args(["-e", "sched:sched_process_exec", "-e", "sched:sched_process_fork", "-e", "sched:sched_process_exit"])
        .args(["-e", "syscalls:sys_enter_setns", "-e", "sched:sched_switch"])
        .args(["-e", "syscalls:sys_enter_fsync", "-e", "syscalls:sys_exit_fsync"])
        .args(["-e", "syscalls:sys_enter_flock", "-e", "syscalls:sys_exit_flock"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| crate::report::say(&format!("no plugin trace: perf record: {e}")))
        .ok()?;
    // perf opens its events per CPU before it writes the file's header.
    let give_up = std::time::Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(&file).map_or(0, |m| m.len()) == 0 && std::time::Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    // The seed after perf records: a thread made between the two is both seen forked and seeded.
    let seed = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    let net_ns = cluster_dir.join("ns/node1.net");
    let daemon_cpu_ms = cpu_ms(&net_ns, daemons);
    Some(Recording { perf, file, seed, net_ns, daemons, daemon_cpu_ms })
}

/// The CPU time (user + system) of the processes named `names` (`comm`) in the network
/// namespace `net_ns` (ms; `/proc/<pid>/stat`'s clock ticks, 100 a second on Linux's x86 and
/// arm64 ABIs, as `sysconf(_SC_CLK_TCK)` gives).
fn cpu_ms(net_ns: &Path, names: &[&str]) -> f64 {
    let Ok(ns) = std::fs::metadata(net_ns).map(|m| std::os::unix::fs::MetadataExt::ino(&m)) else { return 0.0 };
    let mut ticks = 0u64;
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let p = e.path();
        let Ok(comm) = std::fs::read_to_string(p.join("comm")) else { continue };
        if !names.contains(&comm.trim()) {
            continue;
        }
        if std::fs::metadata(p.join("ns/net")).map(|m| std::os::unix::fs::MetadataExt::ino(&m)).ok() != Some(ns) {
            continue;
        }
        let stat = std::fs::read_to_string(p.join("stat")).unwrap_or_default();
        // After the `(comm)`, which may hold spaces: state is field 3, utime 14, stime 15.
        let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, r)| r).split_whitespace().collect();
        ticks += fields.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        ticks += fields.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    ticks as f64 * 10.0
}

impl Recording {
    /// Ends perf (SIGINT: it writes its file and exits) and waits for it.
    fn stop(&mut self) {
        let _ =
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.perf.id() as i32), nix::sys::signal::Signal::SIGINT);
        let _ = self.perf.wait();
    }

    /// Stops recording and reads what the node's plugins took.
    pub(super) fn finish(mut self) -> Option<Plugins> {
        self.stop();
        let out = Command::new("perf")
            .args(["script", "-F", "tid,time,event,trace", "-i"])
            .arg(&self.file)
            .stderr(Stdio::null())
            .output();
        let _ = std::fs::remove_file(&self.file);
        let out = out.ok()?;
        let mut p = plugins(&String::from_utf8_lossy(&out.stdout), &self.seed);
        if !self.daemons.is_empty() {
            p.daemon_cpu_ms = Some(cpu_ms(&self.net_ns, self.daemons) - self.daemon_cpu_ms);
        }
        Some(p)
    }
}

/// A burst that fails between start and finish stops its recording too (once perf has exited,
/// stopping it again does nothing).
impl Drop for Recording {
    fn drop(&mut self) {
        if matches!(self.perf.try_wait(), Ok(None)) {
            self.stop();
        }
        let _ = std::fs::remove_file(&self.file);
    }
}

/// One run: what an exec started.
struct Run {
    file: String,
    start: f64,
    end: Option<f64>,
    parent: Option<usize>,
    /// On-CPU time of its tasks (s).
    cpu: f64,
    /// A task of it entered a namespace (`setns`): an ADD or DEL, which work in the pod's
    /// network namespace; STATUS, VERSION and GC never enter one.
    setns: bool,
    /// Time its tasks spent in `fsync` and in `flock` (waiting for a lock, mostly), and from
    /// the fork of each child it spawned to that child's exec (s).
    fsync: f64,
    flock: f64,
    spawn: f64,
}

impl Run {
    fn new(file: &str, start: f64, parent: Option<usize>) -> Run {
        Run {
            file: file.to_string(),
            start,
            end: None,
            parent,
            cpu: 0.0,
            setns: false,
            fsync: 0.0,
            flock: 0.0,
            spawn: 0.0,
        }
    }
}

fn base(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

/// A braid run's delegates: their intervals, whether one attached, their CPU time (s).
type Delegated = (Vec<(f64, f64)>, bool, f64);

/// The length of the union of `intervals` (ms): braid runs a pod's delegates in parallel, so
/// what they take of its ADD is the time at least one of them runs, not their sum.
fn union_ms(mut intervals: Vec<(f64, f64)>) -> f64 {
    intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (s, e) in intervals {
        match current {
            Some((cs, ce)) if s <= ce => current = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                current = Some((s, e));
            }
            None => current = Some((s, e)),
        }
    }
    if let Some((cs, ce)) = current {
        total += ce - cs;
    }
    total * 1000.0
}

/// `perf script -F tid,time,event,trace`'s lines (`  8515 35253.740493: sched:sched_process_exec:
/// filename=/bin/echo pid=8515 old_pid=8515`, `  8515 35253.741000: syscalls:sys_enter_setns:
/// fd: 0x00000003, flags: 0x40000000`) read against the seed's tasks.
fn plugins(script: &str, seed: &[i32]) -> Plugins {
    let mut runs = vec![Run::new("containerd", 0.0, None)];
    let mut owner: HashMap<i32, usize> = seed.iter().map(|t| (*t, 0)).collect();
    // The task each CPU-time slice began for, by tid: when it was switched in.
    let mut on_cpu: HashMap<i32, f64> = HashMap::new();
    // When each task was forked (a thread never execs: only a child's exec reads it), and
    // when it entered the `fsync` or `flock` it is in.
    let mut forked_at: HashMap<i32, f64> = HashMap::new();
    let mut in_call: HashMap<i32, f64> = HashMap::new();
    for line in script.lines() {
        let Some((head, rest)) = line.split_once(": ") else { continue };
        // perf pads event names to the longest recorded (`      sched:sched_switch:`).
        let rest = rest.trim_start();
        let mut head = head.split_whitespace();
        let (Some(tid), Some(ts)) =
            (head.next().and_then(|t| t.parse::<i32>().ok()), head.next().and_then(|t| t.parse::<f64>().ok()))
        else {
            continue;
        };
        if rest.starts_with("syscalls:sys_enter_setns") {
            if let Some(&r) = owner.get(&tid) {
                runs[r].setns = true;
            }
            continue;
        }
        if rest.starts_with("syscalls:sys_enter_fsync") || rest.starts_with("syscalls:sys_enter_flock") {
            in_call.insert(tid, ts);
            continue;
        }
        for (exit, fsync) in [("syscalls:sys_exit_fsync", true), ("syscalls:sys_exit_flock", false)] {
            if rest.starts_with(exit) {
                if let (Some(began), Some(&r)) = (in_call.remove(&tid), owner.get(&tid)) {
                    let d = ts - began;
                    if fsync {
                        runs[r].fsync += d;
                    } else {
                        runs[r].flock += d;
                    }
                }
            }
        }
        if let Some(fields) = rest.strip_prefix("sched:sched_switch: ") {
            let num = |k: &str| {
                fields.split_whitespace().find_map(|w| w.strip_prefix(k)?.strip_prefix('=')?.parse::<i32>().ok())
            };
            if let Some(prev) = num("prev_pid") {
                if let (Some(began), Some(&r)) = (on_cpu.remove(&prev), owner.get(&prev)) {
                    runs[r].cpu += ts - began;
                }
            }
            if let Some(next) = num("next_pid") {
                on_cpu.insert(next, ts);
            }
            continue;
        }
        let Some(rest) = rest.strip_prefix("sched:sched_process_") else { continue };
        let Some((event, fields)) = rest.split_once(": ") else { continue };
        let field = |k: &str| fields.split_whitespace().find_map(|w| w.strip_prefix(k)?.strip_prefix('='));
        let num = |k: &str| field(k).and_then(|v| v.parse::<i32>().ok());
        match event {
            "fork" => {
                if let (Some(p), Some(c)) = (num("pid"), num("child_pid")) {
                    if let Some(&r) = owner.get(&p) {
                        owner.insert(c, r);
                        forked_at.insert(c, ts);
                    }
                }
            }
            "exec" => {
                let (Some(pid), Some(old), Some(file)) = (num("pid"), num("old_pid"), field("filename")) else {
                    continue;
                };
                let Some(&parent) = owner.get(&old).or_else(|| owner.get(&pid)) else { continue };
                if let Some(forked) = forked_at.remove(&pid) {
                    runs[parent].spawn += ts - forked;
                }
                runs.push(Run::new(file, ts, Some(parent)));
                owner.remove(&old);
                owner.insert(pid, runs.len() - 1);
            }
            "exit" if field("group_dead") == Some("true") => {
                if let Some(&r) = num("pid").and_then(|p| owner.get(&p)) {
                    let end = runs[r].end.get_or_insert(ts);
                    *end = end.max(ts);
                }
            }
            _ => {}
        }
    }
    let plugin = |r: &Run| r.file.starts_with(BIN) && !BRAID.contains(&base(&r.file));
    let braid = |r: &Run| r.file.starts_with(BIN) && BRAID.contains(&base(&r.file));
    let mut p = Plugins::default();
    // Each plugin run's CPU time with its nested plugins' (a bridge's host-local): children
    // come after their parents in `runs`.
    let mut nested: Vec<f64> = runs.iter().map(|r| r.cpu).collect();
    for i in (1..runs.len()).rev() {
        if let Some(parent) = runs[i].parent.filter(|&q| plugin(&runs[i]) && plugin(&runs[q])) {
            nested[parent] += nested[i];
        }
    }
    // A braid run's delegates, as intervals, and whether one of them attached (ADD or DEL).
    let mut delegated: HashMap<usize, Delegated> = HashMap::new();
    for (i, r) in runs.iter().enumerate().filter(|(_, r)| plugin(r)) {
        let (Some(end), Some(parent)) = (r.end, r.parent) else { continue };
        if plugin(&runs[parent]) {
            continue;
        }
        if braid(&runs[parent]) {
            let d = delegated.entry(parent).or_default();
            d.0.push((r.start, end));
            d.1 |= r.setns;
            d.2 += nested[i];
        } else if r.setns {
            p.runs += 1;
            p.runs_ms += (end - r.start) * 1000.0;
            p.runs_cpu_ms += nested[i] * 1000.0;
        }
    }
    delegated.retain(|_, d| d.1);
    for (i, r) in runs.iter().enumerate().filter(|(_, r)| r.file.starts_with(BIN) && base(&r.file) == "delegator") {
        let Some(end) = r.end else { continue };
        // A run none of whose delegates attached is a STATUS (containerd asks every 5 s), a
        // VERSION or a GC: not a sandbox's ADD.
        let Some((delegates, _, delegates_cpu)) = delegated.remove(&i) else {
            p.other_delegators += 1;
            continue;
        };
        let ms = (end - r.start) * 1000.0;
        p.runs += delegates.len();
        let delegates_ms = union_ms(delegates);
        p.delegators += 1;
        p.delegator_ms += ms;
        p.delegator_own_ms += ms - delegates_ms;
        p.runs_ms += delegates_ms;
        p.runs_cpu_ms += delegates_cpu * 1000.0;
        p.delegator_cpu_ms += r.cpu * 1000.0;
        p.delegator_fsync_ms += r.fsync * 1000.0;
        p.delegator_flock_ms += r.flock * 1000.0;
        p.delegator_spawn_ms += r.spawn * 1000.0;
    }
    // Delegates of a merger (chained after a delegate, not run by the node's containerd
    // directly here) or of a delegator whose exit was not seen: their union, as plugins' time.
    for (_, (d, _, cpu)) in delegated {
        p.runs += d.len();
        p.runs_ms += union_ms(d);
        p.runs_cpu_ms += cpu * 1000.0;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// containerd (seeded thread 10) runs the delegator (a fork from a thread it made, 11),
    /// which runs bridge (which runs host-local) and, overlapping it, ptp; another cluster's
    /// delegator (pid 50, not a descendant) is not counted, nor is a thread's exit; a STATUS
    /// delegator run (its bridge enters no namespace) is counted apart; loopback attaches.
    #[test]
    fn runs_count_from_the_nodes_containerd_nested_ipam_inside_its_parent_parallel_delegates_once() {
        let script = "\
   10 100.000000: sched:sched_process_fork: comm=containerd pid=10 child_comm=containerd child_pid=11
   11 100.001000: sched:sched_process_fork: comm=containerd pid=11 child_comm=containerd child_pid=20
   20 100.002000: sched:sched_process_exec: filename=/opt/cni/bin/delegator pid=20 old_pid=20
   50 100.002500: sched:sched_process_exec: filename=/opt/cni/bin/delegator pid=50 old_pid=50
   20 100.002100:       sched:sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=delegator next_pid=20 next_prio=120
   20 100.002600: syscalls:sys_enter_setns: fd: 0x00000007, flags: 0x40000000
   20 100.003100: sched:sched_switch: prev_comm=delegator prev_pid=20 prev_prio=120 prev_state=S ==> next_comm=bridge next_pid=21 next_prio=120
   20 100.002700: syscalls:sys_enter_fsync: fd: 0x00000009
   20 100.002900: syscalls:sys_exit_fsync: 0x0
   20 100.003000: sched:sched_process_fork: comm=delegator pid=20 child_comm=delegator child_pid=21
   20 100.003100: sched:sched_process_fork: comm=delegator pid=20 child_comm=delegator child_pid=24
   21 100.004000: sched:sched_process_exec: filename=/opt/cni/bin/bridge pid=21 old_pid=21
   21 100.004100: sched:sched_switch: prev_comm=bridge prev_pid=21 prev_prio=120 prev_state=S ==> next_comm=bridge next_pid=22 next_prio=120
   24 100.004500: sched:sched_process_exec: filename=/opt/cni/bin/ptp pid=24 old_pid=24
   21 100.005000: sched:sched_process_fork: comm=bridge pid=21 child_comm=bridge child_pid=22
   22 100.005000: sched:sched_process_fork: comm=bridge pid=22 child_comm=bridge child_pid=23
   22 100.005500: syscalls:sys_enter_setns: fd: 0x00000008, flags: 0x40000000
   23 100.006000: sched:sched_process_exec: filename=/opt/cni/bin/host-local pid=23 old_pid=23
   22 100.006100: sched:sched_switch: prev_comm=bridge prev_pid=22 prev_prio=120 prev_state=S ==> next_comm=host-local next_pid=23 next_prio=120
   23 100.007100: sched:sched_switch: prev_comm=host-local prev_pid=23 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
   23 100.008000: sched:sched_process_exit: comm=host-local pid=23 prio=120 group_dead=true
   24 100.009000: sched:sched_process_exit: comm=ptp pid=24 prio=120 group_dead=true
   21 100.010000: sched:sched_process_exit: comm=bridge pid=21 prio=120 group_dead=false
   22 100.012000: sched:sched_process_exit: comm=bridge pid=22 prio=120 group_dead=true
   50 100.013000: sched:sched_process_exit: comm=delegator pid=50 prio=120 group_dead=true
   20 100.015000: sched:sched_process_exit: comm=delegator pid=20 prio=120 group_dead=true
   11 100.016000: sched:sched_process_fork: comm=containerd pid=11 child_comm=containerd child_pid=30
   30 100.017000: sched:sched_process_exec: filename=/opt/cni/bin/loopback pid=30 old_pid=30
   30 100.017500: syscalls:sys_enter_setns: fd: 0x00000003, flags: 0x40000000
   30 100.018000: sched:sched_process_exit: comm=loopback pid=30 prio=120 group_dead=true
   11 100.020000: sched:sched_process_fork: comm=containerd pid=11 child_comm=containerd child_pid=40
   40 100.021000: sched:sched_process_exec: filename=/opt/cni/bin/delegator pid=40 old_pid=40
   40 100.022000: sched:sched_process_fork: comm=delegator pid=40 child_comm=delegator child_pid=41
   41 100.023000: sched:sched_process_exec: filename=/opt/cni/bin/bridge pid=41 old_pid=41
   41 100.024000: sched:sched_process_exit: comm=bridge pid=41 prio=120 group_dead=true
   40 100.025000: sched:sched_process_exit: comm=delegator pid=40 prio=120 group_dead=true
";
        let p = plugins(script, &[10]);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert_eq!((p.runs, p.delegators, p.other_delegators), (3, 1, 1), "{p:?}");
        // bridge 100.004 → 100.012 (its last thread) with ptp 100.0045 → 100.009 inside it:
        // 8 ms of delegates, not 12.5; loopback 1 ms.
        assert!(close(p.runs_ms, 9.0), "{p:?}");
        // The delegator 100.002 → 100.015, less its delegates' 8 ms.
        assert!(close(p.delegator_ms, 13.0) && close(p.delegator_own_ms, 5.0), "{p:?}");
        // On CPU: the delegator 1 ms; bridge's tasks 1 + 2 ms and its host-local's 1 ms, a slice
        // counted for the run its task belongs to when switched out.
        assert!(close(p.delegator_cpu_ms, 1.0), "{p:?}");
        assert!(close(p.runs_cpu_ms, 4.0), "{p:?}");
        // fsync 0.2 ms; bridge forked at 100.003 and exec'd at 100.004, ptp 100.0031 → 100.0045.
        assert!(close(p.delegator_fsync_ms, 0.2) && close(p.delegator_flock_ms, 0.0), "{p:?}");
        assert!(close(p.delegator_spawn_ms, 1.0 + 1.4), "{p:?}");
        assert_eq!(p.daemon_cpu_ms, None);
    }

    #[test]
    fn union_of_intervals() {
        assert!((union_ms(vec![(1.0, 2.0), (1.5, 3.0), (4.0, 4.5)]) - 2500.0).abs() < 1e-6);
        assert_eq!(union_ms(vec![]), 0.0);
    }
}
