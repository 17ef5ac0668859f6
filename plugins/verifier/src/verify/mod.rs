//! The comparison: every claim of a result against snapshots of the kernel. Pure — no I/O —
//! so each rule is unit-tested with made-up snapshots.
//!
//! One job a file: the claims of interfaces (`interfaces.rs`), addresses (`addresses.rs`),
//! routes (`routes.rs`) and VM interfaces behind taps (`vm.rs`); the verdict types and the walk
//! over the result here.
//!
//! Improves on upstream's CHECK helpers (containernetworking/plugins `pkg/ip/utils.go`: `ValidateExpectedInterfaceIPs`,
//! `ValidateExpectedRoute`): each IP is looked for on the interface
//! its `interface` index names (not always `CNI_IFNAME`), MACs are compared as bytes, interface
//! MTUs and the 1.1 route fields are compared, and routes are looked up in their own table.

use crate::kernel::Snapshot;
use cni_types::result::{vm_pairs, Interface};
use std::fmt;

mod addresses;
mod interfaces;
mod routes;
#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;
mod vm;

use addresses::check_address;
use interfaces::check_interface;
use routes::check_route;
use vm::check_vm_pair;

/// How routes are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteChecks {
    /// Everything the result says: `gw` also of default routes, `table`, `priority`, `scope`
    /// and `mtu` when given.
    Full,
    /// As upstream's `ValidateExpectedRoute`: main table only, `dst` and (except for default
    /// routes) `gw`; nothing else.
    Upstream,
}

/// What to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Check host-side interfaces (no `sandbox`) in the plugin's own namespace.
    pub check_host: bool,
    /// How routes are compared.
    pub routes: RouteChecks,
}

/// The finding of one checked claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The kernel agrees.
    Ok,
    /// Not decided yet: the kernel is still settling (an IPv6 address in DAD). Counts as ok once
    /// the settle time is up.
    Pending(String),
    /// The kernel disagrees; the text says what was found instead.
    Mismatch(String),
    /// Deliberately not checked, and why.
    Skipped(String),
}

/// One checked claim: its subject (`eth0`, `route 0.0.0.0/0 via …`), the claim, the finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// What the claim is about.
    pub subject: String,
    /// The claim in words (`address 198.18.1.5/24`).
    pub claim: String,
    /// What the kernel said.
    pub finding: Finding,
}

impl Item {
    fn new(subject: impl Into<String>, claim: impl Into<String>, finding: Finding) -> Item {
        Item { subject: subject.into(), claim: claim.into(), finding }
    }

    /// Whether this item fails the verification.
    pub fn is_mismatch(&self) -> bool {
        matches!(self.finding, Finding::Mismatch(_))
    }

    /// Whether this item is still settling.
    pub fn is_pending(&self) -> bool {
        matches!(self.finding, Finding::Pending(_))
    }
}

/// The line an operator reads: `net1: address 198.18.1.5/24 missing (has: 198.18.1.6/24)`.
impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.subject.is_empty() {
            write!(f, "{}: ", self.subject)?;
        }
        match &self.finding {
            Finding::Ok => write!(f, "{}", self.claim),
            Finding::Pending(why) | Finding::Mismatch(why) | Finding::Skipped(why) => write!(f, "{} {why}", self.claim),
        }
    }
}

/// Which namespace an interface of the result lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Container,
    Host,
    Elsewhere,
}

/// What is verified, and the kernel's views of it.
pub struct Subject<'a> {
    /// The result (1.1 model).
    pub result: &'a cni_types::CniResult,
    /// `CNI_IFNAME`: the interface IPs without a valid index belong to.
    pub ifname: &'a str,
    /// `CNI_NETNS`, as given (for messages).
    pub netns: &'a str,
    /// Whether a `sandbox` value names the container namespace (equal path, or the same
    /// namespace by device and inode).
    pub is_container: &'a dyn Fn(&str) -> bool,
    /// The container namespace.
    pub container: &'a Snapshot,
    /// The plugin's own namespace, when host-side interfaces are checked.
    pub host: Option<&'a Snapshot>,
}

impl Subject<'_> {
    fn place(&self, iface: &Interface) -> Place {
        if iface.sandbox.is_empty() {
            Place::Host
        } else if (self.is_container)(&iface.sandbox) {
            Place::Container
        } else {
            Place::Elsewhere
        }
    }

    fn view(&self, place: Place) -> Option<&Snapshot> {
        match place {
            Place::Container => Some(self.container),
            Place::Host => self.host,
            Place::Elsewhere => None,
        }
    }
}

/// Checks every claim of the result; returns one item per claim, in the result's order.
pub fn verify(s: &Subject<'_>, opts: Options) -> Vec<Item> {
    let mut items = Vec::new();
    let r = s.result;
    // The CNI_IFNAME interface must be in the result, in this namespace (P8.1 step 4).
    let own = r.interfaces.iter().any(|i| i.name == s.ifname && s.place(i) == Place::Container);
    items.push(Item::new(
        s.ifname,
        format!("listed in the result with sandbox {}", s.netns),
        if r.interfaces.is_empty() {
            // 0.1.0/0.2.0 and IPAM-style results have no interfaces: nothing is claimed.
            Finding::Skipped("not checked: the result lists no interfaces".into())
        } else if own {
            Finding::Ok
        } else {
            let sandboxes: Vec<&str> =
                r.interfaces.iter().filter(|i| i.name == s.ifname).map(|i| i.sandbox.as_str()).collect();
            Finding::Mismatch(if sandboxes.is_empty() {
                "missing: the result has no interface of this name".to_string()
            } else {
                format!("missing: the result lists it with sandbox {sandboxes:?}")
            })
        },
    ));
    for iface in &r.interfaces {
        items.extend(check_interface(s, iface, opts));
    }
    for ip in &r.ips {
        // An index that names no interface is a broken result, whatever the kernel has:
        // containerd and podman refuse it (go-cni, containers/common `CNIResultToStatus`).
        if let Some(i) = ip.interface.filter(|i| usize::try_from(*i).map_or(true, |i| i >= r.interfaces.len())) {
            let n = r.interfaces.len();
            let why = format!("index {i} names no interface of the result (it lists {n})");
            items.push(Item::new(format!("ip {}", ip.address), format!("interface {i}"), Finding::Mismatch(why)));
            continue;
        }
        let target = ip
            .interface
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| r.interfaces.get(i))
            .map_or((s.ifname, Place::Container), |i| (i.name.as_str(), s.place(i)));
        items.push(check_address(s, target, ip.address, opts));
    }
    for route in &r.routes {
        items.push(check_route(s.container, route, opts.routes));
    }
    for p in vm_pairs(r, s.is_container) {
        items.push(check_vm_pair(s, p.tap, p.vm));
    }
    items
}

/// The items that fail, as the lines of the CNI error's `details`.
pub fn mismatches(items: &[Item]) -> Vec<String> {
    items.iter().filter(|i| i.is_mismatch()).map(ToString::to_string).collect()
}
