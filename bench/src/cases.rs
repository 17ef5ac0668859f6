//! The benchmarks. Each measures braid beside its reference in one run, interleaved, so the
//! machine's drift hits both sides alike, and returns its samples and budget verdicts.

use crate::run::{name, Call};
use crate::stats::Sample;
use crate::Verdict;
use braid_integration::{Netns, TempDir};
use cni_runtime::chain::{Chain, RuntimeConf};
use cni_runtime::invoke::Exec;
use cni_runtime::invoke::RawExec;
use cni_types::merge::{merge, Attachment};
use cni_types::version::Command;
use cni_types::Invocation;
use cni_types::{AnyResult, NetConfList};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where everything the benchmarks need lives.
pub struct World {
    /// braid's release binaries.
    pub bins: PathBuf,
    /// Debian's reference plugins.
    pub reference: PathBuf,
    /// The node's namespace (plugins run here; the machine's own is never touched).
    pub host: Netns,
    /// The pod's namespace.
    pub ctr: Netns,
    /// IPAM data, state, caches.
    pub dir: TempDir,
    /// Repetitions (scaled by `--quick`).
    pub scale: f64,
}

impl World {
    fn bin(&self, n: &str) -> PathBuf {
        self.bins.join(n)
    }

    fn reference(&self, n: &str) -> PathBuf {
        self.reference.join(n)
    }

    fn path_env(&self) -> String {
        format!("{}:{}", self.bins.display(), self.reference.display())
    }

    pub(crate) fn reps(&self, n: usize) -> usize {
        ((n as f64 * self.scale).round() as usize).max(5)
    }

    /// A call of `plugin` against the pod namespace.
    fn call(&self, plugin: PathBuf, command: Command, id: &str, ifname: &str, stdin: &Value) -> Call {
        Call {
            plugin,
            req: Invocation {
                command,
                container_id: id.to_string(),
                netns: self.ctr.path().display().to_string(),
                ifname: ifname.to_string(),
                args: "IgnoreUnknown=1;K8S_POD_NAME=bench".to_string(),
                path: self.path_env(),
            },
            stdin: serde_json::to_vec(stdin).unwrap_or_default(),
        }
    }

    /// Runs `work` on a thread inside the node's namespace (children inherit it).
    pub(crate) fn in_host<T: Send>(&self, work: impl FnOnce() -> T + Send) -> Result<T, String> {
        cni_skel::netns::run_in(&self.host.path(), work).map_err(|e| e.to_string())
    }

    fn ipam(&self, subnet: u8) -> Value {
        json!({"type": "host-local", "dataDir": self.dir.path().join("ipam"),
               "ranges": [[{"subnet": format!("198.18.{subnet}.0/24"), "gateway": format!("198.18.{subnet}.1")}]]})
    }
}

fn ms(v: f64) -> String {
    if v < 1.0 {
        format!("{:.0} µs", v * 1000.0)
    } else {
        format!("{v:.2} ms")
    }
}

/// VERSION exec latency of braid's plugins beside Debian's bridge.
pub fn version(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let plugins = [w.bin("delegator"), w.bin("merger"), w.bin("verifier"), w.bin("vmtap"), w.reference("bridge")];
    let ours = plugins.len() - 1;
    let mut samples: Vec<Sample> = plugins.iter().map(|p| Sample::new("VERSION exec", name(p), "ms")).collect();
    let stdin = json!({"cniVersion": "1.0.0"});
    let calls: Vec<Call> = plugins
        .iter()
        // As libcni probes: dummy namespace and interface, no container.
        .map(|p| w.call(p.clone(), Command::Version, "", "dummy", &stdin).in_netns("dummy"))
        .collect();
    for c in &calls {
        c.run()?; // warm the page cache
    }
    for i in 0..w.reps(300) {
        for k in 0..calls.len() {
            let j = (i + k) % calls.len();
            samples[j].push(calls[j].run()?.0);
        }
    }
    let bridge = samples[ours].median();
    let verdicts = samples[..ours]
        .iter()
        .map(|s| Verdict {
            what: format!("VERSION exec, {}", s.name),
            measured: format!("{} (bridge {}, ratio {:.2})", ms(s.median()), ms(bridge), s.median() / bridge),
            budget: "≤ 1 ms and ≤ 0.5× bridge".into(),
            holds: s.median() <= 1.0 && s.median() <= 0.5 * bridge,
        })
        .collect();
    Ok((samples, verdicts))
}

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
        for i in 0..w.reps(300) {
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
    let mut paired = Sample::new(g, "paired ratio", "×");
    paired.values = via.values.iter().zip(&direct.values).map(|(v, d)| v / d).collect();
    let ratio = paired.median();
    let verdict = Verdict {
        what: "ADD+DEL [bridge, ptp]: delegator ÷ direct (median of paired ratios)".into(),
        measured: format!(
            "{ratio:.3} (medians {} vs {}: {:.3})",
            ms(via.median()),
            ms(direct.median()),
            via.median() / direct.median()
        ),
        budget: "≤ 1.02".into(),
        holds: ratio <= 1.02,
    };
    let mut samples = vec![direct, via];
    samples.extend(halves);
    Ok((samples, vec![verdict]))
}

