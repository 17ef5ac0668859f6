//! Crash windows forced deterministically: the delegator SIGKILLed at chosen steps of an ADD —
//! each step held open by a slow fault delegate and recognised from the outside (its log, its
//! reservation files) — then DEL as a runtime sends it. Nothing may be left: no link, no IP
//! reservation, no reservation slot, no state, no lock file.
//!
//! The window behind the rare leak of the random crash runs: a delegate the killed ADD had
//! started is still running when DEL comes, in the middle of a two-step reservation (host-local
//! creates its file, then writes the owner into it). DEL used to kill it at once, leaving an
//! empty file no DEL releases; now it lets it finish, then undoes what it did.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::{require_root, unique, Harness, Netns};
use cni_runtime::chain::RuntimeConf;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Whether `dir` holds a slot file that is empty (`Some(true)`) or filled (`Some(false)`).
fn slot(dir: &Path) -> Option<bool> {
    let e = std::fs::read_dir(dir).ok()?.flatten().next()?;
    Some(std::fs::metadata(e.path()).ok()?.len() == 0)
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn netns_lock(netns: &Path) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(netns).unwrap();
    Path::new(braid_attach::ifnames::LOCK_DIR).join(format!("netns-{}-{}.lock", m.dev(), m.ino()))
}

struct World {
    h: Harness,
    ctr: Netns,
    list: Value,
    slots_a: PathBuf,
    slots_b: PathBuf,
    log: PathBuf,
    delegator_log: PathBuf,
}

impl World {
    /// ptp (host-local), then fault A (sleeps 400 ms, then reserves), then fault B (reserves in
    /// two steps 1.5 s apart — far longer than DEL needs to come — then holds 400 ms), all with
    /// real links.
    fn new(tag: &str) -> World {
        World::with(tag, |h, w| {
            vec![
                json!({"cniVersion": "1.0.0", "name": "cluster", "type": "ptp", "ipam": h.host_local(70)}),
                w.fault("a", json!({"sleepOn": "ADD", "sleepMs": 400, "reserve": w.slots_a})),
                w.fault("b", json!({"reserve": w.slots_b, "reserveMs": 1500, "holdMs": 400})),
            ]
        })
    }

    /// A delegator over what `delegates` makes of the harness and the world's paths, its
    /// `stateDir` made ahead (0700, as the delegator makes it).
    fn with(tag: &str, delegates: impl FnOnce(&Harness, &World) -> Vec<Value>) -> World {
        use std::os::unix::fs::DirBuilderExt;
        let h = Harness::new(tag);
        let at = |name: &str| h.dir.path().join(name);
        for d in ["slots-a", "slots-b", "started"] {
            std::fs::create_dir_all(at(d)).unwrap();
        }
        std::fs::DirBuilder::new().mode(0o700).create(at("state")).unwrap();
        let mut w = World {
            ctr: h.container(tag),
            list: Value::Null,
            slots_a: at("slots-a"),
            slots_b: at("slots-b"),
            log: at("fault.log"),
            delegator_log: at("delegator.log"),
            h,
        };
        let delegates = delegates(&w.h, &w);
        w.list = json!({
            "cniVersion": "1.0.0",
            "name": unique("cw"),
            "plugins": [{"type": "delegator", "stateDir": w.state(), "logFile": w.delegator_log, "logLevel": "warn",
                         "delegates": delegates}]
        });
        w
    }

    /// A braid-fault delegate `name` with a real link, logging its calls, with `extra` keys.
    fn fault(&self, name: &str, extra: Value) -> Value {
        let mut f = json!({"cniVersion": "1.0.0", "name": name, "type": "braid-fault", "link": true, "log": self.log,
                           "result": {"cniVersion": "1.0.0", "interfaces": [{"name": "x"}]}});
        f.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        f
    }

    /// The delegator's `stateDir`.
    fn state(&self) -> PathBuf {
        self.h.dir.path().join("state")
    }

    /// Where braid-fault's processes say they started (`BRAID_FAULT_STARTED`).
    fn started_dir(&self) -> PathBuf {
        self.h.dir.path().join("started")
    }

