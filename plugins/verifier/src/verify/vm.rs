//! A VM interface, checked through its tap: vmtap's and tc-redirect-tap's tc redirects.

use super::{Finding, Item, Subject};
use crate::kernel;
use cni_types::ip::Mac;
use cni_types::result::Interface;

/// A VM interface is reachable when its tap is joined both ways (ingress redirects of every
/// frame) to a pod interface that carries the VM interface's MAC — the frames the pod network
/// sends to that MAC reach the guest, and the guest's reach the pod network.
pub(super) fn check_vm_pair(s: &Subject<'_>, tap: &Interface, vm: &Interface) -> Item {
    let subject = format!("{} (VM {})", tap.name, vm.sandbox);
    let claim = format!("joined by tc redirects to the pod interface with MAC {}", vm.mac);
    let snap = s.container;
    let Some(tap_link) = snap.link(&tap.name) else {
        return Item::new(
            subject,
            claim,
            Finding::Mismatch(format!("not checked further: tap {} is missing", tap.name)),
        );
    };
    let want = Mac::parse(&vm.mac).ok();
    let has = |from: u32, to: u32| snap.redirects.contains(&(from, to));
    let tap = tap_link.index;
    // Several links may carry the MAC — a VLAN or a macvtap shares its parent's — and come
    // first in the list: the pod interface is the one the tap is joined to (both ways, else
    // the one the tap sends to, else one that sends to it), and only failing that the first.
    let carriers: Vec<&kernel::Link> =
        snap.links.iter().filter(|l| l.index != tap && want.as_ref() == Some(&Mac::from_bytes(&l.mac))).collect();
    let pod = carriers
        .iter()
        .find(|l| has(l.index, tap) && has(tap, l.index))
        .or_else(|| carriers.iter().find(|l| has(tap, l.index)))
        .or_else(|| carriers.iter().find(|l| has(l.index, tap)))
        .or(carriers.first())
        .copied();
    let Some(pod) = pod else {
        return Item::new(subject, claim, Finding::Mismatch(format!("no interface of {} has that MAC", s.netns)));
    };
    let missing: Vec<String> = [(pod, tap_link), (tap_link, pod)]
        .iter()
        .filter(|(from, to)| !has(from.index, to.index))
        .map(|(from, to)| format!("no redirect {} -> {}", from.name, to.name))
        .collect();
    if missing.is_empty() {
        Item::new(subject, format!("joined by tc redirects to {}", pod.name), Finding::Ok)
    } else {
        Item::new(
            subject,
            claim,
            Finding::Mismatch(format!(
                "{} (ingress u32 match-all of protocol all, mirred egress redirect)",
                missing.join(", ")
            )),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::{mismatches, Finding};
    use crate::kernel::{Link, Snapshot};
    use serde_json::json;

    /// [`good`] with net1 handed to a VM (tap1, its VM interface with net1's MAC, and a copy of
    /// net1's IP), and [`pod`] with tap1 joined both ways to net1.
    fn handed_to_a_vm() -> (cni_types::CniResult, Snapshot) {
        let mut v = good();
        let ifaces = v["interfaces"].as_array_mut().unwrap();
        ifaces.push(json!({"name": "tap1", "sandbox": NS, "mac": "be:00:00:00:00:01"}));
        ifaces.push(json!({"name": "tap1", "sandbox": "ctr-id", "mac": "0a:58:00:00:00:02"}));
        v["ips"].as_array_mut().unwrap().push(json!({"address": "198.19.1.5/24", "interface": 3}));
        let mut snap = pod();
        snap.links.push(link(9, "tap1", &[0xbe, 0, 0, 0, 0, 1], 9000));
        snap.redirects = vec![(3, 9), (9, 3)];
        (result(v), snap)
    }

    #[test]
    fn a_vm_interface_is_checked_through_its_tap_and_redirects() {
        let (r, mut snap) = handed_to_a_vm();
        let items = run(&r, &snap, FULL);
        assert!(bad(&r, &snap, FULL).is_empty(), "{:?}", bad(&r, &snap, FULL));
        assert!(items.iter().any(|i| i.to_string() == "tap1 (VM ctr-id): joined by tc redirects to net1"));
        // The VM interface itself and its IP copy are not looked for in the kernel.
        assert!(items.iter().any(|i| i.subject == "tap1" && matches!(i.finding, Finding::Skipped(_))));

        snap.redirects = vec![(3, 9)];
        assert_eq!(
            bad(&r, &snap, FULL),
            ["tap1 (VM ctr-id): joined by tc redirects to the pod interface with MAC 0a:58:00:00:00:02 no redirect tap1 -> net1 (ingress u32 match-all of protocol all, mirred egress redirect)"]
        );
        snap.links.retain(|l| l.name != "net1");
        let got = bad(&r, &snap, FULL);
        assert!(got.iter().any(|l| l.ends_with("no interface of /run/netns/pod has that MAC")), "{got:?}");
    }

    /// A VLAN (or macvlan in passthru, macvtap, …) shares its parent's MAC, and may come first
    /// in the namespace's links: the pod interface is the one the tap is joined to, not the
    /// first link that carries the VM interface's MAC.
    #[test]
    fn a_vlan_carrying_the_vm_mac_is_not_taken_for_the_pod_interface() {
        let (r, mut snap) = handed_to_a_vm();
        // Listed before net1, as a link with a lower ifindex is.
        snap.links.insert(1, Link { kind: "vlan".into(), ..link(5, "vlan5", &[0x0a, 0x58, 0, 0, 0, 2], 1500) });
        let items = run(&r, &snap, FULL);
        assert!(mismatches(&items).is_empty(), "{:?}", mismatches(&items));
        assert!(items.iter().any(|i| i.to_string() == "tap1 (VM ctr-id): joined by tc redirects to net1"));
        // Joined to the VLAN instead: that link carries the MAC too, so the VM is reachable.
        snap.redirects = vec![(5, 9), (9, 5)];
        let items = run(&r, &snap, FULL);
        assert!(
            items.iter().any(|i| i.to_string() == "tap1 (VM ctr-id): joined by tc redirects to vlan5"),
            "{items:?}"
        );
        // Joined one way only: named against the interface the tap sends to.
        snap.redirects = vec![(9, 3)];
        assert_eq!(
            bad(&r, &snap, FULL),
            ["tap1 (VM ctr-id): joined by tc redirects to the pod interface with MAC 0a:58:00:00:00:02 no redirect net1 -> tap1 (ingress u32 match-all of protocol all, mirred egress redirect)"]
        );
    }
}