/// A conflist with the merger (no delegates: its own cost) beside the same chain without it,
/// run the way libcni runs chains.
pub fn merger_added(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let bridge = json!({"type": "bridge", "bridge": "benchbr1", "ipam": w.ipam(102)});
    let tuning = json!({"type": "tuning", "mtu": 1400});
    let merger = json!({"type": "merger", "stateDir": w.dir.path().join("mstate")});
    let list = |plugins: Vec<Value>| -> Result<NetConfList, String> {
        let v = json!({"cniVersion": "1.0.0", "name": "benchm", "plugins": plugins});
        NetConfList::parse(&serde_json::to_vec(&v).unwrap_or_default()).map_err(|e| e.to_string())
    };
    let without = list(vec![bridge.clone(), tuning.clone()])?;
    let with = list(vec![bridge, merger, tuning])?;
    let g = "conflist ± merger";
    let mut s = [
        Sample::new(g, "ADD [bridge, tuning]", "ms"),
        Sample::new(g, "ADD [bridge, merger, tuning]", "ms"),
        Sample::new(g, "DEL [bridge, tuning]", "ms"),
        Sample::new(g, "DEL [bridge, merger, tuning]", "ms"),
    ];
    let ctr = w.ctr.path().display().to_string();
    let paths = vec![w.bins.clone(), w.reference.clone()];
    let cache = w.dir.path().join("cache");
    w.in_host(|| -> Result<(), String> {
        let exec = RawExec { timeout: Some(Duration::from_secs(30)), ..RawExec::default() };
        let chain = Chain { exec: &exec, paths, cache_dir: cache };
        let rt = |id: String| RuntimeConf {
            container_id: id,
            netns: ctr.clone(),
            ifname: "eth0".into(),
            args: String::new(),
            capability_args: Default::default(),
        };
        // One ADD+DEL: the two durations.
        let cycle = |l: &NetConfList, id: String| -> Result<(Duration, Duration), String> {
            let r = rt(id);
            let t = Instant::now();
            chain.add(l, &r).map_err(|e| e.msg)?;
            let add = t.elapsed();
            let t = Instant::now();
            chain.del(l, &r).map_err(|e| e.msg)?;
            Ok((add, t.elapsed()))
        };
        cycle(&without, "warm-a".into())?;
        cycle(&with, "warm-b".into())?;
        for i in 0..w.reps(300) {
            let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
            for k in order {
                let (add, del) = cycle(if k == 0 { &without } else { &with }, format!("{k}-{i}"))?;
                s[k].push(add);
                s[k + 2].push(del);
            }
        }
        Ok(())
    })??;
    let verdicts = [("ADD", 0), ("DEL", 2)]
        .iter()
        .map(|(cmd, i)| {
            // Median of the paired differences (each pair measured back to back).
            let mut d = Sample::new(g, "", "ms");
            d.values = s[i + 1].values.iter().zip(&s[*i].values).map(|(w, wo)| w - wo).collect();
            let added = d.median();
            Verdict {
                what: format!("{cmd} of a conflist: added by the merger (median of paired differences)"),
                measured: format!(
                    "{} (medians {} vs {})",
                    if added < 0.0 { format!("−{}", ms(-added)) } else { ms(added) },
                    ms(s[i + 1].median()),
                    ms(s[*i].median())
                ),
                budget: "≤ 1 ms".into(),
                holds: added <= 1.0,
            }
        })
        .collect();
    Ok((s.to_vec(), verdicts))
}

