//! ADD+DEL through the delegator: beside its delegates called directly, with networks
//! selected by the pod's annotation beside configured ones, and in parallel.

use super::{paired, World};
use crate::run::Call;
use crate::stats::Sample;
use crate::verdict::{ms, Limit, Verdict};
use cni_types::version::Command;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// What the delegator may add to its delegates called directly: its own exec on ADD and on DEL
/// and the plan made durable before the first delegate (one fsync of the file and of its
/// directory) put the floor near 1.03 on a machine where an exec costs ~0.3 ms and a cycle
/// ~75 ms; everything else it does must fit in the rest.
const DELEGATOR_OVER_DIRECT: f64 = 1.035;

/// ADD+DEL of [bridge, ptp] through the delegator beside the same two delegates called directly.
pub fn delegator_overhead(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let bridge =
        json!({"cniVersion": "1.0.0", "name": "bench", "type": "bridge", "bridge": "benchbr0", "ipam": w.ipam(100)});
    let ptp = json!({"cniVersion": "1.0.0", "name": "side", "type": "ptp", "ipam": w.ipam(101)});
    let delegator = json!({"cniVersion": "1.0.0", "name": "bench", "type": "delegator",
        "stateDir": w.dir.path().join("dstate"), "delegates": [bridge, ptp]});
    let g = "ADD+DEL [bridge, ptp]";
    let mut direct = Sample::new(g, "called directly", "ms");
    let mut via = Sample::new(g, "through the delegator", "ms");
    // The two halves too, to see where a difference comes from.
    let mut halves = [
        Sample::new(g, "ADD half, directly", "ms"),
        Sample::new(g, "ADD half, delegator", "ms"),
        Sample::new(g, "DEL half, directly", "ms"),
        Sample::new(g, "DEL half, delegator", "ms"),
    ];
    // As a runtime calls them: DEL carries the plugin's ADD result as prevResult (libcni's cache).
    let direct_cycle = |id: &str| -> Result<(Duration, Duration), String> {
        let start = Instant::now();
        let (_, bridge_out) = w.call(w.reference("bridge"), Command::Add, id, "eth0", &bridge).run()?;
        let (_, ptp_out) = w.call(w.reference("ptp"), Command::Add, id, "net1", &ptp).run()?;
        let mid = Instant::now();
        let with_prev = |conf: &Value, out: &[u8]| {
            let mut c = conf.clone();
            c["prevResult"] = serde_json::from_slice(out).unwrap_or(Value::Null);
            c
        };
        w.call(w.reference("ptp"), Command::Del, id, "net1", &with_prev(&ptp, &ptp_out)).run()?;
        w.call(w.reference("bridge"), Command::Del, id, "eth0", &with_prev(&bridge, &bridge_out)).run()?;
        Ok((mid - start, mid.elapsed()))
    };
    let via_cycle = |id: &str| -> Result<(Duration, Duration), String> {
        let add = w.call(w.bin("delegator"), Command::Add, id, "eth0", &delegator);
        let del = w.call(w.bin("delegator"), Command::Del, id, "eth0", &delegator);
        let start = Instant::now();
        add.run()?;
        let mid = Instant::now();
        del.run()?;
        Ok((mid - start, mid.elapsed()))
    };
    w.in_host(|| -> Result<(), String> {
        direct_cycle("warm-d")?;
        via_cycle("warm-v")?;
        // 600 rounds: a cycle's p10–p90 spans ±12 %, and the budget's margin is about 1 %;
        // with 300 the median of the paired ratios moved by ±0.012 from run to run.
        for i in 0..w.reps(600) {
            let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
            for k in order {
                let (add, del) = if k == 0 { direct_cycle(&format!("d{i}"))? } else { via_cycle(&format!("v{i}"))? };
                if k == 0 { &mut direct } else { &mut via }.push(add + del);
                halves[k].push(add);
                halves[k + 2].push(del);
            }
        }
        Ok(())
    })??;
    // Pairs measured back to back see the same machine; the median of their ratios is robust
    // against the drift that moves both (the ratio of medians is shown beside it).
    let ratio = paired(&via, &direct, g, "paired ratio", "×", |v, d| v / d).median();
    let verdict = Verdict::at_most(
        "ADD+DEL [bridge, ptp]: delegator ÷ direct (median of paired ratios)",
        ratio,
        Limit::Ratio(DELEGATOR_OVER_DIRECT),
    )
    .measured(format!(
        "{ratio:.3} (medians {} vs {}: {:.3})",
        ms(via.median()),
        ms(direct.median()),
        via.median() / direct.median()
    ));
    let mut samples = vec![direct, via];
    samples.extend(halves);
    Ok((samples, vec![verdict]))
}

