//! ADD and DEL of a conflist with and without a chained plugin of braid's — the merger, vmtap —
//! run as libcni runs chains, interleaved.

use super::{paired, World};
use crate::stats::Sample;
use crate::verdict::{ms, signed_ms, Limit, Verdict};
use cni_runtime::chain::{Chain, RuntimeConf};
use cni_runtime::invoke::RawExec;
use cni_types::NetConfList;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A conflist of `plugins` named `name`, cniVersion 1.0.0.
fn list(name: &str, plugins: Vec<Value>) -> Result<NetConfList, String> {
    let v = json!({"cniVersion": "1.0.0", "name": name, "plugins": plugins});
    NetConfList::parse(&serde_json::to_vec(&v).unwrap_or_default()).map_err(|e| e.to_string())
}

/// ADD then DEL of `lists[0]` (without) and `lists[1]` (with) in the node's namespace as libcni
/// runs chains (results cached under `cache`): one warm-up each, then `reps` rounds alternating
/// which goes first; `record(k, add, del)` gets list `k`'s two durations of every round.
fn side_by_side(
    w: &World,
    tag: &str,
    cache: &str,
    lists: [&NetConfList; 2],
    reps: usize,
    mut record: impl FnMut(usize, Duration, Duration) + Send,
) -> Result<(), String> {
    let ctr = w.ctr.path().display().to_string();
    let paths = vec![w.bins.clone(), w.reference.clone()];
    let cache = w.dir.path().join(cache);
    w.in_host(move || -> Result<(), String> {
        let exec = RawExec { timeout: Some(Duration::from_secs(30)), ..RawExec::default() };
        let chain = Chain { exec: &exec, paths, cache_dir: cache };
        let cycle = |l: &NetConfList, id: String| -> Result<(Duration, Duration), String> {
            let r =
                RuntimeConf { container_id: id, netns: ctr.clone(), ifname: "eth0".into(), ..RuntimeConf::default() };
            let t = Instant::now();
            chain.add(l, &r).map_err(|e| e.to_string())?;
            let add = t.elapsed();
            let t = Instant::now();
            chain.del(l, &r).map_err(|e| e.to_string())?;
            Ok((add, t.elapsed()))
        };
        cycle(lists[0], format!("warm{tag}-a"))?;
        cycle(lists[1], format!("warm{tag}-b"))?;
        for i in 0..reps {
            let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
            for k in order {
                let (add, del) = cycle(lists[k], format!("{tag}-{k}-{i}"))?;
                record(k, add, del);
            }
        }
        Ok(())
    })?
}

/// A conflist with the merger (no delegates: its own cost) beside the same chain without it,
/// run the way libcni runs chains.
pub fn merger_added(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let bridge = json!({"type": "bridge", "bridge": "benchbr1", "ipam": w.ipam(102)});
    let tuning = json!({"type": "tuning", "mtu": 1400});
    let merger = json!({"type": "merger", "stateDir": w.dir.path().join("mstate")});
    let without = list("benchm", vec![bridge.clone(), tuning.clone()])?;
    let with = list("benchm", vec![bridge, merger, tuning])?;
    let g = "conflist ± merger";
    let mut s = [
        Sample::new(g, "ADD [bridge, tuning]", "ms"),
        Sample::new(g, "ADD [bridge, merger, tuning]", "ms"),
        Sample::new(g, "DEL [bridge, tuning]", "ms"),
        Sample::new(g, "DEL [bridge, merger, tuning]", "ms"),
    ];
    // 1,000 rounds: a DEL's p10–p90 spans ±8 ms (veth deletion waits for RCU grace
    // periods), and the median of 300 paired differences still moved by ±0.6 ms between runs
    // — as much as the budget.
    side_by_side(w, "m", "cache", [&without, &with], w.reps(1000), |k, add, del| {
        s[k].push(add);
        s[k + 2].push(del);
    })?;
    let verdicts = [("ADD", 0), ("DEL", 2)]
        .iter()
        .map(|(cmd, i)| {
            // Median of the paired differences (each pair measured back to back).
            let added = paired(&s[i + 1], &s[*i], g, "", "ms", |w, wo| w - wo).median();
            Verdict::at_most(
                format!("{cmd} of a conflist: added by the merger (median of paired differences)"),
                added,
                Limit::Ms(MERGER_ADDED_MS),
            )
            .measured(format!(
                "{} (medians {} vs {})",
                signed_ms(added),
                ms(s[i + 1].median()),
                ms(s[*i].median())
            ))
        })
        .collect();
    Ok((s.to_vec(), verdicts))
}

