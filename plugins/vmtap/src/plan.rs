//! Which pod interfaces of `prevResult` get a tap, and the tap's name: decided from the
//! result and the keys ([`select`], before the namespace is touched), then from the taps an
//! earlier ADD of the same attachment left ([`Selection::name`]: they keep their names).

use crate::config::{invalid, Keys};
use cni_skel::cni_types::result::{vm_pairs, Interface};
use cni_skel::cni_types::{CniError, CniResult};
use std::collections::BTreeMap;

/// One pod interface to hand to the VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wire {
    /// The pod interface's name (in the pod namespace).
    pub pod: String,
    /// Its index in `prevResult.interfaces`.
    pub index: usize,
    /// The tap beside it.
    pub tap: String,
    /// The tap exists already, joined to this very pod interface by an earlier ADD of the
    /// attachment: it is kept as it is (see [`Existing`]).
    pub kept: bool,
}

/// What an earlier ADD of this attachment left in the namespace: the taps that stay as they
/// are, by pod interface, and the names of every tap of it (kept, stale, or another vmtap's of
/// the chain), which new taps' default names skip — so a tap replaced in this ADD comes back
/// under another name, and a VMM that tells NICs apart by tap name sees the replacement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Existing {
    /// Pod interface → its kept tap.
    pub kept: BTreeMap<String, String>,
    /// Every tap name of the attachment found in the namespace.
    pub names: Vec<String>,
}

/// The pod interfaces vmtap hands to a VM, chosen from `prevResult` and the keys.
#[derive(Debug, Clone)]
pub struct Selection<'r> {
    /// Taps of earlier plugins of the chain (pairs of `prevResult`).
    earlier: Vec<String>,
    /// Every interface of the pod namespace in the result (taps included): names default taps skip.
    in_namespace: Vec<&'r str>,
    /// The pod interfaces of the result (its taps left out).
    pod: Vec<&'r str>,
    /// The chosen ones, with their index in the result, in result order.
    chosen: Vec<(usize, &'r Interface)>,
}

/// The interfaces to redirect, in result order. `in_pod` says whether an interface's `sandbox`
/// is the pod namespace (`CNI_NETNS`). The taps the result has already — an earlier vmtap's in
/// the chain, or tc-redirect-tap's ([`vm_pairs`]) — are not pod interfaces, and the pod
/// interfaces whose MAC their VM interfaces carry are handed to a VM already: left out unless
/// named in `interfaces`, which refuses them.
///
/// Refused (code 7, naming the key or interface): an `interfaces` entry that is not a pod
/// interface of the result, or one handed to a VM already; a `tapNames` key that is not one of
/// the redirected interfaces; no pod interface left to redirect.
pub fn select<'r>(prev: &'r CniResult, keys: &Keys, in_pod: &dyn Fn(&str) -> bool) -> Result<Selection<'r>, CniError> {
    let earlier = vm_pairs(prev, in_pod);
    let is_tap = |name: &str| earlier.iter().any(|p| p.tap.name == name);
    // A pod interface handed to a VM already, and the tap it went to.
    let handed = |mac: &str| {
        earlier.iter().find(|p| !mac.is_empty() && p.vm.mac.eq_ignore_ascii_case(mac)).map(|p| p.tap.name.as_str())
    };
    let in_namespace: Vec<(usize, &Interface)> =
        prev.interfaces.iter().enumerate().filter(|(_, i)| !i.sandbox.is_empty() && in_pod(&i.sandbox)).collect();
    let pod: Vec<(usize, &Interface)> = in_namespace.iter().copied().filter(|(_, i)| !is_tap(&i.name)).collect();
    for (k, (_, i)) in pod.iter().enumerate() {
        if pod[..k].iter().any(|(_, other)| other.name == i.name) {
            return Err(invalid(format!("prevResult names the pod interface {} twice", i.name)));
        }
    }
    let chosen: Vec<(usize, &Interface)> = match &keys.interfaces {
        Some(list) => {
            for name in list {
                let Some((_, i)) = pod.iter().find(|(_, p)| p.name == *name) else {
                    let msg = format!("interfaces: {name:?} is not an interface of prevResult in the pod namespace");
                    return Err(invalid(msg).context_details(&pod));
                };
                if let Some(tap) = handed(&i.mac) {
                    return Err(invalid(format!(
                        "interfaces: {name:?} is handed to a VM already (by the tap {tap} of an earlier plugin in the chain)"
                    )));
                }
            }
            pod.iter().copied().filter(|(_, p)| list.contains(&p.name)).collect()
        }
        None => pod.iter().copied().filter(|(_, p)| handed(&p.mac).is_none()).collect(),
    };
    if chosen.is_empty() && !pod.is_empty() {
        let taps: Vec<&str> = earlier.iter().map(|p| p.tap.name.as_str()).collect();
        return Err(invalid(format!(
            "every pod interface of prevResult is handed to a VM already (by the taps {} of an earlier plugin in the chain): \
             name the ones this vmtap takes in interfaces, and leave them out of the earlier one's",
            taps.join(", ")
        )));
    }
    if chosen.is_empty() {
        return Err(invalid(
            "prevResult has no interface in the pod namespace (sandbox = CNI_NETNS) to hand to a VM: \
             place vmtap after the plugin that creates the pod's interfaces",
        ));
    }
    for key in keys.tap_names.keys() {
        if !chosen.iter().any(|(_, p)| p.name == *key) {
            return Err(invalid(format!("tapNames: {key:?} is not one of the interfaces vmtap redirects")));
        }
    }
    Ok(Selection {
        earlier: earlier.iter().map(|p| p.tap.name.clone()).collect(),
        in_namespace: in_namespace.iter().map(|(_, i)| i.name.as_str()).collect(),
        pod: pod.iter().map(|(_, i)| i.name.as_str()).collect(),
        chosen,
    })
}