/// ADD+DEL of a pod with the cluster network and two networks selected by its annotation,
/// beside the same three networks as configured delegates: what selection itself costs
/// (reading the annotation, resolving the files, the network-status document).
pub fn selection(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let nets = w.dir.path().join("braid.d");
    let io = |e: std::io::Error| e.to_string();
    std::fs::create_dir_all(nets.join("default")).map_err(io)?;
    for (n, subnet) in [("a", 111u8), ("b", 112)] {
        let conf = json!({"cniVersion": "1.0.0", "name": n, "plugins": [{"type": "ptp", "ipam": w.ipam(subnet)}]});
        std::fs::write(nets.join("default").join(format!("{n}.conflist")), conf.to_string()).map_err(io)?;
    }
    let cluster = json!({"cniVersion": "1.0.0", "name": "cluster", "type": "ptp", "ipam": w.ipam(110)});
    let annotations = "io.kubernetes.cri.pod-annotations";
    let selected = json!({"cniVersion": "1.0.0", "name": "bench", "type": "delegator",
        "stateDir": w.dir.path().join("selstate"), "delegates": [cluster],
        "capabilities": {annotations: true},
        "runtimeConfig": {annotations: {"k8s.v1.cni.cncf.io/networks": "a, b"}},
        "kubernetes": {"networksDir": nets, "statusDir": w.dir.path().join("status")}});
    let configured = json!({"cniVersion": "1.0.0", "name": "bench", "type": "delegator",
        "stateDir": w.dir.path().join("cfgstate"), "confDir": nets.join("default"),
        "delegates": [cluster, "a", "b"]});
    let g = "ADD+DEL: cluster + 2 networks";
    let mut by_config = Sample::new(g, "configured delegates", "ms");
    let mut by_annotation = Sample::new(g, "selected by annotation", "ms");
    let cycle = |conf: &Value, id: &str| -> Result<Duration, String> {
        let with_pod = |mut c: Call| {
            c.req.args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=bench".into();
            c
        };
        let add = with_pod(w.call(w.bin("delegator"), Command::Add, id, "eth0", conf));
        let del = with_pod(w.call(w.bin("delegator"), Command::Del, id, "eth0", conf));
        let start = Instant::now();
        add.run()?;
        del.run()?;
        Ok(start.elapsed())
    };
    w.in_host(|| -> Result<(), String> {
        cycle(&configured, "warm-c")?;
        cycle(&selected, "warm-s")?;
        for i in 0..w.reps(200) {
            let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
            for k in order {
                if k == 0 {
                    by_config.push(cycle(&configured, &format!("c{i}"))?);
                } else {
                    by_annotation.push(cycle(&selected, &format!("s{i}"))?);
                }
            }
        }
        Ok(())
    })??;
    let diff = paired(&by_annotation, &by_config, g, "paired difference", "ms", |s, c| s - c).median();
    let verdict = Verdict::at_most(
        "ADD+DEL with two networks selected by annotation, beyond configured (median of paired differences)",
        diff,
        Limit::Ms(1.0),
    )
    .measured(format!("{} (medians {} vs {})", ms(diff), ms(by_annotation.median()), ms(by_config.median())));
    Ok((vec![by_config, by_annotation], vec![verdict]))
}

/// The group of the ADD+DEL of `n` ptp delegates.
fn ptp_group(n: usize) -> &'static str {
    match n {
        1 => "ADD+DEL of 1 ptp",
        4 => "ADD+DEL of 4 ptp",
        _ => "ADD+DEL of 8 ptp",
    }
}

