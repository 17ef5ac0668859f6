//! The default-network override: the pod annotation `v1.multus-cni.io/default-network`
//! (`[namespace/]name`, or one JSON selection element) replaces the node's primary — the
//! delegator's first delegate, the cluster network — as `CNI_IFNAME` (`eth0`) for that pod
//! with the named network, read node-locally (`<networksDir>/<namespace>/<name>`, the mirror
//! of a NetworkAttachmentDefinition) like any selected network: no API request on the ADD path.
//!
//! **What a pod may take as its primary.** A bare name resolves in the operator's namespace
//! (`defaultNetworkNamespace`, default `kube-system`, Multus's `multusNamespace`: manifests
//! written for Multus work unchanged), and the networks of that namespace are what any pod may
//! take. The pod's own namespace only when the operator says so (`defaultNetworkPodNamespace`),
//! another tenant's namespace never. Why braid is stricter than Multus, which takes any explicit
//! `namespace/name` (multus-cni `pkg/k8sclient/k8sclient.go` `tryLoadK8sPodDefaultNetwork`
//! parses the value with `multusNamespace` as the default namespace and checks nothing else):
//! the primary's result is the pod's identity to the cluster — its IPs become
//! `status.podIPs`, the addresses Endpoints, NetworkPolicy and the kubelet's probes trust. A
//! secondary network is the pod's own business; its primary is not. A tenant who may write NADs
//! in its namespace could, with that NAD as its primary, give its pod any address of any data
//! plane (another tenant's pod IPs among them); a pod that takes another tenant's network as
//! its primary joins that tenant's data plane as a first-class member. So the operator's
//! namespace — whose NADs only the operator writes — is the default, and the pod's own namespace
//! is an opt-in for clusters whose namespace admins are trusted with that.
//!
//! **Fixed for the sandbox's life.** The override is decided at ADD and recorded in the
//! delegator's state (the attachment's full configuration) and in the network-status file
//! (`defaultNetwork`): DEL releases what ADD attached from the state, whatever the annotation
//! or the mirrored definition says by then; an update (network hot-plug) never touches the
//! primary — it has no selector, as a configured delegate — so editing the annotation on a
//! running pod changes nothing until the pod's next sandbox (the pod recreated). The
//! annotation is immutable in practice for Multus too (it is read at ADD only).

use super::annotation::{self, Element};
use super::error::{Problem, SelectionError};
use super::names::{DEFAULT_NETWORK, POD_ANNOTATIONS};
use super::{resolve, Config, Pod, StatusNetwork};
use braid_attach::Delegate;
use cni_types::NetConf;
use serde_json::Value;

/// The operator's namespace for pods' default networks, when not configured: Multus's
/// `multusNamespace` default.
pub const DEFAULT_NAMESPACE: &str = "kube-system";

/// The network that replaces the primary, and how the network-status document names it.
#[derive(Debug)]
pub struct Primary {
    /// Its delegate, on `CNI_IFNAME`, offered the runtime's runtimeConfig as the cluster
    /// network is (portMappings, bandwidth: NPWG §7.5's "default network").
    pub delegate: Delegate,
    /// `namespace/name`, `default: true`.
    pub network: StatusNetwork,
}

/// Whether a pod of `pod_ns` may take a network of `namespace` as its primary; the namespaces
/// it may, when not.
pub fn allowed(k: &Config, namespace: &str, pod_ns: &str) -> Result<(), Vec<String>> {
    let mut ok = vec![k.default_network_namespace.clone()];
    if k.default_network_pod_namespace && pod_ns != k.default_network_namespace {
        ok.push(pod_ns.to_string());
    }
    if ok.iter().any(|n| n == namespace) {
        Ok(())
    } else {
        Err(ok)
    }
}

