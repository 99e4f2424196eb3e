//! The one percentile of the profiler rules, the debugging rules' selections and the report,
//! and the one [`Summary`] of a set of values that the rules' details and the report's tables
//! share (the rules' bounded-memory sketch fills the same type).

use serde::{Deserialize, Serialize};

/// The `p`-th percentile (0–100, clamped) of sorted values, interpolating linearly between the
/// two nearest ranks (NumPy's default `linear` method): rank `p/100 · (n−1)`. NaN for no values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return f64::NAN;
    };
    let rank = (p.clamp(0.0, 100.0) / 100.0) * last as f64;
    let low = rank.floor() as usize;
    let high = rank.ceil() as usize;
    sorted[low] + (sorted[high] - sorted[low]) * (rank - low as f64)
}

/// Count, extremes, mean, standard deviation (population) and percentiles of a set of values:
/// exact from [`Summary::of`], within about 1 % from the profiler rules' sketch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// How many finite values.
    pub count: u64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
    /// The mean.
    pub mean: f64,
    /// The population standard deviation.
    #[serde(default)]
    pub std: f64,
    /// The 5th percentile.
    pub p5: f64,
    /// The 25th percentile.
    pub p25: f64,
    /// The median.
    pub p50: f64,
    /// The 75th percentile.
    pub p75: f64,
    /// The 95th percentile.
    pub p95: f64,
    /// The 99th percentile.
    pub p99: f64,
}

impl Summary {
    /// The exact summary of the finite values among `values`; `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Summary> {
        let mut sorted: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len() as f64;
        let mean = sorted.iter().sum::<f64>() / n;
        let var = sorted.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        Some(Summary {
            count: sorted.len() as u64,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            mean,
            std: var.sqrt(),
            p5: percentile(&sorted, 5.0),
            p25: percentile(&sorted, 25.0),
            p50: percentile(&sorted, 50.0),
            p75: percentile(&sorted, 75.0),
            p95: percentile(&sorted, 95.0),
            p99: percentile(&sorted, 99.0),
        })
    }

    /// Every figure rounded to 4 decimals (for summaries written to JSON).
    pub fn rounded(&self) -> Summary {
        let r = |v: f64| (v * 1e4).round() / 1e4;
        Summary {
            count: self.count,
            min: r(self.min),
            max: r(self.max),
            mean: r(self.mean),
            std: r(self.std),
            p5: r(self.p5),
            p25: r(self.p25),
            p50: r(self.p50),
            p75: r(self.p75),
            p95: r(self.p95),
            p99: r(self.p99),
        }
    }

    /// `bins` equal-width bins over the values' range (a range of one value is widened by 0.5
    /// each way): its low and high ends and the `bins + 1` edges.
    pub fn bin_edges(&self, bins: usize) -> (f64, f64, Vec<f64>) {
        let (lo, hi) = if self.max > self.min {
            (self.min, self.max)
        } else {
            (self.min - 0.5, self.max + 0.5)
        };
        let edges = (0..=bins)
            .map(|i| lo + (hi - lo) * i as f64 / bins as f64)
            .collect();
        (lo, hi, edges)
    }
}

/// Counts of finite `values` in `bins` equal-width bins over `[lo, hi]`; values outside the
/// range go to the first or last bin.
pub fn histogram(values: impl IntoIterator<Item = f64>, bins: usize, lo: f64, hi: f64) -> Vec<u64> {
    let bins = bins.max(1);
    let mut counts = vec![0u64; bins];
    let width = (hi - lo) / bins as f64;
    for v in values.into_iter().filter(|v| v.is_finite()) {
        let index = if width > 0.0 {
            (((v - lo) / width).floor().max(0.0) as usize).min(bins - 1)
        } else {
            0
        };
        counts[index] += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_ignores_non_finite_values() {
        let s = Summary::of([2.0, f64::NAN, 4.0, f64::INFINITY]).unwrap();
        assert_eq!(
            (s.count, s.min, s.max, s.mean, s.std),
            (2, 2.0, 4.0, 3.0, 1.0)
        );
        assert!(Summary::of([f64::NAN]).is_none());
        let (lo, hi, edges) = s.bin_edges(4);
        assert_eq!((lo, hi, edges), (2.0, 4.0, vec![2.0, 2.5, 3.0, 3.5, 4.0]));
        let one = Summary::of([7.0]).unwrap().bin_edges(2);
        assert_eq!(one, (6.5, 7.5, vec![6.5, 7.0, 7.5]));
    }

    #[test]
    fn histogram_clamps_to_the_end_bins() {
        assert_eq!(
            histogram([-5.0, 0.0, 49.9, 50.0, 100.0, 250.0], 2, 0.0, 100.0),
            vec![3, 3]
        );
        assert_eq!(histogram([1.0, 1.0], 4, 1.0, 1.0), vec![2, 0, 0, 0]);
    }

    #[test]
    fn percentiles_match_numpy_linear() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        // numpy.percentile(range(1, 11), [50, 95, 99]) == [5.5, 9.55, 9.91]
        assert!((percentile(&v, 50.0) - 5.5).abs() < 1e-12);
        assert!((percentile(&v, 95.0) - 9.55).abs() < 1e-12);
        assert!((percentile(&v, 99.0) - 9.91).abs() < 1e-12);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 100.0), 10.0);
        assert_eq!(percentile(&v, 150.0), 10.0);
        assert_eq!(percentile(&[7.0], 30.0), 7.0);
        assert!(percentile(&[], 50.0).is_nan());
    }
}
