//! Which pod interfaces of `prevResult` get a tap, and the tap's name: decided from the
//! result and the keys alone, before the namespace is touched.

use crate::config::{invalid, Keys};
use cni_skel::cni_types::{CniError, CniResult};

/// One pod interface to hand to the VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wire {
    /// The pod interface's name (in the pod namespace).
    pub pod: String,
    /// Its index in `prevResult.interfaces`.
    pub index: usize,
    /// The tap to create beside it.
    pub tap: String,
}

/// The interfaces to redirect, in result order. `in_pod` says whether an interface's `sandbox`
/// is the pod namespace (`CNI_NETNS`); `taps` are the taps the result already has (an earlier
/// vmtap's), which are not pod interfaces to redirect.
///
/// Refused (code 7, naming the key or interface): an `interfaces` entry that is not a pod
/// interface of the result; a `tapNames` key that is not one of the redirected interfaces; a
/// tap name that is also the name of a pod interface; no pod interface at all.
pub fn plan(
    prev: &CniResult,
    keys: &Keys,
    in_pod: &dyn Fn(&str) -> bool,
    taps: &[String],
) -> Result<Vec<Wire>, CniError> {
    let pod: Vec<(usize, &str)> = prev
        .interfaces
        .iter()
        .enumerate()
        .filter(|(_, i)| !i.sandbox.is_empty() && in_pod(&i.sandbox) && !taps.contains(&i.name))
        .map(|(n, i)| (n, i.name.as_str()))
        .collect();
    for (k, (_, name)) in pod.iter().enumerate() {
        if pod[..k].iter().any(|(_, other)| other == name) {
            return Err(invalid(format!("prevResult names the pod interface {name} twice")));
        }
    }
    if let Some(list) = &keys.interfaces {
        for name in list {
            if !pod.iter().any(|(_, p)| p == name) {
                let msg = format!("interfaces: {name:?} is not an interface of prevResult in the pod namespace");
                return Err(invalid(msg).context_details(&pod));
            }
        }
    }
    let chosen: Vec<(usize, &str)> = match &keys.interfaces {
        Some(list) => pod.into_iter().filter(|(_, p)| list.iter().any(|n| n == p)).collect(),
        None => pod,
    };
    if chosen.is_empty() {
        return Err(invalid(
            "prevResult has no interface in the pod namespace (sandbox = CNI_NETNS) to hand to a VM: \
             place vmtap after the plugin that creates the pod's interfaces",
        ));
    }
    for key in keys.tap_names.keys() {
        if !chosen.iter().any(|(_, p)| p == key) {
            return Err(invalid(format!("tapNames: {key:?} is not one of the interfaces vmtap redirects")));
        }
    }
    let wires: Vec<Wire> = chosen
        .iter()
        .enumerate()
        .map(|(k, (index, name))| Wire {
            pod: name.to_string(),
            index: *index,
            tap: keys.tap_names.get(*name).cloned().unwrap_or_else(|| format!("tap{k}")),
        })
        .collect();
    for w in &wires {
        if prev.interfaces.iter().any(|i| i.name == w.tap && !i.sandbox.is_empty() && in_pod(&i.sandbox)) {
            return Err(invalid(format!(
                "the tap name {} is the name of a pod interface of prevResult: choose another in tapNames",
                w.tap
            )));
        }
        if wires.iter().filter(|o| o.tap == w.tap).count() > 1 {
            return Err(invalid(format!("two interfaces would get the tap {}: set tapNames", w.tap)));
        }
    }
    Ok(wires)
}

trait Details {
    fn context_details(self, pod: &[(usize, &str)]) -> CniError;
}

impl Details for CniError {
    /// Lists the interfaces that could have been named.
    fn context_details(mut self, pod: &[(usize, &str)]) -> CniError {
        let names: Vec<&str> = pod.iter().map(|(_, n)| *n).collect();
        self.details = format!("pod interfaces of prevResult: {}", names.join(", "));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cni_skel::cni_types::result::Interface;

    fn prev(ifaces: &[(&str, &str)]) -> CniResult {
        CniResult {
            cni_version: "1.0.0".into(),
            interfaces: ifaces
                .iter()
                .map(|(n, s)| Interface { name: n.to_string(), sandbox: s.to_string(), ..Interface::default() })
                .collect(),
            ..CniResult::default()
        }
    }

    fn in_pod(s: &str) -> bool {
        s == "/run/netns/pod"
    }

    fn keys(v: serde_json::Value) -> Keys {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn every_pod_interface_in_result_order_gets_tap_n() {
        let p = prev(&[("veth1", ""), ("eth0", "/run/netns/pod"), ("br0", ""), ("net1", "/run/netns/pod")]);
        let w = plan(&p, &Keys::default(), &in_pod, &[]).unwrap();
        assert_eq!(
            w,
            vec![
                Wire { pod: "eth0".into(), index: 1, tap: "tap0".into() },
                Wire { pod: "net1".into(), index: 3, tap: "tap1".into() }
            ]
        );
    }

    #[test]
    fn interfaces_and_tap_names_select_and_name() {
        let p = prev(&[("eth0", "/run/netns/pod"), ("net1", "/run/netns/pod"), ("net2", "/run/netns/pod")]);
        let k = keys(serde_json::json!({"interfaces": ["net2", "net1"], "tapNames": {"net2": "vm-storage"}}));
        let w = plan(&p, &k, &in_pod, &[]).unwrap();
        assert_eq!(w[0], Wire { pod: "net1".into(), index: 1, tap: "tap0".into() });
        assert_eq!(w[1], Wire { pod: "net2".into(), index: 2, tap: "vm-storage".into() });
    }

    #[test]
    fn refusals_name_the_key_and_the_interface() {
        let p = prev(&[("eth0", "/run/netns/pod"), ("veth9", "")]);
        let e = plan(&p, &keys(serde_json::json!({"interfaces": ["veth9"]})), &in_pod, &[]).unwrap_err();
        assert_eq!(e.code, 7);
        assert_eq!(e.msg, "interfaces: \"veth9\" is not an interface of prevResult in the pod namespace");
        assert_eq!(e.details, "pod interfaces of prevResult: eth0");
        let e = plan(&p, &keys(serde_json::json!({"tapNames": {"net1": "t"}})), &in_pod, &[]).unwrap_err();
        assert_eq!(e.msg, "tapNames: \"net1\" is not one of the interfaces vmtap redirects");
        let e = plan(&prev(&[("veth9", "")]), &Keys::default(), &in_pod, &[]).unwrap_err();
        assert!(e.msg.starts_with("prevResult has no interface in the pod namespace"));
        let e = plan(&p, &keys(serde_json::json!({"tapNames": {"eth0": "eth0"}})), &in_pod, &[]).unwrap_err();
        assert!(e.msg.starts_with("the tap name eth0 is the name of a pod interface"));
        let two = prev(&[("tap1", "/run/netns/pod"), ("net1", "/run/netns/pod")]);
        let e = plan(&two, &keys(serde_json::json!({"tapNames": {"tap1": "x"}})), &in_pod, &[]).unwrap_err();
        assert!(e.msg.starts_with("the tap name tap1 is the name of a pod interface"), "{}", e.msg);
        let e = plan(&prev(&[("eth0", "/run/netns/pod"), ("eth0", "/run/netns/pod")]), &Keys::default(), &in_pod, &[]);
        assert_eq!(e.unwrap_err().msg, "prevResult names the pod interface eth0 twice");
    }
}