/// The pod's default network, when its annotation asks for one; `ifname` is `CNI_IFNAME`.
/// Validated before anything runs; refusals are code 7 and name the annotation, the network
/// and the pod.
pub fn select(k: &Config, conf: &NetConf, args: &str, ifname: &str) -> Result<Option<Primary>, SelectionError> {
    let Some(Value::Object(annotations)) = conf.runtime_config_raw().and_then(|rc| rc.get(POD_ANNOTATIONS)) else {
        return Ok(None);
    };
    let value = match annotations.get(DEFAULT_NETWORK) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(None),
        Some(Value::String(s)) => s,
        Some(v) => return Err(SelectionError::Annotations(format!("{DEFAULT_NETWORK} is {v}"))),
    };
    let p = Pod::from_args(args);
    let pod = match (&p.namespace, &p.name) {
        (Some(ns), Some(n)) => format!("{ns}/{n}"),
        (Some(ns), None) => format!("{ns}/?"),
        _ => "?".to_string(),
    };
    let fail = |network: Option<String>, problem| SelectionError::DefaultNetwork {
        pod: pod.clone(),
        network,
        problem: Box::new(problem),
    };
    let mut elements = annotation::parse(value).map_err(|e| match e {
        SelectionError::Element { problem, .. } => fail(None, problem),
        SelectionError::Malformed(why) => fail(None, Problem::NotOne(why)),
        other => other,
    })?;
    if elements.len() != 1 {
        return Err(fail(None, Problem::NotOne(format!("it names {} networks", elements.len()))));
    }
    let e: Element = elements.remove(0);
    let namespace = e.namespace.clone().unwrap_or_else(|| k.default_network_namespace.clone());
    let network = format!("{namespace}/{}", e.name);
    let fail = |problem| fail(Some(network.clone()), problem);
    let pod_ns = p.namespace.clone().ok_or_else(|| fail(Problem::NoPod))?;
    if let Err(ok) = allowed(k, &namespace, &pod_ns) {
        return Err(fail(Problem::NotAPrimary { namespace: namespace.clone(), pod: pod_ns, allowed: ok }));
    }
    if let Some(i) = e.interface.as_ref().filter(|i| *i != ifname) {
        return Err(fail(Problem::PrimaryKey {
            key: "interface",
            why: format!("{i:?} asked for, but the default network is always CNI_IFNAME ({ifname})"),
        }));
    }
    if e.default_route.is_some() {
        return Err(fail(Problem::PrimaryKey {
            key: "default-route",
            why: "the default network's own routes are the pod's default routes".into(),
        }));
    }
    let (mut d, resource) =
        resolve::delegate(&k.networks_dir, &namespace, &e, conf.version(), ifname.to_string(), false).map_err(&fail)?;
    if let Some(r) = resource {
        return Err(fail(Problem::PrimaryKey {
            key: super::names::RESOURCE_NAME,
            why: format!("the network is backed by the device-plugin resource {r}, which braid hands to selected networks only (not to a pod's default network)"),
        }));
    }
    // The cluster network's place: the runtime's own requests (portMappings, bandwidth, …) are
    // its, as they were the network it replaces (each still only where a plugin declares it).
    d.own_runtime_config_only = false;
    Ok(Some(Primary {
        delegate: d,
        network: StatusNetwork { name: network, default: true, default_route: None, device_info: None, claim: None },
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use crate::kubernetes::devices;
    use cni_types::error::INVALID_NETWORK_CONFIG;
    use serde_json::json;
    use std::path::PathBuf;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn dir(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("braid-default-net-{tag}-{}", std::process::id()));
        let put = |rel: &str, body: &str| {
            let p = d.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        };
        put(
            "kube-system/ovn.conflist",
            r#"{"cniVersion":"1.0.0","name":"ovn","plugins":[{"type":"bridge","capabilities":{"portMappings":true,"ips":true}}]}"#,
        );
        put("team-a/own.conf", r#"{"cniVersion":"1.0.0","name":"own","type":"ptp"}"#);
        put("team-b/theirs.conf", r#"{"cniVersion":"1.0.0","name":"theirs","type":"ptp"}"#);
        put(
            "kube-system/sriov.conf",
            r#"{"cniVersion":"1.0.0","name":"sriov","type":"host-device","k8s.v1.cni.cncf.io/resourceName":"example.com/vf"}"#,
        );
        Dir(d)
    }

    fn kconf(d: &Dir, own: bool) -> Config {
        Config {
            networks_dir: d.0.clone(),
            global_namespaces: vec!["default".into()],
            status_dir: d.0.join("status"),
            claims_dir: d.0.join("claims"),
            kubelet: devices::Kubelet::default(),
            default_network_namespace: DEFAULT_NAMESPACE.into(),
            default_network_pod_namespace: own,
        }
    }

    fn conf(value: Option<&str>) -> NetConf {
        let mut a = json!({"k8s.v1.cni.cncf.io/networks": "x"});
        if let Some(v) = value {
            a[DEFAULT_NETWORK] = json!(v);
        }
        let c = json!({"cniVersion": "1.0.0", "name": "braid", "type": "delegator", "delegates": [{"type": "ptp"}],
                       "runtimeConfig": {POD_ANNOTATIONS: a}});
        NetConf::parse(c.to_string().as_bytes()).unwrap()
    }

    const ARGS: &str = "K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=web-0";

    fn refused(k: &Config, value: &str) -> String {
        let e: cni_types::CniError = select(k, &conf(Some(value)), ARGS, "eth0").unwrap_err().into();
        assert_eq!(e.code, INVALID_NETWORK_CONFIG, "{e:?}");
        assert!(e.msg.starts_with(&format!("pod annotation {DEFAULT_NETWORK} of pod team-a/web-0")), "{}", e.msg);
        e.msg
    }

    #[test]
    fn a_bare_name_resolves_in_the_operators_namespace_and_becomes_eth0() {
        let d = dir("bare");
        let k = kconf(&d, false);
        assert!(select(&k, &conf(None), ARGS, "eth0").unwrap().is_none());
        assert!(select(&k, &conf(Some(" ")), ARGS, "eth0").unwrap().is_none());
        for value in ["ovn", "kube-system/ovn", r#"[{"name":"ovn","ips":["198.18.3.4/24"]}]"#] {
            let p = select(&k, &conf(Some(value)), ARGS, "eth0").unwrap().unwrap();
            assert_eq!(
                p.network,
                StatusNetwork {
                    name: "kube-system/ovn".into(),
                    default: true,
                    default_route: None,
                    device_info: None,
                    claim: None
                }
            );
            assert_eq!((p.delegate.ifname.as_str(), p.delegate.auto_ifname), ("eth0", false));
            assert_eq!(p.delegate.name(), "ovn");
            assert!(!p.delegate.own_runtime_config_only, "the runtime's requests go to the primary");
            assert_eq!(p.delegate.selector, None, "an update never touches it");
        }
        let p = select(&k, &conf(Some(r#"[{"name":"ovn","ips":["198.18.3.4/24"]}]"#)), ARGS, "eth0").unwrap().unwrap();
        assert_eq!(p.delegate.runtime_config.get("ips"), Some(&json!(["198.18.3.4/24"])));
    }

    #[test]
    fn only_the_operators_namespace_and_by_opt_in_the_pods_own() {
        let d = dir("allowed");
        let strict = kconf(&d, false);
        let m = refused(&strict, "team-a/own");
        assert!(m.contains("(network team-a/own)") && m.contains(r#"only networks of ["kube-system"]"#), "{m}");
        let m = refused(&strict, "team-b/theirs");
        assert!(
            m.contains("namespace \"team-b\" cannot be the default network of a pod of namespace \"team-a\""),
            "{m}"
        );
        let own = kconf(&d, true);
        assert_eq!(select(&own, &conf(Some("team-a/own")), ARGS, "eth0").unwrap().unwrap().network.name, "team-a/own");
        let m = refused(&own, "team-b/theirs");
        assert!(m.contains(r#"only networks of ["kube-system", "team-a"]"#), "{m}");
        assert_eq!(allowed(&own, "kube-system", "kube-system"), Ok(()));
        assert_eq!(allowed(&own, "x", "kube-system"), Err(vec!["kube-system".to_string()]));
    }

    #[test]
    fn refusals_name_the_annotation_the_network_and_the_pod() {
        let d = dir("refused");
        let k = kconf(&d, false);
        let m = refused(&k, "nope");
        assert!(m.contains("(network kube-system/nope): unknown network: no "), "{m}");
        assert!(refused(&k, "ovn,other").contains("must name exactly one network: it names 2 networks"));
        assert!(refused(&k, "Bad").contains("name \"Bad\" is not a DNS-1123 label"));
        assert!(refused(&k, "[1").contains("must name exactly one network"));
        assert!(refused(&k, "ovn@net1")
            .contains("interface: \"net1\" asked for, but the default network is always CNI_IFNAME (eth0)"));
        assert!(select(&k, &conf(Some("ovn@eth0")), ARGS, "eth0").unwrap().is_some());
        assert!(refused(&k, r#"[{"name":"ovn","default-route":[]}]"#).contains("default-route:"));
        assert!(refused(&k, "sriov").contains("device-plugin resource example.com/vf"));
        // A request the network's plugins cannot take, as for any selected network.
        assert!(refused(&k, r#"[{"name":"ovn","mac":"02:00:00:00:00:01"}]"#).contains("capability \"mac\""));
        let e = select(&k, &conf(Some("ovn")), "K8S_POD_NAME=web-0", "eth0").unwrap_err();
        assert!(e.to_string().contains("the pod's namespace is unknown"), "{e}");
    }
}
