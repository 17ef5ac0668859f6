//! The work inside the pod namespace: joining each pod interface to a tap (ADD), undoing it
//! (DEL, and ADD's rollback), and comparing it with a result (CHECK). Every function here runs
//! on the thread that entered the namespace (`cni_skel::netns::run_in`).
//!
//! Order of ADD, per interface, so that a crash at any point leaves only what DEL finds:
//! 1. the tap is created non-persistent (it dies with vmtap's descriptor), owned, given —
//!    still down — its ingress qdisc (it goes with the tap), the pod interface's MTU, the
//!    attachment's device group and the mark ([`crate::mark`]); then made persistent;
//! 2. once vmtap's descriptor is closed: the redirect tap → pod, and the tap brought up;
//! 3. the pod interface gets an ingress qdisc unless its ingress is served already — by an
//!    ingress qdisc or a clsact qdisc (eBPF-based CNIs add one), used as it is (the mark says
//!    which);
//! 4. the redirect pod → tap.
//!
//! DEL removes, for every tap marked with this attachment, the filters on its pod interface
//! that redirect to it — with that interface's ingress qdisc when vmtap made it and nothing
//! else is on it — then the taps (their own qdiscs and filters go with them). Several
//! attachments joining one pod interface share the qdisc the first one made (each mark says
//! vmtap made it), so the last one deleted removes it, whatever the order.
//!
//! What each step costs the kernel decides the order too: a listing of the namespace is done
//! once per command, never per tap (each tap is asked for by name); an ingress qdisc grafted
//! on an *up* device makes the kernel stop and restart its queues (`qdisc_graft`:
//! `dev_deactivate`, which waits for an RCU grace period), so the tap gets its qdisc while
//! down, and its first filter once a grace period has passed (`join`); the taps are put
//! in their device group as they are made, so that DEL deletes them in one request without
//! changing each first.

use crate::config::{Keys, Owner};
use crate::error::VmtapError;
use crate::mark::{Mark, MAX_ALIAS};
use crate::plan::{Existing, Selection, Wire};
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

