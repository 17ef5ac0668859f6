//! braid beside Multus v4.3 (thick and thin) and the cluster network alone, on the real node of
//! `scripts/node.sh` (`BRAID_NODE_DIR`; `scripts/bench.sh --node` brings one up): bursts of N
//! pods with 0, 1, 2 and 4 secondary networks each, created at once (one `kubectl apply` of a
//! List), per set-up:
//!
//! * creation → Ready per pod: from the `apply` to the pod's Ready condition as a watch of the
//!   namespace sees it (one `kubectl get -w` started before the burst);
//! * the kubelet's own sandbox figure: `kubelet_run_podsandbox_duration_seconds` (its `/metrics`
//!   through the API server's node proxy), Δsum ÷ Δcount over the burst — the runtime's
//!   RunPodSandbox, CNI ADD included, apart from the rest of a pod's start;
//! * creation → network-status on the pod object (where the meta-plugin publishes it);
//! * memory, as the peak over the burst of the summed proportional set size (PSS) of the
//!   meta-plugin's processes in the node's network namespace, sampled from /proc every 20 ms:
//!   its DaemonSet's long-lived process (Multus's daemon, braid's agent, the thin plugin's
//!   conf writer) and, apart, its per-pod plugin processes (`multus-shim`, `multus`,
//!   `delegator`, `merger`). PSS, not RSS: N copies of one binary share its text pages, and
//!   summed RSS would count them N times (proc(5), `smaps_rollup`). Sampled by name, a daemon
//!   OOM-killed and restarted mid-burst is seen before and after; its peak is then the last
//!   sample before the kill, a lower bound of what it needed. Reported beside: the daemon
//!   processes' VmHWM, the DaemonSet pod's memory cgroup peak (page cache, pause container and
//!   the delegates Multus's daemon runs included) and its container's OOM kills;
//! * API requests per pod by the meta-plugin's ServiceAccount (the audit log's completed
//!   requests over the burst, braid's AddedInterface Events among them); for braid, those other
//!   than the agent's network-status patch and its AddedInterface Events (both sent after the
//!   pod's ADD, from its status file) — the requests on the pod-start path — must be none;
//! * after deleting every pod: interfaces, host-local reservations, Multus's cache, braid's
//!   status files left on the node.
//!
//! Set-ups are interleaved in rounds (a fresh shuffled order each round, the bursts in a
//! shuffled order within a set-up's turn): switching a node's meta-plugin costs a DaemonSet
//! rollout, so a round visits each set-up once. A budget's figure is the median over rounds of
//! a per-round value with its sign-test interval (docs/bench/NOTES.md), so its verdict is
//! unclear with fewer than six rounds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod leftovers;
mod memory;
pub mod quick;
pub mod surviving;
mod trace;

use super::rounds::Shuffle;
use super::World;
use crate::report::say;
use crate::stats::{Estimate, Sample, ALPHA};
use crate::verdict::{Limit, Outcome, Verdict};
use braid_integration::cluster::{pod, Cluster, NETWORKS, NETWORK_STATUS};
use braid_integration::metaplugin::{self, Meta};
use leftovers::{left_kind, leftovers, settle_and_clear, LEFT_KINDS};
use memory::{cgroup_pids, daemon_cgroup, sample_pss, status_kb};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The bench's namespace on the cluster.
const NS: &str = "braid-bench-node";
/// Secondary networks a pod selects.
const NETS: [usize; 4] = [0, 1, 2, 4];
const NODE: &str = "node1";
/// The user the bench's own `kubectl` is (scripts/node.sh's admin token).
const ADMIN: &str = "admin";
/// How long a burst waits for its pods to be Ready. A pod not Ready by then counts as this long
/// (a lower bound, so it never flatters the set-up that could not start it) and is deleted with
/// the rest. Every set-up starts a 40-pod burst in well under 30 s here when it starts it at
/// all; what does not within 90 s (Multus thick's OOM-killed daemon) was seen to take minutes,
/// and waiting those out each round would double the run.
const BURST_GUARD: Duration = Duration::from_secs(90);

/// What one burst measured.
#[derive(Debug, Default)]
struct Burst {
    ready_ms: Vec<f64>,
    status_ms: Vec<f64>,
    status_missing: usize,
    not_ready: usize,
    sandbox_mean_ms: f64,
    requests: usize,
    start_path_requests: usize,
    /// The meta-plugin's requests neither on the pod-start path nor a status patch or Event:
    /// its watches' re-lists and re-watches, braid's slice publication (`verb resource`).
    background_requests: Vec<String>,
    daemon_peak_mb: f64,
    daemon_cgroup_peak_mb: f64,
    daemon_pss_mb: f64,
    plugins_peak_mb: f64,
    daemon_restarts: i64,
    daemon_oom_kills: i64,
    left: Vec<String>,
    /// Requests of every client but the bench itself about the bench namespace's objects
    /// (the scheduler's, the controllers', the kubelet's, the meta-plugin's).
    namespace_requests: usize,
    /// The plugins' time in the burst, when it was traced ([`trace`]).
    plugins: Option<trace::Plugins>,
}

