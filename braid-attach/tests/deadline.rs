//! The command's deadline: hanging delegates, a held lock, a slow rollback — shown by the
//! order of the calls, the deadline each call was given and the outcome, never by elapsed time.
//! (`FakeExec`'s hanging call returns at its deadline, as `RawExec` does when it kills one.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::{call, ok_result, World};

use braid_attach::state::Key;
use braid_attach::Deadline;
use braid_attach::{Delegate, DelegateConfig};
use cni_runtime::invoke::InvokeError;
use cni_runtime::testing::FakeExec;
use cni_skel::log::Logger;
use cni_types::{CniError, NetConf};
use serde_json::json;
use std::time::{Duration, Instant};

fn delegate(ty: &str, ifname: &str) -> Delegate {
    let conf =
        NetConf::parse(json!({"cniVersion": "1.0.0", "name": format!("{ty}net"), "type": ty}).to_string().as_bytes())
            .unwrap();
    Delegate { config: DelegateConfig::Plugin(conf), ifname: ifname.into(), ..Delegate::default() }
}

fn three() -> Vec<Delegate> {
    vec![delegate("bridge", "eth0"), delegate("ptp", "net1"), delegate("macvlan", "net2")]
}

/// `type COMMAND ifname` of every call, and the deadline each was given.
fn calls(exec: &FakeExec) -> Vec<(String, Option<Instant>)> {
    exec.calls
        .lock()
        .unwrap()
        .iter()
        .map(|c| {
            let env = |k: &str| c.env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_default();
            let ty = c.plugin.file_name().unwrap().to_string_lossy().into_owned();
            (format!("{ty} {} {}", env("CNI_COMMAND"), env("CNI_IFNAME")), c.until)
        })
        .collect()
}

/// A deadline whose ADD part ends 1 s from now, the whole half a second later.
fn deadline() -> Deadline {
    Deadline::new(Instant::now(), Duration::from_millis(1500))
}

#[test]
fn a_hanging_delegate_is_killed_at_the_add_deadline_and_everything_rolled_back_in_the_kept_share() {
    let w = World::new("hang");
    let exec = FakeExec::default();
    exec.reply(ok_result("198.18.0.2/24"));
    exec.hang();
    let d = deadline();
    let a = w.attacher_with(&exec, false, d);
    let e = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap_err();
    assert_eq!(e.code, 11, "{e:?}");
    assert_eq!(
        e.msg,
        "the command's deadline (1.5s, 0.5s of it kept for rollback): passed while waiting for delegate 1 (network \"ptpnet\", type \"ptp\", interface net1) ADD: /fake/ptp was killed at the command's deadline; every attempted delegate was rolled back"
    );
    // The third delegate never ran; the rollback's DELs had the whole deadline, the ADDs its ADD part.
    let seen = calls(&exec);
    let order: Vec<&str> = seen.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(order, ["bridge ADD eth0", "ptp ADD net1", "ptp DEL net1", "bridge DEL eth0"]);
    let untils: Vec<Option<Instant>> = seen.iter().map(|c| c.1).collect();
    assert_eq!(untils, [d.add_until(), d.add_until(), d.until(), d.until()]);
    assert!(d.add_until() < d.until());
    assert!(a.store.keys().unwrap().is_empty(), "state left after a complete rollback");
}

#[test]
fn a_slow_rollback_is_cut_at_the_deadline_and_leaves_the_state_for_the_runtimes_del() {
    let w = World::new("slowrollback");
    let exec = FakeExec::default();
    exec.reply(ok_result("198.18.0.2/24"));
    exec.hang(); // ptp ADD
    exec.reply(Ok(Vec::new())); // ptp DEL
    exec.hang(); // bridge DEL
    let d = deadline();
    let a = w.attacher_with(&exec, false, d);
    let e = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap_err();
    assert_eq!(e.code, 11, "{e:?}");
    assert!(
        e.msg.contains("passed while waiting for delegate 1 (network \"ptpnet\", type \"ptp\", interface net1) ADD"),
        "{}",
        e.msg
    );
    assert!(
        e.msg.ends_with("; rollback incomplete, state kept for DEL: delegate 0 (network \"bridgenet\", type \"bridge\", interface eth0): /fake/bridge was killed at the command's deadline"),
        "{}",
        e.msg
    );
    assert_eq!(a.store.keys().unwrap(), [Key::new("ctr1", "eth0").unwrap()]);
    // The runtime's DEL, a command of its own with a deadline of its own, finishes the job.
    exec.calls.lock().unwrap().clear();
    let d2 = deadline();
    let a2 = w.attacher_with(&exec, false, d2);
    a2.del(&call(), &three(), &mut Logger::recording("test", "DEL")).unwrap();
    let seen = calls(&exec);
    let order: Vec<&str> = seen.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(order, ["macvlan DEL net2", "ptp DEL net1", "bridge DEL eth0"]);
    assert!(seen.iter().all(|c| c.1 == d2.until()));
    assert!(a2.store.keys().unwrap().is_empty());
}

#[test]
fn a_delegate_failing_by_itself_keeps_its_code_when_the_rollback_finishes() {
    let w = World::new("ownfailure");
    let exec = FakeExec::default();
    exec.reply(ok_result("198.18.0.2/24"));
    exec.reply(Err(InvokeError::Plugin(CniError::new(7, "no master"))));
    let a = w.attacher_with(&exec, false, deadline());
    let e = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap_err();
    assert_eq!(
        (e.code, e.msg.as_str()),
        (7, "delegate 1 (network \"ptpnet\", type \"ptp\", interface net1) failed: no master")
    );
}

