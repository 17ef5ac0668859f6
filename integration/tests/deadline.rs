//! The command's `deadline` with real processes in real namespaces: a hanging delegate, a slow
//! rollback, a held pod-namespace lock, the merger. Shown by outcome (codes, messages naming
//! what braid waited for, what the kernel and the directories hold, the order of the fault
//! plugin's calls), never by elapsed time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::{require_root, unique, Harness, Netns};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A delegator with a 3 s deadline (2 s for the ADD work, 1 s kept for rollback) and a per-call
/// timeout far beyond it, so that the deadline is what cuts.
fn delegator(h: &Harness, delegates: Value) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": unique("dl"),
        "plugins": [{"type": "delegator", "stateDir": h.dir.path().join("state"), "timeout": 600, "deadline": 3,
                     "delegates": delegates}]
    })
}

/// A fault delegate that hangs on `on` for as long as `flag` exists, logging every call.
fn hanging(name: &str, on: &str, flag: &Path, log: &Path) -> Value {
    json!({"cniVersion": "1.0.0", "name": name, "type": "braid-fault", "sleepOn": on, "hangWhile": flag, "log": log})
}

fn ptp(h: &Harness, subnet: u8) -> Value {
    json!({"cniVersion": "1.0.0", "name": "cluster", "type": "ptp", "ipam": h.host_local(subnet)})
}

/// The fault plugin's calls: `(command, pid)`.
fn fault_calls(log: &Path) -> Vec<(String, u32)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| (v["command"].as_str().unwrap().to_string(), v["pid"].as_u64().unwrap() as u32))
        .collect()
}

/// Whether process `pid` is gone (or a zombie nobody waits for).
fn gone(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty() || stat.contains(") Z ")
}

fn nothing_left(h: &Harness, ctr: &Netns) {
    assert_eq!(ctr.links(), ["lo"]);
    assert!(h.reservations().is_empty(), "{:?}", h.dir.files());
    assert!(h.state_files().is_empty(), "{:?}", h.dir.files());
}

#[test]
fn a_hanging_delegate_is_killed_at_the_deadline_and_every_delegate_rolled_back() {
    if !require_root("a_hanging_delegate_is_killed_at_the_deadline_and_every_delegate_rolled_back") {
        return;
    }
    let h = Harness::new("dlhang");
    let ctr = h.container("dlhang");
    let (flag, log) = (h.dir.path().join("hang"), h.dir.path().join("fault.log"));
    std::fs::write(&flag, b"").unwrap();
    let list = delegator(&h, json!([ptp(&h, 60), hanging("stuck", "ADD", &flag, &log)]));
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let e = h.add(&list, &rt).unwrap_err();
    let code = e.cause().map(|c| c.code);
    assert_eq!(code, Some(11), "{e}");
    assert!(
        e.to_string().contains("the command's deadline (3s, 1s of it kept for rollback): passed while waiting for delegate 1 (network \"stuck\", type \"braid-fault\", interface net1) ADD: ")
            && e.to_string().contains("braid-fault was killed at the command's deadline; every attempted delegate was rolled back"),
        "{}",
        e.to_string()
    );
    // The hanging ADD was killed, then sent its DEL; the ptp attachment is gone too.
    let calls = fault_calls(&log);
    let commands: Vec<&str> = calls.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(commands, ["ADD", "DEL"]);
    assert!(gone(calls[0].1), "the hanging ADD (pid {}) still runs", calls[0].1);
    nothing_left(&h, &ctr);
    h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL: {e}"));
    nothing_left(&h, &ctr);
}

