//! Parallel attach against a scripted exec that answers by interface: every ADD starts before
//! any returns, results come back in plan order, a failure waits for the others and rolls every
//! attempted delegate back in reverse plan order, DEL and CHECK of a parallel attachment run at
//! once, and records appended from several threads stay whole lines.
//!
//! Nothing here is timed: calls that must run at once meet at a rendezvous (none of them ends
//! before all have started), calls end in an order the test chooses, and every assertion is on
//! the order of the recorded starts and ends. A rendezvous that is never met (the calls ran one
//! after another) gives up after a hang guard and is reported as such.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::{call, World};

use braid_attach::plan::{Phase, Plan};
use braid_attach::state::{Key, StateStore};
use braid_attach::Deadline;
use braid_attach::{Attacher, Delegate, DelegateConfig};
use cni_runtime::invoke::{Exec, InvokeError};
use cni_skel::log::Logger;
use cni_types::{CniError, NetConf};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// How long a call waits for a rendezvous or its turn to end before it gives up: only a
/// broken engine (calls run one after another) ever waits this long.
const HANG_GUARD: Duration = Duration::from_secs(20);

/// One call as the scripted exec saw it: the order of its start and its end among all events.
#[derive(Debug, Clone)]
struct Seen {
    command: String,
    ifname: String,
    start: usize,
    end: usize,
}

#[derive(Default)]
struct Log {
    /// Every call, in the order they started.
    calls: Vec<Seen>,
    /// Events so far (starts and ends), which numbers the next one.
    events: usize,
    /// Rendezvous or turns that were never met.
    stuck: Vec<String>,
}

/// Answers by `CNI_IFNAME`: succeeds with an address of its own, or fails when it is the
/// failing one (ADD only). Calls of a command listed in `together` wait until that many of
/// them have started; calls of a command listed in `ends` end in that order of interfaces.
struct Scripted {
    together: Vec<(&'static str, usize)>,
    ends: Vec<(&'static str, Vec<&'static str>)>,
    fail_add: Option<&'static str>,
    log: Mutex<Log>,
    changed: Condvar,
}

impl Scripted {
    fn new(fail_add: Option<&'static str>) -> Scripted {
        Scripted { together: Vec::new(), ends: Vec::new(), fail_add, log: Mutex::default(), changed: Condvar::new() }
    }

    /// Calls of `command` meet: none ends before `n` have started.
    fn together(mut self, command: &'static str, n: usize) -> Scripted {
        self.together.push((command, n));
        self
    }

    /// Calls of `command` end in this order of interfaces.
    fn ending(mut self, command: &'static str, order: &[&'static str]) -> Scripted {
        self.ends.push((command, order.to_vec()));
        self
    }

    fn seen(&self, command: &str) -> Vec<Seen> {
        self.log.lock().unwrap().calls.iter().filter(|s| s.command == command).cloned().collect()
    }

    fn stuck(&self) -> Vec<String> {
        self.log.lock().unwrap().stuck.clone()
    }

    fn clear(&self) {
        let mut log = self.log.lock().unwrap();
        log.calls.clear();
        log.stuck.clear();
    }

    /// Waits until `ready` holds for the log, or the hang guard gives up (recorded as `what`).
    fn wait<'a>(
        &self,
        log: std::sync::MutexGuard<'a, Log>,
        what: String,
        ready: impl Fn(&Log) -> bool,
    ) -> std::sync::MutexGuard<'a, Log> {
        let (mut log, timeout) = self.changed.wait_timeout_while(log, HANG_GUARD, |l| !ready(l)).unwrap();
        if timeout.timed_out() {
            log.stuck.push(what);
        }
        log
    }
}

impl Exec for Scripted {
    fn exec(&self, _plugin: &Path, _stdin: &[u8], env: &[(String, String)]) -> Result<Vec<u8>, InvokeError> {
        let var = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_default();
        let (command, ifname) = (var("CNI_COMMAND"), var("CNI_IFNAME"));
        let mut log = self.log.lock().unwrap();
        let start = log.events;
        log.events += 1;
        let me = log.calls.len();
        log.calls.push(Seen { command: command.clone(), ifname: ifname.clone(), start, end: usize::MAX });
        self.changed.notify_all();
        if let Some(&(_, n)) = self.together.iter().find(|(c, _)| *c == command) {
            let started = |l: &Log| l.calls.iter().filter(|s| s.command == command).count() >= n;
            log = self.wait(log, format!("{n} {command} calls at once"), started);
        }
        if let Some((_, order)) = self.ends.iter().find(|(c, _)| *c == command) {
            let before: Vec<&str> = order.iter().take_while(|i| **i != ifname).copied().collect();
            let turn = |l: &Log| {
                before
                    .iter()
                    .all(|b| l.calls.iter().any(|s| s.command == command && s.ifname == *b && s.end != usize::MAX))
            };
            log = self.wait(log, format!("{command} of {ifname} after {before:?}"), turn);
        }
        log.calls[me].end = log.events;
        log.events += 1;
        self.changed.notify_all();
        drop(log);
        if command == "ADD" && self.fail_add == Some(ifname.as_str()) {
            return Err(InvokeError::Plugin(CniError::new(11, format!("{ifname} refused"))));
        }
        if command != "ADD" {
            return Ok(Vec::new());
        }
        let n = ifname.trim_start_matches(|c: char| c.is_ascii_alphabetic()).parse::<u32>().unwrap_or(0);
        Ok(json!({"cniVersion": "1.0.0", "interfaces": [{"name": ifname}], "ips": [{"address": format!("198.18.{n}.2/24"), "interface": 0}]})
            .to_string()
            .into_bytes())
    }

