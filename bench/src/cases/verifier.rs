//! The verifier's CHECK as the interfaces it checks grow.

use super::{interfaces_ns, interleaved, World};
use crate::stats::Sample;
use crate::verdict::{ms, Limit, Verdict};
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
    w.in_host(|| interleaved(&calls, w.reps(200), &mut samples))??;
    let (t1, t8, t64) = (samples[0].median(), samples[1].median(), samples[2].median());
    let near = (t8 - t1) / 7.0;
    let far = (t64 - t8) / 56.0;
    // Linear: a checked interface costs as much among 64 as among 8, within a factor (and a
    // noise floor of its own, the per-interface figures being tens of µs).
    const GROWTH: f64 = 2.0;
    const NOISE_MS: f64 = 0.010;
    let verdicts = vec![
        Verdict::at_most("verifier CHECK, 8 interfaces (exec included)", t8, Limit::Ms(3.0)),
        Verdict::at_most(
            "verifier CHECK growth, per interface: 8→64 vs 1→8",
            far,
            Limit::Ms(GROWTH * near.max(0.0) + NOISE_MS),
        )
        .measured(format!("{} vs {}", ms(far.max(0.0)), ms(near.max(0.0))))
        .because(format_args!("linear: 8→64 ≤ {GROWTH}× 1→8, +{} for noise", ms(NOISE_MS))),
    ];
    drop(keep);
    Ok((samples, verdicts))
}
