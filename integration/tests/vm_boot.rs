//! The VM test support proves itself (`braid_integration::vm`): a QEMU guest booted inside a pod
//! namespace that Debian's `ptp` plugin attached twice, each pod interface wired to its own tap
//! the way a VM runtime does it (tc-redirect-tap, done here with iproute2), reaches both of ptp's
//! gateways on the host side from inside the guest, over IPv4 and IPv6.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_integration::runtime::{pids_mentioning, require_root_and};
use braid_integration::vm::{wire_tap, Guest, Nic, Vm, VmImage, QEMU};
use braid_integration::{unique, Harness, Netns};
use cni_runtime::chain::RuntimeConf;
use cni_types::result::CniResult;
use serde_json::{json, Value};

/// ptp on 198.18.`subnet`.0/24 (and 2001:db8:`subnet`::/64 when `v6`), with a route to
/// 198.19.`subnet`.0/24 via the gateway.
fn ptp(h: &Harness, subnet: u8, v6: bool) -> Value {
    let mut ranges =
        vec![json!([{"subnet": format!("198.18.{subnet}.0/24"), "gateway": format!("198.18.{subnet}.1")}])];
    if v6 {
        ranges.push(json!([{"subnet": format!("2001:db8:{subnet}::/64"), "gateway": format!("2001:db8:{subnet}::1")}]));
    }
    json!({
        "cniVersion": "1.0.0",
        "name": unique("vmnet"),
        "plugins": [{
            "type": "ptp",
            "ipam": {
                "type": "host-local",
                "dataDir": h.ipam_dir(),
                "ranges": ranges,
                "routes": [{"dst": format!("198.19.{subnet}.0/24"), "gw": format!("198.18.{subnet}.1")}]
            }
        }]
    })
}

/// The guest NIC for a pod interface: its MAC and the result's addresses, gateways and routes.
fn nic_for(pod: &Netns, ifname: &str, tap: &str, r: &CniResult, gateways: bool) -> Nic {
    let mac = pod.link(ifname).unwrap()["address"].as_str().unwrap().to_string();
    let mut nic = Nic::new(tap, &mac);
    for ip in &r.ips {
        nic = nic.address(&ip.address.to_string());
        if let (true, Some(gw)) = (gateways, ip.gateway) {
            nic = nic.gateway(&gw.to_string());
        }
    }
    for route in &r.routes {
        nic = nic.route(&route.dst.to_string(), route.gw.map(|g| g.to_string()).as_deref());
    }
    nic
}

fn packets(pod: &Netns, link: &str, dir: &str) -> u64 {
    let v = pod.ip_json(&["-s", "link", "show", "dev", link]);
    v[0]["stats64"][dir]["packets"].as_u64().unwrap_or_else(|| panic!("no {dir} stats for {link}: {v}"))
}