    /// Kills the delegator once `at` holds, then DELs; checks that nothing is left.
    fn kill_at(&self, step: &str, at: impl Fn() -> bool + Send) {
        let rt = self.h.runtime(&self.ctr, &unique("ctr"), "eth0");
        self.h.kill_during_add("delegator", &rt, &Harness::first_plugin_stdin(&self.list), at);
        self.h.del(&self.list, &rt).unwrap_or_else(|e| panic!("{step}: DEL after SIGKILL: {e}"));
        assert_eq!(self.ctr.links(), ["lo"], "{step}");
        assert!(self.h.reservations().is_empty(), "{step}: {:?}", self.h.dir.files());
        assert!(self.h.state_files().is_empty(), "{step}: {:?}", self.h.dir.files());
        assert_eq!(
            (entries(&self.slots_a), entries(&self.slots_b)),
            (vec![], vec![]),
            "{step}: a slot was never released"
        );
        assert!(!self.h.dir.path().join("state").join(format!("{}.lock", rt.container_id)).exists(), "{step}");
        assert!(!netns_lock(&self.ctr.path()).exists(), "{step}: the pod namespace's lock file is left");
    }

    fn fault_started(&self, n: usize) -> bool {
        std::fs::read_to_string(&self.log).unwrap_or_default().lines().filter(|l| l.contains("\"ADD\"")).count() >= n
    }
}

#[test]
fn a_delegate_cut_between_its_two_steps_by_a_crash_finishes_before_del_undoes_it() {
    if !require_root("a_delegate_cut_between_its_two_steps_by_a_crash_finishes_before_del_undoes_it") {
        return;
    }
    let w = World::new("cwslot");
    let b = w.slots_b.clone();
    // Fault B has created its slot and not yet written its owner into it.
    w.kill_at("mid-reservation", move || slot(&b) == Some(true));
    let log = std::fs::read_to_string(&w.delegator_log).unwrap();
    assert!(
        log.contains("delegate 2 (network \"b\", type \"braid-fault\", interface net2): its ADD (pid ")
            && log.contains(") was still running: it finished on its own"),
        "{log}"
    );
}

#[test]
fn sigkill_at_each_step_of_an_add_then_del_leaves_nothing() {
    if !require_root("sigkill_at_each_step_of_an_add_then_del_leaves_nothing") {
        return;
    }
    let w = World::new("cwsteps");
    let state = w.h.dir.path().join("state");
    let recorded = move |n: usize| {
        let state = state.clone();
        move || {
            std::fs::read_dir(&state).into_iter().flatten().flatten().any(|e| {
                std::fs::read_to_string(e.path()).is_ok_and(|s| s.matches("\"phase\":\"running\"").count() >= n)
            })
        }
    };
    // 1. Fault A recorded as running, still asleep (ptp attached and recorded before it).
    let rec = recorded(2);
    let w_ref = &w;
    w.kill_at("fault A asleep", move || rec() && w_ref.fault_started(1));
    // 2. Fault B's slot created, its owner not yet written.
    let b = w.slots_b.clone();
    w.kill_at("fault B mid-reservation", move || slot(&b) == Some(true));
    // 3. Fault B's slot written, B still running.
    let b = w.slots_b.clone();
    w.kill_at("fault B holding its slot", move || slot(&b) == Some(false));
    // 4. Fault A's slot written (A has finished its work), B not yet started.
    let a = w.slots_a.clone();
    w.kill_at("fault A done", move || slot(&a) == Some(false));
}

/// The delegator starts its first delegate before it takes its locks and writes its plan; a
/// test holding the container's lock sees that process running, unsent, while the delegator
/// waits. The world: `[fault (logging its calls), ptp]`; a container, and its lock held.
fn ahead(tag: &str) -> (World, RuntimeConf, braid_attach::state::ContainerLock) {
    let w = World::with(tag, |h, w| {
        vec![
            w.fault("first", json!({})),
            json!({"cniVersion": "1.0.0", "name": "cluster", "type": "ptp", "ipam": h.host_local(74)}),
        ]
    });
    let rt = w.h.runtime(&w.ctr, &unique("ctr"), "eth0");
    let held = w.hold(&rt.container_id);
    (w, rt, held)
}

impl World {
    /// The container's lock, held by this test.
    fn hold(&self, id: &str) -> braid_attach::state::ContainerLock {
        let path = self.state().join(format!("{id}.lock"));
        braid_attach::state::lock_file(path, braid_attach::state::Wait::No).unwrap().unwrap()
    }

