//! The churn soak's benchmark half (the suite's bounded run is `integration/tests/soak.rs`):
//! containerd's CRI with braid installed as on a node — `braid-install --once` over a bridge
//! primary, the example ConfigMap mirrored — and beside it a second containerd with the same
//! bridge primary alone (no braid). Four workers standing in for the kubelet create and remove
//! the same pods on each (three networks with braid: the primary and `default/isolated`,
//! `default/storage` selected by the pod's annotation; the primary alone without), each daemon
//! SIGKILLed once part-way and started again while they run.
//!
//! The two arms run in halves, braid, plain, plain, braid (ABBA: a drift of the machine that is
//! linear in time weighs on both alike). Reported: pods per second of each arm, the median and
//! p90 of RunPodSandbox and of StopPodSandbox + RemovePodSandbox, and braid's share of
//! RunPodSandbox (docs/bench/NOTES.md defines it). Verdicts: every pod came up whole, and nothing
//! leaked — no sandbox, IP reservation, link, braid state, status or lock file, pod namespace
//! lock, libcni cache entry, pod namespace or mount — each leftover named.
//!
//! Everything lives in namespaces and directories of its own (198.18.0.0/15 only); the daemons
//! are stopped by PID and everything removed on drop. The release profile aborts on panic, so no
//! destructor would run when the harness (`braid_integration::containerd`, `node`) panics on a
//! broken environment: a panic hook then removes what this run created, found by the unique
//! names it gave it.
//!
//! The node is the suite's (`braid_integration::node`: the same primary, example networks and
//! `braid-install --once`), with the release binaries.

use crate::cases::World;
use crate::stats::Sample;
use crate::verdict::Verdict;
use braid_integration::containerd::{self, shim_socket, Containerd};
use braid_integration::cri::{self, Cri, PodSandboxConfig};
use braid_integration::node::{
    bridge_primary, install_braid, status_interfaces, EXAMPLE_INTERFACES, EXAMPLE_SELECTION, ISOLATED_BRIDGE,
    NETWORKS_ANNOTATION, STORAGE_MASTER,
};
use braid_integration::runtime::{
    libcni_cache_entries, mounts_below, remove_libcni_cache_entries, stop_processes_mentioning, unmount_below,
    wait_for, LIBCNI_CACHE,
};
use braid_integration::{build_dir, unique, BRAID_BINARIES};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Concurrent workers, as in the suite's soak.
const WORKERS: usize = 4;
/// How long a worker retries one call while its daemon is down or starting again (the suite's).
const RETRY: Duration = Duration::from_secs(60);
/// The harness tags of the two nodes: their directories and namespaces carry them.
const TAG_BRAID: &str = "soakb";
const TAG_PLAIN: &str = "soakp";

/// The case: `pods` pods through each arm (`w.reps(200)`).
pub fn soak(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    preflight(w)?;
    let pods = w.reps(200).max(8);
    let halves = [pods / 2, pods - pods / 2];
    let guard = AbortSweep::install();
    let mut braid = Node::braid(w)?;
    let mut plain = Node::plain()?;
    let mut arms = [Arm::new(true), Arm::new(false)];
    // ABBA; each arm's daemon is killed in its first half, once a quarter of its pods are up.
    for (arm, half) in [(0, 0), (1, 0), (1, 1), (0, 1)] {
        let node = if arm == 0 { &mut braid } else { &mut plain };
        let kill_after = (half == 0).then_some((halves[0] / 2).max(1));
        crate::report::say(&format!(
            "soak: {} pods {}, half {}{}",
            halves[half],
            arms[arm].label(),
            half + 1,
            if kill_after.is_some() { ", containerd SIGKILLed part-way" } else { "" }
        ));
        phase(node, &mut arms[arm], &format!("h{half}"), halves[half], kill_after);
    }
    let [b, p] = &mut arms;
    let mut left = finish(&mut braid, b);
    left.extend(finish(&mut plain, p));
    for e in cache_of(&[], true) {
        if !left.iter().any(|l| l.contains(&e)) {
            left.push(format!("libcni cache entry {LIBCNI_CACHE}/{e} (of a pod of this run)"));
        }
    }
    let out = report(&arms, pods, &left);
    drop((braid, plain));
    drop(guard);
    Ok(out)
}

