//! Interleaved rounds of the things a case compares, run until its budgets are decided.
//!
//! Every round runs each compared thing (a *mode*: a call, a cycle of calls) once, in a fresh
//! shuffled order, so that the machine's drift and the disturbance one call leaves for the next
//! (a Go plugin's exit, deferred RCU work) fall on every mode alike, and so that values of the
//! same round can be paired. A budget is a [`Check`]: a statistic of the rounds ([`Stat`]) and
//! its limit. After the first `first` rounds each check is judged on its interval; while one is
//! undecided (its interval straddles its limit) another `first` rounds run, of only the modes
//! the undecided checks read, up to the plan's cap. Each look reads its intervals at a share of
//! [`ALPHA`] ([`Plan::alpha`]), so that looking more than once does not raise the error rate. A
//! check decided at a look keeps that look's figure.

use crate::stats::{Estimate, Sample, ALPHA};
use crate::verdict::{Limit, Outcome};
use std::time::Duration;

/// How many rounds a comparison runs: `first`, then `first` more at a time while a budget of it
/// is undecided, up to `first × looks`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// Rounds before the first look, and between looks.
    pub first: usize,
    /// How many looks at most.
    pub looks: usize,
}

impl Plan {
    /// Always `rounds` rounds, one look (budgets far from their limits, or figures without one).
    pub fn fixed(rounds: usize) -> Plan {
        Plan { first: rounds, looks: 1 }
    }

    /// The error rate look `look` (1-based) reads its intervals at: its share `look² ÷ Σ j²` of
    /// [`ALPHA`]. The shares sum to `ALPHA`, so by the union bound the chance that any look's
    /// interval misses the true value is at most `ALPHA`, however the looks depend on each
    /// other; growing shares keep the last look's interval — where a figure close to its limit
    /// ends — nearly as narrow as a single look's (3 looks: 1/14, 4/14, 9/14 of `ALPHA`, where
    /// an even split would give each 1/3).
    pub fn alpha(self, look: usize) -> f64 {
        let looks = self.looks.max(1);
        let total: usize = (1..=looks).map(|j| j * j).sum();
        ALPHA * (look.clamp(1, looks).pow(2)) as f64 / total as f64
    }
}

/// A statistic of the rounds, by the index of the samples it reads.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Stat {
    /// The median over rounds of Σ coefficient × value (one sample: its median; `[(a, 1.0),
    /// (b, -1.0)]`: the median of paired differences).
    Linear(Vec<(usize, f64)>),
    /// The median over rounds of `a ÷ b` (paired ratios).
    Ratio(usize, usize),
    /// A statistic ÷ the median of a sample; each of the two intervals at half the error rate.
    Over(Box<Stat>, usize),
}

impl Stat {
    /// The median of one sample.
    pub fn median(a: usize) -> Stat {
        Stat::Linear(vec![(a, 1.0)])
    }

    /// The median of the paired differences `a − b`.
    pub fn difference(a: usize, b: usize) -> Stat {
        Stat::Linear(vec![(a, 1.0), (b, -1.0)])
    }

    /// The samples it reads.
    fn reads(&self) -> Vec<usize> {
        match self {
            Stat::Linear(terms) => terms.iter().map(|t| t.0).collect(),
            Stat::Ratio(a, b) => vec![*a, *b],
            Stat::Over(num, den) => {
                let mut r = num.reads();
                r.push(*den);
                r
            }
        }
    }

    /// Its value in each round that every sample it reads has (rounds are aligned by index: a
    /// mode runs in every round until no undecided check needs it, then never again).
    pub fn per_round(&self, s: &[Sample]) -> Vec<f64> {
        let rounds = self.reads().iter().map(|&i| s[i].values.len()).min().unwrap_or(0);
        match self {
            Stat::Linear(terms) => (0..rounds).map(|r| terms.iter().map(|&(i, c)| c * s[i].values[r]).sum()).collect(),
            Stat::Ratio(a, b) => (0..rounds).map(|r| s[*a].values[r] / s[*b].values[r]).collect(),
            Stat::Over(num, _) => num.per_round(s).into_iter().take(rounds).collect(),
        }
    }

    /// Its figure alone (for words beside a verdict).
    pub fn figure(&self, s: &[Sample]) -> f64 {
        self.estimate(s, ALPHA).value
    }

    /// Its figure and interval at error rate `alpha`.
    pub fn estimate(&self, s: &[Sample], alpha: f64) -> Estimate {
        match self {
            Stat::Over(num, den) => num.estimate(s, alpha / 2.0).over(Stat::median(*den).estimate(s, alpha / 2.0)),
            _ => Estimate::median(&self.per_round(s), alpha),
        }
    }
}

/// A budget of a comparison: a statistic and its limit.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    pub stat: Stat,
    pub limit: Limit,
}

