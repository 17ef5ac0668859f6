//! The delegator's `"parallel": true` in real namespaces: the ADD takes about its slowest
//! delegate, a failure while others still run leaves nothing, a SIGKILL during a parallel ADD
//! followed by DEL leaves nothing, and the printed result is byte for byte the sequential one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::{require_root, unique, Harness};
use cni_types::version::Command;
use serde_json::{json, Value};
use std::time::Duration;

fn delegator_list(h: &Harness, name: &str, mode: &str, parallel: bool, delegates: Value) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": name,
        "plugins": [{
            "type": "delegator",
            "stateDir": h.dir.path().join("state"),
            "result": mode,
            "parallel": parallel,
            "timeout": 5,
            "delegates": delegates
        }]
    })
}

/// A braid-fault delegate that creates a real link and sleeps `ms` before its ADD.
fn slow(name: &str, ms: u64) -> Value {
    json!({"cniVersion": "1.0.0", "name": name, "type": "braid-fault", "link": true, "sleepOn": "ADD", "sleepMs": ms,
        "result": {"cniVersion": "1.0.0"}})
}

/// A braid-fault delegate that creates a real link on ADD.
fn linking(name: &str) -> Value {
    json!({"cniVersion": "1.0.0", "name": name, "type": "braid-fault", "link": true, "result": {"cniVersion": "1.0.0"}})
}

#[test]
fn parallel_add_runs_every_delegate_at_once() {
    if !require_root("parallel_add_runs_every_delegate_at_once") {
        return;
    }
    let h = Harness::new("pt");
    let ctr = h.container("pt");
    // The three braid-fault delegates meet: each ADD waits until all three run, and the
    // meeting says whether they did (never how long anything took).
    let meeting = h.meeting("add", 3);
    let delegates = json!([
        {"cniVersion": "1.0.0", "name": "fast", "type": "ptp", "ipam": h.host_local(176)},
        meeting.join(linking("slow1"), "ADD"), meeting.join(linking("slow2"), "ADD"), meeting.join(linking("slow3"), "ADD")
    ]);
    let list = delegator_list(&h, &unique("par"), "primary", true, delegates);
    let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
    h.add(&list, &rt).unwrap_or_else(|e| panic!("ADD: {e}"));
    assert_eq!(meeting.outcome(), (3, 0), "(met, alone): the delegates' ADDs did not all run at once");
    // lo, eth0, and each slow delegate's veth pair (both ends in the container).
    assert_eq!(ctr.links().len(), 8, "{:?}", ctr.links());
    h.check(&list, &rt).unwrap_or_else(|e| panic!("CHECK: {e}"));
    h.del(&list, &rt).unwrap_or_else(|e| panic!("DEL: {e}"));
    assert_eq!(ctr.links(), ["lo"]);
    assert!(h.reservations().is_empty(), "{:?}", h.dir.files());
    assert!(h.state_files().is_empty(), "{:?}", h.dir.files());
}

#[test]
fn parallel_failure_while_others_still_run_leaves_nothing() {
    if !require_root("parallel_failure_while_others_still_run_leaves_nothing") {
        return;
    }
    let h = Harness::new("pf");
    let ctr = h.container("pf");
    for k in 0..3usize {
        // Delegate k fails at once; the others (two ptp, one slow link) are still running.
        let mut delegates = vec![
            json!({"cniVersion": "1.0.0", "name": "a", "type": "ptp", "ipam": h.host_local(177)}),
            slow("slow", 300),
            json!({"cniVersion": "1.0.0", "name": "b", "type": "ptp", "ipam": h.host_local(178)}),
        ];
        delegates[k] = json!({"cniVersion": "1.0.0", "name": "broken", "type": "braid-fault", "link": true,
            "fail": {"command": "ADD", "code": 7, "msg": "Invalid Configuration", "details": "injected"}});
        let list = delegator_list(&h, &unique("par"), "merged", true, Value::Array(delegates));
        let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
        let e = h.add(&list, &rt).unwrap_err();
        assert_eq!(e.cause().unwrap().code, 7, "k={k}: {e}");
        assert!(
            e.to_string().contains(&format!("delegate {k} (network \"broken\", type \"braid-fault\"")),
            "k={k}: {}",
            e
        );
        assert!(!e.to_string().contains("rollback incomplete"), "k={k}: {e}");
        assert_eq!(ctr.links(), ["lo"], "k={k}");
        assert!(h.reservations().is_empty(), "k={k}: {:?}", h.dir.files());
        assert!(h.state_files().is_empty(), "k={k}: {:?}", h.dir.files());
        h.del(&list, &rt).unwrap_or_else(|e| panic!("k={k}: DEL after the failed ADD: {e}"));
    }
}