    /// The pids of the fault plugin's processes that have started.
    fn started(&self) -> Vec<u32> {
        entries(&self.started_dir()).iter().filter_map(|f| f.strip_suffix(".started")?.parse().ok()).collect()
    }

    /// Waits (at most 30 s) until `what` holds.
    fn wait_for(what: &str, cond: impl Fn() -> bool) {
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !cond() {
            assert!(std::time::Instant::now() < give_up, "never: {what}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// The fault plugin's calls: `(command, pid)`.
    fn calls(&self) -> Vec<(String, u32)> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .map(|v| (v["command"].as_str().unwrap().to_string(), v["pid"].as_u64().unwrap() as u32))
            .collect()
    }

    fn nothing_left(&self, id: &str) {
        assert_eq!(self.ctr.links(), ["lo"]);
        assert!(self.h.reservations().is_empty(), "{:?}", self.h.dir.files());
        assert!(self.h.state_files().is_empty(), "{:?}", self.h.dir.files());
        assert!(!self.state().join(format!("{id}.lock")).exists());
        assert!(!netns_lock(&self.ctr.path()).exists(), "the pod namespace's lock file is left");
    }
}

/// Whether process `pid` is gone (or a zombie nobody waits for).
fn gone(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty() || stat.contains(") Z ")
}

#[test]
fn the_first_delegate_starts_while_the_delegator_waits_and_is_configured_after_its_plan() {
    if !require_root("the_first_delegate_starts_while_the_delegator_waits_and_is_configured_after_its_plan") {
        return;
    }
    let (a, rt, held) = ahead("cwahead");
    std::thread::scope(|s| {
        // Moved in: released as this closure unwinds should an assertion fail, before the
        // scope waits for the ADD (else it would wait for the lock until its deadline).
        let held = held;
        let add = s.spawn(|| a.h.add_with_env(&a.list, &rt, &[("BRAID_FAULT_STARTED", &a.started_dir())]));
        World::wait_for("the first delegate's process started", || !a.started().is_empty());
        // The delegator waits for the container's lock: no plan yet, nothing sent.
        assert!(a.h.state_files().is_empty(), "{:?}", a.h.dir.files());
        assert!(a.calls().is_empty(), "{:?}", a.calls());
        drop(held);
        add.join().unwrap().unwrap_or_else(|e| panic!("ADD: {e}"));
    });
    let started = a.started();
    assert_eq!(started.len(), 1, "one fault process: {started:?}");
    assert_eq!(a.calls(), [("ADD".to_string(), started[0])], "the process started ahead was the one configured");
    assert_eq!(a.ctr.addresses("net1").len(), 1);
    a.h.del(&a.list, &rt).unwrap_or_else(|e| panic!("DEL: {e}"));
    a.nothing_left(&rt.container_id);
}

#[test]
fn a_delegator_killed_before_its_plan_leaves_its_first_delegate_unsent_and_exiting() {
    if !require_root("a_delegator_killed_before_its_plan_leaves_its_first_delegate_unsent_and_exiting") {
        return;
    }
    let (a, rt, held) = ahead("cwaheadkill");
    let started_dir = a.started_dir();
    let env = [("BRAID_FAULT_STARTED", started_dir.as_path())];
    a.h.kill_during_add_with_env("delegator", &rt, &Harness::first_plugin_stdin(&a.list), &env, || {
        !a.started().is_empty()
    });
    let pid = a.started()[0];
    // Its stdin's writer is gone: it reads an empty configuration and exits without acting.
    World::wait_for("the unsent first delegate exited", || gone(pid));
    assert!(a.calls().is_empty(), "{:?}", a.calls());
    assert!(a.h.state_files().is_empty(), "{:?}", a.h.dir.files());
    drop(held);
    a.h.del(&a.list, &rt).unwrap_or_else(|e| panic!("DEL after SIGKILL: {e}"));
    a.nothing_left(&rt.container_id);
}

/// `[first, second]`, two braid-fault delegates with real links and `extra` keys each (a
/// `hangWhile` names a file of the test's directory, which [`World::hang_file`] makes); a
/// container.
fn one_after_another(tag: &str, first: Value, second: Value) -> (World, RuntimeConf) {
    let w = World::with(tag, |h, w| {
        [("first", first), ("second", second)]
            .into_iter()
            .map(|(name, mut extra)| {
                if let Some(file) = extra.get("hangWhile").and_then(Value::as_str) {
                    extra["hangWhile"] = json!(h.dir.path().join(file));
                }
                w.fault(name, extra)
            })
            .collect()
    });
    let rt = w.h.runtime(&w.ctr, &unique("ctr"), "eth0");
    (w, rt)
}

impl World {
    /// A file whose existence holds a braid-fault delegate (`hangWhile`), made now.
    fn hang_file(&self, name: &str) -> PathBuf {
        let p = self.h.dir.path().join(name);
        std::fs::write(&p, b"").unwrap();
        p
    }

    /// Runs `command` on a thread until `started` processes exist and `calls` calls were
    /// logged — one delegate at work, held by `hang`, and the next one's process started —
    /// checks that exactly one process waits unsent, then removes `hang`. Returns the pid of
    /// the last call logged by then, the pid that waited, and what `command` returned.
    fn one_waiting<T: Send>(
        &self,
        started: usize,
        calls: usize,
        hang: &Path,
        command: impl FnOnce() -> T + Send,
    ) -> (u32, u32, T) {
        std::thread::scope(|s| {
            let running = s.spawn(command);
            World::wait_for("the next delegate's process started while one works", || {
                self.started().len() == started && self.calls().len() == calls
            });
            let working = self.calls()[calls - 1].1;
            let unsent = self.unsent();
            assert_eq!(unsent.len(), 1, "one process waits for its turn: {:?}", self.started());
            std::fs::remove_file(hang).unwrap();
            (working, unsent[0], running.join().unwrap())
        })
    }

    /// The started processes that were never sent a configuration (no call logged).
    fn unsent(&self) -> Vec<u32> {
        let calls = self.calls();
        self.started().into_iter().filter(|p| !calls.iter().any(|(_, q)| q == p)).collect()
    }
}

/// One after another, the next delegate's process is started while the one before it works —
/// its start-up overlaps that work — and is sent its configuration only in its turn, after the
/// one before it returned: shown by order, not by time. ADD runs first then second; DEL runs
/// second then first, the first's DEL process started while the second's works.
#[test]
fn the_next_delegate_starts_while_the_one_before_works_and_is_configured_in_its_turn() {
    if !require_root("the_next_delegate_starts_while_the_one_before_works_and_is_configured_in_its_turn") {
        return;
    }
    let (w, rt) = one_after_another(
        "cwnext",
        json!({"sleepOn": "ADD", "hangWhile": "add-hang"}),
        json!({"sleepOn": "DEL", "hangWhile": "del-hang"}),
    );
    let (add_hang, del_hang, list) = (w.hang_file("add-hang"), w.hang_file("del-hang"), &w.list);
    let started_dir = w.started_dir();
    let env = [("BRAID_FAULT_STARTED", started_dir.as_path())];
    // The first delegate works (its ADD logged, hanging); the second's process exists, unsent.
    let (first, second, added) = w.one_waiting(2, 1, &add_hang, || w.h.add_with_env(list, &rt, &env));
    added.unwrap_or_else(|e| panic!("ADD: {e}"));
    assert_eq!(
        w.calls(),
        [("ADD".to_string(), first), ("ADD".to_string(), second)],
        "in plan order, each by the process started for it"
    );
    assert_eq!(w.started().len(), 2, "no process started twice");
    let links = w.ctr.links();
    assert!(links.iter().any(|l| l == "eth0") && links.iter().any(|l| l == "net1"), "{links:?}");
    // DEL in reverse: the second delegate's DEL hangs; the first's process exists, unsent.
    let (second_del, first_del, deleted) = w.one_waiting(4, 3, &del_hang, || w.h.del_with_env(list, &rt, &env));
    deleted.unwrap_or_else(|e| panic!("DEL: {e}"));
    assert_eq!(&w.calls()[2..], [("DEL".to_string(), second_del), ("DEL".to_string(), first_del)]);
    w.nothing_left(&rt.container_id);
}

/// A DEL that fails while the next delegate's DEL process waits for its turn: that one is still
/// sent its DEL (DEL attempts every delegate), and the failure is reported with the state kept.
#[test]
fn a_failing_del_still_sends_the_next_delegate_its_del_started_ahead() {
    if !require_root("a_failing_del_still_sends_the_next_delegate_its_del_started_ahead") {
        return;
    }
    let fail = json!({"command": "DEL", "code": 11, "msg": "DEL refused on purpose"});
    let (w, rt) = one_after_another("cwnextdelfail", json!({}), json!({"fail": fail}));
    let started_dir = w.started_dir();
    let env = [("BRAID_FAULT_STARTED", started_dir.as_path())];
    w.h.add_with_env(&w.list, &rt, &env).unwrap_or_else(|e| panic!("ADD: {e}"));
    let err = w.h.del_with_env(&w.list, &rt, &env).expect_err("the second delegate's DEL fails");
    assert!(err.to_string().contains("DEL refused on purpose"), "{err}");
    let calls = w.calls();
    let commands: Vec<&str> = calls.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(commands, ["ADD", "ADD", "DEL", "DEL"], "both DELs sent, in reverse");
    assert!(w.unsent().is_empty(), "every started process was sent its call: {:?} {calls:?}", w.started());
    assert!(!w.h.state_files().is_empty(), "the state is kept for the runtime's next DEL");
}

/// `[first, second]` as the installer and the node agent give delegates: by name, each a
/// conflist file in `confDir` of two plugins — a braid-fault "head" with a real link and `extra`
/// keys (a `hangWhile` names a file of the test's directory), then a braid-fault "tail" that
/// prints a canned result — both logging their calls; a container.
fn conflists_one_after_another(tag: &str, first: Value, second: Value) -> (World, RuntimeConf) {
    let mut w = World::with(tag, |_, _| vec![json!("first"), json!("second")]);
    let dir = w.h.dir.path().join("net.d");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, mut extra) in [("first", first), ("second", second)] {
        if let Some(file) = extra.get("hangWhile").and_then(Value::as_str) {
            extra["hangWhile"] = json!(w.h.dir.path().join(file));
        }
        let tail = json!({"type": "braid-fault", "log": w.log,
                          "result": {"cniVersion": "1.0.0", "interfaces": [{"name": "x"}]}});
        let list = json!({"cniVersion": "1.0.0", "name": name, "plugins": [w.fault(name, extra), tail]});
        std::fs::write(dir.join(format!("{name}.conflist")), list.to_string()).unwrap();
    }
    w.list["plugins"][0]["confDir"] = json!(dir);
    let rt = w.h.runtime(&w.ctr, &unique("ctr"), "eth0");
    (w, rt)
}

impl World {
    /// The commands of the fault plugin's calls, in order.
    fn commands(&self) -> Vec<String> {
        self.calls().into_iter().map(|(c, _)| c).collect()
    }
}

/// The first plugin of a conflist delegate named by reference (the installer's and every NAD's
/// shape) is started ahead as a single plugin is: the first delegate's before the delegator's
/// locks and plan — seen running, unsent, while a test holds the container's lock — and each
/// next delegate's while the one before it works, sent its configuration only in its turn; DEL
/// runs each list in reverse, and the next list's *last* plugin is the one started ahead.
#[test]
fn a_conflist_delegates_first_plugin_starts_ahead_and_is_configured_in_its_turn() {
    if !require_root("a_conflist_delegates_first_plugin_starts_ahead_and_is_configured_in_its_turn") {
        return;
    }
    let (w, rt) = conflists_one_after_another(
        "cwlist",
        json!({"sleepOn": "ADD", "hangWhile": "add-hang"}),
        json!({"sleepOn": "DEL", "hangWhile": "del-hang"}),
    );
    let (add_hang, del_hang, list) = (w.hang_file("add-hang"), w.hang_file("del-hang"), &w.list);
    let started_dir = w.started_dir();
    let env = [("BRAID_FAULT_STARTED", started_dir.as_path())];
    let held = w.hold(&rt.container_id);
    let (first_head, second_head, added) = std::thread::scope(|s| {
        let held = held;
        let add = s.spawn(|| {
            // The first list's head (hanging) at work; the second list's head exists, unsent.
            w.one_waiting(2, 1, &add_hang, || w.h.add_with_env(list, &rt, &env))
        });
        World::wait_for("the first list's first plugin started", || !w.started().is_empty());
        // The delegator waits for the container's lock: no plan yet, nothing sent.
        assert!(w.h.state_files().is_empty(), "{:?}", w.h.dir.files());
        assert!(w.calls().is_empty(), "{:?}", w.calls());
        let first = w.started();
        drop(held);
        let (working, unsent, added) = add.join().unwrap();
        assert_eq!(first, [working], "the process started before the lock was the one configured first");
        (working, unsent, added)
    });
    added.unwrap_or_else(|e| panic!("ADD: {e}"));
    let calls = w.calls();
    assert_eq!(w.commands(), ["ADD"; 4], "{calls:?}");
    assert_eq!((calls[0].1, calls[2].1), (first_head, second_head), "each list's head by the process started for it");
    assert_eq!(w.started().len(), 4, "no process started twice: {calls:?}");
    let links = w.ctr.links();
    assert!(links.iter().any(|l| l == "eth0") && links.iter().any(|l| l == "net1"), "{links:?}");
    // DEL in reverse, each list last plugin first: the second list's head hangs (its tail's DEL
    // done); the first list's tail — its DEL's first process — exists, unsent.
    let (second_del, first_tail_del, deleted) = w.one_waiting(7, 6, &del_hang, || w.h.del_with_env(list, &rt, &env));
    deleted.unwrap_or_else(|e| panic!("DEL: {e}"));
    let calls = w.calls();
    assert_eq!(w.commands(), [["ADD"; 4], ["DEL"; 4]].concat(), "{calls:?}");
    assert_eq!((calls[5].1, calls[6].1), (second_del, first_tail_del), "{calls:?}");
    assert!(w.unsent().is_empty(), "every started process was sent its call: {:?} {calls:?}", w.started());
    w.nothing_left(&rt.container_id);
}

/// How the two delegates of a started-ahead test are given: inline single plugins
/// ([`one_after_another`]), or conflists by name as the installer gives them
/// ([`conflists_one_after_another`]).
#[derive(Clone, Copy)]
enum Shape {
    Inline,
    Conflists,
}

impl Shape {
    fn world(self, tag: &str, first: Value, second: Value) -> (World, RuntimeConf) {
        match self {
            Shape::Inline => one_after_another(tag, first, second),
            Shape::Conflists => conflists_one_after_another(tag, first, second),
        }
    }