    fn find(&self, name: &str, _paths: &[PathBuf]) -> Result<PathBuf, InvokeError> {
        Ok(PathBuf::from("/opt/cni/bin").join(name))
    }
}

fn delegate(ty: &str, ifname: &str) -> Delegate {
    let conf = NetConf::parse(
        json!({"cniVersion": "1.0.0", "name": format!("{ty}-{ifname}"), "type": ty}).to_string().as_bytes(),
    )
    .unwrap();
    Delegate { config: DelegateConfig::Plugin(conf), ifname: ifname.into(), ..Delegate::default() }
}

fn three() -> Vec<Delegate> {
    vec![delegate("bridge", "eth0"), delegate("ptp", "net1"), delegate("macvlan", "net2")]
}

fn key() -> Key {
    Key::new("ctr1", "eth0").unwrap()
}

/// Whether every call started before the first one ended: they ran at the same time.
fn overlapping(seen: &[Seen]) -> bool {
    let first_end = seen.iter().map(|s| s.end).min().unwrap();
    seen.iter().all(|s| s.start < first_end)
}

/// Whether each call ended before the next one started: one after another.
fn one_by_one(seen: &[Seen]) -> bool {
    seen.windows(2).all(|p| p[0].end < p[1].start)
}

fn addresses(results: &[cni_types::result::AnyResult]) -> Vec<String> {
    results.iter().map(|r| r.to_latest().ips[0].address.to_string()).collect()
}

fn ifnames(seen: &[Seen]) -> Vec<&str> {
    seen.iter().map(|s| s.ifname.as_str()).collect()
}

#[test]
fn parallel_add_starts_every_delegate_at_once_and_returns_results_in_plan_order() {
    let w = World::new("add");
    // All three in flight at once; the first delegate returns last, and its result still
    // comes first.
    let exec = Scripted::new(None).together("ADD", 3).ending("ADD", &["net2", "net1", "eth0"]).together("DEL", 3);
    let a = w.attacher_with(&exec, true, Deadline::none());
    let results = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap();
    assert_eq!(exec.stuck(), Vec::<String>::new());
    assert_eq!(addresses(&results), ["198.18.0.2/24", "198.18.1.2/24", "198.18.2.2/24"]);
    let adds = exec.seen("ADD");
    assert_eq!(adds.len(), 3);
    assert!(overlapping(&adds), "{adds:?}");
    let mut by_end = adds.clone();
    by_end.sort_by_key(|s| s.end);
    assert_eq!(ifnames(&by_end), ["net2", "net1", "eth0"]);
    let raw = a.store.read(&key()).unwrap().unwrap();
    // The plan says it was parallel; every appended line is whole and decodes.
    let lines: Vec<&[u8]> = raw.split_inclusive(|b| *b == b'\n').collect();
    assert!(lines.iter().all(|l| l.ends_with(b"\n") && serde_json::from_slice::<Value>(l).is_ok()));
    let state = Plan::decode(&raw).unwrap();
    assert!(state.parallel);
    assert!(state.attachments.iter().all(|x| x.phase == Phase::Added));
    assert_eq!(state.attachments[2].result.as_ref().unwrap()["ips"][0]["address"], "198.18.2.2/24");

    // DEL of it runs the delegates at once too, and removes the state.
    exec.clear();
    a.del(&call(), &three(), &mut Logger::recording("test", "DEL")).unwrap();
    assert_eq!(exec.stuck(), Vec::<String>::new());
    let dels = exec.seen("DEL");
    assert_eq!(dels.len(), 3);
    assert!(overlapping(&dels), "{dels:?}");
    assert!(a.store.read(&key()).unwrap().is_none());
}

#[test]
fn parallel_check_runs_at_once_and_a_sequential_plan_is_written_as_before() {
    let w = World::new("check");
    let exec = Scripted::new(None).together("CHECK", 3);
    let a = w.attacher_with(&exec, true, Deadline::none());
    a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap();
    exec.clear();
    a.check(&call(), &mut Logger::recording("test", "CHECK")).unwrap();
    assert_eq!(exec.stuck(), Vec::<String>::new());
    let checks = exec.seen("CHECK");
    assert_eq!(checks.len(), 3);
    assert!(overlapping(&checks), "{checks:?}");
    a.del(&call(), &three(), &mut Logger::recording("test", "DEL")).unwrap();

    // Sequential: one after another, in plan order, and no trace of the key in the state.
    let exec = Scripted::new(None);
    let a = w.attacher(&exec);
    a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap();
    let adds = exec.seen("ADD");
    assert!(one_by_one(&adds), "{adds:?}");
    assert_eq!(ifnames(&adds), ["eth0", "net1", "net2"]);
    let raw = a.store.read(&key()).unwrap().unwrap();
    assert!(!String::from_utf8_lossy(&raw).contains("parallel"));
    assert!(!Plan::decode(&raw).unwrap().parallel);
    exec.clear();
    a.check(&call(), &mut Logger::recording("test", "CHECK")).unwrap();
    let checks = exec.seen("CHECK");
    assert!(one_by_one(&checks), "{checks:?}");
    assert_eq!(ifnames(&checks), ["eth0", "net1", "net2"]);
}

