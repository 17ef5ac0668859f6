//! How braid enters a pod's network namespace, priced (issue 50: "a plain ADD enters the pod's
//! namespace once"). The delegator enters it once per command, on its calling thread, to make
//! the one rtnetlink socket every later read and change of the pod's links uses
//! (`braid_attach::sandbox::PodNetns::rtnl` → `cni_skel::netns::run_here_in_file`): `setns`
//! into the pod's namespace, `socket`, `setns` back — two `setns` calls, one entry. Before
//! issue 37 a thread of its own entered (one `setns`: the thread ended in the pod's namespace),
//! and its start and join cost a scheduler wake-up each way. The case measures both shapes and
//! the socket alone, interleaved, in batches (one entry is microseconds, below the clock's
//! resolution for one exec'd command's budget):
//!
//! * the entry's two `setns` (calling thread − the socket alone, per entry) ≤ 15 µs, 1 % of the
//!   delegator's fixed-cost budget (1.5 ms per ADD+DEL, `fixed`): the second `setns`, the
//!   return, is not worth a thread;
//! * the calling thread's entry ≤ a thread's (their difference ≤ 0).

use super::rounds::{compare, Check, Stat};
use super::World;
use crate::stats::Sample;
use crate::verdict::{ms, signed_ms, Limit, Verdict};
use std::path::Path;
use std::time::Instant;

/// Entries timed together: one is a few microseconds.
const BATCH: u32 = 200;

/// The netns-entry case.
pub fn netns_entry(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let g = "entering the pod's network namespace for an rtnetlink socket, per entry";
    let names = [
        "calling thread: setns in, socket, setns back (braid)",
        "a thread of its own: spawn, setns in, socket, join (before issue 37)",
        "the socket alone, in the node's namespace",
    ];
    let mut samples: Vec<Sample> = names.iter().map(|n| Sample::new(g, *n, "ms")).collect();
    let layout = [vec![0], vec![1], vec![2]];
    let checks = [
        Check { stat: Stat::difference(0, 2), limit: Limit::Ms(0.015) },
        Check { stat: Stat::difference(0, 1), limit: Limit::Ms(0.0) },
    ];
    let ctr = w.ctr.path();
    let file = cni_skel::netns::open(&ctr).map_err(|e| e.to_string())?;
    let est = w.in_host(|| {
        compare(w.plan(300, 3), &mut samples, &layout, &checks, |m, _| {
            let t = Instant::now();
            for _ in 0..BATCH {
                let rtnl = match m {
                    0 => cni_skel::netns::run_here_in_file(&file, Path::new(&ctr), cni_netlink::Rtnl::open),
                    1 => cni_skel::netns::run_in_file(&file, Path::new(&ctr), cni_netlink::Rtnl::open),
                    _ => Ok(cni_netlink::Rtnl::open()),
                };
                rtnl.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
            }
            Ok(vec![t.elapsed() / BATCH])
        })
    })??;
    let median = |i: usize| samples[i].median();
    let verdicts = vec![
        Verdict::at_most(
            "entering the pod's namespace on the calling thread: its two setns, in and back (braid's entry − the socket alone)",
            est[0],
            Limit::Ms(0.015),
        )
        .measured(format!(
            "{} per entry (medians {} vs {})",
            signed_ms(est[0].value),
            ms(median(0)),
            ms(median(2))
        )),
        Verdict::at_most(
            "entering the pod's namespace on the calling thread − on a thread of its own",
            est[1],
            Limit::Ms(0.0),
        )
        .measured(format!(
            "{} per entry (medians {} vs {})",
            signed_ms(est[1].value),
            ms(median(0)),
            ms(median(1))
        )),
    ];
    Ok((samples, verdicts))
}
