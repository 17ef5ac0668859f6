//! Memory against a Multus thick that survives (`--only node-memory`, `scripts/bench.sh
//! --node-memory`): the node case's memory budget divides braid's added memory by Multus thick's
//! daemon at its shipped 50Mi limit, where the kernel OOM-kills it in every 40 × 4 burst — a
//! lower bound of what it needs. Operators who hit that raise the limit (Multus issue #1346);
//! this case does the same: Multus thick with its daemon's memory limit (and request) raised,
//! doubled again after any burst in which the daemon was killed or restarted, until a whole
//! burst runs without, and that burst's peak is the daemon's real need. Beside it, in the same
//! interleaved rounds, braid (`deploy/kubernetes`) and Multus thick as shipped with its OOM
//! count. Budget: braid's added memory — its agent's PSS plus its plugin processes' summed PSS,
//! peaks over the burst — ≤ ⅒ of the surviving daemon's PSS peak, paired by round.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::{burst, median, wait_mirrored, warm_up, Burst, Pods};
use crate::cases::rounds::Shuffle;
use crate::cases::World;
use crate::report::say;
use crate::stats::{Estimate, Sample, ALPHA};
use crate::verdict::{Limit, Verdict};
use braid_integration::cluster::Cluster;
use braid_integration::metaplugin::{self, Meta};
use std::path::PathBuf;
use std::time::Instant;

/// The largest limit tried (MiB): a daemon that needs more is reported as not surviving.
const MAX_LIMIT_MI: usize = 4096;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// The set-ups, in the order the report lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setup {
    Braid,
    /// Multus thick as its manifest ships it (50Mi).
    Shipped,
    /// Multus thick with its daemon's limit raised.
    Raised,
}

impl Setup {
    const ALL: [Setup; 3] = [Setup::Braid, Setup::Shipped, Setup::Raised];

    fn meta(self) -> Meta {
        if self == Setup::Braid {
            Meta::Braid
        } else {
            Meta::MultusThick
        }
    }

    fn name(self, limit_mi: usize) -> String {
        match self {
            Setup::Braid => "braid".into(),
            Setup::Shipped => "Multus thick, its 50Mi limit".into(),
            Setup::Raised => format!("Multus thick, limit raised to {limit_mi}Mi"),
        }
    }
}