impl Selection<'_> {
    /// Whether `tap` is a tap of an earlier plugin of the chain (a pair of `prevResult`).
    pub fn is_earlier_tap(&self, tap: &str) -> bool {
        self.earlier.iter().any(|t| t == tap)
    }

    /// Whether `name` is a pod interface of `prevResult` (chosen or not).
    pub fn is_pod_interface(&self, name: &str) -> bool {
        self.pod.contains(&name)
    }

    /// Whether `name` is one of the pod interfaces this vmtap hands to a VM.
    pub fn is_chosen(&self, name: &str) -> bool {
        self.chosen.iter().any(|(_, i)| i.name == name)
    }

    /// The wires, in result order: a pod interface with a kept tap keeps it; the others get
    /// their `tapNames` name, or the first `tap<N>` (N from 0) that names no interface of the
    /// result in the pod namespace, no tap of `tapNames` and no tap of `existing`.
    ///
    /// Refused (code 7): a tap name that is also the name of a pod interface; two interfaces
    /// with one tap name.
    pub fn name(&self, keys: &Keys, existing: &Existing) -> Result<Vec<Wire>, CniError> {
        let mut taken: Vec<&str> = self.in_namespace.clone();
        taken.extend(keys.tap_names.values().map(String::as_str));
        taken.extend(existing.names.iter().map(String::as_str));
        let mut next = 0usize;
        let mut wires: Vec<Wire> = Vec::with_capacity(self.chosen.len());
        for (index, i) in &self.chosen {
            let (tap, kept) = match (existing.kept.get(&i.name), keys.tap_names.get(&i.name)) {
                (Some(t), _) => (t.clone(), true),
                (None, Some(t)) => (t.clone(), false),
                (None, None) => loop {
                    let t = format!("tap{next}");
                    next += 1;
                    if !taken.contains(&t.as_str()) {
                        break (t, false);
                    }
                },
            };
            wires.push(Wire { pod: i.name.clone(), index: *index, tap, kept });
        }
        for w in &wires {
            if self.in_namespace.contains(&w.tap.as_str()) {
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
}

/// [`select`] and [`Selection::name`] for a first ADD (no tap of the attachment exists).
pub fn plan(prev: &CniResult, keys: &Keys, in_pod: &dyn Fn(&str) -> bool) -> Result<Vec<Wire>, CniError> {
    select(prev, keys, in_pod)?.name(keys, &Existing::default())
}

trait Details {
    fn context_details(self, pod: &[(usize, &Interface)]) -> CniError;
}

impl Details for CniError {
    /// Lists the interfaces that could have been named.
    fn context_details(mut self, pod: &[(usize, &Interface)]) -> CniError {
        let names: Vec<&str> = pod.iter().map(|(_, i)| i.name.as_str()).collect();
        self.details = format!("pod interfaces of prevResult: {}", names.join(", "));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let w = plan(&p, &Keys::default(), &in_pod).unwrap();
        assert_eq!(
            w,
            vec![
                Wire { pod: "eth0".into(), index: 1, tap: "tap0".into(), kept: false },
                Wire { pod: "net1".into(), index: 3, tap: "tap1".into(), kept: false }
            ]
        );
    }

    #[test]
    fn interfaces_and_tap_names_select_and_name() {
        let p = prev(&[("eth0", "/run/netns/pod"), ("net1", "/run/netns/pod"), ("net2", "/run/netns/pod")]);
        let k = keys(serde_json::json!({"interfaces": ["net2", "net1"], "tapNames": {"net2": "vm-storage"}}));
        let w = plan(&p, &k, &in_pod).unwrap();
        assert_eq!(w[0], Wire { pod: "net1".into(), index: 1, tap: "tap0".into(), kept: false });
        assert_eq!(w[1], Wire { pod: "net2".into(), index: 2, tap: "vm-storage".into(), kept: false });
    }

    #[test]
    fn refusals_name_the_key_and_the_interface() {
        let p = prev(&[("eth0", "/run/netns/pod"), ("veth9", "")]);
        let e = plan(&p, &keys(serde_json::json!({"interfaces": ["veth9"]})), &in_pod).unwrap_err();
        assert_eq!(e.code, 7);
        assert_eq!(e.msg, "interfaces: \"veth9\" is not an interface of prevResult in the pod namespace");
        assert_eq!(e.details, "pod interfaces of prevResult: eth0");
        let e = plan(&p, &keys(serde_json::json!({"tapNames": {"net1": "t"}})), &in_pod).unwrap_err();
        assert_eq!(e.msg, "tapNames: \"net1\" is not one of the interfaces vmtap redirects");
        let e = plan(&prev(&[("veth9", "")]), &Keys::default(), &in_pod).unwrap_err();
        assert!(e.msg.starts_with("prevResult has no interface in the pod namespace"));
        let e = plan(&p, &keys(serde_json::json!({"tapNames": {"eth0": "eth0"}})), &in_pod).unwrap_err();
        assert!(e.msg.starts_with("the tap name eth0 is the name of a pod interface"));
        let two = prev(&[("tap1", "/run/netns/pod"), ("net1", "/run/netns/pod")]);
        let e = plan(&two, &keys(serde_json::json!({"tapNames": {"net1": "tap1"}})), &in_pod).unwrap_err();
        assert!(e.msg.starts_with("the tap name tap1 is the name of a pod interface"), "{}", e.msg);
        let e = plan(&prev(&[("eth0", "/run/netns/pod"), ("eth0", "/run/netns/pod")]), &Keys::default(), &in_pod);
        assert_eq!(e.unwrap_err().msg, "prevResult names the pod interface eth0 twice");
    }

    /// A pod interface called like a default tap, or a tap a key names, is skipped over.
    #[test]
    fn default_tap_names_skip_names_taken() {
        let p = prev(&[("tap1", "/run/netns/pod"), ("net1", "/run/netns/pod"), ("net2", "/run/netns/pod")]);
        let w = plan(&p, &keys(serde_json::json!({"tapNames": {"net2": "tap0"}})), &in_pod).unwrap();
        let taps: Vec<(&str, &str)> = w.iter().map(|w| (w.pod.as_str(), w.tap.as_str())).collect();
        assert_eq!(taps, [("tap1", "tap2"), ("net1", "tap3"), ("net2", "tap0")]);
    }

    /// What an earlier vmtap (or tc-redirect-tap) of the chain did: its taps are no pod
    /// interfaces, its names are taken, and the pod interfaces it handed to a VM (by MAC) are
    /// not handed again.
    #[test]
    fn an_earlier_vmtap_in_the_chain_is_taken_into_account() {
        let mut p = prev(&[
            ("eth0", "/run/netns/pod"),
            ("net1", "/run/netns/pod"),
            ("tap0", "/run/netns/pod"),
            ("tap0", "ctr"),
        ]);
        for (i, mac) in
            [(0, "0a:00:00:00:00:01"), (1, "0a:00:00:00:00:02"), (2, "be:00:00:00:00:01"), (3, "0A:00:00:00:00:01")]
        {
            p.interfaces[i].mac = mac.into();
        }
        let w = plan(&p, &Keys::default(), &in_pod).unwrap();
        assert_eq!(w, vec![Wire { pod: "net1".into(), index: 1, tap: "tap1".into(), kept: false }]);
        let e = plan(&p, &keys(serde_json::json!({"interfaces": ["eth0"]})), &in_pod).unwrap_err();
        assert_eq!(
            e.msg,
            "interfaces: \"eth0\" is handed to a VM already (by the tap tap0 of an earlier plugin in the chain)"
        );
        p.interfaces.truncate(1);
        p.interfaces.push(Interface { name: "tap0".into(), sandbox: "/run/netns/pod".into(), ..Interface::default() });
        p.interfaces.push(Interface {
            name: "tap0".into(),
            sandbox: "ctr".into(),
            mac: "0a:00:00:00:00:01".into(),
            ..Interface::default()
        });
        let e = plan(&p, &Keys::default(), &in_pod).unwrap_err();
        assert_eq!(e.code, 7);
        assert!(
            e.msg.starts_with("every pod interface of prevResult is handed to a VM already (by the taps tap0 of"),
            "{}",
            e.msg
        );
    }

    /// A converging ADD: kept taps keep their names, new ones skip every name the attachment's
    /// taps have (kept or about to go), and tapNames still names new ones.
    #[test]
    fn kept_taps_keep_their_names_and_new_ones_skip_the_attachments() {
        let p = prev(&[("eth0", "/run/netns/pod"), ("net1", "/run/netns/pod"), ("net2", "/run/netns/pod")]);
        let sel = select(&p, &Keys::default(), &in_pod).unwrap();
        assert!(sel.is_chosen("net1") && sel.is_pod_interface("net2") && !sel.is_pod_interface("net9"));
        let existing = Existing {
            kept: [("eth0".to_string(), "tap0".to_string()), ("net2".to_string(), "tap2".to_string())].into(),
            names: vec!["tap0".into(), "tap1".into(), "tap2".into()],
        };
        let w = sel.name(&Keys::default(), &existing).unwrap();
        let got: Vec<(&str, &str, bool)> = w.iter().map(|w| (w.pod.as_str(), w.tap.as_str(), w.kept)).collect();
        assert_eq!(got, [("eth0", "tap0", true), ("net1", "tap3", false), ("net2", "tap2", true)]);
        let k = keys(serde_json::json!({"tapNames": {"net1": "vm-1"}}));
        let w = select(&p, &k, &in_pod).unwrap().name(&k, &existing).unwrap();
        assert_eq!((w[1].tap.as_str(), w[1].kept), ("vm-1", false));
        // A first ADD is as before.
        assert_eq!(
            sel.name(&Keys::default(), &Existing::default()).unwrap(),
            plan(&p, &Keys::default(), &in_pod).unwrap()
        );
    }
}