/// The tools, and braid's binaries where `containerd.rs` links them from (it takes them from
/// [`build_dir`], which must be this binary's directory, and would build them if missing).
fn preflight(w: &World) -> Result<(), String> {
    let on_path =
        |c: &str| std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(c).is_file()));
    let missing: Vec<&str> = containerd::COMMANDS.iter().copied().filter(|c| !on_path(c)).collect();
    if !missing.is_empty() || !Path::new(braid_integration::runtime::BUSYBOX).exists() {
        return Err(format!(
            "the soak needs {} and busybox-static (apt-get install containerd runc busybox-static)",
            missing.join(", ")
        ));
    }
    if build_dir() != w.bins {
        return Err(format!(
            "the soak takes braid's binaries from {}, not {}",
            build_dir().display(),
            w.bins.display()
        ));
    }
    for b in BRAID_BINARIES.iter().chain(&["braid-install"]) {
        if !w.bins.join(b).exists() {
            return Err(format!("{} is missing: build the release binaries first", w.bins.join(b).display()));
        }
    }
    Ok(())
}

/// One containerd: with braid installed, or the bridge primary alone.
struct Node {
    c: Containerd,
    braid: bool,
    /// Links of the node's namespace that are not pods' (bridges, the macvlan master).
    own_links: Vec<String>,
    /// braid's status directory (with braid): the pods' network-status documents.
    status_dir: PathBuf,
}

impl Node {
    fn plain() -> Result<Node, String> {
        let (name, bridge) = (unique("spl"), unique("br"));
        AbortSweep::network(&name);
        let c = Containerd::start(TAG_PLAIN, |h| vec![bridge_primary(h, &name, &bridge, 151)], 1);
        let own_links = vec!["lo".to_string(), bridge];
        Ok(Node { c, braid: false, own_links, status_dir: PathBuf::new() })
    }

    /// As `integration/tests/soak.rs` sets up its node, with the release binaries.
    fn braid(w: &World) -> Result<Node, String> {
        let (name, bridge, braid) = (unique("scl"), unique("br"), unique("braid"));
        AbortSweep::network(&name);
        AbortSweep::network(&braid);
        let mut c = Containerd::start(TAG_BRAID, |h| vec![bridge_primary(h, &name, &bridge, 150)], 1);
        let status_dir = install_braid(&mut c, &w.bins, &braid).status_dir;
        let (master, peer) = STORAGE_MASTER;
        let own_links = ["lo", master, peer, ISOLATED_BRIDGE, &bridge].map(String::from).to_vec();
        Ok(Node { c, braid: true, own_links, status_dir })
    }
}

/// What one arm saw over its halves.
#[derive(Default)]
struct Arm {
    braid: bool,
    /// Successful RunPodSandbox calls.
    run: Vec<Duration>,
    /// Successful StopPodSandbox + RemovePodSandbox pairs.
    remove: Vec<Duration>,
    /// Pods created and removed, and the wall time of the halves.
    done: usize,
    wall: Duration,
    /// Every sandbox ID a worker got back.
    ids: Vec<String>,
    /// Pods that came up without all their networks, or that never came up.
    broken: Vec<String>,
    /// Calls that failed and were retried (around the kill).
    retried: usize,
    /// The pod namespaces' lock files (braid's naming lock), to be gone at the end.
    locks: Vec<PathBuf>,
    /// The kill happened, and pods came up after it.
    killed: bool,
    up_after_kill: usize,
}

impl Arm {
    fn new(braid: bool) -> Arm {
        Arm { braid, ..Arm::default() }
    }

    fn label(&self) -> &'static str {
        if self.braid {
            "braid: 3 networks (2 by annotation)"
        } else {
            "plain bridge primary"
        }
    }
}

fn config(name: &str) -> PodSandboxConfig {
    PodSandboxConfig::pod("braid-test", name, &[(NETWORKS_ANNOTATION, EXAMPLE_SELECTION)])
}

