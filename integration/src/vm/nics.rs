//! What a VM runtime does with braid's result: the VM NICs of a result in tc-redirect-tap's
//! convention, the guest booted on them, and the tap wiring itself for tests that play the runtime.

use super::guest::{Guest, Nic};
use super::netns_path;
use crate::runtime::run_ok;
use cni_types::CniResult;
use std::path::Path;
use std::process::Command;

/// The VM NICs of `result`, in order, as a runtime pairs them: firecracker-go-sdk's
/// `cni/internal/cniutil.go` (`VMTapPair`: the VM interface is the one whose `sandbox` is the VM's
/// ID, its tap the interface of the same name) with the tap's `sandbox` required to be `netns`,
/// and `cni/vmconf` (`StaticNetworkConfFrom`: the VM interface's MAC and IPs). Each [`Nic`] is
/// the tap (also the VM interface's name), the VM interface's MAC (the pod interface's, which the
/// pod network knows), the IPs whose `interface` is the VM interface with their gateways, and
/// the routes that leave by it. A CNI result does not say which interface a route leaves by; the
/// rule is `vmtap`'s (`result::routes_of`): the routes whose gateway lies in one of the NIC's
/// subnets, and routes without a gateway on the first NIC. An error names the VM interface that
/// has no tap, or says there is no VM interface.
pub fn vm_nics(result: &CniResult, container_id: &str, netns: &str) -> Result<Vec<Nic>, String> {
    let mut out = Vec::new();
    let vms =
        result.interfaces.iter().enumerate().filter(|(_, i)| !container_id.is_empty() && i.sandbox == container_id);
    for (k, vm) in vms {
        if !result.interfaces.iter().any(|t| t.name == vm.name && t.sandbox == netns) {
            return Err(format!(
                "VM interface {} (interfaces[{k}]) has no tap: no interface named {0} with sandbox {netns}",
                vm.name
            ));
        }
        let ips: Vec<_> = result.ips.iter().filter(|ip| ip.interface == Some(k as i64)).collect();
        let first = out.is_empty();
        let mut nic = Nic::new(&vm.name, &vm.mac);
        for ip in &ips {
            nic = nic.address(&ip.address.to_string());
            if let Some(g) = ip.gateway {
                nic = nic.gateway(&g.to_string());
            }
        }
        for rt in result.routes.iter().filter(|rt| match rt.gw {
            Some(gw) => ips.iter().any(|ip| ip.address.contains(gw)),
            None => first,
        }) {
            nic = nic.route(&rt.dst.to_string(), rt.gw.map(|g| g.to_string()).as_deref());
        }
        out.push(nic);
    }
    if out.is_empty() {
        return Err(format!(
            "the result has no VM interface (no interface with sandbox {container_id:?}): was vmtap in the chain?"
        ));
    }
    Ok(out)
}

/// The guest a runtime boots on `nics` (no probes yet): one virtio NIC each with its addresses
/// and its routes; the first NIC's first gateway is the default route (one default route per
/// guest, as the pod had), so default routes of the result are not repeated, nor the other
/// NICs' gateways.
pub fn guest_for(nics: &[Nic]) -> Guest {
    let mut guest = Guest::new();
    for (k, n) in nics.iter().enumerate() {
        // Only the first NIC's first gateway becomes the guest's default route.
        let (mut routes, mut has_default) = (Vec::new(), k != 0);
        for r in &n.routes {
            let keep = match r.dst.as_str() {
                "default" => !has_default,
                dst => !dst.ends_with("/0"),
            };
            has_default |= r.dst == "default";
            if keep {
                routes.push(r.clone());
            }
        }
        guest = guest.nic(Nic { routes, ..n.clone() });
    }
    guest
}

