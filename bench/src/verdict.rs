//! Budgets: a figure, its limit, and whether it holds — the limit written once, for the words
//! of the report and for the check alike.

use std::fmt;

/// One budget and whether it holds.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// What is budgeted.
    pub what: String,
    /// What was measured, in words.
    pub measured: String,
    /// The limit, in words.
    pub budget: String,
    /// Whether the measurement is within the limit.
    pub holds: bool,
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

    /// `value` in this limit's unit, as the report shows a bare figure.
    fn show(self, value: f64) -> String {
        match self {
            Limit::Ms(_) => ms(value),
            Limit::Mb(_) => format!("{value:.1} MB"),
            Limit::Ratio(_) | Limit::Times(..) => format!("{value:.3}"),
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
    /// The budget `value ≤ limit`, measured as the bare figure (see [`Verdict::measured`]).
    pub fn at_most(what: impl Into<String>, value: f64, limit: Limit) -> Verdict {
        Verdict {
            what: what.into(),
            measured: limit.show(value),
            budget: format!("≤ {limit}"),
            holds: value <= limit.value(),
        }
    }

    /// A second limit the figure must keep as well (`≤ 1 ms and ≤ 0.5× bridge`).
    pub fn and_at_most(mut self, value: f64, limit: Limit) -> Verdict {
        self.budget = format!("{} and ≤ {limit}", self.budget);
        self.holds = self.holds && value <= limit.value();
        self
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

    #[test]
    fn a_limit_is_written_once_for_the_words_and_the_check() {
        let v = Verdict::at_most("x", 1.02, Limit::Ratio(1.03));
        assert_eq!((v.budget.as_str(), v.measured.as_str(), v.holds), ("≤ 1.03", "1.020", true));
        let v = Verdict::at_most("x", 1.6, Limit::Ms(1.5));
        assert_eq!((v.budget.as_str(), v.measured.as_str(), v.holds), ("≤ 1.5 ms", "1.60 ms", false));
        let v = Verdict::at_most("x", 0.4, Limit::Ms(1.0)).and_at_most(0.6, Limit::Times(0.5, "bridge"));
        assert_eq!((v.budget.as_str(), v.measured.as_str(), v.holds), ("≤ 1 ms and ≤ 0.5× bridge", "400 µs", false));
        let v = Verdict::at_most("x", 7.94, Limit::Mb(8.0)).because("a plugin's share of a node");
        assert_eq!(
            (v.budget.as_str(), v.measured.as_str(), v.holds),
            ("≤ 8 MB (a plugin's share of a node)", "7.9 MB", true)
        );
        assert_eq!(signed_ms(-0.25), "−250 µs");
    }
}
