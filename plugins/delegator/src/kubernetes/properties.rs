//! Property tests of what a pod author and an operator hand the delegator: the annotation (both
//! forms, random and mutated), network definitions (random and mutated files, pinned keys), the
//! `kubernetes` block, the pod's `CNI_ARGS`. Whatever comes is a selection that holds its
//! invariants or a code-7 refusal naming the annotation; nothing panics, nothing reaches a path
//! outside its directory. Few, small cases: bounded time in CI.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::annotation::{self, device_id, RUNTIME_KEYS};
use super::names::NETWORKS;
use super::*;
use cni_types::error::INVALID_NETWORK_CONFIG;
use cni_types::validate::is_dns_label;
use proptest::prelude::*;
use serde_json::{json, Map};

#[path = "../../../../cni-skel/tests/common/inputs.rs"]
mod inputs;

const LABELS: &[&str] = &["good", "team-a", "default", "", "Bad", "a.b", "-x", "a/b", "é"];

/// Mostly one of `good`, sometimes one of `bad`, rarely anything.
fn weighted(good: Vec<Value>, bad: Vec<Value>) -> impl Strategy<Value = Value> {
    prop_oneof![10 => prop::sample::select(good), 1 => prop::sample::select(bad), 1 => inputs::value()]
}

/// A key present a quarter of the time.
fn sometimes<T: std::fmt::Debug>(s: impl Strategy<Value = T>) -> impl Strategy<Value = Option<T>> {
    prop::option::weighted(0.25, s)
}

/// One selection element: every key the spec and Multus know, each mostly valid, sometimes
/// not, sometimes anything.
fn element() -> impl Strategy<Value = Value> {
    let keys = (
        prop::option::weighted(0.95, weighted(vec![json!("good")], vec![json!("Bad"), json!("a/b"), json!("")])),
        sometimes(weighted(vec![json!("team-a"), json!("default")], vec![json!("team-b"), json!("A"), json!("..")])),
        sometimes(weighted(
            vec![json!("net7"), json!("lan0")],
            vec![json!("eth0"), json!("a/b"), json!("averyveryverylongname")],
        )),
        sometimes(weighted(
            vec![json!("02:00:00:00:00:0a")],
            vec![json!("02:00:00:00:00"), json!("00:11:22:33:44:55:66:77")],
        )),
        sometimes(weighted(
            vec![json!(["198.18.9.5/24"]), json!(["2001:db8::5"])],
            vec![json!(["x"]), json!("198.18.9.5")],
        )),
        sometimes(weighted(
            vec![json!("0000:3b:02.1"), json!("mlx5_core.sf.4")],
            vec![json!("../../../dev/sda"), json!("0000:3b:20.1"), json!(""), json!("0000:3B:02.1")],
        )),
        sometimes(weighted(vec![json!({"ips": "from-pod"}), json!({"labels": [1]})], vec![json!([1]), json!("x")])),
        sometimes(weighted(vec![json!(["198.18.7.1"]), json!([])], vec![json!(["198.18.7.1/24"]), json!("x")])),
    );
    let more = (
        sometimes(weighted(
            vec![json!([{"hostPort": 80, "containerPort": 8080, "protocol": "UDP"}])],
            vec![json!([{"hostPort": 0}])],
        )),
        sometimes(weighted(
            vec![json!({"ingressRate": 1, "ingressBurst": 2})],
            vec![json!({"ingressBurst": 1}), json!({"x": 1})],
        )),
        sometimes(weighted(vec![json!("00:11:22:33:44:55:66:77")], vec![json!("00:11")])),
        sometimes(inputs::value()),
        prop::option::weighted(0.1, prop::sample::select(vec!["interfaces", "org.example/x", "ipam-claim-reference"])),
    );
    (keys, more).prop_map(|((name, ns, ifc, mac, ips, dev, args, gw), (pm, bw, guid, vendor, odd))| {
        let mut o = Map::new();
        for (k, v) in [
            ("name", name),
            ("namespace", ns),
            ("interface", ifc),
            ("mac", mac),
            ("ips", ips),
            ("deviceID", dev),
            ("cni-args", args),
            ("default-route", gw),
            ("portMappings", pm),
            ("bandwidth", bw),
            ("infiniband-guid", guid),
            ("org.example.vendor", vendor),
        ] {
            if let Some(v) = v {
                o.insert(k.into(), v);
            }
        }
        if let Some(k) = odd {
            o.insert(k.into(), json!("x"));
        }
        Value::Object(o)
    })
}

