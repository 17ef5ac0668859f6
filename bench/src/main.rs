//! `braid-bench`: braid's benchmark suite, run by `scripts/bench.sh` as root. Every comparison
//! is measured side by side and interleaved in one run; results go to a directory as Markdown,
//! CSV and SVG, with a verdict for each budget — holds, does not, or unclear, read off the
//! interval of its figure ([`verdict`], [`stats`]) after as many rounds as its case needs to
//! decide, up to a cap ([`cases::rounds`]).
//!
//! Usage: `braid-bench [--out DIR] [--quick] [--readme README.md] [--only CASE,…]` (quick: a
//! tenth of the repetitions, for a smoke run; readme: refresh the README's results section;
//! only: run just these cases, by the names in [`CASES`], for a look at one figure without the
//! whole run — the written results then hold only those, so it refuses `--readme`), or
//! `braid-bench --crash [N]`: only the crash run, N SIGKILLs per plugin and mode (default 200).
//! Started with `BRAID_BENCH_RSS_CHILD` set, it is the helper child that measures peak RSS.
//! With `BRAID_BENCH_RAW=FILE`, every sample's values, round by round, are also written to FILE
//! as JSON (`[{"group", "name", "values"}]`): to compare runs or try another statistic on them.

mod cases;
mod crash;
mod report;
mod run;
mod soak;
mod stats;
mod verdict;

use braid_integration::{Netns, TempDir};
use cases::{attach, chains, devices, footprint, hotplug, kube, latency, merge, netns_entry, node, verifier};
use report::say;
use std::io::Write;
use std::path::PathBuf;
use verdict::Verdict;

/// The cases by the name `--only` selects them with, in the order they run.
pub const CASES: [&str; 23] = [
    "version",
    "exec-floor",
    "delegator",
    "fixed",
    "netns-entry",
    "selection",
    "merged",
    "parallel",
    "merger",
    "verifier",
    "merge",
    "status",
    "vmtap",
    "kube",
    "hotplug",
    "devices",
    "sizes",
    "rss",
    "crash",
    "soak",
    "node",
    "node-quick",
    "node-memory",
];

/// Cases a whole run leaves out: they run only when `--only` names them (`node` needs the
/// real node of `scripts/node.sh` and Multus built by `scripts/build-multus.sh`, and takes
/// about 25 minutes a round: `scripts/bench.sh --node`).
pub const ONLY_WHEN_NAMED: [&str; 3] = ["node", "node-quick", "node-memory"];