/// The pods of a burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Pods {
    /// `k` networks by the annotation, on the node by name (`spec.nodeName`: the scheduler not
    /// involved) or placed by the scheduler.
    Annotated { k: usize, scheduled: bool },
    /// One network by a ResourceClaim from template `net1` (the scheduler places them).
    Claimed,
}

impl Pods {
    fn pod(self, name: &str) -> Value {
        match self {
            Pods::Annotated { k, scheduled } => {
                let networks = (k > 0).then(|| (1..=k).map(|i| format!("net{i}")).collect::<Vec<_>>().join(","));
                let mut p: Value = serde_json::from_str(&pod(NS, name, NODE, networks.as_deref())).unwrap();
                debug_assert!(p.to_string().contains(NETWORKS) || k == 0);
                if scheduled {
                    p["spec"].as_object_mut().unwrap().remove("nodeName");
                }
                p
            }
            Pods::Claimed => {
                let mut p: Value = serde_json::from_str(&pod(NS, name, NODE, None)).unwrap();
                p["spec"].as_object_mut().unwrap().remove("nodeName");
                p["spec"]["resourceClaims"] = json!([{"name": "net", "resourceClaimTemplateName": quick::TEMPLATE}]);
                p
            }
        }
    }
}

/// The node case. `multus_bin`: `BRAID_MULTUS_BIN`, what `scripts/build-multus.sh` printed.
pub fn node(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let c =
        Cluster::lock("braid-bench node").ok_or("no cluster: BRAID_NODE_DIR must name one of scripts/node.sh up")?;
    let multus_bin = PathBuf::from(std::env::var_os("BRAID_MULTUS_BIN").ok_or(
        "BRAID_MULTUS_BIN must name the directory scripts/build-multus.sh prints (scripts/bench.sh --node sets it)",
    )?);
    let sizes: Vec<usize> = std::env::var("BRAID_BENCH_NODE_PODS")
        .unwrap_or_else(|_| "10,40".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let rounds: usize = std::env::var("BRAID_BENCH_NODE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if w.scale < 1.0 { 1 } else { 6 });
    // With six rounds a median's interval is the least and the greatest of six values, so one
    // stray round makes a budget unclear (the second full run of issue 38 did so at 40 × 0): a
    // run goes on, a round at a time, while a budget is unclear, up to this many.
    let max_rounds: usize = std::env::var("BRAID_BENCH_NODE_MAX_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if w.scale < 1.0 { 1 } else { 10 })
        .max(rounds);
    let biggest = sizes.iter().copied().max().unwrap_or(0);
    let ns = set_up(&c, Some(&multus_bin))?;
    let mut current = Meta::Braid;
    // (set-up, N, k) → the bursts' results, one a round.
    let mut results: BTreeMap<(usize, usize, usize), Vec<Burst>> = BTreeMap::new();
    let mut uninstall_left: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut rng = Shuffle::new(0x6e6f6465);
    let mut order: Vec<usize> = (0..Meta::ALL.len()).collect();
    let mut bursts: Vec<usize> = (0..sizes.len() * NETS.len()).collect();
    let mut seq = 0;
    let mut round = 0;
    while round < rounds || (round < max_rounds && any_unclear(&summarise(&results, &sizes, biggest).1)) {
        let began = Instant::now();
        rng.shuffle(&mut order);
        for &m in &order {
            let meta = Meta::ALL[m];
            if meta != current {
                say(&format!("round {}: {} → {}", round + 1, current.name(), meta.name()));
                let left = metaplugin::uninstall(&c, current)?;
                uninstall_left.entry(Meta::ALL.iter().position(|x| *x == current).unwrap()).or_default().extend(left);
                metaplugin::install(&c, meta, &multus_bin)?;
                current = meta;
                if meta == Meta::Braid {
                    wait_mirrored(&c);
                }
            }
            seq += 1;
            warm_up(&c, seq);
            rng.shuffle(&mut bursts);
            for &b in &bursts {
                let (n, k) = (sizes[b / NETS.len()], NETS[b % NETS.len()]);
                seq += 1;
                let began = Instant::now();
                let r = burst(&c, meta, n, Pods::Annotated { k, scheduled: false }, seq, false)?;
                say(&format!(
                    "round {} {} {n} pods × {k} networks ({:.0?} with the deletion): ready median {:.0} ms max {:.0} ms; sandbox {:.0} ms; \
                     status {} ({} missing); {} requests; memory {:.1} (VmHWM {:.1}, cgroup {:.1}) + {:.1} MB; restarts {} (OOM {}); \
                     not Ready within the burst guard {}; left {}",
                    round + 1,
                    meta.name(),
                    began.elapsed(),
                    median(&r.ready_ms),
                    r.ready_ms.iter().copied().fold(0.0, f64::max),
                    r.sandbox_mean_ms,
                    r.status_ms.len(),
                    r.status_missing,
                    r.requests,
                    r.daemon_pss_mb,
                    r.daemon_peak_mb,
                    r.daemon_cgroup_peak_mb,
                    r.plugins_peak_mb,
                    r.daemon_restarts,
                    r.daemon_oom_kills,
                    r.not_ready,
                    r.left.len()
                ));
                results.entry((m, n, k)).or_default().push(r);
            }
        }
        let of =
            if round < rounds { format!("of {rounds}") } else { format!("(a budget unclear; at most {max_rounds})") };
        say(&format!("round {} {of} took {:.0?}", round + 1, began.elapsed()));
        round += 1;
    }
    // Leave the node as scripts/node.sh made it: braid installed.
    if current != Meta::Braid {
        let left = metaplugin::uninstall(&c, current)?;
        uninstall_left.entry(Meta::ALL.iter().position(|x| *x == current).unwrap()).or_default().extend(left);
        metaplugin::install(&c, Meta::Braid, &multus_bin)?;
    }
    drop(ns);
    say_multus_totals(&results, &uninstall_left);
    Ok(summarise(&results, &sizes, biggest))
}

/// Whether a budget is unclear, so that another round could decide it.
fn any_unclear(verdicts: &[Verdict]) -> bool {
    verdicts.iter().any(|v| v.outcome == Outcome::Unclear)
}

fn median(v: &[f64]) -> f64 {
    quantile(v, 0.5)
}

fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = Sample::new("", "", "ms");
    s.values = v.to_vec();
    s.quantile(q)
}

/// The samples (pooled over rounds) and the budgets' verdicts.
fn summarise(
    results: &BTreeMap<(usize, usize, usize), Vec<Burst>>,
    sizes: &[usize],
    biggest: usize,
) -> (Vec<Sample>, Vec<Verdict>) {
    let mut samples = Vec::new();
    let mut verdicts = Vec::new();
    let groups = group_names(sizes);
    let get = |m: Meta, n: usize, k: usize| {
        results.get(&(Meta::ALL.iter().position(|x| *x == m).unwrap(), n, k)).map_or(&[][..], Vec::as_slice)
    };
    for &n in sizes {
        for k in NETS {
            let g = groups[&(n, k)];
            for m in Meta::ALL {
                let rs = get(m, n, k);
                let mut ready = Sample::new(g.0, m.name(), "ms");
                ready.values = rs.iter().flat_map(|r| r.ready_ms.iter().copied()).collect();
                samples.push(ready);
            }
        }
    }
    for &n in sizes {
        for k in NETS {
            let g = groups[&(n, k)];
            for m in Meta::ALL {
                let rs = get(m, n, k);
                let mut add = |name: &str, unit: &'static str, f: &dyn Fn(&Burst) -> Vec<f64>| {
                    let mut s = Sample::new(g.1, format!("{}: {name}", m.name()), unit);
                    s.values = rs.iter().flat_map(f).collect();
                    if !s.values.is_empty() {
                        samples.push(s);
                    }
                };
                add("kubelet RunPodSandbox, mean of the burst", "ms", &|r| vec![r.sandbox_mean_ms]);
                add("pods not Ready within the burst guard (90 s)", "pods", &|r| vec![r.not_ready as f64]);
                if m != Meta::Cluster {
                    add("creation → network-status on the pod", "ms", &|r| r.status_ms.clone());
                    add("DaemonSet process's peak PSS (the budget's figure)", "MB", &|r| vec![r.daemon_pss_mb]);
                    add("DaemonSet pod's processes' VmHWM at the end (since the last restart)", "MB", &|r| {
                        vec![r.daemon_peak_mb]
                    });
                    add("DaemonSet pod's peak memory cgroup usage (page cache included)", "MB", &|r| {
                        vec![r.daemon_cgroup_peak_mb]
                    });
                    add("DaemonSet container's OOM kills", "kills", &|r| vec![r.daemon_oom_kills as f64]);
                    add("plugin processes' peak PSS, summed", "MB", &|r| vec![r.plugins_peak_mb]);
                    add("API requests per pod (its ServiceAccount)", "req", &|r| {
                        vec![r.requests as f64 / r.ready_ms.len().max(1) as f64]
                    });
                }
                // What the deleted pods left, by kind, where a burst left any (braid's own
                // budget row below says "none" or lists them).
                for kind in LEFT_KINDS.iter().map(|(_, kind)| *kind).chain(["other"]) {
                    let count = |r: &Burst| r.left.iter().filter(|e| left_kind(e) == kind).count();
                    if rs.iter().any(|r| count(r) > 0) {
                        add(&format!("left after deleting the pods: {kind}"), "entries", &|r| vec![count(r) as f64]);
                    }
                }
            }
        }
    }
    // Budgets: braid's overhead above the cluster network ≤ ½ Multus thick's, median and p90,
    // at every N and network count. Per round: (braid − cluster) − ½ (thick − cluster) ≤ 0.
    for &n in sizes {
        for k in NETS {
            for (q, qname) in [(0.5, "median"), (0.9, "p90")] {
                let per = |m: Meta| get(m, n, k).iter().map(|r| quantile(&r.ready_ms, q)).collect::<Vec<f64>>();
                let (b, cl, th) = (per(Meta::Braid), per(Meta::Cluster), per(Meta::MultusThick));
                let rounds = b.len().min(cl.len()).min(th.len());
                let v: Vec<f64> = (0..rounds).map(|r| (b[r] - cl[r]) - 0.5 * (th[r] - cl[r])).collect();
                let e = Estimate::median(&v, ALPHA);
                let words = format!(
                    "{} ms braid, {} ms Multus thick over {} ms cluster network (medians over rounds)",
                    median(&b).round(),
                    median(&th).round(),
                    median(&cl).round()
                );
                verdicts.push(
                    Verdict::at_most(
                        format!("{n} pods × {k} networks, pod-ready {qname}: braid's overhead − ½ Multus thick's"),
                        e,
                        Limit::Ms(0.0),
                    )
                    .measured(format!("{} ({words})", crate::verdict::signed_ms(e.value)))
                    .because("braid's overhead ≤ half of Multus thick's"),
                );
            }
        }
    }
    // Memory at the biggest burst (4 networks): braid's agent + plugins ÷ Multus's daemon, PSS
    // on both sides. Where the daemon was OOM-killed its figure is a lower bound, so the ratio
    // is an upper bound: it can only flatter Multus.
    let bm = get(Meta::Braid, biggest, 4);
    let tm = get(Meta::MultusThick, biggest, 4);
    let rounds = bm.len().min(tm.len());
    let ratios: Vec<f64> =
        (0..rounds).map(|r| (bm[r].daemon_pss_mb + bm[r].plugins_peak_mb) / tm[r].daemon_pss_mb.max(1e-9)).collect();
    let e = Estimate::median(&ratios, ALPHA);
    let killed = tm[..rounds].iter().filter(|r| r.daemon_oom_kills > 0).count();
    verdicts.push(
        Verdict::at_most(
            format!("{biggest} pods × 4 networks: braid's added memory (agent + plugins) ÷ Multus thick's daemon (PSS)"),
            e,
            Limit::Ratio(0.2),
        )
        .measured(format!(
            "{:.3} ({:.1} + {:.1} MB ÷ {:.1} MB, medians; Multus's daemon OOM-killed in {killed} of {rounds} rounds' bursts, \
             its figure there a lower bound)",
            e.value,
            median(&bm.iter().map(|r| r.daemon_pss_mb).collect::<Vec<_>>()),
            median(&bm.iter().map(|r| r.plugins_peak_mb).collect::<Vec<_>>()),
            median(&tm.iter().map(|r| r.daemon_pss_mb).collect::<Vec<_>>())
        )),
    );
    let all = |m: Meta| results.iter().filter(move |((i, _, _), _)| Meta::ALL[*i] == m).flat_map(|(_, v)| v.iter());
    let start_path: usize = all(Meta::Braid).map(|r| r.start_path_requests).sum();
    let after: usize = all(Meta::Braid).map(|r| r.requests - r.start_path_requests).sum();
    let pods: usize = all(Meta::Braid).map(|r| r.ready_ms.len()).sum();
    verdicts.push(Verdict::plain(
        "braid: API requests on the pod-start path (any but the agent's network-status patch and AddedInterface Events)",
        format!("{start_path} over {pods} pods ({after} status patches and AddedInterface Events beside, after the ADD)"),
        "none",
        start_path == 0 && pods > 0,
    ));
    let stuck: usize = all(Meta::Braid).map(|r| r.not_ready).sum();
    verdicts.push(Verdict::plain(
        "braid: every pod of every burst Ready within the burst guard (90 s)",
        format!("{stuck} not Ready"),
        "none",
        stuck == 0 && pods > 0,
    ));
    let left: Vec<String> = all(Meta::Braid).flat_map(|r| r.left.iter().cloned()).collect();
    verdicts.push(Verdict::plain(
        "braid: interfaces, reservations, state and status files left after deleting every pod",
        if left.is_empty() { "none".to_string() } else { format!("{}: {}", left.len(), first_few(&left)) },
        "none",
        left.is_empty() && pods > 0,
    ));
    (samples, verdicts)
}

/// Multus's totals over the run, as seen (no budget: reported): what its pods left, its
/// daemon's restarts and OOM kills, what its uninstall left, its pods not Ready in time.
fn say_multus_totals(
    results: &BTreeMap<(usize, usize, usize), Vec<Burst>>,
    uninstall_left: &BTreeMap<usize, Vec<String>>,
) {
    let all = |m: Meta| results.iter().filter(move |((i, _, _), _)| Meta::ALL[*i] == m).flat_map(|(_, v)| v.iter());
    for m in [Meta::MultusThick, Meta::MultusThin] {
        let left: BTreeSet<String> = all(m).flat_map(|r| r.left.iter().cloned()).collect();
        let restarts: i64 = all(m).map(|r| r.daemon_restarts).sum();
        let ooms: i64 = all(m).map(|r| r.daemon_oom_kills).sum();
        let stuck: usize = all(m).map(|r| r.not_ready).sum();
        let i = Meta::ALL.iter().position(|x| *x == m).unwrap();
        let un = uninstall_left.get(&i).map_or(0, Vec::len);
        say(&format!(
            "{}: left after the bursts: {} ({:?}); DaemonSet container restarts during bursts: {restarts} ({ooms} OOM kills); \
             files its uninstall left (removed by the harness): {un}; pods not Ready within the burst guard: {stuck}",
            m.name(),
            left.len(),
            left.iter().take(8).collect::<Vec<_>>()
        ));
    }
}

/// A report's list: its first ten and how many more.
fn first_few(items: &[String]) -> String {
    let mut s = items.iter().take(10).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > 10 {
        s += &format!(" and {} more", items.len() - 10);
    }
    s
}

/// The groups' names by (N, k): pod-ready, and the rest.
fn group_names(sizes: &[usize]) -> BTreeMap<(usize, usize), (&'static str, &'static str)> {
    let mut m = BTreeMap::new();
    for &n in sizes {
        for k in NETS {
            let a: &'static str = Box::leak(format!("pod creation → Ready, {n} pods × {k} networks").into_boxed_str());
            let b: &'static str = Box::leak(format!("node figures, {n} pods × {k} networks").into_boxed_str());
            m.insert((n, k), (a, b));
        }
    }
    m
}

/// The node cases' start: the bench namespace made afresh with its NADs `net1`…`net4`, and
/// Multus gone — the cluster comes up with braid installed (scripts/node.sh up), and a run cut
/// short may have left Multus in its place. With `braid`, braid is then installed as
/// `deploy/kubernetes` if it is not (`multus_bin` as `metaplugin::install` reads it); without,
/// the case installs its own layout.
fn set_up<'c>(
    c: &'c Cluster,
    braid: Option<&std::path::Path>,
) -> Result<braid_integration::cluster::Namespace<'c>, String> {
    let ns = c.namespace(NS);
    for k in 1..=4u8 {
        c.apply(&nad(&ns.name, k));
    }
    let exists = |ds: &str| c.kubectl(&["get", "daemonset", ds, "-n", "kube-system"]).status.success();
    if exists("kube-multus-ds") {
        metaplugin::uninstall(c, Meta::MultusThick)?;
    }
    if let Some(multus_bin) = braid.filter(|_| !exists("braid-install")) {
        metaplugin::install(c, Meta::Braid, multus_bin)?;
    }
    Ok(ns)
}

