//! What a chained plugin of braid's adds: the merger in a conflist run as libcni runs chains,
//! and vmtap called as a runtime calls a chained plugin.

use super::rounds::{compare, Check, Stat};
use super::{interfaces_ns, paired, timings, World};
use crate::stats::Sample;
use crate::verdict::{ms, signed_ms, Limit, Verdict};
use cni_netlink::{links, Rtnl};
use cni_runtime::chain::{Chain, RuntimeConf};
use cni_runtime::invoke::RawExec;
use cni_types::version::Command;
use cni_types::NetConfList;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkFlags, LinkHeader, LinkInfo, LinkMessage};
use netlink_packet_route::RouteNetlinkMessage;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A conflist of `plugins` named `name`, cniVersion 1.0.0.
pub(crate) fn list(name: &str, plugins: Vec<Value>) -> Result<NetConfList, String> {
    let v = json!({"cniVersion": "1.0.0", "name": name, "plugins": plugins});
    NetConfList::parse(&serde_json::to_vec(&v).unwrap_or_default()).map_err(|e| e.to_string())
}

/// What the merger may add to a conflist's ADD and to its DEL: one more process in the chain
/// (its exec, the runtime's request and result handling) and a merge; it is near the exec floor.
const MERGER_ADDED_MS: f64 = 0.7;

/// A conflist with the merger (no delegates: its own cost) beside the same chain without it,
/// run the way libcni runs chains (results cached), interleaved.
pub fn merger_added(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let bridge = json!({"type": "bridge", "bridge": "benchbr1", "ipam": w.ipam(102)});
    let tuning = json!({"type": "tuning", "mtu": 1400});
    let merger = json!({"type": "merger", "stateDir": w.dir.path().join("mstate")});
    let lists = [list("benchm", vec![bridge.clone(), tuning.clone()])?, list("benchm", vec![bridge, merger, tuning])?];
    let g = "conflist ± merger";
    let mut s = timings(
        g,
        &[
            "ADD [bridge, tuning]",
            "ADD [bridge, merger, tuning]",
            "DEL [bridge, tuning]",
            "DEL [bridge, merger, tuning]",
        ],
    );
    let limit = Limit::Ms(MERGER_ADDED_MS);
    // Medians of the paired differences (each pair measured in the same round).
    let checks = [Check { stat: Stat::difference(1, 0), limit }, Check { stat: Stat::difference(3, 2), limit }];
    let ctr = w.ctr.path().display().to_string();
    let paths = vec![w.bins.clone(), w.reference.clone()];
    let cache = w.dir.path().join("cache");
    // 800 rounds a look: a DEL's p10–p90 spans ±8 ms (veth deletion waits for RCU grace
    // periods), and the median of 300 paired differences moved by ±0.6 ms between runs — as
    // much as the budget.
    let plan = w.plan(800, 3);
    let est = w.in_host(|| {
        let exec = RawExec { timeout: Some(Duration::from_secs(30)), ..RawExec::default() };
        let chain = Chain { exec: &exec, paths, cache_dir: cache };
        compare(plan, &mut s, &[vec![0, 2], vec![1, 3]], &checks, |k, tag| {
            let r = RuntimeConf {
                container_id: format!("m{k}-{tag}"),
                netns: ctr.clone(),
                ifname: "eth0".into(),
                ..RuntimeConf::default()
            };
            let t = Instant::now();
            chain.add(&lists[k], &r).map_err(|e| e.to_string())?;
            let add = t.elapsed();
            let t = Instant::now();
            chain.del(&lists[k], &r).map_err(|e| e.to_string())?;
            Ok(vec![add, t.elapsed()])
        })
    })??;
    let verdicts = [("ADD", 0), ("DEL", 2)]
        .into_iter()
        .zip(est)
        .map(|((cmd, i), e)| {
            Verdict::at_most(
                format!("{cmd} of a conflist: added by the merger (median of paired differences)"),
                e,
                limit,
            )
            .measured(format!(
                "{} (medians {} vs {})",
                signed_ms(e.value),
                ms(s[i + 1].median()),
                ms(s[i].median())
            ))
        })
        .collect();
    Ok((s, verdicts))
}

/// What vmtap may cost per pod interface, in CPU time (its user + system time: the kernel's
/// work for its calls included): a tap, an ingress qdisc on each side and two `mirred` filters
/// at ADD and their removal at DEL (the taps themselves are deleted in one batch).
const VMTAP_PER_INTERFACE_MS: f64 = 0.5;

/// What vmtap's fixed part (its ADD+DEL less the per-interface part) may cost, in deletions of
/// one device. Most of it is one: the kernel's unregistration of the taps (RCU grace periods in
/// `unregister_netdevice`), 10–20 ms on some kernels, which no plugin that creates a device can
/// avoid; the rest — two execs, the namespace entered, the dumps — must fit in a fifth of it.
const VMTAP_FIXED_IN_DELETIONS: f64 = 1.2;

