//! The work inside the pod namespace: joining each pod interface to a tap (ADD), undoing it
//! (DEL, and ADD's rollback), and comparing it with a result (CHECK). Every function here runs
//! on the thread that entered the namespace (`cni_skel::netns::run_in`).
//!
//! Order of ADD, per interface, so that a crash at any point leaves only what DEL finds:
//! 1. the tap is created non-persistent (it dies with vmtap's descriptor), owned, given the
//!    pod interface's MTU, brought up and marked ([`crate::mark`]); then made persistent;
//! 2. the pod interface gets an ingress qdisc unless its ingress is served already — by an
//!    ingress qdisc or a clsact qdisc (eBPF-based CNIs add one), used as it is (the mark says
//!    which) — and the tap gets one;
//! 3. the two redirect filters: pod → tap, tap → pod.
//!
//! DEL removes, for every tap marked with this attachment, the filters on its pod interface
//! that redirect to it, that interface's ingress qdisc if vmtap made it and no filter is left
//! on it, then the tap (its own qdisc and filter go with it). Several attachments joining one
//! pod interface share the qdisc the first one made (each mark says vmtap made it), so the
//! last one deleted removes it, whatever the order.

use crate::config::Owner;
use crate::error::VmtapError;
use crate::mark::{Mark, MAX_ALIAS};
use crate::plan::Wire;
use crate::result::Made;
use crate::tap::NewTap;
use cni_netlink::links::{self, Link, LinkChange};
use cni_netlink::{tc, Rtnl};
use cni_skel::cni_types::result::VmPair;

/// One attachment: (CNI_CONTAINERID, CNI_IFNAME).
#[derive(Debug, Clone, Copy)]
pub struct Attachment<'a> {
    /// `CNI_CONTAINERID`.
    pub container: &'a str,
    /// `CNI_IFNAME`.
    pub ifname: &'a str,
}

/// ADD: joins every wire's pod interface to a new tap. On failure, everything this attachment
/// has in the namespace is removed before the error is returned.
pub fn add(wires: &[Wire], att: Attachment<'_>, owner: Option<Owner>, netns: &str) -> Result<Vec<Made>, VmtapError> {
    let mut rtnl = Rtnl::open()?;
    let all = links::links(&mut rtnl)?;
    let mut pods = Vec::with_capacity(wires.len());
    for w in wires {
        let Some(pod) = all.iter().find(|l| l.name == w.pod) else {
            return Err(VmtapError::PodMissing { iface: w.pod.clone(), netns: netns.to_string() });
        };
        if all.iter().any(|l| l.name == w.tap) {
            return Err(VmtapError::TapTaken { tap: w.tap.clone(), pod: w.pod.clone() });
        }
        pods.push(pod);
    }
    let with_ingress = tc::ingress_qdiscs(&mut rtnl)?;
    let mut made = Vec::new();
    for (w, pod) in wires.iter().zip(pods) {
        let qdisc = if !with_ingress.contains(&pod.index) {
            Qdisc::Add
        } else if vmtap_made(&all, &pod.name) {
            Qdisc::Share
        } else {
            Qdisc::Keep
        };
        match join(&mut rtnl, w, pod, qdisc, att, owner) {
            Ok(m) => made.push(m),
            Err(e) => return Err(rolled_back(&mut rtnl, att, e)),
        }
    }
    // What the kernel made of each tap's MTU (it may refuse or clamp none silently, but the
    // result reports what is, not what was asked).
    let now = match links::links(&mut rtnl) {
        Ok(now) => now,
        Err(e) => return Err(rolled_back(&mut rtnl, att, e.into())),
    };
    for (w, m) in wires.iter().zip(made.iter_mut()) {
        match now.iter().find(|l| l.name == w.tap) {
            Some(tap) => m.mtu = tap.mtu,
            None => return Err(rolled_back(&mut rtnl, att, VmtapError::TapNotListed(w.tap.clone()))),
        }
    }
    Ok(made)
}

/// Removes what the attachment has in the namespace and returns `e`: the error that stopped
/// ADD is the one to report; a failing rollback would be found again by DEL, which the runtime
/// sends next.
fn rolled_back(rtnl: &mut Rtnl, att: Attachment<'_>, e: VmtapError) -> VmtapError {
    let _ = teardown(rtnl, att);
    e
}