/// ADD: converges the attachment's taps on `sel`, the pod interfaces `prevResult` hands to a
/// VM, and returns every wire (kept and new) with what the namespace says of it, in result
/// order. A first ADD finds no tap of the attachment and makes one per pod interface.
///
/// A tap an earlier ADD of the attachment made ([`Mark`]) is
/// - **kept**, untouched, when its pod interface is still chosen in `prevResult` and that very
///   link still redirects to it (the last step of `join`, so the tap is whole; and filters go
///   with their link, so a pod interface removed and made again under its name has none) and,
///   with `tapNames`, it still has the name the key gives it;
/// - **left** as it is when its pod interface is a pod interface of `prevResult` this vmtap
///   does not choose (another vmtap's of the chain, by its `interfaces`), or when it is one of
///   the taps of an earlier plugin that `prevResult` lists;
/// - **removed** (as DEL removes it) otherwise: its pod interface left `prevResult`, or is gone.
///
/// Removals come after the new taps are made, so that a failure leaves what existed as it was
/// and removes what this ADD made; only a stale tap whose name `tapNames` gives a new one goes
/// first.
pub fn add(
    sel: &Selection<'_>,
    keys: &Keys,
    att: Attachment<'_>,
    netns: &str,
) -> Result<Vec<(Wire, Made)>, VmtapError> {
    let mut rtnl = Rtnl::open()?;
    let all = links::links(&mut rtnl)?;
    let mut existing = Existing::default();
    let mut stale: Vec<(&Link, Mark)> = Vec::new();
    let mut vouched: Vec<String> = Vec::new();
    let ours: Vec<(&Link, Mark)> = marked(&all, att).filter(|(t, _)| !sel.is_earlier_tap(&t.name)).collect();
    // Listed only when the attachment has taps already (a first ADD does not pay for it here).
    let served = if ours.is_empty() { Vec::new() } else { tc::ingress_qdiscs(&mut rtnl)? };
    for (tap, mark) in ours {
        existing.names.push(tap.name.clone());
        if sel.is_chosen(&mark.pod) {
            let named_as_asked = keys.tap_names.get(&mark.pod).is_none_or(|n| *n == tap.name);
            // Joined: the pod interface's redirect to the tap, the last step of `join` (so the
            // tap is complete: also after an ADD killed part-way), on this very link (filters
            // go with their link: one made again under the name has none).
            let joined = match all.iter().find(|l| l.name == mark.pod) {
                Some(pod)
                    if named_as_asked && !existing.kept.contains_key(&mark.pod) && tc::serves(&served, pod.index) =>
                {
                    tc::redirects(&mut rtnl, pod.index, &pod.name)?.iter().any(|r| r.to == tap.index)
                }
                _ => false,
            };
            if joined {
                existing.kept.insert(mark.pod.clone(), tap.name.clone());
                continue;
            }
            // A tap that goes, whose ADD added the pod interface's ingress qdisc (it was killed
            // part-way, or tapNames renamed it): its new tap shares that qdisc, so that the
            // last tap removed from it still removes it. Only if that tap is joined to this
            // very link (its own redirect, made before the qdisc): the qdisc of a link made
            // again under the name is not vmtap's.
            if let Some(pod) = all.iter().find(|l| l.name == mark.pod) {
                if mark.made_ingress
                    && tc::serves(&served, pod.index)
                    && tc::redirects(&mut rtnl, tap.index, &tap.name)?.iter().any(|r| r.to == pod.index)
                {
                    vouched.push(mark.pod.clone());
                }
            }
            stale.push((tap, mark));
        } else if !sel.is_pod_interface(&mark.pod) {
            stale.push((tap, mark));
        }
    }
    let wires = sel.name(keys, &existing).map_err(VmtapError::Plan)?;
    let mut first: Vec<(&Link, Mark)> = Vec::new();
    let mut pods = Vec::with_capacity(wires.len());
    for w in wires.iter().filter(|w| !w.kept) {
        let Some(pod) = all.iter().find(|l| l.name == w.pod) else {
            return Err(VmtapError::PodMissing { iface: w.pod.clone(), netns: netns.to_string() });
        };
        if let Some(taken) = all.iter().find(|l| l.name == w.tap) {
            match stale.iter().position(|(t, _)| t.index == taken.index) {
                Some(k) => first.push(stale.remove(k)),
                None => return Err(VmtapError::TapTaken { tap: w.tap.clone(), pod: w.pod.clone() }),
            }
        }
        pods.push((w, pod));
    }
    // What no new tap needs out of the way stays until the new ones are made.
    let gone: Vec<&str> = first.iter().chain(&stale).map(|(t, _)| t.name.as_str()).collect();
    remove(&mut rtnl, &all, &first)?;
    if !pods.is_empty() {
        let with_ingress = tc::ingress_qdiscs(&mut rtnl)?;
        let group = free_group(&all, att);
        let staying: Vec<Link> = all.iter().filter(|l| !gone.contains(&l.name.as_str())).cloned().collect();
        let made: Vec<&str> = pods.iter().map(|(w, _)| w.tap.as_str()).collect();
        for (w, pod) in &pods {
            let qdisc = if !tc::serves(&with_ingress, pod.index) {
                Qdisc::Add
            } else if vmtap_made(&staying, &pod.name) || vouched.contains(&pod.name) {
                Qdisc::Share
            } else {
                Qdisc::Keep
            };
            if let Err(e) = join(&mut rtnl, w, pod, qdisc, (att, group), keys.owner) {
                return Err(rolled_back(&mut rtnl, att, &made, e));
            }
        }
        if let Err(e) = remove(&mut rtnl, &all, &stale) {
            return Err(rolled_back(&mut rtnl, att, &made, e));
        }
    } else {
        remove(&mut rtnl, &all, &stale)?;
    }
    // What the kernel made of each tap (its MAC; its MTU, which it may refuse or clamp none
    // silently: the result reports what is, not what was asked), and the pod interface's MAC.
    let now = links::links(&mut rtnl).map_err(VmtapError::from);
    let new: Vec<String> = wires.iter().filter(|w| !w.kept).map(|w| w.tap.clone()).collect();
    let new: Vec<&str> = new.iter().map(String::as_str).collect();
    let now = match now {
        Ok(now) => now,
        Err(e) => return Err(rolled_back(&mut rtnl, att, &new, e)),
    };
    let mut out = Vec::with_capacity(wires.len());
    for w in wires {
        let (Some(tap), Some(pod)) = (now.iter().find(|l| l.name == w.tap), now.iter().find(|l| l.name == w.pod))
        else {
            return Err(rolled_back(&mut rtnl, att, &new, VmtapError::TapNotListed(w.tap.clone())));
        };
        let made = Made { tap_mac: tap.mac_string(), pod_mac: pod.mac_string(), mtu: tap.mtu };
        out.push((w, made));
    }
    Ok(out)
}