/// A pod namespace with `n` veth pairs `c<i>`/`p<i>`, each `c<i>` with an address and a routed
/// destination, and the 1.1 result that claims exactly that.
fn interfaces_ns(n: usize) -> Result<(Netns, Value), String> {
    let ns = Netns::new("bv");
    let mut batch = String::new();
    let mut interfaces = Vec::new();
    let (mut ips, mut routes) = (Vec::new(), Vec::new());
    for i in 0..n {
        let mac = format!("02:00:00:00:{:02x}:01", i);
        batch.push_str(&format!("link add c{i} address {mac} type veth peer name p{i}\n"));
        batch.push_str(&format!("link set c{i} up\nlink set p{i} up\n"));
        batch.push_str(&format!("addr add 198.18.{i}.2/24 dev c{i}\n"));
        batch.push_str(&format!("route add 198.19.{i}.0/24 via 198.18.{i}.1 dev c{i}\n"));
        interfaces.push(json!({"name": format!("c{i}"), "mac": mac, "sandbox": ns.path(), "mtu": 1500}));
        ips.push(json!({"address": format!("198.18.{i}.2/24"), "gateway": format!("198.18.{i}.1"), "interface": i}));
        routes.push(json!({"dst": format!("198.19.{i}.0/24"), "gw": format!("198.18.{i}.1")}));
    }
    let path = std::env::temp_dir().join(format!("braid-bench-{}-{n}.batch", std::process::id()));
    std::fs::write(&path, batch).map_err(|e| e.to_string())?;
    let out = std::process::Command::new("ip")
        .args(["-n", ns.name(), "-batch"])
        .arg(&path)
        .output()
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&path);
    if !out.status.success() {
        return Err(format!("setting up {n} interfaces: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let result = json!({"cniVersion": "1.1.0", "interfaces": interfaces, "ips": ips, "routes": routes});
    Ok((ns, result))
}

/// The verifier's CHECK (exec included) for 1, 8 and 64 pod interfaces.
pub fn verifier_scaling(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let sizes = [1usize, 8, 64];
    let mut calls = Vec::new();
    let mut keep = Vec::new();
    for n in sizes {
        let (ns, result) = interfaces_ns(n)?;
        let conf = json!({"cniVersion": "1.1.0", "name": "bench", "type": "verifier", "prevResult": result});
        calls.push(
            w.call(w.bin("verifier"), Command::Check, "bench", "c0", &conf).in_netns(ns.path().display().to_string()),
        );
        keep.push(ns);
    }
    let mut samples: Vec<Sample> =
        sizes.iter().map(|n| Sample::new("verifier CHECK", format!("{n} interfaces"), "ms")).collect();
    w.in_host(|| -> Result<(), String> {
        for c in &calls {
            c.run()?;
        }
        for i in 0..w.reps(200) {
            for k in 0..calls.len() {
                let j = (i + k) % calls.len();
                samples[j].push(calls[j].run()?.0);
            }
        }
        Ok(())
    })??;
    let (t1, t8, t64) = (samples[0].median(), samples[1].median(), samples[2].median());
    let near = (t8 - t1) / 7.0;
    let far = (t64 - t8) / 56.0;
    let verdicts = vec![
        Verdict {
            what: "verifier CHECK, 8 interfaces (exec included)".into(),
            measured: ms(t8),
            budget: "≤ 3 ms".into(),
            holds: t8 <= 3.0,
        },
        Verdict {
            what: "verifier CHECK growth, per interface: 8→64 vs 1→8".into(),
            measured: format!("{} vs {}", ms(far.max(0.0)), ms(near.max(0.0))),
            budget: "linear: 8→64 ≤ 2× 1→8 (+10 µs for noise)".into(),
            holds: far <= 2.0 * near.max(0.0) + 0.010,
        },
    ];
    drop(keep);
    Ok((samples, verdicts))
}

/// The merge of 1,000 attachments, in process.
pub fn merge_1000(w: &World) -> (Vec<Sample>, Vec<Verdict>) {
    let one = AnyResult::from_bytes(
        br#"{"cniVersion":"1.0.0","interfaces":[{"name":"x","sandbox":"/run/netns/p"}],
             "ips":[{"address":"198.18.0.2/24","interface":0}],"routes":[{"dst":"0.0.0.0/0","gw":"198.18.0.1"}],
             "dns":{"nameservers":["198.18.0.53"]}}"#,
    );
    let mut s = Sample::new("merge, in process", "1,000 attachments", "ms");
    let Ok(one) = one else {
        return (vec![s], Vec::new());
    };
    let names: Vec<String> = (0..1000).map(|i| format!("net{i}")).collect();
    let atts: Vec<Attachment> =
        names.iter().map(|n| Attachment { result: &one, ifname: n, sandbox: "/run/netns/p" }).collect();
    for _ in 0..10 {
        std::hint::black_box(merge(std::hint::black_box(&atts)));
    }
    for _ in 0..w.reps(300) {
        let t = Instant::now();
        std::hint::black_box(merge(std::hint::black_box(&atts)));
        s.push(t.elapsed());
    }
    let v = Verdict {
        what: "merge of 1,000 attachments".into(),
        measured: ms(s.median()),
        budget: "≤ 1 ms".into(),
        holds: s.median() <= 1.0,
    };
    (vec![s], vec![v])
}

/// Stripped release binary sizes.
pub fn sizes(w: &World) -> (Vec<Sample>, Vec<Verdict>) {
    let mut samples = Vec::new();
    let mut verdicts = Vec::new();
    // The plugins that decode tc, addresses and rules carry netlink-packet-route's codecs for them
    // (through cni-netlink): the verifier and vmtap get 2 MB.
    for (bin, limit) in [("delegator", 1.0), ("merger", 1.0), ("verifier", 2.0), ("vmtap", 2.0)] {
        let bytes = std::fs::metadata(w.bin(bin)).map(|m| m.len()).unwrap_or(0);
        let mb = bytes as f64 / 1_000_000.0;
        let mut s = Sample::new("binary size", bin, "MB");
        s.values.push(mb);
        samples.push(s);
        verdicts.push(Verdict {
            what: format!("stripped binary size, {bin}"),
            measured: format!("{mb:.3} MB ({bytes} bytes)"),
            budget: format!("≤ {limit} MB"),
            holds: bytes > 0 && mb <= limit,
        });
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
            verdicts.push(Verdict {
                what: format!("peak RSS during ADD, {label}"),
                measured: format!("{peak:.1} MB"),
                budget: "≤ 8 MB".into(),
                holds: peak <= 8.0,
            });
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
    let mut paired = Sample::new(g, "paired difference", "ms");
    paired.values = by_annotation.values.iter().zip(&by_config.values).map(|(s, c)| s - c).collect();
    let diff = paired.median();
    let verdict = Verdict {
        what: "ADD+DEL with two networks selected by annotation, beyond configured (median of paired differences)"
            .into(),
        measured: format!("{} (medians {} vs {})", ms(diff), ms(by_annotation.median()), ms(by_config.median())),
        budget: "≤ 1 ms".into(),
        holds: diff <= 1.0,
    };
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

/// The median of the paired ratios `a[i] / b[i]` (each pair measured back to back).
fn paired_ratio(a: &Sample, b: &Sample) -> f64 {
    let mut r = Sample::new("", "", "×");
    r.values = a.values.iter().zip(&b.values).map(|(x, y)| x / y).collect();
    r.median()
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
        let ratio = |a: usize, b: usize| paired_ratio(&s[a], &s[b]);
        let medians = |a: usize, b: usize| format!("medians {} vs {}", ms(s[a].median()), ms(s[b].median()));
        if n > 1 {
            let r = ratio(SEQUENTIAL, DIRECT);
            verdicts.push(Verdict {
                what: format!("ADD+DEL of {n} ptp: delegator ÷ direct one after another (median of paired ratios)"),
                measured: format!("{r:.3} ({})", medians(SEQUENTIAL, DIRECT)),
                budget: "≤ 1.03".into(),
                holds: r <= 1.03,
            });
            let r = ratio(PARALLEL, DIRECT);
            verdicts.push(Verdict {
                what: format!("ADD+DEL of {n} ptp: parallel delegator ÷ direct one after another"),
                measured: format!("{r:.3} ({})", medians(PARALLEL, DIRECT)),
                budget: "≤ 0.65".into(),
                holds: r <= 0.65,
            });
        }
        let r = ratio(PARALLEL, LAUNCHER);
        verdicts.push(Verdict {
            what: format!("ADD+DEL of {n} ptp: parallel delegator ÷ started at once by a bare launcher"),
            measured: format!("{r:.3} ({})", medians(PARALLEL, LAUNCHER)),
            budget: "≤ 1.05".into(),
            holds: r <= 1.05,
        });
        if n == 4 {
            let r = ratio(MERGED, SEQUENTIAL);
            verdicts.push(Verdict {
                what: "ADD+DEL of 4 ptp: delegator merged ÷ primary result".into(),
                measured: format!("{r:.3} ({})", medians(MERGED, SEQUENTIAL)),
                budget: "≤ 1.01".into(),
                holds: r <= 1.01,
            });
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

/// The exec floor — an empty static binary spawned and reaped as a plugin is — beside the
/// delegator's VERSION, interleaved: what any plugin call costs on this machine at least (no
/// budget of its own: every other figure is read against it).
pub fn exec_floor(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let g = "exec floor";
    let plugins = [w.bin("braid-exec-floor"), w.bin("delegator")];
    let labels = ["empty static binary", "delegator VERSION"];
    let stdin = json!({"cniVersion": "1.0.0"});
    let calls: Vec<Call> =
        plugins.iter().map(|p| w.call(p.clone(), Command::Version, "", "dummy", &stdin).in_netns("dummy")).collect();
    let mut s: Vec<Sample> = labels.iter().map(|l| Sample::new(g, *l, "ms")).collect();
    for c in &calls {
        c.run()?;
    }
    for i in 0..w.reps(300) {
        for k in 0..calls.len() {
            let j = (i + k) % calls.len();
            s[j].push(calls[j].run()?.0);
        }
    }
    // No budget: it is the machine's figure, the yardstick for the others.
    Ok((s, Vec::new()))
}

/// STATUS of the delegator as `braid-install` configures it — the cluster network by name in a
/// conf dir of a few files, cniVersion 1.1.0 (what libcni ≥ 1.2 selects from its
/// `cniVersions`), a 1.0.0 primary of Debian's plugins (no STATUS of theirs to forward) — and
/// of the merger with two delegates, exec included. containerd 2.x runs it every 5 s.
pub fn status(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let conf_dir = w.dir.path().join("status-net.d");
    let io = |e: std::io::Error| e.to_string();
    std::fs::create_dir_all(&conf_dir).map_err(io)?;
    // A node's conf dir: braid's own file first, the primary, and a file of another network.
    let primary = json!({"cniVersion": "1.0.0", "name": "cluster", "plugins": [
        {"type": "bridge", "bridge": "cni0", "isDefaultGateway": true, "ipam": w.ipam(130)},
        {"type": "portmap", "capabilities": {"portMappings": true}},
        {"type": "bandwidth", "capabilities": {"bandwidth": true}}
    ]});
    let other = json!({"cniVersion": "1.0.0", "name": "other", "plugins": [{"type": "ptp", "ipam": w.ipam(131)}]});
    let delegator = json!({"cniVersion": "1.1.0", "name": "braid", "type": "delegator",
        "capabilities": {"portMappings": true, "bandwidth": true, "io.kubernetes.cri.pod-annotations": true},
        "confDir": conf_dir, "stateDir": w.dir.path().join("status-state"), "delegates": [{"network": "cluster"}],
        "kubernetes": {"networksDir": w.dir.path().join("braid.d"), "globalNamespaces": ["default"],
                       "statusDir": w.dir.path().join("status")}});
    for (file, v) in [
        ("00-braid.conflist", &json!({"cniVersion": "1.1.0", "name": "braid", "plugins": [delegator]})),
        ("10-cluster.conflist", &primary),
        ("20-other.conflist", &other),
    ] {
        std::fs::write(conf_dir.join(file), v.to_string()).map_err(io)?;
    }
    let merger = json!({"cniVersion": "1.1.0", "name": "m", "type": "merger", "stateDir": w.dir.path().join("status-mstate"),
        "delegates": [{"cniVersion": "1.0.0", "name": "a", "type": "ptp", "ipam": w.ipam(132)},
                      {"cniVersion": "1.0.0", "name": "b", "type": "macvlan", "master": "eth9", "ipam": w.ipam(133)}]});
    let g = "STATUS (exec included)";
    let calls = [
        w.call(w.bin("delegator"), Command::Status, "", "", &delegator),
        w.call(w.bin("merger"), Command::Status, "", "", &merger),
    ];
    let mut s = [Sample::new(g, "delegator, installed layout", "ms"), Sample::new(g, "merger, 2 delegates", "ms")];
    for c in &calls {
        c.run()?;
    }
    for i in 0..w.reps(300) {
        for k in 0..calls.len() {
            let j = (i + k) % calls.len();
            s[j].push(calls[j].run()?.0);
        }
    }
    let t = s[0].median();
    let verdict = Verdict {
        what: "STATUS of the delegator as installed (exec included; containerd 2.x runs it every 5 s)".into(),
        measured: format!("{} (p90 {})", ms(t), ms(s[0].quantile(0.9))),
        budget: "≤ 1.5 ms".into(),
        holds: t <= 1.5,
    };
    Ok((s.to_vec(), vec![verdict]))
}

/// The group of the ADD+DEL of a chain ± vmtap at `n` pod interfaces.
fn vmtap_group(n: usize) -> &'static str {
    match n {
        1 => "chain ± vmtap, 1 interface",
        _ => "chain ± vmtap, 3 interfaces",
    }
}

/// ADD+DEL of a conflist with vmtap last beside the same conflist without it, run the way
/// libcni runs chains and interleaved (alternating order): `[ptp]` for 1 pod interface,
/// `[delegator merged {ptp, ptp, ptp}]` for 3. What vmtap adds is one more process in the chain
/// plus, per interface, a tap, an ingress qdisc on each side and two `mirred` filters at ADD
/// and their removal at DEL; its budget is 1 ms plus 0.5 ms per interface (median of paired
/// differences).
pub fn vmtap_added(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let mut samples = Vec::new();
    let mut verdicts = Vec::new();
    let ctr = w.ctr.path().display().to_string();
    let paths = vec![w.bins.clone(), w.reference.clone()];
    let cache = w.dir.path().join("vcache");
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
        let list = |plugins: Vec<Value>| -> Result<NetConfList, String> {
            let v = json!({"cniVersion": "1.0.0", "name": format!("benchv{n}"), "plugins": plugins});
            NetConfList::parse(&serde_json::to_vec(&v).unwrap_or_default()).map_err(|e| e.to_string())
        };
        let without = list(vec![first.clone()])?;
        let with = list(vec![first, json!({"type": "vmtap"})])?;
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
        w.in_host(|| -> Result<(), String> {
            let exec = RawExec { timeout: Some(Duration::from_secs(30)), ..RawExec::default() };
            let chain = Chain { exec: &exec, paths: paths.clone(), cache_dir: cache.clone() };
            let cycle = |l: &NetConfList, id: String| -> Result<(Duration, Duration), String> {
                let r = RuntimeConf {
                    container_id: id,
                    netns: ctr.clone(),
                    ifname: "eth0".into(),
                    args: String::new(),
                    capability_args: Default::default(),
                };
                let t = Instant::now();
                chain.add(l, &r).map_err(|e| e.msg)?;
                let add = t.elapsed();
                let t = Instant::now();
                chain.del(l, &r).map_err(|e| e.msg)?;
                Ok((add, t.elapsed()))
            };
            cycle(&without, format!("warm{n}-a"))?;
            cycle(&with, format!("warm{n}-b"))?;
            // Fewer rounds for more interfaces: each is longer.
            for i in 0..w.reps(if n == 1 { 300 } else { 150 }) {
                let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
                for k in order {
                    let (add, del) = cycle(if k == 0 { &without } else { &with }, format!("v{n}-{k}-{i}"))?;
                    s[k].push(add + del);
                    s[k + 2].push(add);
                    s[k + 4].push(del);
                }
            }
            Ok(())
        })??;
        let mut paired = Sample::new(g, "paired difference (added by vmtap)", "ms");
        paired.values = s[1].values.iter().zip(&s[0].values).map(|(a, b)| a - b).collect();
        let added = paired.median();
        let limit = 1.0 + 0.5 * n as f64;
        verdicts.push(Verdict {
            what: format!(
                "ADD+DEL at {n} interface{}: added by vmtap (median of paired differences)",
                if n == 1 { "" } else { "s" }
            ),
            measured: format!(
                "{} (p10–p90 {} – {}; medians {} vs {})",
                signed_ms(added),
                signed_ms(paired.p10()),
                signed_ms(paired.p90()),
                ms(s[1].median()),
                ms(s[0].median())
            ),
            budget: format!("≤ {} (1 ms + 0.5 ms per interface)", ms(limit)),
            holds: added <= limit,
        });
        samples.extend(s);
        samples.push(paired);
    }
    Ok((samples, verdicts))
}

/// A duration in milliseconds that may be negative (a paired difference).
fn signed_ms(v: f64) -> String {
    if v < 0.0 {
        format!("−{}", ms(-v))
    } else {
        ms(v)
    }
}