/// Runs `plan`'s rounds of `modes` modes, shuffled in each round, until every check is decided
/// or the plan's cap; returns each check's figure. `cycle(mode, tag)` runs one mode once (`tag`
/// is `warm` for the one unrecorded warm-up of each mode, then the round's number — for unique
/// container IDs) and returns its durations, which go to the samples `layout[mode]` names, in
/// order.
pub(crate) fn compare(
    plan: Plan,
    samples: &mut [Sample],
    layout: &[Vec<usize>],
    checks: &[Check],
    mut cycle: impl FnMut(usize, &str) -> Result<Vec<Duration>, String>,
) -> Result<Vec<Estimate>, String> {
    for m in 0..layout.len() {
        cycle(m, "warm")?;
    }
    let mut decided: Vec<Option<Estimate>> = vec![None; checks.len()];
    let mut rng = Shuffle::new(plan.first as u64);
    let mut round = 0;
    let mut order: Vec<usize> = (0..layout.len()).collect();
    for look in 1..=plan.looks.max(1) {
        let end = plan.first * look;
        while round < end {
            rng.shuffle(&mut order);
            for &m in &order {
                let values = cycle(m, &round.to_string())?;
                for (&i, d) in layout[m].iter().zip(values) {
                    samples[i].push(d);
                }
            }
            round += 1;
        }
        let last = look >= plan.looks;
        for (c, slot) in checks.iter().zip(decided.iter_mut()).filter(|(_, d)| d.is_none()) {
            let e = c.stat.estimate(samples, plan.alpha(look));
            if last || c.limit.judge(&e) != Outcome::Unclear {
                *slot = Some(e);
            }
        }
        // Further rounds run only the modes an undecided check reads.
        let needed: Vec<usize> =
            checks.iter().zip(&decided).filter(|(_, d)| d.is_none()).flat_map(|(c, _)| c.stat.reads()).collect();
        order.retain(|m| layout[*m].iter().any(|i| needed.contains(i)));
        if order.is_empty() {
            break;
        }
        if !last {
            let open = decided.iter().filter(|d| d.is_none()).count();
            crate::report::say(&format!(
                "{open} of {} budgets undecided after {round} rounds: {} more of {} of the {} modes",
                checks.len(),
                plan.first,
                order.len(),
                layout.len()
            ));
        }
    }
    Ok(decided.into_iter().map(|d| d.unwrap_or(Estimate::exact(f64::NAN))).collect())
}

/// A fixed-seed xorshift generator: a run's orders are reproducible, and no dependency is
/// needed for a Fisher–Yates shuffle of a handful of modes. A fixed rotation would not do: every
/// mode would follow the same one in almost every round, and a mode that disturbs the machine
/// (a Go plugin's exit) would be charged to its successor.
pub(crate) struct Shuffle(u64);

