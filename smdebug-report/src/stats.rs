//! The figures the report shows. Summaries (percentiles) and sketches are smdebug-profiler's
//! (`smdebug_analysis::stats`), the code the rules' details use; this module adds the charts'
//! downsampling (the distances between GPUs are LoadBalancing's). Non-finite values are left out
//! of every figure.

pub(crate) use smdebug_analysis::stats::Summary;

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

/// Slices (ordered by x) merged into at most `buckets` slices of equal x width, each the
/// lowest and highest of its members and the mean of their means; slices with non-finite
/// figures are dropped.
pub(crate) fn reslice(slices: &[Bucket], buckets: usize) -> Vec<Bucket> {
    let finite: Vec<Bucket> = slices
        .iter()
        .copied()
        .filter(|b| b.x.is_finite() && b.lo.is_finite() && b.mean.is_finite() && b.hi.is_finite())
        .collect();
    if finite.len() <= buckets || buckets == 0 {
        return finite;
    }
    let (first, last) = (finite[0].x, finite[finite.len() - 1].x);
    let width = (last - first) / buckets as f64;
    if width <= 0.0 {
        return finite;
    }
    let index = |x: f64| (((x - first) / width).floor() as usize).min(buckets - 1);
    let mut out: Vec<Bucket> = Vec::with_capacity(buckets);
    let mut start = 0;
    while start < finite.len() {
        let bucket = index(finite[start].x);
        let mut end = start + 1;
        while end < finite.len() && index(finite[end].x) == bucket {
            end += 1;
        }
        let slice = &finite[start..end];
        let n = slice.len() as f64;
        out.push(Bucket {
            x: slice.iter().map(|b| b.x).sum::<f64>() / n,
            lo: slice.iter().map(|b| b.lo).fold(f64::INFINITY, f64::min),
            mean: slice.iter().map(|b| b.mean).sum::<f64>() / n,
            hi: slice.iter().map(|b| b.hi).fold(f64::NEG_INFINITY, f64::max),
        });
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