/// One half of an arm: `pods` pods by [`WORKERS`] workers, the daemon SIGKILLed and started
/// again once `kill_after` of them are up.
fn phase(node: &mut Node, arm: &mut Arm, tag: &str, pods: usize, kill_after: Option<usize>) {
    let (tickets, up) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let seen = Mutex::new(std::mem::take(arm));
    let n: &Node = node;
    let start = Instant::now();
    let mut killed_at = None;
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| worker(n, tag, pods, &tickets, &up, &seen));
        }
        if let Some(k) = kill_after {
            // Bounded: if pods stop coming up, the workers give up within RETRY each.
            let reached = wait_for(RETRY * 3, || (up.load(Ordering::SeqCst) >= k).then_some(()));
            if reached.is_some() && up.load(Ordering::SeqCst) < pods {
                n.c.kill_and_restart();
                killed_at = Some(up.load(Ordering::SeqCst));
            }
        }
    });
    let wall = start.elapsed();
    *arm = seen.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    arm.wall += wall;
    if let Some(at) = killed_at {
        arm.killed = true;
        arm.up_after_kill += up.load(Ordering::SeqCst).saturating_sub(at);
        node.c.reconnect();
    }
}

/// A CRI client, retried while the daemon is down (bounded by `until`).
fn connect(n: &Node, until: Instant) -> Option<Cri> {
    loop {
        match n.c.client() {
            Ok(c) => return Some(c),
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(100)),
            Err(_) => return None,
        }
    }
}

/// One worker: takes pod tickets until `pods` are handed out; for each, RunPodSandbox (timed),
/// a look at the pod (its IP; with braid its network-status document and namespace lock),
/// StopPodSandbox + RemovePodSandbox (timed). A failed call is retried with a new client, as the
/// kubelet retries, for at most [`RETRY`]; the time of the call that succeeded is what counts.
fn worker(n: &Node, tag: &str, pods: usize, tickets: &AtomicUsize, up: &AtomicUsize, seen: &Mutex<Arm>) {
    let lock = || seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let arm = if n.braid { "b" } else { "p" };
    let Some(mut cri) = connect(n, Instant::now() + RETRY) else {
        lock().broken.push(format!("worker of half {tag}: no CRI connection in {RETRY:?}"));
        return;
    };
    loop {
        let k = tickets.fetch_add(1, Ordering::SeqCst);
        if k >= pods {
            return;
        }
        let name = format!("soak{arm}-{tag}-{k}");
        // Retried until `until`: reconnects, then the call again.
        let retry = |cri: &mut Cri, until: Instant| -> bool {
            lock().retried += 1;
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(200));
            match connect(n, until) {
                Some(c) => {
                    *cri = c;
                    true
                }
                None => false,
            }
        };
        let until = Instant::now() + RETRY;
        let id = loop {
            let t = Instant::now();
            match cri.run_pod_sandbox(config(&name)) {
                Ok(id) => {
                    lock().run.push(t.elapsed());
                    break Some(id);
                }
                Err(e) if !retry(&mut cri, until) => {
                    lock().broken.push(format!("pod {name} never came up: RunPodSandbox: {e}"));
                    break None;
                }
                Err(_) => {}
            }
        };
        let Some(id) = id else { continue };
        AbortSweep::pod(&n.c, &id);
        lock().ids.push(id.clone());
        up.fetch_add(1, Ordering::SeqCst);
        let until = Instant::now() + RETRY;
        let status = loop {
            match cri.pod_sandbox_status(&id) {
                Ok(s) => break Some(s),
                Err(e) if !retry(&mut cri, until) => {
                    lock().broken.push(format!("pod {name} ({id}): PodSandboxStatus: {e}"));
                    break None;
                }
                Err(_) => {}
            }
        };
        if let Some(s) = status {
            look_at(n, &name, &id, &s, &mut lock());
        }
        let until = Instant::now() + RETRY;
        loop {
            let t = Instant::now();
            match cri.stop_pod_sandbox(&id).and_then(|()| cri.remove_pod_sandbox(&id)) {
                Ok(()) => {
                    let mut a = lock();
                    a.remove.push(t.elapsed());
                    a.done += 1;
                    break;
                }
                // Left to the sweep at the end, which names what it leaves.
                Err(e) if !retry(&mut cri, until) => {
                    lock().broken.push(format!("pod {name} ({id}) not removed: {e}"));
                    break;
                }
                Err(_) => {}
            }
        }
    }
}