/// ADD+DEL of 1, 4 and 8 `ptp` delegates, interleaved: called directly one after another,
/// started at once by a bare launcher (threads of this program, each spawning one delegate the
/// way the delegator does), through the delegator one after another and with `"parallel":
/// true`; at 4, the sequential delegator's merged result beside its primary one.
pub fn parallel_attach(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    const DIRECT: usize = 0;
    const LAUNCHER: usize = 1;
    const SEQUENTIAL: usize = 2;
    const PARALLEL: usize = 3;
    const MERGED: usize = 4;
    let names = [
        "direct, one after another",
        "direct, started at once (bare launcher)",
        "delegator",
        "delegator, parallel",
        "delegator, merged result",
    ];
    let mut samples = Vec::new();
    let mut verdicts = Vec::new();
    for n in [1usize, 4, 8] {
        let g = ptp_group(n);
        let ptps: Vec<Value> = (0..n)
            .map(|i| json!({"cniVersion": "1.0.0", "name": format!("p{i}"), "type": "ptp", "ipam": w.ipam(120 + i as u8)}))
            .collect();
        // The names the delegator gives them: CNI_IFNAME, then the first free net<N>.
        let ifnames: Vec<String> = (0..n).map(|i| if i == 0 { "eth0".into() } else { format!("net{i}") }).collect();
        let delegator = |parallel: bool, result: &str| {
            json!({"cniVersion": "1.0.0", "name": "benchp", "type": "delegator", "result": result, "parallel": parallel,
                "stateDir": w.dir.path().join("pstate"), "delegates": ptps})
        };
        let confs = [delegator(false, "primary"), delegator(true, "primary"), delegator(false, "merged")];
        let modes: Vec<usize> = if n == 4 { vec![0, 1, 2, 3, 4] } else { vec![0, 1, 2, 3] };
        let mut s: Vec<Sample> = names.iter().map(|m| Sample::new(g, *m, "ms")).collect();
        let with_prev = |conf: &Value, out: &[u8]| {
            let mut c = conf.clone();
            c["prevResult"] = serde_json::from_slice(out).unwrap_or(Value::Null);
            c
        };
        let ptp = w.reference("ptp");
        let direct = |id: &str| -> Result<Duration, String> {
            let start = Instant::now();
            let mut outs = Vec::new();
            for (conf, ifname) in ptps.iter().zip(&ifnames) {
                outs.push(w.call(ptp.clone(), Command::Add, id, ifname, conf).run()?.1);
            }
            for ((conf, ifname), out) in ptps.iter().zip(&ifnames).zip(&outs).rev() {
                w.call(ptp.clone(), Command::Del, id, ifname, &with_prev(conf, out)).run()?;
            }
            Ok(start.elapsed())
        };
        let launcher = |id: &str| -> Result<Duration, String> {
            let adds: Vec<Call> =
                ptps.iter().zip(&ifnames).map(|(c, i)| w.call(ptp.clone(), Command::Add, id, i, c)).collect();
            let start = Instant::now();
            let outs = at_once(&adds)?;
            let dels: Vec<Call> = ptps
                .iter()
                .zip(&ifnames)
                .zip(&outs)
                .map(|((c, i), out)| w.call(ptp.clone(), Command::Del, id, i, &with_prev(c, out)))
                .collect();
            at_once(&dels)?;
            Ok(start.elapsed())
        };
        let via = |conf: &Value, id: &str| -> Result<Duration, String> {
            let add = w.call(w.bin("delegator"), Command::Add, id, "eth0", conf);
            let del = w.call(w.bin("delegator"), Command::Del, id, "eth0", conf);
            let start = Instant::now();
            add.run()?;
            del.run()?;
            Ok(start.elapsed())
        };
        let cycle = |mode: usize, id: &str| match mode {
            DIRECT => direct(id),
            LAUNCHER => launcher(id),
            SEQUENTIAL => via(&confs[0], id),
            PARALLEL => via(&confs[1], id),
            _ => via(&confs[2], id),
        };
        // Fewer rounds for more delegates: each one is longer.
        let reps = w.reps(match n {
            1 => 150,
            4 => 80,
            _ => 50,
        });
        w.in_host(|| -> Result<(), String> {
            for &m in &modes {
                cycle(m, &format!("warm{n}-{m}"))?;
            }
            for i in 0..reps {
                // Rotate which mode goes first, so that none always follows the same one.
                for k in 0..modes.len() {
                    let m = modes[(i + k) % modes.len()];
                    s[m].push(cycle(m, &format!("p{n}-{m}-{i}"))?);
                }
            }
            Ok(())
        })??;
        // Mode `a` ÷ mode `b`, the median of the paired ratios, within `limit`.
        let ratio = |what: String, a: usize, b: usize, limit: f64| {
            let r = paired(&s[a], &s[b], g, "", "×", |x, y| x / y).median();
            Verdict::at_most(what, r, Limit::Ratio(limit)).measured(format!(
                "{r:.3} (medians {} vs {})",
                ms(s[a].median()),
                ms(s[b].median())
            ))
        };
        if n > 1 {
            verdicts.push(ratio(
                format!("ADD+DEL of {n} ptp: delegator ÷ direct one after another (median of paired ratios)"),
                SEQUENTIAL,
                DIRECT,
                1.03,
            ));
            verdicts.push(ratio(
                format!("ADD+DEL of {n} ptp: parallel delegator ÷ direct one after another"),
                PARALLEL,
                DIRECT,
                0.65,
            ));
        }
        verdicts.push(ratio(
            format!("ADD+DEL of {n} ptp: parallel delegator ÷ started at once by a bare launcher"),
            PARALLEL,
            LAUNCHER,
            1.05,
        ));
        if n == 4 {
            verdicts.push(ratio(
                "ADD+DEL of 4 ptp: delegator merged ÷ primary result".into(),
                MERGED,
                SEQUENTIAL,
                1.01,
            ));
        }
        samples.extend(s.into_iter().filter(|x| !x.values.is_empty()));
    }
    Ok((samples, verdicts))
}

/// Runs every call at once, a thread each, as a bare launcher would; their outputs in order.
fn at_once(calls: &[Call]) -> Result<Vec<Vec<u8>>, String> {
    std::thread::scope(|s| {
        let threads: Vec<_> = calls.iter().map(|c| s.spawn(move || c.run())).collect();
        threads
            .into_iter()
            .map(|t| t.join().map_err(|_| "a launcher thread panicked".to_string()).and_then(|r| r.map(|(_, out)| out)))
            .collect()
    })
}