#[test]
fn a_vm_in_the_pod_namespace_reaches_each_ptp_gateway_from_its_own_nic() {
    if !require_root_and("a_vm_in_the_pod_namespace_reaches_each_ptp_gateway_from_its_own_nic", &[QEMU, "tc"]) {
        return;
    }
    let image = VmImage::prepare();
    let h = Harness::new("vm");
    let pod = h.container("vm");
    let id = unique("ctr");
    let (list0, list1) = (ptp(&h, 60, true), ptp(&h, 61, false));
    let rt0 = h.runtime(&pod, &id, "eth0");
    let rt1 = RuntimeConf { ifname: "net1".into(), ..rt0.clone() };
    let r0 = h.add(&list0, &rt0).unwrap_or_else(|e| panic!("ptp ADD eth0: {e}")).to_latest();
    let r1 = h.add(&list1, &rt1).unwrap_or_else(|e| panic!("ptp ADD net1: {e}")).to_latest();
    assert_eq!(r0.ips.len(), 2, "{r0:?}");

    wire_tap(pod.path(), "eth0", "tap0");
    wire_tap(pod.path(), "net1", "tap1");
    let guest = Guest::new()
        .nic(nic_for(&pod, "eth0", "tap0", &r0, true))
        .nic(nic_for(&pod, "net1", "tap1", &r1, false))
        .ping(0, "198.18.60.1")
        .ping(0, "2001:db8:60::1")
        .ping(1, "198.18.61.1")
        // The control: nothing answers there, and the guest must say so.
        .ping_tries(0, "198.18.60.250", 1);
    let before = (packets(&pod, "tap0", "tx"), packets(&pod, "tap1", "rx"));

    let run = Vm::boot(pod.path(), image, &guest);
    if run.probes.get(3).and_then(|p| p.ok) != Some(false) {
        run.fail("probe 3 (an address nobody holds) did not report a failure");
    }
    let mut expected = run.clone();
    expected.probes.pop();
    expected.assert_ok();

    // The guest configured what it was given, and found the NICs by the pod interfaces' MACs.
    for want in
        ["198.18.60.", "2001:db8:60::", "198.18.61.", "198.19.60.0/24 via 198.18.60.1", "default via 198.18.60.1"]
    {
        if !run.network.contains(want) {
            run.fail(&format!("the guest's network lacks {want:?}"));
        }
    }
    assert_eq!(run.nics.iter().filter(|n| n.is_some()).count(), 2, "{:?}", run.nics);
    // The frames went through the taps (the pod's own stack sees none: they are redirected).
    assert!(packets(&pod, "tap0", "tx") > before.0, "nothing was sent to the guest on tap0");
    assert!(packets(&pod, "tap1", "rx") > before.1, "nothing came from the guest on tap1");

    // The guest powered itself off; nothing of the boot is left.
    assert!(run.exit.is_some_and(|s| s.success()), "QEMU did not exit by itself: {:?}", run.exit);
    assert!(!run.dir.exists(), "{} left behind", run.dir.display());
    assert!(pids_mentioning(&run.dir.display().to_string()).is_empty(), "a QEMU of this boot still runs");

    h.del(&list1, &rt1).unwrap_or_else(|e| panic!("ptp DEL net1: {e}"));
    h.del(&list0, &rt0).unwrap_or_else(|e| panic!("ptp DEL eth0: {e}"));
    assert!(h.reservations().is_empty(), "{:?}", h.dir.files());
}

#[test]
fn a_guest_that_never_finishes_is_killed_by_the_hang_guard_or_on_drop() {
    if !require_root_and("a_guest_that_never_finishes_is_killed_by_the_hang_guard_or_on_drop", &[QEMU]) {
        return;
    }
    let image = VmImage::prepare();
    let ns = Netns::new("vmg");
    let mut guest = Guest::new().shell("echo BRAID-TEST-SLEEPING; sleep 600");
    // Nothing is timed here: the guest cannot print BRAID-DONE before 600 s, so the guard ends
    // the boot whatever the machine's speed.
    guest.timeout = std::time::Duration::from_secs(8);
    let run = Vm::boot(ns.path(), image, &guest);
    assert!(run.timed_out && !run.done, "{}", run.tail(20));
    assert_eq!(run.exit, None, "QEMU should have been killed");
    assert_eq!(run.probes[0].ok, None);
    assert!(!run.dir.exists(), "{} left behind", run.dir.display());
    assert!(pids_mentioning(&run.dir.display().to_string()).is_empty(), "QEMU survived the hang guard");

    // Dropped while the guest runs: killed by PID and reaped, its directory removed.
    let vm = Vm::start(ns.path(), image, &guest);
    let dir = vm.dir().to_path_buf();
    let (pid, deadline) = (vm.pid(), std::time::Instant::now() + std::time::Duration::from_secs(120));
    while !vm.console().contains("BRAID-TEST-SLEEPING") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(vm.console().contains("BRAID-TEST-SLEEPING"), "the guest never got to its probe:\n{}", vm.console());
    assert!(pids_mentioning(&dir.display().to_string()).contains(&pid));
    drop(vm);
    assert!(!dir.exists(), "{} left behind", dir.display());
    assert!(pids_mentioning(&dir.display().to_string()).is_empty(), "QEMU survived the drop");
}

#[test]
fn a_missing_tap_is_refused_before_qemu_starts() {
    if !require_root_and("a_missing_tap_is_refused_before_qemu_starts", &[QEMU]) {
        return;
    }
    let image = VmImage::prepare();
    let ns = Netns::new("vmt");
    let guest = Guest::new().nic(Nic::new("nosuchtap", "0a:58:c6:12:00:02").address("198.18.62.2/24"));
    let err = std::panic::catch_unwind(|| Vm::start(ns.path(), image, &guest)).unwrap_err();
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("tap nosuchtap does not exist"), "{msg}");
    // QEMU would have created it: it must not be there.
    assert!(ns.link("nosuchtap").is_none());
}