/// Whether a pod came up whole: a pod IP, and with braid the three interfaces its
/// network-status document names (it is written after the delegator's ADD); notes its
/// namespace's lock file, which braid must have removed by the end.
fn look_at(n: &Node, name: &str, id: &str, s: &cri::PodSandboxStatusResponse, arm: &mut Arm) {
    let ip = s.status.as_ref().and_then(|s| s.network.as_ref()).map(|n| n.ip.clone()).unwrap_or_default();
    if ip.is_empty() {
        arm.broken.push(format!("pod {name} ({id}) came up without a pod IP"));
    }
    if !n.braid {
        return;
    }
    let ifs = status_interfaces(&n.status_dir, id);
    if ifs != EXAMPLE_INTERFACES {
        arm.broken.push(format!("pod {name} ({id}) came up with {ifs:?}, not eth0, net1, net2"));
    }
    match s.netns().and_then(|p| std::fs::metadata(p).ok()) {
        Some(m) => {
            use std::os::unix::fs::MetadataExt;
            let lock = Path::new(braid_attach::ifnames::LOCK_DIR).join(format!("netns-{}-{}.lock", m.dev(), m.ino()));
            AbortSweep::lock(&lock);
            arm.locks.push(lock);
        }
        None => arm.broken.push(format!("pod {name} ({id}): no network namespace in its status")),
    }
}

/// Removes what the daemon still lists (sandboxes whose RunPodSandbox the kill cut: the kubelet
/// removes those), then looks for everything that could be left, named.
fn finish(n: &mut Node, arm: &mut Arm) -> Vec<String> {
    let what = if n.braid { "braid" } else { "plain" };
    n.c.adopt(arm.ids.iter().cloned());
    let listed: Vec<String> = match n.c.cri().list_pod_sandboxes() {
        Ok(l) => l.into_iter().map(|p| p.id).collect(),
        Err(e) => return vec![format!("{what}: ListPodSandbox failed: {e}")],
    };
    n.c.adopt(listed.iter().cloned());
    for id in &listed {
        AbortSweep::pod(&n.c, id);
    }
    let mut cut = 0;
    for id in &listed {
        cut += usize::from(!arm.ids.contains(id));
        let ok = n.c.cri().stop_pod_sandbox(id).and_then(|()| n.c.cri().remove_pod_sandbox(id));
        if ok.is_ok() {
            n.c.removed(id);
        }
    }
    if cut > 0 {
        crate::report::say(&format!(
            "soak, {what}: {cut} sandbox(es) the kill cut mid-RunPodSandbox, removed as the kubelet would"
        ));
    }
    let mut left = Vec::new();
    match n.c.cri().list_pod_sandboxes() {
        Ok(l) => left.extend(l.into_iter().map(|p| format!("sandbox {}", p.id))),
        Err(e) => left.push(format!("ListPodSandbox failed: {e}")),
    }
    left.extend(n.c.h.reservations().into_iter().map(|r| format!("IP reservation {r}")));
    let links = n.c.h.host.links();
    left.extend(links.into_iter().filter(|l| !n.own_links.contains(l)).map(|l| format!("link {l} on the node")));
    for f in n.c.h.dir.files() {
        let kind = if f.ends_with(".lock") { "lock file" } else { "file" };
        if f.starts_with("state/") && !f.ends_with(".braid-owner") {
            left.push(format!("braid state {kind} {f}"));
        } else if f.starts_with("status/") {
            left.push(format!("braid status {kind} {f}"));
        }
    }
    left.extend(arm.locks.iter().filter(|l| l.exists()).map(|l| format!("pod namespace lock {}", l.display())));
    // By network name, and by sandbox ID whatever the network (a delegate's entry).
    let mut cache = libcni_cache_entries(n.c.networks());
    let ids: Vec<String> = arm.ids.iter().chain(&listed).cloned().collect();
    cache.extend(cache_of(&ids, false).into_iter().filter(|f| !cache.contains(f)).collect::<Vec<_>>());
    left.extend(cache.into_iter().map(|e| format!("libcni cache entry {LIBCNI_CACHE}/{e}")));
    left.extend(n.c.pod_namespaces().into_iter().map(|p| format!("pod namespace {p}")));
    left.extend(mounts_below(n.c.h.dir.path()).into_iter().map(|m| format!("mount {}", m.display())));
    let shims = n.c.shim_sockets_left();
    if !shims.is_empty() {
        // containerd's own (a sandbox it was handling when killed), not braid's: the suite notes
        // them too; removed with the shims on drop.
        crate::report::say(&format!("soak, {what}: note: containerd left {} shim socket(s): {shims:?}", shims.len()));
    }
    left.into_iter().map(|l| format!("{what}: {l}")).collect()
}

