//! The results: a Markdown table, CSVs and an SVG plot, written to one directory.

use crate::stats::Sample;
use crate::verdict::{Outcome, Verdict};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

/// A line of progress on stderr (stdout carries the results).
pub fn say(msg: &str) {
    let _ = writeln!(std::io::stderr(), "== {msg}");
}

/// Where and on what the run happened.
pub struct Machine {
    /// One line per fact.
    pub lines: Vec<String>,
}

impl Machine {
    /// Reads the facts: CPU, cores, memory, kernel, the reference plugins' version, the date,
    /// and how the measured braid binaries are linked (`bins`).
    pub fn read(bins: &Path) -> Machine {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| {
                c.lines()
                    .find(|l| l.starts_with("model name"))
                    .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
            })
            .unwrap_or_else(|| "unknown CPU".into());
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
        let mem = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| m.lines().next().map(|l| l.split_whitespace().nth(1).unwrap_or("0").to_string()))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or_else(|| "unknown".into(), |kb| format!("{:.0} GiB", kb as f64 / 1024.0 / 1024.0));
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
        let out = |cmd: &str, args: &[&str]| {
            std::process::Command::new(cmd)
                .args(args)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default()
        };
        // What `bridge` says of itself with no command (`CNI bridge plugin v1.10.0`): the
        // reference plugins are built from their Go module (scripts/build-cni-plugins.sh).
        let bridge = braid_integration::reference_plugins().join("bridge");
        let plugins = out(&bridge.to_string_lossy(), &[]);
        let plugins = plugins.lines().next().unwrap_or("unknown").to_string();
        let date = out("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
        // How busy the machine was: a loaded machine moves every figure, and some budgets' true
        // values with it (docs/bench/NOTES.md); the 15-minute average spans most of a run.
        let load = std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" / "))
            .unwrap_or_else(|_| "unknown".into());
        Machine {
            lines: vec![
                format!("date: {date}"),
                format!("machine: {cpu}, {cores} cores, {mem} memory, Linux {kernel}"),
                format!("load average at the end (1 / 5 / 15 min): {load}"),
                format!("reference plugins: {plugins} (scripts/build-cni-plugins.sh)"),
                format!(
                    "braid binaries: {}, release profile, target {}",
                    linkage(&bins.join("delegator")),
                    bins.parent().and_then(|p| p.file_name()).map_or_else(
                        || "host".to_string(),
                        |n| if n == "target" { "host (glibc)".to_string() } else { n.to_string_lossy().into_owned() }
                    )
                ),
            ],
        }
    }
}

/// "static" or "dynamically linked (glibc)": a dynamic executable names its loader in PT_INTERP,
/// which sits in the first page.
fn linkage(bin: &Path) -> &'static str {
    use std::io::Read;
    let mut head = vec![0u8; 4096];
    let n = std::fs::File::open(bin).and_then(|mut f| f.read(&mut head)).unwrap_or(0);
    if head[..n].windows(8).any(|w| w == b"ld-linux") {
        "dynamically linked (glibc)"
    } else {
        "statically linked"
    }
}

fn num(v: f64, unit: &str) -> String {
    match unit {
        "ms" if v.abs() < 1.0 => format!("{:.0} µs", v * 1000.0),
        "ms" => format!("{v:.2} ms"),
        _ => format!("{v:.2} {unit}"),
    }
}

/// The budgets as the report and the README show them: how many hold, and a table.
fn budget_table(s: &mut String, verdicts: &[Verdict]) {
    let count = |o: Outcome| verdicts.iter().filter(|v| v.outcome == o).count();
    let _ = writeln!(
        s,
        "{} of {} budgets hold, {} do not, {} unclear. A timed figure is a median with its 95 % \
         interval; a budget holds when the whole interval is within its limit, does not when the \
         whole interval is beyond it, and is unclear when the interval straddles the limit after \
         the most rounds its case runs (docs/bench/NOTES.md).\n",
        count(Outcome::Holds),
        verdicts.len(),
        count(Outcome::Fails),
        count(Outcome::Unclear)
    );
    let _ = writeln!(
        s,
        "| budget | measured (median) | interval (rounds) | limit | holds |\n| --- | --- | --- | --- | --- |"
    );
    for v in verdicts {
        let interval = if v.interval.is_empty() { "exact" } else { v.interval.as_str() };
        let _ = writeln!(s, "| {} | {} | {interval} | {} | {} |", v.what, v.measured, v.budget, v.outcome.word());
    }
}

