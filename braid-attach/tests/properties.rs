//! The meta-plugins' parsers against outside input: the `delegates` key and the shared keys of
//! a configuration, what delegates print (their results are recorded and handed on), and state
//! files read back by DEL (torn, cut short, a byte changed). Whatever comes, the engine answers
//! with a plan or a CNI error with its code, DEL always ends, and nothing panics. Few, small
//! cases: bounded time in CI.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_attach::plan::Plan;
use braid_attach::state::{Key, StateStore};
use braid_attach::{Attacher, Delegate, DelegateConfig};
use braid_attach::{Deadline, PluginRules, SharedConfig};
use cni_runtime::chain::RuntimeConf as Call;
use cni_runtime::testing::FakeExec;
use cni_skel::log::Logger;
use cni_skel::CmdArgs;
use cni_types::error::{DECODING_FAILURE, INTERNAL, INVALID_NETWORK_CONFIG, IO_FAILURE};
use cni_types::version::Command;
use cni_types::Invocation;
use cni_types::NetConf;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU32, Ordering};

#[path = "../../cni-skel/tests/common/inputs.rs"]
mod inputs;

const RULES: PluginRules<'static> = PluginRules {
    plugin: "delegator",
    delegates_optional: false,
    fixed_ifname: &|i, ifname| (i == 0).then(|| ifname.to_string()),
};

/// A directory of its own per case, removed on drop.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let n = SEQ.fetch_add(1, Ordering::SeqCst);
        let d = std::env::temp_dir().join(format!("braid-props-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `delegates` entry: a plugin, a conflist, a network name, a wrapper, or anything.
fn entry() -> impl Strategy<Value = Value> {
    let wrapper = (
        prop_oneof![inputs::plugin_conf(), Just(json!("named")), inputs::value()],
        prop::option::of(inputs::either(vec![json!("net5"), json!("eth0"), json!(""), json!("a/b")])),
        prop::option::of(inputs::either(vec![json!({"mac": "02:00:00:00:00:01"})])),
        prop::option::of(inputs::either(vec![json!("IP=198.18.0.9"), json!("K"), json!("a=b=c;;")])),
    )
        .prop_map(|(n, i, rc, a)| {
            let mut o = serde_json::Map::new();
            o.insert("network".into(), n);
            for (k, v) in [("ifname", i), ("runtimeConfig", rc), ("args", a)] {
                if let Some(v) = v {
                    o.insert(k.into(), v);
                }
            }
            Value::Object(o)
        });
    prop_oneof![
        3 => inputs::plugin_conf(),
        1 => inputs::conflist(),
        1 => prop::sample::select(vec![json!("named"), json!("missing"), json!("../x")]),
        2 => wrapper,
        1 => inputs::value(),
    ]
}

/// A meta-plugin's configuration.
fn meta_conf() -> impl Strategy<Value = Value> {
    (
        prop_oneof![4 => prop::collection::vec(entry(), 0..4).prop_map(Value::Array), 1 => inputs::value()],
        prop::option::of(inputs::either(vec![json!(5), json!(0), json!(-1), json!("5"), json!(1e9)])),
        prop::option::of(inputs::either(vec![json!(3), json!(0.5), json!(0), json!(86_400), json!(null)])),
        prop::option::of(inputs::either(vec![json!(true), json!("yes")])),
        prop::option::of(inputs::either(vec![json!(""), json!(5)])),
    )
        .prop_map(|(delegates, timeout, deadline, parallel, state_dir)| {
            let mut c = json!({"cniVersion": "1.0.0", "name": "meta", "type": "delegator", "delegates": delegates});
            for (k, v) in
                [("timeout", timeout), ("deadline", deadline), ("parallel", parallel), ("stateDir", state_dir)]
            {
                if let Some(v) = v {
                    c[k] = v;
                }
            }
            c
        })
}

fn args(command: Command, stdin: Vec<u8>) -> CmdArgs {
    CmdArgs {
        invocation: Invocation {
            command,
            container_id: "ctr1".into(),
            netns: "/run/netns/braid-props-absent".into(),
            ifname: "eth0".into(),
            path: "/opt/cni/bin".into(),
            ..Invocation::default()
        },
        stdin_data: stdin,
        ..CmdArgs::default()
    }
}

/// Puts the case's `confDir` (with one named network) into a configuration that is an object.
fn with_conf_dir(bytes: Vec<u8>, dir: &Dir) -> Vec<u8> {
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(mut o)) => {
            o.insert("confDir".into(), json!(dir.0));
            serde_json::to_vec(&o).unwrap()
        }
        _ => bytes,
    }
}

fn two() -> Vec<Delegate> {
    ["1.0.0", "0.4.0"]
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let c = json!({"cniVersion": v, "name": format!("n{i}"), "type": "ptp"});
            Delegate {
                config: DelegateConfig::Plugin(NetConf::parse(c.to_string().as_bytes()).unwrap()),
                ifname: if i == 0 { "eth0".into() } else { "net1".into() },
                ..Delegate::default()
            }
        })
        .collect()
}