fn ms(d: &Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The samples and verdicts.
fn report(arms: &[Arm; 2], pods: usize, left: &[String]) -> (Vec<Sample>, Vec<Verdict>) {
    let mut samples = Vec::new();
    let mut run = Vec::new();
    for a in arms {
        let mut r = Sample::new("soak: RunPodSandbox", a.label(), "ms");
        r.values = a.run.iter().map(ms).collect();
        let mut rm = Sample::new("soak: StopPodSandbox + RemovePodSandbox", a.label(), "ms");
        rm.values = a.remove.iter().map(ms).collect();
        let mut ps = Sample::new("soak: pods per second (created and removed)", a.label(), "pods/s");
        ps.values = vec![a.done as f64 / a.wall.as_secs_f64().max(1e-9)];
        crate::report::say(&format!(
            "soak, {}: {} pods in {:.1} s = {:.2} pods/s; RunPodSandbox median {:.1} ms, p90 {:.1} ms; \
             Stop+Remove median {:.1} ms, p90 {:.1} ms; {} calls retried around the kill",
            a.label(),
            a.done,
            a.wall.as_secs_f64(),
            ps.values[0],
            r.median(),
            r.p90(),
            rm.median(),
            rm.p90(),
            a.retried
        ));
        run.push(r.clone());
        samples.extend([r, rm, ps]);
    }
    // braid's share of RunPodSandbox: the part of the braid pod's RunPodSandbox (median) that the
    // plain pod's does not have; and that difference per network braid adds (two).
    let (b, p) = (run[0].median(), run[1].median());
    let mut share =
        Sample::new("soak: braid's share of RunPodSandbox ((braid − plain) ÷ braid, medians)", "braid", "%");
    share.values = vec![100.0 * (b - p) / b.max(1e-9)];
    let mut per = Sample::new("soak: RunPodSandbox", "braid − plain, per network braid adds (medians ÷ 2)", "ms");
    per.values = vec![(b - p) / 2.0];
    crate::report::say(&format!(
        "soak: braid's share of RunPodSandbox {:.1} % ({b:.1} ms vs {p:.1} ms plain; {:.1} ms per added network)",
        share.values[0], per.values[0]
    ));
    samples.extend([per, share]);
    let mut whole = Vec::new();
    for a in arms {
        whole.extend(a.broken.iter().map(|x| format!("{}: {x}", a.label())));
        if !a.killed {
            whole.push(format!("{}: containerd was not killed part-way", a.label()));
        } else if a.up_after_kill == 0 {
            whole.push(format!("{}: no pod came up after the restart", a.label()));
        }
    }
    let verdicts = vec![
        Verdict::plain(
            format!("soak: {pods} pods each with braid and on plain bridge, {WORKERS} workers, containerd SIGKILLed and restarted once in each: every pod up whole"),
            if whole.is_empty() {
                format!(
                    "{} + {} pods up and removed (braid's each with eth0, net1, net2), {} + {} calls retried around the kills",
                    arms[0].done, arms[1].done, arms[0].retried, arms[1].retried
                )
            } else {
                whole.join("; ")
            },
            "every pod up with all its networks, none given up",
            whole.is_empty(),
        ),
        Verdict::plain(
            "soak: nothing leaked (sandbox, reservation, link, state/status/lock file, pod namespace lock, libcni cache entry, pod namespace, mount)",
            if left.is_empty() { "nothing left".into() } else { format!("left: {}", left.join("; ")) },
            "nothing left",
            left.is_empty(),
        ),
    ];
    (samples, verdicts)
}

/// What a panic must remove, since the release profile aborts and no destructor runs: the
/// daemons, their shims and sandboxes, mounts, directories and namespaces of this run (found by
/// the harness's unique names: `braid-<tag><pid>x…`), the libcni cache entries of its networks,
/// the shim sockets and pod namespace locks of its pods. Installed for the case (it calls the
/// hook it replaced first); the default hook is back when the case ends.
struct AbortSweep;

#[derive(Default)]
struct Made {
    networks: Vec<String>,
    /// Sandbox IDs: the libcni cache entries naming them (containerd's loopback's too).
    ids: Vec<String>,
    /// Shim sockets of the sandboxes created.
    shims: Vec<PathBuf>,
    locks: Vec<PathBuf>,
    /// `/run/containerd` directories that did not exist before.
    dirs: Vec<PathBuf>,
}

static MADE: Mutex<Option<Made>> = Mutex::new(None);

impl AbortSweep {
    fn install() -> AbortSweep {
        let dirs = ["/run/containerd", "/run/containerd/s"].map(PathBuf::from).into_iter().filter(|d| !d.exists());
        *MADE.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(Made { dirs: dirs.collect(), ..Made::default() });
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            sweep_everything();
        }));
        AbortSweep
    }

    fn with(f: impl FnOnce(&mut Made)) {
        if let Some(m) = MADE.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_mut() {
            f(m);
        }
    }

    fn network(name: &str) {
        Self::with(|m| m.networks.push(name.to_string()));
    }

    fn lock(path: &Path) {
        Self::with(|m| m.locks.push(path.to_path_buf()));
    }

    /// A sandbox: its shim socket and libcni cache entries go if the run panics.
    fn pod(c: &Containerd, id: &str) {
        let shim = shim_socket(c.socket(), id);
        Self::with(|m| {
            m.shims.extend(shim);
            m.ids.push(id.to_string());
        });
    }
}

