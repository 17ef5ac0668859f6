//! STATUS tells the truth: the delegator and the merger answer 50 ("plugin not available") when
//! a delegate they depend on cannot run — a network named by reference that is not in
//! `confDir`, a plugin or IPAM binary missing from `CNI_PATH`, a 1.1.0 delegate whose own
//! STATUS fails (its 50 or 51 passed on) — and succeed otherwise, touching nothing. And the
//! installed configuration: containerd 2.x sends braid STATUS (braid's conflist offers 1.1.0 in
//! `cniVersions`); without the primary network STATUS is 50 and ADD fails with the network
//! named — never a pod started without it — and both recover as soon as it is back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::{build_dir, require_root, unique, Harness};
use cni_runtime::chain::RuntimeConf;
use cni_runtime::invoke::InvokeError;
use cni_types::version::Command;
use cni_types::CniError;
use serde_json::{json, Value};
use std::path::Path;

/// STATUS of `plugin` with `conf` (a 1.1.0 configuration unless it says otherwise), as libcni
/// sends it: no container, no namespace, no interface.
fn status(h: &Harness, plugin: &str, conf: &Value) -> Result<(), CniError> {
    let mut c = json!({"cniVersion": "1.1.0", "name": "st", "type": plugin});
    c.as_object_mut().unwrap().extend(conf.as_object().unwrap().clone());
    match h.exec_plugin(plugin, Command::Status, &RuntimeConf::default(), &serde_json::to_vec(&c).unwrap()) {
        Ok(_) => Ok(()),
        Err(InvokeError::Plugin(e)) => Err(e),
        Err(other) => panic!("STATUS of {plugin} did not answer with a CNI error: {other}"),
    }
}

fn fails(what: &str, out: Result<(), CniError>, code: u32, words: &str) {
    match out {
        Err(e) => {
            assert_eq!(e.code, code, "{what}: {e:?}");
            assert!(e.msg.contains(words), "{what}: {words:?} not in {:?}", e.msg);
        }
        Ok(()) => panic!("{what}: STATUS succeeded"),
    }
}

fn calls(log: &Path, command: &str) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter(|l| l.contains(&format!("\"{command}\""))).count()
}

/// Removes a file when dropped: the end of a braid-fault hang (`hangWhile`), also when the
/// test fails.
struct Unhang(std::path::PathBuf);

impl Drop for Unhang {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The fault plugin's calls: `(network name, pid)`.
fn fault_calls(log: &Path) -> Vec<(String, u32)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| {
            let conf: Value = serde_json::from_str(v["stdin"].as_str().unwrap()).unwrap();
            (conf["name"].as_str().unwrap().to_string(), v["pid"].as_u64().unwrap() as u32)
        })
        .collect()
}