/// The Markdown report: machine, budgets, then every measurement.
pub fn markdown(machine: &Machine, samples: &[Sample], verdicts: &[Verdict]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## Benchmarks\n");
    for l in &machine.lines {
        let _ = writeln!(s, "- {l}");
    }
    s.push('\n');
    budget_table(&mut s, verdicts);
    let _ = writeln!(s, "\n| benchmark | measured | n | median | p10 – p90 |\n| --- | --- | --- | --- | --- |");
    for x in samples {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} – {} |",
            x.group,
            x.name,
            x.values.len(),
            num(x.median(), x.unit),
            num(x.p10(), x.unit),
            num(x.p90(), x.unit)
        );
    }
    s
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One line per measurement.
pub fn samples_csv(samples: &[Sample]) -> String {
    let mut s = String::from("group,name,unit,n,median,p10,p90\n");
    for x in samples {
        let _ = writeln!(
            s,
            "{},{},{},{},{:.4},{:.4},{:.4}",
            csv_field(x.group),
            csv_field(&x.name),
            x.unit,
            x.values.len(),
            x.median(),
            x.p10(),
            x.p90()
        );
    }
    s
}

/// One line per budget: its verdict `holds`, `fails` or `unclear`; its interval empty for a
/// figure read exactly.
pub fn budgets_csv(verdicts: &[Verdict]) -> String {
    let mut s = String::from("budget,measured,interval,limit,verdict\n");
    for v in verdicts {
        let _ = writeln!(
            s,
            "{},{},{},{},{}",
            csv_field(&v.what),
            csv_field(&v.measured),
            csv_field(&v.interval),
            csv_field(&v.budget),
            v.outcome.csv()
        );
    }
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Horizontal bars (median) with whiskers (p10 – p90), one panel per benchmark, each panel on
/// its own scale (VERSION and ADD+DEL differ by two orders of magnitude).
pub fn svg(samples: &[Sample]) -> String {
    let (w, label_w, row_h, head_h) = (920.0, 300.0, 24.0, 30.0);
    let bar_w = w - label_w - 130.0;
    let mut groups: Vec<&str> = Vec::new();
    for x in samples {
        if !groups.contains(&x.group) {
            groups.push(x.group);
        }
    }
    let height = groups.len() as f64 * head_h + samples.len() as f64 * row_h + 20.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    let mut y = 10.0;
    for g in groups {
        let rows: Vec<&Sample> = samples.iter().filter(|x| x.group == g).collect();
        let max = rows.iter().map(|x| x.p90().max(x.median())).fold(0.0f64, f64::max).max(1e-9);
        let unit = rows.first().map_or("", |x| x.unit);
        let _ = writeln!(
            s,
            "<text x=\"4\" y=\"{:.1}\" font-weight=\"bold\">{} ({unit}, median and p10–p90)</text>",
            y + 18.0,
            esc(g)
        );
        y += head_h;
        for x in rows {
            // A paired difference can be negative: its bar and whisker stop at the axis.
            let scale = |v: f64| label_w + bar_w * (v.max(0.0) / max);
            // Grey for what braid is compared against: reference plugins called directly, the
            // chain without the merger, the kernel's deletion of one device (vmtap's yardstick).
            // ("[bridge, merger, tuning]" names bridge too, and is the merger's bar.)
            let baseline = x.name == "bridge"
                || x.name == "cluster network"
                || x.name.contains("reference")
                || x.name.contains("direct")
                || x.name.ends_with("[bridge, tuning]")
                || x.name.starts_with("deleting one device");
            let braid = !baseline;
            // Orange for Multus (the node case's other meta-plugin).
            let fill = if x.name.starts_with("Multus") {
                "#e08a2c"
            } else if braid {
                "#3b7dd8"
            } else {
                "#9a9a9a"
            };
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                label_w - 8.0,
                y + 15.0,
                esc(&x.name)
            );
            let _ = writeln!(
                s,
                "<rect x=\"{label_w}\" y=\"{:.1}\" width=\"{:.1}\" height=\"14\" fill=\"{fill}\"/>",
                y + 4.0,
                (scale(x.median()) - label_w).max(1.0)
            );
            if x.values.len() > 1 {
                let (a, b, m) = (scale(x.p10()), scale(x.p90()), y + 11.0);
                let _ = writeln!(
                    s,
                    "<path d=\"M{a:.1} {m:.1}H{b:.1}M{a:.1} {:.1}V{:.1}M{b:.1} {:.1}V{:.1}\" stroke=\"black\" fill=\"none\"/>",
                    m - 4.0,
                    m + 4.0,
                    m - 4.0,
                    m + 4.0
                );
            }
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                scale(x.p90().max(x.median())) + 6.0,
                y + 15.0,
                esc(&num(x.median(), x.unit))
            );
            y += row_h;
        }
    }
    s.push_str("</svg>\n");
    s
}

/// Where the README's copy of the results sits.
const README_START: &str = "<!-- bench:start -->";
const README_END: &str = "<!-- bench:end -->";