/// NAD `net<k>`: a bridge of its own, no gateway, host-local addresses from 198.18.<40+k>.0/24.
fn nad(ns: &str, k: u8) -> String {
    let config = json!({
        "cniVersion": "1.0.0", "name": format!("net{k}"),
        "plugins": [{"type": "bridge", "bridge": format!("bn{k}"), "isGateway": false, "ipMasq": false,
                     "ipam": {"type": "host-local", "ranges": [[{"subnet": format!("198.18.{}.0/24", 40 + k)}]]}}]
    });
    json!({
        "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": format!("net{k}"), "namespace": ns}, "spec": {"config": config.to_string()}
    })
    .to_string()
}

fn wait_mirrored(c: &Cluster) {
    c.wait(
        "the bench's NADs mirrored by braid's agent",
        || {
            let f = c.files_on(NODE, "/etc/cni/braid.d");
            (1..=4).all(|k| f.iter().any(|x| x.contains(&format!("net{k}"))))
        },
        || c.agent_log(NODE),
    );
}

/// The kubelet's RunPodSandbox histogram: (sum in seconds, count), over its label sets.
fn sandbox_metric(c: &Cluster) -> (f64, f64) {
    let m = kubelet_metrics(c);
    (m("kubelet_run_podsandbox_duration_seconds_sum"), m("kubelet_run_podsandbox_duration_seconds_count"))
}