/// The interface counts vmtap is measured at: its increment is read over seven interfaces.
const VMTAP_FEW: usize = 1;
const VMTAP_MANY: usize = 8;

/// vmtap's ADD then DEL, exec included, called as a runtime calls a chained plugin (the pod's
/// interfaces in `prevResult`) on a pod namespace of 1 and of 8 interfaces, interleaved with the
/// deletion of one device — a dummy link ([`DEVICE_KINDS`]), up, deleted with one `RTM_DELLINK`
/// from this process in the 1-interface namespace — in the same rounds. The budgets are on what
/// vmtap controls:
///
/// - the increment per interface in CPU time (the median over rounds of (ADD+DEL at 8 − at 1)
///   ÷ 7 of vmtap's user + system time) ≤ [`VMTAP_PER_INTERFACE_MS`]. Not in wall time: each DEL
///   waits 15–30 ms, in steps of the kernel's tick, for the batch unregistration of its taps —
///   one wait whatever the count, asleep — and the difference of two such waits, ±several ms a
///   round, buries a few hundred µs per interface (DEL at 8 read faster than DEL at 1 in two of
///   four runs). The wall-time increment of ADD+DEL is reported beside it;
/// - the increment per interface of ADD alone in wall time ≤ [`VMTAP_PER_INTERFACE_MS`]: what a
///   pod start waits for, sleeps included (ADD sleeps for no unregistration);
/// - the fixed part (ADD+DEL at 1 less one wall-time increment, a median over rounds) ≤
///   [`VMTAP_FIXED_IN_DELETIONS`]× the deletion's median.
pub fn vmtap_added(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let (few_ns, few_result) = interfaces_ns(VMTAP_FEW)?;
    let (many_ns, many_result) = interfaces_ns(VMTAP_MANY)?;
    let conf = |result: &Value| json!({"cniVersion": "1.1.0", "name": "benchv", "type": "vmtap", "prevResult": result});
    let pods = [(few_ns.path(), conf(&few_result)), (many_ns.path(), conf(&many_result))];
    let g = "vmtap ADD+DEL, called alone (exec included)";
    let mut s = timings(
        g,
        &[
            "ADD+DEL, 1 interface",
            "ADD+DEL, 8 interfaces",
            "ADD, 1 interface",
            "ADD, 8 interfaces",
            "DEL, 1 interface",
            "DEL, 8 interfaces",
            "CPU time of ADD+DEL, 1 interface",
            "CPU time of ADD+DEL, 8 interfaces",
        ],
    );
    let span = (VMTAP_MANY - VMTAP_FEW) as f64;
    let per_interface = |many: usize, few: usize| Stat::Linear(vec![(many, 1.0 / span), (few, -1.0 / span)]);
    let (wall, cpu, add) = (per_interface(1, 0), per_interface(7, 6), per_interface(3, 2));
    let fixed = Stat::Linear(vec![(0, 1.0 + VMTAP_FEW as f64 / span), (1, -(VMTAP_FEW as f64) / span)]);
    const DELETION: usize = 8;
    let checks = [
        Check { stat: cpu.clone(), limit: Limit::Ms(VMTAP_PER_INTERFACE_MS) },
        Check {
            stat: Stat::Over(Box::new(fixed.clone()), DELETION),
            limit: Limit::Times(VMTAP_FIXED_IN_DELETIONS, "deleting one device"),
        },
        Check { stat: add.clone(), limit: Limit::Ms(VMTAP_PER_INTERFACE_MS) },
    ];
    // The deleting side's socket lives in the 1-interface pod namespace.
    let mut rtnl =
        cni_skel::netns::run_in(&few_ns.path(), Rtnl::open).map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
    let (kind, article) = device_kind(&mut rtnl)?;
    s.push(Sample::new("vmtap: per round", format!("deleting one device ({article} {kind} link)"), "ms"));
    // 600 rounds a look: a round's wall-time values carry a seventh of two device
    // unregistrations' difference, about ±0.3 ms.
    let plan = w.plan(600, 3);
    let est = w.in_host(|| {
        compare(plan, &mut s, &[vec![0, 2, 4, 6], vec![1, 3, 5, 7], vec![DELETION]], &checks, |m, tag| {
            let Some((ns, conf)) = pods.get(m) else {
                return Ok(vec![delete_one_device(&mut rtnl, kind)?]);
            };
            let id = format!("t{m}-{tag}");
            let netns = ns.display().to_string();
            let add = w.call(w.bin("vmtap"), Command::Add, &id, "c0", conf).in_netns(netns.clone());
            let del = w.call(w.bin("vmtap"), Command::Del, &id, "c0", conf).in_netns(netns);
            let (add, add_cpu, _) = add.run_cpu()?;
            let (del, del_cpu, _) = del.run_cpu()?;
            Ok(vec![add + del, add, del, add_cpu + del_cpu])
        })
    })??;
    let (inc, fix, add_inc) = (&est[0], &est[1], &est[2]);
    let per_round = |name: &str, stat: &Stat| {
        let mut x = Sample::new("vmtap: per round", name, "ms");
        x.values = stat.per_round(&s);
        x
    };
    let derived = [
        per_round("increment per interface, CPU time ((8 − 1) ÷ 7)", &cpu),
        per_round("increment per interface, wall time ((8 − 1) ÷ 7)", &wall),
        per_round("increment per interface of ADD alone, wall time ((8 − 1) ÷ 7)", &add),
        per_round("fixed part (1 interface less one increment)", &fixed),
        paired(&s[1], &s[0], "vmtap: per round", "8 interfaces less 1", "ms", |a, b| a - b),
    ];
    let deletion = s[DELETION].median();
    let verdicts = vec![
        Verdict::at_most(
            "vmtap ADD+DEL: increment per pod interface, CPU time (median over rounds of (8 interfaces − 1) ÷ 7 of vmtap's user + system time)",
            *inc,
            checks[0].limit,
        )
        .measured(format!(
            "{} (CPU medians {} at 8 interfaces, {} at 1; in wall time {} per interface, {} of it ADD's)",
            signed_ms(inc.value),
            ms(s[7].median()),
            ms(s[6].median()),
            signed_ms(wall.figure(&s)),
            signed_ms(add.figure(&s))
        )),
        Verdict::at_most(
            format!("vmtap ADD+DEL: fixed part (1 interface less one increment) ÷ deleting one device ({article} {kind} link, same rounds)"),
            *fix,
            checks[1].limit,
        )
        .measured(format!(
            "{:.3} (fixed part {}, one device deleted in {})",
            fix.value,
            signed_ms(fixed.figure(&s)),
            ms(deletion)
        ))
        .because("the kernel's unregistration of one device, which vmtap's DEL pays once; the rest in a fifth of it"),
        Verdict::at_most(
            "vmtap ADD: increment per pod interface, wall time (median over rounds of (ADD at 8 interfaces − at 1) ÷ 7; what a pod start waits for)",
            *add_inc,
            checks[2].limit,
        )
        .measured(format!(
            "{} (medians {} at 8 interfaces, {} at 1)",
            signed_ms(add_inc.value),
            ms(s[3].median()),
            ms(s[2].median())
        )),
    ];
    s.extend(derived);
    drop((few_ns, many_ns));
    Ok((s, verdicts))
}

