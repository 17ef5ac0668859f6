//! What the plugins cost a node besides time: stripped binary sizes and peak RSS.

use super::{interfaces_ns, World};
use crate::run::Call;
use crate::stats::Sample;
use crate::verdict::{Limit, Verdict};
use cni_runtime::invoke::{Exec, RawExec};
use cni_types::version::Command;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// Stripped release binary sizes.
pub fn sizes(w: &World) -> (Vec<Sample>, Vec<Verdict>) {
    let mut samples = Vec::new();
    let mut verdicts = Vec::new();
    // Every plugin reads its links with netlink-packet-route's typed messages (cni-netlink): the
    // delegator and merger get 1.2 MB, of which that link codec is about 0.2 MB (the delegator's
    // routes another 0.05). The plugins that also decode tc, addresses and rules get 2 MB.
    for (bin, limit) in [("delegator", 1.2), ("merger", 1.2), ("verifier", 2.0), ("vmtap", 2.0)] {
        let bytes = std::fs::metadata(w.bin(bin)).map(|m| m.len()).unwrap_or(0);
        let mb = bytes as f64 / 1_000_000.0;
        let mut s = Sample::new("binary size", bin, "MB");
        s.values.push(mb);
        samples.push(s);
        // A binary that is missing never holds its budget.
        let checked = if bytes == 0 { f64::INFINITY } else { mb };
        verdicts.push(
            Verdict::at_most(format!("stripped binary size, {bin}"), checked, Limit::Mb(limit))
                .measured(format!("{mb:.3} MB ({bytes} bytes)")),
        );
    }
    let bytes = std::fs::metadata(w.reference("bridge")).map(|m| m.len()).unwrap_or(0);
    let mut s = Sample::new("binary size", "bridge (reference)", "MB");
    s.values.push(bytes as f64 / 1_000_000.0);
    samples.push(s);
    (samples, verdicts)
}

/// Peak RSS during ADD, measured by a child of this program that runs one ADD and reports the
/// largest `ru_maxrss` of what it waited for. A meta-plugin's figure includes its delegates, so
/// braid's plugins are measured with `braid-fault` delegates (canned results: braid code only).
pub fn peak_rss(w: &World, me: &Path) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let canned = json!({"cniVersion": "1.0.0",
        "interfaces": [{"name": "eth0", "sandbox": w.ctr.path()}],
        "ips": [{"address": "198.18.110.2/24", "interface": 0}],
        "routes": [{"dst": "0.0.0.0/0", "gw": "198.18.110.1"}]});
    let fault =
        |n: usize| json!({"cniVersion": "1.0.0", "name": format!("f{n}"), "type": "braid-fault", "result": canned});
    let (ns8, result8) = interfaces_ns(8)?;
    let cases: Vec<(&str, Call, Option<Call>)> = vec![
        {
            let conf = json!({"cniVersion": "1.0.0", "name": "r", "type": "delegator", "result": "merged",
                "stateDir": w.dir.path().join("rstate"), "delegates": [fault(1), fault(2)]});
            (
                "delegator (2 braid-fault delegates)",
                w.call(w.bin("delegator"), Command::Add, "rss-d", "eth0", &conf),
                Some(w.call(w.bin("delegator"), Command::Del, "rss-d", "eth0", &conf)),
            )
        },
        {
            let conf = json!({"cniVersion": "1.0.0", "name": "r", "type": "merger", "prevResult": canned,
                "stateDir": w.dir.path().join("rstate-merger"), "delegates": [fault(1)]});
            (
                "merger (1 braid-fault delegate)",
                w.call(w.bin("merger"), Command::Add, "rss-m", "eth0", &conf),
                Some(w.call(w.bin("merger"), Command::Del, "rss-m", "eth0", &conf)),
            )
        },
        {
            let conf = json!({"cniVersion": "1.1.0", "name": "r", "type": "verifier", "prevResult": result8});
            (
                "verifier (8 interfaces)",
                w.call(w.bin("verifier"), Command::Add, "rss-v", "c0", &conf)
                    .in_netns(ns8.path().display().to_string()),
                None,
            )
        },
        {
            // Eight taps, sixteen redirects and their qdiscs; the DEL removes them again.
            let conf = json!({"cniVersion": "1.1.0", "name": "r", "type": "vmtap", "prevResult": result8});
            let ns = ns8.path().display().to_string();
            (
                "vmtap (8 interfaces)",
                w.call(w.bin("vmtap"), Command::Add, "rss-t", "c0", &conf).in_netns(ns.clone()),
                Some(w.call(w.bin("vmtap"), Command::Del, "rss-t", "c0", &conf).in_netns(ns)),
            )
        },
        {
            let conf = json!({"cniVersion": "1.0.0", "name": "r", "type": "bridge", "bridge": "benchbr2", "ipam": w.ipam(111)});
            (
                "bridge + host-local (reference)",
                w.call(w.reference("bridge"), Command::Add, "rss-b", "eth0", &conf),
                Some(w.call(w.reference("bridge"), Command::Del, "rss-b", "eth0", &conf)),
            )
        },
    ];
    let mut samples = Vec::new();
    let mut verdicts = Vec::new();
    for (label, add, del) in &cases {
        let mut s = Sample::new("peak RSS during ADD", *label, "MB");
        for _ in 0..5 {
            let kb = w.in_host(|| rss_of(me, add))??;
            s.values.push(kb as f64 / 1000.0);
            if let Some(d) = del {
                w.in_host(|| d.run())??;
            }
        }
        if !label.contains("reference") {
            let peak = s.quantile(1.0);
            verdicts.push(Verdict::at_most(format!("peak RSS during ADD, {label}"), peak, Limit::Mb(8.0)));
        }
        samples.push(s);
    }
    drop(ns8);
    Ok((samples, verdicts))
}

/// Set in the environment of the helper child that measures peak RSS.
pub const RSS_CHILD: &str = "BRAID_BENCH_RSS_CHILD";

/// Runs this program as the `rss` helper with the call on stdin; returns the KB it printed.
fn rss_of(me: &Path, call: &Call) -> Result<u64, String> {
    let spec = serde_json::to_vec(&crate::run::to_spec(call)).unwrap_or_default();
    let out = RawExec { timeout: Some(Duration::from_secs(60)), ..RawExec::default() }
        .exec(me, &spec, &[(RSS_CHILD.to_string(), "1".to_string())])
        .map_err(|e| format!("rss child: {e}"))?;
    String::from_utf8_lossy(&out).trim().parse().map_err(|e| format!("rss child printed garbage: {e}"))
}

/// The `rss` helper child: runs the call given on stdin, prints the peak RSS (KB) of what it
/// waited for.
pub fn rss_child() -> Result<u64, String> {
    use std::io::Read;
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_slice(&input).map_err(|e| e.to_string())?;
    crate::run::from_spec(&v)?.run()?;
    let usage =
        nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).map_err(|e| e.to_string())?;
    Ok(u64::try_from(usage.max_rss()).unwrap_or(0))
}