/// The kubelet's `/metrics` (through the API server's node proxy): a reader of one metric,
/// summed over its label sets.
fn kubelet_metrics(c: &Cluster) -> impl Fn(&str) -> f64 {
    let text =
        String::from_utf8_lossy(&c.kubectl(&["get", "--raw", &format!("/api/v1/nodes/{NODE}/proxy/metrics")]).stdout)
            .into_owned();
    move |name: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(name) && (l[name.len()..].starts_with('{') || l[name.len()..].starts_with(' ')))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

/// Pods with a running sandbox on the node (`kubelet_running_pods`, from the PLEG's view of
/// the runtime). A sandbox stops running when StopPodSandbox — CNI DEL included — is done.
fn running_pods(c: &Cluster) -> f64 {
    kubelet_metrics(c)("kubelet_running_pods")
}

/// Deletes every pod of the bench's namespace and waits (at most 120 s) until the kubelet has
/// stopped their sandboxes — back to `base` running. Pods declare no grace period, so the API
/// server removes them at once and `kubectl delete --wait` returns before the runtime has torn
/// anything down: a look at the node then would see every pod's state and interfaces (the
/// first attempt at a full run did, and removed braid's state files before their DEL).
fn delete_all(c: &Cluster, base: f64) {
    let _ = c.kubectl(&["delete", "pods", "--all", "-n", NS, "--wait=true", "--timeout=300s"]);
    let give_up = Instant::now() + Duration::from_secs(120);
    while running_pods(c) > base && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// When each pod was first seen Ready and with its network-status, by a watch of the namespace.
#[derive(Default)]
struct Seen {
    ready: BTreeMap<String, Instant>,
    status: BTreeMap<String, Instant>,
}

fn watch(c: &Cluster, seen: Arc<Mutex<Seen>>) -> Result<std::process::Child, String> {
    let mut child = std::process::Command::new(c.dir().join("bin/kubectl"))
        .env("KUBECONFIG", c.dir().join("kubeconfig"))
        .args(["get", "pods", "-n", NS, "--watch", "--output-watch-events", "-o", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("kubectl get --watch: {e}"))?;
    let out = child.stdout.take().ok_or("no stdout")?;
    std::thread::spawn(move || {
        // One JSON event after another (kubectl prints each on a line of its own).
        let events = serde_json::Deserializer::from_reader(std::io::BufReader::new(out)).into_iter::<Value>();
        for ev in events {
            let Ok(ev) = ev else { break };
            let now = Instant::now();
            let obj = &ev["object"];
            let Some(name) = obj["metadata"]["name"].as_str() else { continue };
            let ready = is_ready(obj);
            let status = obj["metadata"]["annotations"][NETWORK_STATUS].is_string();
            let mut s = seen.lock().unwrap();
            if ready {
                s.ready.entry(name.to_string()).or_insert(now);
            }
            if status {
                s.status.entry(name.to_string()).or_insert(now);
            }
        }
    });
    Ok(child)
}

/// One burst of `n` pods; with `traced`, the plugins' time in it ([`trace`]) too.
fn burst(c: &Cluster, meta: Meta, n: usize, pods: Pods, seq: usize, traced: bool) -> Result<Burst, String> {
    let before = leftovers(c);
    let base = running_pods(c);
    let audit_mark = c.audit().len();
    let (sum0, count0) = sandbox_metric(c);
    let cg = daemon_cgroup(c, meta);
    if let Some((dir, ..)) = &cg {
        let _ = std::fs::write(dir.join("memory.max_usage_in_bytes"), "0");
        // Each process's peak RSS (VmHWM) starts again from its current RSS (proc(5),
        // clear_refs 5).
        for pid in cgroup_pids(dir) {
            let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let sampler =
        sample_pss(c.dir().join("ns/node1.net"), [meta.daemon_processes(), meta.plugin_processes()], stop.clone());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut watcher = watch(c, seen.clone())?;
    let recording = if traced { trace::start(c.dir(), &seq.to_string(), meta.daemon_processes()) } else { None };
    std::thread::sleep(Duration::from_secs(1));
    let names: Vec<String> = (0..n).map(|i| format!("b{seq}-{i}")).collect();
    let items: Vec<Value> = names.iter().map(|p| pods.pod(p)).collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    let t0 = Instant::now();
    c.apply(&list);
    let want_status = meta != Meta::Cluster;
    // A set-up that cannot start the burst (Multus thick's daemon OOM-killed at its limit) is a
    // result, not the end of the run: the pods not Ready by the burst guard are counted.
    let give_up = Instant::now() + BURST_GUARD;
    while seen.lock().unwrap().ready.len() < n && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(250));
    }
    // network-status: up to 30 s more for every Ready pod's (braid's agent patches after the
    // start; a pod that never started has none to wait for).
    let give_up = Instant::now() + Duration::from_secs(30);
    let unpublished = |s: &Seen| s.ready.keys().any(|p| !s.status.contains_key(p));
    while want_status && unpublished(&seen.lock().unwrap()) && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(100));
    }
    // The memory samplers' last look, after the last plugin process has exited.
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let [daemon_pss_mb, plugins_peak_mb] = sampler.join().unwrap_or([0.0; 2]);
    let _ = watcher.kill();
    let _ = watcher.wait();
    let plugins = recording.and_then(trace::Recording::finish);
    let (sum1, count1) = sandbox_metric(c);
    let daemon_cgroup_peak_mb = cg
        .as_ref()
        .and_then(|(d, ..)| std::fs::read_to_string(d.join("memory.max_usage_in_bytes")).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .map_or(0.0, |b| b / 1024.0 / 1024.0);
    let daemon_peak_mb = cg
        .as_ref()
        .map_or(0.0, |(d, ..)| cgroup_pids(d).iter().map(|pid| status_kb(*pid, "VmHWM:")).sum::<u64>() as f64 / 1024.0);
    let after = daemon_cgroup(c, meta);
    let daemon_restarts = after.as_ref().map_or(0, |x| x.1) - cg.as_ref().map_or(0, |x| x.1);
    // The kubelet keeps only the last termination's reason: a burst whose restarts all ended in
    // OOM kills counts them all; one whose last did not counts none (the log line says which).
    let daemon_oom_kills = if after.as_ref().is_some_and(|x| x.2) { daemon_restarts } else { 0 };
    let (mut requests, mut start_path_requests, mut namespace_requests) = (0, 0, 0);
    let mut background_requests = Vec::new();
    let audit: Vec<Value> = c.audit().into_iter().skip(audit_mark).collect();
    namespace_requests += audit
        .iter()
        .filter(|e| {
            e["stage"] == "ResponseComplete" && e["objectRef"]["namespace"] == NS && e["user"]["username"] != ADMIN
        })
        .count();
    if let Some(user) = meta.user() {
        for e in audit {
            if e["user"]["username"] != user || e["stage"] != "ResponseComplete" {
                continue;
            }
            requests += 1;
            // The agent's, after the ADD: the status patch, then one AddedInterface Event per
            // interface (`braid-install --no-interface-events` turns those off).
            let status_patch = e["verb"] == "patch" && e["objectRef"]["resource"] == "pods";
            let event = e["verb"] == "create" && e["objectRef"]["resource"] == "events";
            // A watch's reconnection (the API server ends every watch within
            // --min-request-timeout's 30–60 min, kube-runtime's watcher re-lists after an
            // error) and the DRA driver's own slice keep no pod waiting.
            let (verb, resource) =
                (e["verb"].as_str().unwrap_or(""), e["objectRef"]["resource"].as_str().unwrap_or(""));
            let background = matches!(verb, "watch" | "list") || resource == "resourceslices";
            if meta == Meta::Braid && background {
                background_requests.push(format!("{verb} {resource}"));
            } else if meta != Meta::Braid || !(status_patch || event) {
                start_path_requests += 1;
            }
        }
    }
    let s = seen.lock().unwrap();
    let at = |m: &BTreeMap<String, Instant>| -> Vec<f64> {
        names.iter().filter_map(|p| m.get(p)).map(|t| t.saturating_duration_since(t0).as_secs_f64() * 1000.0).collect()
    };
    let ready_ms = at(&s.ready);
    let status_ms = if want_status { at(&s.status) } else { Vec::new() };
    let status_missing = if want_status { n - status_ms.len() } else { 0 };
    let not_ready = n - ready_ms.len();
    // A pod not Ready by the burst guard counts as that long (a lower bound): its median and
    // p90 then never flatter a set-up that could not start its burst.
    let mut ready_ms = ready_ms;
    ready_ms.extend(std::iter::repeat_n(BURST_GUARD.as_secs_f64() * 1000.0, not_ready));
    drop(s);
    // Delete every pod; then what is left once the runtime has torn their sandboxes down.
    delete_all(c, base);
    let left = settle_and_clear(c, &before);
    Ok(Burst {
        ready_ms,
        status_ms,
        status_missing,
        not_ready,
        sandbox_mean_ms: if count1 > count0 { (sum1 - sum0) / (count1 - count0) * 1000.0 } else { 0.0 },
        requests,
        start_path_requests,
        background_requests,
        daemon_peak_mb,
        daemon_cgroup_peak_mb,
        daemon_pss_mb,
        plugins_peak_mb,
        daemon_restarts,
        daemon_oom_kills,
        left,
        namespace_requests,
        plugins,
    })
}

/// One pod with all four networks, started and deleted before a set-up's bursts, unmeasured.
/// It absorbs what the first pod after a switch pays and no burst should: containerd reloading
/// its CNI configuration (go-cni takes its write lock, so the reload — and every ADD behind it —
/// waits for an ADD still in flight: after Multus thick's OOM-killed daemon, a shim's ADD of a
/// pod deleted a minute before held the next set-up's first burst for 30 s), braid's first ADD
/// claiming its state directory, the page cache of a freshly copied plugin. What it leaves is
/// removed, as a burst's is.
fn warm_up(c: &Cluster, seq: usize) {
    let before = leftovers(c);
    let base = running_pods(c);
    let name = format!("warm-{seq}");
    c.apply(&pod(NS, &name, NODE, Some("net1,net2,net3,net4")));
    let give_up = Instant::now() + BURST_GUARD;
    while !is_ready(&c.get(&["pod", &name, "-n", NS])) && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(250));
    }
    delete_all(c, base);
    settle_and_clear(c, &before);
}

