//! Medians and spreads of repeated measurements, and the intervals that budgets are judged on.
//!
//! A budget's figure is the median of per-round values (a paired ratio or difference of two
//! things measured in the same round, or one thing's time). A median of a few hundred noisy
//! rounds moves from run to run by as much as some budgets' margins, so a verdict read off the
//! median alone flipped between runs of the same code. Each figure therefore comes with a
//! distribution-free confidence interval for the median — the sign-test interval, two order
//! statistics of the rounds chosen from the binomial distribution (as in Conover, *Practical
//! Nonparametric Statistics*, §3.2): it assumes only that rounds are independent, which the
//! pairing and the shuffled order make them (the lag-1 autocorrelation of paired ratios measured
//! 0.02–0.06), and no shape of the distribution (these have long right tails: RCU grace periods).
//! A verdict is then decided only when the whole interval is on one side of the limit
//! ([`crate::verdict`]).

use std::time::Duration;

/// The error rate a budget's verdict is read at: when the true value is on one side of the
/// limit, a run says it is on the other with a probability of at most `ALPHA / 2`, whatever
/// number of looks a comparison takes (the looks share it: `cases::rounds::Plan::alpha`).
pub const ALPHA: f64 = 0.05;

/// Repeated measurements of one thing, in milliseconds (or another unit for sizes).
#[derive(Debug, Clone)]
pub struct Sample {
    /// Which comparison it belongs to (a benchmark of the suite).
    pub group: &'static str,
    /// What was measured.
    pub name: String,
    /// `ms`, `MB`, …
    pub unit: &'static str,
    /// The values.
    pub values: Vec<f64>,
}

impl Sample {
    /// An empty sample.
    pub fn new(group: &'static str, name: impl Into<String>, unit: &'static str) -> Sample {
        Sample { group, name: name.into(), unit, values: Vec::new() }
    }

    /// Adds a duration in milliseconds.
    pub fn push(&mut self, d: Duration) {
        self.values.push(ms(d));
    }

    /// The `q` quantile (0.0 … 1.0), linearly interpolated; 0 for an empty sample.
    pub fn quantile(&self, q: f64) -> f64 {
        quantile(&sorted(&self.values), q)
    }

    /// The median.
    pub fn median(&self) -> f64 {
        self.quantile(0.5)
    }

    /// The 10th percentile (the spread's low end).
    pub fn p10(&self) -> f64 {
        self.quantile(0.1)
    }

    /// The 90th percentile (the spread's high end).
    pub fn p90(&self) -> f64 {
        self.quantile(0.9)
    }
}

/// A duration in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// The `q` quantile of sorted values, linearly interpolated; 0 for none.
fn quantile(v: &[f64], q: f64) -> f64 {
    match v.len() {
        0 => 0.0,
        1 => v[0],
        n => {
            let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
        }
    }
}

/// The rank `k` (1-based) of the sign-test interval `[x₍ₖ₎, x₍ₙ₋ₖ₊₁₎]` for the median of `n`
/// independent values at confidence at least `1 − alpha`: the largest `k` with
/// P(Binomial(n, ½) ≤ k − 1) ≤ alpha / 2. `None` when even `[min, max]` falls short (too few
/// values: 2⁻ⁿ⁺¹ > alpha).
pub fn sign_test_rank(n: usize, alpha: f64) -> Option<usize> {
    let half = alpha / 2.0;
    let ln2n = n as f64 * std::f64::consts::LN_2;
    // ln C(n, j), built up term by term; the cumulative probability of X ≤ j − 1.
    let (mut ln_choose, mut below) = (0.0f64, 0.0f64);
    for j in 0..=n {
        let p = (ln_choose - ln2n).exp();
        if below + p > half {
            return (j > 0).then_some(j);
        }
        below += p;
        ln_choose += ((n - j) as f64).ln() - ((j + 1) as f64).ln();
    }
    None
}

/// A figure with the interval that holds its true value at the run's confidence.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// The point figure (a median, or a ratio of medians).
    pub value: f64,
    /// The interval's low end.
    pub low: f64,
    /// The interval's high end.
    pub high: f64,
    /// How many rounds it is taken from; 0 for a figure read exactly (a size, a count).
    pub rounds: usize,
}

impl Estimate {
    /// A figure without sampling error (a file's size, a count of leftovers).
    pub fn exact(value: f64) -> Estimate {
        Estimate { value, low: value, high: value, rounds: 0 }
    }

    /// Whether the figure was read exactly (no interval to show).
    pub fn is_exact(&self) -> bool {
        self.rounds == 0
    }

    /// The median of `values` (independent rounds) with its sign-test interval at confidence
    /// `1 − alpha`; unbounded when there are too few values for that confidence.
    pub fn median(values: &[f64], alpha: f64) -> Estimate {
        let v = sorted(values);
        let n = v.len();
        let (low, high) = match sign_test_rank(n, alpha) {
            Some(k) => (v[k - 1], v[n - k]),
            None => (f64::NEG_INFINITY, f64::INFINITY),
        };
        Estimate { value: quantile(&v, 0.5), low, high, rounds: n }
    }

