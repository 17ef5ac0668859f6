//! The attach engine against a recording exec: order, state, rollback, DEL from state and
//! from configuration, CHECK, GC.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::{call, ok_result, World};

use braid_attach::plan::{Phase, Plan};
use braid_attach::state::{Key, StateStore};
use braid_attach::Deadline;
use braid_attach::{Attacher, Delegate, DelegateConfig};
use cni_runtime::chain::RuntimeConf as Call;
use cni_runtime::invoke::{Env, Exec, InvokeError, Watch};
use cni_runtime::testing::{FakeExec, ScriptDir};
use cni_skel::log::Logger;
use cni_types::config::GcAttachment;
use cni_types::{CniError, NetConf};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// An attacher that has ADDed `three()` successfully, with those calls forgotten.
fn added_three<'a>(w: &World, exec: &'a FakeExec) -> Attacher<'a> {
    three_replies(exec);
    let a = w.attacher(exec);
    a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap();
    exec.calls.lock().unwrap().clear();
    a
}

fn delegate(ty: &str, version: &str, ifname: &str) -> Delegate {
    let conf = NetConf::parse(
        json!({"cniVersion": version, "name": format!("{ty}net"), "type": ty, "custom": {"k": 1}})
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    Delegate { config: DelegateConfig::Plugin(conf), ifname: ifname.into(), ..Delegate::default() }
}

/// Scripts a successful ADD of each of `three()`.
fn three_replies(exec: &FakeExec) {
    for a in ["198.18.0.2/24", "198.18.1.2/24", "198.18.2.2/24"] {
        exec.reply(ok_result(a));
    }
}

fn calls(exec: &FakeExec) -> Vec<(String, String, String, Value)> {
    exec.calls
        .lock()
        .unwrap()
        .iter()
        .map(|c| {
            let env = |k: &str| c.env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_default();
            (
                c.plugin.file_name().unwrap().to_string_lossy().into_owned(),
                env("CNI_COMMAND"),
                env("CNI_IFNAME"),
                serde_json::from_slice(&c.stdin).unwrap(),
            )
        })
        .collect()
}

fn three() -> Vec<Delegate> {
    vec![delegate("bridge", "1.0.0", "eth0"), delegate("ptp", "0.4.0", "net1"), delegate("macvlan", "0.2.0", "net2")]
}

#[test]
fn add_runs_in_order_and_records_state() {
    let w = World::new("add");
    let exec = FakeExec::default();
    for a in ["198.18.0.2/24", "198.18.1.2/24", "198.18.2.2/24"] {
        exec.reply(ok_result(a));
    }
    let a = w.attacher(&exec);
    let results = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap();
    assert_eq!(results.len(), 3);
    let seen = calls(&exec);
    let order: Vec<(&str, &str, &str)> = seen.iter().map(|c| (c.0.as_str(), c.1.as_str(), c.2.as_str())).collect();
    assert_eq!(order, [("bridge", "ADD", "eth0"), ("ptp", "ADD", "net1"), ("macvlan", "ADD", "net2")]);
    // Unknown keys reach the delegate untouched.
    assert_eq!(seen[0].3["custom"], json!({"k": 1}));
    let raw = a.store.read(&Key::new("ctr1", "eth0").unwrap()).unwrap().unwrap();
    // The durable plan, then one appended record per delegate.
    let lines: Vec<&[u8]> = raw.split_inclusive(|b| *b == b'\n').collect();
    assert_eq!(lines.len(), 4);
    let plan: Value = serde_json::from_slice(lines[0]).unwrap();
    assert!(plan["attachments"].as_array().unwrap().iter().all(|x| x["phase"] == "planned"));
    let state = Plan::decode(&raw).unwrap();
    let atts = &state.attachments;
    assert_eq!(atts.len(), 3);
    assert!(atts.iter().all(|x| x.phase == Phase::Added));
    assert_eq!(atts[1].result.as_ref().unwrap()["ips"][0]["address"], "198.18.1.2/24");
    // A record torn by a crash (no newline) is ignored; the plan still names every delegate.
    let torn = &raw[..raw.len() - 5];
    let state = Plan::decode(torn).unwrap();
    assert_eq!(state.attachments[2].phase, Phase::Planned);
    assert_eq!(state.attachments[1].phase, Phase::Added);
    // A state written as one document (before records were appended) still reads.
    let whole = serde_json::to_vec(&Plan::decode(&raw).unwrap()).unwrap();
    assert_eq!(Plan::decode(&whole).unwrap(), Plan::decode(&raw).unwrap());
    // A torn plan is no state at all.
    assert!(Plan::decode(&raw[..20]).is_none());
}

#[test]
fn failure_rolls_back_in_reverse_including_the_failed_one() {
    let w = World::new("rollback");
    let exec = FakeExec::default();
    exec.reply(ok_result("198.18.0.2/24"));
    exec.reply(Err(InvokeError::Plugin(CniError::with_details(7, "Invalid Configuration", "no master"))));
    let a = w.attacher(&exec);
    let e = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap_err();
    assert_eq!(e.code, 7);
    assert_eq!(e.msg, "delegate 1 (network \"ptpnet\", type \"ptp\", interface net1) failed: Invalid Configuration");
    assert_eq!(e.details, "no master");
    let order: Vec<(String, String)> = calls(&exec).into_iter().map(|c| (c.0, c.1)).collect();
    let want: Vec<(String, String)> = [("bridge", "ADD"), ("ptp", "ADD"), ("ptp", "DEL"), ("bridge", "DEL")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(order, want);
    // The bridge's DEL carries its recorded result (1.0.0 >= 0.4.0).
    let del_bridge = &calls(&exec)[3].3;
    assert_eq!(del_bridge["prevResult"]["ips"][0]["address"], "198.18.0.2/24");
    assert!(a.store.keys().unwrap().is_empty(), "state left after a complete rollback");
}

#[test]
fn del_replays_state_then_falls_back_to_configuration() {
    let w = World::new("del");
    let exec = FakeExec::default();
    let a = added_three(&w, &exec);
    let mut log = Logger::recording("test", "DEL");
    // Today's configuration differs: DEL still undoes what ADD did.
    a.del(&call(), &[delegate("other", "1.0.0", "eth0")], &mut log).unwrap();
    let order: Vec<String> = calls(&exec).into_iter().map(|c| format!("{} {} {}", c.0, c.1, c.2)).collect();
    assert_eq!(order, ["macvlan DEL net2", "ptp DEL net1", "bridge DEL eth0"]);
    assert!(calls(&exec)[0].3.get("prevResult").is_none(), "0.2.0 delegates get no prevResult");
    assert!(a.store.keys().unwrap().is_empty());
    exec.calls.lock().unwrap().clear();
    a.del(&call(), &three(), &mut log).unwrap();
    let order: Vec<String> = calls(&exec).into_iter().map(|c| format!("{} {}", c.0, c.1)).collect();
    assert_eq!(order, ["macvlan DEL", "ptp DEL", "bridge DEL"], "DEL without state deletes the configured delegates");
    assert!(log.lines().is_empty());
}

#[test]
fn corrupt_state_is_reported_and_configuration_used() {
    let w = World::new("corrupt");
    let exec = FakeExec::default();
    let a = w.attacher(&exec);
    a.store.write(&Key::new("ctr1", "eth0").unwrap(), b"{\"kind\":\"braidAtt").unwrap();
    let mut log = Logger::recording("test", "DEL");
    a.del(&call(), &three(), &mut log).unwrap();
    assert_eq!(log.lines().len(), 1);
    assert!(log.lines()[0].contains("corrupt"), "{:?}", log.lines());
    assert_eq!(calls(&exec).len(), 3);
    assert!(a.store.keys().unwrap().is_empty());
}

#[test]
fn del_tries_every_delegate_and_reports_all_failures() {
    let w = World::new("delerr");
    let exec = FakeExec::default();
    let a = w.attacher(&exec);
    exec.reply(Err(InvokeError::Failed("netplugin failed with no error message: exit status 1".into())));
    exec.reply(Ok(Vec::new()));
    exec.reply(Err(InvokeError::Plugin(CniError::new(11, "busy"))));
    let e = a.del(&call(), &three(), &mut Logger::recording("test", "DEL")).unwrap_err();
    assert_eq!(calls(&exec).len(), 3);
    assert!(e.msg.starts_with("2 of 3 delegates failed DEL"), "{}", e.msg);
    assert!(e.msg.contains("delegate 2") && e.msg.contains("delegate 0"), "{}", e.msg);
}

#[test]
fn check_uses_recorded_results_and_skips_old_versions() {
    let w = World::new("check");
    let exec = FakeExec::default();
    let a = added_three(&w, &exec);
    let mut log = Logger::recording("test", "CHECK");
    a.check(&call(), &mut log).unwrap();
    let seen = calls(&exec);
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].3["prevResult"]["ips"][0]["address"], "198.18.1.2/24");
    assert_eq!(log.lines().len(), 1);
    assert!(log.lines()[0].contains("0.2.0"), "{:?}", log.lines());
    exec.reply(Err(InvokeError::Plugin(CniError::new(7, "mismatch"))));
    let e = a.check(&call(), &mut Logger::recording("test", "DEL")).unwrap_err();
    assert_eq!(e.code, 7);
    assert!(e.msg.starts_with("delegate 0 (network \"bridgenet\""), "{}", e.msg);
}