/// The annotation's value: the JSON form, the text form, or anything, maybe mutated.
fn annotation_value() -> impl Strategy<Value = String> {
    let json_form = inputs::mutated(prop::collection::vec(element(), 0..4).prop_map(Value::Array))
        .prop_map(|b| String::from_utf8_lossy(&b).into_owned());
    let text_form = prop::collection::vec(
        (
            prop::sample::select(LABELS),
            prop::option::of(prop::sample::select(LABELS)),
            prop::option::of("[a-z0-9/@:]{0,6}"),
        ),
        0..4,
    )
    .prop_map(|items| {
        items
            .into_iter()
            .map(|(n, ns, i)| {
                let mut s = ns.map_or_else(|| n.to_string(), |ns| format!("{ns}/{n}"));
                if let Some(i) = i {
                    s = format!("{s}@{i}");
                }
                s
            })
            .collect::<Vec<_>>()
            .join(",")
    });
    prop_oneof![3 => json_form, 2 => text_form, 1 => "[ -~]{0,40}"]
}

/// A definition file's bytes: a list or a single plugin declaring capabilities and setting
/// `args.cni.ips`, maybe pinning it, each part sometimes replaced by anything, the whole
/// sometimes mutated at the byte level.
fn definition() -> impl Strategy<Value = Vec<u8>> {
    let plugin = (
        weighted(vec![json!("ptp"), json!("macvlan")], vec![json!(""), json!("../ptp")]),
        weighted(vec![json!({"mac": true, "ips": true, "deviceID": true, "portMappings": true, "bandwidth": true, "infinibandGUID": true})], vec![json!({})]),
        weighted(vec![json!({"cni": {"ips": "from-definition"}})], vec![json!(5), json!({"cni": 5})]),
    )
        .prop_map(|(t, caps, args)| json!({"type": t, "capabilities": caps, "args": args}));
    let def = (
        any::<bool>(),
        prop::collection::vec(plugin, 1..3),
        prop::option::weighted(0.5, weighted(vec![json!(["ips"]), json!(true)], vec![json!("ips"), json!([5])])),
        weighted(vec![json!("1.0.0"), json!("0.4.0")], vec![json!("9.9.9"), json!("")]),
    )
        .prop_map(|(list, mut plugins, pinned, version)| {
            let mut def = if list {
                json!({"cniVersion": version, "plugins": plugins})
            } else {
                let mut p = plugins.swap_remove(0);
                p["cniVersion"] = version;
                p
            };
            if let Some(pin) = pinned {
                def["pinnedCniArgs"] = pin;
            }
            def
        });
    // A byte changed, the file cut short or a byte inserted, in a fifth of the cases.
    inputs::mutated_one_in(def, 15)
}

fn kconf(dir: &std::path::Path) -> Config {
    Config {
        networks_dir: dir.to_path_buf(),
        global_namespaces: vec!["default".into()],
        status_dir: dir.join("status"),
        claims_dir: dir.join("claims"),
        kubelet: devices::Kubelet::default(),
        default_network_namespace: "kube-system".into(),
        default_network_pod_namespace: false,
    }
}

fn delegator(annotations: Value) -> NetConf {
    let c = json!({"cniVersion": "1.0.0", "name": "braid", "type": "delegator", "delegates": [{"type": "ptp"}],
                   "runtimeConfig": { POD_ANNOTATIONS: annotations }});
    NetConf::parse(c.to_string().as_bytes()).unwrap()
}

