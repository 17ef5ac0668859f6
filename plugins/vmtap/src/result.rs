//! The result vmtap hands on: tc-redirect-tap's convention (`cmd/tc-redirect-tap/main.go`,
//! `plugin.add`; read back by firecracker-go-sdk's `cni/vmconf`, `StaticNetworkConfFrom`),
//! extended to every redirected interface.
//!
//! For each redirected pod interface, in order, two interfaces are appended:
//! - the tap: `{name, mac: the tap's own MAC, sandbox: CNI_NETNS}`;
//! - the VM interface: `{name: the same tap name, mac: the pod interface's MAC, sandbox:
//!   CNI_CONTAINERID}` — the NIC the guest must have, so that the pod network (a bridge's FDB,
//!   a macvlan's filter, ptp's neighbour entry) keeps seeing the MAC it knows;
//!
//! and a copy (address and gateway only) of every IP of the pod interface, whose `interface`
//! points at the VM interface. Everything else is kept as it was. A runtime pairs tap and VM
//! interface by name: the VM interface is the one whose `sandbox` is the container ID
//! (`cni_types::result::vm_pairs`, the rule the verifier reads them by too).

use crate::plan::Wire;
use cni_skel::cni_types::result::{Interface, IpConfig, Route};
use cni_skel::cni_types::CniResult;

/// What the namespace said about one wire once it was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Made {
    /// The tap's MAC, as the kernel chose it.
    pub tap_mac: String,
    /// The pod interface's MAC, as the kernel has it (authoritative over the result's).
    pub pod_mac: String,
    /// The tap's MTU, read back from the kernel once it was set (the pod interface's): what
    /// the result says of the tap and the VM interface, whatever `prevResult` said.
    pub mtu: u32,
}

/// `prev` with the taps, VM interfaces and copied IPs appended.
pub fn extend(mut prev: CniResult, wires: &[(Wire, Made)], netns: &str, container_id: &str) -> CniResult {
    for (wire, made) in wires {
        let mtu = i64::from(made.mtu);
        prev.interfaces.push(Interface {
            name: wire.tap.clone(),
            mac: made.tap_mac.clone(),
            mtu,
            sandbox: netns.to_string(),
            ..Interface::default()
        });
        let vm = prev.interfaces.len() as i64;
        prev.interfaces.push(Interface {
            name: wire.tap.clone(),
            mac: made.pod_mac.clone(),
            mtu,
            sandbox: container_id.to_string(),
            ..Interface::default()
        });
        let copies: Vec<IpConfig> = prev
            .ips
            .iter()
            .filter(|ip| ip.interface == Some(wire.index as i64))
            .map(|ip| IpConfig { address: ip.address, gateway: ip.gateway, interface: Some(vm) })
            .collect();
        prev.ips.extend(copies);
    }
    prev
}