/// What the merger may add to a conflist's ADD and to its DEL: one more process in the chain
/// (its exec, the runtime's request and result handling) and a merge; it is near the exec floor.
const MERGER_ADDED_MS: f64 = 0.7;

/// The group of the ADD+DEL of a chain ± vmtap at `n` pod interfaces.
fn vmtap_group(n: usize) -> &'static str {
    match n {
        1 => "chain ± vmtap, 1 interface",
        _ => "chain ± vmtap, 3 interfaces",
    }
}

/// What vmtap may add to a chain's ADD+DEL: a fixed part, and a part per pod interface.
const VMTAP_FIXED_MS: f64 = 1.0;
const VMTAP_PER_INTERFACE_MS: f64 = 0.5;

/// ADD+DEL of a conflist with vmtap last beside the same conflist without it, run the way
/// libcni runs chains and interleaved (alternating order): `[ptp]` for 1 pod interface,
/// `[delegator merged {ptp, ptp, ptp}]` for 3. What vmtap adds is one more process in the chain
/// plus, per interface, a tap, an ingress qdisc on each side and two `mirred` filters at ADD
/// and their removal at DEL; its budget is [`VMTAP_FIXED_MS`] plus [`VMTAP_PER_INTERFACE_MS`] per
/// interface (median of paired differences).
pub fn vmtap_added(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let mut samples = Vec::new();
    let mut verdicts = Vec::new();
    for n in [1usize, 3] {
        let g = vmtap_group(n);
        let ptps: Vec<Value> = (0..n)
            .map(|i| json!({"cniVersion": "1.0.0", "name": format!("v{i}"), "type": "ptp", "ipam": w.ipam(130 + i as u8)}))
            .collect();
        let first = match n {
            1 => json!({"type": "ptp", "ipam": w.ipam(130)}),
            _ => json!({"type": "delegator", "result": "merged", "stateDir": w.dir.path().join("vstate"),
                "delegates": ptps}),
        };
        let name = format!("benchv{n}");
        let without = list(&name, vec![first.clone()])?;
        let with = list(&name, vec![first, json!({"type": "vmtap"})])?;
        let shown = if n == 1 { "[ptp]" } else { "[delegator merged {ptp, ptp, ptp}]" };
        let with_shown = format!("{}, vmtap]", shown.trim_end_matches(']'));
        let mut s = [
            Sample::new(g, format!("ADD+DEL {shown}"), "ms"),
            Sample::new(g, format!("ADD+DEL {with_shown}"), "ms"),
            Sample::new(g, format!("ADD {shown}"), "ms"),
            Sample::new(g, format!("ADD {with_shown}"), "ms"),
            Sample::new(g, format!("DEL {shown}"), "ms"),
            Sample::new(g, format!("DEL {with_shown}"), "ms"),
        ];
        // Fewer rounds for more interfaces: each is longer.
        let reps = w.reps(if n == 1 { 300 } else { 150 });
        side_by_side(w, &format!("v{n}"), "vcache", [&without, &with], reps, |k, add, del| {
            s[k].push(add + del);
            s[k + 2].push(add);
            s[k + 4].push(del);
        })?;
        let diff = paired(&s[1], &s[0], g, "paired difference (added by vmtap)", "ms", |a, b| a - b);
        let added = diff.median();
        verdicts.push(
            Verdict::at_most(
                format!(
                    "ADD+DEL at {n} interface{}: added by vmtap (median of paired differences)",
                    if n == 1 { "" } else { "s" }
                ),
                added,
                Limit::Ms(VMTAP_FIXED_MS + VMTAP_PER_INTERFACE_MS * n as f64),
            )
            .because(format_args!("{VMTAP_FIXED_MS} ms + {VMTAP_PER_INTERFACE_MS} ms per interface"))
            .measured(format!(
                "{} (p10–p90 {} – {}; medians {} vs {})",
                signed_ms(added),
                signed_ms(diff.p10()),
                signed_ms(diff.p90()),
                ms(s[1].median()),
                ms(s[0].median())
            )),
        );
        samples.extend(s);
        samples.push(diff);
    }
    Ok((samples, verdicts))
}