#[test]
fn gc_deletes_stale_attachments_from_their_state_then_forwards() {
    let w = World::new("gc");
    let exec = FakeExec::default();
    let a = w.attacher(&exec);
    for cid in ["keep", "stale"] {
        let c = Call { container_id: cid.into(), ..call() };
        exec.reply(ok_result("198.18.0.2/24"));
        a.add(&c, &three()[..1], &mut Logger::recording("test", "ADD")).unwrap();
    }
    exec.calls.lock().unwrap().clear();
    let valid = [GcAttachment { container_id: "keep".into(), ifname: "eth0".into() }];
    // GC and STATUS exist from 1.1.0: the 1.0.0 delegate is not asked (as libcni skips lists).
    let modern = vec![
        delegate("bridge", "1.1.0", "eth0"),
        delegate("ptp", "1.0.0", "net1"),
        delegate("macvlan", "1.1.0", "net2"),
    ];
    let mut log = Logger::recording("test", "GC");
    a.gc(&modern, &valid, &mut log).unwrap();
    assert_eq!(a.store.keys().unwrap(), vec![Key::new("keep", "eth0").unwrap()]);
    let seen = calls(&exec);
    // The stale attachment's delegate is DELed from its record (what ADD sent, its netns),
    // then every 1.1.0 delegate gets GC.
    let order: Vec<String> = seen.iter().map(|c| format!("{} {}", c.0, c.1)).collect();
    assert_eq!(order, ["bridge DEL", "bridge GC", "macvlan GC"]);
    let del_env = exec.calls.lock().unwrap()[0].env.clone();
    let var = |k: &str| del_env.iter().find(|(n, _)| n == k).unwrap().1.clone();
    assert_eq!(
        (var("CNI_CONTAINERID"), var("CNI_NETNS"), var("CNI_IFNAME")),
        ("stale".into(), "/run/netns/x".into(), "eth0".into())
    );
    assert_eq!(seen[1].3["cni.dev/valid-attachments"], json!([{"containerID": "keep", "ifname": "eth0"}]));
    assert!(log.lines().iter().any(|l| l.contains("stale attachment stale@eth0 deleted")), "{:?}", log.lines());
    // A stale attachment whose DEL fails keeps its state for the next GC.
    let c = Call { container_id: "stale2".into(), ..call() };
    exec.reply(ok_result("198.18.0.3/24"));
    a.add(&c, &three()[..1], &mut Logger::recording("test", "ADD")).unwrap();
    exec.reply(Err(InvokeError::Failed("busy".into())));
    let e = a.gc(&[], &valid, &mut Logger::recording("test", "GC")).unwrap_err();
    assert!(e.msg.contains("stale attachment stale2@eth0") && e.msg.contains("busy"), "{e}");
    assert_eq!(a.store.keys().unwrap().len(), 2);
    a.gc(&[], &valid, &mut Logger::recording("test", "GC")).unwrap();
    assert_eq!(a.store.keys().unwrap(), vec![Key::new("keep", "eth0").unwrap()]);
    exec.reply(Err(InvokeError::Plugin(CniError::new(50, "not ready"))));
    let status = |d: &[Delegate]| braid_attach::status::delegates(&exec, &a.paths, d, Deadline::none());
    assert_eq!(status(&modern).unwrap_err().code, 50);
    exec.calls.lock().unwrap().clear();
    assert!(status(&three()[1..]).is_ok(), "delegates below 1.1.0 are not asked for STATUS");
    assert!(calls(&exec).is_empty(), "a delegate below 1.1.0 got STATUS");
}