/// What an ADD does with a pod interface's ingress qdisc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Qdisc {
    /// There is none: vmtap adds it, and its mark says vmtap made it.
    Add,
    /// Another attachment's vmtap made it: this one's mark says so too. Whichever attachment
    /// is deleted last finds no filter left on it and removes it — in either order.
    Share,
    /// Somebody else's (an ingress qdisc, or a clsact qdisc): used, never removed.
    Keep,
}

/// Whether a tap of the namespace (of any attachment) is marked as joined to `pod` with the
/// ingress qdisc vmtap made.
fn vmtap_made(all: &[Link], pod: &str) -> bool {
    all.iter().filter(|l| l.kind == "tun").filter_map(|l| Mark::parse(&l.alias)).any(|m| m.pod == pod && m.made_ingress)
}

fn join(
    rtnl: &mut Rtnl,
    w: &Wire,
    pod: &Link,
    qdisc: Qdisc,
    att: Attachment<'_>,
    owner: Option<Owner>,
) -> Result<Made, VmtapError> {
    let mark = Mark {
        container: att.container.to_string(),
        ifname: att.ifname.to_string(),
        pod: pod.name.clone(),
        made_ingress: qdisc != Qdisc::Keep,
    };
    let alias = mark.to_alias();
    if alias.len() > MAX_ALIAS {
        return Err(VmtapError::MarkTooLong { tap: w.tap.clone(), pod: pod.name.clone(), len: alias.len() });
    }
    let new = NewTap::create(&w.tap)?;
    if let Some(o) = owner {
        new.set_owner(o.uid, o.gid)?;
    }
    let tap = links::links(rtnl)?
        .into_iter()
        .find(|l| l.name == new.name())
        .ok_or_else(|| VmtapError::TapNotListed(new.name().to_string()))?;
    let change = LinkChange { mtu: Some(pod.mtu), up: Some(true), alias: Some(&alias), group: None };
    links::set(rtnl, tap.index, &tap.name, &change)?;
    new.persist()?;

    if qdisc == Qdisc::Add {
        tc::add_ingress(rtnl, pod.index, &pod.name)?;
    }
    tc::add_ingress(rtnl, tap.index, &tap.name)?;
    tc::add_redirect(rtnl, (pod.index, &pod.name), (tap.index, &tap.name))?;
    tc::add_redirect(rtnl, (tap.index, &tap.name), (pod.index, &pod.name))?;
    Ok(Made { tap_mac: tap.mac_string(), pod_mac: pod.mac_string(), mtu: pod.mtu })
}

/// Removes everything of the attachment in the namespace; returns the taps removed.
pub fn teardown(rtnl: &mut Rtnl, att: Attachment<'_>) -> Result<Vec<String>, VmtapError> {
    let all = links::links(rtnl)?;
    let ours: Vec<(&Link, Mark)> = all
        .iter()
        .filter(|l| l.kind == "tun")
        .filter_map(|l| Some((l, Mark::parse(&l.alias)?)))
        .filter(|(_, m)| m.belongs_to(att.container, att.ifname))
        .collect();
    if ours.is_empty() {
        return Ok(Vec::new());
    }
    let with_ingress = tc::ingress_qdiscs(rtnl)?;
    for (tap, mark) in &ours {
        if let Some(pod) = all.iter().find(|l| l.name == mark.pod) {
            if with_ingress.contains(&pod.index) {
                unredirect(rtnl, pod, tap.index)?;
                if mark.made_ingress && tc::ingress_filter_count(rtnl, pod.index, &pod.name)? == 0 {
                    match tc::delete_ingress(rtnl, pod.index, &pod.name) {
                        Err(e) if !e.is_not_found() => return Err(e.into()),
                        _ => {}
                    }
                }
            }
        }
    }
    delete_taps(rtnl, &all, &ours.iter().map(|(t, _)| *t).collect::<Vec<_>>(), att)?;
    Ok(ours.iter().map(|(t, _)| t.name.clone()).collect())
}

/// Deletes the taps. Each deletion costs the kernel an RCU grace period or two (10–20 ms on a
/// small VM), so several taps are put in a device group of their own and deleted in one
/// request, which pays that wait once.
fn delete_taps(rtnl: &mut Rtnl, all: &[Link], taps: &[&Link], att: Attachment<'_>) -> Result<(), VmtapError> {
    if let [tap] = taps {
        links::delete(rtnl, tap.index, &tap.name)?;
        return Ok(());
    }
    let group = free_group(all, att);
    for tap in taps {
        links::set(rtnl, tap.index, &tap.name, &LinkChange { group: Some(group), ..LinkChange::default() })?;
    }
    links::delete_group(rtnl, group)?;
    Ok(())
}