#[test]
fn a_failure_while_others_still_run_waits_for_them_then_rolls_all_back_in_reverse() {
    let w = World::new("fail");
    // net1 fails first, while eth0 and net2 are still running.
    let exec = Scripted::new(Some("net1")).together("ADD", 3).ending("ADD", &["net1", "eth0", "net2"]);
    let a = w.attacher_with(&exec, true, Deadline::none());
    let e = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap_err();
    assert_eq!(exec.stuck(), Vec::<String>::new());
    assert_eq!(e.code, 11, "{e:?}");
    assert_eq!(e.msg, "delegate 1 (network \"ptp-net1\", type \"ptp\", interface net1) failed: net1 refused");
    let adds = exec.seen("ADD");
    let dels = exec.seen("DEL");
    // No DEL before every ADD returned, then all three in reverse plan order, one by one.
    let last_add = adds.iter().map(|s| s.end).max().unwrap();
    assert!(dels.iter().all(|d| d.start > last_add), "{adds:?} {dels:?}");
    assert_eq!(ifnames(&dels), ["net2", "net1", "eth0"]);
    assert!(one_by_one(&dels), "{dels:?}");
    assert!(a.store.keys().unwrap().is_empty());
}

#[test]
fn several_failures_keep_the_first_ones_code_and_name_them_all() {
    let w = World::new("fail2");
    struct Both(Scripted);
    impl Exec for Both {
        fn exec(&self, plugin: &Path, stdin: &[u8], env: &[(String, String)]) -> Result<Vec<u8>, InvokeError> {
            let out = self.0.exec(plugin, stdin, env);
            let add = env.iter().any(|(k, v)| k == "CNI_COMMAND" && v == "ADD");
            let net2 = env.iter().any(|(k, v)| k == "CNI_IFNAME" && v == "net2");
            if add && net2 {
                return Err(InvokeError::Failed("net2 broke".into()));
            }
            out
        }
        fn find(&self, name: &str, paths: &[PathBuf]) -> Result<PathBuf, InvokeError> {
            self.0.find(name, paths)
        }
    }
    // All three in flight; net2 fails first, then eth0 succeeds, then net1 fails.
    let exec = Both(Scripted::new(Some("net1")).together("ADD", 3).ending("ADD", &["net2", "eth0", "net1"]));
    let a = Attacher {
        exec: &exec,
        paths: vec!["/opt/cni/bin".into()],
        store: StateStore::open(&w.dir).unwrap(),
        parallel: true,
        deadline: Deadline::none(),
    };
    let e = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap_err();
    assert_eq!(e.code, 11, "{e:?}");
    assert!(e
        .msg
        .starts_with("delegate 1 (network \"ptp-net1\", type \"ptp\", interface net1) failed: net1 refused; "));
    assert!(e
        .msg
        .contains("delegate 2 (network \"macvlan-net2\", type \"macvlan\", interface net2) failed too: net2 broke"));
    assert_eq!(exec.0.stuck(), Vec::<String>::new());
    assert_eq!(ifnames(&exec.0.seen("DEL")), ["net2", "net1", "eth0"]);
    assert!(a.store.keys().unwrap().is_empty());
}

#[test]
fn records_appended_from_many_threads_stay_whole_lines() {
    let w = World::new("append");
    let store = StateStore::open(&w.dir).unwrap();
    store.create(&key(), b"{\"plan\":true}\n").unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            let store = &store;
            s.spawn(move || {
                for i in 0..200 {
                    // Lines of different lengths, some well past a page.
                    let pad = "x".repeat((t * 977 + i * 131) % 9000);
                    let line = format!("{{\"t\":{t},\"i\":{i},\"pad\":\"{pad}\"}}\n");
                    store.append(&key(), line.as_bytes()).unwrap();
                }
            });
        }
    });
    let raw = store.read(&key()).unwrap().unwrap();
    let lines: Vec<&[u8]> = raw.split_inclusive(|b| *b == b'\n').skip(1).collect();
    assert_eq!(lines.len(), 8 * 200);
    let mut per_thread = [0usize; 8];
    for l in lines {
        let v: Value = serde_json::from_slice(l).unwrap();
        let t = v["t"].as_u64().unwrap() as usize;
        // Each thread's records in its own order.
        assert_eq!(v["i"].as_u64().unwrap() as usize, per_thread[t]);
        per_thread[t] += 1;
    }
}