/// The tc-redirect-tap wiring a VM runtime does for a pod interface (the test playing the
/// runtime): in `netns`, creates tap `tap` (up), an ingress qdisc on it and on `ifname`, and on
/// each a match-all u32 filter redirecting every frame to the other's egress. Everything lives in
/// the test's namespace and goes with it.
pub fn wire_tap(netns: impl AsRef<Path>, ifname: &str, tap: &str) {
    let ns = format!("--net={}", netns_path(netns.as_ref()).display());
    let run = |args: &[&str]| {
        run_ok(Command::new("nsenter").arg(&ns).args(args));
    };
    run(&["ip", "tuntap", "add", "dev", tap, "mode", "tap"]);
    run(&["ip", "link", "set", tap, "up"]);
    for (from, to) in [(ifname, tap), (tap, ifname)] {
        run(&["tc", "qdisc", "add", "dev", from, "ingress"]);
        run(&[
            "tc", "filter", "add", "dev", from, "parent", "ffff:", "protocol", "all", "u32", "match", "u8", "0", "0",
            "action", "mirred", "egress", "redirect", "dev", to,
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::Route;

    fn vm_result(tap_sandbox: &str) -> CniResult {
        let v = serde_json::json!({
            "cniVersion": "1.1.0",
            "interfaces": [
                {"name": "eth0", "mac": "0a:58:c6:12:00:02", "sandbox": "/run/netns/pod"},
                {"name": "net1", "mac": "0a:58:c6:12:01:02", "sandbox": "/run/netns/pod"},
                {"name": "tap0", "mac": "aa:aa:aa:aa:aa:00", "sandbox": tap_sandbox},
                {"name": "tap0", "mac": "0a:58:c6:12:00:02", "sandbox": "ctr1"},
                {"name": "tap1", "mac": "aa:aa:aa:aa:aa:01", "sandbox": tap_sandbox},
                {"name": "tap1", "mac": "0a:58:c6:12:01:02", "sandbox": "ctr1"}
            ],
            "ips": [
                {"address": "198.18.1.2/24", "gateway": "198.18.1.1", "interface": 0},
                {"address": "198.18.2.2/24", "gateway": "198.18.2.1", "interface": 1},
                {"address": "198.18.1.2/24", "gateway": "198.18.1.1", "interface": 3},
                {"address": "198.18.2.2/24", "gateway": "198.18.2.1", "interface": 5}
            ],
            "routes": [
                {"dst": "0.0.0.0/0", "gw": "198.18.1.1"},
                {"dst": "198.19.2.0/24", "gw": "198.18.2.1"},
                {"dst": "198.19.9.0/24"}
            ]
        });
        cni_types::AnyResult::from_bytes(v.to_string().as_bytes()).unwrap().to_latest()
    }

    #[test]
    fn vm_nics_pair_taps_and_hand_each_nic_its_ips_and_routes() {
        let nics = vm_nics(&vm_result("/run/netns/pod"), "ctr1", "/run/netns/pod").unwrap();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(nics.len(), 2);
        assert_eq!((nics[0].tap.as_str(), nics[0].mac.as_str()), ("tap0", "0a:58:c6:12:00:02"));
        assert_eq!(nics[0].addresses, s(&["198.18.1.2/24"]));
        assert_eq!(nics[0].gateways(), ["198.18.1.1"]);
        assert_eq!(
            nics[0].routes,
            [
                Route { dst: "default".into(), via: Some("198.18.1.1".into()), v6: false },
                Route { dst: "0.0.0.0/0".into(), via: Some("198.18.1.1".into()), v6: false },
                Route { dst: "198.19.9.0/24".into(), via: None, v6: false }
            ]
        );
        assert_eq!((nics[1].tap.as_str(), nics[1].mac.as_str()), ("tap1", "0a:58:c6:12:01:02"));
        assert_eq!(
            nics[1].routes,
            [
                Route { dst: "default".into(), via: Some("198.18.2.1".into()), v6: false },
                Route { dst: "198.19.2.0/24".into(), via: Some("198.18.2.1".into()), v6: false }
            ]
        );

        let lines: Vec<String> = guest_for(&nics).script().lines().skip(1).map(str::to_string).collect();
        assert_eq!(
            lines,
            [
                "nic 0 '0a:58:c6:12:00:02'",
                "nic 1 '0a:58:c6:12:01:02'",
                "addr 0 '198.18.1.2/24'",
                "up 0",
                "addr 1 '198.18.2.2/24'",
                "up 1",
                "route 0 4 '198.19.9.0/24'",
                "route 0 4 'default' '198.18.1.1'",
                "route 1 4 '198.19.2.0/24' '198.18.2.1'",
                "show",
            ]
        );
    }

    #[test]
    fn vm_nics_name_a_missing_tap_and_a_result_without_vm_interfaces() {
        let err = vm_nics(&vm_result("/run/netns/other"), "ctr1", "/run/netns/pod").unwrap_err();
        assert!(err.contains("tap0") && err.contains("/run/netns/pod"), "{err}");
        let err = vm_nics(&vm_result("/run/netns/pod"), "ctr2", "/run/netns/pod").unwrap_err();
        assert!(err.contains("no VM interface") && err.contains("ctr2"), "{err}");
        let err = vm_nics(&vm_result("/run/netns/pod"), "", "/run/netns/pod").unwrap_err();
        assert!(err.contains("no VM interface"), "{err}");
    }
}