#[test]
fn per_attachment_runtime_config_and_args_are_sent_and_replayed() {
    let w = World::new("rc");
    let exec = FakeExec::default();
    let a = w.attacher(&exec);
    let conf =
        NetConf::parse(br#"{"cniVersion":"1.0.0","name":"m","type":"macvlan","capabilities":{"mac":true}}"#).unwrap();
    let mut d = Delegate { config: DelegateConfig::Plugin(conf), ifname: "net1".into(), ..Delegate::default() };
    d.runtime_config.insert("mac".into(), json!("c2:11:22:33:44:55"));
    d.runtime_config.insert("ips".into(), json!(["198.18.5.5/24"]));
    d.args = Some("IP=198.18.5.5".into());
    let c = Call { args: "IgnoreUnknown=1".into(), ..call() };
    exec.reply(ok_result("198.18.5.5/24"));
    a.add(&c, std::slice::from_ref(&d), &mut Logger::recording("test", "ADD")).unwrap();
    let env_args = |i: usize| {
        let calls = exec.calls.lock().unwrap();
        calls[i].env.iter().find(|(k, _)| k == "CNI_ARGS").unwrap().1.clone()
    };
    let seen = calls(&exec);
    // Only the declared capability reaches the delegate.
    assert_eq!(seen[0].3["runtimeConfig"], json!({"mac": "c2:11:22:33:44:55"}));
    assert_eq!(env_args(0), "IgnoreUnknown=1;IP=198.18.5.5");
    // DEL replays what ADD sent, even if today's configuration no longer has the overrides.
    a.del(&c, &[], &mut Logger::recording("test", "DEL")).unwrap();
    assert_eq!(env_args(1), "IgnoreUnknown=1;IP=198.18.5.5");
    assert_eq!(calls(&exec)[1].3["runtimeConfig"], json!({"mac": "c2:11:22:33:44:55"}));
}

#[test]
fn a_failed_rollback_keeps_the_state_for_a_later_del() {
    let w = World::new("badrollback");
    let exec = FakeExec::default();
    exec.reply(ok_result("198.18.0.2/24"));
    exec.reply(Err(InvokeError::Plugin(CniError::new(7, "Invalid Configuration"))));
    exec.reply(Ok(Vec::new())); // DEL of the failed ptp
    exec.reply(Err(InvokeError::Failed("netplugin failed with no error message: exit status 1".into()))); // DEL bridge
    let a = w.attacher(&exec);
    let e = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap_err();
    assert_eq!(e.code, 7);
    assert!(e.msg.contains("rollback incomplete, state kept for DEL"), "{}", e.msg);
    assert!(e.msg.contains("delegate 0"), "{}", e.msg);
    assert_eq!(a.store.keys().unwrap(), vec![Key::new("ctr1", "eth0").unwrap()]);
    // The runtime's DEL retries every recorded delegate and then drops the state.
    exec.calls.lock().unwrap().clear();
    a.del(&call(), &[], &mut Logger::recording("test", "DEL")).unwrap();
    let order: Vec<String> = calls(&exec).into_iter().map(|c| format!("{} {}", c.0, c.1)).collect();
    assert_eq!(order, ["macvlan DEL", "ptp DEL", "bridge DEL"]);
    assert!(a.store.keys().unwrap().is_empty());
}

/// Removes the state files before passing the call on, so recording a result fails.
struct LosesState<'a> {
    inner: &'a FakeExec,
    dir: PathBuf,
    on_call: usize,
    seen: std::sync::atomic::AtomicUsize,
}

impl Exec for LosesState<'_> {
    fn exec(&self, plugin: &Path, stdin: &[u8], env: &[(String, String)]) -> Result<Vec<u8>, InvokeError> {
        if self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == self.on_call {
            let _ = std::fs::remove_file(self.dir.join("ctr1@eth0"));
        }
        self.inner.exec(plugin, stdin, env)
    }

    fn find(&self, name: &str, paths: &[PathBuf]) -> Result<PathBuf, InvokeError> {
        self.inner.find(name, paths)
    }
}

#[test]
fn a_result_that_cannot_be_recorded_rolls_back_like_a_failure() {
    let w = World::new("unrecorded");
    let fake = FakeExec::default();
    for a in ["198.18.0.2/24", "198.18.1.2/24", "198.18.2.2/24"] {
        fake.reply(ok_result(a));
    }
    let exec = LosesState { inner: &fake, dir: w.dir.clone(), on_call: 2, seen: Default::default() };
    let a = Attacher {
        exec: &exec,
        paths: vec!["/opt/cni/bin".into()],
        store: StateStore::open(&w.dir).unwrap(),
        parallel: false,
        deadline: Deadline::none(),
    };
    let e = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap_err();
    assert_eq!(e.code, 5, "{e:?}");
    assert!(e.msg.starts_with("delegate 1 (network \"ptpnet\", type \"ptp\", interface net1) failed"), "{}", e.msg);
    assert!(e.msg.contains("its result could not be recorded"), "{}", e.msg);
    let order: Vec<String> = calls(&fake).into_iter().map(|c| format!("{} {} {}", c.0, c.1, c.2)).collect();
    assert_eq!(order, ["bridge ADD eth0", "ptp ADD net1", "ptp DEL net1", "bridge DEL eth0"]);
    assert!(a.store.keys().unwrap().is_empty());
}

