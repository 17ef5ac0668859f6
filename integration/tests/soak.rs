//! A churn soak on a node as braid is installed there: containerd's CRI with a bridge primary
//! network, `braid-install --once` wrapping it in the delegator and mirroring the example
//! ConfigMap's definitions, and four workers standing in for the kubelet, each creating and
//! removing pods with three networks (the cluster network, and `default/isolated` and
//! `default/storage` selected by the pod's annotation). Part-way the daemon is SIGKILLed and
//! started again; the workers carry on (what failed, fails). Then every pod is removed.
//!
//! Every pod that came up had all three networks (its network-status document, written after
//! the delegator's ADD, lists them) — none was left half-attached — and at the end nothing is
//! left: no IP reservation, no link, no braid state, status or lock file, no libcni cache entry,
//! no pod namespace mount, no shim. Bounded: a few dozen pods.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::containerd::{self, Containerd};
use braid_integration::cri::{Cri, PodSandboxConfig};
use braid_integration::node::{
    bridge_primary, install_braid, status_interfaces, Braid, EXAMPLE_INTERFACES, EXAMPLE_SELECTION, NETWORKS_ANNOTATION,
};
use braid_integration::runtime::{libcni_cache_entries, require_root_and};
use braid_integration::{build_dir, unique};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Pods each worker creates and removes.
const PODS_PER_WORKER: usize = 10;
const WORKERS: usize = 4;
/// Pods up (all workers together) before the daemon is killed.
const KILL_AFTER: usize = 8;

struct Node {
    c: Containerd,
    braid: Braid,
}

/// containerd with a bridge primary, braid installed by `braid-install --once` (the binary of
/// the build directory, run on the "host" directories of the test as the image would).
fn node(test: &str) -> Option<Node> {
    let mut cmds = containerd::COMMANDS.to_vec();
    cmds.push("nsenter");
    if !require_root_and(test, &cmds) {
        return None;
    }
    let mut c = Containerd::start("soak", |h| vec![bridge_primary(h, &unique("scl"), &unique("br"), 150)], 1);
    let braid = install_braid(&mut c, &build_dir(), &unique("braid"));
    Some(Node { c, braid })
}

/// What the workers saw.
#[derive(Default)]
struct Seen {
    /// Pods that came up: (id, the interfaces of its network-status document).
    up: Vec<(String, Vec<String>)>,
    /// Every sandbox ID a worker got back.
    ids: Vec<String>,
    /// Calls that failed (while the daemon was down, or cut by its death).
    failures: Vec<String>,
}

fn config(name: &str) -> PodSandboxConfig {
    PodSandboxConfig::pod("braid-test", name, &[(NETWORKS_ANNOTATION, EXAMPLE_SELECTION)])
}

/// How long a worker retries one call while the daemon is down or starting again.
const RETRY: Duration = Duration::from_secs(60);