#[test]
fn delegator_and_merger_status_tell_the_truth() {
    if !require_root("delegator_and_merger_status_tell_the_truth") {
        return;
    }
    let h = Harness::new("st");
    let conf_dir = h.dir.path().join("net.d");
    std::fs::create_dir_all(&conf_dir).unwrap();
    let state = h.dir.path().join("state");
    let bridge = json!({"cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "ipam": h.host_local(170)});
    let ptp = json!({"cniVersion": "0.4.0", "name": "side", "type": "ptp", "ipam": h.host_local(171)});
    let delegator = |delegates: Value| json!({"stateDir": state, "confDir": conf_dir, "delegates": delegates});

    // Every delegate found (1.0.0 and 0.4.0: nothing to forward): ready, and nothing created.
    status(&h, "delegator", &delegator(json!([bridge, ptp]))).unwrap();
    assert!(!state.exists(), "STATUS created the stateDir");

    // A network named by reference: ready while its file is in confDir, 50 once it is gone.
    let file = conf_dir.join("10-cluster.conflist");
    std::fs::write(&file, json!({"cniVersion": "1.0.0", "name": "cluster", "plugins": [bridge]}).to_string()).unwrap();
    let by_name = delegator(json!([{"network": "cluster"}, ptp]));
    status(&h, "delegator", &by_name).unwrap();
    std::fs::remove_file(&file).unwrap();
    fails(
        "named network gone",
        status(&h, "delegator", &by_name),
        50,
        &format!("delegates: no network named \"cluster\" in {}", conf_dir.display()),
    );

    // A binary missing: the plugin's, its IPAM's, one in a conflist — named, with CNI_PATH.
    let mut missing = bridge.clone();
    missing["type"] = json!("no-such-plugin");
    fails(
        "plugin binary missing",
        status(&h, "delegator", &delegator(json!([ptp, missing]))),
        50,
        "delegate 1 (network \"cluster\"): plugin \"no-such-plugin\": failed to find plugin \"no-such-plugin\" in path [",
    );
    let mut no_ipam = bridge.clone();
    no_ipam["ipam"]["type"] = json!("no-such-ipam");
    fails(
        "IPAM binary missing",
        status(&h, "delegator", &delegator(json!([no_ipam]))),
        50,
        "delegate 0 (network \"cluster\"): IPAM plugin \"no-such-ipam\": failed to find plugin",
    );
    let list = json!({"cniVersion": "1.0.0", "name": "side", "plugins": [{"type": "ptp", "ipam": h.host_local(172)}, {"type": "no-such-meta"}]});
    fails(
        "conflist plugin missing",
        status(&h, "delegator", &delegator(json!([bridge, list]))),
        50,
        "delegate 1 (network \"side\"): conflist \"side\": plugin \"no-such-meta\"",
    );

    // Delegates of 1.1.0 answer STATUS themselves: their 50 and 51 pass on, other codes are 50.
    let log = h.dir.path().join("fault.log");
    let fault = |version: &str, fail: Option<u32>| {
        let mut f = json!({"cniVersion": version, "name": "probe", "type": "braid-fault", "log": log});
        if let Some(code) = fail {
            f["fail"] = json!({"command": "STATUS", "code": code, "msg": "uplink down"});
        }
        f
    };
    status(&h, "delegator", &delegator(json!([bridge, fault("1.1.0", None)]))).unwrap();
    assert_eq!(calls(&log, "STATUS"), 1, "the 1.1.0 delegate was not asked");
    fails(
        "delegate's 51",
        status(&h, "delegator", &delegator(json!([bridge, fault("1.1.0", Some(51))]))),
        51,
        "delegate 1 (network \"probe\"): uplink down",
    );
    fails("delegate's 50", status(&h, "delegator", &delegator(json!([fault("1.1.0", Some(50))]))), 50, "uplink down");
    fails(
        "delegate's other code",
        status(&h, "delegator", &delegator(json!([fault("1.1.0", Some(11))]))),
        50,
        "uplink down (its STATUS failed with code 11)",
    );
    let in_list = json!({"cniVersion": "1.1.0", "name": "probes", "plugins": [fault("1.1.0", Some(51))]});
    fails("51 in a 1.1.0 conflist", status(&h, "delegator", &delegator(json!([in_list]))), 51, "uplink down");
    // Below 1.1.0 there is no STATUS to send (libcni's rule): not asked, whatever it would say.
    let before = calls(&log, "STATUS");
    status(&h, "delegator", &delegator(json!([fault("1.0.0", Some(51))]))).unwrap();
    assert_eq!(calls(&log, "STATUS"), before, "a 1.0.0 delegate got STATUS");

    // What ADD would refuse before running anything: the stateDir, the keys.
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join(".braid-owner"), "merger").unwrap();
    fails(
        "stateDir of the merger",
        status(&h, "delegator", &delegator(json!([bridge]))),
        50,
        "holds the merger's state",
    );
    std::fs::remove_dir_all(&state).unwrap();
    std::os::unix::fs::symlink(h.dir.path(), &state).unwrap();
    fails("stateDir a symlink", status(&h, "delegator", &delegator(json!([bridge]))), 50, "is a symlink");
    std::fs::remove_file(&state).unwrap();
    let mut bad = delegator(json!([bridge]));
    bad["timeout"] = json!("soon");
    fails("timeout of the wrong kind", status(&h, "delegator", &bad), 50, "timeout");
    let mut bad = delegator(json!([bridge]));
    bad["result"] = json!("everything");
    fails("result of the wrong kind", status(&h, "delegator", &bad), 50, "result must be");

    // The merger: no delegates, always ready; its delegates as the delegator's.
    let mstate = h.dir.path().join("mstate");
    status(&h, "merger", &json!({"stateDir": mstate})).unwrap();
    status(&h, "merger", &json!({"stateDir": mstate, "delegates": [ptp]})).unwrap();
    fails(
        "merger delegate missing",
        status(&h, "merger", &json!({"stateDir": mstate, "delegates": [missing]})),
        50,
        "plugin \"no-such-plugin\"",
    );
    fails(
        "merger delegate's 51",
        status(&h, "merger", &json!({"stateDir": mstate, "delegates": [fault("1.1.0", Some(51))]})),
        51,
        "uplink down",
    );
    assert!(!mstate.exists(), "STATUS created the merger's stateDir");
    assert!(h.state_files().is_empty());

    // Through the runtime (libcni's GetStatusNetworkList): the first failure, its code intact.
    let chain = json!({"cniVersion": "1.1.0", "name": unique("st"), "plugins": [
        {"type": "delegator", "stateDir": state, "confDir": conf_dir, "delegates": ["cluster"]}
    ]});
    let e = h.status(&chain).unwrap_err();
    assert_eq!(e.cause().unwrap().code, 50, "{e}");
}

/// The node as `braid-install` leaves it, run as the DaemonSet runs it (here on the node
/// itself: `--host-root /`, every directory the test's own).
#[test]
fn installed_braid_without_its_primary_is_not_ready_and_starts_no_pod() {
    if !require_root("installed_braid_without_its_primary_is_not_ready_and_starts_no_pod") {
        return;
    }
    let h = Harness::new("stinst");
    let d = h.dir.path();
    let conf_dir = d.join("net.d");
    std::fs::create_dir_all(&conf_dir).unwrap();
    let primary = unique("cluster");
    let primary_file = conf_dir.join("10-cluster.conflist");
    let primary_conf = json!({"cniVersion": "1.0.0", "name": primary, "plugins": [
        {"type": "bridge", "bridge": unique("br"), "isDefaultGateway": true, "ipam": h.host_local(175)},
        {"type": "tuning", "mtu": 1400}
    ]})
    .to_string();
    std::fs::write(&primary_file, &primary_conf).unwrap();
    let s = |p: &Path| p.display().to_string();
    let out = std::process::Command::new(build_dir().join("braid-install"))
        .args(["--host-root", "/", "--skip-binaries", "--once", "--wait", "10", "--name", &unique("braid")])
        .args(["--cni-conf-dir", &s(&conf_dir), "--networks-dir", &s(&d.join("braid.d"))])
        .args(["--state-dir", &s(&d.join("state")), "--status-dir", &s(&d.join("status"))])
        .output()
        .unwrap();
    assert!(out.status.success(), "braid-install: {}", String::from_utf8_lossy(&out.stderr));
    let braid: Value = serde_json::from_slice(&std::fs::read(conf_dir.join("00-braid.conflist")).unwrap()).unwrap();
    // Older libcni reads cniVersion (the primary's); libcni ≥ 1.2 (containerd 2.x) selects 1.1.0
    // from cniVersions — STATUS exists only there.
    assert_eq!((&braid["cniVersion"], &braid["cniVersions"]), (&json!("1.0.0"), &json!(["1.0.0", "1.1.0"])));
    let selected = cni_types::NetConfList::parse(&serde_json::to_vec(&braid).unwrap()).unwrap();
    assert_eq!(selected.cni_version, "1.1.0");

    let ctr = h.container("stinst");
    let pod = |n: u32| h.runtime(&ctr, &format!("{}-{n}", unique("pod")), "eth0");
    let start_and_stop = |rt: &RuntimeConf| {
        let r = h.add(&braid, rt).unwrap_or_else(|e| panic!("ADD with the primary present: {e}")).to_latest();
        assert_eq!(r.ips.len(), 1);
        assert_eq!(ctr.link("eth0").unwrap()["mtu"], 1400, "the primary's own chain ran");
        h.del(&braid, rt).unwrap_or_else(|e| panic!("DEL: {e}"));
        assert_eq!(ctr.links(), ["lo"]);
    };
    h.status(&braid).unwrap_or_else(|e| panic!("STATUS with the primary present: {e}"));
    start_and_stop(&pod(1));

    // The primary disappears (its DaemonSet removed, a botched upgrade): braid's file stays
    // (braid-install's own tests: it is never removed but by --uninstall), so the runtime keeps
    // calling braid — no fallback to another file. STATUS says not ready, naming the network
    // and where it was looked for; a pod's ADD fails the same way and leaves nothing.
    std::fs::remove_file(&primary_file).unwrap();
    let e = h.status(&braid).unwrap_err();
    let cause = e.cause().unwrap();
    assert_eq!(cause.code, 50, "{cause:?}");
    let missing = format!("no network named \"{primary}\" in {}", conf_dir.display());
    assert!(cause.msg.contains(&missing), "{cause:?}");
    let rt = pod(2);
    let e = h.add(&braid, &rt).unwrap_err();
    assert!(e.to_string().contains(&missing), "{e}");
    assert_eq!(ctr.links(), ["lo"]);
    assert!(h.state_files().is_empty() && h.reservations().is_empty(), "{:?}", h.dir.files());
    h.del(&braid, &rt).unwrap_or_else(|e| panic!("DEL after the failed ADD: {e}"));

    // Back: ready again at once, nothing regenerated (braid finds the primary by name).
    std::fs::write(&primary_file, &primary_conf).unwrap();
    h.status(&braid).unwrap_or_else(|e| panic!("STATUS with the primary back: {e}"));
    start_and_stop(&pod(3));
    assert!(h.state_files().is_empty() && h.reservations().is_empty(), "{:?}", h.dir.files());
}

#[test]
fn status_answers_within_its_deadline_while_a_delegate_hangs() {
    if !require_root("status_answers_within_its_deadline_while_a_delegate_hangs") {
        return;
    }
    // Two 1.1.0 delegates: the first never answers its STATUS, the second does at once. Both
    // are asked at once (they meet), the first is killed at the command's deadline and named as
    // not answering, and STATUS answers — though its per-delegate timeout is ten minutes.
    let h = Harness::new("sthang");
    let (flag, log) = (h.dir.path().join("hang"), h.dir.path().join("fault.log"));
    std::fs::write(&flag, b"").unwrap();
    let _unhang = Unhang(flag.clone());
    let fault =
        |name: &str| json!({"cniVersion": "1.1.0", "name": name, "type": "braid-fault", "log": log, "meetMs": 8000});
    for plugin in ["delegator", "merger"] {
        let meeting = h.meeting(plugin, 2);
        let mut stuck = meeting.join(fault("stuck"), "STATUS");
        stuck["sleepOn"] = json!("STATUS");
        stuck["hangWhile"] = json!(flag);
        let quick = meeting.join(fault("quick"), "STATUS");
        let conf =
            json!({"stateDir": h.dir.path().join("state"), "timeout": 600, "deadline": 5, "delegates": [stuck, quick]});
        let before = fault_calls(&log).len();
        fails(
            &format!("{plugin} with a hanging delegate"),
            status(&h, plugin, &conf),
            50,
            "delegate 0 (network \"stuck\"): no answer to STATUS within the command's deadline (5s)",
        );
        let calls = &fault_calls(&log)[before..];
        let mut names: Vec<&str> = calls.iter().map(|c| c.0.as_str()).collect();
        names.sort();
        assert_eq!(names, ["quick", "stuck"], "{plugin}: {calls:?}");
        let stuck_pid = calls.iter().find(|c| c.0 == "stuck").unwrap().1;
        let stat = std::fs::read_to_string(format!("/proc/{stuck_pid}/stat")).unwrap_or_default();
        assert!(stat.is_empty() || stat.contains(") Z "), "{plugin}: the hanging STATUS (pid {stuck_pid}) still runs");
        assert_eq!(meeting.outcome(), (2, 0), "{plugin}: the delegates' STATUS did not run at once");
    }
}

#[test]
fn status_never_blocks_on_what_stands_at_the_owner_file() {
    if !require_root("status_never_blocks_on_what_stands_at_the_owner_file") {
        return;
    }
    // Whatever stands at <stateDir>/.braid-owner, STATUS answers at once — 50 with the reason
    // ADD would fail with — and ADD refuses it in the same words.
    let h = Harness::new("stowner");
    let ctr = h.container("stowner");
    let ptp = json!({"cniVersion": "1.0.0", "name": "side", "type": "ptp", "ipam": h.host_local(173)});
    let elsewhere = h.dir.path().join("merger-owner");
    std::fs::write(&elsewhere, "merger").unwrap();
    let state = h.dir.path().join("state");
    let owner = state.join(".braid-owner");
    let conf = json!({"stateDir": state, "deadline": 5, "delegates": [ptp]});
    let cases: [(&str, &dyn Fn(), &str); 4] = [
        (
            "a FIFO",
            &|| assert!(std::process::Command::new("mkfifo").arg(&owner).status().unwrap().success()),
            "not a regular file",
        ),
        ("a symlink", &|| std::os::unix::fs::symlink(&elsewhere, &owner).unwrap(), "Too many levels of symbolic links"),
        ("a directory", &|| std::fs::create_dir(&owner).unwrap(), "not a regular file"),
        ("a huge file", &|| std::fs::File::create(&owner).unwrap().set_len(1 << 20).unwrap(), "larger than 64 bytes"),
    ];
    for (what, plant, why) in cases {
        std::fs::create_dir_all(&state).unwrap();
        plant();
        let words = format!("{}: {why}", owner.display());
        for plugin in ["delegator", "merger"] {
            fails(&format!("{plugin}: {what} at .braid-owner"), status(&h, plugin, &conf), 50, &words);
        }
        let mut add = json!({"cniVersion": "1.0.0", "name": unique("stowner"), "plugins": [{"type": "delegator"}]});
        add["plugins"][0].as_object_mut().unwrap().extend(conf.as_object().unwrap().clone());
        let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
        let e = h.add(&add, &rt).unwrap_err();
        assert!(e.to_string().contains(&words), "ADD with {what} at .braid-owner: {e}");
        assert_eq!(ctr.links(), ["lo"]);
        std::fs::remove_dir_all(&state).unwrap();
    }
}
