//! Percentiles for the profiler rules: exact over a sliding window ([`RollingWindow`]) and
//! approximate over a whole run in bounded memory ([`Sketch`]). Both use smdebug-profiler's one
//! `percentile`, and a sketch summarizes into its one [`Summary`], the type the report's tables
//! read too.

use std::collections::{BTreeMap, VecDeque};

use smdebug_profiler::stats::{Summary, percentile};

/// The `q` quantile (0..=1) of sorted `values`, interpolated linearly between the two nearest
/// ranks (numpy's default); `None` for no values.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    (!sorted.is_empty()).then(|| percentile(sorted, q * 100.0))
}

/// The last `capacity` values of a series, kept sorted as well, so quantiles over the window
/// cost a binary search per new value instead of a sort.
#[derive(Clone, Debug)]
pub struct RollingWindow {
    capacity: usize,
    order: VecDeque<f64>,
    sorted: Vec<f64>,
}

impl RollingWindow {
    /// A window of at most `capacity` values (at least 1).
    pub fn new(capacity: usize) -> Self {
        RollingWindow {
            capacity: capacity.max(1),
            order: VecDeque::new(),
            sorted: Vec::new(),
        }
    }

    /// Adds a value, dropping the oldest when full. NaN is ignored.
    pub fn push(&mut self, value: f64) {
        if value.is_nan() {
            return;
        }
        if self.order.len() == self.capacity
            && let Some(old) = self.order.pop_front()
        {
            let at = self.sorted.partition_point(|v| v.total_cmp(&old).is_lt());
            self.sorted.remove(at);
        }
        self.order.push_back(value);
        let at = self.sorted.partition_point(|v| v.total_cmp(&value).is_lt());
        self.sorted.insert(at, value);
    }

    /// The `q` quantile of the values in the window.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        quantile(&self.sorted, q)
    }

    /// The mean of the values in the window.
    pub fn mean(&self) -> Option<f64> {
        (!self.order.is_empty()).then(|| self.order.iter().sum::<f64>() / self.order.len() as f64)
    }

    /// How many values the window holds.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the window holds no value.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Whether the window holds `capacity` values.
    pub fn is_full(&self) -> bool {
        self.order.len() == self.capacity
    }
}

/// Relative width of a [`Sketch`] bucket: quantiles are within about 1 % of the true value.
const GAMMA: f64 = 1.02;

/// A whole series' distribution in bounded memory: exact count, sum, min and max, and
/// quantiles within about 1 % relative error (logarithmic buckets, as in DDSketch). A series of
/// percentages needs at most a few hundred buckets however long the run.
#[derive(Clone, Debug, Default)]
pub struct Sketch {
    count: u64,
    sum: f64,
    sum_squares: f64,
    min: f64,
    max: f64,
    zeros: u64,
    positive: BTreeMap<i32, u64>,
    negative: BTreeMap<i32, u64>,
}

fn bucket(magnitude: f64) -> i32 {
    (magnitude.ln() / GAMMA.ln()).ceil() as i32
}

fn bucket_value(index: i32) -> f64 {
    2.0 * GAMMA.powi(index) / (GAMMA + 1.0)
}

impl Sketch {
    /// Adds a value; NaN and ±Inf are ignored.
    pub fn add(&mut self, value: f64) {
        if !value.is_finite() {
            return;
        }
        if self.count == 0 {
            self.min = value;
            self.max = value;
        } else {
            self.min = self.min.min(value);
            self.max = self.max.max(value);
        }
        self.count += 1;
        self.sum += value;
        self.sum_squares += value * value;
        if value.abs() < 1e-12 {
            self.zeros += 1;
        } else if value > 0.0 {
            *self.positive.entry(bucket(value)).or_default() += 1;
        } else {
            *self.negative.entry(bucket(-value)).or_default() += 1;
        }
    }

    /// How many values were added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The mean; `None` when empty.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }

    /// The smallest value; `None` when empty.
    pub fn min(&self) -> Option<f64> {
        (self.count > 0).then_some(self.min)
    }

    /// The largest value; `None` when empty.
    pub fn max(&self) -> Option<f64> {
        (self.count > 0).then_some(self.max)
    }

    /// The `q` quantile (0..=1), within about 1 %; `None` when empty. q = 0 and q = 1 give the
    /// exact min and max.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        if q <= 0.0 {
            return Some(self.min);
        }
        if q >= 1.0 {
            return Some(self.max);
        }
        let rank = (q * (self.count - 1) as f64).round() as u64;
        let mut seen = 0u64;
        // Ascending: the most negative values first.
        for (index, n) in self.negative.iter().rev() {
            seen += n;
            if seen > rank {
                return Some((-bucket_value(*index)).clamp(self.min, self.max));
            }
        }
        seen += self.zeros;
        if seen > rank {
            return Some(0.0f64.clamp(self.min, self.max));
        }
        for (index, n) in &self.positive {
            seen += n;
            if seen > rank {
                return Some(bucket_value(*index).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// The sketch's [`Summary`] (quantiles within about 1 %, the rest exact), rounded to 4
    /// decimals; `None` when empty.
    pub fn summary(&self) -> Option<Summary> {
        let mean = self.mean()?;
        let q = |p: f64| self.quantile(p).unwrap_or(mean);
        let variance = (self.sum_squares / self.count as f64 - mean * mean).max(0.0);
        Some(
            Summary {
                count: self.count,
                min: self.min,
                max: self.max,
                mean,
                std: variance.sqrt(),
                p5: q(0.05),
                p25: q(0.25),
                p50: q(0.50),
                p75: q(0.75),
                p95: q(0.95),
                p99: q(0.99),
            }
            .rounded(),
        )
    }
}

/// Rounds to 4 decimals, for reports.
pub(crate) fn round4(v: f64) -> f64 {
    (v * 1e4).round() / 1e4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_interpolates_like_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&v, 0.5), Some(2.5));
        assert_eq!(quantile(&v, 0.95), Some(3.8499999999999996));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn rolling_window_matches_a_fresh_sort_of_its_last_values() {
        let mut w = RollingWindow::new(7);
        let values: Vec<f64> = (0..50).map(|i| ((i * 37) % 23) as f64).collect();
        for (i, v) in values.iter().enumerate() {
            w.push(*v);
            let from = (i + 1).saturating_sub(7);
            let mut last: Vec<f64> = values[from..=i].to_vec();
            last.sort_by(f64::total_cmp);
            assert_eq!(w.quantile(0.95), quantile(&last, 0.95));
            assert_eq!(w.len(), last.len());
        }
    }

    #[test]
    fn sketch_quantiles_are_within_two_percent() {
        let mut s = Sketch::default();
        let mut all: Vec<f64> = (0..10_000).map(|i| (i as f64 * 0.731) % 100.0).collect();
        all.push(0.0);
        all.push(-5.0);
        for v in &all {
            s.add(*v);
        }
        all.sort_by(f64::total_cmp);
        for q in [0.05, 0.5, 0.95, 0.99] {
            let exact = quantile(&all, q).unwrap();
            let approx = s.quantile(q).unwrap();
            assert!(
                (approx - exact).abs() <= 0.02 * exact.abs() + 0.2,
                "q{q}: {approx} vs {exact}"
            );
        }
        assert_eq!(s.min(), Some(-5.0));
        assert_eq!(s.quantile(1.0), Some(all[all.len() - 1]));
        assert_eq!(s.count(), all.len() as u64);
    }
}