/// State files written by the engine before the format was typed (kept in `tests/data`, made
/// with that code) still read, and DEL replays them exactly: every recorded delegate, last
/// first, with its recorded bytes, args and (from 0.4.0) its recorded result.
#[test]
fn state_files_written_by_earlier_releases_still_replay() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let old = std::fs::read(data.join("state-v1-rollback-incomplete.state")).unwrap();
    let plan = Plan::decode(&old).unwrap();
    let phases: Vec<Phase> = plan.attachments.iter().map(|a| a.phase).collect();
    assert_eq!(phases, [Phase::Added, Phase::Added, Phase::Planned]);
    assert_eq!(plan.attachments[1].args.as_deref(), Some("IgnoreUnknown=1;K8S_POD_NAME=p;MAC=02:00:00:00:00:01"));
    assert_eq!(plan.attachments[1].capability_args.as_ref().unwrap()["mac"], "02:00:00:00:00:01");

    let w = World::new("compat");
    let exec = FakeExec::default();
    let a = w.attacher(&exec);
    a.store.write(&Key::new("ctr1", "eth0").unwrap(), &old).unwrap();
    a.del(&call(), &[], &mut Logger::recording("test", "DEL")).unwrap();
    let seen = calls(&exec);
    let order: Vec<String> = seen.iter().map(|c| format!("{} {} {}", c.0, c.1, c.2)).collect();
    assert_eq!(order, ["macvlan DEL net2", "ptp DEL net1", "bridge DEL eth0"]);
    assert_eq!(seen[1].3["prevResult"]["ips"][0]["address"], "198.18.1.2/24");
    assert!(seen[0].3.get("prevResult").is_none(), "0.2.0 gets no prevResult");
    let args: Vec<String> = exec
        .calls
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.env.iter().find(|(k, _)| k == "CNI_ARGS").unwrap().1.clone())
        .collect();
    assert_eq!(args[1], "IgnoreUnknown=1;K8S_POD_NAME=p;MAC=02:00:00:00:00:01");
    assert!(a.store.keys().unwrap().is_empty());

    let with_list = std::fs::read(data.join("state-v1-with-list.state")).unwrap();
    let plan = Plan::decode(&with_list).unwrap();
    assert!(plan.attachments[1].list);
    assert_eq!(plan.attachments[1].config["plugins"][1]["type"], "tuning");
}

#[test]
fn delegates_get_ignore_unknown_on_every_command_even_from_old_states() {
    use braid_attach::delegate::ignore_unknown;
    assert_eq!(ignore_unknown(""), "IgnoreUnknown=1");
    assert_eq!(ignore_unknown("K8S_POD_NAME=p"), "IgnoreUnknown=1;K8S_POD_NAME=p");
    assert_eq!(ignore_unknown("A=1;IgnoreUnknown=true"), "A=1;IgnoreUnknown=true");
    assert_eq!(ignore_unknown("IgnoreUnknown=1"), "IgnoreUnknown=1");
    assert_eq!(ignore_unknown("IgnoreUnknown=0"), "IgnoreUnknown=1;IgnoreUnknown=0");

    let w = World::new("ignore");
    let exec = FakeExec::default();
    let a = w.attacher(&exec);
    let c = Call { args: "K8S_POD_NAME=p".into(), ..call() };
    for addr in ["198.18.0.2/24", "198.18.1.2/24", "198.18.2.2/24"] {
        exec.reply(ok_result(addr));
    }
    a.add(&c, &three(), &mut Logger::recording("test", "ADD")).unwrap();
    a.check(&c, &mut Logger::recording("test", "CHECK")).unwrap();
    // A state written before this change recorded the args without IgnoreUnknown.
    let key = Key::new("ctr1", "eth0").unwrap();
    let old = String::from_utf8(a.store.read(&key).unwrap().unwrap()).unwrap().replace("IgnoreUnknown=1;", "");
    assert!(!old.contains("IgnoreUnknown"));
    a.store.write(&key, old.as_bytes()).unwrap();
    a.del(&c, &[], &mut Logger::recording("test", "DEL")).unwrap();
    let calls = exec.calls.lock().unwrap();
    assert_eq!(calls.len(), 3 + 2 + 3);
    for call in calls.iter() {
        let args = &call.env.iter().find(|(k, _)| k == "CNI_ARGS").unwrap().1;
        assert_eq!(args, "IgnoreUnknown=1;K8S_POD_NAME=p");
    }
}

/// FakeExec that fails `find` for one plugin type, as `FindInPath` does for a typo.
struct Missing<'a> {
    inner: &'a FakeExec,
    name: &'static str,
}

impl Exec for Missing<'_> {
    fn exec(&self, plugin: &Path, stdin: &[u8], env: &[(String, String)]) -> Result<Vec<u8>, InvokeError> {
        self.inner.exec(plugin, stdin, env)
    }
    fn find(&self, name: &str, paths: &[PathBuf]) -> Result<PathBuf, InvokeError> {
        if name == self.name {
            return Err(InvokeError::NotFound { name: name.into(), paths: paths.to_vec() });
        }
        self.inner.find(name, paths)
    }
}

#[test]
fn a_delegate_that_never_started_gets_no_del_and_keeps_no_state() {
    let w = World::new("neverstarted");
    let fake = FakeExec::default();
    let exec = Missing { inner: &fake, name: "macvlan" };
    let a = Attacher {
        exec: &exec,
        paths: vec!["/opt/cni/bin".into()],
        store: StateStore::open(&w.dir).unwrap(),
        parallel: false,
        deadline: Deadline::none(),
    };
    fake.reply(ok_result("198.18.0.2/24"));
    fake.reply(ok_result("198.18.1.2/24"));
    let e = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap_err();
    assert!(
        e.msg.starts_with(
            "delegate 2 (network \"macvlannet\", type \"macvlan\", interface net2) failed: failed to find plugin"
        ),
        "{e}"
    );
    assert!(!e.msg.contains("rollback incomplete"), "{e}");
    let order: Vec<String> = calls(&fake).into_iter().map(|c| format!("{} {}", c.0, c.1)).collect();
    assert_eq!(order, ["bridge ADD", "ptp ADD", "ptp DEL", "bridge DEL"]);
    assert!(a.store.keys().unwrap().is_empty());
}