/// The taps of the namespace marked for the attachment, with their marks.
fn marked<'l>(all: &'l [Link], att: Attachment<'_>) -> impl Iterator<Item = (&'l Link, Mark)> + 'l {
    let (container, ifname) = (att.container.to_string(), att.ifname.to_string());
    all.iter()
        .filter(|l| l.kind == "tun")
        .filter_map(|l| Some((l, Mark::parse(&l.alias)?)))
        .filter(move |(_, m)| m.belongs_to(&container, &ifname))
}

/// [`roll_back`], then `e`: the error that stopped ADD is the one to report; a failing
/// rollback would be found again by DEL, which the runtime sends next.
fn rolled_back(rtnl: &mut Rtnl, att: Attachment<'_>, made: &[&str], e: VmtapError) -> VmtapError {
    let _ = roll_back(rtnl, att, made);
    e
}

/// Removes the taps of the attachment named in `made` (what this ADD made), as DEL would;
/// the taps that existed before this ADD stay.
pub fn roll_back(rtnl: &mut Rtnl, att: Attachment<'_>, made: &[&str]) -> Result<(), VmtapError> {
    let all = links::links(rtnl)?;
    let ours: Vec<(&Link, Mark)> = marked(&all, att).filter(|(t, _)| made.contains(&t.name.as_str())).collect();
    remove(rtnl, &all, &ours)
}

