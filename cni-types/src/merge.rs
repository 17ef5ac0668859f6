//! Merging the results of several attachments into one 1.1 result — the picture a VM runtime
//! needs of everything in the namespace.
//!
//! The rules, in order of attachments (the first — the cluster network — stays first, so its
//! IPs lead and runtimes that take "the pod IP" from the first IP keep working):
//!
//! * interfaces are appended; every IP's `interface` index is re-based by the number of
//!   interfaces already merged;
//! * a result without interfaces (0.1.0/0.2.0, IPAM-style plugins) gets a synthesised interface
//!   entry — the attachment's ifname, `sandbox` = its namespace — and its IPs point at it;
//! * an IP without an index, or with a negative or out-of-range one, points at the attachment's
//!   container interface (its ifname, with a sandbox); when the result lists no such interface,
//!   one is synthesised. A bogus index is never emitted (containerd rejects those); each repair
//!   is reported as a warning;
//! * routes are appended with exact duplicates removed; a route without `gw` keeps none — no
//!   guessing of gateways across families;
//! * DNS: ordered unions of nameservers, search and options; `domain` is the first non-empty.

use crate::error::{CniError, INVALID_NETWORK_CONFIG};
use crate::result::{AnyResult, CniResult, Dns, Interface};
use std::collections::HashSet;

/// One attachment to merge: its result (any version) and where it was attached.
#[derive(Debug, Clone, Copy)]
pub struct Attachment<'a> {
    /// The attachment's result.
    pub result: &'a AnyResult,
    /// The interface name it was attached with (`CNI_IFNAME` of that call).
    pub ifname: &'a str,
    /// The namespace path it was attached in (`CNI_NETNS` of that call).
    pub sandbox: &'a str,
}

/// The merged result and what had to be repaired on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// One 1.1.0 result.
    pub result: CniResult,
    /// One line per repaired IP index or synthesised interface, naming the attachment.
    pub warnings: Vec<String>,
}

/// Merges attachments in order (see the module documentation for the rules).
pub fn merge(attachments: &[Attachment<'_>]) -> Merged {
    let mut out = CniResult { cni_version: crate::version::CURRENT.to_string(), ..CniResult::default() };
    let mut warnings = Vec::new();
    let mut seen_routes = HashSet::new();
    for (n, a) in attachments.iter().enumerate() {
        let r = a.result.to_latest();
        let offset = out.interfaces.len();
        let own =
            |name: &str| Interface { name: name.to_string(), sandbox: a.sandbox.to_string(), ..Interface::default() };
        let mut interfaces = r.interfaces.clone();
        // The attachment's container interface, synthesised on first need.
        let mut container_index = interfaces.iter().position(|i| i.name == a.ifname && !i.sandbox.is_empty());
        if interfaces.is_empty() {
            interfaces.push(own(a.ifname));
            container_index = Some(0);
        }
        for ip in &r.ips {
            let valid = ip.interface.and_then(|i| usize::try_from(i).ok()).filter(|&i| i < r.interfaces.len());
            let index = match valid {
                Some(i) => i,
                None => {
                    if let Some(bad) = ip.interface {
                        warnings.push(format!(
                            "attachment {n} ({}): IP {} had interface index {bad}, outside its {} interfaces; \
                             it now points at {}",
                            a.ifname,
                            ip.address,
                            r.interfaces.len(),
                            a.ifname
                        ));
                    }
                    match container_index {
                        Some(i) => i,
                        None => {
                            warnings.push(format!(
                                "attachment {n} ({}): result lists no container interface {}; one was added",
                                a.ifname, a.ifname
                            ));
                            interfaces.push(own(a.ifname));
                            let i = interfaces.len() - 1;
                            container_index = Some(i);
                            i
                        }
                    }
                }
            };
            let mut ip = ip.clone();
            ip.interface = Some((offset + index) as i64);
            out.ips.push(ip);
        }
        out.interfaces.extend(interfaces);
        for route in r.routes {
            if seen_routes.insert(route.clone()) {
                out.routes.push(route);
            }
        }
        merge_dns(&mut out.dns, &r.dns);
    }
    Merged { result: out, warnings }
}

fn union(into: &mut Vec<String>, from: &[String]) {
    for s in from {
        if !into.contains(s) {
            into.push(s.clone());
        }
    }
}

fn merge_dns(into: &mut Dns, from: &Dns) {
    union(&mut into.nameservers, &from.nameservers);
    union(&mut into.search, &from.search);
    union(&mut into.options, &from.options);
    if into.domain.is_empty() {
        into.domain = from.domain.clone();
    }
}

/// A merge that cannot be expressed in the requested version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a merged result of {attachments} attachments cannot be expressed in cniVersion {version}: results of 0.1.0 and 0.2.0 \
     hold one IPv4 and one IPv6 address and no interfaces; use cniVersion 0.3.0 or later (1.1.0 keeps every field)"
)]
pub struct Inexpressible {
    /// The requested version.
    pub version: String,
    /// How many attachments would be merged.
    pub attachments: usize,
}

impl From<Inexpressible> for CniError {
    /// Code 7 ([`INVALID_NETWORK_CONFIG`]): the configuration's version cannot carry a merged
    /// result of this many attachments.
    fn from(e: Inexpressible) -> CniError {
        CniError::new(INVALID_NETWORK_CONFIG, e.to_string())
    }
}

/// Refuses, before anything runs, a merge whose output version cannot carry it: legacy
/// versions (0.1.0/0.2.0) can hold one attachment only.
pub fn check_expressible(version: &str, attachments: usize) -> Result<(), Inexpressible> {
    let legacy = crate::version::Family::of(version) == Some(crate::version::Family::Legacy);
    if legacy && attachments > 1 {
        return Err(Inexpressible { version: version.to_string(), attachments });
    }
    Ok(())
}
