//! The figures the report shows: percentiles, summaries, histograms, downsampling and the
//! Jensen–Shannon distance. Non-finite values are left out of every figure.

use smdebug_profiler::stats::percentile;

/// Count, extremes, mean, standard deviation (population) and percentiles of a set of values.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Summary {
    pub count: usize,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub std: f64,
    pub p5: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p95: f64,
    pub p99: f64,
}

impl Summary {
    /// The summary of the finite values among `values`; `None` when there are none.
    pub(crate) fn of(values: impl IntoIterator<Item = f64>) -> Option<Summary> {
        let mut sorted: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        Some(Self::of_sorted(&sorted))
    }

    /// `bins` equal-width bins over the values' range (a range of one value is widened by 0.5
    /// each way): its low and high ends and the `bins + 1` edges.
    pub(crate) fn bin_edges(&self, bins: usize) -> (f64, f64, Vec<f64>) {
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

    /// The summary of finite values already sorted ascending (not empty).
    fn of_sorted(sorted: &[f64]) -> Summary {
        let n = sorted.len() as f64;
        let mean = sorted.iter().sum::<f64>() / n;
        let var = sorted.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        Summary {
            count: sorted.len(),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            mean,
            std: var.sqrt(),
            p5: percentile(sorted, 5.0),
            p25: percentile(sorted, 25.0),
            p50: percentile(sorted, 50.0),
            p75: percentile(sorted, 75.0),
            p95: percentile(sorted, 95.0),
            p99: percentile(sorted, 99.0),
        }
    }
}

/// Counts of finite `values` in `bins` equal-width bins over `[lo, hi]`; values outside the
/// range go to the first or last bin.
pub(crate) fn histogram(
    values: impl IntoIterator<Item = f64>,
    bins: usize,
    lo: f64,
    hi: f64,
) -> Vec<u64> {
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

/// One time slice of a reduced series: its middle, lowest, mean and highest value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Bucket {
    pub x: f64,
    pub lo: f64,
    pub mean: f64,
    pub hi: f64,
}

/// A time-ordered series reduced to at most `buckets` slices of equal time, each with its
/// lowest, mean and highest value, so a chart can draw the mean as a line and the range as a
/// band (spikes and dips stay visible in the band). A series with at most `buckets` points is
/// kept as it is (one point per slice). Non-finite values are dropped.
pub(crate) fn buckets(points: &[(f64, f64)], buckets: usize) -> Vec<Bucket> {
    let finite: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    let single = |&(x, y): &(f64, f64)| Bucket {
        x,
        lo: y,
        mean: y,
        hi: y,
    };
    if finite.len() <= buckets || buckets == 0 {
        return finite.iter().map(single).collect();
    }
    let (first, last) = (finite[0].0, finite[finite.len() - 1].0);
    let width = (last - first) / buckets as f64;
    if width <= 0.0 {
        return finite.iter().map(single).collect();
    }
    let index = |x: f64| (((x - first) / width).floor() as usize).min(buckets - 1);
    let mut out = Vec::with_capacity(buckets);
    let mut start = 0;
    while start < finite.len() {
        let bucket = index(finite[start].0);
        let mut end = start + 1;
        while end < finite.len() && index(finite[end].0) == bucket {
            end += 1;
        }
        let slice = &finite[start..end];
        let n = slice.len() as f64;
        out.push(Bucket {
            x: slice.iter().map(|p| p.0).sum::<f64>() / n,
            lo: slice.iter().map(|p| p.1).fold(f64::INFINITY, f64::min),
            mean: slice.iter().map(|p| p.1).sum::<f64>() / n,
            hi: slice.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max),
        });
        start = end;
    }
    out
}

/// The Jensen–Shannon distance (base 2, so in `[0, 1]`) between two histograms given as counts;
/// `None` when either is empty.
pub(crate) fn js_distance(p: &[u64], q: &[u64]) -> Option<f64> {
    let (sp, sq) = (p.iter().sum::<u64>() as f64, q.iter().sum::<u64>() as f64);
    if sp == 0.0 || sq == 0.0 || p.len() != q.len() {
        return None;
    }
    let mut divergence = 0.0;
    for (&a, &b) in p.iter().zip(q) {
        let (a, b) = (a as f64 / sp, b as f64 / sq);
        let m = (a + b) / 2.0;
        if a > 0.0 {
            divergence += 0.5 * a * (a / m).log2();
        }
        if b > 0.0 {
            divergence += 0.5 * b * (b / m).log2();
        }
    }
    Some(divergence.max(0.0).sqrt())
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
    fn buckets_keep_extremes_means_and_order() {
        let points: Vec<(f64, f64)> = (0..10_000)
            .map(|i| (i as f64, if i == 5_000 { 1_000.0 } else { (i % 2) as f64 }))
            .collect();
        let reduced = buckets(&points, 100);
        assert_eq!(reduced.len(), 100);
        assert!(reduced.iter().any(|b| b.hi == 1_000.0));
        assert!(
            reduced
                .iter()
                .all(|b| b.lo == 0.0 && b.lo <= b.mean && b.mean <= b.hi)
        );
        assert!((reduced[0].mean - 0.5).abs() < 0.02, "{:?}", reduced[0]);
        assert!(reduced.windows(2).all(|w| w[0].x < w[1].x));
        let short = buckets(&[(1.0, 2.0), (2.0, f64::NAN)], 100);
        assert_eq!(
            short,
            vec![Bucket {
                x: 1.0,
                lo: 2.0,
                mean: 2.0,
                hi: 2.0
            }]
        );
    }

    #[test]
    fn js_distance_bounds() {
        assert_eq!(js_distance(&[5, 5], &[1, 1]), Some(0.0));
        assert!((js_distance(&[1, 0], &[0, 1]).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(js_distance(&[0, 0], &[1, 1]), None);
    }
}
