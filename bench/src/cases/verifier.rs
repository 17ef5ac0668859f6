//! The verifier's CHECK as the interfaces it checks grow.

use super::rounds::{Check, Stat};
use super::{interfaces_ns, interleaved, World};
use crate::stats::Sample;
use crate::verdict::{signed_ms, Limit, Verdict};
use cni_types::version::Command;
use serde_json::json;

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
    // Linear: a checked interface costs as much among 64 as among 8, within a factor (and a
    // noise floor of its own, the per-interface figures being tens of µs). Per round: the cost
    // per interface from 8 to 64, beyond GROWTH× the cost per interface from 1 to 8.
    const GROWTH: f64 = 2.0;
    const NOISE_MS: f64 = 0.010;
    let (near, far) =
        (Stat::Linear(vec![(1, 1.0 / 7.0), (0, -1.0 / 7.0)]), Stat::Linear(vec![(2, 1.0 / 56.0), (1, -1.0 / 56.0)]));
    let beyond = Stat::Linear(vec![(2, 1.0 / 56.0), (1, -1.0 / 56.0 - GROWTH / 7.0), (0, GROWTH / 7.0)]);
    let checks =
        [Check { stat: Stat::median(1), limit: Limit::Ms(3.0) }, Check { stat: beyond, limit: Limit::Ms(NOISE_MS) }];
    let est = w.in_host(|| interleaved(&calls, w.plan(200, 2), &mut samples, &checks))??;
    let (near, far) = (near.figure(&samples), far.figure(&samples));
    let verdicts = vec![
        Verdict::at_most("verifier CHECK, 8 interfaces (exec included)", est[0], checks[0].limit),
        Verdict::at_most(
            format!(
                "verifier CHECK growth: per interface from 8 to 64 beyond {GROWTH}× from 1 to 8 (median over rounds)"
            ),
            est[1],
            checks[1].limit,
        )
        .measured(format!(
            "{} ({} per interface from 8 to 64, {} from 1 to 8)",
            signed_ms(est[1].value),
            signed_ms(far),
            signed_ms(near)
        ))
        .because("linear, with a noise floor"),
    ];
    drop(keep);
    Ok((samples, verdicts))
}