#[test]
fn a_failed_delegate_whose_del_fails_too_does_not_keep_the_state() {
    let w = World::new("faileddel");
    let exec = FakeExec::default();
    exec.reply(ok_result("198.18.0.2/24"));
    exec.reply(Err(InvokeError::Plugin(CniError::new(999, "Link not found"))));
    exec.reply(Err(InvokeError::Plugin(CniError::new(999, "Link not found")))); // its DEL
    exec.reply(Ok(Vec::new())); // DEL of bridge
    let a = w.attacher(&exec);
    let mut log = Logger::recording("test", "ADD");
    let e = a.add(&call(), &three()[..2], &mut log).unwrap_err();
    assert_eq!(e.code, 999);
    assert!(!e.msg.contains("rollback incomplete"), "{e}");
    assert!(a.store.keys().unwrap().is_empty());
    assert!(log.lines().iter().any(|l| l.contains("delegate 1") && l.contains("not retried")), "{:?}", log.lines());

    // After a crash, a recorded delegate whose ADD never returned likewise does not hold the
    // pod's DEL hostage; one that returned a result does.
    for (a_fails, kept) in [(1, false), (0, true)] {
        let exec = FakeExec::default();
        let a = w.attacher(&exec);
        let key = Key::new("ctr1", "eth0").unwrap();
        let mut plan = Plan::decode(
            &std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/state-v1-rollback-incomplete.state"))
                .unwrap(),
        )
        .unwrap();
        plan.attachments.truncate(2);
        plan.attachments[1].phase = Phase::Planned;
        a.store.write(&key, &plan.to_line()).unwrap();
        // DEL order: delegate 1, then 0.
        let replies = if a_fails == 1 { [false, true] } else { [true, false] };
        for ok in replies {
            exec.reply(if ok { Ok(Vec::new()) } else { Err(InvokeError::Failed("boom".into())) });
        }
        let r = a.del(&call(), &[], &mut Logger::recording("test", "DEL"));
        assert_eq!(r.is_err(), kept);
        assert_eq!(!a.store.keys().unwrap().is_empty(), kept);
        let _ = std::fs::remove_file(w.dir.join("ctr1@eth0"));
    }
}

#[test]
fn a_second_add_of_an_attached_container_is_refused_and_touches_nothing() {
    let w = World::new("twice");
    let exec = FakeExec::default();
    let a = added_three(&w, &exec);
    let key = Key::new("ctr1", "eth0").unwrap();
    let before = a.store.read(&key).unwrap();
    let e = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap_err();
    assert_eq!(e.code, 7);
    assert!(e.msg.contains("already attached on eth0"), "{e}");
    assert!(calls(&exec).is_empty(), "nothing ran, nothing was rolled back");
    assert_eq!(a.store.read(&key).unwrap(), before);
}

#[test]
fn what_cannot_be_read_back_is_not_recorded_and_long_ids_are_named() {
    let w = World::new("deep");
    let exec = FakeExec::default();
    let a = w.attacher(&exec);
    let mut deep = json!(1);
    for _ in 0..140 {
        deep = json!([deep]);
    }
    let conf = NetConf::from_value(json!({"cniVersion": "1.0.0", "name": "d", "type": "ptp", "deep": deep})).unwrap();
    let d = Delegate { config: DelegateConfig::Plugin(conf), ifname: "eth0".into(), ..Delegate::default() };
    let e = a.add(&call(), &[d], &mut Logger::recording("test", "ADD")).unwrap_err();
    assert_eq!(e.code, 7);
    assert!(e.msg.contains("network \"d\": its configuration cannot be recorded and read back"), "{e}");
    assert!(calls(&exec).is_empty() && a.store.keys().unwrap().is_empty());
    let long = "a".repeat(5000);
    let e = a.add(&Call { container_id: long, ..call() }, &three(), &mut Logger::recording("test", "ADD")).unwrap_err();
    assert_eq!(e.code, 4);
    assert!(e.msg.contains("CNI_CONTAINERID is 5000 characters long"), "{e}");
}

