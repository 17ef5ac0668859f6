#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::annotation::{self, parse};
use super::error::SelectionError;
use super::names::NETWORKS;
use super::*;
use braid_attach::DelegateConfig;
use cni_types::result::AnyResult;
use serde_json::json;
use std::path::Path;

/// A networksDir of its own, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("braid-k8s-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
    fn put(&self, rel: &str, body: &str) {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn networks(dir: &Path) -> Dir {
    let d = Dir(dir.to_path_buf());
    d.put(
        "default/global.conflist",
        r#"{"cniVersion":"1.0.0","name":"global","plugins":[{"type":"bridge","capabilities":{"ips":true,"portMappings":true}},{"type":"tuning","capabilities":{"mac":true},"args":{"cni":{"keep":"yes","over":"file"}}}]}"#,
    );
    d.put("team-a/local.conf", r#"{"cniVersion":"0.4.0","type":"macvlan","capabilities":{"bandwidth":true,"infinibandGUID":true,"deviceID":true}}"#);
    d.put("team-a/plain.json", r#"{"cniVersion":"1.0.0","name":"plain","type":"ptp"}"#);
    d.put("team-a/misnamed.conflist", r#"{"cniVersion":"1.0.0","name":"other","plugins":[{"type":"ptp"}]}"#);
    d.put("team-a/broken.conflist", r#"{"cniVersion":"1.0.0","plugins":[{"type":"ptp"}"#);
    d.put("team-b/secret.conflist", r#"{"cniVersion":"1.0.0","name":"secret","plugins":[{"type":"ptp"}]}"#);
    d
}

fn kconf(dir: &Path) -> Config {
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

fn delegator(annotations: Option<Value>) -> NetConf {
    let mut c = json!({"cniVersion": "1.0.0", "name": "braid", "type": "delegator", "delegates": [{"type": "ptp"}]});
    if let Some(a) = annotations {
        c["runtimeConfig"] = json!({ POD_ANNOTATIONS: a, "portMappings": [{"hostPort": 80, "containerPort": 80}] });
    }
    NetConf::parse(c.to_string().as_bytes()).unwrap()
}

fn cluster() -> Vec<Delegate> {
    vec![Delegate { ifname: "eth0".into(), ..Delegate::default() }]
}

const ARGS: &str = "IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc";

fn select_with(dir: &Path, value: &str) -> Result<Selection, SelectionError> {
    select(&kconf(dir), &delegator(Some(json!({ NETWORKS: value }))), ARGS, &cluster())
}

fn refusal(dir: &Path, value: &str) -> String {
    let e = select_with(dir, value).unwrap_err();
    let c: cni_types::CniError = e.clone().into();
    assert_eq!(c.code, cni_types::error::INVALID_NETWORK_CONFIG, "{e}");
    assert!(c.msg.contains(NETWORKS) || matches!(e, SelectionError::Config(_)), "{c:?}");
    c.msg
}

#[test]
fn text_form_names_namespaces_and_interfaces() {
    let e = parse(" a , ns-1/b ,c/d@net9,x@eth3").unwrap();
    let got: Vec<_> = e.iter().map(|e| (e.namespace.as_deref(), e.name.as_str(), e.interface.as_deref())).collect();
    assert_eq!(
        got,
        [(None, "a", None), (Some("ns-1"), "b", None), (Some("c"), "d", Some("net9")), (None, "x", Some("eth3"))]
    );
    assert!(parse("").unwrap().is_empty() && parse("  ").unwrap().is_empty());
    for (bad, want) in [
        ("a,,b", "element 1: empty network reference"),
        ("A", "element 0: name \"A\" is not a DNS-1123 label"),
        ("x/y/z", "element 0: name \"y/z\" is not a DNS-1123 label"),
        ("Ns/y", "element 0: namespace \"Ns\" is not a DNS-1123 label"),
        ("a@", "element 0: interface \"\" is not a valid interface name: interface name is empty"),
        ("a@averyveryverylongname", "interface name is too long"),
        ("a@x:y", "contains / or : or whitespace"),
        ("-a", "\"-a\" is not a DNS-1123 label"),
    ] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(e.contains(want), "{bad}: {e}");
        assert!(e.starts_with("pod annotation k8s.v1.cni.cncf.io/networks, element "), "{e}");
    }
}

#[test]
fn json_form_every_key() {
    let v = json!([{
        "name": "global", "namespace": "default", "interface": "side0", "mac": "02:00:00:00:00:0A",
        "ips": ["198.18.9.5/24", "2001:db8::5"], "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "UDP"}],
        "bandwidth": {"ingressRate": 1000, "ingressBurst": 10, "egressRate": 5}, "infiniband-guid": "00:11:22:33:44:55:66:77",
        "deviceID": "0000:00:1f.6", "cni-args": {"k": "v"}, "default-route": ["198.18.9.1"], "org.example.vendor": {"x": 1}
    }]);
    let e = parse(&v.to_string()).unwrap();
    assert_eq!(e.len(), 1);
    let e = &e[0];
    assert_eq!(
        (e.name.as_str(), e.namespace.as_deref(), e.interface.as_deref()),
        ("global", Some("default"), Some("side0"))
    );
    assert_eq!(e.runtime["mac"], "02:00:00:00:00:0A");
    assert_eq!(e.runtime["ips"], json!(["198.18.9.5/24", "2001:db8::5"]));
    assert_eq!(e.runtime["portMappings"], json!([{"hostPort": 8080, "containerPort": 80, "protocol": "udp"}]));
    assert_eq!(e.runtime["bandwidth"]["egressRate"], 5);
    assert_eq!(e.runtime["infinibandGUID"], "00:11:22:33:44:55:66:77");
    assert_eq!(e.runtime["deviceID"], "0000:00:1f.6");
    assert_eq!(e.cni_args, Some(json!({"k": "v"}).as_object().unwrap().clone()));
    assert_eq!(e.default_route, Some(vec!["198.18.9.1".parse().unwrap()]));
    assert_eq!(e.runtime.len(), 6);
    // An empty default-route is a request too (the pod's default routes go; none are added).
    assert_eq!(parse(r#"[{"name":"a","default-route":[]}]"#).unwrap()[0].default_route, Some(vec![]));
}

#[test]
fn json_form_refusals() {
    for (bad, want) in [
        ("[", "not a list of network selection elements"),
        (r#"{"name":"a"}"#, "a JSON object where a list of selection elements belongs"),
        (r#"["a"]"#, "element 0: must be an object, not a JSON string"),
        (r#"[{}]"#, "element 0: has no \"name\""),
        (r#"[{"name":5}]"#, "element 0: name must be a string, not 5"),
        (r#"[{"name":"a"},{"name":"b","namespace":"B"}]"#, "element 1: namespace \"B\" is not a DNS-1123 label"),
        (r#"[{"name":"a","interface":"a/b"}]"#, "interface \"a/b\" is not a valid interface name"),
        (r#"[{"name":"a","mac":"02:00:00:00:00"}]"#, "mac \"02:00:00:00:00\" must be a 6-byte MAC address"),
        (r#"[{"name":"a","mac":"00:11:22:33:44:55:66:77"}]"#, "must be a 6-byte MAC address"),
        (r#"[{"name":"a","infiniband-guid":"02:00:00:00:00:01"}]"#, "must be an 8-byte GUID"),
        (r#"[{"name":"a","ips":["198.18.0.300"]}]"#, "ips [\"198.18.0.300\"] must be a list of IP addresses"),
        (r#"[{"name":"a","ips":"198.18.0.3"}]"#, "must be a list of IP addresses"),
        (r#"[{"name":"a","portMappings":[{"hostPort":0,"containerPort":80}]}]"#, "portMappings"),
        (r#"[{"name":"a","portMappings":[{"hostPort":80,"containerPort":80,"protocol":"icmp"}]}]"#, "portMappings"),
        (r#"[{"name":"a","portMappings":[{"hostPort":80,"containerPort":80,"hostIP":"x"}]}]"#, "portMappings"),
        (r#"[{"name":"a","bandwidth":{"ingressBurst":5}}]"#, "a burst only with its rate"),
        (r#"[{"name":"a","bandwidth":{"ingressRate":-5}}]"#, "bandwidth"),
        (r#"[{"name":"a","deviceID":""}]"#, "element 0: deviceID \"\" must be a PCI address (dddd:bb:dd.f"),
        (
            r#"[{"name":"a","deviceID":"../../../../dev/sda"}]"#,
            "deviceID \"../../../../dev/sda\" must be a PCI address",
        ),
        (r#"[{"name":"a","deviceID":5}]"#, "deviceID must be a string, not 5"),
        (r#"[{"name":"a","cni-args":[1]}]"#, "cni-args must be an object, not [1]"),
        (r#"[{"name":"a","default-route":["198.18.0.1/24"]}]"#, "must be a list of gateway IP addresses"),
        (
            r#"[{"name":"a","default-route":[]},{"name":"b","default-route":[]}]"#,
            "element 1: default-route is already requested by element 0",
        ),
        (r#"[{"name":"a","interfaces":"x"}]"#, "unknown key \"interfaces\""),
        (r#"[{"name":"a","ipam-claim-reference":"c"}]"#, "\"ipam-claim-reference\" is not supported"),
    ] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(e.contains(want), "{bad}: {e}");
        assert!(e.starts_with("pod annotation k8s.v1.cni.cncf.io/networks"), "{e}");
    }
}

#[test]
fn device_ids_are_pci_addresses_or_auxiliary_devices() {
    use annotation::{device_id, DeviceId};
    for ok in ["0000:00:1f.6", "0000:3b:02.7", "10000:e1:00.0", "ffffffff:ff:1f.0"] {
        assert_eq!(device_id(ok), Some(DeviceId::Pci), "{ok}");
    }
    for ok in ["mlx5_core.sf.4", "mlx5_core.eth.0", "idpf.rdma.12"] {
        assert_eq!(device_id(ok), Some(DeviceId::Auxiliary), "{ok}");
    }
    for bad in [
        "",
        "d1",
        "0000:00:20.0", // device above 0x1f
        "0000:00:1f.8", // function above 7
        "0000:00:1F.6", // sysfs names are lower case
        "000:00:1f.6",  // domain too short
        "000000000:00:1f.6",
        "0000:0:1f.6",
        "0000:00:1f.6/",
        "0000:00:1f.6/../../..",
        "../0000:00:1f.6",
        "0000:00:1f",
        "0000:00:1f.66",
        " 0000:00:1f.6",
        "..",
        "mlx5_core..4",
        "mlx5_core.sf.",
        "mlx5_core.sf.x",
        "mlx5_core.sf.4.5",
        "Mlx5.sf.4",
        "mlx5/core.sf.4",
        "a.b.1/..",
    ] {
        assert_eq!(device_id(bad), None, "{bad:?}");
    }
    // Whatever passes can name nothing outside its sysfs directory.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let alphabet: Vec<char> = "0123456789abcdef:./_xyzF ".chars().collect();
    for _ in 0..20_000 {
        let s: String = (0..(seed % 20) as usize)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                alphabet[(seed % alphabet.len() as u64) as usize]
            })
            .collect();
        if device_id(&s).is_some() {
            assert!(!s.contains('/') && !s.contains("..") && !s.is_empty() && !s.starts_with('.'), "{s:?}");
        }
    }
}

#[test]
fn hostile_annotations_never_panic() {
    let alphabet: Vec<char> = "[]{}\",:/@ a-z0.\\\u{0}é\n".chars().collect();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for len in 0..400 {
        let s: String = (0..len % 60)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                alphabet[(seed % alphabet.len() as u64) as usize]
            })
            .collect();
        let _ = parse(&s);
    }
    let deep = "[".repeat(100_000);
    assert!(parse(&deep).is_err());
    let _ = parse(&format!("[{}]", vec![r#"{"name":"a"}"#; 5000].join(",")));
    for v in [json!(null), json!(1), json!([]), json!({"a": 1}), json!("x"), json!({ NETWORKS: 5 })] {
        let d = Dir::new("hostile");
        let _ = select(&kconf(&d.0), &delegator(Some(v)), ARGS, &cluster());
        let _ =
            select(&kconf(&d.0), &delegator(Some(json!({ NETWORKS: "[{\"name\":\"a\"}]" }))), "garbage;;=", &cluster());
    }
}

#[test]
fn resolution_isolation_and_requests() {
    let d = Dir::new("resolve");
    let _n = networks(&d.0);
    let s = select_with(
        &d.0,
        r#"[{"name":"global","namespace":"default","mac":"02:00:00:00:00:0a","ips":["198.18.9.5/24"],"cni-args":{"over":"annotation","new":1}},
            {"name":"local","interface":"lan0","bandwidth":{"ingressRate":1},"infiniband-guid":"00:11:22:33:44:55:66:77","deviceID":"0000:3b:02.1"},
            {"name":"plain"},{"name":"plain","default-route":["198.18.7.1"]}]"#,
    )
    .unwrap();
    assert!(s.info.is_none());
    let names: Vec<_> = s.networks.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["default/global", "team-a/local", "team-a/plain", "team-a/plain"]);
    assert!(s.networks.iter().all(|l| !l.default));
    assert_eq!(s.networks[3].default_route, Some(vec!["198.18.7.1".parse().unwrap()]));
    let ifs: Vec<_> = s.delegates.iter().map(|d| (d.ifname.as_str(), d.auto_ifname)).collect();
    assert_eq!(ifs, [("net1", true), ("lan0", false), ("net2", true), ("net3", true)]);
    assert!(s.delegates.iter().all(|d| d.own_runtime_config_only));
    // The element's requests only, never the runtime's portMappings (those are the cluster network's).
    assert_eq!(
        Value::Object(s.delegates[0].runtime_config.clone()),
        json!({"mac": "02:00:00:00:00:0a", "ips": ["198.18.9.5/24"]})
    );
    let call = cni_runtime::chain::RuntimeConf {
        capability_args: json!({"portMappings": [1]}).as_object().unwrap().clone(),
        ..Default::default()
    };
    assert!(!s.delegates[0].effective_capability_args(&call).contains_key("portMappings"));
    // cni-args reach every plugin of the list, the annotation winning over the file.
    let DelegateConfig::List(l) = &s.delegates[0].config else { panic!("a conflist") };
    assert_eq!(l.plugins[0].get("args"), Some(&json!({"cni": {"over": "annotation", "new": 1}})));
    assert_eq!(l.plugins[1].get("args"), Some(&json!({"cni": {"keep": "yes", "over": "annotation", "new": 1}})));
    assert_eq!(l.name, "global");
    // A .conf without a name gets it; its version is its own.
    let DelegateConfig::Plugin(c) = &s.delegates[1].config else { panic!("one plugin") };
    assert_eq!((c.name(), c.version(), c.plugin_type()), ("local", "0.4.0", "macvlan"));
    assert_eq!(s.delegates[1].runtime_config.len(), 3);
    // .json is the last resort.
    assert_eq!(s.delegates[2].name(), "plain");

    for (value, want) in [
        ("team-b/secret", "element 0 (network team-b/secret): namespace \"team-b\" is not allowed: a pod of namespace \"team-a\" may select networks of its own namespace and of globalNamespaces [\"default\"] only"),
        ("plain,nosuch", "element 1 (network team-a/nosuch): unknown network: no "),
        ("misnamed", "misnamed.conflist: its name is \"other\", not \"misnamed\""),
        ("broken", "broken.conflist: "),
        (r#"[{"name":"plain","mac":"02:00:00:00:00:01"}]"#, "element 0 (network team-a/plain): mac requested, but no plugin of the network declares the capability \"mac\""),
        (r#"[{"name":"global","namespace":"default","infiniband-guid":"00:11:22:33:44:55:66:77"}]"#, "infiniband-guid requested, but no plugin of the network declares the capability \"infinibandGUID\""),
        (r#"[{"name":"plain","interface":"eth0"}]"#, "interface eth0 is already used by configured delegate 0"),
        ("plain@x1,local@x1", "element 1 (network team-a/local): interface x1 is already used by element 0 (network team-a/plain)"),
    ] {
        let m = refusal(&d.0, value);
        assert!(m.contains(want), "{value}: {m}");
    }
    // Another namespace is fine once it is global.
    let mut k = kconf(&d.0);
    k.global_namespaces.push("team-b".into());
    let s = select(&k, &delegator(Some(json!({ NETWORKS: "team-b/secret" }))), ARGS, &cluster()).unwrap();
    assert_eq!(s.networks[0].name, "team-b/secret");
}

#[test]
fn a_definition_mirrored_from_a_nad_keeps_its_own_network_name() {
    let d = Dir::new("nad");
    let src = |ns: &str, name: &str| json!({"namespace": ns, "name": name, "uid": "u", "resourceVersion": "1"});
    let def = |s: Value| {
        json!({"cniVersion": "1.0.0", "name": "macvlan-network", "plugins": [{"type": "ptp"}], super::names::NAD_SOURCE: s})
            .to_string()
    };
    d.put("team-a/macvlan-conf.conflist", &def(src("team-a", "macvlan-conf")));
    d.put("team-a/copied.conflist", &def(src("team-a", "macvlan-conf")));
    d.put("team-a/elsewhere.conflist", &def(src("team-b", "elsewhere")));
    let s = select(&kconf(&d.0), &delegator(Some(json!({ NETWORKS: "macvlan-conf" }))), ARGS, &cluster()).unwrap();
    let DelegateConfig::List(l) = &s.delegates[0].config else { panic!("a conflist") };
    // The plugins run under the NAD's own network name; the status names the NAD.
    assert_eq!((l.name.as_str(), s.networks[0].name.as_str()), ("macvlan-network", "team-a/macvlan-conf"));
    // braid's key is not handed on.
    assert!(l.plugins.iter().all(|p| p.get(super::names::NAD_SOURCE).is_none()));
    // The key must name this very NAD (namespace and name) to excuse the other name.
    for other in ["copied", "elsewhere"] {
        let m = refusal(&d.0, other);
        assert!(m.contains("its name is \"macvlan-network\""), "{other}: {m}");
    }
}

#[test]
fn a_definition_pins_args_cni_keys_a_pod_may_not_set() {
    let d = Dir::new("pinned");
    d.put(
        "team-a/pinned.conflist",
        r#"{"cniVersion":"1.0.0","name":"pinned","pinnedCniArgs":["ips","vlan"],"plugins":[{"type":"bridge","args":{"cni":{"ips":["198.18.4.4/24"]}}},{"type":"tuning"}]}"#,
    );
    d.put("team-a/sealed.conf", r#"{"cniVersion":"1.0.0","type":"ptp","pinnedCniArgs":true,"args":{"cni":{"a":1}}}"#);
    d.put("team-a/open.conf", r#"{"cniVersion":"1.0.0","type":"ptp","pinnedCniArgs":[],"args":{"cni":{"a":1}}}"#);
    d.put("team-a/typo.conf", r#"{"cniVersion":"1.0.0","type":"ptp","pinnedCniArgs":"ips"}"#);
    d.put("team-a/typo2.conf", r#"{"cniVersion":"1.0.0","type":"ptp","pinnedCniArgs":["ips", 5]}"#);
    // A key the definition pins is refused, whether the definition sets it (ips) or not (vlan).
    for key in ["ips", "vlan"] {
        let m = refusal(&d.0, &format!(r#"[{{"name":"pinned","cni-args":{{"labels":1,"{key}":["198.18.4.9/24"]}}}}]"#));
        assert!(
            m.contains(&format!(
                "element 0 (network team-a/pinned): cni-args \"{key}\" is pinned by the network's definition"
            )) && m.contains("pinned.conflist (pinnedCniArgs): a pod may not set it"),
            "{m}"
        );
    }
    // Other keys are merged as always; braid's own key never reaches a plugin.
    let s = select_with(&d.0, r#"[{"name":"pinned","cni-args":{"labels":[1]}}]"#).unwrap();
    let DelegateConfig::List(l) = &s.delegates[0].config else { panic!("a conflist") };
    assert_eq!(l.plugins[0].get("args"), Some(&json!({"cni": {"ips": ["198.18.4.4/24"], "labels": [1]}})));
    assert_eq!(l.plugins[1].get("args"), Some(&json!({"cni": {"labels": [1]}})));
    let recorded: Value = serde_json::from_slice(&l.bytes).unwrap();
    assert!(recorded.get("pinnedCniArgs").is_none(), "{recorded}");
    // true pins every key; the network still works without cni-args.
    assert!(refusal(&d.0, r#"[{"name":"sealed","cni-args":{"b":2}}]"#).contains("cni-args \"b\" is pinned"));
    let s = select_with(&d.0, "sealed").unwrap();
    let DelegateConfig::Plugin(c) = &s.delegates[0].config else { panic!("one plugin") };
    assert_eq!((c.get("args"), c.get("pinnedCniArgs")), (Some(&json!({"cni": {"a": 1}})), None));
    // Nothing pinned: the NPWG default, the annotation wins.
    let s = select_with(&d.0, r#"[{"name":"open","cni-args":{"a":2}}]"#).unwrap();
    let DelegateConfig::Plugin(c) = &s.delegates[0].config else { panic!("one plugin") };
    assert_eq!(c.get("args"), Some(&json!({"cni": {"a": 2}})));
    for typo in ["typo", "typo2"] {
        let m = refusal(&d.0, typo);
        assert!(m.contains("pinnedCniArgs must be true or a list of args.cni key names, not "), "{m}");
    }
}

#[test]
fn definitions_are_regular_files_never_a_fifo_a_symlink_or_a_flood() {
    let d = Dir::new("planted");
    d.put("team-a/real.conflist", r#"{"cniVersion":"1.0.0","name":"real","plugins":[{"type":"ptp"}]}"#);
    assert!(std::process::Command::new("mkfifo").arg(d.0.join("team-a/fifo.conflist")).status().unwrap().success());
    std::os::unix::fs::symlink(d.0.join("team-a/real.conflist"), d.0.join("team-a/link.conflist")).unwrap();
    d.put("team-a/huge.conflist", &" ".repeat((1 << 20) + 1));
    for (name, why) in [
        ("fifo", "fifo.conflist: not a regular file"),
        ("link", "link.conflist: Too many levels of symbolic links"),
        ("huge", "huge.conflist: larger than 1048576 bytes"),
    ] {
        let m = refusal(&d.0, name);
        assert!(m.contains(&format!("element 0 (network team-a/{name}): definition ")) && m.contains(why), "{m}");
    }
    assert_eq!(select_with(&d.0, "real").unwrap().delegates.len(), 1);
}

#[test]
fn without_annotations_configured_delegates_only() {
    let d = Dir::new("none");
    let s = select(&kconf(&d.0), &delegator(None), ARGS, &cluster()).unwrap();
    assert!(s.delegates.is_empty() && s.info.as_deref().is_some_and(|i| i.contains(POD_ANNOTATIONS)));
    let s = select(&kconf(&d.0), &delegator(Some(json!({"other": "x"}))), ARGS, &cluster()).unwrap();
    assert!(s.delegates.is_empty() && s.info.is_none());
    let e = select(&kconf(&d.0), &delegator(Some(json!({ NETWORKS: "a" }))), "K8S_POD_NAME=x", &cluster()).unwrap_err();
    assert_eq!(e, SelectionError::NoPodNamespace);
    let e = select(&kconf(&d.0), &delegator(Some(json!([1]))), ARGS, &cluster()).unwrap_err();
    assert!(e.to_string().contains("must be an object of strings"), "{e}");
}

#[test]
fn the_kubernetes_block() {
    let conf = |k: Value| NetConf::parse(json!({"name": "n", "kubernetes": k}).to_string().as_bytes()).unwrap();
    assert_eq!(Config::parse(&NetConf::parse(br#"{"name":"n"}"#).unwrap()).unwrap(), None);
    assert_eq!(
        Config::parse(&conf(json!({}))).unwrap(),
        Some(Config {
            networks_dir: "/etc/cni/braid.d".into(),
            global_namespaces: vec!["default".into()],
            status_dir: "/run/braid/network-status".into(),
            claims_dir: "/var/lib/braid/claims".into(),
            kubelet: devices::Kubelet {
                socket: "/var/lib/kubelet/pod-resources/kubelet.sock".into(),
                timeout: std::time::Duration::from_secs(10),
                dra_devices: "/var/lib/braid/dra-devices/devices.json".into(),
            },
            default_network_namespace: "kube-system".into(),
            default_network_pod_namespace: false,
        })
    );
    let c = Config::parse(&conf(json!({"defaultNetworkNamespace": "nets", "defaultNetworkPodNamespace": true})))
        .unwrap()
        .unwrap();
    assert_eq!((c.default_network_namespace.as_str(), c.default_network_pod_namespace), ("nets", true));
    let c = Config::parse(&conf(
        json!({"podResourcesSocket": "/k.sock", "podResourcesTimeout": 2.5, "draDevicesFile": "/d.json"}),
    ))
    .unwrap()
    .unwrap();
    assert_eq!(
        c.kubelet,
        devices::Kubelet {
            socket: "/k.sock".into(),
            timeout: std::time::Duration::from_millis(2500),
            dra_devices: "/d.json".into()
        }
    );
    assert_eq!(Config::parse(&conf(json!({"claimsDir": "/c"}))).unwrap().unwrap().claims_dir, Path::new("/c"));
    let c =
        Config::parse(&conf(json!({"networksDir": "/n", "globalNamespaces": [], "statusDir": "/s"}))).unwrap().unwrap();
    assert_eq!(
        (c.networks_dir.to_str(), c.global_namespaces.len(), c.status_dir.to_str()),
        (Some("/n"), 0, Some("/s"))
    );
    for (bad, want) in [
        (json!(true), "kubernetes: must be an object, not true"),
        (json!({"networksDir": ""}), "networksDir must be a non-empty path"),
        (json!({"globalNamespaces": "default"}), "globalNamespaces must be a list"),
        (json!({"defaultNetworkNamespace": "Kube_System"}), "defaultNetworkNamespace must be a namespace name"),
        (json!({"defaultNetworkPodNamespace": "yes"}), "defaultNetworkPodNamespace must be true or false"),
        (json!({"globalNamespaces": ["Default"]}), "\"Default\" is not one"),
        (json!({"networkDir": "/x"}), "unknown key \"networkDir\""),
        (json!({"podResourcesSocket": 5}), "podResourcesSocket must be a non-empty path"),
        (json!({"podResourcesTimeout": 0}), "podResourcesTimeout must be a number of seconds above 0"),
        (json!({"podResourcesTimeout": "10"}), "podResourcesTimeout must be a number of seconds above 0"),
        (json!({"claimsDir": ""}), "claimsDir must be a non-empty path"),
        (json!({"draDevicesFile": 1}), "draDevicesFile must be a non-empty path"),
    ] {
        let e = Config::parse(&conf(bad.clone())).unwrap_err().to_string();
        assert!(e.contains(want), "{bad}: {e}");
    }
}

#[test]
fn pods_and_status_paths() {
    let p = Pod::from_args("K8S_POD_NAMESPACE=a;K8S_POD_NAME=web-0.x;K8S_POD_NAMESPACE=team-a");
    assert_eq!((p.namespace.as_deref(), p.name.as_deref(), p.uid.as_deref()), (Some("team-a"), Some("web-0.x"), None));
    let with_uid = Pod::from_args("K8S_POD_NAMESPACE=a;K8S_POD_NAME=b;K8S_POD_UID=0b9a-77");
    assert_eq!(with_uid.uid.as_deref(), Some("0b9a-77"));
    let dir = Path::new("/s");
    assert_eq!(status::path(dir, &p, "c1"), Some(PathBuf::from("/s/team-a_web-0.x_c1.json")));
    assert_eq!(status::path(dir, &Pod::from_args("K8S_POD_NAME=x"), "c1"), None);
    for bad in ["..", "a/b", ".x", ""] {
        let pod = Pod { namespace: Some("ns".into()), name: Some(bad.into()), uid: None };
        assert_eq!(status::path(dir, &pod, "c1"), None, "{bad}");
    }
}

#[test]
fn status_documents_one_entry_per_sandbox_interface() {
    let r1 = AnyResult::create_from_value(
        "1.0.0",
        &json!({"cniVersion": "1.0.0",
            "interfaces": [{"name": "cni0", "mac": "02:00:00:00:00:01"}, {"name": "eth0", "mac": "02:00:00:00:00:02", "sandbox": "/ns"}],
            "ips": [{"address": "198.18.0.5/24", "interface": 1}, {"address": "198.18.0.6/24", "interface": 0}],
            "dns": {"nameservers": ["198.18.0.53"], "search": ["svc"]}}),
    )
    .unwrap();
    let r2 =
        AnyResult::create_from_value("0.2.0", &json!({"cniVersion": "0.2.0", "ip4": {"ip": "198.18.1.5/24"}})).unwrap();
    let networks = [
        StatusNetwork { name: "cluster".into(), default: true, default_route: None, device_info: None, claim: None },
        StatusNetwork {
            name: "team-a/plain".into(),
            default: false,
            default_route: Some(vec!["198.18.1.1".parse().unwrap()]),
            device_info: Some(json!({"type": "pci", "version": "1.1.0", "pci": {"pci-address": "0000:00:1f.2"}})),
            claim: None,
        },
    ];
    let links = [cni_netlink::links::Link {
        name: "net1".into(),
        mac: vec![2, 0, 0, 0, 0, 9],
        mtu: 1500,
        index: 3,
        ..Default::default()
    }];
    // The 0.2.0 result names no interface: its MAC comes from the links, so they are read.
    assert!(status::needs_links(&[(&r1, "eth0", &networks[0]), (&r2, "net1", &networks[1])]));
    assert!(!status::needs_links(&[(&r1, "eth0", &networks[0])]), "every sandbox interface has its MAC");
    let no_mac = AnyResult::create_from_value(
        "1.0.0",
        &json!({"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": "/ns"}], "ips": []}),
    )
    .unwrap();
    assert!(status::needs_links(&[(&r1, "eth0", &networks[0]), (&no_mac, "net1", &networks[1])]));
    let doc = status::document(&[(&r1, "eth0", &networks[0]), (&r2, "net1", &networks[1])], &links);
    assert_eq!(
        doc,
        json!([
            {"name": "cluster", "interface": "eth0", "ips": ["198.18.0.5"], "mac": "02:00:00:00:00:02", "default": true,
             "dns": {"nameservers": ["198.18.0.53"], "search": ["svc"]}},
            {"name": "team-a/plain", "interface": "net1", "ips": ["198.18.1.5"], "mac": "02:00:00:00:00:09", "default": false,
             "default-route": ["198.18.1.1"],
             "device-info": {"type": "pci", "version": "1.1.0", "pci": {"pci-address": "0000:00:1f.2"}}}
        ])
    );
    // Beside it, what the agent's AddedInterface Events say: each interface's addresses with prefix.
    let (same, addresses) = status::with_addresses(&[(&r1, "eth0", &networks[0]), (&r2, "net1", &networks[1])], &links);
    assert_eq!(same, doc);
    let prefixed = |v: &Value| v.as_str().unwrap().contains('/');
    assert!(addresses["eth0"].as_array().unwrap().iter().all(prefixed), "{addresses}");
    assert_eq!(addresses.as_object().unwrap().len(), 2, "{addresses}");
    let d = Dir::new("status");
    let path = d.0.join("deep/team-a_web_c.json");
    status::write(
        &path,
        &status::file(doc.clone(), status::Record { pod_uid: Some("5f0c-uid"), ..Default::default() }),
    )
    .unwrap();
    let back: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(back, json!({"networkStatus": doc, "podUID": "5f0c-uid"}));
    assert_eq!(
        status::file(json!([]), status::Record::default()),
        json!({"networkStatus": []}),
        "no podUID without K8S_POD_UID"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
    assert_eq!(std::fs::read_dir(path.parent().unwrap()).unwrap().count(), 1, "no temporary file left");
    status::remove(&path).unwrap();
    status::remove(&path).unwrap();
    assert!(!path.exists());
}

#[test]
fn a_definition_names_its_resource_by_its_nad_or_by_its_own_key() {
    let d = Dir::new("resource");
    let r = super::names::RESOURCE_NAME;
    let src = |ns: &str, name: &str| json!({"namespace": ns, "name": name, "uid": "u", "resourceVersion": "1", r: "braid.test/fakevf"});
    let def = |extra: (&str, Value)| {
        let mut v = json!({"cniVersion": "1.0.0", "plugins": [{"type": "ptp"}]});
        v[extra.0] = extra.1;
        v.to_string()
    };
    d.put("team-a/nad.conflist", &def((super::names::NAD_SOURCE, src("team-a", "nad"))));
    d.put("team-a/cm.conflist", &def((r, json!("vendor.example/vf_a"))));
    let copied = json!({"cniVersion": "1.0.0", "name": "other", "plugins": [{"type": "ptp"}], super::names::NAD_SOURCE: src("team-a", "nad")});
    d.put("team-a/copied.conflist", &copied.to_string());
    d.put("team-a/bad.conflist", &def((r, json!("no-slash"))));
    d.put("team-a/n.conflist", &def(("x", json!(1))));
    let s = select_with(&d.0, "nad,cm,n").unwrap();
    assert_eq!(s.resources, [Some("braid.test/fakevf".into()), Some("vendor.example/vf_a".into()), None]);
    // braid's key is not handed on to the plugins.
    let DelegateConfig::List(l) = &s.delegates[1].config else { panic!("a conflist") };
    assert!(l.plugins.iter().all(|p| p.get(r).is_none()) && !String::from_utf8_lossy(&l.bytes).contains(r));
    // Another NAD's record names no resource for this network (and its name then does not fit).
    assert!(refusal(&d.0, "copied").contains("its name is"));
    let m = refusal(&d.0, "bad");
    assert!(m.contains("must be a resource name") && m.contains("\"no-slash\""), "{m}");
}

const ARGS_UID: &str = "IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=web-0;K8S_POD_UID=pod-1";

/// Writes the record of claim `name` (UID `uid`) for pod `pod-1`: one network per
/// `(request, element)`.
fn claim(dir: &Path, name: &str, uid: &str, nets: &[(&str, Value)]) {
    use braid_attach::claim_record::{write, Claim, ClaimRecord, Network};
    let networks = nets
        .iter()
        .map(|(request, element)| Network {
            request: request.to_string(),
            driver: "net.braid-cni.io".into(),
            pool: "node2".into(),
            device: format!("dev-{request}"),
            share_id: (*request != "noshare").then(|| format!("share-{uid}")),
            element: element.as_object().unwrap().clone(),
            metadata: None,
        })
        .collect();
    let record =
        ClaimRecord { claim: Claim { namespace: "team-a".into(), name: name.into(), uid: uid.into() }, networks };
    write(&dir.join("claims"), "pod-1", &record).unwrap();
}

fn select_claims(dir: &Path, annotations: Option<Value>) -> Result<Selection, SelectionError> {
    select(&kconf(dir), &delegator(annotations), ARGS_UID, &cluster())
}

#[test]
fn claims_networks_follow_the_annotations_by_claim_name_and_continue_its_interface_names() {
    let d = Dir::new("claims");
    let _n = networks(&d.0);
    claim(&d.0, "zeta", "c-1", &[("a", json!({"name": "plain"}))]);
    claim(
        &d.0,
        "alpha",
        "c-2",
        &[
            ("r1", json!({"name": "global", "namespace": "default", "interface": "side0", "ips": ["198.18.9.5/24"]})),
            ("noshare", json!({"name": "plain", "cni-args": {"x": "y"}})),
        ],
    );
    let s = select_claims(&d.0, Some(json!({ NETWORKS: "plain,local@lan0" }))).unwrap();
    let got: Vec<_> = s
        .networks
        .iter()
        .zip(&s.delegates)
        .map(|(n, d)| {
            let c = n.claim.as_ref().map(|c| format!("{}/{}:{}", c.claim.name, c.request, c.device));
            (n.name.as_str(), d.ifname.as_str(), d.auto_ifname, c)
        })
        .collect();
    assert_eq!(
        got,
        [
            ("team-a/plain", "net1", true, None),
            ("team-a/local", "lan0", false, None),
            ("default/global", "side0", false, Some("alpha/r1:dev-r1".into())),
            ("team-a/plain", "net2", true, Some("alpha/noshare:dev-noshare".into())),
            ("team-a/plain", "net3", true, Some("zeta/a:dev-a".into())),
        ]
    );
    let c = s.networks[2].claim.as_ref().unwrap();
    assert_eq!((c.claim.uid.as_str(), c.driver.as_str(), c.pool.as_str()), ("c-2", "net.braid-cni.io", "node2"));
    assert_eq!(
        (c.share_id.as_deref(), s.networks[3].claim.as_ref().unwrap().share_id.as_deref()),
        (Some("share-c-2"), None)
    );
    // Requests as an annotation element's: ips to the network's plugins, cni-args into args.cni.
    assert_eq!(s.delegates[2].runtime_config["ips"], json!(["198.18.9.5/24"]));
    let DelegateConfig::Plugin(p) = &s.delegates[3].config else { panic!("one plugin") };
    assert_eq!(p.get("args"), Some(&json!({"cni": {"x": "y"}})));
    // Selectors: a claim's names its claim and request, so no annotation element asks for it.
    let sel = |i: usize| -> Value { serde_json::from_str(s.delegates[i].selector.as_deref().unwrap()).unwrap() };
    assert_eq!(sel(0), json!({"network": "team-a/plain"}));
    assert_eq!(sel(3), json!({"network": "team-a/plain", "claim": "c-2/noshare", "cni-args": {"x": "y"}}));
    assert_eq!(sel(4), json!({"network": "team-a/plain", "claim": "c-1/a"}));
    assert_eq!(status_network(s.delegates[4].selector.as_deref().unwrap()).name, "team-a/plain");
    assert_eq!(s.requested.as_deref(), Some("plain,local@lan0"));
    assert_eq!(s.resources, [None, None, None, None, None]);
}

#[test]
fn a_pod_without_annotations_still_gets_its_claims_and_one_without_a_uid_none() {
    let d = Dir::new("claims-only");
    let _n = networks(&d.0);
    claim(&d.0, "c", "c-1", &[("r", json!({"name": "plain"}))]);
    for annotations in [None, Some(json!({})), Some(json!({ NETWORKS: "" })), Some(json!({ NETWORKS: "[]" }))] {
        let s = select_claims(&d.0, annotations.clone()).unwrap();
        let names: Vec<_> = s.networks.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["team-a/plain"], "{annotations:?}");
        assert!(s.info.is_none(), "no \"configured delegates only\" line: {:?}", s.info);
        assert_eq!(s.delegates[0].ifname, "net1");
    }
    // Without K8S_POD_UID (or with one that is no UID) no claim directory is looked at.
    let s = select(&kconf(&d.0), &delegator(None), ARGS, &cluster()).unwrap();
    assert!(s.delegates.is_empty() && s.info.is_some());
    let bad = ARGS_UID.replace("pod-1", "../claims/pod-1");
    assert!(select(&kconf(&d.0), &delegator(None), &bad, &cluster()).unwrap().delegates.is_empty());
    // Another pod: its own directory, none.
    let other = ARGS_UID.replace("pod-1", "pod-2");
    assert!(select(&kconf(&d.0), &delegator(None), &other, &cluster()).unwrap().delegates.is_empty());
    // A claim needs the pod's namespace as an annotation does.
    let e = select(&kconf(&d.0), &delegator(None), "K8S_POD_UID=pod-1", &cluster()).unwrap_err();
    assert_eq!(e, SelectionError::NoPodNamespace);
}

fn claim_refusal(d: &Dir, annotation: &str, element: Value) -> cni_types::CniError {
    claim(&d.0, "web-net", "c-9", &[("net", element)]);
    let e = select_claims(&d.0, Some(json!({ NETWORKS: annotation }))).unwrap_err();
    e.into()
}

#[test]
fn a_claims_network_is_refused_as_an_annotation_element_is_naming_the_claim() {
    let d = Dir::new("claims-refused");
    let _n = networks(&d.0);
    let claimed = "resource claim team-a/web-net, request net";
    for (annotation, element, want) in [
        ("", json!({"name": "secret", "namespace": "team-b"}), format!("{claimed} (network team-b/secret): namespace \"team-b\" is not allowed: a pod of namespace \"team-a\" may select networks of its own namespace and of globalNamespaces [\"default\"] only")),
        ("plain@x1", json!({"name": "local", "interface": "x1"}), format!("{claimed} (network team-a/local): interface x1 is already used by element 0 (network team-a/plain)")),
        ("", json!({"name": "plain", "interface": "eth0"}), format!("{claimed} (network team-a/plain): interface eth0 is already used by configured delegate 0")),
        ("", json!({"name": "nosuch"}), format!("{claimed} (network team-a/nosuch): unknown network: no ")),
        ("", json!({"name": "plain", "mac": "02:00:00:00:00:01"}), format!("{claimed} (network team-a/plain): mac requested, but no plugin")),
        ("", json!({"name": "plain", "bogus": 1}), format!("{claimed}: unknown key \"bogus\"")),
        ("", json!({"name": "Plain"}), format!("{claimed}: name \"Plain\" is not a DNS-1123 label")),
        ("", json!({"interface": "x"}), format!("{claimed}: has no \"name\"")),
        (r#"[{"name":"plain","default-route":["198.18.7.1"]}]"#, json!({"name": "local", "default-route": []}),
         format!("{claimed} (network team-a/local): default-route is already requested by element 0 (network team-a/plain)")),
    ] {
        let e = claim_refusal(&d, annotation, element.clone());
        assert_eq!(e.code, cni_types::error::INVALID_NETWORK_CONFIG, "{element}: {e:?}");
        assert!(e.msg.starts_with(&want), "{element}:\n {}\n wanted {want}", e.msg);
    }
    // A claim's explicit name is taken for the claims after it too.
    claim(
        &d.0,
        "web-net",
        "c-9",
        &[("a", json!({"name": "plain", "interface": "x2"})), ("b", json!({"name": "local", "interface": "x2"}))],
    );
    let e = select_claims(&d.0, None).unwrap_err().to_string();
    assert!(e.contains("request b (network team-a/local): interface x2 is already used by resource claim team-a/web-net request a (network team-a/plain)"), "{e}");
}

#[test]
fn a_malformed_claim_record_refuses_the_selection_naming_its_file() {
    let d = Dir::new("claims-bad");
    let _n = networks(&d.0);
    claim(&d.0, "good", "c-1", &[("r", json!({"name": "plain"}))]);
    let bad = d.0.join("claims/pod-1/c-2.json");
    std::fs::write(
        &bad,
        r#"{"claim": {"namespace": "team-a", "name": "x", "uid": "c-2"}, "networks": [{"request": "r"}]}"#,
    )
    .unwrap();
    let e: cni_types::CniError = select_claims(&d.0, None).unwrap_err().into();
    assert_eq!(e.code, cni_types::error::INVALID_NETWORK_CONFIG);
    assert!(e.msg.starts_with(&format!("pod pod-1: claim record {}: malformed: ", bad.display())), "{}", e.msg);
    // One the file system will not give (a symlink: never followed): trying again may help.
    std::fs::remove_file(&bad).unwrap();
    std::os::unix::fs::symlink(d.0.join("claims/pod-1/c-1.json"), &bad).unwrap();
    let e: cni_types::CniError = select_claims(&d.0, None).unwrap_err().into();
    assert_eq!(e.code, cni_types::error::TRY_AGAIN_LATER, "{}", e.msg);
    assert!(e.msg.contains(&bad.display().to_string()), "{}", e.msg);
}

#[test]
fn the_status_file_lists_the_claims_with_their_interfaces() {
    let c = |uid: &str, share: Option<&str>| claims::ClaimNetwork {
        claim: braid_attach::claim_record::Claim { namespace: "t".into(), name: format!("n-{uid}"), uid: uid.into() },
        request: "net".into(),
        driver: "net.braid-cni.io".into(),
        pool: "node2".into(),
        device: "t-side-1a2b3c4d".into(),
        share_id: share.map(str::to_string),
        metadata: None,
    };
    let (a, b) = (c("u-1", Some("s-1")), c("u-2", None));
    let file = status::file(json!([]), status::Record { claims: &[(&a, "net2"), (&b, "side0")], ..Default::default() });
    assert_eq!(
        file,
        json!({"networkStatus": [], "claims": [
            {"namespace": "t", "name": "n-u-1", "uid": "u-1", "request": "net", "driver": "net.braid-cni.io",
             "pool": "node2", "device": "t-side-1a2b3c4d", "shareID": "s-1", "interface": "net2"},
            {"namespace": "t", "name": "n-u-2", "uid": "u-2", "request": "net", "driver": "net.braid-cni.io",
             "pool": "node2", "device": "t-side-1a2b3c4d", "interface": "side0"}
        ]})
    );
    assert!(status::file(json!([]), status::Record::default()).get("claims").is_none(), "none: no key");
}

#[test]
fn a_claims_device_metadata_gets_each_interfaces_network_data() {
    use braid_attach::device_metadata as md;
    let d = Dir::new("metadata");
    let c = md::ClaimRef { namespace: "t".into(), name: "web-net".into(), uid: "u-1".into(), pod_claim_name: None };
    let path = md::file(&d.0, "t", "web-net", "net").unwrap();
    let spec = d.0.join("cdi/spec.json");
    let devices = vec![
        md::device("net.braid-cni.io", "node2", "t-side-1", json!({})),
        md::device("net.braid-cni.io", "node2", "t-storage-2", json!({})),
    ];
    md::prepare(&path, &md::document(&c, 1, "net", devices), &spec, &json!({})).unwrap();
    let net = |device: &str| claims::ClaimNetwork {
        claim: braid_attach::claim_record::Claim { namespace: "t".into(), name: "web-net".into(), uid: "u-1".into() },
        request: "net".into(),
        driver: "net.braid-cni.io".into(),
        pool: "node2".into(),
        device: device.into(),
        share_id: None,
        metadata: Some(path.to_string_lossy().into_owned()),
    };
    let (a, b) = (net("t-side-1"), net("t-storage-2"));
    let doc = json!([{"name": "t/side", "interface": "side0", "mac": "02:00:00:00:09:05"}, {"name": "t/storage", "interface": "net2"}]);
    let addresses = json!({"side0": ["198.18.9.5/24"], "net2": ["198.18.10.5/24", "2001:db8::5/64"]});
    claims::fill_metadata(&[(&a, "side0"), (&b, "net2")], &doc, &addresses).unwrap();
    let filled: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(filled["metadata"]["generation"], 2);
    let devs = &filled["requests"][0]["devices"];
    assert_eq!(
        devs[0]["networkData"],
        json!({"interfaceName": "side0", "ips": ["198.18.9.5/24"], "hardwareAddress": "02:00:00:00:09:05"})
    );
    assert_eq!(devs[1]["networkData"], json!({"interfaceName": "net2", "ips": ["198.18.10.5/24", "2001:db8::5/64"]}));
    // A file gone (removed by hand): the ADD fails naming the claim and the file, code 5.
    std::fs::remove_file(&path).unwrap();
    let e = claims::fill_metadata(&[(&a, "side0")], &doc, &addresses).unwrap_err();
    assert_eq!(e.code, 5);
    assert!(e.msg.contains("claim t/web-net") && e.msg.contains("metadata.json"), "{}", e.msg);
    // No metadata: nothing to do.
    claims::fill_metadata(&[(&net_without(&a), "side0")], &doc, &addresses).unwrap();
}

fn net_without(c: &claims::ClaimNetwork) -> claims::ClaimNetwork {
    claims::ClaimNetwork { metadata: None, ..c.clone() }
}