/// The routes of the result that leave by the interface at `index`: those whose gateway lies
/// in one of its subnets, and, for the first redirected interface (`first`), those without a
/// gateway. A CNI result does not say which interface a route leaves by; this is the rule a
/// VM runtime applies to hand each NIC its routes (Kata's DAN file needs them per device).
pub fn routes_of(result: &CniResult, index: usize, first: bool) -> Vec<Route> {
    let nets: Vec<_> = result.ips.iter().filter(|ip| ip.interface == Some(index as i64)).map(|ip| ip.address).collect();
    result
        .routes
        .iter()
        .filter(|r| match r.gw {
            Some(gw) => nets.iter().any(|n| n.contains(gw)),
            None => first,
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cni_skel::cni_types::result::vm_pairs;

    fn prev() -> CniResult {
        let v = serde_json::json!({
            "cniVersion": "1.0.0",
            "interfaces": [
                {"name": "veth1a2b", "mac": "aa:aa:aa:aa:aa:01"},
                {"name": "eth0", "mac": "0a:58:c0:a8:01:02", "sandbox": "/var/run/netns/vm1"}
            ],
            "ips": [{"address": "192.168.1.2/24", "gateway": "192.168.1.1", "interface": 1}],
            "routes": [{"dst": "0.0.0.0/0", "gw": "192.168.1.1"}],
            "dns": {"nameservers": ["8.8.8.8"]}
        });
        cni_skel::cni_types::AnyResult::from_bytes(v.to_string().as_bytes()).unwrap().to_latest()
    }

    #[test]
    fn one_interface_reads_exactly_as_tc_redirect_tap() {
        let wire = Wire { pod: "eth0".into(), index: 1, tap: "tap0".into(), kept: false };
        let made = Made { tap_mac: "be:ef:be:ef:00:01".into(), pod_mac: "0a:58:c0:a8:01:02".into(), mtu: 1500 };
        let out = extend(prev(), &[(wire, made)], "/var/run/netns/vm1", "vm1");
        // tc-redirect-tap's README example, with CNI_CONTAINERID=vm1 — and the tap's MTU as the
        // kernel has it on the tap and the VM interface (`mtu`, which the 1.0.0 result prints
        // as Go's types100.Interface does when it is set).
        let want = serde_json::json!({
            "cniVersion": "1.0.0",
            "interfaces": [
                {"name": "veth1a2b", "mac": "aa:aa:aa:aa:aa:01"},
                {"name": "eth0", "mac": "0a:58:c0:a8:01:02", "sandbox": "/var/run/netns/vm1"},
                {"name": "tap0", "mac": "be:ef:be:ef:00:01", "mtu": 1500, "sandbox": "/var/run/netns/vm1"},
                {"name": "tap0", "mac": "0a:58:c0:a8:01:02", "mtu": 1500, "sandbox": "vm1"}
            ],
            "ips": [
                {"address": "192.168.1.2/24", "gateway": "192.168.1.1", "interface": 1},
                {"address": "192.168.1.2/24", "gateway": "192.168.1.1", "interface": 3}
            ],
            "routes": [{"dst": "0.0.0.0/0", "gw": "192.168.1.1"}],
            "dns": {"nameservers": ["8.8.8.8"]}
        });
        let printed = out.convert_to("1.0.0").unwrap().to_value();
        assert_eq!(printed, want);
        let in_pod = |s: &str| s == "/var/run/netns/vm1";
        let p: Vec<(&str, &str, &str)> = vm_pairs(&out, &in_pod)
            .iter()
            .map(|p| (p.tap.name.as_str(), p.tap.mac.as_str(), p.vm.mac.as_str()))
            .collect();
        assert_eq!(p, [("tap0", "be:ef:be:ef:00:01", "0a:58:c0:a8:01:02")]);
    }

    #[test]
    fn every_interface_gets_its_pair_and_its_own_ips() {
        let mut p = prev();
        p.interfaces.push(Interface {
            name: "net1".into(),
            mac: "02:00:00:00:00:07".into(),
            mtu: 9000,
            sandbox: "/var/run/netns/vm1".into(),
            ..Interface::default()
        });
        p.ips.push(IpConfig { address: "198.18.5.7/24".parse().unwrap(), gateway: None, interface: Some(2) });
        p.ips.push(IpConfig { address: "2001:db8::7/64".parse().unwrap(), gateway: None, interface: Some(2) });
        let wires = vec![
            (
                Wire { pod: "eth0".into(), index: 1, tap: "tap0".into(), kept: false },
                Made { tap_mac: "be:00:00:00:00:01".into(), pod_mac: "0a:58:c0:a8:01:02".into(), mtu: 1500 },
            ),
            (
                Wire { pod: "net1".into(), index: 2, tap: "tap1".into(), kept: false },
                Made { tap_mac: "be:00:00:00:00:02".into(), pod_mac: "02:00:00:00:00:07".into(), mtu: 8950 },
            ),
        ];
        let out = extend(p, &wires, "/var/run/netns/vm1", "vm1");
        let names: Vec<(&str, &str)> = out.interfaces.iter().map(|i| (i.name.as_str(), i.sandbox.as_str())).collect();
        assert_eq!(
            names[3..],
            [("tap0", "/var/run/netns/vm1"), ("tap0", "vm1"), ("tap1", "/var/run/netns/vm1"), ("tap1", "vm1")]
        );
        let mtus: Vec<i64> = out.interfaces[3..].iter().map(|i| i.mtu).collect();
        assert_eq!(mtus, [1500, 1500, 8950, 8950], "the kernel's MTU, not prevResult's (9000)");
        let vm_ips: Vec<(String, Option<i64>)> =
            out.ips[3..].iter().map(|ip| (ip.address.to_string(), ip.interface)).collect();
        assert_eq!(
            vm_ips,
            vec![
                ("192.168.1.2/24".to_string(), Some(4)),
                ("198.18.5.7/24".to_string(), Some(6)),
                ("2001:db8::7/64".to_string(), Some(6))
            ]
        );
        assert_eq!(vm_pairs(&out, &|s| s == "/var/run/netns/vm1").len(), 2);
    }

    #[test]
    fn routes_go_to_the_interface_whose_subnet_holds_their_gateway() {
        let mut p = prev();
        p.ips.push(IpConfig { address: "198.18.5.7/24".parse().unwrap(), gateway: None, interface: Some(2) });
        p.routes.push(Route::new("198.19.0.0/16".parse().unwrap(), Some("198.18.5.1".parse().unwrap())));
        p.routes.push(Route::new("198.18.9.0/24".parse().unwrap(), None));
        let dst = |rs: Vec<Route>| rs.iter().map(|r| r.dst.to_string()).collect::<Vec<_>>();
        assert_eq!(dst(routes_of(&p, 1, true)), ["0.0.0.0/0", "198.18.9.0/24"]);
        assert_eq!(dst(routes_of(&p, 2, false)), ["198.19.0.0/16"]);
    }
}