/// One worker: create a pod, look at it, remove it. A call that fails (the daemon killed under
/// it, or not yet serving again) is retried with a client made anew, as the kubelet retries;
/// every failure is noted, none is fatal.
fn worker(n: &Node, w: usize, up_count: &AtomicUsize, seen: &Mutex<Seen>) {
    let connect = || -> Cri {
        loop {
            match n.c.client() {
                Ok(c) => return c,
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    };
    let mut cri = connect();
    let note = |what: String| seen.lock().unwrap().failures.push(what);
    for k in 0..PODS_PER_WORKER {
        let name = format!("soak-{w}-{k}");
        let started = std::time::Instant::now();
        let id = loop {
            match cri.run_pod_sandbox(config(&name)) {
                Ok(id) => break Some(id),
                Err(e) if started.elapsed() < RETRY => {
                    note(format!("{name}: RunPodSandbox: {e}"));
                    std::thread::sleep(Duration::from_millis(200));
                    cri = connect();
                }
                Err(e) => {
                    note(format!("{name}: RunPodSandbox, given up: {e}"));
                    break None;
                }
            }
        };
        let Some(id) = id else { continue };
        seen.lock().unwrap().ids.push(id.clone());
        let ifs = status_interfaces(&n.braid.status_dir, &id);
        seen.lock().unwrap().up.push((id.clone(), ifs));
        up_count.fetch_add(1, Ordering::SeqCst);
        let started = std::time::Instant::now();
        while let Err(e) = cri.stop_pod_sandbox(&id).and_then(|()| cri.remove_pod_sandbox(&id)) {
            note(format!("{name}: removing: {e}"));
            if started.elapsed() >= RETRY {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
            cri = connect();
        }
    }
}

#[test]
fn churn_with_the_runtime_killed_part_way_leaves_nothing() {
    let Some(mut n) = node("churn_with_the_runtime_killed_part_way_leaves_nothing") else { return };
    // containerd's built-in loopback network ("cni-loopback") is shared by every containerd of the
    // machine: what this run adds to libcni's cache under it is told apart by what was there before.
    let loopback_before = libcni_cache_entries(&["cni-loopback".to_string()]);
    let up_count = AtomicUsize::new(0);
    let seen = Mutex::new(Seen::default());
    let up_after_restart = AtomicUsize::new(0);
    let n_ref = &n;
    std::thread::scope(|s| {
        for w in 0..WORKERS {
            let (up_count, seen) = (&up_count, &seen);
            s.spawn(move || worker(n_ref, w, up_count, seen));
        }
        // The runtime dies part-way, pods being created and removed around it: SIGKILL, then
        // it is started again; the workers carry on.
        let waited = braid_integration::runtime::wait_for(Duration::from_secs(120), || {
            (up_count.load(Ordering::SeqCst) >= KILL_AFTER).then_some(())
        });
        assert!(waited.is_some(), "fewer than {KILL_AFTER} pods came up: {:?}", seen.lock().unwrap().failures);
        n_ref.c.kill_and_restart();
        up_after_restart.store(up_count.load(Ordering::SeqCst), Ordering::SeqCst);
    });
    n.c.reconnect();
    let seen = seen.into_inner().unwrap();
    assert!(
        up_count.load(Ordering::SeqCst) > up_after_restart.load(Ordering::SeqCst),
        "no pod came up after the restart: {:?}",
        seen.failures
    );
    // Every pod removed: what the daemon still lists, and what the workers created.
    n.c.adopt(seen.ids.iter().cloned());
    let listed: Vec<String> = n.c.cri().list_pod_sandboxes().unwrap().into_iter().map(|p| p.id).collect();
    n.c.adopt(listed.iter().cloned());
    for id in seen.ids.iter().chain(&listed) {
        let _ = n.c.cri().stop_pod_sandbox(id);
        let _ = n.c.cri().remove_pod_sandbox(id);
        n.c.removed(id);
    }
    let left = n.c.cri().list_pod_sandboxes().unwrap();
    assert!(left.is_empty(), "sandboxes left: {left:?}");
    // No pod was half-attached: each that came up had its three networks.
    for (id, ifs) in &seen.up {
        assert_eq!(ifs, &EXAMPLE_INTERFACES, "pod {id} came up with {ifs:?}");
    }
    // Nothing is left.
    let reservations = n.c.h.reservations();
    assert!(reservations.is_empty(), "IP reservations left: {reservations:?}");
    let braid: Vec<String> =
        n.c.h
            .dir
            .files()
            .into_iter()
            .filter(|f| f.starts_with("state/") || f.starts_with("status/"))
            .filter(|f| !f.ends_with(".braid-owner"))
            .collect();
    assert!(braid.is_empty(), "braid state, status or lock files left: {braid:?}");
    let cache = libcni_cache_entries(n.c.networks());
    assert!(cache.is_empty(), "libcni cache entries left: {cache:?}");
    assert!(n.c.pod_namespaces().is_empty(), "pod namespaces left: {:?}", n.c.pod_namespaces());
    // containerd's own leftovers of a sandbox it was handling when it died (a shim socket) are
    // its to answer for, not braid's: noted, and removed on drop with the shims.
    let shims = n.c.shim_sockets_left();
    if !shims.is_empty() {
        eprintln!(
            "note: containerd left {} shim socket(s) of sandboxes it was handling when killed: {shims:?}",
            shims.len()
        );
    }
    // The same for the loopback results of sandboxes containerd was setting up when it died
    // (its own built-in network, not braid's): noted and removed, so the machine keeps nothing.
    let loopback: Vec<String> = libcni_cache_entries(&["cni-loopback".to_string()])
        .into_iter()
        .filter(|e| !loopback_before.contains(e))
        .collect();
    if !loopback.is_empty() {
        eprintln!(
            "note: containerd left {} cni-loopback cache entries of killed sandboxes: {loopback:?}",
            loopback.len()
        );
        for e in &loopback {
            let _ = std::fs::remove_file(Path::new("/var/lib/cni/results").join(e));
        }
    }
    let veths: Vec<String> = n.c.h.host.links().into_iter().filter(|l| l.starts_with("veth")).collect();
    assert!(veths.is_empty(), "host-side veths left: {veths:?}");
    eprintln!(
        "soak: {} pods up and removed by {WORKERS} workers, containerd killed and restarted once; {} calls failed and were retried",
        seen.up.len(),
        seen.failures.len()
    );
}
