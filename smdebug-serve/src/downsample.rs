//! Server-side downsampling: no chart is sent more than [`MAX_POINTS`] points per series.
//!
//! Min-max decimation: the visible window is cut into `max_points / 2` equal time buckets and
//! each bucket sends its lowest and its highest point, in time order. Spikes survive (a single
//! high sample in a bucket is kept), and a zoomed window is cut again over its own range, so
//! zooming in gets finer detail down to the raw samples.

/// The most points one series is ever sent.
pub const MAX_POINTS: usize = 2_000;

/// An x coordinate: a time in µs (`u64`), a step, or seconds.
pub trait Coord: Copy {
    /// As a float, for bucketing.
    fn x(self) -> f64;
}

impl Coord for u64 {
    fn x(self) -> f64 {
        self as f64
    }
}

impl Coord for u32 {
    fn x(self) -> f64 {
        f64::from(self)
    }
}

impl Coord for f64 {
    fn x(self) -> f64 {
        self
    }
}

/// The points of `points` (ordered by `x`) with `from <= x <= to`, at most `max_points` of them
/// (clamped to `2..=MAX_POINTS`): all of them when they fit, else the minimum and maximum of
/// each of `max_points / 2` equal-width buckets of the window.
pub fn min_max<X: Coord>(
    points: &[(X, f64)],
    from: Option<f64>,
    to: Option<f64>,
    max_points: usize,
) -> Vec<(X, f64)> {
    let max_points = max_points.clamp(2, MAX_POINTS);
    let lo = from.map_or(0, |f| points.partition_point(|p| p.0.x() < f));
    let hi = to.map_or(points.len(), |t| points.partition_point(|p| p.0.x() <= t));
    let window = &points[lo..hi.max(lo)];
    if window.len() <= max_points {
        return window.to_vec();
    }
    let buckets = max_points / 2;
    let start = window[0].0.x();
    let end = window[window.len() - 1].0.x();
    let width = (end - start) / buckets as f64;
    let mut out = Vec::with_capacity(max_points);
    let mut i = 0;
    for b in 0..buckets {
        let limit = if b + 1 == buckets {
            f64::INFINITY
        } else {
            start + width * (b + 1) as f64
        };
        let first = i;
        while i < window.len() && window[i].0.x() < limit {
            i += 1;
        }
        if i == first {
            continue;
        }
        let bucket = &window[first..i];
        let (mut min_at, mut max_at) = (0, 0);
        for (k, p) in bucket.iter().enumerate() {
            // NaN never wins a comparison, so a NaN point is kept only if it is alone.
            if p.1 < bucket[min_at].1 {
                min_at = k;
            }
            if p.1 > bucket[max_at].1 {
                max_at = k;
            }
        }
        let (a, b) = (min_at.min(max_at), min_at.max(max_at));
        out.push(bucket[a]);
        if b != a {
            out.push(bucket[b]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_series_pass_unchanged_and_long_ones_are_bounded() {
        let short: Vec<(f64, f64)> = (0..100).map(|i| (i as f64, i as f64)).collect();
        assert_eq!(min_max(&short, None, None, MAX_POINTS), short);
        let long: Vec<(f64, f64)> = (0..1_000_000)
            .map(|i| (i as f64, (i % 97) as f64))
            .collect();
        let out = min_max(&long, None, None, 10_000_000);
        assert!(out.len() <= MAX_POINTS, "{}", out.len());
        assert!(out.len() >= MAX_POINTS - 2);
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn spikes_survive_and_zoom_gets_the_raw_points() {
        let mut long: Vec<(u32, f64)> = (0..100_000).map(|i| (i, 1.0)).collect();
        long[54_321].1 = 500.0;
        long[7].1 = -3.0;
        let out = min_max(&long, None, None, 200);
        assert!(out.len() <= 200);
        assert!(out.contains(&(54_321, 500.0)));
        assert!(out.contains(&(7, -3.0)));
        let zoom = min_max(&long, Some(54_300.0), Some(54_400.0), 200);
        assert_eq!(zoom.len(), 101);
        assert_eq!(zoom[0].0, 54_300);
        assert_eq!(zoom[100].0, 54_400);
    }

    #[test]
    fn an_empty_or_inverted_window_is_empty() {
        let pts: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 0.0)).collect();
        assert!(min_max(&pts, Some(20.0), Some(30.0), 100).is_empty());
        assert!(min_max(&pts, Some(5.0), Some(2.0), 100).is_empty());
        assert!(min_max::<f64>(&[], None, None, 100).is_empty());
    }
}