fn call() -> Call {
    Call { container_id: "ctr1".into(), netns: "/run/netns/x".into(), ifname: "eth0".into(), ..Call::default() }
}

fn attacher<'a>(exec: &'a FakeExec, dir: &Dir) -> Attacher<'a> {
    Attacher {
        exec,
        paths: vec!["/opt/cni/bin".into()],
        store: StateStore::open(dir.0.join("state")).unwrap(),
        parallel: false,
        deadline: Deadline::none(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_meta_configuration_is_a_valid_plan_or_a_coded_refusal(bytes in inputs::mutated(meta_conf())) {
        let dir = Dir::new("meta");
        std::fs::write(dir.0.join("10-named.conflist"), br#"{"cniVersion":"1.0.0","name":"named","plugins":[{"type":"ptp"}]}"#).unwrap();
        let stdin = with_conf_dir(bytes, &dir);
        match SharedConfig::parse(&args(Command::Add, stdin.clone()), &RULES) {
            Ok(cfg) => {
                prop_assert!(!cfg.delegates.is_empty());
                prop_assert!(braid_attach::delegates::validate(&cfg.delegates).is_ok());
                prop_assert!(cfg.timeout.as_secs() < 86_400 && cfg.deadline.as_secs() < 86_400);
            }
            Err(e) => prop_assert!([DECODING_FAILURE, INVALID_NETWORK_CONFIG].contains(&e.code), "{e:?}"),
        }
        // DEL never fails on today's delegates: it works from the state.
        match SharedConfig::parse(&args(Command::Del, stdin), &RULES) {
            Ok(_) => {}
            Err(e) => prop_assert!([DECODING_FAILURE, INVALID_NETWORK_CONFIG].contains(&e.code), "{e:?}"),
        }
    }

    #[test]
    fn whatever_delegates_print_is_a_result_or_a_coded_failure_rolled_back(
        printed in prop::collection::vec(inputs::mutated(inputs::result()), 2),
    ) {
        let dir = Dir::new("printed");
        let exec = FakeExec::default();
        for p in &printed {
            exec.reply(Ok(p.clone()));
        }
        let a = attacher(&exec, &dir);
        match a.add(&call(), &two(), &mut Logger::recording("test", "ADD")) {
            Ok(results) => {
                prop_assert_eq!(results.len(), 2);
                prop_assert!(Plan::decode(&a.store.read(&Key::new("ctr1", "eth0").unwrap()).unwrap().unwrap()).is_some());
            }
            Err(e) => {
                prop_assert!([DECODING_FAILURE, INTERNAL].contains(&e.code), "{e:?}");
                prop_assert!(e.msg.starts_with("delegate "), "{}", e.msg);
                prop_assert!(a.store.keys().unwrap().is_empty(), "a refused result must be rolled back");
            }
        }
    }

    #[test]
    fn del_of_a_damaged_state_always_ends_and_releases_the_delegates(
        addrs in prop::collection::vec((0u8..=255, prop::sample::select(vec!["1.0.0", "0.4.0", "0.3.1"])), 2),
        op in 0u8..3,
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let dir = Dir::new("damaged");
        let exec = FakeExec::default();
        for (n, v) in &addrs {
            let r = json!({"cniVersion": v, "interfaces": [{"name": "eth0", "sandbox": "/run/netns/x"}],
                           "ips": [{"address": format!("198.18.0.{n}/24"), "interface": 0}], "dns": {"domain": "x"}});
            exec.reply(Ok(serde_json::to_vec(&r).unwrap()));
        }
        let a = attacher(&exec, &dir);
        a.add(&call(), &two(), &mut Logger::recording("test", "ADD")).unwrap();
        let key = Key::new("ctr1", "eth0").unwrap();
        let mut bytes = a.store.read(&key).unwrap().unwrap();
        let i = at.index(bytes.len());
        match op {
            0 => bytes[i] = byte,
            1 => bytes.truncate(i),
            _ => bytes.insert(i, byte),
        }
        a.store.write(&key, &bytes).unwrap();
        let _ = Plan::decode(&bytes);
        exec.calls.lock().unwrap().clear();
        match a.del(&call(), &two(), &mut Logger::recording("test", "DEL")) {
            Ok(()) => prop_assert!(a.store.keys().unwrap().is_empty()),
            Err(e) => prop_assert!([DECODING_FAILURE, INVALID_NETWORK_CONFIG, IO_FAILURE, INTERNAL].contains(&e.code), "{e:?}"),
        }
        // Every delegate was sent its DEL, from the state or (when it no longer reads) from the
        // configuration.
        let dels = exec.calls.lock().unwrap().len();
        prop_assert!(dels >= 2, "{dels} DEL calls");
    }
}