fn bench(out: PathBuf, scale: f64, readme: Option<PathBuf>, only: &[String]) -> Result<bool, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let bins = me.parent().map(PathBuf::from).ok_or("cannot tell where braid's binaries are")?;
    for b in ["delegator", "merger", "verifier", "vmtap", "braid-fault", "braid-exec-floor"] {
        if !bins.join(b).exists() {
            return Err(format!("{} is missing: build the release binaries first", bins.join(b).display()));
        }
    }
    let w = cases::World {
        bins,
        reference: braid_integration::reference_plugins().to_path_buf(),
        host: Netns::new("bh"),
        ctr: Netns::new("bc"),
        dir: TempDir::new("bench"),
        scale,
        real_node: std::sync::Mutex::new(None),
    };
    let mut samples = Vec::new();
    let mut verdicts = Vec::new();
    let mut take = |(s, v): (Vec<stats::Sample>, Vec<Verdict>)| {
        samples.extend(s);
        verdicts.extend(v);
    };
    let run = |case: &str, what: &str| {
        let yes = (only.is_empty() && !ONLY_WHEN_NAMED.contains(&case)) || only.iter().any(|o| o == case);
        if yes {
            say(what);
        }
        yes
    };
    if run("version", "VERSION exec latency") {
        take(latency::version(&w)?);
    }
    if run("exec-floor", "the exec floor: an empty static binary beside the delegator's VERSION") {
        take(latency::exec_floor(&w)?);
    }
    if run("delegator", "ADD+DEL of [bridge, ptp] as deployed (conflists by name): delegator vs direct") {
        take(attach::delegator_overhead(&w)?);
    }
    if run("fixed", "ADD+DEL of the primary alone as deployed: the delegator's fixed cost") {
        take(attach::fixed_cost(&w)?);
    }
    if run("netns-entry", "entering the pod's namespace for a socket: on the calling thread vs a thread of its own") {
        take(netns_entry::netns_entry(&w)?);
    }
    if run("selection", "ADD+DEL with networks selected by the pod annotation vs configured") {
        take(attach::selection(&w)?);
    }
    if run("merged", "ADD+DEL of 4 networks: merged result vs primary") {
        take(attach::merged_result(&w)?);
    }
    if run("parallel", "ADD+DEL of 1, 4, 8 ptp: direct, at once, delegator sequential and parallel") {
        take(attach::parallel_attach(&w)?);
    }
    if run("merger", "conflist with and without the merger") {
        take(chains::merger_added(&w)?);
    }
    if run("verifier", "verifier CHECK for 1, 8, 64 interfaces") {
        take(verifier::verifier_scaling(&w)?);
    }
    if run("merge", "merge of 1,000 attachments") {
        take(merge::merge_1000(&w));
    }
    if run("status", "STATUS of the delegator as installed, and of the merger") {
        take(latency::status(&w)?);
    }
    if run("vmtap", "vmtap ADD+DEL at 1 and 8 interfaces, beside deleting one device") {
        take(chains::vmtap_added(&w)?);
    }
    if run(
        "kube",
        "the node agent on the real node: network-status file written → the API server's patch of the pod done",
    ) {
        take(kube::status_published(&w)?);
    }
    if run("hotplug", "hot-plug on the real node: kubectl annotate → interface, → network-status") {
        take(hotplug::hotplug(&w)?);
    }
    if run("devices", "a network naming a device-plugin resource vs one naming none, on the real kubelet") {
        take(devices::devices(&w)?);
    }
    if run("sizes", "binary sizes") {
        take(footprint::sizes(&w));
    }
    if run("rss", "peak RSS during ADD") {
        take(footprint::peak_rss(&w, &me)?);
    }
    if run("crash", "crash run: the delegator and the merger SIGKILLed at random moments of ADD, then DEL") {
        take(crash::crash_run(&w, w.reps(200))?);
    }
    if run("soak", "churn soak: containerd with braid beside plain bridge, 4 workers, containerd SIGKILLed part-way") {
        take(soak::soak(&w)?);
    }
    if run("node", "pod bursts on the real node: braid, Multus thick, Multus thin, the cluster network alone") {
        take(node::node(&w)?);
    }
    if run(
        "node-quick",
        "10-pod bursts on the real node: the cluster network alone, braid by annotation and by ResourceClaim",
    ) {
        take(node::quick::quick(&w)?);
    }
    if run("node-memory", "40 × 4 bursts on the real node: braid vs Multus thick at its limit and with it raised") {
        take(node::surviving::memory(&w)?);
    }
    if let Ok(raw) = std::env::var("BRAID_BENCH_RAW") {
        let v: Vec<serde_json::Value> =
            samples.iter().map(|s| serde_json::json!({"group": s.group, "name": s.name, "values": s.values})).collect();
        let _ = std::fs::write(raw, serde_json::to_vec(&v).unwrap_or_default());
    }
    let mut machine = report::Machine::read(&w.bins);
    if only.iter().any(|c| c == "node" || c == "node-quick" || c == "node-memory") {
        machine.lines.extend(node::facts(&w));
    }
    // The node case alone writes files of its own (node.md, …), beside a whole run's results.
    let stem = match only {
        [one] if one == "node" || one == "node-quick" || one == "node-memory" => one.as_str(),
        _ => "results",
    };
    report::write_all(&out, stem, &machine, &samples, &verdicts).map_err(|e| format!("{}: {e}", out.display()))?;
    let _ = std::io::stdout().write_all(report::markdown(&machine, &samples, &verdicts).as_bytes());
    if let Some(readme) = readme {
        let plot = out.join("results.svg").display().to_string();
        match report::refresh_readme(&readme, &plot, &machine, &verdicts) {
            Ok(true) => say(&format!("{} now shows these results", readme.display())),
            Ok(false) => say(&format!("{} has no bench markers; not updated", readme.display())),
            Err(e) => return Err(format!("{}: {e}", readme.display())),
        }
    }
    say(&format!("written: {0}/{stem}.md, {stem}.csv, {stem}-budgets.csv or budgets.csv, {stem}.svg", out.display()));
    Ok(verdicts.iter().all(Verdict::holds))
}