/// Removes some taps of the attachment, one request each (the others of its device group
/// stay), with what joins them to their pod interfaces (as [`teardown`]).
fn remove(rtnl: &mut Rtnl, all: &[Link], taps: &[(&Link, Mark)]) -> Result<(), VmtapError> {
    if taps.is_empty() {
        return Ok(());
    }
    unjoin_all(rtnl, all, taps)?;
    for (tap, _) in taps {
        match links::delete(rtnl, tap.index, &tap.name) {
            Err(e) if !e.is_not_found() => return Err(e.into()),
            _ => {}
        }
    }
    Ok(())
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

/// Makes `w`'s tap and joins it to `pod`; the tap goes in device group `group` (the
/// attachment's: [`free_group`]).
fn join(
    rtnl: &mut Rtnl,
    w: &Wire,
    pod: &Link,
    qdisc: Qdisc,
    (att, group): (Attachment<'_>, u32),
    owner: Option<Owner>,
) -> Result<(), VmtapError> {
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
    let tap = links::get(rtnl, new.name())?.ok_or_else(|| VmtapError::TapNotListed(new.name().to_string()))?;
    tc::add_ingress(rtnl, tap.index, &tap.name)?;
    let change = LinkChange { mtu: Some(pod.mtu), up: None, alias: Some(&alias), group: Some(group) };
    links::set(rtnl, tap.index, &tap.name, &change)?;
    new.persist()?;
    // The first filter on a new ingress qdisc waits for an RCU grace period since the qdisc
    // was made (`mini_qdisc_pair_swap`); closing the descriptor just waited for one
    // (`__tun_detach`: `synchronize_net`), so the filter goes after it, not before.
    tc::add_redirect(rtnl, (tap.index, &tap.name), (pod.index, &pod.name))?;
    // Up once vmtap's descriptor is closed: a tap has carrier only while a descriptor is
    // attached, and one brought up with carrier is configured for IPv6 at once (a link-local
    // address, its routes, duplicate address detection) — work for ADD and more for DEL to
    // undo, for a tap whose frames tc redirects before any of it applies. Without carrier
    // the kernel does that when the VMM attaches, as for a tap `ip tuntap add` made.
    links::set(rtnl, tap.index, &tap.name, &LinkChange { up: Some(true), ..LinkChange::default() })?;

    if qdisc == Qdisc::Add && !tc::add_ingress(rtnl, pod.index, &pod.name)? {
        // Someone else's qdisc appeared since the listing: the mark must not claim it, or DEL
        // would delete it (and whatever else is on it) as vmtap's.
        let mark = Mark { made_ingress: false, ..mark };
        links::set(rtnl, tap.index, &tap.name, &LinkChange { alias: Some(&mark.to_alias()), ..LinkChange::default() })?;
    }
    tc::add_redirect(rtnl, (pod.index, &pod.name), (tap.index, &tap.name))?;
    Ok(())
}

/// Removes everything of the attachment in the namespace; returns the taps removed.
pub fn teardown(rtnl: &mut Rtnl, att: Attachment<'_>) -> Result<Vec<String>, VmtapError> {
    let all = links::links(rtnl)?;
    let ours: Vec<(&Link, Mark)> = marked(&all, att).collect();
    if ours.is_empty() {
        return Ok(Vec::new());
    }
    unjoin_all(rtnl, &all, &ours)?;
    delete_taps(rtnl, &all, &ours.iter().map(|(t, _)| *t).collect::<Vec<_>>(), att)?;
    Ok(ours.iter().map(|(t, _)| t.name.clone()).collect())
}

/// Takes off each tap's pod interface the filters that redirect to it — with the pod
/// interface's ingress qdisc when vmtap made it and nothing else is on it.
fn unjoin_all(rtnl: &mut Rtnl, all: &[Link], taps: &[(&Link, Mark)]) -> Result<(), VmtapError> {
    let with_ingress = tc::ingress_qdiscs(rtnl)?;
    for (tap, mark) in taps {
        if let Some(pod) = all.iter().find(|l| l.name == mark.pod) {
            if let Some(q) = with_ingress.iter().find(|q| q.index == pod.index) {
                // A clsact there is not the ingress qdisc vmtap made (that one is gone, and
                // its filters with it): only our redirects, if any, are taken off it.
                unjoin(rtnl, pod, tap.index, mark.made_ingress && !q.clsact)?;
            }
        }
    }
    Ok(())
}

/// Deletes the taps. Each deletion costs the kernel an RCU grace period or two (10–20 ms on a
/// small VM), so several taps are deleted in one request, as the device group of their own
/// ADD put them in, which pays that wait once. A tap found outside it (one made before ADD
/// put taps in their group, or a group since taken by another link) is moved first.
fn delete_taps(rtnl: &mut Rtnl, all: &[Link], taps: &[&Link], att: Attachment<'_>) -> Result<(), VmtapError> {
    if let [tap] = taps {
        links::delete(rtnl, tap.index, &tap.name)?;
        return Ok(());
    }
    let group = free_group(all, att);
    for tap in taps.iter().filter(|t| t.group != group) {
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
    let ours =
        |l: &Link| l.kind == "tun" && Mark::parse(&l.alias).is_some_and(|m| m.belongs_to(att.container, att.ifname));
    while all.iter().any(|l| l.group == group && !ours(l)) {
        group = 0x4000_0000 | (group.wrapping_add(1) & 0x3fff_ffff);
    }
    group
}

/// Deletes the filter chains on `pod`'s ingress that redirect to `target`, from one listing of
/// its filters. When vmtap made the ingress qdisc (`made_ingress`) and nothing else is on it,
/// the qdisc is deleted instead, which takes those filters with it: one request, not one for
/// the filters and one for the qdisc.
fn unjoin(rtnl: &mut Rtnl, pod: &Link, target: u32, made_ingress: bool) -> Result<(), VmtapError> {
    let filters = tc::ingress_filters(rtnl, pod.index, &pod.name)?;
    let ours: Vec<(u16, u16)> =
        filters.redirects.iter().filter(|r| r.to == target).map(|r| (r.priority, r.protocol)).collect();
    let gone = |done: Result<(), cni_netlink::NetlinkError>| match done {
        Err(e) if !e.is_not_found() => Err(VmtapError::from(e)),
        _ => Ok(()),
    };
    if made_ingress && !filters.others_than(&ours) {
        return gone(tc::delete_ingress(rtnl, pod.index, &pod.name));
    }
    for (priority, protocol) in ours {
        gone(tc::delete_filters(rtnl, pod.index, &pod.name, priority, protocol))?;
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
            if !tc::serves(&with_ingress, from.index) {
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