fn cluster() -> Vec<Delegate> {
    let conf = NetConf::parse(br#"{"cniVersion":"1.0.0","name":"cluster","type":"ptp"}"#).unwrap();
    vec![Delegate { config: braid_attach::DelegateConfig::Plugin(conf), ifname: "eth0".into(), ..Delegate::default() }]
}

const ARGS: &str = "K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=web-0";

fn refusal_is_code_7(e: &SelectionError) -> Result<(), TestCaseError> {
    let c: cni_types::CniError = e.clone().into();
    prop_assert_eq!(c.code, INVALID_NETWORK_CONFIG);
    prop_assert!(
        c.msg.starts_with("pod annotation") || c.msg.starts_with("kubernetes:") || c.msg.starts_with("runtimeConfig"),
        "{}",
        c.msg
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn an_annotation_is_a_valid_selection_or_a_code_7_refusal(value in annotation_value()) {
        match annotation::parse(&value) {
            Ok(elements) => {
                prop_assert!(elements.iter().filter(|e| e.default_route.is_some()).count() <= 1);
                for e in elements {
                    prop_assert!(is_dns_label(&e.name), "{:?}", e.name);
                    prop_assert!(e.namespace.as_deref().is_none_or(is_dns_label), "{:?}", e.namespace);
                    prop_assert!(e.interface.as_deref().is_none_or(|i| cni_types::validate::interface_name(i).is_ok()));
                    prop_assert!(e.runtime.keys().all(|k| RUNTIME_KEYS.iter().any(|(_, c)| c == k)));
                    if let Some(d) = e.runtime.get("deviceID") {
                        prop_assert!(d.as_str().and_then(device_id).is_some(), "{d}");
                    }
                }
            }
            Err(e) => refusal_is_code_7(&e)?,
        }
    }

    #[test]
    fn definitions_resolve_to_delegates_or_a_code_7_refusal_and_pinned_keys_never_come_from_the_pod(
        defs in prop::collection::vec(definition(), 2),
        elements in prop::collection::vec(element(), 1..3),
    ) {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("braid-k8s-props-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (i, (ns, name, ext)) in [("team-a", "good", "conflist"), ("default", "good", "conf")].iter().enumerate() {
            std::fs::create_dir_all(dir.join(ns)).unwrap();
            std::fs::write(dir.join(ns).join(format!("{name}.{ext}")), &defs[i]).unwrap();
        }
        let annotations = json!({ NETWORKS: Value::Array(elements).to_string() });
        let outcome = select(&kconf(&dir), &delegator(annotations), ARGS, &cluster()).and_then(|s| {
            let mut all = cluster();
            all.extend(s.delegates.iter().cloned());
            braid_attach::delegates::validate(&all).map_err(|e| SelectionError::Config(e.msg))?;
            Ok(s)
        });
        let _ = std::fs::remove_dir_all(&dir);
        match outcome {
            Ok(s) => {
                for (d, network) in s.delegates.iter().zip(&s.networks) {
                    prop_assert!(d.own_runtime_config_only);
                    // team-a/good is the first definition, default/good the second; pinned when
                    // the key survived the mutation.
                    let bytes = if network.name == "team-a/good" { &defs[0] } else { &defs[1] };
                    let pin = serde_json::from_slice::<Value>(bytes).ok().and_then(|v| v.get("pinnedCniArgs").cloned());
                    let pinned = pin == Some(json!(["ips"])) || pin == Some(json!(true));
                    let plugins: Vec<&NetConf> = match &d.config {
                        braid_attach::DelegateConfig::Plugin(c) => vec![c],
                        braid_attach::DelegateConfig::List(l) => l.plugins.iter().collect(),
                    };
                    for p in plugins {
                        prop_assert!(p.get("pinnedCniArgs").is_none());
                        let ips = p.get("args").and_then(|a| a.get("cni")).and_then(|c| c.get("ips"));
                        if pinned {
                            prop_assert_ne!(ips, Some(&json!("from-pod")));
                        }
                    }
                }
            }
            Err(SelectionError::Config(m)) => prop_assert!(m.starts_with("delegates["), "{m}"),
            Err(e) => refusal_is_code_7(&e)?,
        }
    }

    #[test]
    fn the_kubernetes_block_is_a_config_or_a_code_7_refusal(block in inputs::value()) {
        let c = json!({"cniVersion": "1.0.0", "name": "braid", "type": "delegator", "kubernetes": block});
        if let Err(e) = Config::parse(&NetConf::parse(c.to_string().as_bytes()).unwrap()) {
            refusal_is_code_7(&e)?;
        }
    }

    #[test]
    fn a_status_path_never_leaves_its_directory(args in inputs::cni_args(), id in "[ -~]{0,20}") {
        let dir = std::path::Path::new("/run/braid/network-status");
        if let Some(p) = status::path(dir, &Pod::from_args(&args), &id) {
            prop_assert_eq!(p.parent(), Some(dir));
            let name = p.file_name().unwrap().to_str().unwrap();
            prop_assert!(!name.starts_with('.') && !name.contains('/'), "{name}");
        }
    }
}
