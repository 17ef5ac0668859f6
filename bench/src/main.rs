//! `braid-bench`: braid's benchmark suite, run by `scripts/bench.sh` as root. Every comparison
//! is measured side by side and interleaved in one run; results go to a directory as Markdown,
//! CSV and SVG, with a verdict for each budget.
//!
//! Usage: `braid-bench [--out DIR] [--quick] [--readme README.md] [--only CASE]` (quick: a
//! tenth of the repetitions, for a smoke run; readme: refresh the README's results section;
//! only: run one case — see [`CASES`] — and write its results alone). Started with
//! `BRAID_BENCH_RSS_CHILD` set, it is the helper child that measures peak RSS.

mod cases;
mod report;
mod run;
mod stats;

use braid_integration::{Netns, TempDir};
use std::io::Write;
use std::path::PathBuf;

/// One budget and whether it holds.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// What is budgeted.
    pub what: String,
    /// What was measured, in words.
    pub measured: String,
    /// The limit, in words.
    pub budget: String,
    /// Whether the measurement is within the limit.
    pub holds: bool,
}

fn say(msg: &str) {
    let _ = writeln!(std::io::stderr(), "== {msg}");
}

/// The cases, by the name `--only` takes, in the order a full run measures them.
pub const CASES: &[&str] = &[
    "version",
    "exec-floor",
    "delegator",
    "selection",
    "parallel",
    "merger",
    "verifier",
    "merge",
    "status",
    "sizes",
    "rss",
];

fn bench(out: PathBuf, scale: f64, readme: Option<PathBuf>, only: Option<&str>) -> Result<bool, String> {
    let run = |case: &str| only.is_none_or(|o| o == case);
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let bins = me.parent().map(PathBuf::from).ok_or("cannot tell where braid's binaries are")?;
    for b in ["delegator", "merger", "verifier", "braid-fault", "braid-exec-floor"] {
        if !bins.join(b).exists() {
            return Err(format!("{} is missing: build the release binaries first", bins.join(b).display()));
        }
    }
    let w = cases::World {
        bins,
        reference: PathBuf::from(braid_integration::REFERENCE_PLUGINS),
        host: Netns::new("bh"),
        ctr: Netns::new("bc"),
        dir: TempDir::new("bench"),
        scale,
    };
    let mut samples = Vec::new();
    let mut verdicts = Vec::new();
    let mut take = |(s, v): (Vec<stats::Sample>, Vec<Verdict>)| {
        samples.extend(s);
        verdicts.extend(v);
    };
    if run("version") {
        say("VERSION exec latency");
        take(cases::version(&w)?);
    }
    if run("exec-floor") {
        say("the exec floor: an empty static binary beside the delegator's VERSION");
        take(cases::exec_floor(&w)?);
    }
    if run("delegator") {
        say("ADD+DEL of [bridge, ptp]: delegator vs direct");
        take(cases::delegator_overhead(&w)?);
    }
    if run("selection") {
        say("ADD+DEL with networks selected by the pod annotation vs configured");
        take(cases::selection(&w)?);
    }
    if run("parallel") {
        say("ADD+DEL of 1, 4, 8 ptp: direct, at once, delegator sequential and parallel");
        take(cases::parallel_attach(&w)?);
    }
    if run("merger") {
        say("conflist with and without the merger");
        take(cases::merger_added(&w)?);
    }
    if run("verifier") {
        say("verifier CHECK for 1, 8, 64 interfaces");
        take(cases::verifier_scaling(&w)?);
    }
    if run("merge") {
        say("merge of 1,000 attachments");
        take(cases::merge_1000(&w));
    }
    if run("status") {
        say("STATUS of the delegator as installed, and of the merger");
        take(cases::status(&w)?);
    }
    if run("sizes") {
        say("binary sizes");
        take(cases::sizes(&w));
    }
    if run("rss") {
        say("peak RSS during ADD");
        take(cases::peak_rss(&w, &me)?);
    }
    let machine = report::Machine::read(&w.bins);
    report::write_all(&out, &machine, &samples, &verdicts).map_err(|e| format!("{}: {e}", out.display()))?;
    let _ = std::io::stdout().write_all(report::markdown(&machine, &samples, &verdicts).as_bytes());
    if let Some(readme) = readme {
        let plot = out.join("results.svg").display().to_string();
        match report::refresh_readme(&readme, &plot, &machine, &verdicts) {
            Ok(true) => say(&format!("{} now shows these results", readme.display())),
            Ok(false) => say(&format!("{} has no bench markers; not updated", readme.display())),
            Err(e) => return Err(format!("{}: {e}", readme.display())),
        }
    }
    say(&format!("written: {0}/results.md, results.csv, budgets.csv, results.svg", out.display()));
    Ok(verdicts.iter().all(|v| v.holds))
}

/// The plugins' allocator, so in-process figures (the merge) are what a plugin sees.
#[global_allocator]
static ALLOC: braid_alloc::PluginAlloc = braid_alloc::PluginAlloc::new();

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if std::env::var_os(cases::RSS_CHILD).is_some() {
        match cases::rss_child() {
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
    let mut only = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--out" => out = it.next().map(PathBuf::from).unwrap_or(out),
            "--quick" => scale = 0.1,
            "--readme" => readme = it.next().map(PathBuf::from),
            "--only" => match it.next() {
                Some(c) if CASES.contains(&c.as_str()) => only = Some(c.clone()),
                other => {
                    let _ = writeln!(std::io::stderr(), "--only takes one of {CASES:?}, not {other:?}");
                    std::process::exit(2)
                }
            },
            other => {
                let _ = writeln!(
                    std::io::stderr(),
                    "usage: braid-bench [--out DIR] [--quick] [--readme FILE] [--only CASE] (unknown {other:?})"
                );
                std::process::exit(2)
            }
        }
    }
    if only.is_some() && readme.is_some() {
        let _ = writeln!(std::io::stderr(), "--readme needs the full run, not --only");
        std::process::exit(2)
    }
    match bench(out, scale, readme, only.as_deref()) {
        Ok(all) => std::process::exit(if all { 0 } else { 3 }),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "braid-bench: {e}");
            std::process::exit(1)
        }
    }
}