/// A pod object's Ready condition is True.
fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|x| x["type"] == "Ready" && x["status"] == "True"))
}

/// What the node case's report names besides the machine: the versions the node ran (from the
/// node object: kubelet, containerd; from `scripts/build-multus.sh`'s `versions`: Multus) and
/// the SHA-256 of every meta-plugin binary measured, so two runs can show they measured the
/// same binaries.
pub fn facts(w: &World) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(dir) = std::env::var_os("BRAID_NODE_DIR").map(PathBuf::from) {
        let node = std::process::Command::new(dir.join("bin/kubectl"))
            .env("KUBECONFIG", dir.join("kubeconfig"))
            .args(["get", "node", NODE, "-o", "json"])
            .output()
            .ok()
            .and_then(|o| serde_json::from_slice::<Value>(&o.stdout).ok())
            .unwrap_or_default();
        let info = &node["status"]["nodeInfo"];
        lines.push(format!(
            "node: kubelet {}, {}, cgroup v1, one node (scripts/node.sh)",
            info["kubeletVersion"].as_str().unwrap_or("unknown"),
            info["containerRuntimeVersion"].as_str().unwrap_or("unknown runtime")
        ));
    }
    let multus = std::env::var_os("BRAID_MULTUS_BIN").map(PathBuf::from);
    if let Some(m) = &multus {
        // build-multus.sh writes `versions` beside `bin/`, which is what BRAID_MULTUS_BIN names.
        let v = m.parent().and_then(|d| std::fs::read_to_string(d.join("versions")).ok()).unwrap_or_default();
        let v = v.lines().find_map(|l| l.strip_prefix("multus=")).unwrap_or("unknown").to_string();
        lines.push(format!(
            "Multus: {v}, built from gopkg.in/k8snetworkplumbingwg/multus-cni.v4 (scripts/build-multus.sh)"
        ));
    }
    let mut files: Vec<PathBuf> = ["delegator", "merger", "braid-install"].iter().map(|b| w.bins.join(b)).collect();
    if let Some(m) = &multus {
        files.extend(["multus-daemon", "multus-shim", "multus", "thin_entrypoint"].iter().map(|b| m.join(b)));
    }
    let digests: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let out = std::process::Command::new("sha256sum").arg(f).output().ok()?;
            let hex = String::from_utf8_lossy(&out.stdout).split_whitespace().next()?.get(..16)?.to_string();
            Some(format!("{} {hex}", f.file_name()?.to_string_lossy()))
        })
        .collect();
    lines.push(format!("binaries measured (SHA-256, first 16 hex digits): {}", digests.join(", ")));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_goes_on_while_one_round_of_six_makes_a_budget_unclear() {
        let judged = |rounds: &[f64]| Verdict::at_most("x", Estimate::median(rounds, ALPHA), Limit::Ms(0.0));
        // Five rounds well within the limit and one beyond it: six rounds cannot tell.
        let stray = judged(&[-900.0, -800.0, -700.0, -600.0, -500.0, 486.0]);
        assert!(any_unclear(&[judged(&[-3.0, -2.0, -1.0, -4.0, -5.0, -6.0]), stray]));
        // Ten rounds with the same stray one decide it: the interval is the 2nd to 9th value.
        let ten = judged(&[-900.0, -800.0, -700.0, -600.0, -500.0, 486.0, -400.0, -300.0, -200.0, -100.0]);
        assert!(!any_unclear(&[ten]));
        assert!(!any_unclear(&[]));
    }
}
