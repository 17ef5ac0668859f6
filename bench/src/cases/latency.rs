//! One exec: the VERSION of every plugin beside Debian's bridge, the exec floor, STATUS.

use super::rounds::{Check, Plan, Stat};
use super::{interleaved, World};
use crate::run::{name, Call};
use crate::stats::Sample;
use crate::verdict::{ms, Limit, Verdict};
use cni_types::version::Command;
use serde_json::json;

/// VERSION exec latency of braid's plugins beside the exec floor (an empty static binary) and
/// Debian's bridge, interleaved. Each plugin's budget: ≤ 1 ms, ≤ 1.8× the floor and ≤ 0.5×
/// bridge (medians of the ratios of calls made in the same round). VERSION reads no stdin and
/// prints one line: what it costs beyond the floor is the plugin's own start-up.
pub fn version(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let plugins = [
        w.bin("delegator"),
        w.bin("merger"),
        w.bin("verifier"),
        w.bin("vmtap"),
        w.bin("braid-exec-floor"),
        w.reference("bridge"),
    ];
    let ours = plugins.len() - 2;
    let (floor, bridge) = (ours, ours + 1);
    let mut samples: Vec<Sample> = plugins.iter().map(|p| Sample::new("VERSION exec", name(p), "ms")).collect();
    samples[floor].name = "empty static binary (exec floor)".into();
    let stdin = json!({"cniVersion": "1.0.0"});
    let calls: Vec<Call> = plugins
        .iter()
        // As libcni probes: dummy namespace and interface, no container.
        .map(|p| w.call(p.clone(), Command::Version, "", "dummy", &stdin).in_netns("dummy"))
        .collect();
    let limits = [Limit::Ms(1.0), Limit::Times(1.8, "exec floor"), Limit::Times(0.5, "bridge")];
    let checks: Vec<Check> = (0..ours)
        .flat_map(|i| {
            [Stat::median(i), Stat::Ratio(i, floor), Stat::Ratio(i, bridge)]
                .into_iter()
                .zip(limits)
                .map(|(stat, limit)| Check { stat, limit })
        })
        .collect();
    let est = interleaved(&calls, w.plan(300, 2), &mut samples, &checks)?;
    let verdicts = est
        .chunks(limits.len())
        .zip(&samples)
        .map(|(e, s)| {
            Verdict::at_most(format!("VERSION exec, {}", s.name), e[0], limits[0])
                .and_at_most(e[1], limits[1])
                .and_at_most(e[2], limits[2])
                .measured(format!(
                    "{} ({:.2}× the exec floor {}; bridge {}, ratio {:.2})",
                    ms(e[0].value),
                    e[1].value,
                    ms(samples[floor].median()),
                    ms(samples[bridge].median()),
                    e[2].value
                ))
        })
        .collect();
    Ok((samples, verdicts))
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
    interleaved(&calls, Plan::fixed(w.reps(300)), &mut s, &[])?;
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
    let limit = Limit::Ms(1.5);
    let est = interleaved(&calls, w.plan(300, 2), &mut s, &[Check { stat: Stat::median(0), limit }])?;
    let verdict = Verdict::at_most(
        "STATUS of the delegator as installed (exec included; containerd 2.x runs it every 5 s)",
        est[0],
        limit,
    )
    .measured(format!("{} (p90 {})", ms(est[0].value), ms(s[0].quantile(0.9))));
    Ok((s.to_vec(), vec![verdict]))
}