/// As `sigkill_at_any_moment_then_del_leaves_nothing_even_later` in delegator.rs, with every
/// delegate started at once: several may be running when the delegator dies.
#[test]
fn sigkill_during_a_parallel_add_then_del_leaves_nothing_even_later() {
    if !require_root("sigkill_during_a_parallel_add_then_del_leaves_nothing_even_later") {
        return;
    }
    let h = Harness::new("pk");
    let ctr = h.container("pk");
    let delegates = json!([
        {"cniVersion": "1.0.0", "name": "fast", "type": "ptp", "ipam": h.host_local(179)},
        slow("slow1", 300),
        {"cniVersion": "1.0.0", "name": "fast2", "type": "ptp", "ipam": h.host_local(180)},
        slow("slow2", 200)
    ]);
    let list = delegator_list(&h, &unique("par"), "merged", true, delegates);
    let stdin = Harness::first_plugin_stdin(&list);
    for round in 0..24u64 {
        let rt = h.runtime(&ctr, &unique("ctr"), "eth0");
        // Spread the kills over the whole ADD (~0–400 ms), deterministically.
        let after = Duration::from_millis((round * 37) % 400);
        let started = std::time::Instant::now();
        h.kill_during_add("delegator", &rt, &stdin, move || started.elapsed() >= after);
        h.del(&list, &rt).unwrap_or_else(|e| panic!("round {round}: DEL after SIGKILL at {after:?}: {e}"));
        let check = |when: &str| {
            assert_eq!(ctr.links(), ["lo"], "round {round} (kill at {after:?}), {when}");
            assert!(h.reservations().is_empty(), "round {round}, {when}: {:?}", h.dir.files());
            assert!(h.state_files().is_empty(), "round {round}, {when}: {:?}", h.dir.files());
        };
        check("right after DEL");
        // Longer than the slowest delegate's sleep: an orphan would have attached by now.
        std::thread::sleep(Duration::from_millis(350));
        check("after an orphan would have finished");
    }
}

/// The printed result with what differs between two namespaces by nature — the sandbox path,
/// the MACs and the host-side veth names chosen at random — replaced by placeholders, in place
/// (the bytes around them, key order included, untouched).
fn normalised(out: &[u8], netns: &str) -> String {
    let v: Value = serde_json::from_slice(out).unwrap();
    let mut text = String::from_utf8(out.to_vec()).unwrap();
    for (k, iface) in v["interfaces"].as_array().unwrap().iter().enumerate() {
        if let Some(mac) = iface["mac"].as_str() {
            text = text.replace(&format!("\"{mac}\""), &format!("\"MAC{k}\""));
        }
        if iface.get("sandbox").is_none() {
            let name = iface["name"].as_str().unwrap();
            text = text.replace(&format!("\"{name}\""), &format!("\"HOST{k}\""));
        }
    }
    text.replace(&format!("\"{netns}\""), "\"NETNS\"")
}

#[test]
fn parallel_results_are_byte_identical_to_sequential_ones() {
    if !require_root("parallel_results_are_byte_identical_to_sequential_ones") {
        return;
    }
    for mode in ["merged", "primary"] {
        let mut printed = Vec::new();
        for parallel in [false, true] {
            // Two fresh harnesses with identical ranges: host-local hands out the same addresses.
            let h = Harness::new(if parallel { "pbp" } else { "pbs" });
            let ctr = h.container("pb");
            let delegates: Vec<Value> = (0..4u8)
                .map(|i| json!({"cniVersion": "1.0.0", "name": format!("p{i}"), "type": "ptp", "ipam": h.host_local(181 + i)}))
                .collect();
            let list = delegator_list(&h, "same", mode, parallel, Value::Array(delegates));
            let rt = h.runtime(&ctr, "samecontainer", "eth0");
            let mut stdin = list["plugins"][0].as_object().unwrap().clone();
            stdin.insert("name".into(), list["name"].clone());
            stdin.insert("cniVersion".into(), list["cniVersion"].clone());
            let stdin = serde_json::to_vec(&stdin).unwrap();
            let out = h.exec_plugin("delegator", Command::Add, &rt, &stdin).unwrap_or_else(|e| panic!("ADD: {e}"));
            printed.push(normalised(&out, &rt.netns));
            h.exec_plugin("delegator", Command::Del, &rt, &stdin).unwrap_or_else(|e| panic!("DEL: {e}"));
            assert_eq!(ctr.links(), ["lo"]);
            assert!(h.reservations().is_empty(), "{:?}", h.dir.files());
        }
        assert_eq!(printed[0], printed[1], "{mode}: sequential, then parallel");
    }
}