/// Sets the Multus daemon's memory request and limit and waits for its pod to run with them.
fn set_limit(c: &Cluster, mi: usize) -> Result<(), String> {
    let m = format!("memory={mi}Mi");
    let out = c.kubectl(&[
        "-n",
        "kube-system",
        "set",
        "resources",
        "daemonset/kube-multus-ds",
        "-c",
        "kube-multus",
        &format!("--limits={m}"),
        &format!("--requests={m}"),
    ]);
    if !out.status.success() {
        return Err(format!("kubectl set resources {m}: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let out = c.kubectl(&["-n", "kube-system", "rollout", "status", "daemonset/kube-multus-ds", "--timeout=300s"]);
    if !out.status.success() {
        return Err(format!("Multus's DaemonSet not rolled out at {m}: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(())
}

/// The memory case.
pub fn memory(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let c = Cluster::lock("braid-bench node-memory")
        .ok_or("no cluster: BRAID_NODE_DIR must name one of scripts/node.sh up")?;
    let multus_bin = PathBuf::from(std::env::var_os("BRAID_MULTUS_BIN").ok_or(
        "BRAID_MULTUS_BIN must name the directory scripts/build-multus.sh prints (scripts/bench.sh --node-memory sets it)",
    )?);
    let n = env("BRAID_BENCH_NODE_MEMORY_PODS", 40);
    // Six: the fewest whose median has a 95 % sign-test interval (three gave "unbounded").
    let rounds = env("BRAID_BENCH_NODE_MEMORY_ROUNDS", if w.scale < 1.0 { 1 } else { 6 });
    let mut limit_mi = env("BRAID_BENCH_MULTUS_LIMIT_MI", 256);
    let ns = super::set_up(&c, Some(&multus_bin))?;
    let mut current = Setup::Braid;
    let mut results: [Vec<Burst>; 3] = Default::default();
    // The raised set-up's bursts in which its daemon was killed or restarted, at their limit.
    let mut outgrown: Vec<(usize, i64, i64)> = Vec::new();
    let mut rng = Shuffle::new(0x6d65_6d6f);
    let mut order = Setup::ALL;
    let mut seq = 0;
    let pods = Pods::Annotated { k: 4, scheduled: false };
    for round in 1..=rounds {
        let began = Instant::now();
        let mut idx = [0usize, 1, 2];
        rng.shuffle(&mut idx);
        order = [order[idx[0]], order[idx[1]], order[idx[2]]];
        for &s in &order {
            if s != current {
                if s.meta() != current.meta() {
                    metaplugin::uninstall(&c, current.meta())?;
                    metaplugin::install(&c, s.meta(), &multus_bin)?;
                    if s == Setup::Braid {
                        wait_mirrored(&c);
                    }
                }
                match s {
                    Setup::Raised => set_limit(&c, limit_mi)?,
                    Setup::Shipped if current == Setup::Raised => set_limit(&c, 50)?,
                    _ => {}
                }
                current = s;
            }
            loop {
                seq += 1;
                warm_up(&c, seq);
                seq += 1;
                let t = Instant::now();
                let r = burst(&c, s.meta(), n, pods, seq, false)?;
                say(&format!(
                    "round {round} {} {n} pods × 4 networks ({:.0?}): ready median {:.0} ms; daemon PSS {:.1} MB (cgroup {:.1} MB), \
                     plugins {:.1} MB; restarts {} (OOM {}); not Ready {}; left {}",
                    s.name(limit_mi),
                    t.elapsed(),
                    median(&r.ready_ms),
                    r.daemon_pss_mb,
                    r.daemon_cgroup_peak_mb,
                    r.plugins_peak_mb,
                    r.daemon_restarts,
                    r.daemon_oom_kills,
                    r.not_ready,
                    r.left.len()
                ));
                if s == Setup::Raised && (r.daemon_restarts > 0 || r.daemon_oom_kills > 0) && limit_mi < MAX_LIMIT_MI {
                    outgrown.push((limit_mi, r.daemon_restarts, r.daemon_oom_kills));
                    limit_mi *= 2;
                    say(&format!(
                        "Multus's daemon restarted within the burst: its limit raised to {limit_mi}Mi, the burst again"
                    ));
                    set_limit(&c, limit_mi)?;
                    // Every surviving burst so far ran under a lower limit: still the daemon's
                    // peak without a kill, so kept.
                    continue;
                }
                results[Setup::ALL.iter().position(|x| *x == s).unwrap()].push(r);
                break;
            }
        }
        say(&format!("round {round} of {rounds} took {:.0?}", began.elapsed()));
    }
    if current != Setup::Braid {
        metaplugin::uninstall(&c, current.meta())?;
        metaplugin::install(&c, Meta::Braid, &multus_bin)?;
    }
    drop(ns);
    Ok(summarise(&results, &outgrown, n, limit_mi))
}

fn summarise(
    results: &[Vec<Burst>; 3],
    outgrown: &[(usize, i64, i64)],
    n: usize,
    limit_mi: usize,
) -> (Vec<Sample>, Vec<Verdict>) {
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let group = leak(format!("memory at {n} pods × 4 networks, peaks over the burst"));
    let mut samples = Vec::new();
    for (i, s) in Setup::ALL.iter().enumerate() {
        let rs = &results[i];
        let who = s.name(limit_mi);
        let mut add = |what: &str, unit: &'static str, f: &dyn Fn(&Burst) -> f64| {
            let mut x = Sample::new(group, format!("{who}: {what}"), unit);
            x.values = rs.iter().map(f).collect();
            samples.push(x);
        };
        add("DaemonSet process PSS", "MB", &|r| r.daemon_pss_mb);
        add("DaemonSet pod's memory cgroup peak (page cache included)", "MB", &|r| r.daemon_cgroup_peak_mb);
        add("plugin processes' summed PSS", "MB", &|r| r.plugins_peak_mb);
        add("pod creation → Ready, median of the burst", "ms", &|r| median(&r.ready_ms));
        add("daemon restarts in the burst (OOM kills)", "", &|r| r.daemon_restarts as f64);
    }
    let (braid, shipped, raised) = (&results[0], &results[1], &results[2]);
    let pairs = braid.len().min(raised.len());
    let ratios: Vec<f64> = (0..pairs)
        .map(|k| (braid[k].daemon_pss_mb + braid[k].plugins_peak_mb) / raised[k].daemon_pss_mb.max(1e-9))
        .collect();
    let e = Estimate::median(&ratios, ALPHA);
    let survived = raised.iter().all(|r| r.daemon_restarts == 0 && r.daemon_oom_kills == 0);
    let col = |rs: &[Burst], f: &dyn Fn(&Burst) -> f64| median(&rs.iter().map(f).collect::<Vec<_>>());
    let mut verdicts = vec![Verdict::at_most(
        format!("{n} pods × 4 networks: braid's added memory (agent + plugins, PSS) ÷ the PSS of a Multus thick daemon that survives"),
        e,
        Limit::Ratio(0.1),
    )
    .measured(format!(
        "{:.3} ({:.1} + {:.1} MB ÷ {:.1} MB at {limit_mi}Mi, medians; {}its daemon killed in none of those bursts{})",
        e.value,
        col(braid, &|r| r.daemon_pss_mb),
        col(braid, &|r| r.plugins_peak_mb),
        col(raised, &|r| r.daemon_pss_mb),
        if survived { "" } else { "NOT: " },
        if outgrown.is_empty() {
            String::new()
        } else {
            format!(
                "; outgrown: {}",
                outgrown.iter().map(|(l, r, o)| format!("{l}Mi ({r} restarts, {o} OOM)")).collect::<Vec<_>>().join(", ")
            )
        }
    ))];
    // The shipped limit's kills are figures (its samples), not a budget of braid's: said.
    let kills: i64 = shipped.iter().map(|r| r.daemon_oom_kills).sum();
    let not_ready: usize = shipped.iter().map(|r| r.not_ready).sum();
    say(&format!(
        "Multus thick at its shipped 50Mi: {kills} OOM kills in {} bursts, {not_ready} pods not Ready within the 90 s guard, \
         daemon PSS {:.1} MB (a lower bound)",
        shipped.len(),
        col(shipped, &|r| r.daemon_pss_mb)
    ));
    let raised_not_ready: usize = raised.iter().map(|r| r.not_ready).sum();
    verdicts.push(Verdict::plain(
        format!("{n} pods × 4 networks: Multus thick with its limit raised, every pod Ready within the 90 s guard"),
        format!("{raised_not_ready} not Ready; pod-ready median {:.0} ms", col(raised, &|r| median(&r.ready_ms))),
        "none",
        raised_not_ready == 0 && !raised.is_empty(),
    ));
    (samples, verdicts)
}