#[test]
fn unusable_state_never_blocks_del_and_planted_state_is_not_replayed() {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let key_file = |w: &World| w.dir.join("ctr1@eth0");
    // A FIFO (DEL must not hang in open), a symlink, and a state writable by others (planted:
    // it names a plugin of someone else's choosing).
    for (tag, plant) in [("fifo", 0), ("symlink", 1), ("planted", 2)] {
        let w = World::new(tag);
        let exec = FakeExec::default();
        let a = w.attacher(&exec);
        match plant {
            0 => assert!(std::process::Command::new("mkfifo").arg(key_file(&w)).status().unwrap().success()),
            1 => std::os::unix::fs::symlink("/etc/hostname", key_file(&w)).unwrap(),
            _ => {
                let mut evil = Plan::decode(
                    &std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/state-v1-with-list.state"))
                        .unwrap(),
                )
                .unwrap();
                evil.attachments[0].plugin_type = "evil".into();
                std::fs::write(key_file(&w), evil.to_line()).unwrap();
                std::fs::set_permissions(key_file(&w), std::fs::Permissions::from_mode(0o666)).unwrap();
            }
        }
        let mut log = Logger::recording("test", "DEL");
        // Should DEL block in open(2) on the FIFO, a writer releases it once a hang guard has
        // passed without DEL returning, and says so (the test then fails instead of hanging).
        let fifo = key_file(&w);
        let (done, returned) = std::sync::mpsc::channel::<()>();
        let guard = std::thread::spawn(move || {
            let blocked = returned.recv_timeout(std::time::Duration::from_secs(20)).is_err();
            if blocked && plant == 0 {
                let _ = std::fs::OpenOptions::new().write(true).custom_flags(nix::libc::O_NONBLOCK).open(&fifo);
            }
            blocked
        });
        let deleted = a.del(&call(), &three(), &mut log);
        let _ = done.send(());
        assert!(!guard.join().unwrap(), "{tag}: DEL blocked on the state path");
        deleted.unwrap_or_else(|e| panic!("{tag}: {e}"));
        let order: Vec<String> = calls(&exec).into_iter().map(|c| format!("{} {}", c.0, c.1)).collect();
        assert_eq!(order, ["macvlan DEL", "ptp DEL", "bridge DEL"], "{tag}: the configured delegates, nothing planted");
        assert!(
            log.lines().iter().any(|l| l.contains("deleting the configured delegates instead")),
            "{tag}: {:?}",
            log.lines()
        );
        assert!(std::fs::symlink_metadata(key_file(&w)).is_err(), "{tag}: the unusable state is removed");
    }
    // A state directory others can write to is refused, naming why.
    let w = World::new("open");
    std::fs::create_dir_all(&w.dir).unwrap();
    std::fs::set_permissions(&w.dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = StateStore::open(&w.dir).unwrap_err().to_string();
    assert!(e.contains("writable by group or others (mode 777)"), "{e}");
}

#[test]
fn foreign_state_dirs_are_refused_and_read_only_ones_still_release_the_delegates() {
    use std::os::unix::fs::PermissionsExt;
    if !cni_skel::testing::require_root("foreign_state_dirs_are_refused_and_read_only_ones_still_release_the_delegates")
    {
        return;
    }
    // Owned by another user: refused, though nobody else may write to it.
    let w = World::new("foreign");
    std::fs::create_dir_all(&w.dir).unwrap();
    std::fs::set_permissions(&w.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&w.dir, Some(65534), Some(65534)).unwrap();
    let e = StateStore::open(&w.dir).unwrap_err().to_string();
    assert!(e.contains("owned by uid 65534"), "{e}");

    // Read-only (a bind mount: root ignores mode bits): DEL still releases every delegate
    // from the recorded state, and reports the state it could not remove.
    let w = World::new("ro");
    let exec = FakeExec::default();
    let a = added_three(&w, &exec);
    let dir = w.dir.to_str().unwrap().to_string();
    let mount = |args: &[&str]| assert!(std::process::Command::new("mount").args(args).status().unwrap().success());
    mount(&["--bind", &dir, &dir]);
    struct Unmount(String);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(dir.clone());
    mount(&["-o", "remount,bind,ro", &dir]);
    let e = a.del(&call(), &[], &mut Logger::recording("test", "DEL")).unwrap_err();
    assert_eq!(e.code, 5, "{e}");
    assert!(e.msg.starts_with("the delegates were deleted, but"), "{e}");
    let order: Vec<String> = calls(&exec).into_iter().map(|c| format!("{} {}", c.0, c.1)).collect();
    assert_eq!(order, ["macvlan DEL", "ptp DEL", "bridge DEL"]);
}

#[test]
fn a_plan_that_does_not_fit_on_the_disk_leaves_no_empty_state() {
    if !cni_skel::testing::require_root("a_plan_that_does_not_fit_on_the_disk_leaves_no_empty_state") {
        return;
    }
    let w = World::new("full");
    std::fs::create_dir_all(&w.dir).unwrap();
    let dir = w.dir.to_str().unwrap().to_string();
    // A 4 KiB tmpfs: the plan below does not fit.
    assert!(std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4k,mode=0700", "tmpfs", &dir])
        .status()
        .unwrap()
        .success());
    struct Unmount(String);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(dir);
    let exec = FakeExec::default();
    let a = w.attacher(&exec);
    let big =
        NetConf::from_value(json!({"cniVersion": "1.0.0", "name": "big", "type": "ptp", "pad": "x".repeat(64 * 1024)}))
            .unwrap();
    let d = Delegate { config: DelegateConfig::Plugin(big), ifname: "eth0".into(), ..Delegate::default() };
    let e = a.add(&call(), &[d], &mut Logger::recording("test", "ADD")).unwrap_err();
    assert_eq!(e.code, 5, "{e}");
    assert!(calls(&exec).is_empty(), "nothing ran");
    assert!(
        a.store.keys().unwrap().is_empty(),
        "no empty state left: {:?}",
        std::fs::read_dir(&w.dir).unwrap().collect::<Vec<_>>()
    );
}

/// An executor that reports its spawns (as `RawExec` does) and, at the moment each "process"
/// would be sent its configuration, reads what the state file holds.
struct Observing<'a> {
    inner: &'a FakeExec,
    state: PathBuf,
    seen: std::sync::Mutex<Vec<String>>,
}

impl Exec for Observing<'_> {
    fn exec(&self, plugin: &Path, stdin: &[u8], env: &[(String, String)]) -> Result<Vec<u8>, InvokeError> {
        self.inner.exec(plugin, stdin, env)
    }

    fn exec_until(&self, plugin: &Path, stdin: &[u8], env: &Env, watch: Watch<'_>) -> Result<Vec<u8>, InvokeError> {
        // This test process stands in for the child: it exists, and has been sent nothing.
        (watch.spawned)(std::process::id());
        let held = std::fs::read_to_string(&self.state).unwrap_or_default();
        self.seen.lock().unwrap().push(held);
        self.inner.exec_until(plugin, stdin, env, Watch { until: watch.until, ..Watch::NONE })
    }

    fn find(&self, name: &str, paths: &[PathBuf]) -> Result<PathBuf, InvokeError> {
        self.inner.find(name, paths)
    }

    fn reports_spawns(&self) -> bool {
        true
    }
}

/// The plan is made durable while the first delegate's process starts, not before: but every
/// delegate is sent its configuration only once the plan and the record of its process are in
/// the state file (what a DEL after a crash at that moment reads).
#[test]
fn each_delegate_is_sent_its_configuration_only_after_the_plan_and_its_process_are_recorded() {
    let w = World::new("durable");
    let fake = FakeExec::default();
    three_replies(&fake);
    let exec = Observing { inner: &fake, state: w.dir.join("ctr1@eth0"), seen: Default::default() };
    let a = w.attacher(&exec);
    a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap();
    let seen = exec.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    let me = std::process::id();
    for (i, held) in seen.iter().enumerate() {
        let plan = Plan::decode(held.as_bytes()).expect("the plan is in the file");
        assert_eq!(plan.attachments.len(), 3);
        assert_eq!(plan.attachments[i].phase, Phase::Running, "delegate {i}: {held}");
        assert_eq!(plan.attachments[i].process.as_ref().map(|p| p.pid), Some(me), "delegate {i}: {held}");
        assert!(plan.attachments[..i].iter().all(|x| x.phase == Phase::Added), "delegate {i}: {held}");
    }
}