    /// The calls of a rolled-back first delegate: its ADD, then its DEL — one per plugin of a
    /// list, in reverse.
    fn rolled_back(self) -> &'static [&'static str] {
        match self {
            Shape::Inline => &["ADD", "DEL"],
            Shape::Conflists => &["ADD", "DEL", "DEL"],
        }
    }
}

/// When the first delegate fails, the next one's first process, started ahead, is killed
/// unsent: it never acts, and the rollback DELs only the failed delegate.
fn failing_first_leaves_the_next_unsent_and_gone(shape: Shape, tag: &str) {
    let fail = json!({"command": "ADD", "code": 7, "msg": "refused on purpose"});
    let (w, rt) = shape.world(tag, json!({"sleepOn": "ADD", "hangWhile": "hang", "fail": fail}), json!({}));
    let (hang, list) = (w.hang_file("hang"), &w.list);
    let started_dir = w.started_dir();
    let env = [("BRAID_FAULT_STARTED", started_dir.as_path())];
    let (_, waited, added) = w.one_waiting(2, 1, &hang, || w.h.add_with_env(list, &rt, &env));
    let err = added.expect_err("the first delegate fails");
    assert!(err.to_string().contains("refused on purpose"), "{err}");
    assert_eq!(w.commands(), shape.rolled_back(), "the failed delegate rolled back, the second never configured");
    assert_eq!(w.unsent(), [waited], "{:?} {:?}", w.started(), w.calls());
    World::wait_for("the unsent process gone", || gone(waited));
    w.nothing_left(&rt.container_id);
}