impl Drop for AbortSweep {
    /// The case is over (its verdicts taken, its nodes dropped): what containerd itself left in
    /// the shared libcni cache for these sandboxes goes too.
    fn drop(&mut self) {
        let _ = std::panic::take_hook();
        let made = MADE.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take().unwrap_or_default();
        remove_cache_of(&made.ids);
    }
}

/// libcni cache entries naming one of these sandboxes, or (`any_pod`) recording the pod UID of
/// any pod of this run (`uid<pid>x…`, see [`config`]): also those of sandboxes whose
/// RunPodSandbox the kill cut, whose ID no worker learnt (containerd caches its loopback
/// network's result there too).
fn cache_of(ids: &[String], any_pod: bool) -> Vec<String> {
    // `unique("uid")` is `uid<pid>x<n>`: the JSON string starts so.
    let uid = format!("\"uid{}x", std::process::id());
    let mut out: Vec<String> = std::fs::read_dir(LIBCNI_CACHE)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let f = e.file_name().to_string_lossy().into_owned();
            ids.iter().any(|id| f.contains(id.as_str()))
                || (any_pod && std::fs::read(e.path()).is_ok_and(|b| String::from_utf8_lossy(&b).contains(&uid)))
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

fn remove_cache_of(ids: &[String]) {
    for f in cache_of(ids, true) {
        let _ = std::fs::remove_file(Path::new(LIBCNI_CACHE).join(f));
    }
}

/// The panic hook's work (see [`AbortSweep`]).
fn sweep_everything() {
    let made = MADE.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take().unwrap_or_default();
    crate::report::say("soak: panicked; removing what it created");
    let mut shims = made.shims.clone();
    let pid = std::process::id();
    let ours = |dir: &Path, prefixes: [String; 2]| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| prefixes.iter().any(|p| e.file_name().to_string_lossy().starts_with(p.as_str())))
            .map(|e| e.path())
            .collect()
    };
    for dir in ours(&std::env::temp_dir(), [TAG_BRAID, TAG_PLAIN].map(|t| format!("braid-{t}{pid}x"))) {
        // The sandboxes' processes first (runc's state: the `Root` containerd.rs configures).
        let root = dir.join("containerd/runc/k8s.io");
        let ids = Command::new("runc").arg("--root").arg(&root).args(["list", "-q"]).output();
        let socket = dir.join("containerd/containerd.sock");
        for id in ids.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default().lines() {
            let _ = Command::new("runc").arg("--root").arg(&root).args(["delete", "-f", id]).output();
            shims.extend(shim_socket(&socket, id));
        }
        // The daemon (its --config) and its shims (its socket) name the directory.
        stop_processes_mentioning(&dir.display().to_string(), Duration::from_secs(3));
        unmount_below(&dir);
        let _ = std::fs::remove_dir_all(&dir);
    }
    for ns in ours(Path::new("/run/netns"), [TAG_BRAID, TAG_PLAIN].map(|t| format!("braid-{t}h{pid}x"))) {
        if let Some(name) = ns.file_name() {
            let _ = Command::new("ip").arg("netns").arg("delete").arg(name).status();
        }
    }
    remove_libcni_cache_entries(&made.networks);
    remove_cache_of(&made.ids);
    for f in shims.iter().chain(&made.locks) {
        let _ = std::fs::remove_file(f);
    }
    for d in made.dirs.iter().rev() {
        let _ = std::fs::remove_dir(d);
    }
}
