//! The made-up namespace and result the comparison's tests start from.

use super::{mismatches, verify, Item, Options, RouteChecks, Subject};
use crate::kernel::{self, Addr, Link, Snapshot};
use cni_types::ip::IpNet;
use cni_types::AnyResult;
use serde_json::json;

/// The container namespace of every test.
pub const NS: &str = "/run/netns/pod";

/// An address or subnet.
pub fn net(s: &str) -> IpNet {
    IpNet::parse(s).unwrap()
}

/// A link of the kernel, up, in no group, without master or VRF table.
pub fn link(index: u32, name: &str, mac: &[u8], mtu: u32) -> Link {
    Link { index, name: name.into(), mac: mac.to_vec(), mtu, ..Link::default() }
}

/// A unicast route of the kernel through `oif`.
pub fn route(table: u32, dst: &str, gw: Option<&str>, oif: u32) -> kernel::Route {
    kernel::Route { table, ..kernel::Route::unicast(net(dst).network(), gw.map(|g| g.parse().unwrap()), oif) }
}

/// lo, eth0 (198.18.0.5/24, 2001:db8::5/64) and net1 (198.19.1.5/24, in table 1000), as the kernel has them.
pub fn pod() -> Snapshot {
    Snapshot {
        links: vec![
            link(1, "lo", &[0; 6], 65536),
            link(2, "eth0", &[0x0a, 0x58, 0, 0, 0, 1], 1500),
            link(3, "net1", &[0x0a, 0x58, 0, 0, 0, 2], 9000),
        ],
        addrs: vec![
            Addr { ifindex: 2, net: net("198.18.0.5/24"), tentative: false, dadfailed: false },
            Addr { ifindex: 2, net: net("2001:db8::5/64"), tentative: false, dadfailed: false },
            Addr { ifindex: 2, net: net("fe80::1/64"), tentative: false, dadfailed: false },
            Addr { ifindex: 3, net: net("198.19.1.5/24"), tentative: false, dadfailed: false },
        ],
        routes: vec![
            route(254, "198.18.0.0/24", None, 2),
            route(254, "0.0.0.0/0", Some("198.18.0.1"), 2),
            route(254, "::/0", Some("2001:db8::1"), 2),
            route(1000, "198.19.0.0/16", Some("198.19.1.1"), 3),
        ],
        rules: Vec::new(),
        redirects: Vec::new(),
    }
}

/// A result as a runtime sends it, in the 1.1 model.
pub fn result(v: serde_json::Value) -> cni_types::CniResult {
    AnyResult::from_bytes(&serde_json::to_vec(&v).unwrap()).unwrap().to_latest()
}

/// The result that [`pod`] makes true.
pub fn good() -> serde_json::Value {
    json!({
        "cniVersion": "1.1.0",
        "interfaces": [
            {"name": "eth0", "sandbox": NS, "mac": "0A:58:00:00:00:01", "mtu": 1500},
            {"name": "net1", "sandbox": NS, "mac": "0a:58:00:00:00:02"}
        ],
        "ips": [
            {"address": "198.18.0.5/24", "interface": 0},
            {"address": "2001:db8::5/64"},
            {"address": "198.19.1.5/24", "interface": 1}
        ],
        "routes": [
            {"dst": "0.0.0.0/0", "gw": "198.18.0.1"},
            {"dst": "::/0", "gw": "2001:db8::1"},
            {"dst": "198.19.0.0/16", "gw": "198.19.1.1", "table": 1000}
        ]
    })
}

/// Every check, host-side interfaces included.
pub const FULL: Options = Options { check_host: true, routes: RouteChecks::Full };

/// Every item of verifying `r` against `snap` (container `eth0`).
pub fn run(r: &cni_types::CniResult, snap: &Snapshot, opts: Options) -> Vec<Item> {
    let is_container = |s: &str| s == NS;
    verify(
        &Subject { result: r, ifname: "eth0", netns: NS, is_container: &is_container, container: snap, host: None },
        opts,
    )
}

/// The mismatches of [`run`], as the lines of the error's `details`.
pub fn bad(r: &cni_types::CniResult, snap: &Snapshot, opts: Options) -> Vec<String> {
    mismatches(&run(r, snap, opts))
}