    /// `self ÷ den`, its interval the extremes of the quotients of the two intervals' ends (with
    /// each interval at half the error rate, the quotient's holds at the whole). Unbounded when
    /// `den`'s interval reaches zero.
    pub fn over(self, den: Estimate) -> Estimate {
        let value = self.value / den.value;
        let rounds = self.rounds.max(den.rounds);
        if den.low <= 0.0 {
            return Estimate { value, low: f64::NEG_INFINITY, high: f64::INFINITY, rounds };
        }
        let ends = [self.low / den.low, self.low / den.high, self.high / den.low, self.high / den.high];
        let low = ends.iter().copied().fold(f64::INFINITY, f64::min);
        let high = ends.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Estimate { value, low, high, rounds }
    }
}

impl From<f64> for Estimate {
    fn from(value: f64) -> Estimate {
        Estimate::exact(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles() {
        let mut s = Sample::new("g", "n", "ms");
        assert_eq!(s.median(), 0.0);
        s.values = vec![5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(s.median(), 3.0);
        assert_eq!(s.quantile(0.0), 1.0);
        assert_eq!(s.quantile(1.0), 5.0);
        assert!((s.p10() - 1.4).abs() < 1e-9);
        s.values = vec![1.0, 2.0];
        assert_eq!(s.median(), 1.5);
    }

    /// The ranks of the published tables of the sign-test interval (e.g. Conover's Table A3;
    /// n = 100 at 95 % is the 40th and 61st values).
    #[test]
    fn sign_test_ranks_match_the_binomial_tables() {
        // n = 10: P(X ≤ 1) = 11/1024 ≤ 0.025 < P(X ≤ 2) = 56/1024, so [x₂, x₉] (97.9 %).
        assert_eq!(sign_test_rank(10, 0.05), Some(2));
        // At 99 %: P(X ≤ 0) = 1/1024 ≤ 0.005 < P(X ≤ 1), so [x₁, x₁₀].
        assert_eq!(sign_test_rank(10, 0.01), Some(1));
        assert_eq!(sign_test_rank(100, 0.05), Some(40));
        assert_eq!(sign_test_rank(100, 0.01), Some(37));
        // Five values: [min, max] covers 1 − 2/32 = 93.75 %, short of 95 %.
        assert_eq!(sign_test_rank(5, 0.05), None);
        assert_eq!(sign_test_rank(6, 0.05), Some(1));
        assert_eq!(sign_test_rank(0, 0.05), None);
        // Large n: about n/2 − 1.96·√n/2 (normal approximation), and no underflow trouble.
        let k = sign_test_rank(3000, 0.05).unwrap_or(0);
        assert!((1445..=1448).contains(&k), "{k}");
    }

    #[test]
    fn a_median_comes_with_its_order_statistics() {
        // 1..=10 shuffled: the median 5.5, the 95 % interval [x₂, x₉] = [2, 9].
        let v = [7.0, 2.0, 9.0, 4.0, 1.0, 10.0, 3.0, 8.0, 6.0, 5.0];
        let e = Estimate::median(&v, 0.05);
        assert_eq!((e.value, e.low, e.high, e.rounds), (5.5, 2.0, 9.0, 10));
        // Tighter error rate, wider interval.
        let e = Estimate::median(&v, 0.01);
        assert_eq!((e.low, e.high), (1.0, 10.0));
        // Too few values for the confidence: unbounded, never decided.
        let e = Estimate::median(&[1.0, 2.0, 3.0], 0.05);
        assert_eq!((e.value, e.low, e.high), (2.0, f64::NEG_INFINITY, f64::INFINITY));
    }

    #[test]
    fn a_quotient_takes_the_extreme_ends() {
        let num = Estimate { value: 20.0, low: 18.0, high: 24.0, rounds: 300 };
        let den = Estimate { value: 10.0, low: 8.0, high: 12.0, rounds: 300 };
        let q = num.over(den);
        assert_eq!((q.value, q.low, q.high, q.rounds), (2.0, 1.5, 3.0, 300));
        // A numerator that may be negative divides by the denominator's low end at its low end.
        let q = Estimate { value: 1.0, low: -4.0, high: 6.0, rounds: 10 }.over(den);
        assert_eq!((q.low, q.high), (-0.5, 0.75));
        let q = num.over(Estimate { value: 1.0, low: 0.0, high: 2.0, rounds: 10 });
        assert_eq!((q.value, q.low, q.high), (20.0, f64::NEG_INFINITY, f64::INFINITY));
        let x = Estimate::from(0.987);
        assert!(x.is_exact() && x.low == x.high);
    }
}