#[test]
fn hanging_parallel_delegates_are_all_killed_then_rolled_back_in_reverse() {
    let w = World::new("parallel");
    let exec = FakeExec::default();
    // Replies are taken in call order; whichever two delegates call last hang.
    exec.reply(ok_result("198.18.0.2/24"));
    exec.hang();
    exec.hang();
    let d = deadline();
    let a = w.attacher_with(&exec, true, d);
    let e = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap_err();
    assert_eq!(e.code, 11, "{e:?}");
    assert!(e.msg.contains("passed while waiting for delegate "), "{}", e.msg);
    assert!(
        e.msg.contains("failed too: /fake/") && e.msg.contains("was killed at the command's deadline"),
        "{}",
        e.msg
    );
    assert!(e.msg.ends_with("every attempted delegate was rolled back"), "{}", e.msg);
    let seen = calls(&exec);
    let (adds, dels) = seen.split_at(3);
    assert!(adds.iter().all(|c| c.0.contains(" ADD ") && c.1 == d.add_until()));
    let order: Vec<&str> = dels.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(order, ["macvlan DEL net2", "ptp DEL net1", "bridge DEL eth0"]);
    assert!(dels.iter().all(|c| c.1 == d.until()));
    assert!(a.store.keys().unwrap().is_empty());
}

#[test]
fn a_held_container_lock_is_waited_for_until_the_deadline_then_named() {
    let w = World::new("lock");
    let exec = FakeExec::default();
    let a = w.attacher_with(&exec, false, deadline());
    // Another command of this container holds the lock (here: this test).
    let held = a.store.lock("ctr1").unwrap();
    let e = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap_err();
    assert_eq!(e.code, 11, "{e:?}");
    let lock = w.dir.join("ctr1.lock");
    assert!(
        e.msg.starts_with(&format!(
            "the command's deadline (1.5s, 0.5s of it kept for rollback): passed while waiting for the lock of container ctr1 ({}: still held by pid {} (",
            lock.display(),
            std::process::id()
        )),
        "{}",
        e.msg
    );
    assert!(e.msg.ends_with(") at the deadline)"), "{}", e.msg);
    // DEL too: it never deletes without the lock (an ADD of the container may be running).
    let e = w
        .attacher_with(&exec, false, deadline())
        .del(&call(), &three(), &mut Logger::recording("test", "DEL"))
        .unwrap_err();
    assert_eq!(e.code, 11, "{e:?}");
    assert!(e.msg.contains("passed while waiting for the lock of container ctr1"), "{}", e.msg);
    assert!(calls(&exec).is_empty(), "nothing may run without the lock");
    assert!(a.store.keys().unwrap().is_empty());
    // Released, the same commands go through.
    drop(held);
    exec.reply(ok_result("198.18.0.2/24"));
    w.attacher_with(&exec, false, deadline())
        .add(&call(), &[delegate("bridge", "eth0")], &mut Logger::recording("test", "ADD"))
        .unwrap();
    w.attacher_with(&exec, false, deadline()).del(&call(), &[], &mut Logger::recording("test", "DEL")).unwrap();
    let order: Vec<String> = calls(&exec).into_iter().map(|c| c.0).collect();
    assert_eq!(order, ["bridge ADD eth0", "bridge DEL eth0"]);
}

#[test]
fn a_delegate_a_crashed_add_left_running_is_let_finish_before_del_undoes_it() {
    use braid_attach::plan::{Phase, Process, Progress};
    let w = World::new("leftover");
    let exec = FakeExec::default();
    exec.reply(ok_result("198.18.0.2/24"));
    let a = w.attacher_with(&exec, false, deadline());
    a.add(&call(), &[delegate("bridge", "eth0")], &mut Logger::recording("test", "ADD")).unwrap();
    // As if the ADD had crashed while a second delegate ran: its process is recorded, running.
    // It finishes its work only once DEL holds the container's lock, so never before DEL came.
    let marker = w.dir.join("finished");
    let lock = w.dir.join("ctr1.lock");
    let script = format!("while [ ! -e {} ]; do sleep 0.01; done; echo done > {}", lock.display(), marker.display());
    let mut child = std::process::Command::new("sh").args(["-c", &script]).spawn().unwrap();
    let started = cni_runtime::procs::RecordedProcess::of(child.id()).unwrap();
    let key = Key::new("ctr1", "eth0").unwrap();
    let record = Progress {
        index: 0,
        phase: Phase::Running,
        result: serde_json::Value::Null,
        process: Some(Process { pid: started.pid, start: started.start }),
    };
    a.store.append(&key, &record.to_line()).unwrap();
    let finisher = std::thread::spawn(move || child.wait());
    exec.calls.lock().unwrap().clear();
    let mut log = Logger::recording("test", "DEL");
    a.del(&call(), &[], &mut log).unwrap();
    assert!(finisher.join().unwrap().unwrap().success(), "it was killed instead of let finish");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "done\n");
    let order: Vec<String> = calls(&exec).into_iter().map(|c| c.0).collect();
    assert_eq!(order, ["bridge DEL eth0"]);
    assert!(a.store.keys().unwrap().is_empty());
}