/// Only the crash run, `kills` SIGKILLs per plugin and mode, its verdicts printed: for long
/// runs hunting rare windows (`scripts/bench.sh --crash N`).
fn crash_only_run(kills: usize) -> Result<bool, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let bins = me.parent().map(PathBuf::from).ok_or("cannot tell where braid's binaries are")?;
    let w = cases::World {
        bins,
        reference: braid_integration::reference_plugins().to_path_buf(),
        host: Netns::new("bh"),
        ctr: Netns::new("bc"),
        dir: TempDir::new("crash"),
        scale: 1.0,
        real_node: std::sync::Mutex::new(None),
    };
    let (_, verdicts) = crash::crash_run(&w, kills)?;
    for v in &verdicts {
        let _ =
            writeln!(std::io::stdout(), "{}: {} — {}", v.what, v.measured, if v.holds() { "holds" } else { "FAILS" });
    }
    Ok(verdicts.iter().all(Verdict::holds))
}

/// The plugins' allocator where they have it, so in-process figures (the merge) are what a
/// plugin sees.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOC: braid_alloc::PluginAlloc = braid_alloc::PluginAlloc::new();

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if std::env::var_os(footprint::RSS_CHILD).is_some() {
        match footprint::rss_child() {
            Ok(kb) => {
                let _ = writeln!(std::io::stdout(), "{kb}");
                std::process::exit(0)
            }
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "{e}");
                std::process::exit(1)
            }
        }
    }
    let mut out = PathBuf::from("bench-results");
    let mut scale = 1.0;
    let mut readme = None;
    let mut only: Vec<String> = Vec::new();
    let usage = |why: String| -> ! {
        let _ = writeln!(
            std::io::stderr(),
            "usage: braid-bench [--out DIR] [--quick] [--readme FILE] [--only CASE,…] | --crash [N] ({why}; cases: {})",
            CASES.join(", ")
        );
        std::process::exit(2)
    };
    let mut crash_only = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--out" => out = it.next().map(PathBuf::from).unwrap_or(out),
            "--quick" => scale = 0.1,
            "--readme" => readme = it.next().map(PathBuf::from),
            "--only" => match it.next() {
                Some(list) => only.extend(list.split(',').map(|c| c.trim().to_string())),
                None => usage("--only needs a list of cases".into()),
            },
            "--crash" => crash_only = it.next().and_then(|n| n.parse::<usize>().ok()).or(Some(200)),
            other => usage(format!("unknown {other:?}")),
        }
    }
    if let Some(bad) = only.iter().find(|c| !CASES.contains(&c.as_str())) {
        usage(format!("unknown case {bad:?}"));
    }
    if !only.is_empty() && readme.is_some() {
        usage("--only runs part of the suite: the README shows whole runs only".into());
    }
    let outcome = match crash_only {
        Some(kills) => crash_only_run(kills),
        None => bench(out, scale, readme, &only),
    };
    match outcome {
        Ok(all) => std::process::exit(if all { 0 } else { 3 }),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "braid-bench: {e}");
            std::process::exit(1)
        }
    }
}
