//! Budgets: a figure, its limit, and whether it holds — the limit written once, for the words
//! of the report and for the check alike.
//!
//! A measured figure is an [`Estimate`]: a median and the interval that holds the true median
//! at the run's confidence ([`crate::stats`]). A budget *holds* when the whole interval is within
//! its limit and *fails* when the whole interval is beyond it; when the interval straddles the
//! limit the run cannot tell, and says so (*unclear*) instead of reading a coin's fall as a
//! verdict. Two runs of the same code can then only disagree by one of them being unclear, or
//! — with a probability of at most [`crate::stats::ALPHA`] — by one interval missing the truth.

use crate::stats::Estimate;
use std::fmt;

/// Whether a budget holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The figure's whole interval is within the limit.
    Holds,
    /// The figure's whole interval is beyond the limit.
    Fails,
    /// The interval straddles the limit: this run, at its number of rounds, cannot tell.
    Unclear,
}

impl Outcome {
    /// Both must hold for the two to hold; one failing is a failure.
    fn and(self, other: Outcome) -> Outcome {
        match (self, other) {
            (Outcome::Fails, _) | (_, Outcome::Fails) => Outcome::Fails,
            (Outcome::Holds, Outcome::Holds) => Outcome::Holds,
            _ => Outcome::Unclear,
        }
    }

    /// As the Markdown tables write it.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Holds => "yes",
            Outcome::Fails => "**NO**",
            Outcome::Unclear => "unclear",
        }
    }

    /// As `budgets.csv` writes it.
    pub fn csv(self) -> &'static str {
        match self {
            Outcome::Holds => "holds",
            Outcome::Fails => "fails",
            Outcome::Unclear => "unclear",
        }
    }
}

/// One budget and whether it holds.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// What is budgeted.
    pub what: String,
    /// What was measured, in words.
    pub measured: String,
    /// The interval of each figure judged and the rounds it is taken from, in words; empty for
    /// figures read exactly.
    pub interval: String,
    /// The limit, in words.
    pub budget: String,
    /// Whether the measurement is within the limit.
    pub outcome: Outcome,
}

/// A budget's limit, in the unit its figure is read in.
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    /// Milliseconds.
    Ms(f64),
    /// Megabytes.
    Mb(f64),
    /// A ratio of two figures of the same kind.
    Ratio(f64),
    /// A multiple of a reference figure, named (`0.5× bridge`).
    Times(f64, &'static str),
}

impl Limit {
    fn value(self) -> f64 {
        match self {
            Limit::Ms(v) | Limit::Mb(v) | Limit::Ratio(v) | Limit::Times(v, _) => v,
        }
    }

    /// Whether `e` is within this limit (`≤`): decided only when its whole interval is on one
    /// side.
    pub fn judge(self, e: &Estimate) -> Outcome {
        let limit = self.value();
        if e.high <= limit {
            Outcome::Holds
        } else if e.low > limit {
            Outcome::Fails
        } else {
            Outcome::Unclear
        }
    }

    /// `value` in this limit's unit, as the report shows a bare figure.
    fn show(self, value: f64) -> String {
        match self {
            Limit::Ms(_) => signed_ms(value),
            Limit::Mb(_) => format!("{value:.1} MB"),
            Limit::Ratio(_) | Limit::Times(..) => format!("{value:.3}"),
        }
    }

    /// `e`'s interval in this limit's unit (`1.012 – 1.031`); empty for an exact figure.
    fn show_interval(self, e: &Estimate) -> String {
        let end = |v: f64| if v.is_finite() { self.show(v) } else { "∞".into() };
        match e.is_exact() {
            true => String::new(),
            false if e.low.is_finite() || e.high.is_finite() => format!("{} – {}", end(e.low), end(e.high)),
            false => "unbounded (too few rounds)".into(),
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Ms(v) => write!(f, "{v} ms"),
            Limit::Mb(v) => write!(f, "{v} MB"),
            Limit::Ratio(v) => write!(f, "{v}"),
            Limit::Times(v, of) => write!(f, "{v}× {of}"),
        }
    }
}

impl Verdict {
    /// The budget `figure ≤ limit`, measured as the bare figure (see [`Verdict::measured`]). An
    /// `f64` is a figure read exactly.
    pub fn at_most(what: impl Into<String>, figure: impl Into<Estimate>, limit: Limit) -> Verdict {
        let e = figure.into();
        Verdict {
            what: what.into(),
            measured: limit.show(e.value),
            interval: with_rounds(limit.show_interval(&e), &e),
            budget: format!("≤ {limit}"),
            outcome: limit.judge(&e),
        }
    }

    /// A second limit the figure must keep as well (`≤ 1 ms and ≤ 0.5× bridge`).
    pub fn and_at_most(mut self, figure: impl Into<Estimate>, limit: Limit) -> Verdict {
        let e = figure.into();
        self.budget = format!("{} and ≤ {limit}", self.budget);
        self.outcome = self.outcome.and(limit.judge(&e));
        let shown = limit.show_interval(&e);
        if !shown.is_empty() {
            // One rounds count for the lot: the figures of one verdict come from the same rounds.
            let first = self.interval.rsplit_once(" (").map_or(self.interval.as_str(), |(i, _)| i);
            self.interval = with_rounds(if first.is_empty() { shown } else { format!("{first}; {shown}") }, &e);
        }
        self
    }

    /// A budget that is a yes or a no (nothing leaked, every pod up).
    pub fn plain(
        what: impl Into<String>,
        measured: impl Into<String>,
        budget: impl Into<String>,
        holds: bool,
    ) -> Verdict {
        Verdict {
            what: what.into(),
            measured: measured.into(),
            interval: String::new(),
            budget: budget.into(),
            outcome: if holds { Outcome::Holds } else { Outcome::Fails },
        }
    }