impl Shuffle {
    pub(crate) fn new(seed: u64) -> Shuffle {
        Shuffle(seed ^ 0x9e37_79b9_7f4a_7c15 | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(crate) fn shuffle(&mut self, v: &mut [usize]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_looks_share_the_error_rate() {
        let plan = Plan { first: 100, looks: 3 };
        let shares: Vec<f64> = (1..=3).map(|k| plan.alpha(k) / ALPHA).collect();
        assert!(shares.iter().zip([1.0 / 14.0, 4.0 / 14.0, 9.0 / 14.0]).all(|(a, b)| (a - b).abs() < 1e-12));
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(Plan::fixed(300).alpha(1), ALPHA);
    }

    #[test]
    fn shuffled_rounds_put_every_mode_after_every_other() {
        let mut rng = Shuffle::new(300);
        let mut order: Vec<usize> = (0..6).collect();
        let mut follows = [[0u32; 6]; 6];
        for _ in 0..300 {
            rng.shuffle(&mut order);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..6).collect::<Vec<_>>(), "a permutation");
            for w in order.windows(2) {
                follows[w[1]][w[0]] += 1;
            }
        }
        for (b, row) in follows.iter().enumerate() {
            for (a, n) in row.iter().enumerate() {
                if a != b {
                    assert!(*n > 20, "mode {b} followed mode {a} in only {n} of 300 rounds");
                }
            }
        }
    }

    fn sample(values: &[f64]) -> Sample {
        let mut s = Sample::new("g", "n", "ms");
        s.values = values.to_vec();
        s
    }

    #[test]
    fn statistics_pair_values_of_the_same_round() {
        let s = [sample(&[10.0, 20.0, 30.0]), sample(&[8.0, 10.0, 12.0, 99.0]), sample(&[2.0, 4.0])];
        assert_eq!(Stat::difference(0, 1).per_round(&s), vec![2.0, 10.0, 18.0]);
        assert_eq!(Stat::Ratio(0, 1).per_round(&s), vec![1.25, 2.0, 2.5]);
        assert_eq!(Stat::median(1).per_round(&s), vec![8.0, 10.0, 12.0, 99.0]);
        let over = Stat::Over(Box::new(Stat::difference(0, 1)), 2);
        assert_eq!(over.per_round(&s), vec![2.0, 10.0]);
        assert_eq!(over.reads(), vec![0, 1, 2]);
        // Eleven rounds: the differences are 0..=10, their median 5; at α = 0.5 the sign-test
        // ranks are the 4th and 8th of 11 (P(X ≤ 3) = 232/2048 ≤ 0.25 < P(X ≤ 4)).
        let s = [
            sample(&(0..11).map(|i| f64::from(i) + 1.0).collect::<Vec<_>>()),
            sample(&[1.0; 11]),
            sample(&[1.0, 3.0, 2.0, 2.0, 1.0, 3.0, 2.0, 2.0, 1.0, 3.0, 2.0]),
        ];
        let d = Stat::difference(0, 1).estimate(&s, 0.5);
        assert_eq!((d.value, d.low, d.high, d.rounds), (5.0, 3.0, 7.0, 11));
        // Each half at α = 0.25 (ranks 4 and 8 again): [3, 7] ÷ the third sample's [2, 2].
        let q = Stat::Over(Box::new(Stat::difference(0, 1)), 2).estimate(&s, 0.5);
        assert_eq!((q.value, q.low, q.high, q.rounds), (2.5, 1.5, 3.5, 11));
    }

    /// Modes that always take the same time: no sampling error, so every check is decided at
    /// the first look, and no more rounds run than it.
    #[test]
    fn a_decided_comparison_stops_at_its_first_look() {
        let mut s = vec![Sample::new("g", "a", "ms"), Sample::new("g", "b", "ms")];
        let layout = vec![vec![0], vec![1]];
        let checks = [
            Check { stat: Stat::difference(1, 0), limit: Limit::Ms(2.0) },
            Check { stat: Stat::Ratio(1, 0), limit: Limit::Ratio(1.05) },
        ];
        let mut calls = Vec::new();
        let est = compare(Plan { first: 20, looks: 3 }, &mut s, &layout, &checks, |m, tag| {
            calls.push((m, tag.to_string()));
            Ok(vec![Duration::from_millis(if m == 0 { 10 } else { 11 })])
        })
        .unwrap_or_default();
        assert_eq!((s[0].values.len(), s[1].values.len()), (20, 20));
        assert_eq!(calls.len(), 42, "one warm-up each, then 20 rounds of both");
        assert_eq!(&calls[..2], &[(0, "warm".to_string()), (1, "warm".to_string())]);
        assert!(calls[2..].iter().all(|(_, t)| t != "warm"));
        assert_eq!(Limit::Ms(2.0).judge(&est[0]), Outcome::Holds);
        assert_eq!(Limit::Ratio(1.05).judge(&est[1]), Outcome::Fails);
        assert_eq!(est[0].rounds, 20);
        assert!((est[1].value - 1.1).abs() < 1e-9);
    }

    /// A check whose interval straddles its limit gets more rounds, of only the modes it reads,
    /// up to the cap; one decided at the first look keeps its figure from there.
    #[test]
    fn an_undecided_check_gets_more_rounds_of_its_own_modes() {
        let mut s: Vec<Sample> = (0..3).map(|i| Sample::new("g", format!("m{i}"), "ms")).collect();
        let layout = vec![vec![0], vec![1], vec![2]];
        let checks = [
            // Mode 1 − mode 0 alternates between −1 and +3 ms around a limit of 1 ms: never
            // decided.
            Check { stat: Stat::difference(1, 0), limit: Limit::Ms(1.0) },
            // Mode 2 ÷ mode 0 is 3: decided at once.
            Check { stat: Stat::Ratio(2, 0), limit: Limit::Ratio(2.0) },
        ];
        let mut runs = [0usize; 3];
        let est = compare(Plan { first: 10, looks: 3 }, &mut s, &layout, &checks, |m, tag| {
            let ms: u64 = match (m, tag.parse::<u64>().unwrap_or(0) % 2) {
                (0, _) => 10,
                (1, 0) => 9,
                (1, _) => 13,
                _ => 30,
            };
            runs[m] += 1;
            Ok(vec![Duration::from_millis(ms)])
        })
        .unwrap_or_default();
        assert_eq!(runs, [31, 31, 11], "modes 0 and 1 to the cap, mode 2 only to the first look");
        assert_eq!(Limit::Ms(1.0).judge(&est[0]), Outcome::Unclear);
        assert_eq!(est[0].rounds, 30);
        assert_eq!((Limit::Ratio(2.0).judge(&est[1]), est[1].rounds), (Outcome::Fails, 10));
    }
}