/// The name of the link whose deletion vmtap's budget is read against.
const DEVICE: &str = "bdel0";

/// The kinds of link tried for it, in order, with their article: a dummy link, or — on a kernel
/// built without the dummy driver (`CONFIG_DUMMY`), as some VM kernels are — an ifb link,
/// likewise a device with no hardware and no peer.
const DEVICE_KINDS: [(&str, &str); 2] = [("dummy", "a"), ("ifb", "an")];

/// The first of [`DEVICE_KINDS`] this kernel creates (created and deleted once), and its article.
fn device_kind(rtnl: &mut Rtnl) -> Result<(&'static str, &'static str), String> {
    let mut why = Vec::new();
    for (kind, article) in DEVICE_KINDS {
        match delete_one_device(rtnl, kind) {
            Ok(_) => return Ok((kind, article)),
            Err(e) => why.push(format!("{kind}: {e}")),
        }
    }
    Err(format!("cannot create a device to delete beside vmtap ({})", why.join("; ")))
}

/// Creates a link of `kind`, up (not timed), and deletes it with one `RTM_DELLINK` (timed), in
/// the namespace `rtnl` was opened in: what unregistering one device costs this kernel.
fn delete_one_device(rtnl: &mut Rtnl, kind: &str) -> Result<Duration, String> {
    let info_kind = match kind {
        "dummy" => InfoKind::Dummy,
        _ => InfoKind::Ifb,
    };
    let mut msg = LinkMessage::default();
    msg.header = LinkHeader { flags: LinkFlags::Up, change_mask: LinkFlags::Up, ..LinkHeader::default() };
    msg.attributes =
        vec![LinkAttribute::IfName(DEVICE.to_string()), LinkAttribute::LinkInfo(vec![LinkInfo::Kind(info_kind)])];
    let e = |e: cni_netlink::NetlinkError| e.to_string();
    let what = format!("add {kind} link {DEVICE}");
    rtnl.request(&what, RouteNetlinkMessage::NewLink, msg, NLM_F_CREATE | NLM_F_EXCL).map_err(e)?;
    let index = links::links(rtnl)
        .map_err(e)?
        .into_iter()
        .find(|l| l.name == DEVICE)
        .map(|l| l.index)
        .ok_or_else(|| format!("the {kind} link {DEVICE} just created is not there"))?;
    let t = Instant::now();
    links::delete(rtnl, index, DEVICE).map_err(e)?;
    Ok(t.elapsed())
}