/// An executor that reports its spawns and starts a real process for each call, after taking
/// the state directory away so that the plan cannot be made durable.
struct Unsyncable {
    dir: PathBuf,
    calls: std::sync::Mutex<Vec<Option<i32>>>,
}

impl Exec for Unsyncable {
    fn exec(&self, plugin: &Path, stdin: &[u8], env: &[(String, String)]) -> Result<Vec<u8>, InvokeError> {
        self.exec_until(plugin, stdin, env, Watch::NONE)
    }

    fn exec_until(&self, plugin: &Path, _stdin: &[u8], _env: &Env, watch: Watch<'_>) -> Result<Vec<u8>, InvokeError> {
        let spawned = watch.spawned;
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        std::fs::rename(&self.dir, self.dir.with_extension("gone")).unwrap();
        let mut child = std::process::Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
        spawned(child.id());
        let status = child.wait().unwrap();
        self.calls.lock().unwrap().push(status.signal());
        Err(InvokeError::Failed(format!("{} was killed", plugin.display())))
    }

    fn find(&self, name: &str, _paths: &[PathBuf]) -> Result<PathBuf, InvokeError> {
        Ok(PathBuf::from(name))
    }

    fn reports_spawns(&self) -> bool {
        true
    }
}

/// A plan that cannot be made durable stops the first delegate before it is sent anything: its
/// process is killed, the error is the fsync's, and it gets no DEL (it never acted).
#[test]
fn a_plan_that_cannot_be_made_durable_kills_the_waiting_delegate_unsent() {
    let w = World::new("unsynced");
    std::fs::create_dir_all(&w.dir).unwrap();
    let gone = w.dir.with_extension("gone");
    let _ = std::fs::remove_dir_all(&gone);
    let exec = Unsyncable { dir: w.dir.clone(), calls: Default::default() };
    let a = w.attacher(&exec);
    let e = a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap_err();
    let _ = std::fs::remove_dir_all(&gone);
    assert!(e.msg.contains("fsync") && e.msg.contains(&w.dir.display().to_string()), "{e:?}");
    assert_eq!(*exec.calls.lock().unwrap(), [Some(9)], "one process, killed, and no DEL after it");
}

/// Every delegate through `fake`, but `bridge` found at `script` (a real binary to start ahead).
struct FirstIsReal<'a> {
    fake: &'a FakeExec,
    script: PathBuf,
}

impl Exec for FirstIsReal<'_> {
    fn exec(&self, plugin: &Path, stdin: &[u8], env: &[(String, String)]) -> Result<Vec<u8>, InvokeError> {
        self.fake.exec(plugin, stdin, env)
    }

    fn find(&self, name: &str, paths: &[PathBuf]) -> Result<PathBuf, InvokeError> {
        match name {
            "bridge" => Ok(self.script.clone()),
            _ => self.fake.find(name, paths),
        }
    }

    fn reports_spawns(&self) -> bool {
        true
    }
}

/// Whether our child `pid` was reaped (its /proc entry is gone): a process started ahead is
/// this test process's child.
fn reaped(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

/// A script that reads its configuration, then leaves `marker` (a copy of `state` when given)
/// and prints a 1.0.0 result with `address`.
fn first_script(s: &ScriptDir, marker: &Path, state: Option<&Path>, address: &str) -> PathBuf {
    let leave = match state {
        Some(state) => format!("cp '{}' '{}'", state.display(), marker.display()),
        None => format!("touch '{}'", marker.display()),
    };
    let result = json!({"cniVersion": "1.0.0", "ips": [{"address": address}]});
    s.script("bridge", &format!("cat > /dev/null\n{leave}\nprintf '%s' '{result}'\n")).unwrap()
}

/// A world whose `bridge` is a real script that leaves `marker` once it is sent a configuration
/// (the other delegates, and `bridge` when started anew, scripted on a `FakeExec` by
/// `three_replies`); runs `test` with it.
fn with_marking_bridge(tag: &str, test: impl FnOnce(&World, &Attacher<'_>, &FakeExec, &Path)) {
    let w = World::new(tag);
    let s = ScriptDir::new(tag).unwrap();
    let marker = s.path.join("configured");
    let script = first_script(&s, &marker, None, "198.18.0.9/24");
    let fake = FakeExec::default();
    three_replies(&fake);
    let exec = FirstIsReal { fake: &fake, script };
    let a = w.attacher(&exec);
    test(&w, &a, &fake, &marker);
}

/// The first delegate's process, started ahead of the ADD's locks and plan, is the one that
/// attaches it — and it is sent its configuration only once the plan and its own record are
/// in the state file, as any delegate is.
#[test]
fn the_first_delegate_started_ahead_is_sent_its_configuration_after_the_plan_and_its_record() {
    let w = World::new("ahead");
    let s = ScriptDir::new("ahead").unwrap();
    let seen = s.path.join("seen");
    let script = first_script(&s, &seen, Some(&w.dir.join("ctr1@eth0")), "198.18.0.2/24");
    let fake = FakeExec::default();
    fake.reply(ok_result("198.18.1.2/24"));
    fake.reply(ok_result("198.18.2.2/24"));
    let exec = FirstIsReal { fake: &fake, script };
    let a = w.attacher(&exec);
    let first = a.start_first(&cni_runtime::RawExec::default(), &call(), &three()).expect("bridge started ahead");
    let pid = first.pid().unwrap();
    let results = a.add_with_first(&call(), &three(), &mut Logger::recording("test", "ADD"), Some(first)).unwrap();
    assert_eq!(results[0].to_value()["ips"][0]["address"], "198.18.0.2/24");
    let held = std::fs::read(&seen).expect("the process started ahead attached the first delegate");
    let plan = Plan::decode(&held).expect("the plan is in the file");
    assert_eq!(plan.attachments[0].phase, Phase::Running);
    assert_eq!(plan.attachments[0].process.as_ref().map(|p| p.pid), Some(pid));
    let names: Vec<String> = calls(&fake).into_iter().map(|c| c.0).collect();
    assert_eq!(names, ["ptp", "macvlan"], "only the other two through the executor");
    assert!(reaped(pid));
}

/// A process started ahead for another call (here: another container) is never sent a
/// configuration: it is killed unsent, and the first delegate is started anew.
#[test]
fn a_first_delegate_started_for_another_call_is_killed_unsent() {
    with_marking_bridge("aheadother", |_, a, fake, marker| {
        let other = Call { container_id: "ctr2".into(), ..call() };
        let first = a.start_first(&cni_runtime::RawExec::default(), &other, &three()).expect("bridge started ahead");
        let pid = first.pid().unwrap();
        let results = a.add_with_first(&call(), &three(), &mut Logger::recording("test", "ADD"), Some(first)).unwrap();
        assert_eq!(results[0].to_value()["ips"][0]["address"], "198.18.0.2/24", "the executor's bridge");
        assert!(reaped(pid), "the process started for ctr2 was not reaped");
        assert!(!marker.exists(), "the process started for ctr2 was sent a configuration");
        let names: Vec<String> = calls(fake).into_iter().map(|c| c.0).collect();
        assert_eq!(names, ["bridge", "ptp", "macvlan"]);
    });
}

/// An ADD refused before the first delegate's turn (the attachment exists) kills the process
/// started ahead unsent: nothing runs, the existing attachment's state is untouched.
#[test]
fn an_add_refused_before_its_first_delegate_kills_the_process_started_ahead_unsent() {
    with_marking_bridge("aheadrefused", |w, a, _, marker| {
        a.add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap();
        let before = std::fs::read(w.dir.join("ctr1@eth0")).unwrap();
        let first = a.start_first(&cni_runtime::RawExec::default(), &call(), &three()).expect("bridge started ahead");
        let pid = first.pid().unwrap();
        let e = a.add_with_first(&call(), &three(), &mut Logger::recording("test", "ADD"), Some(first)).unwrap_err();
        assert!(e.msg.contains("is already attached"), "{e:?}");
        assert!(reaped(pid), "the process started ahead was not reaped");
        assert!(!marker.exists(), "the process started ahead was sent a configuration");
        assert_eq!(std::fs::read(w.dir.join("ctr1@eth0")).unwrap(), before);
    });
}

/// Every delegate through `fake`, but `macvlan` — the last of [`three`], the one DEL runs
/// first — found at `script` and started ahead for real.
struct LastIsReal<'a> {
    fake: &'a FakeExec,
    script: PathBuf,
}

impl Exec for LastIsReal<'_> {
    fn exec(&self, plugin: &Path, stdin: &[u8], env: &[(String, String)]) -> Result<Vec<u8>, InvokeError> {
        self.fake.exec(plugin, stdin, env)
    }

    fn find(&self, name: &str, paths: &[PathBuf]) -> Result<PathBuf, InvokeError> {
        match name {
            "macvlan" => Ok(self.script.clone()),
            _ => self.fake.find(name, paths),
        }
    }

    fn start_ahead(&self, plugin: &Path, env: &Env) -> Option<cni_runtime::invoke::Started> {
        cni_runtime::RawExec::default().start_ahead(plugin, env)
    }
}