#[test]
fn a_failing_delegate_leaves_the_next_ones_process_unsent_and_gone() {
    if require_root("a_failing_delegate_leaves_the_next_ones_process_unsent_and_gone") {
        failing_first_leaves_the_next_unsent_and_gone(Shape::Inline, "cwnextfail");
    }
}

#[test]
fn a_failing_conflist_leaves_the_next_lists_first_plugin_unsent_and_gone() {
    if require_root("a_failing_conflist_leaves_the_next_lists_first_plugin_unsent_and_gone") {
        failing_first_leaves_the_next_unsent_and_gone(Shape::Conflists, "cwlistfail");
    }
}

/// The delegator SIGKILLed while the next delegate's first process waits for its turn: that
/// process reads an empty stdin and exits without acting; DEL then leaves nothing.
fn killed_while_the_next_waits_leaves_it_unsent_and_exiting(shape: Shape, tag: &str) {
    let (w, rt) = shape.world(tag, json!({"sleepOn": "ADD", "hangWhile": "hang"}), json!({}));
    let (hang, list) = (w.hang_file("hang"), &w.list);
    let started_dir = w.started_dir();
    let env = [("BRAID_FAULT_STARTED", started_dir.as_path())];
    let w_ref = &w;
    w.h.kill_during_add_with_env("delegator", &rt, &Harness::first_plugin_stdin(list), &env, move || {
        w_ref.started().len() == 2 && w_ref.calls().len() == 1
    });
    let unsent = w.unsent();
    assert_eq!(unsent.len(), 1, "{:?}", w.started());
    World::wait_for("the unsent process of the second delegate exited", || gone(unsent[0]));
    assert_eq!(w.commands(), ["ADD"], "only the first delegate was configured");
    // The first delegate is still at work for the killed ADD: let it finish; DEL undoes it.
    std::fs::remove_file(&hang).unwrap();
    w.h.del(list, &rt).unwrap_or_else(|e| panic!("DEL after SIGKILL: {e}"));
    w.nothing_left(&rt.container_id);
}

