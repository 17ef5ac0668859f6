//! The node case to iterate on (`--only node-quick`, `scripts/bench.sh --node-quick`): the
//! cluster network alone against braid with 0, 1 and 4 networks by the annotation and with 1
//! network by a ResourceClaim (braid's DRA driver, `deploy/kubernetes-dra`), in bursts of 10
//! pods, with verdicts on issue 50's budgets on the real node:
//!
//! * braid at 0 networks adds ≤ 10 ms to the kubelet's mean RunPodSandbox of a burst;
//! * braid's own share per sandbox ≤ 10 ms: the delegator's wall time per ADD less its
//!   delegates' (the union of their intervals), from the kernel's exec, exit and scheduler
//!   events ([`super::trace`]) — the issue's "its overhead less what its delegates take, from
//!   the delegator's own timing of each delegate" measured per ADD, the median of each burst's
//!   mean over the bursts. Beside it, the same share read from the kubelet,
//!   `(S_braid − S_cluster) − (P_braid − P_cluster)` per pair of bursts (`S` the mean
//!   RunPodSandbox, `P` the plugins' wall time per pod): a difference of two sums of ten
//!   sandboxes that share two cores, whose interval is hundreds of ms wide, too wide to judge a
//!   10 ms budget by (NOTES.md, "Where a sandbox's time goes");
//! * creation → network-status on the pod ≤ creation → Ready + 100 ms, at the median of a burst;
//!
//! and the price of a claim beside the annotation (1 network): pod-ready and API requests per
//! pod, braid's agent's and every client's but the bench's (the scheduler allocates, the
//! resourceclaim controller makes the claim, the agent GETs it and writes its status).
//!
//! A round visits both set-ups once, in a shuffled order (switching is a DaemonSet uninstall and
//! install); a visit runs `repeats` bursts of each of its kinds, shuffled. The j-th burst of a
//! kind in a round is paired with the j-th of the other kind in the same round. Every pod goes
//! through the scheduler (a claim must be allocated; the annotation's pods alike, so that
//! pod-ready compares like with like). braid runs as `deploy/kubernetes-dra` throughout: one
//! agent serves annotation and claim pods, so the claim's price is the claim's alone.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::{burst, median, wait_mirrored, warm_up, Burst, Pods, NODE, NS};
use crate::cases::real_node::repo;
use crate::cases::rounds::Shuffle;
use crate::cases::World;
use crate::report::say;
use crate::stats::{Estimate, Sample, ALPHA};
use crate::verdict::{Limit, Verdict};
use braid_integration::cluster::Cluster;
use braid_integration::metaplugin::{self, Meta};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

/// The ResourceClaimTemplate the claim pods use: braid's device of network `<NS>/net1`.
pub(super) const TEMPLATE: &str = "net1";
const DRIVER: &str = "net.braid-cni.io";

