//! Medians and spreads of repeated measurements.

use std::time::Duration;

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
        self.values.push(d.as_secs_f64() * 1000.0);
    }

    /// The `q` quantile (0.0 … 1.0), linearly interpolated; 0 for an empty sample.
    pub fn quantile(&self, q: f64) -> f64 {
        let mut v = self.values.clone();
        v.sort_by(f64::total_cmp);
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
}