    /// Whether the budget was shown to hold.
    pub fn holds(&self) -> bool {
        self.outcome == Outcome::Holds
    }

    /// The measurement in other words than the bare figure (medians beside a paired ratio, …).
    pub fn measured(mut self, words: impl Into<String>) -> Verdict {
        self.measured = words.into();
        self
    }

    /// Where the limit comes from, after it (`≤ 2.5 ms (1 ms + 0.5 ms per interface)`).
    pub fn because(mut self, why: impl fmt::Display) -> Verdict {
        self.budget = format!("{} ({why})", self.budget);
        self
    }
}

/// An interval in words with the rounds it comes from.
fn with_rounds(interval: String, e: &Estimate) -> String {
    if interval.is_empty() {
        interval
    } else {
        format!("{interval} ({} rounds)", e.rounds)
    }
}

/// A duration in milliseconds as the report writes one: µs below a millisecond.
pub fn ms(v: f64) -> String {
    if v < 1.0 {
        format!("{:.0} µs", v * 1000.0)
    } else {
        format!("{v:.2} ms")
    }
}

/// A duration in milliseconds that may be negative (a paired difference).
pub fn signed_ms(v: f64) -> String {
    if v < 0.0 {
        format!("−{}", ms(-v))
    } else {
        ms(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &Verdict) -> (&str, &str, &str, Outcome) {
        (v.budget.as_str(), v.measured.as_str(), v.interval.as_str(), v.outcome)
    }

    #[test]
    fn a_limit_is_written_once_for_the_words_and_the_check() {
        let v = Verdict::at_most("x", 1.02, Limit::Ratio(1.03));
        assert_eq!(words(&v), ("≤ 1.03", "1.020", "", Outcome::Holds));
        let v = Verdict::at_most("x", 1.6, Limit::Ms(1.5));
        assert_eq!(words(&v), ("≤ 1.5 ms", "1.60 ms", "", Outcome::Fails));
        let v = Verdict::at_most("x", 0.4, Limit::Ms(1.0)).and_at_most(0.6, Limit::Times(0.5, "bridge"));
        assert_eq!(words(&v), ("≤ 1 ms and ≤ 0.5× bridge", "400 µs", "", Outcome::Fails));
        let v = Verdict::at_most("x", 7.94, Limit::Mb(8.0)).because("a plugin's share of a node");
        assert_eq!(words(&v), ("≤ 8 MB (a plugin's share of a node)", "7.9 MB", "", Outcome::Holds));
        assert_eq!(Verdict::at_most("x", 0.5, Limit::Ms(0.7)).budget, "≤ 0.7 ms");
        assert_eq!(signed_ms(-0.25), "−250 µs");
        assert_eq!(Verdict::at_most("x", f64::INFINITY, Limit::Mb(1.0)).outcome, Outcome::Fails);
    }

    #[test]
    fn a_budget_is_decided_only_by_its_whole_interval() {
        let e = |low, value, high| Estimate { value, low, high, rounds: 400 };
        let within = Verdict::at_most("x", e(1.004, 1.012, 1.029), Limit::Ratio(1.03));
        assert_eq!(words(&within), ("≤ 1.03", "1.012", "1.004 – 1.029 (400 rounds)", Outcome::Holds));
        // The same median, a wider interval: the run cannot tell.
        let straddles = Verdict::at_most("x", e(0.99, 1.012, 1.04), Limit::Ratio(1.03));
        assert_eq!(straddles.outcome, Outcome::Unclear);
        assert!(!straddles.holds());
        let beyond = Verdict::at_most("x", e(1.031, 1.05, 1.07), Limit::Ratio(1.03));
        assert_eq!(beyond.outcome, Outcome::Fails);
        // The low end exactly at the limit is not beyond it.
        assert_eq!(Limit::Ratio(1.03).judge(&e(1.03, 1.05, 1.07)), Outcome::Unclear);
        let v = Verdict::at_most("x", e(-0.5, 0.2, 0.9), Limit::Ms(1.0));
        assert_eq!(v.interval, "−500 µs – 900 µs (400 rounds)");
        let none = Estimate { value: 2.0, low: f64::NEG_INFINITY, high: f64::INFINITY, rounds: 3 };
        let v = Verdict::at_most("x", none, Limit::Ms(1.0));
        assert_eq!((v.interval.as_str(), v.outcome), ("unbounded (too few rounds) (3 rounds)", Outcome::Unclear));
    }

    #[test]
    fn several_limits_combine_their_outcomes_and_intervals() {
        let e = |low, value, high| Estimate { value, low, high, rounds: 300 };
        let v = Verdict::at_most("x", e(0.25, 0.26, 0.27), Limit::Ms(1.0))
            .and_at_most(e(1.4, 1.5, 1.6), Limit::Times(1.8, "exec floor"));
        assert_eq!(v.outcome, Outcome::Holds);
        assert_eq!(v.interval, "250 µs – 270 µs; 1.400 – 1.600 (300 rounds)");
        let unclear = v.clone().and_at_most(e(0.4, 0.45, 0.55), Limit::Times(0.5, "bridge"));
        assert_eq!(unclear.outcome, Outcome::Unclear);
        let fails = unclear.and_at_most(e(2.0, 2.1, 2.2), Limit::Ratio(1.9));
        assert_eq!(fails.outcome, Outcome::Fails);
        assert_eq!(Verdict::plain("w", "m", "nothing left", false).outcome, Outcome::Fails);
    }
}