#[test]
fn a_rollback_cut_by_the_deadline_keeps_the_state_and_the_runtimes_del_finishes_it() {
    if !require_root("a_rollback_cut_by_the_deadline_keeps_the_state_and_the_runtimes_del_finishes_it") {
        return;
    }
    let h = Harness::new("dlslow");
    let ctr = h.container("dlslow");
    let (flag, log) = (h.dir.path().join("hang"), h.dir.path().join("fault.log"));
    std::fs::write(&flag, b"").unwrap();
    // Its ADD hangs and so does its rollback DEL: the ptp's DEL no longer fits the deadline.
    let list = delegator(&h, json!([ptp(&h, 61), hanging("stuck", "*", &flag, &log)]));
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let e = h.add(&list, &rt).unwrap_err();
    assert_eq!(e.cause().map(|c| c.code), Some(11), "{e}");
    assert!(e.to_string().contains("passed while waiting for delegate 1 (network \"stuck\""), "{e}");
    assert!(
        e.to_string().contains(
            "rollback incomplete, state kept for DEL: delegate 0 (network \"cluster\", type \"ptp\", interface eth0): "
        ) && e.to_string().contains("ptp was not started: the command's deadline had passed"),
        "{}",
        e.to_string()
    );
    assert_eq!(ctr.addresses("eth0").len(), 1, "the ptp attachment waits for DEL");
    assert_eq!(h.state_files().len(), 1, "{:?}", h.dir.files());
    let calls = fault_calls(&log);
    assert_eq!(calls.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(), ["ADD", "DEL"]);
    assert!(calls.iter().all(|c| gone(c.1)), "{calls:?}");
    // The hang is over: the runtime's DEL (a command with a deadline of its own) releases all.
    std::fs::remove_file(&flag).unwrap();
    h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL: {e}"));
    assert_eq!(fault_calls(&log).iter().map(|c| c.0.as_str()).collect::<Vec<_>>(), ["ADD", "DEL", "DEL"]);
    nothing_left(&h, &ctr);
}

/// `/run/braid/netns-locks/netns-<dev>-<ino>.lock`, the lock every braid plugin takes to name
/// interfaces in the pod namespace at `netns`.
fn netns_lock(netns: &Path) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(netns).unwrap();
    Path::new(braid_attach::ifnames::LOCK_DIR).join(format!("netns-{}-{}.lock", m.dev(), m.ino()))
}

#[test]
fn a_held_pod_namespace_lock_is_waited_for_until_the_deadline_and_its_holder_named() {
    if !require_root("a_held_pod_namespace_lock_is_waited_for_until_the_deadline_and_its_holder_named") {
        return;
    }
    let h = Harness::new("dllock");
    let ctr = h.container("dllock");
    let list = delegator(
        &h,
        json!([ptp(&h, 62), {"cniVersion": "1.0.0", "name": "side", "type": "ptp", "ipam": h.host_local(63)}]),
    );
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let path = netns_lock(&ctr.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // Another braid network of this pod is choosing its names (here: this test holds the lock).
    let held = braid_attach::state::lock_file(path.clone(), braid_attach::state::Wait::No).unwrap().unwrap();
    let e = h.add(&list, &rt).unwrap_err();
    assert_eq!(e.cause().map(|c| c.code), Some(11), "{e}");
    assert!(
        e.to_string().contains(&format!(
            "the command's deadline (3s, 1s of it kept for rollback): passed while waiting for the lock of pod namespace {} ({}: still held by pid {} (",
            rt.netns,
            path.display(),
            std::process::id()
        )),
        "{}",
        e.to_string()
    );
    // Nothing ran: no link, no reservation, no state.
    nothing_left(&h, &ctr);
    drop(held);
    h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD once the lock is free: {e}"));
    assert_eq!(ctr.addresses("net1").len(), 1);
    h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL: {e}"));
    nothing_left(&h, &ctr);
}

#[test]
fn the_merger_draws_on_its_own_deadline() {
    if !require_root("the_merger_draws_on_its_own_deadline") {
        return;
    }
    let h = Harness::new("dlmrg");
    let ctr = h.container("dlmrg");
    let (flag, log) = (h.dir.path().join("hang"), h.dir.path().join("fault.log"));
    std::fs::write(&flag, b"").unwrap();
    let list = json!({
        "cniVersion": "1.0.0",
        "name": unique("dlm"),
        "plugins": [
            {"type": "ptp", "ipam": h.host_local(64)},
            {"type": "merger", "stateDir": h.dir.path().join("state"), "timeout": 600, "deadline": 3,
             "delegates": [{"cniVersion": "1.0.0", "name": "side", "type": "ptp", "ipam": h.host_local(65)},
                           hanging("stuck", "ADD", &flag, &log)]}
        ]
    });
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    let e = h.add(&list, &rt).unwrap_err();
    assert_eq!(e.cause().map(|c| c.code), Some(11), "{e}");
    assert!(
        e.to_string().contains("plugin type=\"merger\"")
            && e.to_string().contains(
                "passed while waiting for delegate 1 (network \"stuck\", type \"braid-fault\", interface net2) ADD"
            ),
        "{}",
        e.to_string()
    );
    // The merger rolled its own delegates back; the chain's DEL (as a runtime sends it) the rest.
    assert!(ctr.link("net1").is_none() && ctr.link("net2").is_none());
    h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL: {e}"));
    nothing_left(&h, &ctr);
}