/// Replaces the README's results section (between its markers) with the machine and budgets
/// of this run and a link to the plot; `false` when the README has no markers.
pub fn refresh_readme(readme: &Path, plot: &str, machine: &Machine, verdicts: &[Verdict]) -> std::io::Result<bool> {
    let text = std::fs::read_to_string(readme)?;
    let (Some(a), Some(b)) = (text.find(README_START), text.find(README_END)) else {
        return Ok(false);
    };
    if b < a {
        return Ok(false);
    }
    let mut section = String::from(README_START);
    section.push_str("\n\n");
    for l in &machine.lines {
        let _ = writeln!(section, "- {l}");
    }
    section.push('\n');
    budget_table(&mut section, verdicts);
    let _ = writeln!(section, "\n![benchmarks: median and p10–p90 of each measurement]({plot})\n");
    let new = format!("{}{}{}", &text[..a], section, &text[b..]);
    std::fs::write(readme, new)?;
    Ok(true)
}

/// Writes `STEM.md`, `STEM.csv`, the budgets' CSV and `STEM.svg` into `dir`: `results.*` and
/// `budgets.csv` for a run of the suite, `node.*` and `node-budgets.csv` for the node case
/// alone (its plot: only its pod-ready groups).
pub fn write_all(
    dir: &Path,
    stem: &str,
    machine: &Machine,
    samples: &[Sample],
    verdicts: &[Verdict],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(format!("{stem}.md")), markdown(machine, samples, verdicts))?;
    std::fs::write(dir.join(format!("{stem}.csv")), samples_csv(samples))?;
    let budgets = if stem == "results" { "budgets.csv".to_string() } else { format!("{stem}-budgets.csv") };
    std::fs::write(dir.join(budgets), budgets_csv(verdicts))?;
    let plotted: Vec<Sample> = if stem.starts_with("node") {
        samples.iter().filter(|s| s.group.contains("pod creation → Ready")).cloned().collect()
    } else {
        samples.to_vec()
    };
    std::fs::write(dir.join(format!("{stem}.svg")), svg(&plotted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Estimate;
    use crate::verdict::Limit;

    #[test]
    fn negative_milliseconds_read_as_such() {
        assert_eq!(num(-3.942, "ms"), "-3.94 ms");
        assert_eq!(num(-0.563, "ms"), "-563 µs");
        assert_eq!(num(0.5, "ms"), "500 µs");
    }

    #[test]
    fn csv_quotes_and_svg_is_closed() {
        assert_eq!(csv_field("a, b"), "\"a, b\"");
        assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
        let mut s = Sample::new("g", "n<1>", "ms");
        s.values = vec![0.5, 0.7, 0.9];
        let svg = svg(&[s.clone()]);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("n&lt;1&gt;"));
        let e = |low, value, high| Estimate { value, low, high, rounds: 400 };
        let v = [
            Verdict::plain("w", "m", "b", false),
            Verdict::at_most("x", e(1.01, 1.02, 1.04), Limit::Ratio(1.03)),
            Verdict::at_most("y", 0.9, Limit::Mb(1.0)),
        ];
        let md = markdown(&Machine { lines: vec!["x".into()] }, &[s], &v);
        assert!(md.contains("1 of 3 budgets hold, 1 do not, 1 unclear."), "{md}");
        assert!(md.contains("| w | m | exact | b | **NO** |"), "{md}");
        assert!(md.contains("| x | 1.020 | 1.010 – 1.040 (400 rounds) | ≤ 1.03 | unclear |"), "{md}");
        let csv = budgets_csv(&v);
        assert!(csv.starts_with("budget,measured,interval,limit,verdict\nw,m,,b,fails\n"), "{csv}");
        assert!(csv.contains("x,1.020,1.010 – 1.040 (400 rounds),≤ 1.03,unclear\ny,0.9 MB,,≤ 1 MB,holds\n"), "{csv}");
    }

    #[test]
    fn readme_section_is_replaced_between_its_markers_only() {
        let path = std::env::temp_dir().join(format!("braid-readme-{}.md", std::process::id()));
        std::fs::write(&path, "# x\n<!-- bench:start -->\nold\n<!-- bench:end -->\ntail\n").unwrap();
        let v = Verdict::plain("w", "m", "b", true);
        let m = Machine { lines: vec!["machine: test".into()] };
        assert!(refresh_readme(&path, "docs/bench/results.svg", &m, &[v]).unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# x\n<!-- bench:start -->\n\n- machine: test"));
        assert!(text.contains("1 of 1 budgets hold, 0 do not, 0 unclear.") && !text.contains("\nold\n"));
        assert!(text.contains("| w | m | exact | b | yes |"));
        assert!(text.ends_with("<!-- bench:end -->\ntail\n"));
        std::fs::write(&path, "no markers").unwrap();
        assert!(!refresh_readme(&path, "p", &m, &[]).unwrap());
        let _ = std::fs::remove_file(&path);
    }
}
