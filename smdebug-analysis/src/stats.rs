//! The one percentile of the profiler rules, the debugging rules' selections and the report,
//! the one [`Summary`] of a set of values that the rules' details and the report's tables
//! share, and the one bounded-memory [`Sketch`] of a whole series that fills the same type
//! (the profiler rules' whole-run figures and the report's [`ProfileDigest`](crate::digest)).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Rounds to 4 decimals, for summaries written to JSON (ratios, percentages, utilizations).
pub fn round4(v: f64) -> f64 {
    (v * 1e4).round() / 1e4
}

/// Rounds seconds to the microsecond, the resolution of the timestamps durations come from,
/// for summaries written to JSON: 4 decimals would turn sub-millisecond steps into multiples of
/// 0.1 ms that no longer add up (a mean of 0.6 ms and a stddev of 0.6 ms beside a limit of
/// mean + 3 stddev written as 2.3 ms).
pub fn round_us(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1e6
}

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

    /// Every figure rounded to 4 decimals ([`round4`]).
    pub fn rounded(&self) -> Summary {
        self.rounded_with(round4)
    }

    /// Every figure, a duration in seconds taken from microsecond timestamps, rounded to the
    /// microsecond ([`round_us`]).
    pub fn rounded_us(&self) -> Summary {
        self.rounded_with(round_us)
    }

    fn rounded_with(&self, r: fn(f64) -> f64) -> Summary {
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

/// Relative width of a [`Sketch`] bucket.
const GAMMA: f64 = 1.02;

/// The bound of a [`Sketch`]'s quantiles: each is within this share of the value at its rank
/// (`(γ − 1) / (γ + 1)` for buckets `γ` = 1.02 wide, just under 1 %).
pub const SKETCH_RELATIVE_ERROR: f64 = (GAMMA - 1.0) / (GAMMA + 1.0);

/// Values this close to 0 are counted as 0 by a [`Sketch`].
const ZERO: f64 = 1e-12;

/// A whole series' distribution in bounded memory: exact count, sum, min, max, mean and
/// (population) standard deviation, and quantiles within [`SKETCH_RELATIVE_ERROR`] of the value
/// at their rank (logarithmic buckets, as in DDSketch). Values between 1 µs and an hour, or
/// between 0.01 and 100 %, need at most about a thousand buckets however long the run.
#[derive(Clone, Debug, Default, PartialEq)]
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
        if value.abs() < ZERO {
            self.zeros += 1;
        } else if value > 0.0 {
            *self.positive.entry(bucket(value)).or_default() += 1;
        } else {
            *self.negative.entry(bucket(-value)).or_default() += 1;
        }
    }

    /// Adds every value of `other`, as if they had been added here.
    pub fn merge(&mut self, other: &Sketch) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            self.min = other.min;
            self.max = other.max;
        } else {
            self.min = self.min.min(other.min);
            self.max = self.max.max(other.max);
        }
        self.count += other.count;
        self.sum += other.sum;
        self.sum_squares += other.sum_squares;
        self.zeros += other.zeros;
        for (i, n) in &other.positive {
            *self.positive.entry(*i).or_default() += n;
        }
        for (i, n) in &other.negative {
            *self.negative.entry(*i).or_default() += n;
        }
    }

    /// How many values were added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Their sum.
    pub fn sum(&self) -> f64 {
        self.sum
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

    /// The buckets in ascending order of value: each one's value (within
    /// [`SKETCH_RELATIVE_ERROR`] of every value in it, kept within min and max) and count.
    pub fn buckets(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        let (lo, hi) = (self.min, self.max);
        self.negative
            .iter()
            .rev()
            .map(|(i, n)| (-bucket_value(*i), *n))
            .chain((self.zeros > 0).then_some((0.0, self.zeros)))
            .chain(self.positive.iter().map(|(i, n)| (bucket_value(*i), *n)))
            .map(move |(v, n)| (v.clamp(lo, hi), n))
    }

    /// The `q` quantile (0..=1): within [`SKETCH_RELATIVE_ERROR`] of the value at rank
    /// `round(q · (count − 1))` of the sorted values; `None` when empty. q = 0 and q = 1 give
    /// the exact min and max.
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
        for (value, n) in self.buckets() {
            seen += n;
            if seen > rank {
                return Some(value);
            }
        }
        Some(self.max)
    }

    /// The sketch's [`Summary`]: count, min, max, mean and standard deviation exact, the
    /// percentiles as [`Sketch::quantile`]; `None` when empty.
    pub fn summary(&self) -> Option<Summary> {
        let mean = self.mean()?;
        let q = |p: f64| self.quantile(p).unwrap_or(mean);
        let variance = (self.sum_squares / self.count as f64 - mean * mean).max(0.0);
        Some(Summary {
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
        })
    }

    /// Counts in `bins` equal-width bins over `[lo, hi]` as [`histogram`] bins the values,
    /// each bucket's count put in the bin of the bucket's value: a value within
    /// [`SKETCH_RELATIVE_ERROR`] of a bin edge may be counted in the bin beside its own.
    pub fn histogram(&self, bins: usize, lo: f64, hi: f64) -> Vec<u64> {
        let bins = bins.max(1);
        let mut counts = vec![0u64; bins];
        let width = (hi - lo) / bins as f64;
        for (v, n) in self.buckets() {
            let index = if width > 0.0 {
                (((v - lo) / width).floor().max(0.0) as usize).min(bins - 1)
            } else {
                0
            };
            counts[index] += n;
        }
        counts
    }

    /// How many buckets the sketch holds (its size grows with this, not with the count).
    pub fn buckets_held(&self) -> usize {
        self.positive.len() + self.negative.len()
    }
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

    #[test]
    fn sketch_quantiles_are_within_the_stated_bound_of_the_value_at_their_rank() {
        let mut s = Sketch::default();
        let mut all: Vec<f64> = (0..10_000).map(|i| (i as f64 * 0.731) % 100.0).collect();
        all.push(0.0);
        all.push(-5.0);
        for v in &all {
            s.add(*v);
        }
        all.sort_by(f64::total_cmp);
        for q in [0.05, 0.25, 0.5, 0.75, 0.95, 0.99] {
            let at_rank = all[(q * (all.len() - 1) as f64).round() as usize];
            let approx = s.quantile(q).unwrap();
            assert!(
                (approx - at_rank).abs() <= SKETCH_RELATIVE_ERROR * at_rank.abs() + 1e-9,
                "q{q}: {approx} vs {at_rank}"
            );
        }
        assert_eq!(s.min(), Some(-5.0));
        assert_eq!(s.quantile(1.0), Some(all[all.len() - 1]));
        assert_eq!(s.count(), all.len() as u64);
        let exact = Summary::of(all.iter().copied()).unwrap();
        let sketched = s.summary().unwrap();
        assert_eq!(
            (sketched.count, sketched.min, sketched.max),
            (exact.count, exact.min, exact.max)
        );
        assert!((sketched.mean - exact.mean).abs() < 1e-9);
        assert!((sketched.std - exact.std).abs() < 1e-6);
        // Merging two halves is adding them all.
        let (mut a, mut b) = (Sketch::default(), Sketch::default());
        for (i, v) in all.iter().enumerate() {
            if i % 2 == 0 { a.add(*v) } else { b.add(*v) }
        }
        a.merge(&b);
        assert_eq!((a.count(), a.min(), a.max()), (s.count(), s.min(), s.max()));
        assert_eq!(a.quantile(0.5), s.quantile(0.5));
        let h = s.histogram(10, 0.0, 100.0);
        assert_eq!(h.iter().sum::<u64>(), s.count());
        let exact_h = histogram(all.iter().copied(), 10, 0.0, 100.0);
        // Only values within the bound of a bin edge may change bins.
        let near_edge = all
            .iter()
            .filter(|v| {
                (1..10).any(|e| (**v - e as f64 * 10.0).abs() <= SKETCH_RELATIVE_ERROR * v.abs())
            })
            .count() as u64;
        let moved: u64 = h.iter().zip(&exact_h).map(|(x, y)| x.abs_diff(*y)).sum();
        assert!(moved <= 2 * near_edge, "{h:?} vs {exact_h:?}");
    }
}
