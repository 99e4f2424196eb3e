//! Percentiles for the profiler rules: exact over a sliding window ([`RollingWindow`]) and
//! approximate over a whole run in bounded memory (smdebug-profiler's one [`Sketch`], which the
//! report's digest uses too). Both use smdebug-profiler's one `percentile`.

use std::collections::VecDeque;

pub use smdebug_analysis::stats::Sketch;
use smdebug_analysis::stats::percentile;

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
}
