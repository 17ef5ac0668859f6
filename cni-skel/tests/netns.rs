//! Namespace entry against the real kernel.
//!
//! Namespace tests need root. Without it they print a loud SKIPPED line; with
//! `BRAID_REQUIRE_ROOT_TESTS=1` (set by `.ci/run`) they fail instead. They create namespaces of
//! their own with unique names and remove them on drop, even when a test panics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs, clippy::print_stderr)]

use cni_skel::netns;
use cni_skel::testing::{require_root, TempNetns};
use std::path::Path;

#[test]
fn run_in_enters_only_the_worker_thread() {
    if !require_root("run_in_enters_only_the_worker_thread") {
        return;
    }
    let ns = TempNetns::new("enter");
    // Something to recognise the namespace by.
    ns.exec(&["ip", "link", "add", "braidprobe0", "type", "veth", "peer", "name", "braidprobe1"]);
    let before = netns::current_identity().unwrap();
    let (inside_id, links) = netns::run_in(&ns.path(), || {
        let id = netns::current_identity().unwrap();
        // The thread's own view of its network namespace lists the namespace's links.
        let links = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap();
        (id, links)
    })
    .unwrap();
    assert_eq!(inside_id, netns::identity(&ns.path()).unwrap());
    assert_ne!(inside_id, before);
    assert!(links.contains("braidprobe0"), "worker thread is not in the namespace: {links}");
    let here = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap();
    assert!(!here.contains("braidprobe0"));
    assert_eq!(netns::current_identity().unwrap(), before, "the calling thread must stay where it was");
}

/// `run_here_in_file` runs its work inside the namespace on the calling thread, and the thread
/// is back in its own namespace when it returns: a socket made there keeps serving the
/// namespace it was made in.
#[test]
fn run_here_enters_and_leaves_on_the_calling_thread() {
    if !require_root("run_here_enters_and_leaves_on_the_calling_thread") {
        return;
    }
    let ns = TempNetns::new("here");
    ns.exec(&["ip", "link", "add", "braidprobe2", "type", "veth", "peer", "name", "braidprobe3"]);
    let before = netns::current_identity().unwrap();
    let me = std::thread::current().id();
    let file = netns::open(&ns.path()).unwrap();
    let (inside_id, thread, links) = netns::run_here_in_file(&file, &ns.path(), || {
        let links = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap();
        (netns::current_identity().unwrap(), std::thread::current().id(), links)
    })
    .unwrap();
    assert_eq!(thread, me, "the work ran on the calling thread");
    assert_eq!(inside_id, netns::identity(&ns.path()).unwrap());
    assert!(links.contains("braidprobe2"), "the work did not run in the namespace: {links}");
    assert_eq!(netns::current_identity().unwrap(), before, "the calling thread is back in its own namespace");
    assert!(!std::fs::read_to_string("/proc/thread-self/net/dev").unwrap().contains("braidprobe2"));
}

#[test]
fn run_in_reports_missing_and_non_namespace_paths() {
    let missing = netns::run_in(Path::new("/run/netns/braid-does-not-exist"), || ()).unwrap_err();
    assert!(missing.is_missing());
    assert!(missing.to_string().starts_with("failed to open netns \"/run/netns/braid-does-not-exist\""), "{missing}");
    let tmp = std::env::temp_dir().join(format!("braid-notns-{}", std::process::id()));
    std::fs::write(&tmp, b"x").unwrap();
    let not = netns::run_in(&tmp, || ()).unwrap_err();
    assert!(not.to_string().starts_with("unknown FS magic on"), "{not}");
    std::fs::remove_file(&tmp).unwrap();
    // A FIFO with no writer would block open(2) forever: refused at once instead.
    nix::unistd::mkfifo(&tmp, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let fifo = netns::run_in(&tmp, || ()).unwrap_err();
    assert!(fifo.to_string().starts_with("unknown FS magic on"), "{fifo}");
    std::fs::remove_file(&tmp).unwrap();
}