#[test]
fn a_delegator_killed_while_the_next_delegate_waits_leaves_it_unsent_and_exiting() {
    if require_root("a_delegator_killed_while_the_next_delegate_waits_leaves_it_unsent_and_exiting") {
        killed_while_the_next_waits_leaves_it_unsent_and_exiting(Shape::Inline, "cwnextkill");
    }
}

#[test]
fn a_delegator_killed_while_the_next_conflist_waits_leaves_it_unsent_and_exiting() {
    if require_root("a_delegator_killed_while_the_next_conflist_waits_leaves_it_unsent_and_exiting") {
        killed_while_the_next_waits_leaves_it_unsent_and_exiting(Shape::Conflists, "cwlistkill");
    }
}

/// DEL of a pod with a network its annotation selects: the primary's DEL process, started at
/// DEL's start, waits while the selected network's DEL runs and is used in its turn — not
/// killed unsent when the selected one's process starts and then started again. Every process
/// started is sent its call.
#[test]
fn del_of_a_pod_with_a_selected_network_uses_the_primary_process_it_started_ahead() {
    if !require_root("del_of_a_pod_with_a_selected_network_uses_the_primary_process_it_started_ahead") {
        return;
    }
    let mut w = World::with("cwdelsel", |_, w| vec![w.fault("first", json!({}))]);
    let networks = w.h.dir.path().join("networks");
    std::fs::create_dir_all(networks.join("ns")).unwrap();
    let second = json!({"cniVersion": "1.0.0", "name": "second", "plugins": [w.fault("second", json!({}))]});
    std::fs::write(networks.join("ns/second.conflist"), second.to_string()).unwrap();
    w.list["plugins"][0]["kubernetes"] = json!({"networksDir": networks, "statusDir": w.h.dir.path().join("status")});
    w.list["plugins"][0]["capabilities"] = json!({"io.kubernetes.cri.pod-annotations": true});
    let mut rt = w.h.runtime(&w.ctr, &unique("ctr"), "eth0");
    rt.args =
        format!("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID={}", rt.container_id);
    rt.capability_args = json!({"io.kubernetes.cri.pod-annotations": {"k8s.v1.cni.cncf.io/networks": "second"}})
        .as_object()
        .unwrap()
        .clone();
    let started_dir = w.started_dir();
    let env = [("BRAID_FAULT_STARTED", started_dir.as_path())];
    w.h.add_with_env(&w.list, &rt, &env).unwrap_or_else(|e| panic!("ADD: {e}"));
    let links = w.ctr.links();
    assert!(links.iter().any(|l| l == "eth0") && links.iter().any(|l| l == "net1"), "{links:?}");
    w.h.del_with_env(&w.list, &rt, &env).unwrap_or_else(|e| panic!("DEL: {e}"));
    let calls = w.calls();
    let commands: Vec<&str> = calls.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(commands, ["ADD", "ADD", "DEL", "DEL"], "{calls:?}");
    assert!(w.unsent().is_empty(), "a process was started and never sent its call: {:?} {calls:?}", w.started());
    assert_eq!(w.started().len(), 4, "one process per call");
    w.nothing_left(&rt.container_id);
}