/// The bursts a visit runs, by set-up.
const CLUSTER: [Pods; 1] = [Pods::Annotated { k: 0, scheduled: true }];
const BRAID: [Pods; 4] = [
    Pods::Annotated { k: 0, scheduled: true },
    Pods::Annotated { k: 1, scheduled: true },
    Pods::Annotated { k: 4, scheduled: true },
    Pods::Claimed,
];

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// braid as `deploy/kubernetes-dra`, its conf first on the node, the NADs mirrored and `net1`
/// on the node's slice.
fn install_dra(c: &Cluster) -> Result<(), String> {
    let layout = repo().join("deploy/kubernetes-dra").display().to_string();
    let out = c.kubectl(&["apply", "-k", &layout]);
    if !out.status.success() {
        return Err(format!("kubectl apply -k {layout}: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let _ = c.kubectl(&["-n", "kube-system", "rollout", "status", "daemonset/braid-install", "--timeout=300s"]);
    c.wait(
        "braid as the first conf of node1",
        || c.files_on(NODE, "/etc/cni/net.d").first().is_some_and(|f| f.starts_with("00-braid")),
        || format!("{:?}", c.files_on(NODE, "/etc/cni/net.d")),
    );
    wait_mirrored(c);
    let network = format!("{NS}/net1");
    c.wait(
        "node1's slice offering the bench's net1",
        || {
            let s =
                c.get(&["resourceslices", "--field-selector", &format!("spec.nodeName={NODE},spec.driver={DRIVER}")]);
            s["items"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|s| s["spec"]["devices"].as_array().cloned().unwrap_or_default())
                .any(|d| d["attributes"]["network"]["string"] == network.as_str())
        },
        || c.agent_log(NODE),
    );
    Ok(())
}

fn template() -> String {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": TEMPLATE, "namespace": NS},
        "spec": {"spec": {"devices": {
            "requests": [{"name": "net", "exactly": {
                "deviceClassName": DRIVER,
                "selectors": [{"cel": {"expression": format!("device.attributes[\"{DRIVER}\"].network == \"{NS}/net1\"")}}]
            }}]
        }}}
    })
    .to_string()
}

fn name(p: Pods) -> String {
    match p {
        Pods::Annotated { k: 0, .. } => "0 networks".into(),
        Pods::Annotated { k: 1, .. } => "1 network (annotation)".into(),
        Pods::Annotated { k, .. } => format!("{k} networks"),
        Pods::Claimed => "1 network (ResourceClaim)".into(),
    }
}

/// The quick node case.
pub fn quick(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let c = Cluster::lock("braid-bench node-quick")
        .ok_or("no cluster: BRAID_NODE_DIR must name one of scripts/node.sh up")?;
    let multus_bin = PathBuf::new();
    let n = env("BRAID_BENCH_NODE_QUICK_PODS", 10);
    let rounds = env("BRAID_BENCH_NODE_QUICK_ROUNDS", if w.scale < 1.0 { 1 } else { 2 });
    let repeats = env("BRAID_BENCH_NODE_QUICK_REPEATS", if w.scale < 1.0 { 1 } else { 3 });
    let ns = super::set_up(&c, None)?;
    install_dra(&c)?;
    c.apply(&template());
    let mut current = Meta::Braid;
    // (braid?, pods) → the bursts, in the order they ran; each a round's `repeats`.
    let mut results: BTreeMap<(bool, Pods), Vec<Burst>> = BTreeMap::new();
    let mut rng = Shuffle::new(0x7175_6963);
    let mut order = [Meta::Cluster, Meta::Braid];
    let mut seq = 0;
    for round in 1..=rounds {
        let began = Instant::now();
        let mut idx = [0usize, 1];
        rng.shuffle(&mut idx);
        order = [order[idx[0]], order[idx[1]]];
        for &meta in &order {
            if meta != current {
                let t = Instant::now();
                metaplugin::uninstall(&c, current)?;
                if meta == Meta::Braid {
                    install_dra(&c)?;
                } else {
                    metaplugin::install(&c, meta, &multus_bin)?;
                }
                say(&format!("round {round}: {} → {} in {:.0?}", current.name(), meta.name(), t.elapsed()));
                current = meta;
            }
            seq += 1;
            warm_up(&c, seq);
            let kinds: &[Pods] = if meta == Meta::Cluster { &CLUSTER } else { &BRAID };
            let mut bursts: Vec<usize> = (0..kinds.len() * repeats).collect();
            rng.shuffle(&mut bursts);
            for b in bursts {
                let pods = kinds[b % kinds.len()];
                seq += 1;
                let t = Instant::now();
                let r = burst(&c, meta, n, pods, seq, true)?;
                let p = r.plugins.clone().unwrap_or_default();
                say(&format!(
                    "round {round} {} {n} pods, {} ({:.0?} with the deletion): ready median {:.0} ms; sandbox {:.0} ms; \
                     status median {:.0} ms ({} missing); requests {} braid, {} all; plugin runs {} ({:.0} ms), delegators {} \
                     ({:.0} ms, own {:.0} ms, on CPU {:.0} ms; {} more that attached nothing: STATUS, GC, a DEL after the pod's namespace was gone); agent CPU {:.0} ms; \
                     background requests {:?}; not Ready {}; left {}",
                    meta.name(),
                    name(pods),
                    t.elapsed(),
                    median(&r.ready_ms),
                    r.sandbox_mean_ms,
                    median(&r.status_ms),
                    r.status_missing,
                    r.requests,
                    r.namespace_requests,
                    p.runs,
                    p.runs_ms,
                    p.delegators,
                    p.delegator_ms,
                    p.delegator_own_ms,
                    p.delegator_cpu_ms,
                    p.other_delegators,
                    p.daemon_cpu_ms.unwrap_or(0.0),
                    r.background_requests,
                    r.not_ready,
                    r.left.len()
                ));
                results.entry((meta == Meta::Braid, pods)).or_default().push(r);
            }
        }
        say(&format!("round {round} of {rounds} took {:.0?}", began.elapsed()));
    }
    if current != Meta::Braid {
        metaplugin::uninstall(&c, current)?;
        install_dra(&c)?;
    }
    let _ = c.kubectl(&["delete", "resourceclaimtemplate", TEMPLATE, "-n", NS, "--ignore-not-found"]);
    drop(ns);
    Ok(summarise(&results, n))
}

/// A burst's figures a summary reads.
fn per_pod(r: &Burst, x: usize) -> f64 {
    x as f64 / r.ready_ms.len().max(1) as f64
}

fn summarise(results: &BTreeMap<(bool, Pods), Vec<Burst>>, n: usize) -> (Vec<Sample>, Vec<Verdict>) {
    let get = |m: Meta, p: Pods| results.get(&(m == Meta::Braid, p)).map_or(&[][..], Vec::as_slice);
    let mut samples = Vec::new();
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let ready_group = leak(format!("quick node case: pod creation → Ready, {n} pods"));
    let figures = leak(format!("quick node case: figures per burst, {n} pods"));
    let kinds: Vec<(Meta, Pods)> =
        CLUSTER.iter().map(|p| (Meta::Cluster, *p)).chain(BRAID.iter().map(|p| (Meta::Braid, *p))).collect();
    for &(m, p) in &kinds {
        let rs = get(m, p);
        let who = if m == Meta::Cluster { m.name().to_string() } else { format!("braid, {}", name(p)) };
        let mut ready = Sample::new(ready_group, who.clone(), "ms");
        ready.values = rs.iter().flat_map(|r| r.ready_ms.iter().copied()).collect();
        samples.push(ready);
        let mut add = |what: &str, unit: &'static str, f: &dyn Fn(&Burst) -> Option<f64>| {
            let mut s = Sample::new(figures, format!("{who}: {what}"), unit);
            s.values = rs.iter().filter_map(f).collect();
            if !s.values.is_empty() {
                samples.push(s);
            }
        };
        add("kubelet RunPodSandbox, mean of the burst", "ms", &|r| Some(r.sandbox_mean_ms));
        add("CNI plugins' wall time per pod (kernel exec → exit)", "ms", &|r| {
            r.plugins.as_ref().map(|t| t.runs_ms / r.ready_ms.len().max(1) as f64)
        });
        add("API requests per pod, every client but the bench", "req", &|r| Some(per_pod(r, r.namespace_requests)));
        add("CNI plugins' CPU time per pod (on-CPU, IPAM included)", "ms", &|r| {
            r.plugins.as_ref().map(|t| t.runs_cpu_ms / r.ready_ms.len().max(1) as f64)
        });
        if m == Meta::Braid {
            add("delegator's own wall time per ADD (its wall less its delegates')", "ms", &|r| {
                r.plugins.as_ref().filter(|t| t.delegators > 0).map(|t| t.delegator_own_ms / t.delegators as f64)
            });
            add("delegator's wall time per ADD", "ms", &|r| {
                r.plugins.as_ref().filter(|t| t.delegators > 0).map(|t| t.delegator_ms / t.delegators as f64)
            });
            add("delegator's own CPU time per ADD (on-CPU, its spawning of delegates included)", "ms", &|r| {
                r.plugins.as_ref().filter(|t| t.delegators > 0).map(|t| t.delegator_cpu_ms / t.delegators as f64)
            });
            for (what, f) in [
                (
                    "delegator's time in fsync per ADD",
                    (|t: &super::trace::Plugins| t.delegator_fsync_ms) as fn(&_) -> f64,
                ),
                ("delegator's time in flock per ADD (lock waits)", |t| t.delegator_flock_ms),
                ("delegator's fork → exec of its delegates per ADD (summed)", |t| t.delegator_spawn_ms),
            ] {
                add(what, "ms", &|r| {
                    r.plugins.as_ref().filter(|t| t.delegators > 0).map(|t| f(t) / t.delegators as f64)
                });
            }
            add("braid's agent's CPU time per pod during the burst (user + system)", "ms", &|r| {
                r.plugins.as_ref().and_then(|t| t.daemon_cpu_ms).map(|ms| ms / r.ready_ms.len().max(1) as f64)
            });
            add("creation → network-status on the pod, median of the burst", "ms", &|r| Some(median(&r.status_ms)));
            add("API requests per pod, braid's ServiceAccount", "req", &|r| Some(per_pod(r, r.requests)));
        }
    }
    let mut verdicts = Vec::new();
    let cluster = get(Meta::Cluster, CLUSTER[0]);
    let plugins_per_pod = |r: &Burst| r.plugins.as_ref().map(|t| t.runs_ms / r.ready_ms.len().max(1) as f64);
    let pairs = |p: Pods| get(Meta::Braid, p).iter().zip(cluster.iter());
    // braid at 0 networks: its added mean RunPodSandbox.
    let zero = Pods::Annotated { k: 0, scheduled: true };
    let v: Vec<f64> = pairs(zero).map(|(b, c)| b.sandbox_mean_ms - c.sandbox_mean_ms).collect();
    let e = Estimate::median(&v, ALPHA);
    verdicts.push(
        Verdict::at_most(
            format!(
                "quick, {n} pods × 0 networks: braid's added mean RunPodSandbox (braid − the cluster network alone)"
            ),
            e,
            Limit::Ms(10.0),
        )
        .measured(format!(
            "{} ({:.0} ms braid, {:.0} ms the cluster network alone: medians over bursts)",
            crate::verdict::signed_ms(e.value),
            median(&get(Meta::Braid, zero).iter().map(|r| r.sandbox_mean_ms).collect::<Vec<_>>()),
            median(&cluster.iter().map(|r| r.sandbox_mean_ms).collect::<Vec<_>>())
        )),
    );
    // braid's own share per sandbox.
    for p in BRAID {
        let v: Vec<f64> = pairs(p)
            .filter_map(|(b, c)| {
                Some((b.sandbox_mean_ms - c.sandbox_mean_ms) - (plugins_per_pod(b)? - plugins_per_pod(c)?))
            })
            .collect();
        let by_kubelet = Estimate::median(&v, ALPHA);
        let own: Vec<f64> = get(Meta::Braid, p)
            .iter()
            .filter_map(|r| {
                r.plugins.as_ref().filter(|t| t.delegators > 0).map(|t| t.delegator_own_ms / t.delegators as f64)
            })
            .collect();
        let added: Vec<f64> = pairs(p).map(|(b, c)| b.sandbox_mean_ms - c.sandbox_mean_ms).collect();
        let plug: Vec<f64> = pairs(p).filter_map(|(b, c)| Some(plugins_per_pod(b)? - plugins_per_pod(c)?)).collect();
        let e = Estimate::median(&own, ALPHA);
        let per_add = |f: fn(&super::trace::Plugins) -> f64| {
            median(
                &get(Meta::Braid, p)
                    .iter()
                    .filter_map(|r| r.plugins.as_ref().filter(|t| t.delegators > 0).map(|t| f(t) / t.delegators as f64))
                    .collect::<Vec<_>>(),
            )
        };
        verdicts.push(
            Verdict::at_most(
                format!(
                    "quick, {n} pods, braid {}: braid's own share per sandbox (the delegator's wall time per ADD less its \
                     delegates', by the kernel's trace)",
                    name(p)
                ),
                e,
                Limit::Ms(10.0),
            )
            .measured(format!(
                "{} (of which on a CPU {:.1} ms, in fsync {:.1} ms; read from the kubelet instead — added RunPodSandbox \
                 {:.0} ms less the plugins' added runs {:.0} ms — {} with interval {} – {}, medians over pairs)",
                crate::verdict::signed_ms(e.value),
                per_add(|t| t.delegator_cpu_ms),
                per_add(|t| t.delegator_fsync_ms),
                median(&added),
                median(&plug),
                crate::verdict::signed_ms(by_kubelet.value),
                crate::verdict::signed_ms(by_kubelet.low),
                crate::verdict::signed_ms(by_kubelet.high),
            )),
        );
    }
    // network-status ≤ Ready + 100 ms at the median.
    for p in BRAID {
        let rs = get(Meta::Braid, p);
        let v: Vec<f64> = rs.iter().map(|r| median(&r.status_ms) - median(&r.ready_ms)).collect();
        let e = Estimate::median(&v, ALPHA);
        verdicts.push(
            Verdict::at_most(
                format!(
                    "quick, {n} pods, braid {}: creation → network-status − creation → Ready, burst medians",
                    name(p)
                ),
                e,
                Limit::Ms(100.0),
            )
            .measured(format!(
                "{} (network-status {:.0} ms, Ready {:.0} ms: medians over bursts)",
                crate::verdict::signed_ms(e.value),
                median(&rs.iter().map(|r| median(&r.status_ms)).collect::<Vec<_>>()),
                median(&rs.iter().map(|r| median(&r.ready_ms)).collect::<Vec<_>>())
            )),
        );
    }
    // The price of a claim: no budget, its figures with their intervals said.
    let ann = get(Meta::Braid, BRAID[1]);
    let claim = get(Meta::Braid, Pods::Claimed);
    let d: Vec<f64> = claim.iter().zip(ann).map(|(c, a)| median(&c.ready_ms) - median(&a.ready_ms)).collect();
    let e = Estimate::median(&d, ALPHA);
    let req =
        |rs: &[Burst], f: &dyn Fn(&Burst) -> usize| median(&rs.iter().map(|r| per_pod(r, f(r))).collect::<Vec<_>>());
    say(&format!(
        "the price of a ResourceClaim (1 network, {n}-pod bursts): pod-ready median {} (interval {} – {}, {} pairs) over the \
         annotation's; API requests per pod: braid's agent {:.1} (claim) vs {:.1} (annotation), every client but the bench \
         {:.1} vs {:.1}",
        crate::verdict::signed_ms(e.value),
        crate::verdict::signed_ms(e.low),
        crate::verdict::signed_ms(e.high),
        e.rounds,
        req(claim, &|r| r.requests),
        req(ann, &|r| r.requests),
        req(claim, &|r| r.namespace_requests),
        req(ann, &|r| r.namespace_requests)
    ));
    let mut s =
        Sample::new(figures, "the price of a claim: pod-ready median, claim − annotation (1 network), per pair", "ms");
    s.values = d;
    samples.push(s);
    let braid: Vec<&Burst> = BRAID.iter().flat_map(|p| get(Meta::Braid, *p)).collect();
    let pods: usize = braid.iter().map(|r| r.ready_ms.len()).sum();
    let stuck: usize = braid.iter().map(|r| r.not_ready).sum();
    verdicts.push(Verdict::plain(
        "quick: braid, every pod of every burst Ready within the burst guard (90 s)",
        format!("{stuck} not Ready of {pods}"),
        "none",
        stuck == 0 && pods > 0,
    ));
    let start_path: usize = BRAID[..3].iter().flat_map(|p| get(Meta::Braid, *p)).map(|r| r.start_path_requests).sum();
    let mut background: BTreeMap<&str, usize> = BTreeMap::new();
    for r in BRAID[..3].iter().flat_map(|p| get(Meta::Braid, *p)) {
        for b in &r.background_requests {
            *background.entry(b.as_str()).or_default() += 1;
        }
    }
    let background = background.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ");
    verdicts.push(Verdict::plain(
        "quick: braid (annotation), API requests on the pod-start path (any but the agent's network-status patch and Events, \
         and its watches' and slices' own)",
        format!("{start_path} (beside: {})", if background.is_empty() { "none" } else { &background }),
        "none",
        start_path == 0 && pods > 0,
    ));
    let left: Vec<String> = braid.iter().flat_map(|r| r.left.iter().cloned()).collect();
    verdicts.push(Verdict::plain(
        "quick: braid, interfaces, reservations, state and status files left after deleting every pod",
        if left.is_empty() { "none".to_string() } else { format!("{}: {}", left.len(), super::first_few(&left)) },
        "none",
        left.is_empty() && pods > 0,
    ));
    (samples, verdicts)
}
