//! Parallel attach against a scripted exec that answers by interface and sleeps: every ADD
//! starts before any returns, results come back in plan order, a failure waits for the others
//! and rolls every attempted delegate back in reverse plan order, DEL and CHECK of a parallel
//! attachment run at once, and records appended from several threads stay whole lines.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_attach::plan::{Phase, Plan};
use braid_attach::state::{Key, StateStore};
use braid_attach::Deadline;
use braid_attach::{Attacher, Delegate, DelegateConfig};
use cni_runtime::chain::RuntimeConf as Call;
use cni_runtime::invoke::{Exec, InvokeError};
use cni_skel::log::Logger;
use cni_types::{CniError, NetConf};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One call as the scripted exec saw it.
#[derive(Debug, Clone)]
struct Seen {
    command: String,
    ifname: String,
    start: Instant,
    end: Instant,
}

/// Answers by `CNI_IFNAME`: sleeps that interface's delay, then succeeds with an address of
/// its own, or fails when it is the failing one (ADD only).
struct Scripted {
    delays: Vec<(&'static str, Duration)>,
    fail_add: Option<&'static str>,
    seen: Mutex<Vec<Seen>>,
}

impl Scripted {
    fn new(delays: &[(&'static str, u64)], fail_add: Option<&'static str>) -> Scripted {
        Scripted {
            delays: delays.iter().map(|(i, ms)| (*i, Duration::from_millis(*ms))).collect(),
            fail_add,
            seen: Mutex::default(),
        }
    }

    fn seen(&self, command: &str) -> Vec<Seen> {
        let mut v: Vec<Seen> = self.seen.lock().unwrap().iter().filter(|s| s.command == command).cloned().collect();
        v.sort_by_key(|s| s.start);
        v
    }

    fn clear(&self) {
        self.seen.lock().unwrap().clear();
    }
}

impl Exec for Scripted {
    fn exec(&self, _plugin: &Path, _stdin: &[u8], env: &[(String, String)]) -> Result<Vec<u8>, InvokeError> {
        let var = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_default();
        let (command, ifname) = (var("CNI_COMMAND"), var("CNI_IFNAME"));
        let start = Instant::now();
        let delay = self.delays.iter().find(|(i, _)| *i == ifname).map_or(Duration::ZERO, |(_, d)| *d);
        std::thread::sleep(delay);
        let end = Instant::now();
        self.seen.lock().unwrap().push(Seen { command: command.clone(), ifname: ifname.clone(), start, end });
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

struct World {
    dir: PathBuf,
}

impl World {
    fn new(tag: &str) -> World {
        let dir = std::env::temp_dir().join(format!("braid-parallel-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        World { dir }
    }

    fn attacher<'a>(&self, exec: &'a Scripted, parallel: bool) -> Attacher<'a> {
        Attacher {
            exec,
            paths: vec!["/opt/cni/bin".into()],
            store: StateStore::open(&self.dir).unwrap(),
            parallel,
            deadline: Deadline::none(),
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
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

fn call() -> Call {
    Call { container_id: "ctr1".into(), netns: "/run/netns/x".into(), ifname: "eth0".into(), ..Call::default() }
}

fn key() -> Key {
    Key::new("ctr1", "eth0").unwrap()
}

/// Whether every call started before the first one ended: they ran at the same time.
fn overlapping(seen: &[Seen]) -> bool {
    let first_end = seen.iter().map(|s| s.end).min().unwrap();
    seen.iter().all(|s| s.start < first_end)
}

fn addresses(results: &[cni_types::result::AnyResult]) -> Vec<String> {
    results.iter().map(|r| r.to_latest().ips[0].address.to_string()).collect()
}

#[test]
fn parallel_add_starts_every_delegate_at_once_and_returns_results_in_plan_order() {
    let w = World::new("add");
    // The first delegate is the slowest: it returns last, and its result still comes first.
    let exec = Scripted::new(&[("eth0", 300), ("net1", 100), ("net2", 10)], None);
    let a = w.attacher(&exec, true);
    let started = Instant::now();
    let results = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap();
    let took = started.elapsed();
    assert_eq!(addresses(&results), ["198.18.0.2/24", "198.18.1.2/24", "198.18.2.2/24"]);
    let adds = exec.seen("ADD");
    assert_eq!(adds.len(), 3);
    assert!(overlapping(&adds), "{adds:?}");
    // Loose: about the slowest (300 ms), well below the sum (410 ms).
    assert!(took < Duration::from_millis(400), "{took:?}");
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
    let dels = exec.seen("DEL");
    assert_eq!(dels.len(), 3);
    assert!(overlapping(&dels), "{dels:?}");
    assert!(a.store.read(&key()).unwrap().is_none());
}

#[test]
fn parallel_check_runs_at_once_and_a_sequential_plan_is_written_as_before() {
    let w = World::new("check");
    let exec = Scripted::new(&[("eth0", 150), ("net1", 150), ("net2", 150)], None);
    let a = w.attacher(&exec, true);
    a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap();
    exec.clear();
    a.check(&call(), &mut Logger::recording("test", "CHECK")).unwrap();
    let checks = exec.seen("CHECK");
    assert_eq!(checks.len(), 3);
    assert!(overlapping(&checks), "{checks:?}");
    a.del(&call(), &three(), &mut Logger::recording("test", "DEL")).unwrap();

    // Sequential: one after another, and no trace of the key in the state.
    let exec = Scripted::new(&[("eth0", 20), ("net1", 20), ("net2", 20)], None);
    let a = w.attacher(&exec, false);
    a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap();
    let adds = exec.seen("ADD");
    assert!(adds.windows(2).all(|p| p[0].end <= p[1].start), "{adds:?}");
    let raw = a.store.read(&key()).unwrap().unwrap();
    assert!(!String::from_utf8_lossy(&raw).contains("parallel"));
    assert!(!Plan::decode(&raw).unwrap().parallel);
    exec.clear();
    a.check(&call(), &mut Logger::recording("test", "CHECK")).unwrap();
    let checks = exec.seen("CHECK");
    assert!(checks.windows(2).all(|p| p[0].end <= p[1].start), "{checks:?}");
}

#[test]
fn a_failure_while_others_still_run_waits_for_them_then_rolls_all_back_in_reverse() {
    let w = World::new("fail");
    // net1 fails at once while eth0 and net2 are still running.
    let exec = Scripted::new(&[("eth0", 250), ("net1", 5), ("net2", 250)], Some("net1"));
    let a = w.attacher(&exec, true);
    let e = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap_err();
    assert_eq!(e.code, 11, "{e:?}");
    assert_eq!(e.msg, "delegate 1 (network \"ptp-net1\", type \"ptp\", interface net1) failed: net1 refused");
    let adds = exec.seen("ADD");
    let dels = exec.seen("DEL");
    // No DEL before every ADD returned, then all three in reverse plan order.
    let last_add = adds.iter().map(|s| s.end).max().unwrap();
    assert!(dels.iter().all(|d| d.start >= last_add), "{adds:?} {dels:?}");
    let order: Vec<&str> = dels.iter().map(|d| d.ifname.as_str()).collect();
    assert_eq!(order, ["net2", "net1", "eth0"]);
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
    let exec = Both(Scripted::new(&[("eth0", 10), ("net1", 50), ("net2", 5)], Some("net1")));
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
    let order: Vec<String> = exec.0.seen("DEL").into_iter().map(|d| d.ifname).collect();
    assert_eq!(order, ["net2", "net1", "eth0"]);
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
