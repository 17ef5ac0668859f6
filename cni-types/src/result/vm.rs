//! Which interfaces of a result are a VM's NIC and the tap behind it: awslabs'
//! tc-redirect-tap convention (`internal/cniutil.go`, `VMTapPair`; read back by
//! firecracker-go-sdk's `cni/vmconf`), which braid's vmtap extends to every pod interface and
//! its verifier checks. The one place the rule lives: vmtap writes and reads it, the verifier
//! reads it, and a VM runtime pairs the interfaces the same way.

use super::{CniResult, Interface};

/// A VM interface and its tap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VmPair<'r> {
    /// The tap, in the pod namespace: where the VMM attaches.
    pub tap: &'r Interface,
    /// The VM interface: the NIC the guest must have (its MAC is the pod interface's).
    pub vm: &'r Interface,
}

/// Whether an interface is a VM's NIC: its `sandbox` names a VM (the container ID the runtime
/// gave the plugins), not a network namespace (an absolute path) and not the host (empty).
pub fn is_vm_interface(iface: &Interface) -> bool {
    !iface.sandbox.is_empty() && !iface.sandbox.starts_with('/')
}

/// Every VM interface of `result` paired with its tap — the first interface of the same name
/// whose `sandbox` is the pod namespace (`in_pod` says which sandboxes are: the same path, or
/// the same namespace by another path) — in the order of the VM interfaces. A VM interface
/// without such a tap is no pair.
pub fn vm_pairs<'r>(result: &'r CniResult, in_pod: &dyn Fn(&str) -> bool) -> Vec<VmPair<'r>> {
    result
        .interfaces
        .iter()
        .filter(|vm| is_vm_interface(vm))
        .filter_map(|vm| {
            let tap =
                result.interfaces.iter().find(|t| t.name == vm.name && !t.sandbox.is_empty() && in_pod(&t.sandbox))?;
            Some(VmPair { tap, vm })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(name: &str, sandbox: &str, mac: &str) -> Interface {
        Interface { name: name.into(), sandbox: sandbox.into(), mac: mac.into(), ..Interface::default() }
    }

    #[test]
    fn a_vm_interface_pairs_with_the_pod_namespace_interface_of_its_name() {
        let pod = "/var/run/netns/vm1";
        let r = CniResult {
            interfaces: vec![
                iface("veth1a2b", "", "aa:aa:aa:aa:aa:01"),
                iface("eth0", pod, "0a:58:c0:a8:01:02"),
                // A host-side interface of the tap's name is not its tap; the pod's is.
                iface("tap0", "", "02:00:00:00:00:09"),
                iface("tap0", pod, "be:ef:be:ef:00:01"),
                iface("tap0", "vm1", "0a:58:c0:a8:01:02"),
                // Another namespace's interface is no tap, and a VM interface without a tap no pair.
                iface("tap1", "/var/run/netns/other", "be:ef:be:ef:00:02"),
                iface("tap1", "vm1", "0a:58:c0:a8:01:03"),
                iface("tap2", "/run/netns/vm1-by-another-path", "be:ef:be:ef:00:03"),
                iface("tap2", "vm1", "0a:58:c0:a8:01:04"),
            ],
            ..CniResult::default()
        };
        let in_pod = |s: &str| s == pod || s == "/run/netns/vm1-by-another-path";
        let pairs: Vec<(&str, &str, &str)> = vm_pairs(&r, &in_pod)
            .iter()
            .map(|p| (p.tap.name.as_str(), p.tap.mac.as_str(), p.vm.mac.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [("tap0", "be:ef:be:ef:00:01", "0a:58:c0:a8:01:02"), ("tap2", "be:ef:be:ef:00:03", "0a:58:c0:a8:01:04")]
        );
        assert!(is_vm_interface(&r.interfaces[4]));
        assert!(!is_vm_interface(&r.interfaces[1]) && !is_vm_interface(&r.interfaces[0]));
        assert!(vm_pairs(&CniResult::default(), &in_pod).is_empty());
    }
}