/// A device group no link of the namespace is in, derived from the attachment (so that a DEL
/// redone after a crash picks the same one): taps left in it by an interrupted DEL are
/// vmtap's own, marked for this attachment, and go with the next.
fn free_group(all: &[Link], att: Attachment<'_>) -> u32 {
    // FNV-1a of "container ifname", in a range far from the small numbers operators use.
    let mut h: u32 = 0x811c_9dc5;
    for b in att.container.bytes().chain([b' ']).chain(att.ifname.bytes()) {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    let mut group = 0x4000_0000 | (h & 0x3fff_ffff);
    let ours = |l: &Link| Mark::parse(&l.alias).is_some_and(|m| m.belongs_to(att.container, att.ifname));
    while all.iter().any(|l| l.group == group && !ours(l)) {
        group = 0x4000_0000 | (group.wrapping_add(1) & 0x3fff_ffff);
    }
    group
}

/// Deletes the filter chains on `pod`'s ingress that redirect to `target`.
fn unredirect(rtnl: &mut Rtnl, pod: &Link, target: u32) -> Result<(), VmtapError> {
    for r in tc::redirects(rtnl, pod.index, &pod.name)?.into_iter().filter(|r| r.to == target) {
        match tc::delete_filters(rtnl, pod.index, &pod.name, r.priority, r.protocol) {
            Err(e) if !e.is_not_found() => return Err(e.into()),
            _ => {}
        }
    }
    Ok(())
}

/// CHECK: every pair of the result has its tap, marked for this attachment, joined both ways
/// to the pod interface whose MAC the VM interface carries. Returns what differs.
pub fn inspect(pairs: &[VmPair<'_>], att: Attachment<'_>) -> Result<Vec<String>, VmtapError> {
    let mut rtnl = Rtnl::open()?;
    let all = links::links(&mut rtnl)?;
    let with_ingress = tc::ingress_qdiscs(&mut rtnl)?;
    let mut problems = Vec::new();
    for p in pairs {
        let name = &p.tap.name;
        let Some(tap) = all.iter().find(|l| l.name == *name) else {
            problems.push(format!("tap {name} is missing"));
            continue;
        };
        let mark = Mark::parse(&tap.alias);
        let Some(mark) = mark.filter(|m| tap.kind == "tun" && m.belongs_to(att.container, att.ifname)) else {
            problems.push(format!("{name} is not a tap made by vmtap for {} {}", att.container, att.ifname));
            continue;
        };
        let (tap_mac, vm_mac) = (&p.tap.mac, &p.vm.mac);
        if !tap_mac.is_empty() && !tap_mac.eq_ignore_ascii_case(&tap.mac_string()) {
            problems.push(format!("tap {name} has MAC {}, the result says {tap_mac}", tap.mac_string()));
        }
        let Some(pod) = all.iter().find(|l| l.name == mark.pod) else {
            problems.push(format!("pod interface {} of tap {name} is missing", mark.pod));
            continue;
        };
        if !vm_mac.eq_ignore_ascii_case(&pod.mac_string()) {
            let msg = format!("VM interface {name} has MAC {vm_mac}, but {} has {}", pod.name, pod.mac_string());
            problems.push(msg);
        }
        if tap.mtu != pod.mtu {
            problems.push(format!("tap {name} has MTU {}, {} has {}", tap.mtu, pod.name, pod.mtu));
        }
        if !tap.up {
            problems.push(format!("tap {name} is down"));
        }
        for (from, to) in [(pod, tap), (tap, pod)] {
            if !with_ingress.contains(&from.index) {
                problems.push(format!("{} has no ingress qdisc", from.name));
                continue;
            }
            let found = tc::redirects(&mut rtnl, from.index, &from.name)?
                .iter()
                .any(|r| r.to == to.index && r.passes_every_frame());
            if !found {
                problems.push(format!("no filter on {}'s ingress redirects every frame to {}", from.name, to.name));
            }
        }
    }
    Ok(problems)
}