/// [`three`] attached through a plain `FakeExec`, then `test` with an attacher whose
/// `macvlan` is a real script that appends its `CNI_IFNAME` to `marker` once it is sent a
/// configuration.
fn with_marking_macvlan(tag: &str, test: impl FnOnce(&Attacher<'_>, &FakeExec, &Path)) {
    let w = World::new(tag);
    let adder = FakeExec::default();
    three_replies(&adder);
    w.attacher(&adder).add(&call(), &three(), &mut Logger::recording("test", "ADD")).unwrap();
    let s = ScriptDir::new(tag).unwrap();
    let marker = s.path.join("configured");
    let script = s
        .script("macvlan", &format!("cat > /dev/null\nprintf '%s\\n' \"$CNI_IFNAME\" >> '{}'\n", marker.display()))
        .unwrap();
    let fake = FakeExec::default();
    let exec = LastIsReal { fake: &fake, script };
    test(&w.attacher(&exec), &fake, &marker);
}

/// DEL's first process, started ahead from the configuration before the lock and the state
/// are read, is the one that deletes the last delegate — sent its configuration in its turn —
/// and the state is gone afterwards, as with any DEL.
#[test]
fn the_last_delegate_started_ahead_is_the_one_del_runs_first() {
    with_marking_macvlan("delahead", |a, fake, marker| {
        let last = a.start_last(&call(), &three()).expect("macvlan started ahead");
        let pid = last.pid().unwrap();
        assert!(!marker.exists(), "sent nothing before its turn");
        a.del_with_last(&call(), &three(), Some(last), &mut Logger::recording("test", "DEL")).unwrap();
        assert_eq!(std::fs::read_to_string(marker).unwrap(), "net2\n", "the process started ahead deleted it");
        assert!(reaped(pid));
        let names: Vec<String> = calls(fake).into_iter().map(|c| c.0).collect();
        assert_eq!(names, ["ptp", "bridge"], "only the other two through the executor");
        assert_eq!(a.store.keys().unwrap(), Vec::<Key>::new());
    });
}

/// A process started ahead for another call (another interface name) is never sent a
/// configuration: it is killed unsent, and the recorded delegate's DEL runs in a process of
/// its own (started anew: with a delegate after it, its turn starts the next one's ahead).
#[test]
fn a_del_process_started_for_another_call_is_killed_unsent() {
    with_marking_macvlan("delaheadother", |a, fake, marker| {
        let mut other = three();
        other[2].ifname = "net9".into();
        let last = a.start_last(&call(), &other).expect("macvlan started ahead");
        let pid = last.pid().unwrap();
        a.del_with_last(&call(), &three(), Some(last), &mut Logger::recording("test", "DEL")).unwrap();
        assert!(reaped(pid), "the process started for net9 was not reaped");
        let ran = std::fs::read_to_string(marker).unwrap();
        assert_eq!(ran, "net2\n", "the process started for net9 was sent a configuration, or net2 was not deleted");
        let names: Vec<String> = calls(fake).into_iter().map(|c| c.0).collect();
        assert_eq!(names, ["ptp", "bridge"]);
    });
}
